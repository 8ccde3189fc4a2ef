//! PipedService end to end: the real `wisp serve` on a fresh data directory, pipeds and
//! applications registered with the admin CLI, and the generated tonic client over a real
//! socket (native gRPC, HTTP/2 cleartext) driving all 36 RPCs as a piped does.

use crate::support;

use std::time::Duration;

use tonic::Code;
use wisp_proto::model::{self, CommandStatus, DeploymentStatus, command};
use wisp_proto::pipedservice::create_deployment_chain_request::ApplicationMatcher;
use wisp_proto::pipedservice::list_events_request::Status as EventFilter;
use wisp_proto::pipedservice::report_event_statuses_request::Event as ReportedEvent;
use wisp_proto::pipedservice::*;

use support::fixtures::{self, now, string_map};
use support::scenarios::{self, app_ids, deployment_ids};
use support::{QUICKSTART, Via, Wisp, assert_status, legacy_call, ok};

#[tokio::test]
async fn every_rpc_requires_credentials() {
    scenarios::every_rpc_requires_credentials(Via::Grpc).await;
}

#[tokio::test]
async fn auth_cases() {
    scenarios::auth_cases(Via::Grpc).await;
}

#[tokio::test]
async fn deployment_lifecycle() {
    scenarios::deployment_lifecycle(Via::Grpc).await;
}

#[tokio::test]
async fn large_messages() {
    scenarios::large_messages(Via::Grpc).await;
}

/// Two pipeds of one project: each one's applications, deployments and commands are off
/// limits to the other (PERMISSION_DENIED), and nothing they try changes anything. A piped
/// of another project does not even see them (NOT_FOUND).
#[tokio::test]
async fn another_pipeds_objects_are_permission_denied() {
    let wisp = Wisp::start();
    wisp.add_project("other");
    let alice = wisp.add_piped(QUICKSTART, "alice");
    let bob = wisp.add_piped(QUICKSTART, "bob");
    let stranger = wisp.add_piped("other", "stranger");
    let alice_app = wisp.add_app(&alice, "alice-app", &[]);
    let bob_app = wisp.add_app(&bob, "bob-app", &[("team", "bob")]);
    let mut a = wisp.piped_client(Via::Grpc, &alice).await;
    let mut b = wisp.piped_client(Via::Grpc, &bob).await;
    let mut s = wisp.piped_client(Via::Grpc, &stranger).await;

    // Bob's deployment, and a command for bob (alice starts a chain that syncs bob's app).
    let bob_dep = "dep-bob";
    ok(b.create_deployment(CreateDeploymentRequest {
        deployment: Some(fixtures::deployment(&bob, bob_dep, &bob_app, "bob-app")),
    })
    .await);
    ok(b.report_deployment_planned(ReportDeploymentPlannedRequest {
        deployment_id: bob_dep.into(),
        stages: vec![fixtures::stage("stage-0", "K8S_SYNC", 0, &[])],
        ..Default::default()
    })
    .await);
    ok(a.create_deployment_chain(CreateDeploymentChainRequest {
        first_deployment: Some(fixtures::deployment(
            &alice,
            "dep-alice",
            &alice_app,
            "alice-app",
        )),
        matchers: vec![ApplicationMatcher {
            name: "bob-app".into(),
            ..Default::default()
        }],
    })
    .await);
    let bob_commands = ok(b
        .list_unhandled_commands(ListUnhandledCommandsRequest::default())
        .await)
    .commands;
    assert_eq!(bob_commands.len(), 1, "{bob_commands:?}");
    let bob_command = bob_commands[0].id.clone();

    // Lists are per piped.
    let apps = ok(a
        .list_applications(ListApplicationsRequest::default())
        .await);
    assert_eq!(app_ids(&apps.applications), vec![alice_app.clone()]);
    let open = ok(a
        .list_not_completed_deployments(ListNotCompletedDeploymentsRequest::default())
        .await);
    assert_eq!(
        deployment_ids(&open.deployments),
        vec!["dep-alice".to_string()]
    );
    assert!(
        ok(
            a.list_unhandled_commands(ListUnhandledCommandsRequest::default())
                .await
        )
        .commands
        .is_empty()
    );

    let denied = |result: Result<(), tonic::Status>, what: &str| match result {
        Err(status) if status.code() == Code::PermissionDenied => {}
        other => panic!("{what}: expected PERMISSION_DENIED, got {other:?}"),
    };
    // Bob's application.
    let app = bob_app.clone();
    denied(
        a.report_application_sync_state(ReportApplicationSyncStateRequest {
            application_id: app.clone(),
            state: Some(synced_state()),
        })
        .await
        .map(drop),
        "ReportApplicationSyncState",
    );
    denied(
        a.report_application_deploying_status(ReportApplicationDeployingStatusRequest {
            application_id: app.clone(),
            deploying: true,
        })
        .await
        .map(drop),
        "ReportApplicationDeployingStatus",
    );
    denied(
        a.report_application_most_recent_deployment(ReportApplicationMostRecentDeploymentRequest {
            application_id: app.clone(),
            status: DeploymentStatus::DeploymentSuccess as i32,
            deployment: Some(fixtures::deployment_reference(bob_dep)),
        })
        .await
        .map(drop),
        "ReportApplicationMostRecentDeployment",
    );
    denied(
        a.get_application_most_recent_deployment(GetApplicationMostRecentDeploymentRequest {
            application_id: app.clone(),
            status: DeploymentStatus::DeploymentSuccess as i32,
        })
        .await
        .map(drop),
        "GetApplicationMostRecentDeployment",
    );
    denied(
        a.update_application_configurations(UpdateApplicationConfigurationsRequest {
            applications: vec![fixtures::application_info(&alice, &app, "stolen", &[])],
        })
        .await
        .map(drop),
        "UpdateApplicationConfigurations",
    );
    denied(
        a.report_application_live_state(ReportApplicationLiveStateRequest {
            snapshot: Some(fixtures::live_state_snapshot(&alice, &app, vec![])),
        })
        .await
        .map(drop),
        "ReportApplicationLiveState",
    );
    denied(
        a.get_latest_analysis_result(GetLatestAnalysisResultRequest {
            application_id: app.clone(),
        })
        .await
        .map(drop),
        "GetLatestAnalysisResult",
    );
    denied(
        a.put_latest_analysis_result(PutLatestAnalysisResultRequest {
            application_id: app.clone(),
            analysis_result: Some(model::AnalysisResult { start_time: now() }),
        })
        .await
        .map(drop),
        "PutLatestAnalysisResult",
    );
    denied(
        a.get_application_shared_object(GetApplicationSharedObjectRequest {
            application_id: app.clone(),
            plugin_name: "kubernetes".into(),
            key: "k".into(),
        })
        .await
        .map(drop),
        "GetApplicationSharedObject",
    );
    denied(
        a.put_application_shared_object(PutApplicationSharedObjectRequest {
            application_id: app.clone(),
            plugin_name: "kubernetes".into(),
            key: "k".into(),
            object: b"stolen".to_vec(),
        })
        .await
        .map(drop),
        "PutApplicationSharedObject",
    );
    denied(
        a.create_deployment(CreateDeploymentRequest {
            deployment: Some(fixtures::deployment(&alice, "dep-x", &app, "bob-app")),
        })
        .await
        .map(drop),
        "CreateDeployment of another piped's application",
    );
    // A deployment of alice's own application that names bob's piped.
    denied(
        a.create_deployment(CreateDeploymentRequest {
            deployment: Some(fixtures::deployment(&bob, "dep-y", &alice_app, "alice-app")),
        })
        .await
        .map(drop),
        "CreateDeployment naming another piped",
    );
    let mut elsewhere = fixtures::deployment(&alice, "dep-w", &alice_app, "alice-app");
    elsewhere.project_id = "other".into();
    denied(
        a.create_deployment(CreateDeploymentRequest {
            deployment: Some(elsewhere),
        })
        .await
        .map(drop),
        "CreateDeployment naming another project",
    );
    denied(
        a.create_deployment_chain(CreateDeploymentChainRequest {
            first_deployment: Some(fixtures::deployment(&alice, "dep-z", &app, "bob-app")),
            matchers: vec![],
        })
        .await
        .map(drop),
        "CreateDeploymentChain",
    );

    // Bob's deployment.
    let dep = bob_dep.to_string();
    denied(
        a.get_deployment(GetDeploymentRequest { id: dep.clone() })
            .await
            .map(drop),
        "GetDeployment",
    );
    denied(
        a.report_deployment_planned(ReportDeploymentPlannedRequest {
            deployment_id: dep.clone(),
            ..Default::default()
        })
        .await
        .map(drop),
        "ReportDeploymentPlanned",
    );
    denied(
        a.report_deployment_status_changed(ReportDeploymentStatusChangedRequest {
            deployment_id: dep.clone(),
            status: DeploymentStatus::DeploymentRunning as i32,
            ..Default::default()
        })
        .await
        .map(drop),
        "ReportDeploymentStatusChanged",
    );
    denied(
        a.report_deployment_completed(ReportDeploymentCompletedRequest {
            deployment_id: dep.clone(),
            status: DeploymentStatus::DeploymentCancelled as i32,
            completed_at: now(),
            ..Default::default()
        })
        .await
        .map(drop),
        "ReportDeploymentCompleted",
    );
    denied(
        a.save_deployment_metadata(SaveDeploymentMetadataRequest {
            deployment_id: dep.clone(),
            metadata: string_map(&[("k", "v")]),
        })
        .await
        .map(drop),
        "SaveDeploymentMetadata",
    );
    denied(
        a.save_deployment_shared_metadata(SaveDeploymentSharedMetadataRequest {
            deployment_id: dep.clone(),
            metadata: string_map(&[("k", "v")]),
        })
        .await
        .map(drop),
        "SaveDeploymentSharedMetadata",
    );
    denied(
        a.save_deployment_plugin_metadata(SaveDeploymentPluginMetadataRequest {
            deployment_id: dep.clone(),
            plugin_name: "kubernetes".into(),
            metadata: string_map(&[("k", "v")]),
        })
        .await
        .map(drop),
        "SaveDeploymentPluginMetadata",
    );
    denied(
        a.save_stage_metadata(SaveStageMetadataRequest {
            deployment_id: dep.clone(),
            stage_id: "stage-0".into(),
            metadata: string_map(&[("k", "v")]),
        })
        .await
        .map(drop),
        "SaveStageMetadata",
    );
    denied(
        a.report_stage_status_changed(ReportStageStatusChangedRequest {
            deployment_id: dep.clone(),
            stage_id: "stage-0".into(),
            status: model::StageStatus::StageRunning as i32,
            completed_at: now(),
            ..Default::default()
        })
        .await
        .map(drop),
        "ReportStageStatusChanged",
    );
    denied(
        a.report_stage_logs(ReportStageLogsRequest {
            deployment_id: dep.clone(),
            stage_id: "stage-0".into(),
            retried_count: 0,
            blocks: vec![fixtures::log_block(0, "injected")],
        })
        .await
        .map(drop),
        "ReportStageLogs",
    );
    denied(
        a.report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest {
            deployment_id: dep.clone(),
            stage_id: "stage-0".into(),
            retried_count: 0,
            blocks: vec![fixtures::log_block(0, "injected")],
            completed: true,
        })
        .await
        .map(drop),
        "ReportStageLogsFromLastCheckpoint",
    );
    denied(
        a.in_chain_deployment_plannable(InChainDeploymentPlannableRequest {
            deployment_id: dep.clone(),
            deployment_chain_id: "any-chain".into(),
            deployment_chain_block_index: 0,
        })
        .await
        .map(drop),
        "InChainDeploymentPlannable",
    );

    // Bob's command.
    denied(
        a.report_command_handled(ReportCommandHandledRequest {
            command_id: bob_command.clone(),
            status: CommandStatus::CommandSucceeded as i32,
            handled_at: now(),
            output: b"stolen".to_vec(),
            ..Default::default()
        })
        .await
        .map(drop),
        "ReportCommandHandled",
    );
    denied(
        a.report_command_handled(ReportCommandHandledRequest {
            command_id: bob_command.clone(),
            status: CommandStatus::CommandSucceeded as i32,
            handled_at: now(),
            ..Default::default()
        })
        .await
        .map(drop),
        "ReportCommandHandled without output",
    );

    // Nothing alice tried reached bob's objects.
    let d = ok(b
        .get_deployment(GetDeploymentRequest { id: dep.clone() })
        .await)
    .deployment
    .expect("deployment");
    assert_eq!(d.status, DeploymentStatus::DeploymentPlanned as i32);
    assert!(d.metadata.is_empty());
    assert!(d.stages[0].metadata.is_empty());
    assert!(
        wisp.filestore_object(&format!("log/{dep}/stage-0/0.txt"))
            .is_none(),
        "no stage log was written"
    );
    let apps = ok(b
        .list_applications(ListApplicationsRequest::default())
        .await)
    .applications;
    assert_eq!(apps[0].name, "bob-app");
    assert!(apps[0].sync_state.is_none());
    assert!(!apps[0].deploying);
    assert_status(
        b.get_application_shared_object(GetApplicationSharedObjectRequest {
            application_id: bob_app.clone(),
            plugin_name: "kubernetes".into(),
            key: "k".into(),
        })
        .await,
        Code::NotFound,
        "",
    );
    let commands = ok(b
        .list_unhandled_commands(ListUnhandledCommandsRequest::default())
        .await);
    assert_eq!(
        commands.commands.len(),
        1,
        "bob's command is still unhandled"
    );
    assert!(
        wisp.filestore_object(&format!("command-output/{bob_command}.json"))
            .is_none()
    );

    // Another project's piped does not see them at all.
    assert_status(
        s.get_deployment(GetDeploymentRequest { id: dep.clone() })
            .await,
        Code::NotFound,
        "",
    );
    assert_status(
        s.report_application_sync_state(ReportApplicationSyncStateRequest {
            application_id: bob_app.clone(),
            state: Some(synced_state()),
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        s.report_command_handled(ReportCommandHandledRequest {
            command_id: bob_command.clone(),
            status: CommandStatus::CommandSucceeded as i32,
            handled_at: now(),
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "",
    );
    assert!(
        ok(s.list_applications(ListApplicationsRequest::default())
            .await)
        .applications
        .is_empty()
    );
}

/// Misses a piped relies on being NOT_FOUND.
#[tokio::test]
async fn misses_are_not_found() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "misses");
    let app_id = wisp.add_app(&piped, "lonely", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;

    assert_status(
        c.get_application_most_recent_deployment(GetApplicationMostRecentDeploymentRequest {
            application_id: app_id.clone(),
            status: DeploymentStatus::DeploymentSuccess as i32,
        })
        .await,
        Code::NotFound,
        "deployment is not found",
    );
    // Only SUCCESS and PENDING are tracked.
    assert_status(
        c.get_application_most_recent_deployment(GetApplicationMostRecentDeploymentRequest {
            application_id: app_id.clone(),
            status: DeploymentStatus::DeploymentFailure as i32,
        })
        .await,
        Code::NotFound,
        "deployment is not found",
    );
    assert_status(
        c.get_latest_event(GetLatestEventRequest {
            name: "image-update".into(),
            labels: string_map(&[("app", "lonely")]),
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.get_application_shared_object(GetApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: "missing".into(),
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.get_latest_analysis_result(GetLatestAnalysisResultRequest {
            application_id: app_id.clone(),
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.get_deployment(GetDeploymentRequest {
            id: "no-such-deployment".into(),
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.report_deployment_planned(ReportDeploymentPlannedRequest {
            deployment_id: "no-such-deployment".into(),
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.report_stage_logs(ReportStageLogsRequest {
            deployment_id: "no-such-deployment".into(),
            stage_id: "stage-0".into(),
            retried_count: 0,
            blocks: vec![fixtures::log_block(0, "x")],
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.report_application_sync_state(ReportApplicationSyncStateRequest {
            application_id: "no-such-app".into(),
            state: Some(synced_state()),
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.create_deployment(CreateDeploymentRequest {
            deployment: Some(fixtures::deployment(
                &piped,
                "dep-1",
                "no-such-app",
                "ghost",
            )),
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.report_command_handled(ReportCommandHandledRequest {
            command_id: "no-such-command".into(),
            status: CommandStatus::CommandSucceeded as i32,
            handled_at: now(),
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.report_event_statuses(ReportEventStatusesRequest {
            events: vec![ReportedEvent {
                id: "no-such-event".into(),
                status: model::EventStatus::EventSuccess as i32,
                status_description: "handled".into(),
            }],
        })
        .await,
        Code::NotFound,
        "",
    );
}

/// Invalid requests are INVALID_ARGUMENT naming the offending field.
#[tokio::test]
async fn invalid_requests_name_the_field() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "validation");
    let app_id = wisp.add_app(&piped, "strict", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    ok(c.create_deployment(CreateDeploymentRequest {
        deployment: Some(fixtures::deployment(&piped, "dep-v", &app_id, "strict")),
    })
    .await);

    let logs = ReportStageLogsRequest {
        deployment_id: "dep-v".into(),
        stage_id: "stage-0".into(),
        retried_count: 0,
        blocks: vec![fixtures::log_block(0, "x")],
    };
    assert_status(
        c.report_stage_logs(ReportStageLogsRequest {
            deployment_id: String::new(),
            ..logs.clone()
        })
        .await,
        Code::InvalidArgument,
        "ReportStageLogsRequest.deployment_id",
    );
    assert_status(
        c.report_stage_logs(ReportStageLogsRequest {
            stage_id: String::new(),
            ..logs.clone()
        })
        .await,
        Code::InvalidArgument,
        "ReportStageLogsRequest.stage_id",
    );
    let mut bad_block = logs.clone();
    bad_block.blocks[0].severity = 42;
    assert_status(
        c.report_stage_logs(bad_block).await,
        Code::InvalidArgument,
        "ReportStageLogsRequest.blocks[0].severity",
    );
    assert_status(
        c.report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest {
            deployment_id: String::new(),
            stage_id: "stage-0".into(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "ReportStageLogsFromLastCheckpointRequest.deployment_id",
    );
    assert_status(
        c.get_deployment(GetDeploymentRequest::default()).await,
        Code::InvalidArgument,
        "GetDeploymentRequest.id",
    );
    assert_status(
        c.create_deployment(CreateDeploymentRequest { deployment: None })
            .await,
        Code::InvalidArgument,
        "CreateDeploymentRequest.deployment",
    );
    let mut no_commit = fixtures::deployment(&piped, "dep-w", &app_id, "strict");
    no_commit.trigger.as_mut().expect("trigger").commit = None;
    assert_status(
        c.create_deployment(CreateDeploymentRequest {
            deployment: Some(no_commit),
        })
        .await,
        Code::InvalidArgument,
        "CreateDeploymentRequest.deployment.trigger.commit",
    );
    assert_status(
        c.report_deployment_status_changed(ReportDeploymentStatusChangedRequest {
            deployment_id: "dep-v".into(),
            status: DeploymentStatus::DeploymentSuccess as i32,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "ReportDeploymentStatusChangedRequest.status",
    );
    assert_status(
        c.report_deployment_completed(ReportDeploymentCompletedRequest {
            deployment_id: "dep-v".into(),
            status: DeploymentStatus::DeploymentSuccess as i32,
            completed_at: 0,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "ReportDeploymentCompletedRequest.completed_at",
    );
    // Valid by the rules, but RUNNING is no completion.
    assert_status(
        c.report_deployment_completed(ReportDeploymentCompletedRequest {
            deployment_id: "dep-v".into(),
            status: DeploymentStatus::DeploymentRunning as i32,
            completed_at: now(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "not a completed status",
    );
    assert_status(
        c.report_stage_status_changed(ReportStageStatusChangedRequest {
            deployment_id: "dep-v".into(),
            stage_id: "stage-0".into(),
            completed_at: 0,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "ReportStageStatusChangedRequest.completed_at",
    );
    assert_status(
        c.save_deployment_plugin_metadata(SaveDeploymentPluginMetadataRequest {
            deployment_id: "dep-v".into(),
            plugin_name: String::new(),
            metadata: string_map(&[("k", "v")]),
        })
        .await,
        Code::InvalidArgument,
        "SaveDeploymentPluginMetadataRequest.plugin_name",
    );
    assert_status(
        c.get_application_shared_object(GetApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: String::new(),
        })
        .await,
        Code::InvalidArgument,
        "GetApplicationSharedObjectRequest.key",
    );
    assert_status(
        c.put_latest_analysis_result(PutLatestAnalysisResultRequest {
            application_id: app_id.clone(),
            analysis_result: Some(model::AnalysisResult { start_time: 0 }),
        })
        .await,
        Code::InvalidArgument,
        "PutLatestAnalysisResultRequest.analysis_result.start_time",
    );
    assert_status(
        c.report_application_sync_state(ReportApplicationSyncStateRequest {
            application_id: app_id.clone(),
            state: None,
        })
        .await,
        Code::InvalidArgument,
        "ReportApplicationSyncStateRequest.state",
    );
    let mut absolute = fixtures::application_info(&piped, &app_id, "strict", &[]);
    absolute.path = "/apps/strict".into();
    assert_status(
        c.update_application_configurations(UpdateApplicationConfigurationsRequest {
            applications: vec![absolute],
        })
        .await,
        Code::InvalidArgument,
        "UpdateApplicationConfigurationsRequest.applications[0].path",
    );
    let mut unversioned = fixtures::live_state_snapshot(&piped, &app_id, vec![]);
    unversioned.version = None;
    assert_status(
        c.report_application_live_state(ReportApplicationLiveStateRequest {
            snapshot: Some(unversioned),
        })
        .await,
        Code::InvalidArgument,
        "ReportApplicationLiveStateRequest.snapshot.version",
    );
    assert_status(
        c.report_command_handled(ReportCommandHandledRequest {
            command_id: "c".into(),
            status: CommandStatus::CommandSucceeded as i32,
            handled_at: 0,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "ReportCommandHandledRequest.handled_at",
    );
    assert_status(
        c.get_latest_event(GetLatestEventRequest::default()).await,
        Code::InvalidArgument,
        "GetLatestEventRequest.name",
    );
    assert_status(
        c.list_events(ListEventsRequest {
            status: 99,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "ListEventsRequest.status",
    );
    assert_status(
        c.report_event_statuses(ReportEventStatusesRequest {
            events: vec![ReportedEvent {
                id: "e".into(),
                status: model::EventStatus::EventSuccess as i32,
                status_description: String::new(),
            }],
        })
        .await,
        Code::InvalidArgument,
        "ReportEventStatusesRequest.events[0].status_description",
    );
    assert_status(
        c.list_events(ListEventsRequest {
            order: 9,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "ListEventsRequest.order",
    );
    // A cursor the server did not hand out.
    assert_status(
        c.list_not_completed_deployments(ListNotCompletedDeploymentsRequest {
            cursor: "not-a-cursor!".into(),
        })
        .await,
        Code::InvalidArgument,
        "cursor",
    );
    assert_status(
        c.in_chain_deployment_plannable(InChainDeploymentPlannableRequest {
            deployment_id: "dep-v".into(),
            deployment_chain_id: String::new(),
            deployment_chain_block_index: 0,
        })
        .await,
        Code::InvalidArgument,
        "InChainDeploymentPlannableRequest.deployment_chain_id",
    );

    // None of it changed the deployment.
    let d = ok(c
        .get_deployment(GetDeploymentRequest { id: "dep-v".into() })
        .await)
    .deployment
    .expect("deployment");
    assert_eq!(d.status, DeploymentStatus::DeploymentPending as i32);
}

/// ReportStat, ReportPipedMeta and GetDesiredVersion: what a piped does when it starts.
#[tokio::test]
async fn piped_meta_stat_and_desired_version() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "meta");
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;

    let stat = ok(c
        .report_stat(ReportStatRequest {
            piped_stats: b"# TYPE up gauge\nup 1\n".to_vec(),
        })
        .await);
    assert_eq!(stat.report_interval, 0);

    let meta = ok(c
        .report_piped_meta(ReportPipedMetaRequest {
            version: "v0.52.0".into(),
            repositories: vec![model::ApplicationGitRepository {
                id: "examples".into(),
                remote: "https://github.com/pipe-cd/examples.git".into(),
                branch: "master".into(),
            }],
            platform_providers: vec![model::piped::PlatformProvider {
                name: "kubernetes-default".into(),
                r#type: "KUBERNETES".into(),
            }],
            config: "apiVersion: pipecd.dev/v1beta1\nkind: Piped\n".into(),
            ..Default::default()
        })
        .await);
    assert_eq!(meta.name, "meta");
    assert_eq!(meta.web_base_url, "", "no console address configured");

    let desired = ok(c
        .get_desired_version(GetDesiredVersionRequest::default())
        .await);
    assert_eq!(desired.version, "", "no desired version was set");

    // The admin CLI sees what the piped reported.
    let listed = wisp.cli_json(&["piped", "list", "--project", QUICKSTART]);
    let entry = listed
        .as_array()
        .expect("a list")
        .iter()
        .find(|p| p["id"] == piped.id.as_str())
        .expect("the piped is listed")
        .clone();
    assert_eq!(entry["version"], "v0.52.0");
    assert!(
        entry["started_at"].as_i64().unwrap_or_default() > 0,
        "{entry}"
    );
    // ... and fills in the repository the piped reported when an application is added.
    let app_id = wisp.add_app(&piped, "from-examples", &[]);
    let apps = ok(c
        .list_applications(ListApplicationsRequest::default())
        .await)
    .applications;
    assert_eq!(app_ids(&apps), vec![app_id]);
    let repo = apps[0]
        .git_path
        .clone()
        .and_then(|g| g.repo)
        .expect("repository");
    assert_eq!(repo.remote, "https://github.com/pipe-cd/examples.git");
    assert_eq!(repo.branch, "master");
    let unknown_repo = wisp.cli(&[
        "application",
        "add",
        "--project",
        QUICKSTART,
        "--piped",
        &piped.id,
        "--name",
        "elsewhere",
        "--repo-id",
        "no-such-repo",
        "--path",
        "apps/elsewhere",
        "--config-file",
        "app.pipecd.yaml",
    ]);
    assert_eq!(unknown_repo.code, 2, "{unknown_repo:?}");
}

/// What the app-state reporters send, seen back through ListApplications.
#[tokio::test]
async fn application_reports() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "apps");
    let other = wisp.add_piped(QUICKSTART, "other-apps");
    let app_id = wisp.add_app(&piped, "web", &[("env", "dev")]);
    let other_app = wisp.add_app(&other, "api", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;

    ok(
        c.report_application_sync_state(ReportApplicationSyncStateRequest {
            application_id: app_id.clone(),
            state: Some(synced_state()),
        })
        .await,
    );
    ok(
        c.report_application_deploying_status(ReportApplicationDeployingStatusRequest {
            application_id: app_id.clone(),
            deploying: true,
        })
        .await,
    );
    let apps = ok(c
        .list_applications(ListApplicationsRequest::default())
        .await)
    .applications;
    let app = &apps[0];
    let state = app.sync_state.clone().expect("sync state");
    assert_eq!(state.status, model::ApplicationSyncStatus::Synced as i32);
    assert_eq!(state.short_reason, "in sync");
    assert!(app.deploying);

    // Names, descriptions and labels come from git.
    ok(
        c.update_application_configurations(UpdateApplicationConfigurationsRequest {
            applications: vec![fixtures::application_info(
                &piped,
                &app_id,
                "web-renamed",
                &[("env", "prod"), ("team", "web")],
            )],
        })
        .await,
    );
    let apps = ok(c
        .list_applications(ListApplicationsRequest::default())
        .await)
    .applications;
    assert_eq!(apps[0].name, "web-renamed");
    assert_eq!(apps[0].description, "web-renamed from git");
    assert_eq!(
        apps[0].labels,
        string_map(&[("env", "prod"), ("team", "web")])
    );

    // All or nothing: one application of another piped refuses the whole batch.
    assert_status(
        c.update_application_configurations(UpdateApplicationConfigurationsRequest {
            applications: vec![
                fixtures::application_info(&piped, &app_id, "web-again", &[]),
                fixtures::application_info(&piped, &other_app, "api-stolen", &[]),
            ],
        })
        .await,
        Code::PermissionDenied,
        &other_app,
    );
    let apps = ok(c
        .list_applications(ListApplicationsRequest::default())
        .await)
    .applications;
    assert_eq!(apps[0].name, "web-renamed");

    // Suggestions of unregistered applications are accepted (they are for the console).
    ok(c.report_unregistered_application_configurations(
        ReportUnregisteredApplicationConfigurationsRequest {
            applications: vec![fixtures::application_info(&piped, "", "not-yet-added", &[])],
        },
    )
    .await);
    ok(c.report_unregistered_application_configurations(
        ReportUnregisteredApplicationConfigurationsRequest::default(),
    )
    .await);
}

/// Live state: a snapshot per application, patched by Kubernetes events.
#[tokio::test]
async fn live_state_snapshot_and_events() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "live");
    let other = wisp.add_piped(QUICKSTART, "other-live");
    let app_id = wisp.add_app(&piped, "live-app", &[]);
    let other_app = wisp.add_app(&other, "other-live-app", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;

    ok(
        c.report_application_live_state(ReportApplicationLiveStateRequest {
            snapshot: Some(fixtures::live_state_snapshot(
                &piped,
                &app_id,
                vec![fixtures::k8s_resource("r-1", "helloworld")],
            )),
        })
        .await,
    );
    let events = ok(c
        .report_application_live_state_events(ReportApplicationLiveStateEventsRequest {
            kubernetes_events: vec![
                fixtures::k8s_event(
                    "ev-1",
                    &app_id,
                    fixtures::k8s_resource("r-2", "helloworld-canary"),
                ),
                fixtures::k8s_event(
                    "ev-2",
                    &other_app,
                    fixtures::k8s_resource("r-3", "intruder"),
                ),
                fixtures::k8s_event(
                    "ev-3",
                    "no-such-app",
                    fixtures::k8s_resource("r-4", "ghost"),
                ),
            ],
        })
        .await);
    let mut failed = events.failed_ids;
    failed.sort();
    assert_eq!(failed, vec!["ev-2".to_string(), "ev-3".to_string()]);

    let path = format!("application-live-state/{app_id}.json");
    let stored: serde_json::Value = serde_json::from_str(
        &wisp
            .filestore_object(&path)
            .unwrap_or_else(|| panic!("no live state at {path}")),
    )
    .expect("a JSON snapshot");
    assert_eq!(stored["application_id"], app_id.as_str());
    assert_eq!(stored["piped_id"], piped.id.as_str());
    let names: Vec<&str> = stored["kubernetes"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, vec!["helloworld", "helloworld-canary"]);
    assert!(
        wisp.filestore_object(&format!("application-live-state/{other_app}.json"))
            .is_none()
    );
}

/// Events are created only through the APIService: with none registered a piped sees
/// none, and reporting on an unknown one is NOT_FOUND.
#[tokio::test]
async fn events_without_any_registered() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "events");
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;

    for status in [
        EventFilter::All,
        EventFilter::NotHandled,
        EventFilter::Success,
    ] {
        for order in [ListOrder::None, ListOrder::Asc, ListOrder::Desc] {
            let listed = ok(c
                .list_events(ListEventsRequest {
                    from: now() - 3600,
                    to: now() + 60,
                    order: order as i32,
                    status: status as i32,
                })
                .await);
            assert!(listed.events.is_empty(), "{status:?} {order:?}");
        }
    }
    assert_status(
        c.get_latest_event(GetLatestEventRequest {
            name: "helloworld-image-update".into(),
            labels: string_map(&[("app", "helloworld")]),
        })
        .await,
        Code::NotFound,
        "no events found",
    );
    // Nothing to report is fine; an unknown event is NOT_FOUND.
    ok(
        c.report_event_statuses(ReportEventStatusesRequest::default())
            .await,
    );
    assert_status(
        c.report_event_statuses(ReportEventStatusesRequest {
            events: vec![ReportedEvent {
                id: "no-such-event".into(),
                status: model::EventStatus::EventFailure as i32,
                status_description: "could not update the image".into(),
            }],
        })
        .await,
        Code::NotFound,
        "no-such-event",
    );
}

/// A deployment chain: the first deployment is created, every matched application gets a
/// CHAIN_SYNC_APPLICATION command on its own piped, and the gate answers per block.
#[tokio::test]
async fn deployment_chain_commands_and_gate() {
    let wisp = Wisp::start();
    let alice = wisp.add_piped(QUICKSTART, "chain-alice");
    let bob = wisp.add_piped(QUICKSTART, "chain-bob");
    let first_app = wisp.add_app(&alice, "frontend", &[]);
    let named_app = wisp.add_app(&bob, "backend", &[("team", "core")]);
    let labelled_app = wisp.add_app(&bob, "database", &[("team", "data")]);
    let mut a = wisp.piped_client(Via::Grpc, &alice).await;
    let mut b = wisp.piped_client(Via::Grpc, &bob).await;

    assert!(
        ok(
            a.list_unhandled_commands(ListUnhandledCommandsRequest::default())
                .await
        )
        .commands
        .is_empty()
    );
    assert!(
        ok(
            b.list_unhandled_commands(ListUnhandledCommandsRequest::default())
                .await
        )
        .commands
        .is_empty()
    );

    assert_status(
        a.create_deployment_chain(CreateDeploymentChainRequest {
            first_deployment: Some(fixtures::deployment(
                &alice, "dep-bad", &first_app, "frontend",
            )),
            matchers: vec![ApplicationMatcher {
                kind: "NO_SUCH_KIND".into(),
                ..Default::default()
            }],
        })
        .await,
        Code::InvalidArgument,
        "kind",
    );

    ok(a.create_deployment_chain(CreateDeploymentChainRequest {
        first_deployment: Some(fixtures::deployment(
            &alice,
            "dep-first",
            &first_app,
            "frontend",
        )),
        matchers: vec![
            ApplicationMatcher {
                name: "backend".into(),
                ..Default::default()
            },
            ApplicationMatcher {
                labels: string_map(&[("team", "data")]),
                ..Default::default()
            },
        ],
    })
    .await);

    // The first deployment exists, in block 0 of the chain.
    let first = ok(a
        .get_deployment(GetDeploymentRequest {
            id: "dep-first".into(),
        })
        .await)
    .deployment
    .expect("deployment");
    let chain_id = first.deployment_chain_id.clone();
    assert!(!chain_id.is_empty(), "the first deployment names its chain");
    assert_eq!(first.deployment_chain_block_index, 0);
    let open = ok(a
        .list_not_completed_deployments(ListNotCompletedDeploymentsRequest::default())
        .await);
    assert_eq!(
        deployment_ids(&open.deployments),
        vec!["dep-first".to_string()]
    );
    let gate = ok(a
        .in_chain_deployment_plannable(InChainDeploymentPlannableRequest {
            deployment_id: "dep-first".into(),
            deployment_chain_id: chain_id.clone(),
            deployment_chain_block_index: 0,
        })
        .await);
    assert!(gate.plannable && !gate.cancel, "{gate:?}");

    // Commands go to bob's piped only.
    assert!(
        ok(
            a.list_unhandled_commands(ListUnhandledCommandsRequest::default())
                .await
        )
        .commands
        .is_empty()
    );
    let mut commands = ok(b
        .list_unhandled_commands(ListUnhandledCommandsRequest::default())
        .await)
    .commands;
    commands.sort_by_key(|c| {
        c.chain_sync_application
            .as_ref()
            .map(|s| s.block_index)
            .unwrap_or_default()
    });
    assert_eq!(commands.len(), 2, "{commands:?}");
    for (cmd, (app, block)) in commands
        .iter()
        .zip([(&named_app, 1u32), (&labelled_app, 2u32)])
    {
        assert_eq!(cmd.r#type, command::Type::ChainSyncApplication as i32);
        assert_eq!(cmd.piped_id, bob.id);
        assert_eq!(cmd.project_id, QUICKSTART);
        assert_eq!(&cmd.application_id, app);
        assert_eq!(cmd.status, CommandStatus::CommandNotHandledYet as i32);
        let sync = cmd.chain_sync_application.clone().expect("payload");
        assert_eq!(sync.deployment_chain_id, chain_id);
        assert_eq!(&sync.application_id, app);
        assert_eq!(sync.block_index, block);
    }

    // Bob deploys the backend in block 1: it waits for block 0.
    let mut in_chain = fixtures::deployment(&bob, "dep-backend", &named_app, "backend");
    in_chain.deployment_chain_id = chain_id.clone();
    in_chain.deployment_chain_block_index = 1;
    ok(b.create_deployment(CreateDeploymentRequest {
        deployment: Some(in_chain),
    })
    .await);
    let gate = ok(b
        .in_chain_deployment_plannable(InChainDeploymentPlannableRequest {
            deployment_id: "dep-backend".into(),
            deployment_chain_id: chain_id.clone(),
            deployment_chain_block_index: 1,
        })
        .await);
    assert!(!gate.plannable && !gate.cancel, "{gate:?}");
    assert_status(
        b.in_chain_deployment_plannable(InChainDeploymentPlannableRequest {
            deployment_id: "dep-backend".into(),
            deployment_chain_id: chain_id.clone(),
            deployment_chain_block_index: 7,
        })
        .await,
        Code::InvalidArgument,
        "block index",
    );
    assert_status(
        b.in_chain_deployment_plannable(InChainDeploymentPlannableRequest {
            deployment_id: "dep-backend".into(),
            deployment_chain_id: "no-such-chain".into(),
            deployment_chain_block_index: 1,
        })
        .await,
        Code::InvalidArgument,
        "deployment chain",
    );

    // Handled commands leave the list; the output is kept.
    ok(b.report_command_handled(ReportCommandHandledRequest {
        command_id: commands[0].id.clone(),
        status: CommandStatus::CommandSucceeded as i32,
        metadata: string_map(&[("deployment", "dep-backend")]),
        handled_at: now(),
        output: b"{\"ok\":true}".to_vec(),
    })
    .await);
    let left = ok(b
        .list_unhandled_commands(ListUnhandledCommandsRequest::default())
        .await)
    .commands;
    assert_eq!(
        left.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        vec![commands[1].id.clone()]
    );
    assert_eq!(
        wisp.filestore_object(&format!("command-output/{}.json", commands[0].id))
            .as_deref(),
        Some("{\"ok\":true}")
    );
    ok(b.report_command_handled(ReportCommandHandledRequest {
        command_id: commands[1].id.clone(),
        status: CommandStatus::CommandFailed as i32,
        handled_at: now(),
        ..Default::default()
    })
    .await);
    assert!(
        ok(
            b.list_unhandled_commands(ListUnhandledCommandsRequest::default())
                .await
        )
        .commands
        .is_empty()
    );
}

/// Plugin shared objects and (v0) analysis results: NOT_FOUND until put, then read back.
#[tokio::test]
async fn shared_objects_and_analysis_results_round_trip() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "objects");
    let app_id = wisp.add_app(&piped, "analysed", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;

    let get = |plugin: &str, key: &str| GetApplicationSharedObjectRequest {
        application_id: app_id.clone(),
        plugin_name: plugin.into(),
        key: key.into(),
    };
    assert_status(
        c.get_application_shared_object(get("kubernetes", "manifests"))
            .await,
        Code::NotFound,
        "",
    );
    let object = vec![0u8, 1, 2, 255, b'{', b'}'];
    ok(
        c.put_application_shared_object(PutApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: "manifests".into(),
            object: object.clone(),
        })
        .await,
    );
    let got = ok(c
        .get_application_shared_object(get("kubernetes", "manifests"))
        .await);
    assert_eq!(got.object, object);
    // Keyed by plugin and key.
    assert_status(
        c.get_application_shared_object(get("terraform", "manifests"))
            .await,
        Code::NotFound,
        "",
    );
    assert_status(
        c.get_application_shared_object(get("kubernetes", "other"))
            .await,
        Code::NotFound,
        "",
    );
    // Put replaces.
    ok(
        c.put_application_shared_object(PutApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: "manifests".into(),
            object: b"v2".to_vec(),
        })
        .await,
    );
    let got = ok(c
        .get_application_shared_object(get("kubernetes", "manifests"))
        .await);
    assert_eq!(got.object, b"v2".to_vec());

    let analysis = GetLatestAnalysisResultRequest {
        application_id: app_id.clone(),
    };
    assert_status(
        c.get_latest_analysis_result(analysis.clone()).await,
        Code::NotFound,
        "",
    );
    let started = now() - 120;
    ok(
        c.put_latest_analysis_result(PutLatestAnalysisResultRequest {
            application_id: app_id.clone(),
            analysis_result: Some(model::AnalysisResult {
                start_time: started,
            }),
        })
        .await,
    );
    let got = ok(c.get_latest_analysis_result(analysis).await);
    assert_eq!(
        got.analysis_result,
        Some(model::AnalysisResult {
            start_time: started
        })
    );
}

/// Upstream's legacy service name still works, over both transports; `/healthz` answers.
#[tokio::test]
async fn legacy_service_path_and_healthz() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "legacy");
    let app_id = wisp.add_app(&piped, "old-style", &[]);

    for via in [Via::Grpc, Via::GrpcWeb] {
        let transport = wisp.transport(via, Some(&piped.authorization())).await;
        let stat: ReportStatResponse = legacy_call(
            transport.clone(),
            "ReportStat",
            ReportStatRequest {
                piped_stats: b"up 1\n".to_vec(),
            },
        )
        .await
        .unwrap_or_else(|s| panic!("legacy ReportStat over {via:?}: {s:?}"));
        assert_eq!(stat.report_interval, 0);
        let apps: ListApplicationsResponse = legacy_call(
            transport,
            "ListApplications",
            ListApplicationsRequest::default(),
        )
        .await
        .unwrap_or_else(|s| panic!("legacy ListApplications over {via:?}: {s:?}"));
        assert_eq!(app_ids(&apps.applications), vec![app_id.clone()]);

        // The alias goes through the same authentication.
        let anonymous = wisp.transport(via, None).await;
        let refused: Result<ReportStatResponse, _> =
            legacy_call(anonymous, "ReportStat", ReportStatRequest::default()).await;
        assert_status(refused, Code::Unauthenticated, "missing credentials");
    }

    // An unknown method under either name is UNIMPLEMENTED.
    let transport = wisp
        .transport(Via::Grpc, Some(&piped.authorization()))
        .await;
    let unknown: Result<ReportStatResponse, _> =
        legacy_call(transport, "NoSuchMethod", ReportStatRequest::default()).await;
    assert_status(unknown, Code::Unimplemented, "");

    let (status, body) = wisp.http_get("/healthz").await;
    assert_eq!(status, http::StatusCode::OK);
    assert_eq!(body, "ok");
    let (status, _) = wisp.http_request(http::Method::POST, "/healthz").await;
    assert_eq!(status, http::StatusCode::METHOD_NOT_ALLOWED);
}

/// Concurrent reports on one deployment (a v1 piped runs plugins side by side): the
/// optimistic updates and the conditional log appends lose nothing.
#[tokio::test]
async fn concurrent_reports_lose_nothing() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "busy");
    let app_id = wisp.add_app(&piped, "busy-app", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    let dep = "dep-busy";
    ok(c.create_deployment(CreateDeploymentRequest {
        deployment: Some(fixtures::deployment(&piped, dep, &app_id, "busy-app")),
    })
    .await);
    ok(c.report_deployment_planned(ReportDeploymentPlannedRequest {
        deployment_id: dep.into(),
        stages: vec![
            fixtures::stage("stage-0", "K8S_SYNC", 0, &[]),
            fixtures::stage("stage-1", "K8S_SYNC", 1, &["stage-0"]),
        ],
        ..Default::default()
    })
    .await);

    const N: i64 = 24;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..N {
        let mut c = c.clone();
        tasks.spawn(async move {
            let stage = format!("stage-{}", i % 2);
            c.report_stage_logs(ReportStageLogsRequest {
                deployment_id: dep.into(),
                stage_id: "stage-0".into(),
                retried_count: 0,
                blocks: vec![fixtures::log_block(i, &format!("line {i}"))],
            })
            .await?;
            c.save_stage_metadata(SaveStageMetadataRequest {
                deployment_id: dep.into(),
                stage_id: stage,
                metadata: string_map(&[(&format!("key-{i}"), "v")]),
            })
            .await?;
            c.save_deployment_plugin_metadata(SaveDeploymentPluginMetadataRequest {
                deployment_id: dep.into(),
                plugin_name: format!("plugin-{}", i % 3),
                metadata: string_map(&[(&format!("key-{i}"), "v")]),
            })
            .await
            .map(drop)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.expect("task").expect("concurrent report");
    }

    // A retried stage logs to its own file.
    ok(
        c.report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest {
            deployment_id: dep.into(),
            stage_id: "stage-0".into(),
            retried_count: 1,
            blocks: vec![fixtures::log_block(0, "retry")],
            completed: true,
        })
        .await,
    );
    ok(
        c.report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest {
            deployment_id: dep.into(),
            stage_id: "stage-0".into(),
            retried_count: 0,
            blocks: vec![],
            completed: true,
        })
        .await,
    );
    let text = wisp
        .filestore_object(&format!("log/{dep}/stage-0/0.txt"))
        .expect("stage log");
    let (blocks, completed) = scenarios::parse_stage_log(&text);
    assert!(completed);
    assert_eq!(
        blocks.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..N).collect::<Vec<_>>()
    );
    let retry = wisp
        .filestore_object(&format!("log/{dep}/stage-0/1.txt"))
        .expect("log of the retry");
    assert_eq!(
        scenarios::parse_stage_log(&retry),
        (vec![(0, "retry".to_string())], true)
    );

    let d = ok(c
        .get_deployment(GetDeploymentRequest { id: dep.into() })
        .await)
    .deployment
    .expect("deployment");
    let stage_keys = d.stages[0].metadata.len() + d.stages[1].metadata.len();
    assert_eq!(stage_keys, N as usize);
    let plugin_keys: usize = d
        .metadata_v2
        .expect("metadata_v2")
        .plugins
        .values()
        .map(|kv| kv.key_values.len())
        .sum();
    assert_eq!(plugin_keys, N as usize);
}

/// A shared object key that would escape its prefix is the client's mistake:
/// INVALID_ARGUMENT, not INTERNAL. Nested keys (`a/b`) are allowed, as upstream.
#[tokio::test]
async fn invalid_shared_object_key_is_invalid_argument() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "keys");
    let app_id = wisp.add_app(&piped, "keyed", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    for key in ["..", "a\\b", "a//b", "/a", "a/../b"] {
        assert_status(
            c.put_application_shared_object(PutApplicationSharedObjectRequest {
                application_id: app_id.clone(),
                plugin_name: "kubernetes".into(),
                key: key.into(),
                object: b"x".to_vec(),
            })
            .await,
            Code::InvalidArgument,
            "key",
        );
        assert_status(
            c.get_application_shared_object(GetApplicationSharedObjectRequest {
                application_id: app_id.clone(),
                plugin_name: "kubernetes".into(),
                key: key.into(),
            })
            .await,
            Code::InvalidArgument,
            "key",
        );
    }
    // Nested keys are fine, as upstream allows.
    ok(
        c.put_application_shared_object(PutApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: "a/b".into(),
            object: b"nested".to_vec(),
        })
        .await,
    );
    let got = ok(c
        .get_application_shared_object(GetApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: "a/b".into(),
        })
        .await);
    assert_eq!(got.object, b"nested");
}

/// Everything a piped wrote is still there after the server is killed and restarted on
/// the same data directory.
#[tokio::test]
async fn data_survives_a_restart() {
    let mut wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "durable");
    let app_id = wisp.add_app(&piped, "durable-app", &[]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    ok(c.create_deployment(CreateDeploymentRequest {
        deployment: Some(fixtures::deployment(
            &piped,
            "dep-durable",
            &app_id,
            "durable-app",
        )),
    })
    .await);
    ok(c.report_deployment_planned(ReportDeploymentPlannedRequest {
        deployment_id: "dep-durable".into(),
        summary: "before the restart".into(),
        stages: vec![fixtures::stage("stage-0", "K8S_SYNC", 0, &[])],
        ..Default::default()
    })
    .await);
    ok(c.report_stage_logs(ReportStageLogsRequest {
        deployment_id: "dep-durable".into(),
        stage_id: "stage-0".into(),
        retried_count: 0,
        blocks: vec![fixtures::log_block(0, "live log before the restart")],
    })
    .await);
    ok(
        c.put_application_shared_object(PutApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: "state".into(),
            object: b"kept".to_vec(),
        })
        .await,
    );
    drop(c);

    wisp.restart();
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    let d = ok(c
        .get_deployment(GetDeploymentRequest {
            id: "dep-durable".into(),
        })
        .await)
    .deployment
    .expect("deployment");
    assert_eq!(d.status, DeploymentStatus::DeploymentPlanned as i32);
    assert_eq!(d.summary, "before the restart");
    assert_eq!(d.stages.len(), 1);
    let open = ok(c
        .list_not_completed_deployments(ListNotCompletedDeploymentsRequest::default())
        .await);
    assert_eq!(
        deployment_ids(&open.deployments),
        vec!["dep-durable".to_string()]
    );
    let apps = ok(c
        .list_applications(ListApplicationsRequest::default())
        .await);
    assert_eq!(app_ids(&apps.applications), vec![app_id.clone()]);
    let object = ok(c
        .get_application_shared_object(GetApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: "state".into(),
        })
        .await);
    assert_eq!(object.object, b"kept".to_vec());
    // Live logs were persisted too (not only cached): the log continues where it was.
    ok(
        c.report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest {
            deployment_id: "dep-durable".into(),
            stage_id: "stage-0".into(),
            retried_count: 0,
            blocks: vec![fixtures::log_block(1, "after the restart")],
            completed: true,
        })
        .await,
    );
    let text = wisp
        .filestore_object("log/dep-durable/stage-0/0.txt")
        .expect("stage log");
    let (blocks, completed) = scenarios::parse_stage_log(&text);
    assert!(completed);
    assert_eq!(
        blocks.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![0, 1]
    );
}

/// SIGTERM stops the server cleanly (exit status 0), and a new one serves the same data.
#[tokio::test]
async fn sigterm_stops_the_server_cleanly() {
    let mut wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "stopping");
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    ok(c.report_stat(ReportStatRequest::default()).await);
    let (status, log) = wisp.terminate(Duration::from_secs(30)).await;
    let status = status.unwrap_or_else(|| panic!("still running 30 s after SIGTERM; log:\n{log}"));
    assert!(status.success(), "{status:?}; log:\n{log}");
    assert!(log.contains("wisp serve stopped"), "{log}");
    // The client sees the server gone.
    assert!(c.report_stat(ReportStatRequest::default()).await.is_err());

    wisp.restart();
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    ok(c.report_stat(ReportStatRequest::default()).await);
}

/// grpc.health.v1's messages, for the load balancer's gRPC health check.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// `grpc.health.v1.Health/Check` over a new HTTP/2 connection to `addr`, as a load
/// balancer's gRPC health check asks it: the status it answers, or the call's error.
async fn grpc_health_check(addr: std::net::SocketAddr) -> Result<i32, tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("connect: {e}")))?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("channel ready");
    let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
    grpc.unary(
        tonic::Request::new(HealthCheckRequest::default()),
        http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Check"),
        codec,
    )
    .await
    .map(|r| r.into_inner().status)
}

/// With `--shutdown-delay`, SIGTERM first fails both health checks (`/healthz` 503, the
/// gRPC check UNAVAILABLE) while the server still takes new connections, so that a load
/// balancer still routing to it (a reclaimed Fargate Spot task) sends the next
/// connections elsewhere before it stops listening; then it stops cleanly.
#[tokio::test]
async fn sigterm_with_a_shutdown_delay_fails_the_health_checks_while_still_serving() {
    let dir = tempfile::tempdir().expect("data dir");
    let mut server =
        support::Server::start_with(dir.path(), &["--shutdown-delay".into(), "10s".into()], &[]);
    let addr = server.addr();
    let (status, body) = support::http_request_to(addr, http::Method::GET, "/healthz").await;
    assert_eq!((status, body.as_str()), (http::StatusCode::OK, "ok"));
    assert_eq!(
        grpc_health_check(addr).await.expect("gRPC health"),
        1,
        "SERVING"
    );

    server.send_sigterm();
    // Each check on a new connection: the listener is still open.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = support::http_request_to(addr, http::Method::GET, "/healthz").await;
        if status == http::StatusCode::SERVICE_UNAVAILABLE {
            assert_eq!(body, "draining");
            break;
        }
        assert_eq!(status, http::StatusCode::OK, "{body}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "/healthz still 200 after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let draining = grpc_health_check(addr).await;
    assert_eq!(
        draining.map_err(|s| s.code()),
        Err(tonic::Code::Unavailable),
        "the gRPC health check while draining"
    );
    let status = server.wait_exit(Duration::from_secs(60)).await;
    let log = server.log_text();
    let status = status.unwrap_or_else(|| panic!("still running 60 s after SIGTERM; log:\n{log}"));
    assert!(status.success(), "{status:?}; log:\n{log}");
    assert!(log.contains("health checks fail now"), "{log}");
}

/// A connection that never sends a request (a port scanner, a client that died) does
/// not keep `wisp serve` from stopping.
#[tokio::test]
async fn sigterm_stops_the_server_despite_an_idle_connection() {
    let mut wisp = Wisp::start();
    // Once /healthz answers, the server loop (and its signal handling) is running.
    assert_eq!(wisp.http_get("/healthz").await.0, http::StatusCode::OK);
    let idle = tokio::net::TcpStream::connect(wisp.addr())
        .await
        .expect("connect");
    let (status, log) = wisp.terminate(Duration::from_secs(30)).await;
    drop(idle);
    let status = status.unwrap_or_else(|| panic!("still running 30 s after SIGTERM; log:\n{log}"));
    assert!(status.success(), "{status:?}");
}

/// An HTTP/2 client that stops responding (stuck, or cut off by the network) cannot keep
/// `wisp serve` from exiting on SIGTERM: graceful shutdown has a bounded grace period.
#[tokio::test]
async fn sigterm_stops_the_server_despite_a_stuck_http2_client() {
    use tokio::io::AsyncWriteExt;
    let mut wisp = Wisp::start();
    assert_eq!(wisp.http_get("/healthz").await.0, http::StatusCode::OK);
    let mut stuck = tokio::net::TcpStream::connect(wisp.addr())
        .await
        .expect("connect");
    // The HTTP/2 preface and an empty SETTINGS frame; then silence (no SETTINGS ack, no
    // PING ack, no reads).
    stuck
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .expect("write the preface");
    let (status, log) = wisp.terminate(Duration::from_secs(30)).await;
    drop(stuck);
    let status = status.unwrap_or_else(|| panic!("still running 30 s after SIGTERM; log:\n{log}"));
    assert!(status.success(), "{status:?}");
}

/// `wisp serve` handles SIGTERM from the moment it prints its ready line: a SIGTERM right
/// after it stops the server cleanly (exit 0), never by the signal's default action.
#[tokio::test]
async fn sigterm_right_after_ready_stops_cleanly() {
    for attempt in 0..10 {
        let mut wisp = Wisp::start();
        let (status, log) = wisp.terminate(Duration::from_secs(30)).await;
        let status = status.unwrap_or_else(|| panic!("still running; log:\n{log}"));
        assert!(status.success(), "attempt {attempt}: {status:?}");
    }
}

/// Ending a key rotation: after `delete-old-keys` only the new key works — at once on a
/// server that never verified the old one (here: a restarted one).
#[tokio::test]
async fn deleted_old_key_stops_working() {
    let mut wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "rotating");
    let rotated = wisp.rotate_key(&piped);
    let mut old = wisp.piped_client(Via::Grpc, &piped).await;
    ok(old.report_stat(ReportStatRequest::default()).await);
    let listed = wisp.cli_json(&["piped", "list", "--project", QUICKSTART]);
    assert_eq!(listed[0]["keys"], 2);

    wisp.cli_ok(&[
        "piped",
        "delete-old-keys",
        "--project",
        QUICKSTART,
        &piped.id,
    ]);
    wisp.restart();
    let mut old = wisp.piped_client(Via::Grpc, &piped).await;
    assert_status(
        old.report_stat(ReportStatRequest::default()).await,
        Code::Unauthenticated,
        "Unauthenticated",
    );
    let mut new = wisp.piped_client(Via::Grpc, &rotated).await;
    ok(new.report_stat(ReportStatRequest::default()).await);
}

fn synced_state() -> model::ApplicationSyncState {
    model::ApplicationSyncState {
        status: model::ApplicationSyncStatus::Synced as i32,
        short_reason: "in sync".into(),
        reason: "all resources are in sync".into(),
        timestamp: now(),
        ..Default::default()
    }
}
