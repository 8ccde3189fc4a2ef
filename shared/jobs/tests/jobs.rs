//! Each scheduled job over the embedded stores: what it changes, that a second run
//! changes nothing, and that a run cut short by its deadline is finished by the next.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use wisp_jobs::{Deadline, Job, JobContext, JobReport, Settings};
use wisp_proto::model::{
    self, ApplicationKind, ChainApplicationRef, ChainBlock, ChainBlockStatus, ChainDeploymentRef,
    ChainNode, ChainStatus, CommandStatus, DeploymentStatus,
};
use wisp_store::StoreError;
use wisp_store::collection::now_unix;
use wisp_store::entities::{pk, slot};
use wisp_store::insight::{InsightStore, Milestone};
use wisp_store::pipedstat::PIPED_STATS_CACHE_KEY;
use wisp_store::stores::Stores;

const PROJECT: &str = "p";
const PIPED: &str = "piped-1";
const HOUR: i64 = 3600;

fn env() -> wisp_testkit::TempStores {
    wisp_testkit::TempStores::new()
}

async fn run(stores: &Stores, job: Job, deadline: Deadline, now: i64) -> JobReport {
    let ctx = JobContext {
        stores,
        deadline,
        now,
        settings: Settings::default(),
    };
    wisp_jobs::run(job, &ctx).await.expect("job runs")
}

fn plenty() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

// ---------------------------------------------------------------------------------------
// orphan-commands
// ---------------------------------------------------------------------------------------

async fn command(stores: &Stores, id: &str, created_at: i64, status: CommandStatus) {
    stores
        .commands
        .create(model::Command {
            id: id.into(),
            piped_id: PIPED.into(),
            application_id: "app".into(),
            project_id: PROJECT.into(),
            commander: "tester".into(),
            r#type: model::command::Type::SyncApplication as i32,
            sync_application: Some(model::command::SyncApplication {
                application_id: "app".into(),
                ..Default::default()
            }),
            status: status as i32,
            created_at,
            ..Default::default()
        })
        .await
        .expect("create command");
}

async fn command_status(stores: &Stores, id: &str) -> (i32, i64) {
    let c = stores.commands.get(PROJECT, id).await.expect("get command");
    (c.status, c.handled_at)
}

#[tokio::test]
async fn orphan_commands_time_out_after_a_day() {
    let env = env();
    let s = &env.stores;
    let now = now_unix();
    for id in ["old-1", "old-2", "old-3"] {
        command(s, id, now - 25 * HOUR, CommandStatus::CommandNotHandledYet).await;
    }
    command(
        s,
        "exactly-a-day",
        now - 24 * HOUR,
        CommandStatus::CommandNotHandledYet,
    )
    .await;
    command(s, "recent", now - HOUR, CommandStatus::CommandNotHandledYet).await;
    command(
        s,
        "old-handled",
        now - 30 * HOUR,
        CommandStatus::CommandSucceeded,
    )
    .await;

    let report = run(s, Job::OrphanCommands, plenty(), now).await;
    assert!(report.finished);
    assert_eq!((report.examined, report.changed, report.failed), (4, 4, 0));
    for id in ["old-1", "old-2", "old-3", "exactly-a-day"] {
        assert_eq!(
            command_status(s, id).await,
            (CommandStatus::CommandTimeout as i32, now),
            "{id}"
        );
    }
    assert_eq!(
        command_status(s, "recent").await.0,
        CommandStatus::CommandNotHandledYet as i32
    );
    assert_eq!(
        command_status(s, "old-handled").await,
        (CommandStatus::CommandSucceeded as i32, 0)
    );
    // Timed-out commands left the piped's poll index too.
    let unhandled = s
        .commands
        .list_all(
            slot::COMMAND_UNHANDLED_BY_PIPED,
            pk::project_piped(PROJECT, PIPED),
            None,
        )
        .await
        .expect("list");
    assert_eq!(
        unhandled.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["recent"]
    );

    let again = run(s, Job::OrphanCommands, plenty(), now).await;
    assert!(again.finished);
    assert_eq!((again.examined, again.changed), (0, 0));
}

#[tokio::test]
async fn orphan_commands_resume_after_the_deadline() {
    let env = env();
    let s = &env.stores;
    let now = now_unix();
    for i in 0..5 {
        command(
            s,
            &format!("old-{i}"),
            now - 30 * HOUR + i,
            CommandStatus::CommandNotHandledYet,
        )
        .await;
    }
    // One check before the page, then one per command: the third command is not reached.
    let first = run(s, Job::OrphanCommands, Deadline::after_checks(3), now).await;
    assert!(!first.finished);
    assert_eq!(first.changed, 2);
    // Oldest first.
    assert_eq!(
        command_status(s, "old-0").await.0,
        CommandStatus::CommandTimeout as i32
    );
    assert_eq!(
        command_status(s, "old-1").await.0,
        CommandStatus::CommandTimeout as i32
    );
    assert_eq!(
        command_status(s, "old-2").await.0,
        CommandStatus::CommandNotHandledYet as i32
    );

    let second = run(s, Job::OrphanCommands, plenty(), now).await;
    assert!(second.finished);
    assert_eq!(second.changed, 3);

    let expired = run(s, Job::OrphanCommands, Deadline::after(Duration::ZERO), now).await;
    assert!(!expired.finished);
    assert_eq!(expired.examined, 0);
}

// ---------------------------------------------------------------------------------------
// piped-stats
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn stale_cached_piped_stats_are_dropped() {
    let env = env();
    let s = &env.stores;
    let now = now_unix();
    s.piped_stats
        .put(PROJECT, "stale", b"m".to_vec(), now - 25 * HOUR)
        .await
        .expect("put");
    s.piped_stats
        .put(PROJECT, "fresh", b"m".to_vec(), now - 60)
        .await
        .expect("put");
    s.cache
        .hash_set(PIPED_STATS_CACHE_KEY, "garbage", b"not json".to_vec())
        .await
        .expect("hash set");

    let report = run(s, Job::PipedStats, plenty(), now).await;
    assert!(report.finished);
    assert_eq!((report.examined, report.changed), (2, 2));
    let mut left: Vec<String> = s
        .cache
        .hash_get_all(PIPED_STATS_CACHE_KEY)
        .await
        .expect("hash get all")
        .into_keys()
        .collect();
    left.sort();
    assert_eq!(left, ["fresh"]);
    // The fresh piped still reads as reported; the stale one's record has expired.
    assert!(s.piped_stats.get("fresh").await.expect("get").is_some());
    assert!(s.piped_stats.get("stale").await.expect("get").is_none());

    let again = run(s, Job::PipedStats, plenty(), now).await;
    assert_eq!((again.examined, again.changed), (0, 0));
}

// ---------------------------------------------------------------------------------------
// plan-preview-outputs
// ---------------------------------------------------------------------------------------

async fn output_exists(stores: &Stores, id: &str) -> bool {
    match stores.command_outputs.get(id).await {
        Ok(_) => true,
        Err(StoreError::NotFound(_)) => false,
        Err(e) => panic!("get output {id}: {e}"),
    }
}

#[tokio::test]
async fn plan_preview_outputs_are_deleted_after_two_days() {
    let env = env();
    let s = &env.stores;
    let ids = ["cmd-a", "cmd-b", "cmd-c", "cmd-d", "cmd-e"];
    for id in ids {
        s.command_outputs
            .put(id, b"{}".to_vec())
            .await
            .expect("put output");
    }
    // An object beside them that is not an output.
    s.filestore
        .put(
            "command-output/nested/x.json",
            b"{}".to_vec(),
            wisp_store::PutCondition::Any,
        )
        .await
        .expect("put");

    // Written just now: too young.
    let young = run(s, Job::PlanPreviewOutputs, plenty(), now_unix()).await;
    assert!(young.finished);
    assert_eq!(young.changed, 0);

    // Two days and an hour later; stopped after two deletions.
    let later = now_unix() + 49 * HOUR;
    let first = run(s, Job::PlanPreviewOutputs, Deadline::after_checks(3), later).await;
    assert!(!first.finished);
    assert_eq!(first.changed, 2);
    assert!(!output_exists(s, "cmd-a").await && !output_exists(s, "cmd-b").await);
    assert!(output_exists(s, "cmd-c").await);
    let marker = s
        .filestore
        .get("jobs/plan-preview-outputs.json")
        .await
        .expect("marker");
    assert!(String::from_utf8_lossy(&marker.data).contains("command-output/cmd-b.json"));

    // A new output written meanwhile, before the marker: left for the next walk.
    s.command_outputs
        .put("cmd-0", b"{}".to_vec())
        .await
        .expect("put output");
    let second = run(s, Job::PlanPreviewOutputs, plenty(), later).await;
    assert!(second.finished);
    assert_eq!(second.changed, 3, "resumed after cmd-b");
    for id in ids {
        assert!(!output_exists(s, id).await, "{id}");
    }
    assert!(output_exists(s, "cmd-0").await);
    assert!(matches!(
        s.filestore.get("jobs/plan-preview-outputs.json").await,
        Err(StoreError::NotFound(_))
    ));

    // The next walk starts over and finds it.
    let third = run(s, Job::PlanPreviewOutputs, plenty(), later).await;
    assert_eq!(third.changed, 1);
    assert!(!output_exists(s, "cmd-0").await);
    assert!(
        s.filestore
            .get("command-output/nested/x.json")
            .await
            .is_ok()
    );
}

// ---------------------------------------------------------------------------------------
// deployment-chains
// ---------------------------------------------------------------------------------------

fn deployment(
    id: &str,
    app: &str,
    chain: &str,
    block: u32,
    status: DeploymentStatus,
) -> model::Deployment {
    let now = now_unix();
    model::Deployment {
        id: id.into(),
        application_id: app.into(),
        application_name: app.into(),
        piped_id: PIPED.into(),
        project_id: PROJECT.into(),
        kind: ApplicationKind::Kubernetes as i32,
        git_path: Some(model::ApplicationGitPath {
            repo: Some(model::ApplicationGitRepository {
                id: "repo".into(),
                ..Default::default()
            }),
            path: format!("apps/{app}"),
            ..Default::default()
        }),
        trigger: Some(model::DeploymentTrigger {
            commit: Some(model::Commit {
                hash: "abc".into(),
                message: "Bump".into(),
                author: "tester".into(),
                branch: "main".into(),
                created_at: now,
                ..Default::default()
            }),
            timestamp: now,
            ..Default::default()
        }),
        status: status as i32,
        deployment_chain_id: chain.into(),
        deployment_chain_block_index: block,
        ..Default::default()
    }
}

fn node(app: &str, deployment: Option<&str>) -> ChainNode {
    ChainNode {
        application_ref: Some(ChainApplicationRef {
            application_id: app.into(),
            application_name: app.into(),
        }),
        deployment_ref: deployment.map(|id| ChainDeploymentRef {
            deployment_id: id.into(),
            status: DeploymentStatus::DeploymentPending as i32,
            status_reason: String::new(),
        }),
    }
}

fn block(nodes: Vec<ChainNode>) -> ChainBlock {
    ChainBlock {
        nodes,
        status: ChainBlockStatus::DeploymentBlockPending as i32,
        started_at: now_unix(),
        completed_at: 0,
    }
}

/// Chain `id`: block 0 = app-a (deployment `<id>-a` linked), block 1 = app-b and app-c.
async fn chain(stores: &Stores, id: &str) {
    stores
        .deployment_chains
        .create(model::DeploymentChain {
            id: id.into(),
            project_id: PROJECT.into(),
            status: ChainStatus::DeploymentChainPending as i32,
            blocks: vec![
                block(vec![node("app-a", Some(&format!("{id}-a")))]),
                block(vec![node("app-b", None), node("app-c", None)]),
            ],
            ..Default::default()
        })
        .await
        .expect("create chain");
    stores
        .deployments
        .create(deployment(
            &format!("{id}-a"),
            "app-a",
            id,
            0,
            DeploymentStatus::DeploymentPending,
        ))
        .await
        .expect("create first deployment");
}

async fn set_status(stores: &Stores, id: &str, status: DeploymentStatus) {
    stores
        .deployments
        .update(PROJECT, id, |d| {
            d.status = status as i32;
            d.status_reason = format!("now {}", status.as_str_name());
            Ok(())
        })
        .await
        .expect("update deployment");
}

async fn get_chain(stores: &Stores, id: &str) -> model::DeploymentChain {
    stores
        .deployment_chains
        .get(PROJECT, id)
        .await
        .expect("get chain")
}

fn statuses(chain: &model::DeploymentChain) -> (i32, Vec<i32>) {
    (
        chain.status,
        chain.blocks.iter().map(|b| b.status).collect(),
    )
}

const PENDING: i32 = ChainBlockStatus::DeploymentBlockPending as i32;
const RUNNING: i32 = ChainBlockStatus::DeploymentBlockRunning as i32;
const SUCCESS: i32 = ChainBlockStatus::DeploymentBlockSuccess as i32;
const FAILURE: i32 = ChainBlockStatus::DeploymentBlockFailure as i32;

#[tokio::test]
async fn chains_follow_their_deployments_to_success() {
    let env = env();
    let s = &env.stores;
    chain(s, "ch").await;
    let now = now_unix();

    // Nothing happened yet.
    let idle = run(s, Job::DeploymentChains, plenty(), now).await;
    assert!(idle.finished);
    assert_eq!((idle.examined, idle.changed), (1, 0));

    set_status(s, "ch-a", DeploymentStatus::DeploymentRunning).await;
    let report = run(s, Job::DeploymentChains, plenty(), now).await;
    assert_eq!(report.changed, 1);
    let c = get_chain(s, "ch").await;
    assert_eq!(
        statuses(&c),
        (
            ChainStatus::DeploymentChainRunning as i32,
            vec![RUNNING, PENDING]
        )
    );
    assert_eq!(
        c.blocks[0].nodes[0]
            .deployment_ref
            .as_ref()
            .map(|r| r.status_reason.as_str()),
        Some("now DEPLOYMENT_RUNNING")
    );

    set_status(s, "ch-a", DeploymentStatus::DeploymentSuccess).await;
    // The piped creates app-b's in-chain deployment; app-c's completes before the job
    // first sees it.
    s.deployments
        .create(deployment(
            "ch-b",
            "app-b",
            "ch",
            1,
            DeploymentStatus::DeploymentPending,
        ))
        .await
        .expect("create");
    s.deployments
        .create(deployment(
            "ch-c",
            "app-c",
            "ch",
            1,
            DeploymentStatus::DeploymentSuccess,
        ))
        .await
        .expect("create");
    // A deployment of app-b outside the chain is not linked.
    s.deployments
        .create(deployment(
            "other-b",
            "app-b",
            "",
            0,
            DeploymentStatus::DeploymentRunning,
        ))
        .await
        .expect("create");
    run(s, Job::DeploymentChains, plenty(), now).await;
    let c = get_chain(s, "ch").await;
    assert_eq!(
        statuses(&c),
        (
            ChainStatus::DeploymentChainRunning as i32,
            vec![SUCCESS, PENDING]
        )
    );
    assert_eq!(c.blocks[0].completed_at, now);
    let linked: Vec<_> = c.blocks[1]
        .nodes
        .iter()
        .map(|n| {
            n.deployment_ref
                .as_ref()
                .map(|r| (r.deployment_id.as_str(), r.status))
        })
        .collect();
    assert_eq!(
        linked,
        [
            Some(("ch-b", DeploymentStatus::DeploymentPending as i32)),
            Some(("ch-c", DeploymentStatus::DeploymentSuccess as i32)),
        ]
    );

    set_status(s, "ch-b", DeploymentStatus::DeploymentSuccess).await;
    run(s, Job::DeploymentChains, plenty(), now + 10).await;
    let c = get_chain(s, "ch").await;
    assert_eq!(
        statuses(&c),
        (
            ChainStatus::DeploymentChainSuccess as i32,
            vec![SUCCESS, SUCCESS]
        )
    );
    assert_eq!(c.completed_at, now + 10);

    // Completed: out of the open index, so later runs do not look at it.
    let done = run(s, Job::DeploymentChains, plenty(), now + 20).await;
    assert_eq!((done.examined, done.changed), (0, 0));
}

#[tokio::test]
async fn a_failed_deployment_fails_its_block_and_chain() {
    let env = env();
    let s = &env.stores;
    chain(s, "ch").await;
    let now = now_unix();
    set_status(s, "ch-a", DeploymentStatus::DeploymentFailure).await;
    run(s, Job::DeploymentChains, plenty(), now).await;
    let c = get_chain(s, "ch").await;
    assert_eq!(
        statuses(&c),
        (
            ChainStatus::DeploymentChainFailure as i32,
            vec![FAILURE, PENDING]
        )
    );
    assert_eq!(c.completed_at, now);
    // Idempotent.
    let again = run(s, Job::DeploymentChains, plenty(), now).await;
    assert_eq!((again.examined, again.changed), (0, 0));
}

#[tokio::test]
async fn chain_runs_resume_from_their_marker() {
    let env = env();
    let s = &env.stores;
    let ids: Vec<String> = (0..120).map(|i| format!("ch{i:03}")).collect();
    for id in &ids {
        chain(s, id).await;
    }
    let now = now_unix();
    // Stopped after the first page (50 chains) and a little of the second.
    let first = run(s, Job::DeploymentChains, Deadline::after_checks(55), now).await;
    assert!(!first.finished);
    assert_eq!(first.examined, 53);
    assert!(s.filestore.get("jobs/deployment-chains.json").await.is_ok());
    // The next run starts at the second page, not the first.
    let second = run(s, Job::DeploymentChains, plenty(), now).await;
    assert!(second.finished);
    assert_eq!(second.examined, 70);
    assert!(matches!(
        s.filestore.get("jobs/deployment-chains.json").await,
        Err(StoreError::NotFound(_))
    ));
    let third = run(s, Job::DeploymentChains, plenty(), now).await;
    assert_eq!(third.examined, 120);
}

// ---------------------------------------------------------------------------------------
// insights
// ---------------------------------------------------------------------------------------

fn application(project: &str, id: &str) -> model::Application {
    model::Application {
        id: id.into(),
        name: id.into(),
        piped_id: PIPED.into(),
        project_id: project.into(),
        kind: ApplicationKind::Kubernetes as i32,
        git_path: Some(model::ApplicationGitPath {
            repo: Some(model::ApplicationGitRepository {
                id: "repo".into(),
                ..Default::default()
            }),
            path: format!("apps/{id}"),
            ..Default::default()
        }),
        labels: [("env".to_string(), "prod".to_string())].into(),
        ..Default::default()
    }
}

fn only_applications() -> Settings {
    Settings {
        insight_deployments: false,
        ..Settings::default()
    }
}

#[tokio::test]
async fn insights_count_each_projects_applications() {
    let env = env();
    let s = &env.stores;
    s.applications
        .create(application(PROJECT, "a1"))
        .await
        .expect("app");
    let mut disabled = application(PROJECT, "a2");
    disabled.disabled = true;
    s.applications.create(disabled).await.expect("app");
    let mut deleted = application(PROJECT, "a3");
    deleted.deleted = true;
    s.applications.create(deleted).await.expect("app");
    s.applications
        .create(application("q", "b1"))
        .await
        .expect("app");

    let now = now_unix();
    let ctx = JobContext {
        stores: s,
        deadline: plenty(),
        now,
        settings: only_applications(),
    };
    let report = wisp_jobs::run(Job::Insights, &ctx).await.expect("run");
    assert!(report.finished);
    assert_eq!((report.examined, report.changed), (4, 2));

    let insights = InsightStore::new(s.filestore.clone());
    let p = insights
        .get_applications(PROJECT)
        .await
        .expect("get")
        .expect("written");
    assert_eq!(p.updated_at, now);
    let mut got: Vec<(String, String, String)> = p
        .applications
        .iter()
        .map(|a| (a.id.clone(), a.kind.clone(), a.status.clone()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (
                "a1".to_string(),
                "KUBERNETES".to_string(),
                "ENABLED".to_string()
            ),
            (
                "a2".to_string(),
                "KUBERNETES".to_string(),
                "DISABLED".to_string()
            ),
        ]
    );
    assert_eq!(
        p.applications[0].labels.get("env").map(String::as_str),
        Some("prod")
    );
    // Upstream's layout.
    let raw = s
        .filestore
        .get("insights/q/applications/applications.json")
        .await
        .expect("file");
    let json: serde_json::Value = serde_json::from_slice(&raw.data).expect("JSON");
    assert_eq!(json["applications"][0]["id"], "b1");

    // A cut-short run writes nothing.
    s.applications
        .create(application("r", "c1"))
        .await
        .expect("app");
    let ctx = JobContext {
        stores: s,
        deadline: Deadline::after_checks(1),
        now,
        settings: only_applications(),
    };
    let report = wisp_jobs::run(Job::Insights, &ctx).await.expect("run");
    assert!(!report.finished);
    assert!(insights.get_applications("r").await.expect("get").is_none());
}

fn completed(id: &str, status: DeploymentStatus, completed_at: i64) -> model::Deployment {
    let mut d = deployment(id, "app-a", "", 0, status);
    d.completed_at = completed_at;
    d.labels = [("team".to_string(), "a".to_string())].into();
    d
}

#[tokio::test]
async fn insights_collect_completed_deployments_once() {
    let env = env();
    let s = &env.stores;
    let now = now_unix();
    let settings = Settings {
        config_projects: vec![PROJECT.to_string()],
        insight_applications: false,
        insight_chunk_max_count: 2,
        ..Settings::default()
    };
    let mut rolled_back = completed("d2", DeploymentStatus::DeploymentFailure, now - 1200);
    rolled_back.stages = vec![model::PipelineStage {
        id: "rollback".into(),
        name: "ROLLBACK".into(),
        status: model::StageStatus::StageSuccess as i32,
        created_at: now - 1300,
        updated_at: now - 1200,
        ..Default::default()
    }];
    for d in [
        completed("d1", DeploymentStatus::DeploymentSuccess, now - 600),
        rolled_back,
        // Still running; and one completed before the first run's hour.
        deployment("d3", "app-a", "", 0, DeploymentStatus::DeploymentRunning),
        completed("d4", DeploymentStatus::DeploymentSuccess, now - 5 * HOUR),
    ] {
        s.deployments.create(d).await.expect("deployment");
    }
    let run_at = |now: i64, settings: &Settings| {
        let ctx = JobContext {
            stores: s,
            deadline: plenty(),
            now,
            settings: settings.clone(),
        };
        async move { wisp_jobs::run(Job::Insights, &ctx).await.expect("run") }
    };
    let report = run_at(now, &settings).await;
    assert!(report.finished);
    assert_eq!(report.changed, 2);
    let insights = InsightStore::new(s.filestore.clone());
    assert_eq!(
        insights.get_milestone().await.expect("milestone"),
        Some(Milestone {
            deployment_completed_at_milestone: now
        })
    );
    let mut stored = insights
        .list_completed_deployments(PROJECT, now - 2 * HOUR, now)
        .await
        .expect("list");
    stored.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        stored.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["d1", "d2"]
    );
    assert_eq!(stored[1].complete_status, "DEPLOYMENT_FAILURE");
    assert_eq!(stored[1].rollback_started_at, now - 1300);
    assert!(stored[0].started_at > 0);
    assert_eq!(stored[0].labels.get("team").map(String::as_str), Some("a"));

    // Nothing new: nothing added. (Simulated times stay at or before the real clock's
    // `updated_at` stamps: the job relies on updated_at >= completed_at.)
    let again = run_at(now, &settings).await;
    assert_eq!(again.changed, 0);

    // d3 completes; chunk_0 is full (2), so it starts chunk_1.
    s.deployments
        .update(PROJECT, "d3", |d| {
            d.status = DeploymentStatus::DeploymentSuccess as i32;
            d.completed_at = now;
            Ok(())
        })
        .await
        .expect("complete d3");
    let third = run_at(now + 120, &settings).await;
    assert_eq!(third.changed, 1);
    let all = insights
        .list_completed_deployments(PROJECT, now - 2 * HOUR, now + 200)
        .await
        .expect("list");
    assert_eq!(all.len(), 3);
    let block = format!(
        "insights/{PROJECT}/completed-deployments/block_{}",
        wisp_store::insight::utc_year(now)
    );
    assert!(
        s.filestore
            .get(&format!("{block}/chunk_1.json"))
            .await
            .is_ok()
    );
    let meta = s
        .filestore
        .get(&format!("{block}/block_meta.json"))
        .await
        .expect("meta");
    let meta: serde_json::Value = serde_json::from_slice(&meta.data).expect("JSON");
    assert_eq!(meta["chunk_metadata"][0]["completed"], true);
    assert_eq!(meta["chunk_metadata"][1]["count"], 1);
}

// ---------------------------------------------------------------------------------------
// the fleet, for the metrics
// ---------------------------------------------------------------------------------------

async fn piped(stores: &Stores, project: &str, id: &str, version: &str, disabled: bool) {
    stores
        .pipeds
        .create(model::Piped {
            id: id.into(),
            name: id.into(),
            project_id: project.into(),
            version: version.into(),
            disabled,
            ..Default::default()
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn the_fleet_counts_connected_pipeds_and_open_deployments() {
    let env = env();
    let stores = &env.stores;
    let now = now_unix();
    stores
        .projects
        .create(model::Project {
            id: PROJECT.into(),
            static_admin: Some(model::ProjectStaticUser {
                username: "admin".into(),
                password_hash: "not-a-real-hash".into(),
            }),
            created_at: now,
            updated_at: now,
            ..Default::default()
        })
        .await
        .unwrap();
    piped(stores, PROJECT, PIPED, "v0.50.0", false).await;
    piped(stores, PROJECT, "piped-2", "v0.50.0", false).await;
    piped(stores, PROJECT, "piped-old", "v0.49.0", false).await;
    piped(stores, PROJECT, "piped-off", "v0.50.0", true).await;
    piped(stores, "other", "piped-o", "v0.50.0", false).await;
    // Reported just now, 10 minutes ago, never.
    stores
        .piped_stats
        .put(PROJECT, PIPED, b"# m".to_vec(), now)
        .await
        .unwrap();
    stores
        .piped_stats
        .put(PROJECT, "piped-old", b"# m".to_vec(), now - 600)
        .await
        .unwrap();
    for (id, status) in [
        ("d1", DeploymentStatus::DeploymentRunning),
        ("d2", DeploymentStatus::DeploymentRunning),
        ("d3", DeploymentStatus::DeploymentPlanned),
        ("d4", DeploymentStatus::DeploymentSuccess),
    ] {
        stores
            .deployments
            .create(deployment(id, "app", "", 0, status))
            .await
            .unwrap();
    }

    // "other" is a project only the configuration names.
    let fleet = wisp_jobs::fleet::measure(
        stores,
        &["other".to_string()],
        wisp_jobs::fleet::Scope::Everything,
    )
    .await
    .unwrap();
    // The connected piped's own metrics are kept, the stale one's are not.
    assert_eq!(fleet.piped_metrics.len(), 1);
    assert_eq!(fleet.piped_metrics[0].piped_id, PIPED);
    assert_eq!(fleet.piped_metrics[0].text, b"# m");
    let counts = |project: &str, version: &str| {
        fleet
            .pipeds
            .get(&(project.to_string(), version.to_string()))
            .map(|c| (c.registered, c.connected))
    };
    assert_eq!(counts(PROJECT, "v0.50.0"), Some((2, 1)));
    assert_eq!(counts(PROJECT, "v0.49.0"), Some((1, 0)));
    assert_eq!(counts("other", "v0.50.0"), Some((1, 0)));
    assert_eq!(fleet.pipeds.len(), 3, "{fleet:?}");
    let open = |status: &'static str| fleet.open_deployments.get(&(PROJECT.to_string(), status));
    assert_eq!(open("DEPLOYMENT_RUNNING"), Some(&2));
    assert_eq!(open("DEPLOYMENT_PLANNED"), Some(&1));
    assert_eq!(open("DEPLOYMENT_SUCCESS"), None);
}
