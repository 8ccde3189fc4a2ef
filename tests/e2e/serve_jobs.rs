//! `wisp serve` alone runs the scheduled jobs on their timers (`jobs` in the config sets
//! the periods): an orphan command times out, a deployment chain goes from its first block
//! to done, and the Insights page gets its data. `wisp jobs run NAME` runs one now.

use crate::support;

use std::time::{Duration, Instant};

use wisp_proto::apiservice as api;
use wisp_proto::model::{ChainStatus, CommandStatus, DeploymentStatus};
use wisp_proto::pipedservice::create_deployment_chain_request::ApplicationMatcher;
use wisp_proto::pipedservice::*;
use wisp_proto::webservice as web;

use support::fixtures::{self, now};
use support::{QUICKSTART, Via, Wisp, ok};

/// Waits (polling) until `check` returns `Some`, at most `limit`: the jobs run on their
/// own timers, so the test waits for their effect, never for a fixed time.
async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            started.elapsed() < limit,
            "{what}: not after {} s",
            limit.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn an_orphan_command_times_out() {
    let wisp =
        Wisp::start_with_jobs("  jobs:\n    orphanCommands: {interval: 1s, commandTimeout: 1s}\n");
    let piped = wisp.add_piped(QUICKSTART, "jobs");
    let app = wisp.add_app(&piped, "frontend", &[]);
    let rw = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let mut pipectl = wisp.api_key_client(Via::Grpc, &rw).await;
    let command_id = ok(pipectl
        .sync_application(api::SyncApplicationRequest {
            application_id: app.clone(),
        })
        .await)
    .command_id;

    // No piped picks it up: the job times it out.
    let status = eventually(LIMIT, "the command timed out", || {
        let mut pipectl = pipectl.clone();
        let id = command_id.clone();
        async move {
            let cmd = ok(pipectl
                .get_command(api::GetCommandRequest { command_id: id })
                .await)
            .command?;
            (cmd.status != CommandStatus::CommandNotHandledYet as i32).then_some(cmd.status)
        }
    })
    .await;
    assert_eq!(status, CommandStatus::CommandTimeout as i32);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    assert!(
        ok(
            c.list_unhandled_commands(ListUnhandledCommandsRequest::default())
                .await
        )
        .commands
        .is_empty(),
        "a timed-out command is no longer offered to the piped"
    );

    // The run that changed it is in the audit log, under no project (issue 32 point 4).
    let entry = eventually(LIMIT, "the job's audit entry", || {
        let found = wisp.cli_json(&["audit", "list", "--method", "orphan-commands"]);
        async move { found.as_array().and_then(|a| a.first().cloned()) }
    })
    .await;
    assert_eq!(entry["actor"], "job:orphan-commands", "{entry}");
    assert_eq!(entry["method"], "job/orphan-commands", "{entry}");
    assert_eq!(entry["project_id"], "", "{entry}");
    assert_eq!(entry["code"], "OK", "{entry}");
}

#[tokio::test]
async fn a_deployment_chain_completes_and_insights_appear() {
    let wisp = Wisp::start_with_jobs(
        "  jobs:\n    deploymentChains: {interval: 1s}\n    insights: {interval: 1s}\n",
    );
    let alice = wisp.add_piped(QUICKSTART, "chain-alice");
    let bob = wisp.add_piped(QUICKSTART, "chain-bob");
    let first_app = wisp.add_app(&alice, "frontend", &[]);
    let backend = wisp.add_app(&bob, "backend", &[]);
    let mut a = wisp.piped_client(Via::Grpc, &alice).await;
    let mut b = wisp.piped_client(Via::Grpc, &bob).await;

    ok(a.create_deployment_chain(CreateDeploymentChainRequest {
        first_deployment: Some(fixtures::deployment(
            &alice,
            "dep-first",
            &first_app,
            "frontend",
        )),
        matchers: vec![ApplicationMatcher {
            name: "backend".into(),
            ..Default::default()
        }],
    })
    .await);
    let chain_id = ok(a
        .get_deployment(GetDeploymentRequest {
            id: "dep-first".into(),
        })
        .await)
    .deployment
    .expect("deployment")
    .deployment_chain_id;

    // Block 1 waits for block 0.
    let mut in_chain = fixtures::deployment(&bob, "dep-backend", &backend, "backend");
    in_chain.deployment_chain_id = chain_id.clone();
    in_chain.deployment_chain_block_index = 1;
    ok(b.create_deployment(CreateDeploymentRequest {
        deployment: Some(in_chain),
    })
    .await);
    let gate = |mut b: support::Client| {
        let chain_id = chain_id.clone();
        async move {
            ok(
                b.in_chain_deployment_plannable(InChainDeploymentPlannableRequest {
                    deployment_id: "dep-backend".into(),
                    deployment_chain_id: chain_id,
                    deployment_chain_block_index: 1,
                })
                .await,
            )
        }
    };
    let closed = gate(b.clone()).await;
    assert!(!closed.plannable && !closed.cancel, "{closed:?}");

    // The first deployment succeeds; the job closes block 0 and the gate opens.
    ok(
        a.report_deployment_completed(ReportDeploymentCompletedRequest {
            deployment_id: "dep-first".into(),
            status: DeploymentStatus::DeploymentSuccess as i32,
            completed_at: now(),
            ..Default::default()
        })
        .await,
    );
    eventually(LIMIT, "block 1 plannable", || {
        let b = b.clone();
        let gate = &gate;
        async move { gate(b).await.plannable.then_some(()) }
    })
    .await;

    // The last block succeeds; the job completes the chain.
    ok(
        b.report_deployment_completed(ReportDeploymentCompletedRequest {
            deployment_id: "dep-backend".into(),
            status: DeploymentStatus::DeploymentSuccess as i32,
            completed_at: now(),
            ..Default::default()
        })
        .await,
    );
    let token = wisp.admin_session().await;
    let console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let chain = eventually(LIMIT, "the chain succeeded", || {
        let mut console = console.clone();
        let id = chain_id.clone();
        async move {
            let chain = ok(console
                .get_deployment_chain(web::GetDeploymentChainRequest {
                    deployment_chain_id: id,
                })
                .await)
            .deployment_chain?;
            (chain.status == ChainStatus::DeploymentChainSuccess as i32).then_some(chain)
        }
    })
    .await;
    assert!(chain.completed_at > 0, "{chain:?}");

    // Insights: the application counts the job collected reach the console.
    let counts = eventually(LIMIT, "insight application counts", || {
        let mut console = console.clone();
        async move {
            let resp = ok(console
                .get_insight_application_count(web::GetInsightApplicationCountRequest {})
                .await);
            (resp.updated_at > 0).then_some(resp.counts)
        }
    })
    .await;
    let total: i64 = counts.iter().map(|c| i64::from(c.count)).sum();
    assert_eq!(total, 2, "two applications: {counts:?}");
}

#[test]
fn jobs_run_runs_one_job_now_and_jobs_list_shows_the_periods() {
    let wisp = Wisp::start_with_jobs("  jobs:\n    insights: {interval: 90s}\n");
    let listed = wisp.cli_json(&["jobs", "list"]);
    let insights = listed
        .as_array()
        .expect("a list")
        .iter()
        .find(|j| j["name"] == "insights")
        .cloned()
        .expect("insights listed");
    assert_eq!(insights["intervalSeconds"], 90);
    let chains = listed
        .as_array()
        .expect("a list")
        .iter()
        .find(|j| j["name"] == "deployment-chains")
        .cloned()
        .expect("deployment-chains listed");
    assert_eq!(
        chains["intervalSeconds"], 60,
        "the Lambda schedule's default"
    );

    let report = wisp.cli_json(&["jobs", "run", "orphan-commands"]);
    assert_eq!(report["job"], "orphan-commands", "{report}");
    assert_eq!(report["finished"], true, "{report}");

    let unknown = wisp.cli(&["jobs", "run", "no-such-job"]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(
        unknown.stderr.contains("deployment-chains"),
        "the error lists the jobs: {unknown:?}"
    );
}
