//! Scenarios that must hold over both transports (native gRPC and gRPC-web) and on every
//! store backend: `X(via)` starts its own server on the embedded stores, `X_on(&wisp, via)`
//! drives a given one (e.g. [`Wisp::start_aws`]) as a piped would.

use tonic::Code;
use wisp_proto::model::{self, DeploymentStatus, StageStatus};
use wisp_proto::pipedservice::*;

use super::fixtures::{self, now, string_map};
use super::{Client, QUICKSTART, Via, Wisp, assert_status, ok};

/// Calls every one of the 36 PipedService RPCs with an empty request; returns the outcome
/// per method name.
macro_rules! call_every_rpc {
    ($client:expr) => {
        call_every_rpc!($client;
            report_stat(ReportStatRequest),
            report_piped_meta(ReportPipedMetaRequest),
            list_applications(ListApplicationsRequest),
            report_application_sync_state(ReportApplicationSyncStateRequest),
            report_application_deploying_status(ReportApplicationDeployingStatusRequest),
            report_application_most_recent_deployment(ReportApplicationMostRecentDeploymentRequest),
            get_application_most_recent_deployment(GetApplicationMostRecentDeploymentRequest),
            get_deployment(GetDeploymentRequest),
            list_not_completed_deployments(ListNotCompletedDeploymentsRequest),
            create_deployment(CreateDeploymentRequest),
            report_deployment_planned(ReportDeploymentPlannedRequest),
            report_deployment_status_changed(ReportDeploymentStatusChangedRequest),
            report_deployment_completed(ReportDeploymentCompletedRequest),
            save_deployment_metadata(SaveDeploymentMetadataRequest),
            save_deployment_shared_metadata(SaveDeploymentSharedMetadataRequest),
            save_deployment_plugin_metadata(SaveDeploymentPluginMetadataRequest),
            save_stage_metadata(SaveStageMetadataRequest),
            report_stage_logs(ReportStageLogsRequest),
            report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest),
            report_stage_status_changed(ReportStageStatusChangedRequest),
            list_unhandled_commands(ListUnhandledCommandsRequest),
            report_command_handled(ReportCommandHandledRequest),
            report_application_live_state(ReportApplicationLiveStateRequest),
            report_application_live_state_events(ReportApplicationLiveStateEventsRequest),
            get_latest_event(GetLatestEventRequest),
            list_events(ListEventsRequest),
            report_event_statuses(ReportEventStatusesRequest),
            get_latest_analysis_result(GetLatestAnalysisResultRequest),
            put_latest_analysis_result(PutLatestAnalysisResultRequest),
            get_desired_version(GetDesiredVersionRequest),
            update_application_configurations(UpdateApplicationConfigurationsRequest),
            report_unregistered_application_configurations(ReportUnregisteredApplicationConfigurationsRequest),
            create_deployment_chain(CreateDeploymentChainRequest),
            in_chain_deployment_plannable(InChainDeploymentPlannableRequest),
            get_application_shared_object(GetApplicationSharedObjectRequest),
            put_application_shared_object(PutApplicationSharedObjectRequest),
        )
    };
    ($client:expr; $($method:ident($req:ident)),* $(,)?) => {
        vec![$(
            (
                stringify!($method),
                $client.$method($req::default()).await.map(|_| ()),
            )
        ),*]
    };
}

/// Every RPC with an empty request, as `(method, outcome)`.
pub async fn call_every_rpc(client: &mut Client) -> Vec<(&'static str, Result<(), tonic::Status>)> {
    call_every_rpc!(client)
}

/// Without credentials every one of the 36 RPCs is UNAUTHENTICATED, before its request is
/// even validated (the empty requests here are mostly invalid).
pub async fn every_rpc_requires_credentials(via: Via) {
    every_rpc_requires_credentials_on(&Wisp::start(), via).await;
}

pub async fn every_rpc_requires_credentials_on(wisp: &Wisp, via: Via) {
    let mut anonymous = wisp.client(via, None).await;
    let outcomes = call_every_rpc(&mut anonymous).await;
    // Every RPC of proto/ is called (a new one missing from call_every_rpc fails here).
    let mut called: Vec<String> = outcomes.iter().map(|(m, _)| m.to_string()).collect();
    called.sort();
    let mut rpcs: Vec<String> = wisp_proto::rpcs::PIPED_SERVICE
        .iter()
        .map(|name| snake_case(name))
        .collect();
    rpcs.sort();
    assert_eq!(called, rpcs, "call_every_rpc calls every PipedService RPC");
    for (method, outcome) in outcomes {
        match outcome {
            Err(status) => assert!(
                status.code() == Code::Unauthenticated
                    && status.message() == "missing credentials in authorization",
                "{method} without credentials: {status:?}"
            ),
            Ok(()) => panic!("{method} succeeded without credentials"),
        }
    }
}

/// `ReportStat` → `report_stat`, as the generated clients name methods.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// What a piped presents, and what the server must answer.
pub async fn auth_cases(via: Via) {
    auth_cases_on(&Wisp::start(), via).await;
}

pub async fn auth_cases_on(wisp: &Wisp, via: Via) {
    wisp.add_project("other");
    let piped = wisp.add_piped(QUICKSTART, "auth");
    let app_id = wisp.add_app(&piped, "auth-app", &[]);

    let good = piped.authorization();
    let wrong_key = piped.authorization_with(QUICKSTART, "not-the-key");
    let other_project = piped.authorization_with("other", &piped.key);
    let unknown_project = piped.authorization_with("no-such-project", &piped.key);
    let unknown_piped = format!("PIPED-TOKEN {QUICKSTART},no-such-piped,{}", piped.key);
    let empty_piped_id = format!("PIPED-TOKEN {QUICKSTART},,{}", piped.key);
    let two_parts = format!("PIPED-TOKEN {QUICKSTART},{}", piped.id);
    let bearer = format!("Bearer {QUICKSTART},{},{}", piped.id, piped.key);
    let cases: Vec<(&str, Option<&str>, &str)> = vec![
        ("no header", None, "missing credentials in authorization"),
        ("type only", Some("PIPED-TOKEN"), "credentials is malformed"),
        ("no type", Some("garbage"), "credentials is malformed"),
        (
            "extra words",
            Some("PIPED-TOKEN a,b,c d"),
            "credentials is malformed",
        ),
        (
            "unsupported type",
            Some(&bearer),
            "unsupported credentials type",
        ),
        (
            "API key to PipedService",
            Some("API-KEY abc.def"),
            "Unauthenticated",
        ),
        ("two-part token", Some(&two_parts), "Unauthenticated"),
        ("empty piped id", Some(&empty_piped_id), "Unauthenticated"),
        ("bad key", Some(&wrong_key), "Unauthenticated"),
        ("unknown piped", Some(&unknown_piped), "Unauthenticated"),
        (
            "piped of another project",
            Some(&other_project),
            "Unauthenticated",
        ),
        ("unknown project", Some(&unknown_project), "Unauthenticated"),
    ];
    for (what, authorization, message) in cases {
        let mut client = wisp.client(via, authorization).await;
        match client
            .list_applications(ListApplicationsRequest::default())
            .await
        {
            Err(status) => {
                assert_eq!(status.code(), Code::Unauthenticated, "{what}: {status:?}");
                assert_eq!(status.message(), message, "{what}: {status:?}");
            }
            Ok(_) => panic!("{what}: ListApplications succeeded"),
        }
        // Authentication comes before validation: an invalid request is refused the same.
        let invalid = client.get_deployment(GetDeploymentRequest::default()).await;
        assert_status(invalid, Code::Unauthenticated, message);
    }

    // The good token works (and keeps working after the bad ones were tried).
    let mut client = wisp.client(via, Some(&good)).await;
    let apps = ok(client
        .list_applications(ListApplicationsRequest::default())
        .await);
    assert_eq!(app_ids(&apps.applications), vec![app_id.clone()]);

    // A rotated second key works, and so does the first one until it is deleted.
    let rotated = wisp.rotate_key(&piped);
    assert_ne!(rotated.key, piped.key);
    let mut with_new_key = wisp.piped_client(via, &rotated).await;
    let apps = ok(with_new_key
        .list_applications(ListApplicationsRequest::default())
        .await);
    assert_eq!(app_ids(&apps.applications), vec![app_id]);
    ok(client.report_stat(ReportStatRequest::default()).await);

    // A disabled piped is refused. It has never been used, so no server has cached it.
    let disabled = wisp.add_piped(QUICKSTART, "disabled");
    wisp.cli_ok(&["piped", "disable", "--project", QUICKSTART, &disabled.id]);
    let mut client = wisp.piped_client(via, &disabled).await;
    assert_status(
        client
            .list_applications(ListApplicationsRequest::default())
            .await,
        Code::Unauthenticated,
        "Unauthenticated",
    );
    // Enabled again, it works at once (refusals of disabled pipeds are not cached).
    wisp.cli_ok(&["piped", "enable", "--project", QUICKSTART, &disabled.id]);
    ok(client
        .list_applications(ListApplicationsRequest::default())
        .await);
}

pub fn app_ids(apps: &[model::Application]) -> Vec<String> {
    let mut ids: Vec<String> = apps.iter().map(|a| a.id.clone()).collect();
    ids.sort();
    ids
}

/// The ids of the block indexes in a stored stage log file (upstream's format: one JSON
/// `LogBlock` per line, then `EOL` once completed), and whether it is completed.
pub fn parse_stage_log(text: &str) -> (Vec<(i64, String)>, bool) {
    let mut blocks = Vec::new();
    let mut completed = false;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line == "EOL" {
            completed = true;
            continue;
        }
        assert!(!completed, "a line after EOL: {text:?}");
        let block: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("bad log line {line:?}: {e}"));
        blocks.push((
            block["index"].as_i64().unwrap_or_default(),
            block["log"].as_str().unwrap_or_default().to_string(),
        ));
    }
    (blocks, completed)
}

/// One deployment from trigger to completion, every step checked through the API a piped
/// reads back from.
pub async fn deployment_lifecycle(via: Via) {
    deployment_lifecycle_on(&Wisp::start(), via).await;
}

pub async fn deployment_lifecycle_on(wisp: &Wisp, via: Via) {
    let piped = wisp.add_piped(QUICKSTART, "lifecycle");
    let app_id = wisp.add_app(&piped, "canary", &[("env", "dev")]);
    let mut c = wisp.piped_client(via, &piped).await;

    // The piped learns its application.
    let apps = ok(c
        .list_applications(ListApplicationsRequest::default())
        .await)
    .applications;
    assert_eq!(apps.len(), 1, "{apps:?}");
    let app = &apps[0];
    assert_eq!(app.id, app_id);
    assert_eq!(app.name, "canary");
    assert_eq!(app.piped_id, piped.id);
    assert_eq!(app.project_id, QUICKSTART);
    assert_eq!(app.labels, string_map(&[("env", "dev")]));
    let git = app.git_path.clone().expect("git path");
    assert_eq!(git.repo.expect("repo").id, "examples");
    assert_eq!(git.path, "apps/canary");
    assert_eq!(git.config_filename, "app.pipecd.yaml");

    // Nothing was deployed yet.
    assert_status(
        c.get_application_most_recent_deployment(GetApplicationMostRecentDeploymentRequest {
            application_id: app_id.clone(),
            status: DeploymentStatus::DeploymentSuccess as i32,
        })
        .await,
        Code::NotFound,
        "deployment is not found",
    );

    // Trigger.
    let dep_id = "dep-lifecycle";
    let deployment = fixtures::deployment(&piped, dep_id, &app_id, "canary");
    ok(c.create_deployment(CreateDeploymentRequest {
        deployment: Some(deployment.clone()),
    })
    .await);
    assert_status(
        c.create_deployment(CreateDeploymentRequest {
            deployment: Some(deployment),
        })
        .await,
        Code::AlreadyExists,
        "",
    );
    ok(
        c.report_application_most_recent_deployment(ReportApplicationMostRecentDeploymentRequest {
            application_id: app_id.clone(),
            status: DeploymentStatus::DeploymentPending as i32,
            deployment: Some(fixtures::deployment_reference(dep_id)),
        })
        .await,
    );
    let triggered = ok(c
        .get_application_most_recent_deployment(GetApplicationMostRecentDeploymentRequest {
            application_id: app_id.clone(),
            status: DeploymentStatus::DeploymentPending as i32,
        })
        .await);
    assert_eq!(
        triggered.deployment.expect("reference").deployment_id,
        dep_id
    );

    // The controller picks it up; one page, and the cursor says it is the last one.
    let open = ok(c
        .list_not_completed_deployments(ListNotCompletedDeploymentsRequest::default())
        .await);
    assert_eq!(deployment_ids(&open.deployments), vec![dep_id.to_string()]);
    assert_eq!(open.cursor, "", "the last page has an empty cursor");
    let pending = &open.deployments[0];
    assert_eq!(pending.status, DeploymentStatus::DeploymentPending as i32);
    assert_eq!(pending.project_id, QUICKSTART);

    // Planned: three stages forming a DAG.
    let stages = vec![
        fixtures::stage("stage-0", "K8S_CANARY_ROLLOUT", 0, &[]),
        fixtures::stage("stage-1", "WAIT_APPROVAL", 1, &["stage-0"]),
        fixtures::stage("stage-2", "K8S_PRIMARY_ROLLOUT", 2, &["stage-0", "stage-1"]),
    ];
    ok(c.report_deployment_planned(ReportDeploymentPlannedRequest {
        deployment_id: dep_id.into(),
        summary: "Sync progressively because of updating image".into(),
        status_reason: "planned".into(),
        running_commit_hash: "fedcba9876543210".into(),
        running_config_filename: "app.pipecd.yaml".into(),
        versions: vec![model::ArtifactVersion {
            kind: model::artifact_version::Kind::ContainerImage as i32,
            version: "v0.2.0".into(),
            name: "helloworld".into(),
            url: "ghcr.io/pipe-cd/helloworld:v0.2.0".into(),
        }],
        stages,
        ..Default::default()
    })
    .await);

    // Running.
    ok(
        c.report_deployment_status_changed(ReportDeploymentStatusChangedRequest {
            deployment_id: dep_id.into(),
            status: DeploymentStatus::DeploymentRunning as i32,
            status_reason: "The piped started to handle this deployment".into(),
            ..Default::default()
        })
        .await,
    );

    // Statuses only move forward.
    assert_status(
        c.report_deployment_planned(ReportDeploymentPlannedRequest {
            deployment_id: dep_id.into(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        dep_id,
    );

    // Stage metadata; an unknown stage is an invalid argument.
    ok(c.save_stage_metadata(SaveStageMetadataRequest {
        deployment_id: dep_id.into(),
        stage_id: "stage-1".into(),
        metadata: string_map(&[("Approvers", "alice,bob")]),
    })
    .await);
    assert_status(
        c.save_stage_metadata(SaveStageMetadataRequest {
            deployment_id: dep_id.into(),
            stage_id: "stage-9".into(),
            metadata: string_map(&[("k", "v")]),
        })
        .await,
        Code::InvalidArgument,
        "stage-9",
    );

    ok(
        c.report_stage_status_changed(ReportStageStatusChangedRequest {
            deployment_id: dep_id.into(),
            stage_id: "stage-0".into(),
            status: StageStatus::StageRunning as i32,
            visible: true,
            completed_at: now(),
            ..Default::default()
        })
        .await,
    );

    // Live logs, twice, with index 1 repeated: the first copy wins, each index is kept once.
    ok(c.report_stage_logs(ReportStageLogsRequest {
        deployment_id: dep_id.into(),
        stage_id: "stage-0".into(),
        retried_count: 0,
        blocks: vec![
            fixtures::log_block(0, "rolling out"),
            fixtures::log_block(1, "canary 1/2"),
        ],
    })
    .await);
    ok(c.report_stage_logs(ReportStageLogsRequest {
        deployment_id: dep_id.into(),
        stage_id: "stage-0".into(),
        retried_count: 0,
        blocks: vec![
            fixtures::log_block(1, "canary 1/2 (resent)"),
            fixtures::log_block(2, "canary 2/2"),
        ],
    })
    .await);
    // The final checkpoint (repeating index 2 again) completes the log.
    ok(
        c.report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest {
            deployment_id: dep_id.into(),
            stage_id: "stage-0".into(),
            retried_count: 0,
            blocks: vec![
                fixtures::log_block(2, "canary 2/2 (resent)"),
                fixtures::log_block(3, "done"),
            ],
            completed: true,
        })
        .await,
    );
    let log_path = format!("log/{dep_id}/stage-0/0.txt");
    let text = wisp
        .filestore_object(&log_path)
        .unwrap_or_else(|| panic!("no stage log file {log_path}"));
    let (blocks, completed) = parse_stage_log(&text);
    assert!(completed, "the checkpoint completed the log: {text:?}");
    assert_eq!(
        blocks,
        vec![
            (0, "rolling out".to_string()),
            (1, "canary 1/2".to_string()),
            (2, "canary 2/2".to_string()),
            (3, "done".to_string()),
        ],
        "each index once, first copy kept"
    );
    // A completed log takes no more blocks.
    assert_status(
        c.report_stage_logs(ReportStageLogsRequest {
            deployment_id: dep_id.into(),
            stage_id: "stage-0".into(),
            retried_count: 0,
            blocks: vec![fixtures::log_block(4, "too late")],
        })
        .await,
        Code::FailedPrecondition,
        "completed",
    );

    ok(
        c.report_stage_status_changed(ReportStageStatusChangedRequest {
            deployment_id: dep_id.into(),
            stage_id: "stage-0".into(),
            status: StageStatus::StageSuccess as i32,
            status_reason: "rolled out".into(),
            visible: true,
            completed_at: now(),
            ..Default::default()
        })
        .await,
    );
    // A finished stage does not start again.
    assert_status(
        c.report_stage_status_changed(ReportStageStatusChangedRequest {
            deployment_id: dep_id.into(),
            stage_id: "stage-0".into(),
            status: StageStatus::StageRunning as i32,
            completed_at: now(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        "stage-0",
    );

    // Deployment metadata, merged per call.
    for (k, v) in [("k8s", "canary"), ("rollout", "50%")] {
        ok(c.save_deployment_metadata(SaveDeploymentMetadataRequest {
            deployment_id: dep_id.into(),
            metadata: string_map(&[(k, v)]),
        })
        .await);
    }
    ok(
        c.save_deployment_shared_metadata(SaveDeploymentSharedMetadataRequest {
            deployment_id: dep_id.into(),
            metadata: string_map(&[("shared-key", "shared-value")]),
        })
        .await,
    );
    ok(
        c.save_deployment_plugin_metadata(SaveDeploymentPluginMetadataRequest {
            deployment_id: dep_id.into(),
            plugin_name: "kubernetes".into(),
            metadata: string_map(&[("plugin-key", "plugin-value")]),
        })
        .await,
    );

    // Everything is visible on the deployment.
    let d = ok(c
        .get_deployment(GetDeploymentRequest { id: dep_id.into() })
        .await)
    .deployment
    .expect("deployment");
    assert_eq!(d.id, dep_id);
    assert_eq!(d.application_id, app_id);
    assert_eq!(d.piped_id, piped.id);
    assert_eq!(d.status, DeploymentStatus::DeploymentRunning as i32);
    assert_eq!(d.summary, "Sync progressively because of updating image");
    assert_eq!(d.running_commit_hash, "fedcba9876543210");
    assert_eq!(d.running_config_filename, "app.pipecd.yaml");
    assert_eq!(d.versions.len(), 1);
    assert_eq!(d.versions[0].version, "v0.2.0");
    let stage_ids: Vec<&str> = d.stages.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(stage_ids, vec!["stage-0", "stage-1", "stage-2"]);
    assert!(d.stages[0].requires.is_empty());
    assert_eq!(d.stages[1].requires, vec!["stage-0"]);
    assert_eq!(d.stages[2].requires, vec!["stage-0", "stage-1"]);
    assert_eq!(d.stages[0].status, StageStatus::StageSuccess as i32);
    assert_eq!(d.stages[0].status_reason, "rolled out");
    assert!(d.stages[0].completed_at > 0);
    assert_eq!(d.stages[1].status, StageStatus::StageNotStartedYet as i32);
    assert_eq!(
        d.stages[1].metadata,
        string_map(&[("Approvers", "alice,bob")])
    );
    // v0 deployment (no plugins): the console may approve WAIT_APPROVAL stages.
    assert_eq!(
        d.stages[1].available_operation,
        model::ManualOperation::Approve as i32
    );
    assert_eq!(
        d.metadata,
        string_map(&[("k8s", "canary"), ("rollout", "50%")])
    );
    let v2 = d.metadata_v2.clone().expect("metadata_v2");
    assert_eq!(
        v2.shared.expect("shared metadata").key_values,
        string_map(&[("shared-key", "shared-value")])
    );
    assert_eq!(
        v2.plugins["kubernetes"].key_values,
        string_map(&[("plugin-key", "plugin-value")])
    );

    // Completion; the final stage statuses come with it.
    let completed_at = now();
    ok(
        c.report_deployment_completed(ReportDeploymentCompletedRequest {
            deployment_id: dep_id.into(),
            status: DeploymentStatus::DeploymentSuccess as i32,
            status_reason: "Deployment was completed successfully".into(),
            stage_statuses: [
                ("stage-1".to_string(), StageStatus::StageSuccess as i32),
                ("stage-2".to_string(), StageStatus::StageSuccess as i32),
            ]
            .into(),
            completed_at,
            ..Default::default()
        })
        .await,
    );
    // A completed deployment stays completed.
    assert_status(
        c.report_deployment_status_changed(ReportDeploymentStatusChangedRequest {
            deployment_id: dep_id.into(),
            status: DeploymentStatus::DeploymentRunning as i32,
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        dep_id,
    );

    ok(
        c.report_application_most_recent_deployment(ReportApplicationMostRecentDeploymentRequest {
            application_id: app_id.clone(),
            status: DeploymentStatus::DeploymentSuccess as i32,
            deployment: Some(fixtures::deployment_reference(dep_id)),
        })
        .await,
    );
    let recent = ok(c
        .get_application_most_recent_deployment(GetApplicationMostRecentDeploymentRequest {
            application_id: app_id.clone(),
            status: DeploymentStatus::DeploymentSuccess as i32,
        })
        .await)
    .deployment
    .expect("reference");
    assert_eq!(recent.deployment_id, dep_id);
    assert_eq!(recent.summary, "Quick sync by applying all manifests");

    let open = ok(c
        .list_not_completed_deployments(ListNotCompletedDeploymentsRequest::default())
        .await);
    assert!(open.deployments.is_empty(), "{:?}", open.deployments);
    assert_eq!(open.cursor, "");

    let d = ok(c
        .get_deployment(GetDeploymentRequest { id: dep_id.into() })
        .await)
    .deployment
    .expect("deployment");
    assert_eq!(d.status, DeploymentStatus::DeploymentSuccess as i32);
    assert_eq!(d.completed_at, completed_at);
    let statuses: Vec<i32> = d.stages.iter().map(|s| s.status).collect();
    assert_eq!(statuses, vec![StageStatus::StageSuccess as i32; 3]);
}

pub fn deployment_ids(deployments: &[model::Deployment]) -> Vec<String> {
    let mut ids: Vec<String> = deployments.iter().map(|d| d.id.clone()).collect();
    ids.sort();
    ids
}

/// Messages beyond gRPC's default 4 MiB limit (live-state snapshots, plugin objects) go
/// through both ways.
pub async fn large_messages(via: Via) {
    large_messages_on(&Wisp::start(), via).await;
}

pub async fn large_messages_on(wisp: &Wisp, via: Via) {
    let piped = wisp.add_piped(QUICKSTART, "large");
    let app_id = wisp.add_app(&piped, "large-app", &[]);
    let mut c = wisp.piped_client(via, &piped).await;

    let object: Vec<u8> = (0..6 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
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
        .get_application_shared_object(GetApplicationSharedObjectRequest {
            application_id: app_id.clone(),
            plugin_name: "kubernetes".into(),
            key: "manifests".into(),
        })
        .await);
    assert!(got.object == object, "the 6 MiB object came back intact");

    let resources: Vec<model::KubernetesResourceState> = (0..20_000)
        .map(|i| fixtures::k8s_resource(&format!("uid-{i:05}"), &format!("pod-{i:05}")))
        .collect();
    ok(
        c.report_application_live_state(ReportApplicationLiveStateRequest {
            snapshot: Some(fixtures::live_state_snapshot(&piped, &app_id, resources)),
        })
        .await,
    );
    let stored = wisp
        .filestore_object(&format!("application-live-state/{app_id}.json"))
        .expect("live state stored");
    assert!(stored.len() > 4 * 1024 * 1024, "{} bytes", stored.len());
    assert!(stored.contains("pod-19999"));
}
