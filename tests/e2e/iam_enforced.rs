//! The Lambda deployment with exactly the permissions its deployment code grants, on a
//! moto_server enforcing IAM (tests/e2e/support/iam.rs says how, and what moto does not
//! check): once with the grants of the Terraform module (infra/terraform/iam.tf), once
//! with those of the SAM template. One stack per flavour runs every scenario: pipeds
//! through `wisp bridge`, pipectl's APIService calls, disabling and re-enabling pipeds
//! (console and pipectl), disabling an API key, deleting old piped keys, console login
//! and logout through the `http` and `web-api` functions (gRPC-web and HTTP, as the
//! console's page sends them; no browser), every scheduled job through `jobs`, and
//! `wisp migrate` and `wisp import pipecd` into the AWS stores as the
//! operator (the IaC names no role for either: an administrator runs them), the imported
//! piped, API key, admin, applications, deployments, stage log and live state then served
//! by the functions under their own grants. No function may be refused a call, and a
//! revoked credential or session must be refused by another function within the
//! documented bound. A third test takes one grant away and sees the harness fail. With
//! the cache the IaC makes with IAM auth, the functions that use it look it up at init
//! under their grants, and without one of them init fails naming it.
//!
//! Needs `scripts/moto.sh start-iam` (scripts/test starts it on its own port and sets
//! WISP_TEST_MOTO_IAM_ENDPOINT and WISP_TEST_MOTO_IAM_OPERATOR), Terraform with the
//! hashicorp/aws provider and PyPI aws-sam-translator (scripts/iam-policies).

use crate::support;

use futures::FutureExt;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tonic::Code;
use wisp_proto::apiservice as api;
use wisp_proto::pipedservice as ps;
use wisp_proto::pipedservice::ListUnhandledCommandsRequest;
use wisp_proto::webservice as web;

use crate::import_pipecd as upstream;
use support::api::{registered_events_flow, setup_on, sync_application_flow};
use support::aws::AwsBackend;
use support::iam::{Flavour, IamStack};
use support::scenarios;
use support::web::{cookie_value, set_cookie};
use support::{QUICKSTART, Via, ok};

/// The documented bound on revocation across instances (tests/e2e/revocation.rs).
const BOUND: Duration = Duration::from_secs(30);

/// The scheduled jobs (shared/jobs `Job::ALL`), as EventBridge invokes them.
const JOBS: [&str; 5] = [
    "orphan-commands",
    "piped-stats",
    "plan-preview-outputs",
    "deployment-chains",
    "insights",
];

/// Calls `call` until it fails with UNAUTHENTICATED, within [`BOUND`].
pub(crate) async fn until_refused<F, Fut, T>(what: &str, mut call: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let started = Instant::now();
    loop {
        match call().await {
            Err(status) if status.code() == Code::Unauthenticated => {
                println!("{what}: refused after {} ms", started.elapsed().as_millis());
                return;
            }
            Err(status) => panic!("{what}: unexpected {status:?}"),
            Ok(_) => {}
        }
        assert!(
            started.elapsed() < BOUND,
            "{what}: still accepted after {} s",
            BOUND.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Calls `call` until it succeeds, within [`BOUND`].
async fn until_accepted<F, Fut, T>(what: &str, mut call: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let started = Instant::now();
    loop {
        match call().await {
            Ok(_) => return,
            Err(status) => assert!(
                started.elapsed() < BOUND,
                "{what}: still refused after {} s: {status:?}",
                BOUND.as_secs()
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Disabling (console and pipectl) and re-enabling pipeds, deleting a piped's old key,
/// disabling an API key, logging in and out: each change made by one function (web-api,
/// api, http) is recorded without a refused call and reaches another function
/// (piped-api, api, web-api) within the bound.
async fn revocations(stack: &IamStack) {
    let wisp = &stack.wisp;
    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let by_console = wisp.add_piped(QUICKSTART, "disabled-by-console");
    let by_pipectl = wisp.add_piped(QUICKSTART, "disabled-by-pipectl");
    let rotated = wisp.add_piped(QUICKSTART, "rotated");
    let new_key = wisp.rotate_key(&rotated);
    let admin_key = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let doomed_key = wisp.add_api_key(QUICKSTART, "doomed", "READ_WRITE");

    // Console login: the form to `http`, the calls to `web-api`.
    let login = wisp.login_static(QUICKSTART, &username, &password).await;
    let token = cookie_value(set_cookie(&login, "token").expect("a session")).to_string();
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    ok(console.get_me(web::GetMeRequest {}).await);
    // The console's list pages (web-api's index queries).
    ok(console.list_pipeds(web::ListPipedsRequest::default()).await);
    ok(console
        .list_applications(web::ListApplicationsRequest::default())
        .await);
    ok(console
        .list_deployments(web::ListDeploymentsRequest::default())
        .await);

    // Each credential verified (and cached) once on its function.
    let poll = ListUnhandledCommandsRequest::default;
    let mut p1 = wisp.piped_client(Via::Bridge, &by_console).await;
    let mut p2 = wisp.piped_client(Via::Bridge, &by_pipectl).await;
    let mut old = wisp.piped_client(Via::Bridge, &rotated).await;
    let mut new = wisp.piped_client(Via::Bridge, &new_key).await;
    let mut pipectl = wisp.api_key_client(Via::Bridge, &admin_key).await;
    let mut doomed = wisp.api_key_client(Via::Bridge, &doomed_key).await;
    ok(p1.list_unhandled_commands(poll()).await);
    ok(p2.list_unhandled_commands(poll()).await);
    ok(old.list_unhandled_commands(poll()).await);
    ok(new.list_unhandled_commands(poll()).await);
    ok(doomed
        .list_applications(api::ListApplicationsRequest::default())
        .await);

    // A piped disabled in the console (web-api), refused by piped-api; enabled again.
    ok(console
        .disable_piped(web::DisablePipedRequest {
            piped_id: by_console.id.clone(),
        })
        .await);
    stack.assert_no_access_denied("DisablePiped (console)");
    until_refused("piped disabled in the console", || {
        let mut c = p1.clone();
        async move { c.list_unhandled_commands(poll()).await }
    })
    .await;
    ok(console
        .enable_piped(web::EnablePipedRequest {
            piped_id: by_console.id.clone(),
        })
        .await);
    until_accepted("piped enabled again in the console", || {
        let c = wisp.piped_client(Via::Bridge, &by_console);
        async move { c.await.list_unhandled_commands(poll()).await }
    })
    .await;

    // A piped disabled by pipectl (api), refused by piped-api; enabled again.
    ok(pipectl
        .disable_piped(api::DisablePipedRequest {
            piped_id: by_pipectl.id.clone(),
        })
        .await);
    stack.assert_no_access_denied("DisablePiped (pipectl)");
    until_refused("piped disabled by pipectl", || {
        let mut c = p2.clone();
        async move { c.list_unhandled_commands(poll()).await }
    })
    .await;
    ok(pipectl
        .enable_piped(api::EnablePipedRequest {
            piped_id: by_pipectl.id.clone(),
        })
        .await);
    until_accepted("piped enabled again by pipectl", || {
        let c = wisp.piped_client(Via::Bridge, &by_pipectl);
        async move { c.await.list_unhandled_commands(poll()).await }
    })
    .await;

    // Old keys deleted in the console: the old key refused, the new one not.
    ok(console
        .delete_old_piped_keys(web::DeleteOldPipedKeysRequest {
            piped_id: rotated.id.clone(),
        })
        .await);
    stack.assert_no_access_denied("DeleteOldPipedKeys (console)");
    until_refused("deleted old piped key", || {
        let mut c = old.clone();
        async move { c.list_unhandled_commands(poll()).await }
    })
    .await;
    ok(new.list_unhandled_commands(poll()).await);

    // An API key disabled in the console, refused by api. (Neither upstream nor Wisp can
    // enable an API key again: a new one is made instead.)
    ok(console
        .disable_api_key(web::DisableApiKeyRequest {
            id: doomed_key.id.clone(),
        })
        .await);
    stack.assert_no_access_denied("DisableAPIKey (console)");
    until_refused("disabled API key", || {
        let mut c = doomed.clone();
        async move {
            c.list_applications(api::ListApplicationsRequest::default())
                .await
        }
    })
    .await;

    // Logout through `http`: the session refused by web-api.
    let cookie = format!("token={token}");
    let resp = wisp
        .http_post("/auth/logout", &[("cookie", cookie.as_str())], Vec::new())
        .await;
    assert!(resp.status.is_redirection(), "logout: {resp:?}");
    stack.assert_no_access_denied("logout");
    until_refused("logged-out session", || {
        let mut c = console.clone();
        async move { c.get_me(web::GetMeRequest {}).await }
    })
    .await;
}

/// Every scheduled job, invoked as EventBridge does.
fn jobs(stack: &IamStack) {
    let front = stack.wisp.lambda().expect("running as Lambda functions");
    for job in JOBS {
        let report = front
            .invoke("wisp-jobs", &serde_json::json!({"job": job}))
            .unwrap_or_else(|e| panic!("job {job} failed: {e}\n{}", front.log_text("wisp-jobs")));
        let report: serde_json::Value = serde_json::from_slice(&report).expect("a JSON report");
        assert_eq!(report["job"], job, "report: {report}");
        assert_eq!(report["finished"], true, "job {job}: {report}");
        stack.assert_no_access_denied(&format!("job {job}"));
    }
}

/// `wisp migrate` from a `wisp serve` data directory into AWS stores (a table and bucket
/// of their own, made by `wisp aws init`), as the operator: an administrator, moto's
/// `wisp-operator`, allowed everything (no function runs it).
fn migrate(stack: &IamStack) {
    let source = support::empty_data_dir();
    let add = support::run_cli(source.path(), &["project", "add", "migrated"]);
    assert_eq!(add.code, 0, "{add:?}");
    let configs = support::empty_data_dir();
    let from = configs.path().join("from.yaml");
    std::fs::write(
        &from,
        format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore:\n    type: LOCAL\n    config:\n      path: {}\n  filestore:\n    type: LOCAL\n    config:\n      dir: {}\n",
            source.path().join("wisp.db").display(),
            source.path().join("filestore").display()
        ),
    )
    .expect("write the source config");
    let env = stack.wisp.aws().expect("AWS stores").env.clone();
    let dest_dir = support::empty_data_dir();
    let dest = AwsBackend::new(&env, dest_dir.path(), None);
    let init = dest.init(dest_dir.path());
    assert_eq!(
        init.code, 0,
        "wisp aws init (as the operator) failed: {init:?}"
    );
    let out = support::run_cli_with(
        configs.path(),
        &[
            "migrate",
            "--from",
            from.to_str().expect("utf-8"),
            "--to",
            dest.config_path.to_str().expect("utf-8"),
            "--json",
        ],
        &[],
        &dest.env(),
    );
    assert_eq!(
        out.code, 0,
        "wisp migrate (as the operator) failed: {out:?}"
    );
}

/// `wisp import pipecd` from an upstream control plane (tests/e2e/import_pipecd.rs's
/// MySQL rows and filestore) into the deployment's own stores, as the operator (the IaC
/// gives no role to it: an administrator runs it); then the functions under their own
/// grants serve what was imported: the piped's old key through `wisp bridge`
/// (piped-api), the API key (api), the project's admin and its applications,
/// deployments, stage log and live state in the console (http, web-api).
async fn import_pipecd(stack: &IamStack) {
    let Some(url) = std::env::var(upstream::MYSQL_VAR)
        .ok()
        .filter(|v| !v.is_empty())
    else {
        support::aws::skip::<()>(
            "iam_enforced import",
            &format!("{} is not set", upstream::MYSQL_VAR),
        );
        return;
    };
    let wisp = &stack.wisp;
    let work = tempfile::tempdir().expect("tempdir");
    let database = upstream::seed_mysql(&url).await;
    let files = work.path().join("bucket");
    upstream::seed_filestore(&files);
    let from = upstream::upstream_config(work.path(), &url, &database, &files);
    let backend = wisp.aws().expect("AWS stores");
    let out = support::run_cli_with(
        work.path(),
        &[
            "import",
            "pipecd",
            "--from",
            from.to_str().expect("utf-8"),
            "--json",
        ],
        &backend.store_args(),
        &backend.env(),
    );
    assert_eq!(
        out.code, 0,
        "wisp import pipecd (as the operator) failed: {out:?}"
    );
    let report: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(report["counts_match"], true, "{report}");
    assert_eq!(report["objects"]["destination"], 3, "{report}");

    // The piped keeps its id and key, through wisp bridge (piped-api).
    let piped = support::Piped {
        project: upstream::PROJECT.into(),
        id: upstream::PIPED_ID.into(),
        key: upstream::PIPED_KEY.into(),
    };
    let mut client = wisp.piped_client(Via::Bridge, &piped).await;
    let apps = ok(client
        .list_applications(ps::ListApplicationsRequest {})
        .await);
    assert_eq!(
        apps.applications
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        [upstream::APP_ID]
    );
    let running = ok(client
        .list_not_completed_deployments(ps::ListNotCompletedDeploymentsRequest::default())
        .await);
    assert_eq!(
        running
            .deployments
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        [upstream::DEPLOYMENT_ID]
    );

    // pipectl's API key (api).
    let mut pipectl = wisp
        .api_client(Via::Bridge, Some(&format!("API-KEY {}", upstream::API_KEY)))
        .await;
    let listed = ok(pipectl
        .list_applications(api::ListApplicationsRequest::default())
        .await);
    assert_eq!(listed.applications.len(), 1, "{listed:?}");
    let deployments = ok(pipectl
        .list_deployments(api::ListDeploymentsRequest::default())
        .await);
    assert_eq!(deployments.deployments.len(), 1, "{deployments:?}");

    // The console (http, web-api): the imported admin, the lists, the stage log and the
    // live state read from the imported objects.
    let login = wisp
        .login_static(upstream::PROJECT, "admin", upstream::ADMIN_PASSWORD)
        .await;
    let token = cookie_value(
        set_cookie(&login, "token")
            .unwrap_or_else(|| panic!("no session for the imported admin: {login:?}")),
    )
    .to_string();
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let apps = ok(console
        .list_applications(web::ListApplicationsRequest::default())
        .await);
    assert_eq!(
        apps.applications
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        [upstream::APP_ID]
    );
    let deployments = ok(console
        .list_deployments(web::ListDeploymentsRequest::default())
        .await);
    assert_eq!(
        deployments
            .deployments
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        [upstream::DEPLOYMENT_ID]
    );
    let log = ok(console
        .get_stage_log(web::GetStageLogRequest {
            deployment_id: upstream::DEPLOYMENT_ID.into(),
            stage_id: upstream::STAGE_ID.into(),
            retried_count: 0,
            offset_index: 0,
        })
        .await);
    assert_eq!(
        log.blocks
            .iter()
            .map(|b| b.log.as_str())
            .collect::<Vec<_>>(),
        ["Applying 3 manifests", "deployment.apps/web configured"]
    );
    let live = ok(console
        .get_application_live_state(web::GetApplicationLiveStateRequest {
            application_id: upstream::APP_ID.into(),
        })
        .await);
    assert_eq!(
        live.snapshot.map(|s| s.application_id).as_deref(),
        Some(upstream::APP_ID)
    );
    stack.assert_no_access_denied("the imported data");
}

/// Every scenario on one stack, then what the calls tell about the grants.
async fn every_scenario(flavour: Flavour, test: &str) {
    let Some(stack) = IamStack::start(test, flavour, |_| {}) else {
        return;
    };
    scenarios::deployment_lifecycle_on(&stack.wisp, Via::Bridge).await;
    stack.assert_no_access_denied("pipeds through wisp bridge");
    jobs(&stack);
    revocations(&stack).await;
    migrate(&stack);
    import_pipecd(&stack).await;
    let stack = pipectl_flows(stack).await;
    stack.assert_no_access_denied("pipectl's calls");
    stack.assert_calls_within_grants();
    let front = stack.wisp.lambda().expect("running as Lambda functions");
    for function in stack.derived.functions.keys() {
        assert!(
            front.invocations(&format!("wisp-{function}")) > 0,
            "no scenario reached {function}"
        );
    }
    // Least privilege, measured: the grants no call used, each of which must be one the
    // header of infra/terraform/iam.tf says why it stays.
    let unused = stack.unused_grants();
    println!(
        "{flavour:?}: {} granted (function, action, resource) that no scenario used:",
        unused.len()
    );
    for (function, action, resource, sid) in &unused {
        println!("  {function}: {action} on {resource} ({sid})");
    }
    let unexplained: Vec<_> = unused
        .iter()
        .filter(|(function, action, resource, _)| {
            let stays = action.starts_with("logs:")
                || (function == "http"
                    && action == "s3:GetObject"
                    && resource.ends_with(&format!(
                        "/{}{}*",
                        stack.derived.prefix,
                        support::lambda::WEB_PREFIX
                    )))
                || (function == "jobs" && action == "dynamodb:PutItem");
            !stays
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "{flavour:?}: grants no scenario uses (remove them, or say in iam.tf why they stay): \
         {unexplained:?}"
    );
}

#[tokio::test]
async fn every_scenario_with_the_terraform_grants() {
    every_scenario(
        Flavour::Terraform,
        "every_scenario_with_the_terraform_grants",
    )
    .await;
}

#[tokio::test]
async fn every_scenario_with_the_sam_grants() {
    every_scenario(Flavour::Sam, "every_scenario_with_the_sam_grants").await;
}

/// The harness can fail: without web-api's grant to write the revocations object, the
/// revocation scenario fails (the console's disable answers that the revocation could not
/// be shared), and the call moto refused is web-api's PutObject on that object.
#[tokio::test]
async fn a_missing_grant_fails_the_scenario() {
    let Some(stack) = IamStack::start(
        "a_missing_grant_fails_the_scenario",
        Flavour::Terraform,
        |derived| derived.remove_grant("web-api", "s3:PutObject", "revocations.json"),
    ) else {
        return;
    };
    let failure = std::panic::AssertUnwindSafe(revocations(&stack))
        .catch_unwind()
        .await
        .expect_err("the scenario must fail without the grant");
    let message = failure.downcast::<String>().map(|m| *m).unwrap_or_default();
    assert!(
        message.contains("revocation could not be shared") || message.contains("AccessDenied"),
        "the scenario must fail on the unrecorded revocation: {message}"
    );
    let denied = stack.access_denied();
    assert!(
        denied
            .iter()
            .any(|d| d.starts_with("web-api: s3:PutObject") && d.contains("revocations.json")),
        "moto must have refused web-api's PutObject on the revocations object: {denied:?}"
    );
}

/// One call through each function, so that each has started (and run its init).
async fn touch_every_function(stack: &IamStack) {
    let wisp = &stack.wisp;
    let front = wisp.lambda().expect("running as Lambda functions");
    let piped = wisp.add_piped(QUICKSTART, "cache-lookup");
    let mut client = wisp.piped_client(Via::Bridge, &piped).await;
    ok(client
        .list_unhandled_commands(ListUnhandledCommandsRequest::default())
        .await);
    let key = wisp.add_api_key(QUICKSTART, "cache-lookup", "READ_WRITE");
    let mut pipectl = wisp.api_key_client(Via::Bridge, &key).await;
    ok(pipectl
        .list_applications(api::ListApplicationsRequest::default())
        .await);
    let (username, password) = front.admin.clone().expect("the static admin");
    let login = wisp.login_static(QUICKSTART, &username, &password).await;
    let token = cookie_value(set_cookie(&login, "token").expect("a session")).to_string();
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    ok(console.get_me(web::GetMeRequest {}).await);
    // Not piped-stats: it reads the stats the cache holds, and there is no Redis behind
    // moto's endpoint.
    let report = front
        .invoke("wisp-jobs", &serde_json::json!({"job": "orphan-commands"}))
        .unwrap_or_else(|e| panic!("job failed: {e}\n{}", front.log_text("wisp-jobs")));
    let report: serde_json::Value = serde_json::from_slice(&report).expect("a JSON report");
    assert_eq!(report["finished"], true, "{report}");
}

/// The cache the IaC makes with IAM auth (`redis_auth = "iam"`, `RedisAuth=iam`), named
/// by id in the config: each function that uses it looks it up at init through moto's
/// ElastiCache under its own grants (DescribeReplicationGroups, DescribeUsers), and
/// exactly those functions are granted the lookup and `elasticache:Connect`; the others
/// keep their cache in process and call no ElastiCache API. (moto serves no serverless
/// caches: infra/terraform/tests checks the serverless grants in the plan.)
async fn cache_lookup_with_the_grants(flavour: Flavour, test: &str) {
    let Some(stack) = IamStack::start_with_cache(test, flavour, Some("node-based"), |_| {}) else {
        return;
    };
    let cache = stack.derived.cache.clone().expect("derived with the cache");
    touch_every_function(&stack).await;
    stack.assert_no_access_denied("the cache's lookup at init");
    stack.assert_calls_within_grants();

    let calls = stack.function_calls();
    let callers = |action: &str, resource: &str| -> BTreeSet<String> {
        calls
            .iter()
            .filter(|(_, c)| c.action == action && c.resource == resource && c.status == 200)
            .map(|(f, _)| f.clone())
            .collect()
    };
    let granted = |action: &str| -> BTreeSet<String> {
        stack
            .derived
            .functions
            .iter()
            .filter(|(_, g)| {
                g.statements()
                    .iter()
                    .any(|s| s.actions.iter().any(|a| a == action))
            })
            .map(|(f, _)| f.clone())
            .collect()
    };
    let in_process: BTreeSet<String> = stack
        .derived
        .functions
        .iter()
        .filter(|(_, g)| g.env.get("WISP_CACHE").map(String::as_str) == Some("MEMORY"))
        .map(|(f, _)| f.clone())
        .collect();
    let users = granted("elasticache:Connect");
    assert_eq!(
        users,
        BTreeSet::from(["api", "jobs", "piped-api", "web-api"].map(String::from)),
        "{flavour:?}: the functions that use the cache"
    );
    assert!(
        users.is_disjoint(&in_process)
            && users.len() + in_process.len() == stack.derived.functions.len(),
        "{flavour:?}: every function either uses the cache ({users:?}) or keeps its own \
         ({in_process:?})"
    );
    assert_eq!(
        callers("elasticache:DescribeReplicationGroups", &cache.arn),
        users,
        "{flavour:?}: each function that uses the cache looked it up, and no other"
    );
    assert_eq!(
        callers("elasticache:DescribeUsers", &cache.user_arn),
        users,
        "{flavour:?}: each function that uses the cache read its user, and no other"
    );
    for function in &users {
        let grants = stack.derived.grants(function).statements();
        for resource in [&cache.arn, &cache.user_arn] {
            assert!(
                grants
                    .iter()
                    .any(|s| s.actions.iter().any(|a| a == "elasticache:Connect")
                        && s.resources.contains(resource)),
                "{flavour:?}: {function} may not connect to {resource}"
            );
        }
    }
}

#[tokio::test]
async fn cache_lookup_with_the_terraform_grants() {
    cache_lookup_with_the_grants(Flavour::Terraform, "cache_lookup_with_the_terraform_grants")
        .await;
}

#[tokio::test]
async fn cache_lookup_with_the_sam_grants() {
    cache_lookup_with_the_grants(Flavour::Sam, "cache_lookup_with_the_sam_grants").await;
}

/// Without piped-api's grant to read the cache's user, piped-api's init fails (the stack
/// does not start) with the one-line error naming the permission to grant, and the
/// cause moto gave.
fn a_missing_cache_grant_fails_init(flavour: Flavour, test: &str) {
    if std::env::var(support::iam::ENDPOINT_VAR).is_err() {
        // IamStack::start says why it skips.
        assert!(IamStack::start(test, flavour, |_| {}).is_none());
        return;
    }
    let failure = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        IamStack::start_with_cache(test, flavour, Some("node-based"), |derived| {
            let user = derived.cache.clone().expect("the cache").user_arn;
            derived.remove_grant("piped-api", "elasticache:DescribeUsers", &user);
        })
    }))
    .map(|_| ())
    .expect_err("piped-api must not start without its grant");
    let message = failure.downcast::<String>().map(|m| *m).unwrap_or_default();
    assert!(
        message.contains("wisp-piped-api exited during init"),
        "{flavour:?}: the stack must fail on piped-api's init: {message}"
    );
    let line = message
        .lines()
        .find(|l| l.contains("\"init failed\""))
        .unwrap_or_else(|| panic!("{flavour:?}: no init failure logged: {message}"));
    let logged: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
    assert_eq!(logged["function"], "piped-api", "{logged}");
    let error = logged["error"].as_str().expect("the error");
    for wanted in [
        "DescribeUsers was refused (AccessDenied): grant elasticache:DescribeUsers on the user ",
        "-app to this function's role",
    ] {
        assert!(
            error.contains(wanted),
            "{flavour:?}: {error:?} lacks {wanted:?}"
        );
    }
    assert!(!error.contains('\n'), "{error:?}");
}

#[test]
fn a_missing_cache_grant_fails_init_with_terraform() {
    a_missing_cache_grant_fails_init(
        Flavour::Terraform,
        "a_missing_cache_grant_fails_init_with_terraform",
    );
}

#[test]
fn a_missing_cache_grant_fails_init_with_sam() {
    a_missing_cache_grant_fails_init(Flavour::Sam, "a_missing_cache_grant_fails_init_with_sam");
}
/// The Terraform module's Fargate task (`compute = "fargate"`, fargate.tf): the container
/// image (support/image.rs: built, pushed, pulled back by digest, unpacked) run in runc as
/// the task definition as `terraform plan` makes it says (scripts/iam-policies
/// terraform-fargate reads it from the plan, with the task role's policy): the image's
/// entrypoint and the task's command, its environment, user and read-only root
/// filesystem, holding exactly the task role's policy on the IAM-enforcing moto. Where the
/// image cannot be built (as tests/e2e/image.rs skips), this build's `wisp serve` runs the
/// same command and environment, after a note. The upstream protocol's checks then pass
/// over native gRPC, straight to the task as the ALB's gRPC target group sends them: every
/// PipedService and APIService call needs credentials, a deployment's whole life, large
/// messages, pipectl's flows, a small simulated fleet; the task's port agrees with its port
/// mapping and the target groups', and the load balancer's two health checks, as planned,
/// answer as the target groups expect. No call may be refused, and every call stays within
/// the grants.
#[tokio::test]
async fn the_fargate_task_with_its_task_role() {
    let Some(stack) = IamStack::start(
        "the_fargate_task_with_its_task_role",
        Flavour::TerraformFargate,
        |_| {},
    ) else {
        return;
    };
    assert!(stack.wisp.lambda().is_none(), "served by wisp serve");
    if let Some(image) = &stack.image {
        eprintln!("the task runs from the image {image}");
    }
    let task = stack.derived.grants("task").clone();
    assert_eq!(
        task.env.get("WISP_NO_JOBS").map(String::as_str),
        Some("true")
    );

    scenarios::every_rpc_requires_credentials_on(&stack.wisp, Via::Grpc).await;
    scenarios::deployment_lifecycle_on(&stack.wisp, Via::Grpc).await;
    scenarios::large_messages_on(&stack.wisp, Via::Grpc).await;
    stack.assert_no_access_denied("pipeds over native gRPC");

    // Where the image listens agrees with what ECS and the load balancer expect: the
    // task's WISP_ADDR, its one port mapping, both target groups' port (their health
    // checks on the traffic port), and no container health check (the image has no
    // shell or HTTP client to run one with).
    let container = &task.container;
    let mappings = container["portMappings"].as_array().expect("port mappings");
    assert_eq!(mappings.len(), 1, "{container}");
    let port = mappings[0]["containerPort"].as_u64().expect("the port");
    assert_eq!(mappings[0]["protocol"], "tcp", "{container}");
    let listen: std::net::SocketAddr = task.env["WISP_ADDR"].parse().expect("WISP_ADDR");
    assert!(listen.ip().is_unspecified(), "{listen}: every interface");
    assert_eq!(
        u64::from(listen.port()),
        port,
        "WISP_ADDR and the port mapping"
    );
    assert!(container["healthCheck"].is_null(), "{container}");
    for group in ["grpc", "web"] {
        let tg = &task.target_groups[group];
        assert_eq!(tg["port"].as_u64(), Some(port), "{group}: {tg}");
        assert_eq!(tg["health_check"]["port"], "traffic-port", "{group}: {tg}");
    }
    // `wisp serve` from the image, with the task's environment, listens on WISP_ADDR.
    let mut help = match &stack.image {
        Some(_) => {
            let image = support::image::image("the_fargate_task_with_its_task_role")
                .expect("the image the task runs");
            support::image::chroot_wisp(image)
        }
        None => support::wisp_command(),
    };
    let help = support::image::run(
        help.env("WISP_ADDR", &task.env["WISP_ADDR"])
            .args(["serve", "--help"]),
    );
    assert!(
        help.contains(&format!("[env: WISP_ADDR={listen}]")),
        "{help}"
    );

    // The load balancer's health checks as planned: the HTTP target group's (HTTP/1.1, a
    // status) and the gRPC one's (a call whose grpc-status must match).
    let web = &task.target_groups["web"];
    assert_eq!(web["protocol_version"], "HTTP1");
    let (status, _) = stack
        .wisp
        .http_get(web["health_check"]["path"].as_str().expect("a path"))
        .await;
    assert_eq!(
        status.as_str(),
        web["health_check"]["matcher"],
        "the HTTP target group's health check"
    );
    let grpc_group = &task.target_groups["grpc"];
    assert_eq!(grpc_group["protocol_version"], "GRPC");
    let path = grpc_group["health_check"]["path"]
        .as_str()
        .expect("a path")
        .to_string();
    let matcher: i32 = grpc_group["health_check"]["matcher"]
        .as_str()
        .expect("a matcher")
        .parse()
        .expect("one gRPC code");
    let mut grpc = tonic::client::Grpc::new(stack.wisp.transport(Via::Grpc, None).await);
    grpc.ready().await.expect("ready");
    let health = grpc
        .unary(
            tonic::Request::new(()),
            http::uri::PathAndQuery::try_from(path).expect("a gRPC path"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await;
    assert_eq!(
        health.map_or_else(|s| s.code(), |_| Code::Ok),
        Code::from_i32(matcher),
        "the gRPC target group's health check"
    );

    let stack = pipectl_flows(stack).await;
    stack.assert_no_access_denied("pipectl's calls over native gRPC");

    // A small fleet (`wisp simulate`: upstream pipeds' cadence and deployments) against the
    // task, over native gRPC: no call fails, none is refused a grant.
    let target = format!("http://{}", stack.wisp.addr());
    let fleet = stack.wisp.cli(&[
        "simulate",
        "--target",
        &target,
        "--pipeds",
        "5",
        "--apps-per-piped",
        "2",
        "--duration",
        "10s",
        "--deploy-rate",
        "360",
        "--seed",
        "29",
        "--compute",
        "fargate",
        "--json",
    ]);
    assert_eq!(fleet.code, 0, "wisp simulate against the task: {fleet:?}");
    let report: serde_json::Value =
        serde_json::from_str(fleet.stdout.trim()).expect("the simulation's report");
    assert_eq!(report["errors"], 0, "{report}");
    assert!(
        report["requests"].as_u64().unwrap_or_default() > 0,
        "{report}"
    );
    stack.assert_no_access_denied("a simulated fleet");
    stack.assert_calls_within_grants();
    assert!(
        !stack.function_calls().is_empty(),
        "the task made its AWS calls with the task user's keys"
    );
}

/// pipectl's flows (an application synced, events registered) on the stack's deployment,
/// with its grants: the flows' set-up takes the `Wisp`, so the stack is taken apart and
/// put back around them.
async fn pipectl_flows(stack: IamStack) -> IamStack {
    let IamStack {
        wisp,
        derived,
        recorder,
        functions_by_key,
        operator_key,
        image,
    } = stack;
    let mut setup = setup_on(wisp).await;
    sync_application_flow(&mut setup).await;
    registered_events_flow(&mut setup).await;
    IamStack {
        wisp: setup.wisp,
        derived,
        recorder,
        functions_by_key,
        operator_key,
        image,
    }
}
