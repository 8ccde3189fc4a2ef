//! PipedApi over the embedded backends (SQLite, a temp directory, the in-process cache):
//! ownership, scoping, NotFound codes, validation, and the flows pipeds drive.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use wisp_auth::PipedCaller;
use wisp_proto::model::{
    self, ApplicationKind, ChainBlockStatus, CommandStatus, DeploymentStatus, EventStatus,
    LogBlock, StageStatus,
};
use wisp_proto::pipedservice::*;
use wisp_services::ServiceError;
use wisp_services::piped::PipedApi;
use wisp_store::stores::Stores;

const P1: &str = "project-1";
const P2: &str = "project-2";

struct Env {
    _dir: wisp_testkit::TempStores,
    api: PipedApi,
    stores: Stores,
}

fn caller(project: &str, piped: &str) -> PipedCaller {
    PipedCaller {
        project_id: project.to_string(),
        piped_id: piped.to_string(),
    }
}

fn me() -> PipedCaller {
    caller(P1, "piped-1")
}

fn git_path() -> model::ApplicationGitPath {
    model::ApplicationGitPath {
        repo: Some(model::ApplicationGitRepository {
            id: "repo-1".into(),
            remote: "git@example.com:org/repo.git".into(),
            branch: "main".into(),
        }),
        path: "apps/app".into(),
        config_filename: "app.pipecd.yaml".into(),
        url: String::new(),
    }
}

fn app(project: &str, piped: &str, id: &str, name: &str) -> model::Application {
    model::Application {
        id: id.into(),
        name: name.into(),
        piped_id: piped.into(),
        project_id: project.into(),
        git_path: Some(git_path()),
        ..Default::default()
    }
}

fn piped(project: &str, id: &str) -> model::Piped {
    model::Piped {
        id: id.into(),
        name: format!("name-of-{id}"),
        project_id: project.into(),
        desired_version: "v0.57.1".into(),
        ..Default::default()
    }
}

fn trigger() -> model::DeploymentTrigger {
    model::DeploymentTrigger {
        commit: Some(model::Commit {
            hash: "0123abcd".into(),
            message: "change".into(),
            author: "dev".into(),
            branch: "main".into(),
            created_at: 1_700_000_000,
            ..Default::default()
        }),
        commander: String::new(),
        timestamp: 1_700_000_000,
        sync_strategy: 0,
        strategy_summary: String::new(),
    }
}

fn deployment(project: &str, piped: &str, app_id: &str, id: &str) -> model::Deployment {
    model::Deployment {
        id: id.into(),
        application_id: app_id.into(),
        application_name: format!("name-of-{app_id}"),
        piped_id: piped.into(),
        project_id: project.into(),
        git_path: Some(git_path()),
        trigger: Some(trigger()),
        status: DeploymentStatus::DeploymentPending as i32,
        ..Default::default()
    }
}

fn stage(id: &str, name: &str, index: i32, requires: &[&str]) -> model::PipelineStage {
    model::PipelineStage {
        id: id.into(),
        name: name.into(),
        index,
        requires: requires.iter().map(|s| s.to_string()).collect(),
        created_at: 1_700_000_000,
        updated_at: 1_700_000_000,
        ..Default::default()
    }
}

fn command(project: &str, piped: &str, id: &str) -> model::Command {
    model::Command {
        id: id.into(),
        piped_id: piped.into(),
        project_id: project.into(),
        application_id: "app-1".into(),
        commander: "someone".into(),
        r#type: model::command::Type::SyncApplication as i32,
        sync_application: Some(model::command::SyncApplication {
            application_id: "app-1".into(),
            sync_strategy: 0,
        }),
        ..Default::default()
    }
}

fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn event(
    project: &str,
    id: &str,
    name: &str,
    lbls: &[(&str, &str)],
    created_at: i64,
) -> model::Event {
    let labels = labels(lbls);
    model::Event {
        id: id.into(),
        name: name.into(),
        data: "image:v2".into(),
        project_id: project.into(),
        event_key: wisp_model::event::make_event_key(name, &labels),
        labels,
        created_at,
        ..Default::default()
    }
}

/// Two projects: P1 with piped-1 (the caller) and piped-2, P2 with piped-x; an app each,
/// plus a disabled app of piped-1.
async fn env() -> Env {
    let dir = wisp_testkit::TempStores::new();
    let stores = dir.stores.clone();
    for p in [
        piped(P1, "piped-1"),
        piped(P1, "piped-2"),
        piped(P2, "piped-x"),
    ] {
        stores.pipeds.create(p).await.expect("seed piped");
    }
    let mut disabled = app(P1, "piped-1", "app-disabled", "disabled");
    disabled.disabled = true;
    for a in [
        app(P1, "piped-1", "app-1", "one"),
        app(P1, "piped-2", "app-2", "two"),
        app(P2, "piped-x", "app-x", "x"),
        disabled,
    ] {
        stores
            .applications
            .create(a)
            .await
            .expect("seed application");
    }
    let api = PipedApi::new(stores.clone(), "https://wisp.example.com");
    Env {
        _dir: dir,
        api,
        stores,
    }
}

#[track_caller]
fn assert_permission_denied<T: std::fmt::Debug>(r: Result<T, ServiceError>) {
    match r {
        Err(ServiceError::PermissionDenied(msg)) => assert!(msg.contains("your piped"), "{msg}"),
        other => panic!("want PermissionDenied, got {other:?}"),
    }
}

#[track_caller]
fn assert_not_found<T: std::fmt::Debug>(r: Result<T, ServiceError>) -> String {
    match r {
        Err(ServiceError::NotFound(msg)) => msg,
        other => panic!("want NotFound, got {other:?}"),
    }
}

#[track_caller]
fn assert_invalid<T: std::fmt::Debug>(r: Result<T, ServiceError>, field: &str) {
    match r {
        Err(ServiceError::InvalidArgument(msg)) => assert!(msg.contains(field), "{msg}"),
        other => panic!("want InvalidArgument naming {field}, got {other:?}"),
    }
}

#[track_caller]
fn assert_failed_precondition<T: std::fmt::Debug>(r: Result<T, ServiceError>) {
    match r {
        Err(ServiceError::FailedPrecondition(_)) => {}
        other => panic!("want FailedPrecondition, got {other:?}"),
    }
}

async fn open_deployments(env: &Env) -> Result<ListNotCompletedDeploymentsResponse, ServiceError> {
    env.api
        .list_not_completed_deployments(
            &me(),
            ListNotCompletedDeploymentsRequest {
                cursor: String::new(),
            },
        )
        .await
}

async fn unhandled(
    env: &Env,
    c: &PipedCaller,
) -> Result<ListUnhandledCommandsResponse, ServiceError> {
    env.api
        .list_unhandled_commands(c, ListUnhandledCommandsRequest {})
        .await
}

async fn create_deployment(env: &Env, d: model::Deployment) {
    env.api
        .create_deployment(
            &me(),
            CreateDeploymentRequest {
                deployment: Some(d),
            },
        )
        .await
        .expect("create deployment");
}

fn sync_state() -> model::ApplicationSyncState {
    model::ApplicationSyncState {
        status: model::ApplicationSyncStatus::Synced as i32,
        timestamp: 1_700_000_000,
        ..Default::default()
    }
}

#[tokio::test]
async fn applications_of_other_pipeds_and_projects() {
    let env = env().await;
    let req = |id: &str| ReportApplicationSyncStateRequest {
        application_id: id.into(),
        state: Some(sync_state()),
    };
    env.api
        .report_application_sync_state(&me(), req("app-1"))
        .await
        .expect("own app");
    let stored = env.stores.applications.get(P1, "app-1").await.expect("get");
    assert_eq!(stored.sync_state, Some(sync_state()));

    assert_permission_denied(
        env.api
            .report_application_sync_state(&me(), req("app-2"))
            .await,
    );
    assert_not_found(
        env.api
            .report_application_sync_state(&me(), req("app-x"))
            .await,
    );
    assert_not_found(
        env.api
            .report_application_sync_state(&me(), req("nope"))
            .await,
    );
    // Nothing changed on the other piped's app.
    assert_eq!(
        env.stores
            .applications
            .get(P1, "app-2")
            .await
            .expect("get")
            .sync_state,
        None
    );

    let deploying = |id: &str| ReportApplicationDeployingStatusRequest {
        application_id: id.into(),
        deploying: true,
    };
    env.api
        .report_application_deploying_status(&me(), deploying("app-1"))
        .await
        .expect("own");
    assert!(
        env.stores
            .applications
            .get(P1, "app-1")
            .await
            .expect("get")
            .deploying
    );
    assert_permission_denied(
        env.api
            .report_application_deploying_status(&me(), deploying("app-2"))
            .await,
    );

    // Read paths go through the owner cache: first call fills it, second hits it.
    for _ in 0..2 {
        assert_permission_denied(
            env.api
                .put_application_shared_object(
                    &me(),
                    PutApplicationSharedObjectRequest {
                        application_id: "app-2".into(),
                        plugin_name: "kubernetes".into(),
                        key: "k".into(),
                        object: b"v".to_vec(),
                    },
                )
                .await,
        );
    }
    assert_not_found(
        env.api
            .get_application_shared_object(
                &me(),
                GetApplicationSharedObjectRequest {
                    application_id: "app-x".into(),
                    plugin_name: "kubernetes".into(),
                    key: "k".into(),
                },
            )
            .await,
    );

    // The piped of the other project sees its own app, and not ours.
    let x = caller(P2, "piped-x");
    env.api
        .report_application_sync_state(&x, req("app-x"))
        .await
        .expect("x owns app-x");
    assert_not_found(
        env.api
            .report_application_sync_state(&x, req("app-1"))
            .await,
    );
}

#[tokio::test]
async fn list_applications_returns_only_the_pipeds_enabled_apps() {
    let env = env().await;
    let resp = env
        .api
        .list_applications(&me(), ListApplicationsRequest {})
        .await
        .expect("list");
    let ids: Vec<_> = resp.applications.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, vec!["app-1"]);
    let resp = env
        .api
        .list_applications(&caller(P1, "piped-2"), ListApplicationsRequest {})
        .await
        .expect("list");
    assert_eq!(resp.applications.len(), 1);
    assert_eq!(resp.applications[0].id, "app-2");
}

#[tokio::test]
async fn not_found_codes_pipeds_rely_on() {
    let env = env().await;
    let msg = assert_not_found(
        env.api
            .get_application_most_recent_deployment(
                &me(),
                GetApplicationMostRecentDeploymentRequest {
                    application_id: "app-1".into(),
                    status: DeploymentStatus::DeploymentSuccess as i32,
                },
            )
            .await,
    );
    assert_eq!(msg, "deployment is not found");
    assert_not_found(
        env.api
            .get_latest_event(
                &me(),
                GetLatestEventRequest {
                    name: "image".into(),
                    labels: HashMap::new(),
                },
            )
            .await,
    );
    assert_not_found(
        env.api
            .get_application_shared_object(
                &me(),
                GetApplicationSharedObjectRequest {
                    application_id: "app-1".into(),
                    plugin_name: "kubernetes".into(),
                    key: "absent".into(),
                },
            )
            .await,
    );
    assert_not_found(
        env.api
            .get_latest_analysis_result(
                &me(),
                GetLatestAnalysisResultRequest {
                    application_id: "app-1".into(),
                },
            )
            .await,
    );
    assert_not_found(
        env.api
            .get_deployment(&me(), GetDeploymentRequest { id: "nope".into() })
            .await,
    );
    assert_not_found(
        env.api
            .get_desired_version(&caller(P1, "ghost"), GetDesiredVersionRequest {})
            .await,
    );
}

#[tokio::test]
async fn validation_errors_name_the_field() {
    let env = env().await;
    assert_invalid(
        env.api
            .report_application_sync_state(
                &me(),
                ReportApplicationSyncStateRequest {
                    application_id: String::new(),
                    state: Some(sync_state()),
                },
            )
            .await,
        "application_id",
    );
    assert_invalid(
        env.api
            .report_application_sync_state(
                &me(),
                ReportApplicationSyncStateRequest {
                    application_id: "app-1".into(),
                    state: None,
                },
            )
            .await,
        "state",
    );
    assert_invalid(
        env.api
            .create_deployment(&me(), CreateDeploymentRequest { deployment: None })
            .await,
        "deployment",
    );
    assert_invalid(
        env.api
            .report_deployment_status_changed(
                &me(),
                ReportDeploymentStatusChangedRequest {
                    deployment_id: "d".into(),
                    status: DeploymentStatus::DeploymentSuccess as i32,
                    ..Default::default()
                },
            )
            .await,
        "status",
    );
    assert_invalid(
        env.api
            .get_application_shared_object(
                &me(),
                GetApplicationSharedObjectRequest {
                    application_id: "app-1".into(),
                    plugin_name: "kubernetes".into(),
                    key: String::new(),
                },
            )
            .await,
        "key",
    );
    assert_invalid(
        env.api
            .report_command_handled(
                &me(),
                ReportCommandHandledRequest {
                    command_id: "c".into(),
                    status: CommandStatus::CommandSucceeded as i32,
                    handled_at: 0,
                    ..Default::default()
                },
            )
            .await,
        "handled_at",
    );
}

#[tokio::test]
async fn deployment_lifecycle() {
    let env = env().await;
    assert!(
        open_deployments(&env)
            .await
            .expect("list")
            .deployments
            .is_empty()
    );

    let mut d = deployment("", "piped-1", "app-1", "dep-1");
    d.project_id = P1.into();
    create_deployment(&env, d.clone()).await;
    // The same id again.
    match env
        .api
        .create_deployment(
            &me(),
            CreateDeploymentRequest {
                deployment: Some(d),
            },
        )
        .await
    {
        Err(ServiceError::AlreadyExists(_)) => {}
        other => panic!("want AlreadyExists, got {other:?}"),
    }

    let open = open_deployments(&env).await.expect("list");
    assert_eq!(
        open.deployments
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        vec!["dep-1"]
    );
    assert!(
        open.cursor.is_empty(),
        "the last page must carry an empty cursor"
    );

    // Planned, with stages whose `requires` name other stages.
    let stages = vec![
        stage("s-1", "K8S_CANARY_ROLLOUT", 0, &[]),
        stage("s-2", "WAIT_APPROVAL", 1, &["s-1"]),
        stage("s-3", "K8S_PRIMARY_ROLLOUT", 2, &["s-2"]),
    ];
    env.api
        .report_deployment_planned(
            &me(),
            ReportDeploymentPlannedRequest {
                deployment_id: "dep-1".into(),
                summary: "Canary then primary".into(),
                status_reason: "planned".into(),
                running_commit_hash: "abc".into(),
                running_config_filename: "app.pipecd.yaml".into(),
                sync_strategy: model::SyncStrategy::Pipeline as i32,
                stages: stages.clone(),
                ..Default::default()
            },
        )
        .await
        .expect("planned");
    let dep = env.stores.deployments.get(P1, "dep-1").await.expect("get");
    assert_eq!(dep.status, DeploymentStatus::DeploymentPlanned as i32);
    assert_eq!(dep.stages.len(), 3);
    assert_eq!(dep.stages[1].requires, vec!["s-1".to_string()]);
    assert_eq!(
        dep.stages[1].available_operation,
        model::ManualOperation::Approve as i32,
        "v0 WAIT_APPROVAL stages are approvable"
    );
    assert_eq!(
        dep.trigger.as_ref().map(|t| t.sync_strategy),
        Some(model::SyncStrategy::Pipeline as i32)
    );

    // Stage metadata: merged; an unknown stage is InvalidArgument.
    for (k, v) in [("a", "1"), ("b", "2")] {
        env.api
            .save_stage_metadata(
                &me(),
                SaveStageMetadataRequest {
                    deployment_id: "dep-1".into(),
                    stage_id: "s-1".into(),
                    metadata: labels(&[(k, v)]),
                },
            )
            .await
            .expect("stage metadata");
    }
    assert_invalid(
        env.api
            .save_stage_metadata(
                &me(),
                SaveStageMetadataRequest {
                    deployment_id: "dep-1".into(),
                    stage_id: "s-404".into(),
                    metadata: labels(&[("a", "1")]),
                },
            )
            .await,
        "s-404",
    );

    env.api
        .report_deployment_status_changed(
            &me(),
            ReportDeploymentStatusChangedRequest {
                deployment_id: "dep-1".into(),
                status: DeploymentStatus::DeploymentRunning as i32,
                status_reason: "running".into(),
                ..Default::default()
            },
        )
        .await
        .expect("running");

    // Stage logs, with a repeated index (deduplicated).
    let block = |index: i64, log: &str| LogBlock {
        index,
        log: log.into(),
        severity: 0,
        created_at: 1_700_000_000,
    };
    env.api
        .report_stage_logs(
            &me(),
            ReportStageLogsRequest {
                deployment_id: "dep-1".into(),
                stage_id: "s-1".into(),
                retried_count: 0,
                blocks: vec![block(0, "first"), block(1, "second")],
            },
        )
        .await
        .expect("logs");
    env.api
        .report_stage_logs(
            &me(),
            ReportStageLogsRequest {
                deployment_id: "dep-1".into(),
                stage_id: "s-1".into(),
                retried_count: 0,
                blocks: vec![block(1, "second again"), block(2, "third")],
            },
        )
        .await
        .expect("logs with a repeated index");
    env.api
        .report_stage_logs_from_last_checkpoint(
            &me(),
            ReportStageLogsFromLastCheckpointRequest {
                deployment_id: "dep-1".into(),
                stage_id: "s-1".into(),
                retried_count: 0,
                blocks: vec![block(3, "done")],
                completed: true,
            },
        )
        .await
        .expect("checkpoint");
    let log = env
        .stores
        .stage_logs
        .fetch("dep-1", "s-1", 0, 0)
        .await
        .expect("fetch logs");
    assert_eq!(
        log.blocks.iter().map(|b| b.index).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(log.blocks[1].log, "second");
    assert!(log.completed);
    assert_failed_precondition(
        env.api
            .report_stage_logs(
                &me(),
                ReportStageLogsRequest {
                    deployment_id: "dep-1".into(),
                    stage_id: "s-1".into(),
                    retried_count: 0,
                    blocks: vec![block(4, "late")],
                },
            )
            .await,
    );

    // Stage status: `requires` only replaced when given.
    let stage_req =
        |id: &str, status: StageStatus, requires: &[&str]| ReportStageStatusChangedRequest {
            deployment_id: "dep-1".into(),
            stage_id: id.into(),
            status: status as i32,
            status_reason: String::new(),
            requires: requires.iter().map(|s| s.to_string()).collect(),
            visible: true,
            retried_count: 0,
            completed_at: 1_700_000_100,
        };
    env.api
        .report_stage_status_changed(&me(), stage_req("s-1", StageStatus::StageSuccess, &[]))
        .await
        .expect("stage success");
    env.api
        .report_stage_status_changed(&me(), stage_req("s-2", StageStatus::StageRunning, &[]))
        .await
        .expect("stage running");
    env.api
        .report_stage_status_changed(&me(), stage_req("s-3", StageStatus::StageRunning, &["s-1"]))
        .await
        .expect("stage running with new requires");
    // A completed stage does not go back to running.
    assert_failed_precondition(
        env.api
            .report_stage_status_changed(&me(), stage_req("s-1", StageStatus::StageRunning, &[]))
            .await,
    );
    assert_invalid(
        env.api
            .report_stage_status_changed(&me(), stage_req("s-404", StageStatus::StageRunning, &[]))
            .await,
        "s-404",
    );
    let dep = env.stores.deployments.get(P1, "dep-1").await.expect("get");
    assert_eq!(dep.stages[0].status, StageStatus::StageSuccess as i32);
    assert_eq!(dep.stages[0].completed_at, 1_700_000_100);
    assert_eq!(dep.stages[0].metadata, labels(&[("a", "1"), ("b", "2")]));
    assert_eq!(
        dep.stages[1].requires,
        vec!["s-1".to_string()],
        "kept when none given"
    );
    assert_eq!(
        dep.stages[2].requires,
        vec!["s-1".to_string()],
        "replaced when given"
    );

    // Completion needs a completed status.
    let completed = |status: DeploymentStatus| ReportDeploymentCompletedRequest {
        deployment_id: "dep-1".into(),
        status: status as i32,
        status_reason: "done".into(),
        stage_statuses: [
            ("s-2".to_string(), StageStatus::StageSuccess as i32),
            ("s-3".to_string(), StageStatus::StageSuccess as i32),
        ]
        .into_iter()
        .collect(),
        completed_at: 1_700_000_200,
        ..Default::default()
    };
    assert_invalid(
        env.api
            .report_deployment_completed(&me(), completed(DeploymentStatus::DeploymentRunning))
            .await,
        "not a completed status",
    );
    env.api
        .report_deployment_completed(&me(), completed(DeploymentStatus::DeploymentSuccess))
        .await
        .expect("completed");
    // A retried report is fine; a different outcome or reopening is not.
    env.api
        .report_deployment_completed(&me(), completed(DeploymentStatus::DeploymentSuccess))
        .await
        .expect("completed again");
    assert_failed_precondition(
        env.api
            .report_deployment_completed(&me(), completed(DeploymentStatus::DeploymentFailure))
            .await,
    );
    assert_failed_precondition(
        env.api
            .report_deployment_status_changed(
                &me(),
                ReportDeploymentStatusChangedRequest {
                    deployment_id: "dep-1".into(),
                    status: DeploymentStatus::DeploymentRunning as i32,
                    ..Default::default()
                },
            )
            .await,
    );
    let dep = env.stores.deployments.get(P1, "dep-1").await.expect("get");
    assert_eq!(dep.status, DeploymentStatus::DeploymentSuccess as i32);
    assert_eq!(dep.completed_at, 1_700_000_200);
    assert!(
        dep.stages
            .iter()
            .all(|s| s.status == StageStatus::StageSuccess as i32)
    );

    // Most recent deployment references.
    let reference = model::ApplicationDeploymentReference {
        deployment_id: "dep-1".into(),
        trigger: Some(trigger()),
        summary: "Canary then primary".into(),
        started_at: 1_700_000_000,
        completed_at: 1_700_000_200,
        ..Default::default()
    };
    env.api
        .report_application_most_recent_deployment(
            &me(),
            ReportApplicationMostRecentDeploymentRequest {
                application_id: "app-1".into(),
                status: DeploymentStatus::DeploymentSuccess as i32,
                deployment: Some(reference.clone()),
            },
        )
        .await
        .expect("report most recent");
    let got = env
        .api
        .get_application_most_recent_deployment(
            &me(),
            GetApplicationMostRecentDeploymentRequest {
                application_id: "app-1".into(),
                status: DeploymentStatus::DeploymentSuccess as i32,
            },
        )
        .await
        .expect("get most recent");
    assert_eq!(got.deployment, Some(reference));
    assert_not_found(
        env.api
            .get_application_most_recent_deployment(
                &me(),
                GetApplicationMostRecentDeploymentRequest {
                    application_id: "app-1".into(),
                    status: DeploymentStatus::DeploymentPending as i32,
                },
            )
            .await,
    );

    let after = open_deployments(&env).await.expect("list");
    assert!(after.deployments.is_empty());
    assert!(after.cursor.is_empty());
    let got = env
        .api
        .get_deployment(&me(), GetDeploymentRequest { id: "dep-1".into() })
        .await
        .expect("get");
    assert_eq!(
        got.deployment.map(|d| d.status),
        Some(DeploymentStatus::DeploymentSuccess as i32)
    );
}

#[tokio::test]
async fn deployments_of_other_pipeds_and_projects() {
    let env = env().await;
    // Created directly: piped-2's deployment in P1, and one in P2.
    let mut theirs = deployment(P1, "piped-2", "app-2", "dep-2");
    theirs.stages = vec![stage("s-1", "K8S_SYNC", 0, &[])];
    env.stores.deployments.create(theirs).await.expect("seed");
    env.stores
        .deployments
        .create(deployment(P2, "piped-x", "app-x", "dep-x"))
        .await
        .expect("seed");

    assert_permission_denied(
        env.api
            .get_deployment(&me(), GetDeploymentRequest { id: "dep-2".into() })
            .await,
    );
    assert_not_found(
        env.api
            .get_deployment(&me(), GetDeploymentRequest { id: "dep-x".into() })
            .await,
    );
    assert_permission_denied(
        env.api
            .report_deployment_planned(
                &me(),
                ReportDeploymentPlannedRequest {
                    deployment_id: "dep-2".into(),
                    ..Default::default()
                },
            )
            .await,
    );
    assert_not_found(
        env.api
            .report_deployment_planned(
                &me(),
                ReportDeploymentPlannedRequest {
                    deployment_id: "dep-x".into(),
                    ..Default::default()
                },
            )
            .await,
    );
    for _ in 0..2 {
        assert_permission_denied(
            env.api
                .report_stage_logs(
                    &me(),
                    ReportStageLogsRequest {
                        deployment_id: "dep-2".into(),
                        stage_id: "s-1".into(),
                        ..Default::default()
                    },
                )
                .await,
        );
    }
    assert_permission_denied(
        env.api
            .save_deployment_plugin_metadata(
                &me(),
                SaveDeploymentPluginMetadataRequest {
                    deployment_id: "dep-2".into(),
                    plugin_name: "kubernetes".into(),
                    metadata: labels(&[("a", "1")]),
                },
            )
            .await,
    );
    // piped-2 does not see piped-1's open deployments, nor the other project's.
    let open = env
        .api
        .list_not_completed_deployments(&me(), ListNotCompletedDeploymentsRequest::default())
        .await
        .expect("list");
    assert!(open.deployments.is_empty());

    // Creating: the app must be ours, and the deployment must name our piped and project.
    assert_permission_denied(
        env.api
            .create_deployment(
                &me(),
                CreateDeploymentRequest {
                    deployment: Some(deployment(P1, "piped-1", "app-2", "d-a")),
                },
            )
            .await,
    );
    assert!(matches!(
        env.api
            .create_deployment(
                &me(),
                CreateDeploymentRequest {
                    deployment: Some(deployment(P1, "piped-2", "app-1", "d-b"))
                },
            )
            .await,
        Err(ServiceError::PermissionDenied(_))
    ));
    assert!(matches!(
        env.api
            .create_deployment(
                &me(),
                CreateDeploymentRequest {
                    deployment: Some(deployment(P2, "piped-1", "app-1", "d-c"))
                },
            )
            .await,
        Err(ServiceError::PermissionDenied(_))
    ));
    assert_not_found(
        env.api
            .create_deployment(
                &me(),
                CreateDeploymentRequest {
                    deployment: Some(deployment(P1, "piped-1", "app-x", "d-d")),
                },
            )
            .await,
    );
}

#[tokio::test]
async fn deployment_metadata_merges_without_metadata_v2() {
    let env = env().await;
    create_deployment(&env, deployment(P1, "piped-1", "app-1", "dep-m")).await;
    assert!(
        env.stores
            .deployments
            .get(P1, "dep-m")
            .await
            .expect("get")
            .metadata_v2
            .is_none()
    );
    for (k, v) in [("a", "1"), ("b", "2"), ("a", "3")] {
        env.api
            .save_deployment_shared_metadata(
                &me(),
                SaveDeploymentSharedMetadataRequest {
                    deployment_id: "dep-m".into(),
                    metadata: labels(&[(k, v)]),
                },
            )
            .await
            .expect("shared");
        env.api
            .save_deployment_plugin_metadata(
                &me(),
                SaveDeploymentPluginMetadataRequest {
                    deployment_id: "dep-m".into(),
                    plugin_name: "kubernetes".into(),
                    metadata: labels(&[(k, v)]),
                },
            )
            .await
            .expect("plugin");
        env.api
            .save_deployment_metadata(
                &me(),
                SaveDeploymentMetadataRequest {
                    deployment_id: "dep-m".into(),
                    metadata: labels(&[(k, v)]),
                },
            )
            .await
            .expect("deprecated metadata");
    }
    let dep = env.stores.deployments.get(P1, "dep-m").await.expect("get");
    let want = labels(&[("a", "3"), ("b", "2")]);
    let v2 = dep.metadata_v2.expect("metadata_v2");
    assert_eq!(v2.shared.map(|s| s.key_values), Some(want.clone()));
    assert_eq!(
        v2.plugins.get("kubernetes").map(|p| p.key_values.clone()),
        Some(want.clone())
    );
    assert_eq!(dep.metadata, want);
}

#[tokio::test]
async fn commands_flow() {
    let env = env().await;
    for c in [
        command(P1, "piped-1", "cmd-1"),
        command(P1, "piped-1", "cmd-2"),
        command(P1, "piped-2", "cmd-3"),
        command(P2, "piped-x", "cmd-x"),
    ] {
        env.stores.commands.create(c).await.expect("seed command");
    }
    let mut ids: Vec<_> = unhandled(&env, &me())
        .await
        .expect("list")
        .commands
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort();
    assert_eq!(ids, vec!["cmd-1", "cmd-2"]);

    let handled = |id: &str, output: &[u8]| ReportCommandHandledRequest {
        command_id: id.into(),
        status: CommandStatus::CommandSucceeded as i32,
        metadata: labels(&[("result", "ok")]),
        handled_at: 1_700_000_300,
        output: output.to_vec(),
    };
    env.api
        .report_command_handled(&me(), handled("cmd-1", b""))
        .await
        .expect("handled");
    env.api
        .report_command_handled(&me(), handled("cmd-2", b"{\"plan\":1}"))
        .await
        .expect("handled");
    let cmd = env.stores.commands.get(P1, "cmd-2").await.expect("get");
    assert_eq!(cmd.status, CommandStatus::CommandSucceeded as i32);
    assert_eq!(cmd.handled_at, 1_700_000_300);
    assert_eq!(cmd.metadata, labels(&[("result", "ok")]));
    assert_eq!(
        env.stores
            .command_outputs
            .get("cmd-2")
            .await
            .expect("output"),
        b"{\"plan\":1}".to_vec()
    );
    assert!(
        unhandled(&env, &me())
            .await
            .expect("list")
            .commands
            .is_empty()
    );

    // Another piped's command, with or without output; another project's.
    assert_permission_denied(
        env.api
            .report_command_handled(&me(), handled("cmd-3", b""))
            .await,
    );
    assert_permission_denied(
        env.api
            .report_command_handled(&me(), handled("cmd-3", b"x"))
            .await,
    );
    assert!(
        env.stores.command_outputs.get("cmd-3").await.is_err(),
        "no output written"
    );
    assert_not_found(
        env.api
            .report_command_handled(&me(), handled("cmd-x", b""))
            .await,
    );
    assert_not_found(
        env.api
            .report_command_handled(&me(), handled("cmd-x", b"x"))
            .await,
    );
    let theirs = env.stores.commands.get(P1, "cmd-3").await.expect("get");
    assert_eq!(theirs.status, CommandStatus::CommandNotHandledYet as i32);
}

#[tokio::test]
async fn events_flow() {
    let env = env().await;
    for e in [
        event(P1, "ev-1", "image", &[("app", "web")], 1_000),
        event(P1, "ev-2", "image", &[("app", "web")], 2_000),
        event(P1, "ev-3", "image", &[("app", "api")], 3_000),
        event(P1, "ev-4", "helm", &[], 4_000),
        event(P2, "ev-x", "image", &[("app", "web")], 5_000),
    ] {
        env.stores.events.create(e).await.expect("seed event");
    }
    let latest = env
        .api
        .get_latest_event(
            &me(),
            GetLatestEventRequest {
                name: "image".into(),
                labels: labels(&[("app", "web")]),
            },
        )
        .await
        .expect("latest");
    assert_eq!(latest.event.map(|e| e.id), Some("ev-2".to_string()));
    // Labels must match exactly: a subset is another key.
    assert_not_found(
        env.api
            .get_latest_event(
                &me(),
                GetLatestEventRequest {
                    name: "image".into(),
                    labels: HashMap::new(),
                },
            )
            .await,
    );

    let c = me();
    let list = |from: i64, to: i64, order: ListOrder, status: list_events_request::Status| {
        env.api.list_events(
            &c,
            ListEventsRequest {
                from,
                to,
                order: order as i32,
                status: status as i32,
            },
        )
    };
    let ids = |r: ListEventsResponse| r.events.into_iter().map(|e| e.id).collect::<Vec<_>>();
    use list_events_request::Status as S;
    assert_eq!(
        ids(list(0, 0, ListOrder::Asc, S::All).await.expect("list")),
        vec!["ev-1", "ev-2", "ev-3", "ev-4"]
    );
    assert_eq!(
        ids(list(2_000, 4_000, ListOrder::Desc, S::All)
            .await
            .expect("list")),
        vec!["ev-3", "ev-2"],
        "from is inclusive, to exclusive"
    );

    let report = |id: &str, status: EventStatus| ReportEventStatusesRequest {
        events: vec![report_event_statuses_request::Event {
            id: id.into(),
            status: status as i32,
            status_description: "handled by piped-1".into(),
        }],
    };
    env.api
        .report_event_statuses(&me(), report("ev-2", EventStatus::EventSuccess))
        .await
        .expect("report");
    env.api
        .report_event_statuses(&me(), report("ev-1", EventStatus::EventOutdated))
        .await
        .expect("report");
    let ev2 = env.stores.events.get(P1, "ev-2").await.expect("get");
    assert_eq!(ev2.status, EventStatus::EventSuccess as i32);
    assert!(ev2.handled_at > 0);
    assert_eq!(
        env.stores
            .events
            .get(P1, "ev-1")
            .await
            .expect("get")
            .handled_at,
        0
    );
    assert_eq!(
        ids(list(0, 0, ListOrder::None, S::Success).await.expect("list")),
        vec!["ev-2"]
    );
    assert_eq!(
        ids(list(0, 0, ListOrder::Asc, S::NotHandled)
            .await
            .expect("list")),
        vec!["ev-3", "ev-4"]
    );

    // Another project's event is not ours to update.
    assert_not_found(
        env.api
            .report_event_statuses(&me(), report("ev-x", EventStatus::EventFailure))
            .await,
    );
    assert_eq!(
        env.stores.events.get(P2, "ev-x").await.expect("get").status,
        EventStatus::EventNotHandled as i32
    );
    assert_invalid(
        env.api
            .report_event_statuses(
                &me(),
                ReportEventStatusesRequest {
                    events: vec![report_event_statuses_request::Event {
                        id: "ev-3".into(),
                        status: EventStatus::EventSuccess as i32,
                        status_description: String::new(),
                    }],
                },
            )
            .await,
        "status_description",
    );
}

#[tokio::test]
async fn deployment_chain_creation_and_plannability() {
    let env = env().await;
    let mut web = app(P1, "piped-2", "app-web", "web");
    web.labels = labels(&[("tier", "front")]);
    let mut web2 = app(P1, "piped-1", "app-web2", "web2");
    web2.labels = labels(&[("tier", "front")]);
    web2.kind = ApplicationKind::Terraform as i32;
    let mut off = app(P1, "piped-2", "app-off", "web");
    off.disabled = true;
    for a in [web, web2, off, app(P2, "piped-x", "app-x-web", "web")] {
        env.stores.applications.create(a).await.expect("seed");
    }
    let matcher = |name: &str, kind: &str, lbls: &[(&str, &str)]| {
        create_deployment_chain_request::ApplicationMatcher {
            name: name.into(),
            kind: kind.into(),
            labels: labels(lbls),
        }
    };
    env.api
        .create_deployment_chain(
            &me(),
            CreateDeploymentChainRequest {
                first_deployment: Some(deployment(P1, "piped-1", "app-1", "dep-first")),
                matchers: vec![
                    matcher("web", "", &[]),
                    matcher("", "TERRAFORM", &[("tier", "front")]),
                ],
            },
        )
        .await
        .expect("create chain");

    let first = env
        .stores
        .deployments
        .get(P1, "dep-first")
        .await
        .expect("first deployment");
    assert!(!first.deployment_chain_id.is_empty());
    assert_eq!(first.deployment_chain_block_index, 0);
    let chain = env
        .stores
        .deployment_chains
        .get(P1, &first.deployment_chain_id)
        .await
        .expect("chain");
    assert_eq!(chain.blocks.len(), 3);
    let block_apps = |i: usize| {
        chain.blocks[i]
            .nodes
            .iter()
            .filter_map(|n| n.application_ref.as_ref().map(|a| a.application_id.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(block_apps(0), vec!["app-1"]);
    assert_eq!(
        chain.blocks[0].nodes[0]
            .deployment_ref
            .as_ref()
            .map(|d| d.deployment_id.as_str()),
        Some("dep-first")
    );
    assert_eq!(
        block_apps(1),
        vec!["app-web"],
        "enabled, same project, by name"
    );
    assert_eq!(block_apps(2), vec!["app-web2"], "by kind and labels");

    // One CHAIN_SYNC_APPLICATION command per app of the other blocks, to its piped.
    let cmds2 = env
        .api
        .list_unhandled_commands(&caller(P1, "piped-2"), ListUnhandledCommandsRequest {})
        .await
        .expect("list");
    assert_eq!(cmds2.commands.len(), 1);
    let sync = cmds2.commands[0]
        .chain_sync_application
        .clone()
        .expect("payload");
    assert_eq!(sync.deployment_chain_id, chain.id);
    assert_eq!(sync.block_index, 1);
    assert_eq!(sync.application_id, "app-web");
    assert_eq!(cmds2.commands[0].commander, chain.id);
    assert_eq!(
        cmds2.commands[0].r#type,
        model::command::Type::ChainSyncApplication as i32
    );
    let cmds1 = env
        .api
        .list_unhandled_commands(&me(), ListUnhandledCommandsRequest {})
        .await
        .expect("list");
    assert_eq!(cmds1.commands.len(), 1);
    assert_eq!(
        cmds1.commands[0]
            .chain_sync_application
            .as_ref()
            .map(|c| c.block_index),
        Some(2)
    );

    let plannable = |index: u32| InChainDeploymentPlannableRequest {
        deployment_id: "dep-first".into(),
        deployment_chain_id: chain.id.clone(),
        deployment_chain_block_index: index,
    };
    let r = env
        .api
        .in_chain_deployment_plannable(&me(), plannable(0))
        .await
        .expect("block 0");
    assert!(r.plannable && !r.cancel);
    let r = env
        .api
        .in_chain_deployment_plannable(&me(), plannable(1))
        .await
        .expect("block 1");
    assert!(!r.plannable && !r.cancel, "previous block still pending");
    assert_invalid(
        env.api
            .in_chain_deployment_plannable(&me(), plannable(3))
            .await,
        "block index",
    );
    assert_invalid(
        env.api
            .in_chain_deployment_plannable(
                &me(),
                InChainDeploymentPlannableRequest {
                    deployment_id: "dep-first".into(),
                    deployment_chain_id: "no-such-chain".into(),
                    deployment_chain_block_index: 0,
                },
            )
            .await,
        "deployment chain",
    );

    // The chain controller (not this service) moves blocks on; emulate it.
    env.stores
        .deployment_chains
        .update(P1, &chain.id, |c| {
            c.blocks[0].status = ChainBlockStatus::DeploymentBlockSuccess as i32;
            c.blocks[1].status = ChainBlockStatus::DeploymentBlockFailure as i32;
            Ok(())
        })
        .await
        .expect("advance chain");
    let r = env
        .api
        .in_chain_deployment_plannable(&me(), plannable(0))
        .await
        .expect("block 0");
    assert!(
        r.cancel && r.cancel_reason.contains("DEPLOYMENT_BLOCK_SUCCESS"),
        "{r:?}"
    );
    let r = env
        .api
        .in_chain_deployment_plannable(&me(), plannable(2))
        .await
        .expect("block 2");
    assert!(
        r.cancel && !r.plannable && r.cancel_reason.contains("FAILURE"),
        "{r:?}"
    );

    // Unknown kinds are refused; the first app must be ours.
    assert_invalid(
        env.api
            .create_deployment_chain(
                &me(),
                CreateDeploymentChainRequest {
                    first_deployment: Some(deployment(P1, "piped-1", "app-1", "dep-k")),
                    matchers: vec![matcher("", "NOT_A_KIND", &[])],
                },
            )
            .await,
        "kind",
    );
    assert_permission_denied(
        env.api
            .create_deployment_chain(
                &me(),
                CreateDeploymentChainRequest {
                    first_deployment: Some(deployment(P1, "piped-1", "app-2", "dep-p")),
                    matchers: vec![],
                },
            )
            .await,
    );
}

#[tokio::test]
async fn piped_meta_stat_and_desired_version() {
    let env = env().await;
    let resp = env
        .api
        .report_piped_meta(
            &me(),
            ReportPipedMetaRequest {
                version: "v0.57.1".into(),
                cloud_providers: vec![model::piped::CloudProvider {
                    name: "legacy".into(),
                    r#type: "KUBERNETES".into(),
                }],
                platform_providers: vec![model::piped::PlatformProvider {
                    name: "k8s".into(),
                    r#type: "KUBERNETES".into(),
                }],
                plugins: vec![model::piped::Plugin {
                    name: "kubernetes".into(),
                    deploy_targets: vec!["cluster-1".into()],
                }],
                repositories: vec![model::ApplicationGitRepository {
                    id: "repo-1".into(),
                    remote: "git@example.com:org/repo.git".into(),
                    branch: "main".into(),
                }],
                secret_encryption: Some(model::piped::SecretEncryption {
                    r#type: "NONE".into(),
                    ..Default::default()
                }),
                config: "apiVersion: pipecd.dev/v1beta1".into(),
            },
        )
        .await
        .expect("meta");
    assert_eq!(resp.name, "name-of-piped-1");
    assert_eq!(resp.web_base_url, "https://wisp.example.com");
    let p = env.stores.pipeds.get(P1, "piped-1").await.expect("get");
    assert_eq!(
        p.platform_providers
            .iter()
            .map(|pp| pp.name.as_str())
            .collect::<Vec<_>>(),
        vec!["legacy", "k8s"]
    );
    assert!(p.cloud_providers.is_empty());
    assert_eq!(p.plugins.len(), 1);
    assert_eq!(p.version, "v0.57.1");
    assert!(p.started_at > 0);

    let v = env
        .api
        .get_desired_version(&me(), GetDesiredVersionRequest {})
        .await
        .expect("version");
    assert_eq!(v.version, "v0.57.1");

    let stat = env
        .api
        .report_stat(
            &me(),
            ReportStatRequest {
                piped_stats: b"# metrics".to_vec(),
            },
        )
        .await
        .expect("stat");
    assert_eq!(stat.report_interval, 0);
    let stored = env
        .stores
        .piped_stats
        .get("piped-1")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(stored.metrics, b"# metrics".to_vec());
}

#[tokio::test]
async fn live_state_analysis_and_shared_objects() {
    let env = env().await;
    let snapshot = |app_id: &str| model::ApplicationLiveStateSnapshot {
        application_id: app_id.into(),
        piped_id: "piped-1".into(),
        project_id: P1.into(),
        kubernetes: Some(model::KubernetesApplicationLiveState { resources: vec![] }),
        version: Some(model::ApplicationLiveStateVersion {
            timestamp: 1_700_000_000,
            index: 1,
        }),
        ..Default::default()
    };
    env.api
        .report_application_live_state(
            &me(),
            ReportApplicationLiveStateRequest {
                snapshot: Some(snapshot("app-1")),
            },
        )
        .await
        .expect("live state");
    assert_permission_denied(
        env.api
            .report_application_live_state(
                &me(),
                ReportApplicationLiveStateRequest {
                    snapshot: Some(snapshot("app-2")),
                },
            )
            .await,
    );

    let resource = |id: &str| model::KubernetesResourceState {
        id: id.into(),
        name: id.into(),
        api_version: "v1".into(),
        kind: "Pod".into(),
        created_at: 1_700_000_001,
        updated_at: 1_700_000_001,
        ..Default::default()
    };
    let ev = |id: &str, app_id: &str| model::KubernetesResourceStateEvent {
        id: id.into(),
        application_id: app_id.into(),
        r#type: model::kubernetes_resource_state_event::Type::AddOrUpdated as i32,
        state: Some(resource(&format!("res-{id}"))),
        snapshot_version: Some(model::ApplicationLiveStateVersion {
            timestamp: 1_700_000_001,
            index: 2,
        }),
        created_at: 1_700_000_001,
    };
    let resp = env
        .api
        .report_application_live_state_events(
            &me(),
            ReportApplicationLiveStateEventsRequest {
                kubernetes_events: vec![ev("e1", "app-1"), ev("e2", "app-2"), ev("e3", "app-x")],
            },
        )
        .await
        .expect("events");
    let mut failed = resp.failed_ids;
    failed.sort();
    assert_eq!(
        failed,
        vec!["e2", "e3"],
        "events of apps that are not ours are skipped"
    );
    let state = env.stores.live_states.get("app-1").await.expect("snapshot");
    let ids: Vec<_> = state
        .kubernetes
        .map(|k| k.resources.into_iter().map(|r| r.id).collect())
        .unwrap_or_default();
    assert_eq!(ids, vec!["res-e1"]);

    // Analysis results (v0).
    env.api
        .put_latest_analysis_result(
            &me(),
            PutLatestAnalysisResultRequest {
                application_id: "app-1".into(),
                analysis_result: Some(model::AnalysisResult {
                    start_time: 1_700_000_000,
                }),
            },
        )
        .await
        .expect("put analysis");
    let got = env
        .api
        .get_latest_analysis_result(
            &me(),
            GetLatestAnalysisResultRequest {
                application_id: "app-1".into(),
            },
        )
        .await
        .expect("get analysis");
    assert_eq!(
        got.analysis_result.map(|r| r.start_time),
        Some(1_700_000_000)
    );
    assert_permission_denied(
        env.api
            .get_latest_analysis_result(
                &me(),
                GetLatestAnalysisResultRequest {
                    application_id: "app-2".into(),
                },
            )
            .await,
    );

    // Shared objects (v1).
    env.api
        .put_application_shared_object(
            &me(),
            PutApplicationSharedObjectRequest {
                application_id: "app-1".into(),
                plugin_name: "kubernetes".into(),
                key: "last-applied".into(),
                object: b"{\"x\":1}".to_vec(),
            },
        )
        .await
        .expect("put object");
    let got = env
        .api
        .get_application_shared_object(
            &me(),
            GetApplicationSharedObjectRequest {
                application_id: "app-1".into(),
                plugin_name: "kubernetes".into(),
                key: "last-applied".into(),
            },
        )
        .await
        .expect("get object");
    assert_eq!(got.object, b"{\"x\":1}".to_vec());
}

#[tokio::test]
async fn application_configurations() {
    let env = env().await;
    let info = |id: &str, name: &str| model::ApplicationInfo {
        id: id.into(),
        name: name.into(),
        kind: 0,
        labels: labels(&[("env", "prod")]),
        repo_id: "repo-1".into(),
        path: "apps/app".into(),
        config_filename: "app.pipecd.yaml".into(),
        piped_id: "piped-1".into(),
        description: "from git".into(),
    };
    // One foreign app in the batch: nothing is updated.
    assert_permission_denied(
        env.api
            .update_application_configurations(
                &me(),
                UpdateApplicationConfigurationsRequest {
                    applications: vec![info("app-1", "renamed"), info("app-2", "stolen")],
                },
            )
            .await,
    );
    assert_eq!(
        env.stores
            .applications
            .get(P1, "app-1")
            .await
            .expect("get")
            .name,
        "one"
    );
    env.api
        .update_application_configurations(
            &me(),
            UpdateApplicationConfigurationsRequest {
                applications: vec![info("app-1", "renamed")],
            },
        )
        .await
        .expect("update");
    let a = env.stores.applications.get(P1, "app-1").await.expect("get");
    assert_eq!(a.name, "renamed");
    assert_eq!(a.description, "from git");
    assert_eq!(a.labels, labels(&[("env", "prod")]));

    env.api
        .report_unregistered_application_configurations(
            &me(),
            ReportUnregisteredApplicationConfigurationsRequest {
                applications: vec![info("", "new-app")],
            },
        )
        .await
        .expect("unregistered");
    let listed = env.stores.unregistered_apps.list(P1).await.expect("list");
    assert_eq!(
        listed.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        vec!["new-app"]
    );
    assert!(
        env.stores
            .unregistered_apps
            .list(P2)
            .await
            .expect("list")
            .is_empty()
    );
}

/// A retried CreateDeploymentChain (the piped timed out and called again) makes one
/// chain, one first deployment and one command per application, not one set per try.
#[tokio::test]
async fn a_retried_chain_creation_makes_nothing_twice() {
    let env = env().await;
    env.stores
        .applications
        .create(app(P1, "piped-2", "app-web", "web"))
        .await
        .expect("seed");
    let request = || CreateDeploymentChainRequest {
        first_deployment: Some(deployment(P1, "piped-1", "app-1", "dep-retried")),
        matchers: vec![create_deployment_chain_request::ApplicationMatcher {
            name: "web".into(),
            ..Default::default()
        }],
    };
    for _ in 0..3 {
        env.api
            .create_deployment_chain(&me(), request())
            .await
            .expect("create chain (again)");
    }
    let chains = env
        .stores
        .deployment_chains
        .list_all(wisp_store::entities::slot::CHAIN_BY_PROJECT, P1, None)
        .await
        .expect("chains");
    assert_eq!(chains.len(), 1, "{chains:?}");
    let first = env
        .stores
        .deployments
        .get(P1, "dep-retried")
        .await
        .expect("first deployment");
    assert_eq!(first.deployment_chain_id, chains[0].id);
    let commands = env
        .stores
        .commands
        .list_all(
            wisp_store::entities::slot::COMMAND_UNHANDLED,
            wisp_store::entities::pk::COMMAND_UNHANDLED,
            None,
        )
        .await
        .expect("commands");
    let chain_commands: Vec<_> = commands
        .iter()
        .filter(|c| c.commander == chains[0].id)
        .collect();
    assert_eq!(chain_commands.len(), 1, "{chain_commands:?}");
}
