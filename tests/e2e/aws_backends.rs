//! The end-to-end suites with `wisp serve` on the AWS backends: state in DynamoDB
//! (DynamoDB Local) and S3 (moto_server), optionally a Redis cache, the config and the
//! encryption key in Secrets Manager (moto), all set up with `wisp aws init`.
//!
//! The scenarios are the ones the embedded backends run (tests/e2e/support/scenarios.rs and
//! tests/e2e/support/api.rs), unchanged; what only AWS shows is here: Redis dying mid-run,
//! `wisp aws init`, and `--config-secret` / `--encryption-key-secret`.
//!
//! Needs `WISP_TEST_DYNAMODB_ENDPOINT` and `WISP_TEST_MOTO_ENDPOINT` (`scripts/test` sets
//! them); unset, the tests print a note and pass, unless `WISP_REQUIRE_AWS_TESTS=1`.

use crate::support;

use std::time::{Duration, Instant};

use tonic::Code;
use wisp_proto::apiservice as api;
use wisp_proto::pipedservice as ps;

use support::api::{Setup, registered_events_flow, setup_on, sync_application_flow};
use support::aws::{AwsBackend, AwsEnv, RedisServer, unique_name};
use support::fixtures;
use support::scenarios::{self, parse_stage_log};
use support::{QUICKSTART, Via, Wisp, assert_status, ok, run_cli_with};

#[tokio::test]
async fn deployment_lifecycle() {
    let Some(wisp) = Wisp::start_aws("deployment_lifecycle") else {
        return;
    };
    scenarios::deployment_lifecycle_on(&wisp, Via::Grpc).await;

    // The metrics see the AWS stores: operations by backend, and the capacity DynamoDB
    // reported for its requests.
    let m = crate::metrics::Scrape::from(&wisp).await;
    let ops = |store: &str, backend: &str| {
        m.sum(
            "wisp_store_operations_total",
            &[("store", store), ("backend", backend), ("outcome", "ok")],
        )
    };
    assert!(ops("datastore", "dynamodb") > 0.0);
    assert!(ops("filestore", "s3") > 0.0);
    assert!(
        m.value(
            "wisp_dynamodb_consumed_capacity_units",
            &[("operation", "GetItem"), ("capacity", "read")]
        ) > 0.0,
        "no capacity reported for GetItem"
    );
}

#[tokio::test]
async fn deployment_lifecycle_with_redis_over_grpc_web() {
    let test = "deployment_lifecycle_with_redis_over_grpc_web";
    let Some(env) = AwsEnv::from_env(test) else {
        return;
    };
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let wisp = Wisp::start_aws_on(&env, Some(&redis.url()), |_| {});
    scenarios::deployment_lifecycle_on(&wisp, Via::GrpcWeb).await;
    assert!(
        redis.key_count() > 0,
        "the server never used its Redis cache"
    );
}

#[tokio::test]
async fn auth_cases() {
    let Some(wisp) = Wisp::start_aws("auth_cases") else {
        return;
    };
    scenarios::auth_cases_on(&wisp, Via::Grpc).await;
}

#[tokio::test]
async fn every_rpc_requires_credentials() {
    let Some(wisp) = Wisp::start_aws("every_rpc_requires_credentials") else {
        return;
    };
    scenarios::every_rpc_requires_credentials_on(&wisp, Via::GrpcWeb).await;
}

#[tokio::test]
async fn large_messages() {
    let Some(wisp) = Wisp::start_aws("large_messages") else {
        return;
    };
    scenarios::large_messages_on(&wisp, Via::Grpc).await;
}

#[tokio::test]
async fn api_sync_application_reaches_the_piped() {
    let Some(wisp) = Wisp::start_aws("api_sync_application_reaches_the_piped") else {
        return;
    };
    sync_application_flow(&mut setup_on(wisp).await).await;
}

#[tokio::test]
async fn api_registered_events_reach_the_piped() {
    let Some(wisp) = Wisp::start_aws("api_registered_events_reach_the_piped") else {
        return;
    };
    registered_events_flow(&mut setup_on(wisp).await).await;
}

// ---------------------------------------------------------------------------------------
// Redis going away

/// How long a call may take with Redis gone before the test calls it hung: every cache
/// call is bounded (250 ms) and a call makes only a few, so it answers in about a
/// second; the deadline is generous for a loaded machine, and only a call that waits on
/// the dead cache for good misses it. How long the calls take is printed (timing belongs
/// in benches/, not in a pass/fail bound).
const HUNG: Duration = Duration::from_secs(60);

/// Runs `call`, which must answer before [`HUNG`].
async fn timed<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    let started = Instant::now();
    let out = tokio::time::timeout(HUNG, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung with Redis down"));
    println!("{what} with Redis down: {:?}", started.elapsed());
    out
}

async fn report_stat(s: &mut Setup) {
    ok(s.piped_client
        .report_stat(ps::ReportStatRequest {
            piped_stats: b"# TYPE up gauge\nup 1\n".to_vec(),
        })
        .await);
}

async fn report_logs(s: &mut Setup, indexes: &[i64]) {
    let blocks = indexes
        .iter()
        .map(|&i| fixtures::log_block(i, &format!("line {i}")))
        .collect();
    ok(s.piped_client
        .report_stage_logs(ps::ReportStageLogsRequest {
            deployment_id: s.deployment.clone(),
            stage_id: "s1".into(),
            retried_count: 0,
            blocks,
        })
        .await);
}

async fn unhandled_commands(s: &mut Setup) -> Vec<String> {
    let mut ids: Vec<String> = ok(s
        .piped_client
        .list_unhandled_commands(ps::ListUnhandledCommandsRequest {})
        .await)
    .commands
    .into_iter()
    .map(|c| c.id)
    .collect();
    ids.sort();
    ids
}

/// The stage log of the setup's deployment as pipectl reads it, and as stored in S3.
async fn stage_log_indexes(s: &Setup) -> (Vec<i64>, Vec<i64>) {
    let mut pipectl = s.wisp.api_key_client(Via::Grpc, &s.rw).await;
    let logs = ok(pipectl
        .list_stage_logs(api::ListStageLogsRequest {
            deployment_id: s.deployment.clone(),
        })
        .await)
    .stage_logs;
    let via_api: Vec<i64> = logs["s1"].blocks.iter().map(|b| b.index).collect();
    let path = format!("log/{}/s1/0.txt", s.deployment);
    let text = s
        .wisp
        .filestore_object(&path)
        .unwrap_or_else(|| panic!("no stage log {path} in S3"));
    let stored = parse_stage_log(&text)
        .0
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    (via_api, stored)
}

/// Redis is killed while pipeds are working: they see no error and no slowdown beyond the
/// cache timeout, stage logs written meanwhile are all kept, piped online status and API
/// keys keep working; once Redis is back (empty) the cache fills again.
#[tokio::test]
async fn pipeds_see_no_error_when_redis_stops() {
    let test = "pipeds_see_no_error_when_redis_stops";
    let Some(env) = AwsEnv::from_env(test) else {
        return;
    };
    let Some(mut redis) = RedisServer::start(test) else {
        return;
    };
    // Deployment dep-1 (stage s1 with log block 1) and a SYNC_APPLICATION command.
    let mut s = setup_on(Wisp::start_aws_on(&env, Some(&redis.url()), |_| {})).await;
    let mut pipectl = s.wisp.api_key_client(Via::Grpc, &s.rw).await;

    // Redis up: the usual traffic, which fills the cache.
    report_stat(&mut s).await;
    report_logs(&mut s, &[2]).await;
    assert_eq!(unhandled_commands(&mut s).await, vec![s.command.clone()]);
    let preview = ok(pipectl
        .request_plan_preview(api::RequestPlanPreviewRequest {
            repo_remote_url: support::api::REMOTE.into(),
            head_branch: "feature".into(),
            head_commit: "abc123".into(),
            base_branch: "main".into(),
            timeout: 300,
        })
        .await)
    .commands;
    let results = || api::GetPlanPreviewResultsRequest {
        commands: preview.clone(),
        command_handle_timeout: 0,
    };
    // The piped is online (it reported its stat): the preview is awaited.
    assert_status(
        pipectl.get_plan_preview_results(results()).await,
        Code::NotFound,
        "Waiting for result",
    );
    assert_eq!(stage_log_indexes(&s).await, (vec![1, 2], vec![1, 2]));
    let cached = redis.key_count();
    assert!(cached > 0, "the server never used its Redis cache");

    // Redis dies mid-run.
    redis.kill();
    let mut expected_commands = vec![s.command.clone(), preview[0].clone()];
    expected_commands.sort();
    for round in 0..3 {
        timed("ReportStat", report_stat(&mut s)).await;
        timed(
            "ReportStageLogs",
            report_logs(&mut s, &[3 + round, 3 + round]),
        )
        .await;
        let unhandled = timed("ListUnhandledCommands", unhandled_commands(&mut s)).await;
        assert_eq!(unhandled, expected_commands, "round {round}");
    }
    // Logs written while Redis was down are all there, read through the API and in S3.
    let everything: Vec<i64> = (1..=5).collect();
    assert_eq!(
        stage_log_indexes(&s).await,
        (everything.clone(), everything.clone())
    );
    // The server did notice (and so really ran without its cache).
    let log = s.wisp.server().log_text();
    assert!(
        log.contains("cache get failed") || log.contains("cache hash get failed"),
        "no cache failure in the server log:\n{log}"
    );
    // Online status comes from the datastore when the cache is gone.
    assert_status(
        timed(
            "GetPlanPreviewResults",
            pipectl.get_plan_preview_results(results()),
        )
        .await,
        Code::NotFound,
        "Waiting for result",
    );
    // A command handled meanwhile leaves the unhandled list; API keys keep working.
    timed(
        "ReportCommandHandled",
        s.piped_client
            .report_command_handled(ps::ReportCommandHandledRequest {
                command_id: s.command.clone(),
                status: wisp_proto::model::CommandStatus::CommandSucceeded as i32,
                handled_at: fixtures::now(),
                ..Default::default()
            }),
    )
    .await
    .unwrap_or_else(|e| panic!("ReportCommandHandled with Redis down: {e:?}"));
    assert_eq!(unhandled_commands(&mut s).await, vec![preview[0].clone()]);
    let fresh_key = s.wisp.add_api_key(QUICKSTART, "while-down", "READ_ONLY");
    let mut viewer = s.wisp.api_key_client(Via::GrpcWeb, &fresh_key).await;
    ok(timed(
        "GetDeployment",
        viewer.get_deployment(api::GetDeploymentRequest {
            deployment_id: s.deployment.clone(),
        }),
    )
    .await);

    // Redis is back, empty: calls keep working and the cache fills again.
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis.key_count() == 0 {
        assert!(
            Instant::now() < deadline,
            "the server did not use Redis again within 30 s"
        );
        report_stat(&mut s).await;
        stage_log_indexes(&s).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ok(s.piped_client
        .report_stage_logs_from_last_checkpoint(ps::ReportStageLogsFromLastCheckpointRequest {
            deployment_id: s.deployment.clone(),
            stage_id: "s1".into(),
            retried_count: 0,
            blocks: vec![fixtures::log_block(6, "done")],
            completed: true,
        })
        .await);
    let everything: Vec<i64> = (1..=6).collect();
    assert_eq!(
        stage_log_indexes(&s).await,
        (everything.clone(), everything)
    );
}

// ---------------------------------------------------------------------------------------
// `wisp aws init`, and configuration from Secrets Manager

#[tokio::test]
async fn aws_init_creates_once_and_the_stores_need_it() {
    let Some(env) = AwsEnv::from_env("aws_init_creates_once_and_the_stores_need_it") else {
        return;
    };
    let dir = tempfile::tempdir().expect("a data dir");
    let backend = AwsBackend::new(&env, dir.path(), None);
    let cli = |args: &[&str]| run_cli_with(dir.path(), args, &backend.store_args(), &[]);

    // Before `aws init`: a usage error that says what to do.
    let out = cli(&["piped", "list", "--project", QUICKSTART]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("wisp aws init"), "{out:?}");

    let created = |out: &support::CliOutput| -> Vec<(String, bool)> {
        assert_eq!(out.code, 0, "{out:?}");
        let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
        json["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().expect("name").to_string(),
                    s["created"].as_bool().expect("created"),
                )
            })
            .collect()
    };
    assert_eq!(
        created(&backend.init(dir.path())),
        vec![
            (backend.table.clone(), true),
            (backend.bucket.clone(), true)
        ]
    );
    // Idempotent.
    assert_eq!(
        created(&backend.init(dir.path())),
        vec![
            (backend.table.clone(), false),
            (backend.bucket.clone(), false)
        ]
    );
    let text = cli(&["aws", "init"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout
            .contains(&format!("DynamoDB table {}", backend.table))
            && text.stdout.contains("already exists"),
        "{text:?}"
    );

    // Now the admin commands work on the new table.
    let out = cli(&["project", "add", "aws-init"]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = cli(&["project", "list", "--json"]);
    assert!(out.stdout.contains("aws-init"), "{out:?}");

    // Embedded stores only: nothing for `aws init` to do.
    let out = run_cli_with(dir.path(), &["aws", "init"], &[], &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("--config"), "{out:?}");
}

#[tokio::test]
async fn config_and_encryption_key_from_secrets_manager() {
    let Some(env) = AwsEnv::from_env("config_and_encryption_key_from_secrets_manager") else {
        return;
    };
    let key = format!("key-{}", uuid::Uuid::new_v4().simple());
    let wisp = Wisp::start_aws_on(&env, None, |backend| {
        let config_secret = unique_name("wisp-e2e/config");
        let key_secret = unique_name("wisp-e2e/key");
        backend.put_secret(&config_secret, &backend.config_yaml());
        backend.put_secret(&key_secret, &key);
        // From here on the server and the CLI read the config from the secret only.
        std::fs::remove_file(&backend.config_path).expect("remove the config file");
        backend.config_secret = Some(config_secret);
        backend.key_secret = Some(key_secret);
    });

    let piped = wisp.add_piped(QUICKSTART, "from-secret");
    let app = wisp.add_app(&piped, "app", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    let apps = ok(c
        .list_applications(ps::ListApplicationsRequest::default())
        .await);
    assert_eq!(scenarios::app_ids(&apps.applications), vec![app]);
    let log = wisp.server().log_text();
    assert!(log.contains("wisp serve ready"), "{log}");
    assert!(!log.contains(&key), "the encryption key was logged: {log}");

    // A missing secret is a usage error naming it; a short key is refused.
    let backend = wisp.aws().expect("AWS backends");
    let out = run_cli_with(
        wisp.data_dir(),
        &["piped", "list", "--project", QUICKSTART],
        &["--config-secret".into(), "wisp-e2e/no-such-secret".into()],
        &backend.env(),
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("wisp-e2e/no-such-secret"), "{out:?}");
    let short = unique_name("wisp-e2e/short");
    backend.put_secret(&short, "too-short");
    let mut args = backend.store_args();
    args.extend(["--encryption-key-secret".into(), short.clone().into()]);
    args.extend(["--addr".into(), "127.0.0.1:0".into()]);
    let out = run_cli_with(wisp.data_dir(), &["serve"], &args, &backend.env());
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains(&short) && out.stderr.contains("at least 32"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("too-short"), "{out:?}");
}

/// A store failure reached through a real RPC: the DynamoDB table is deleted under a
/// running server. The piped is told only INTERNAL with upstream's generic message; the
/// server's log carries the whole cause, down to DynamoDB's own error code.
#[tokio::test]
async fn a_store_failure_is_logged_with_its_cause_and_hidden_from_the_client() {
    use wisp_store_aws::dynamodb::sdk;
    let Some(env) = AwsEnv::from_env("a_store_failure_is_logged_with_its_cause") else {
        return;
    };
    let wisp = Wisp::start_aws_on(&env, None, |_| {});
    let piped = wisp.add_piped(QUICKSTART, "dev");
    let mut client = wisp.piped_client(Via::Grpc, &piped).await;
    // Verified once while the table is there: the credential is cached from now on.
    ok(client
        .list_applications(ps::ListApplicationsRequest::default())
        .await);

    let table = wisp.aws().expect("AWS backends").table.clone();
    let dynamodb = sdk::Client::new(&env.sdk_config(&env.dynamodb).await);
    dynamodb
        .delete_table()
        .table_name(&table)
        .send()
        .await
        .expect("delete the table");

    let status = client
        .list_applications(ps::ListApplicationsRequest::default())
        .await
        .expect_err("the table is gone");
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(
        status.message(),
        "Failed to fetch applications",
        "{status:?}"
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = wisp.server().log_text();
        if log.contains("ResourceNotFoundException") {
            assert!(log.contains("Failed to fetch applications"), "{log}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no DynamoDB error code in the server log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
