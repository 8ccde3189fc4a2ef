//! APIService end to end: the real `wisp serve` on a fresh data directory, API keys made
//! with `wisp api-key add`, and the generated tonic client over a real socket driving the
//! 23 RPCs as pipectl does — the role matrix, cursors, and the flows that cross into the
//! PipedService (sync commands, events, plan previews).

use crate::support;

use std::collections::{HashMap, HashSet};

use tonic::{Code, Status};
use wisp_proto::apiservice as api;
use wisp_proto::model::{self, CommandStatus, command};
use wisp_proto::pipedservice as ps;
use wisp_services::hybrid;

use support::api::{
    ApiClient, ApiKey, REMOTE, Setup, legacy_api_call, registered_events_flow, setup_on,
    sync_application_flow,
};
use support::fixtures::{self, now, string_map};
use support::{QUICKSTART, Via, Wisp, assert_status, ok};

const PRIVATE_PEM: &str = include_str!("../../shared/services/tests/testdata/piped-private.pem");

/// The populated server every test here starts from.
async fn setup() -> Setup {
    setup_on(Wisp::start()).await
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rpc {
    AddApplication,
    SyncApplication,
    GetApplication,
    ListApplications,
    UpdateApplication,
    DeleteApplication,
    EnableApplication,
    DisableApplication,
    RenameApplicationConfigFile,
    UpdateApplicationDeployTargets,
    GetDeployment,
    ListDeployments,
    GetCommand,
    GetPiped,
    RegisterPiped,
    UpdatePiped,
    EnablePiped,
    DisablePiped,
    RegisterEvent,
    RequestPlanPreview,
    GetPlanPreviewResults,
    Encrypt,
    ListStageLogs,
}

/// All 23, in upstream's order.
const ALL: [Rpc; 23] = [
    Rpc::AddApplication,
    Rpc::SyncApplication,
    Rpc::GetApplication,
    Rpc::ListApplications,
    Rpc::UpdateApplication,
    Rpc::DeleteApplication,
    Rpc::EnableApplication,
    Rpc::DisableApplication,
    Rpc::RenameApplicationConfigFile,
    Rpc::UpdateApplicationDeployTargets,
    Rpc::GetDeployment,
    Rpc::ListDeployments,
    Rpc::GetCommand,
    Rpc::GetPiped,
    Rpc::RegisterPiped,
    Rpc::UpdatePiped,
    Rpc::EnablePiped,
    Rpc::DisablePiped,
    Rpc::RegisterEvent,
    Rpc::RequestPlanPreview,
    Rpc::GetPlanPreviewResults,
    Rpc::Encrypt,
    Rpc::ListStageLogs,
];

impl Rpc {
    /// Whether a READ_ONLY key may call it.
    fn read_only(self) -> bool {
        matches!(
            self,
            Rpc::GetApplication
                | Rpc::ListApplications
                | Rpc::GetDeployment
                | Rpc::ListDeployments
                | Rpc::GetCommand
                | Rpc::GetPiped
                | Rpc::Encrypt
                | Rpc::ListStageLogs
        )
    }

    /// The outcome for a key of the project ([`call`]'s requests all name quickstart
    /// objects): OK, except plan-preview results of a sync command.
    fn own_project(self) -> Option<Code> {
        match self {
            Rpc::GetPlanPreviewResults => Some(Code::FailedPrecondition),
            _ => None,
        }
    }

    /// The outcome for a READ_WRITE key of another project: upstream's codes for another
    /// project's object; the RPCs that name no object act on the key's own project.
    fn other_project(self) -> Option<Code> {
        match self {
            Rpc::ListApplications
            | Rpc::ListDeployments
            | Rpc::RegisterPiped
            | Rpc::RegisterEvent
            | Rpc::RequestPlanPreview => None,
            Rpc::RenameApplicationConfigFile
            | Rpc::UpdateApplicationDeployTargets
            | Rpc::UpdatePiped
            | Rpc::EnablePiped
            | Rpc::DisablePiped
            | Rpc::GetPlanPreviewResults => Some(Code::PermissionDenied),
            _ => Some(Code::InvalidArgument),
        }
    }
}

/// One call of `rpc` with a valid request naming quickstart objects.
async fn call(rpc: Rpc, client: &mut ApiClient, s: &Setup) -> Result<(), Status> {
    let app = || s.app.clone();
    let spare = || s.spare_app.clone();
    let spare_piped = || s.spare_piped.id.clone();
    match rpc {
        Rpc::AddApplication => client
            .add_application(api::AddApplicationRequest {
                name: format!("added-{}", now()),
                piped_id: s.piped.id.clone(),
                git_path: Some(fixtures::git_path("added")),
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::SyncApplication => client
            .sync_application(api::SyncApplicationRequest {
                application_id: app(),
            })
            .await
            .map(drop),
        Rpc::GetApplication => client
            .get_application(api::GetApplicationRequest {
                application_id: app(),
            })
            .await
            .map(drop),
        Rpc::ListApplications => client
            .list_applications(api::ListApplicationsRequest::default())
            .await
            .map(drop),
        Rpc::UpdateApplication => client
            .update_application(api::UpdateApplicationRequest {
                application_id: spare(),
                piped_id: s.piped.id.clone(),
                platform_provider: "kubernetes-default".into(),
                git_path: Some(fixtures::git_path("spare")),
            })
            .await
            .map(drop),
        Rpc::DeleteApplication => client
            .delete_application(api::DeleteApplicationRequest {
                application_id: s.doomed_app.clone(),
            })
            .await
            .map(drop),
        Rpc::EnableApplication => client
            .enable_application(api::EnableApplicationRequest {
                application_id: spare(),
            })
            .await
            .map(drop),
        Rpc::DisableApplication => client
            .disable_application(api::DisableApplicationRequest {
                application_id: spare(),
            })
            .await
            .map(drop),
        Rpc::RenameApplicationConfigFile => client
            .rename_application_config_file(api::RenameApplicationConfigFileRequest {
                application_ids: vec![spare()],
                new_filename: "renamed.pipecd.yaml".into(),
            })
            .await
            .map(drop),
        Rpc::UpdateApplicationDeployTargets => {
            let mut targets = HashMap::new();
            targets.insert(
                "kubernetes".to_string(),
                model::DeployTargets {
                    deploy_targets: vec!["local".into()],
                },
            );
            client
                .update_application_deploy_targets(api::UpdateApplicationDeployTargetsRequest {
                    application_id: spare(),
                    deploy_targets_by_plugin: targets,
                })
                .await
                .map(drop)
        }
        Rpc::GetDeployment => client
            .get_deployment(api::GetDeploymentRequest {
                deployment_id: s.deployment.clone(),
            })
            .await
            .map(drop),
        Rpc::ListDeployments => client
            .list_deployments(api::ListDeploymentsRequest::default())
            .await
            .map(drop),
        Rpc::GetCommand => client
            .get_command(api::GetCommandRequest {
                command_id: s.command.clone(),
            })
            .await
            .map(drop),
        Rpc::GetPiped => client
            .get_piped(api::GetPipedRequest {
                piped_id: s.piped.id.clone(),
            })
            .await
            .map(drop),
        Rpc::RegisterPiped => client
            .register_piped(api::RegisterPipedRequest {
                name: format!("registered-{}", now()),
                desc: String::new(),
            })
            .await
            .map(drop),
        Rpc::UpdatePiped => client
            .update_piped(api::UpdatePipedRequest {
                piped_id: spare_piped(),
                name: "spare-renamed".into(),
                desc: "renamed through the API".into(),
            })
            .await
            .map(drop),
        Rpc::EnablePiped => client
            .enable_piped(api::EnablePipedRequest {
                piped_id: spare_piped(),
            })
            .await
            .map(drop),
        Rpc::DisablePiped => client
            .disable_piped(api::DisablePipedRequest {
                piped_id: spare_piped(),
            })
            .await
            .map(drop),
        Rpc::RegisterEvent => client
            .register_event(api::RegisterEventRequest {
                name: "matrix".into(),
                data: "v1".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::RequestPlanPreview => client
            .request_plan_preview(api::RequestPlanPreviewRequest {
                repo_remote_url: REMOTE.into(),
                head_branch: "feature".into(),
                head_commit: "abc".into(),
                base_branch: "main".into(),
                timeout: 0,
            })
            .await
            .map(drop),
        Rpc::GetPlanPreviewResults => client
            .get_plan_preview_results(api::GetPlanPreviewResultsRequest {
                commands: vec![s.command.clone()],
                command_handle_timeout: 0,
            })
            .await
            .map(drop),
        Rpc::Encrypt => client
            .encrypt(api::EncryptRequest {
                plaintext: "secret".into(),
                piped_id: s.piped.id.clone(),
                base64_encoding: false,
            })
            .await
            .map(drop),
        Rpc::ListStageLogs => client
            .list_stage_logs(api::ListStageLogsRequest {
                deployment_id: s.deployment.clone(),
            })
            .await
            .map(drop),
    }
}

#[track_caller]
fn expect(who: &str, rpc: Rpc, got: Result<(), Status>, want: Option<Code>) {
    match (got, want) {
        (Ok(()), None) => {}
        (Err(status), Some(code)) if status.code() == code => {}
        (got, want) => panic!("{who} {rpc:?}: want {want:?}, got {got:?}"),
    }
}

async fn app_of(client: &mut ApiClient, id: &str) -> model::Application {
    ok(client
        .get_application(api::GetApplicationRequest {
            application_id: id.to_string(),
        })
        .await)
    .application
    .expect("application")
}

#[tokio::test]
async fn role_matrix() {
    let s = setup().await;

    // Keys that do not authenticate: every RPC is UNAUTHENTICATED.
    let mut unknown = ApiKey {
        id: "00000000-0000-4000-8000-000000000000".into(),
        key: String::new(),
    };
    unknown.key = format!("{}.abcdefghijklmnopqrstuvwxyz012345", unknown.id);
    let wrong_secret = ApiKey {
        key: format!("{}.wrongwrongwrongwrongwrongwrong00", s.rw.id),
        ..s.rw.clone()
    };
    for (who, auth) in [
        ("disabled", Some(s.disabled.authorization())),
        ("unknown", Some(unknown.authorization())),
        ("wrong secret", Some(wrong_secret.authorization())),
        ("piped token", Some(s.piped.authorization())),
        ("malformed", Some("API-KEY no-dot".to_string())),
        ("none", None),
    ] {
        let mut client = s.wisp.api_client(Via::Grpc, auth.as_deref()).await;
        for rpc in ALL {
            expect(
                who,
                rpc,
                call(rpc, &mut client, &s).await,
                Some(Code::Unauthenticated),
            );
        }
    }

    // READ_ONLY: the reads work, every write is PERMISSION_DENIED.
    let mut ro = s.wisp.api_key_client(Via::Grpc, &s.ro).await;
    for rpc in ALL {
        let want = if rpc.read_only() {
            rpc.own_project()
        } else {
            Some(Code::PermissionDenied)
        };
        expect("read-only", rpc, call(rpc, &mut ro, &s).await, want);
    }

    // Another project's key: refused on every quickstart object, with upstream's codes.
    let mut foreign = s.wisp.api_key_client(Via::Grpc, &s.foreign).await;
    for rpc in ALL {
        expect(
            "foreign",
            rpc,
            call(rpc, &mut foreign, &s).await,
            rpc.other_project(),
        );
    }
    let theirs = ok(foreign
        .list_applications(api::ListApplicationsRequest::default())
        .await);
    assert!(theirs.applications.is_empty(), "{theirs:?}");
    let theirs = ok(foreign
        .list_deployments(api::ListDeploymentsRequest::default())
        .await);
    assert!(theirs.deployments.is_empty());

    // Nothing of quickstart changed so far.
    let mut rw = s.wisp.api_key_client(Via::Grpc, &s.rw).await;
    let doomed = app_of(&mut rw, &s.doomed_app).await;
    assert!(!doomed.deleted && !doomed.disabled);
    let spare = app_of(&mut rw, &s.spare_app).await;
    assert_eq!(
        spare.git_path.expect("git path").config_filename,
        "app.pipecd.yaml"
    );
    let unhandled = ok(s
        .wisp
        .piped_client(Via::Grpc, &s.piped)
        .await
        .list_unhandled_commands(ps::ListUnhandledCommandsRequest {})
        .await);
    assert_eq!(unhandled.commands.len(), 1, "only the setup's sync command");

    // READ_WRITE of the project: everything.
    for rpc in ALL {
        expect(
            "read-write",
            rpc,
            call(rpc, &mut rw, &s).await,
            rpc.own_project(),
        );
    }
    let doomed = app_of(&mut rw, &s.doomed_app).await;
    assert!(doomed.deleted);
    let spare = app_of(&mut rw, &s.spare_app).await;
    assert!(spare.disabled);
    assert_eq!(
        spare.deploy_targets_by_plugin["kubernetes"].deploy_targets,
        vec!["local"]
    );
    assert_eq!(
        spare.git_path.expect("git path").config_filename,
        "renamed.pipecd.yaml"
    );
    let spare_piped = ok(rw
        .get_piped(api::GetPipedRequest {
            piped_id: s.spare_piped.id.clone(),
        })
        .await)
    .piped
    .expect("piped");
    assert_eq!(spare_piped.name, "spare-renamed");
    assert!(spare_piped.disabled);
    assert!(spare_piped.keys.iter().all(|k| k.hash == "redacted"));

    // Last use is recorded for the key that was used, never for refused ones.
    let keys = s
        .wisp
        .cli_json(&["api-key", "list", "--project", QUICKSTART]);
    let keys = keys.as_array().expect("a list");
    let last_used = |id: &str| {
        keys.iter()
            .find(|k| k["id"] == id)
            .and_then(|k| k["last_used_at"].as_i64())
            .expect("listed key")
    };
    assert!(last_used(&s.rw.id) > 0);
    assert!(last_used(&s.ro.id) > 0);
    assert_eq!(last_used(&s.disabled.id), 0);
    assert!(keys.iter().all(|k| k.get("key_hash").is_none()));
}

#[tokio::test]
async fn cursors_across_pages() {
    let s = setup().await;
    let mut rw = s.wisp.api_key_client(Via::Grpc, &s.rw).await;
    // 3 applications from the set-up plus 22 through the API, 7 of them labelled.
    for i in 0..22 {
        let labels = if i % 3 == 0 {
            string_map(&[("team", "blue")])
        } else {
            HashMap::new()
        };
        ok(rw
            .add_application(api::AddApplicationRequest {
                name: format!("bulk-{i:02}"),
                piped_id: s.piped.id.clone(),
                git_path: Some(fixtures::git_path(&format!("bulk-{i:02}"))),
                labels,
                ..Default::default()
            })
            .await);
    }
    let mut seen = HashSet::new();
    let mut sizes = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = ok(rw
            .list_applications(api::ListApplicationsRequest {
                limit: 10,
                cursor: cursor.clone(),
                ..Default::default()
            })
            .await);
        sizes.push(page.applications.len());
        for a in page.applications {
            assert!(seen.insert(a.id), "listed twice");
        }
        if page.cursor.is_empty() {
            break;
        }
        cursor = page.cursor;
        assert!(sizes.len() < 10, "the cursor never ends");
    }
    assert_eq!(sizes, vec![10, 10, 5]);

    let mut blue = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = ok(rw
            .list_applications(api::ListApplicationsRequest {
                labels: string_map(&[("team", "blue")]),
                limit: 3,
                cursor: cursor.clone(),
                ..Default::default()
            })
            .await);
        assert!(page.applications.len() <= 3);
        blue.extend(page.applications.into_iter().map(|a| a.name));
        if page.cursor.is_empty() {
            break;
        }
        cursor = page.cursor;
    }
    blue.sort();
    let want: Vec<String> = (0..22)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("bulk-{i:02}"))
        .collect();
    assert_eq!(blue, want);
    assert_status(
        rw.list_applications(api::ListApplicationsRequest {
            cursor: "not a cursor".into(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "cursor",
    );

    // Deployments: the set-up's one plus six more.
    let mut piped = s.wisp.piped_client(Via::Grpc, &s.piped).await;
    for i in 0..6 {
        ok(piped
            .create_deployment(ps::CreateDeploymentRequest {
                deployment: Some(fixtures::deployment(
                    &s.piped,
                    &format!("dep-bulk-{i}"),
                    &s.app,
                    "app",
                )),
            })
            .await);
    }
    let mut seen = HashSet::new();
    let mut sizes = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = ok(rw
            .list_deployments(api::ListDeploymentsRequest {
                limit: 3,
                cursor: cursor.clone(),
                ..Default::default()
            })
            .await);
        sizes.push(page.deployments.len());
        for d in page.deployments {
            assert!(seen.insert(d.id));
        }
        if page.cursor.is_empty() {
            break;
        }
        cursor = page.cursor;
    }
    assert_eq!(sizes, vec![3, 3, 1]);
    let pending = ok(rw
        .list_deployments(api::ListDeploymentsRequest {
            statuses: vec!["DEPLOYMENT_PENDING".into()],
            application_ids: vec![s.app.clone()],
            ..Default::default()
        })
        .await);
    assert_eq!(pending.deployments.len(), 7);
    assert!(pending.cursor.is_empty());
}

#[tokio::test]
async fn sync_application_reaches_the_piped_and_its_result_comes_back() {
    sync_application_flow(&mut setup().await).await;
}

#[tokio::test]
async fn registered_events_reach_the_piped() {
    registered_events_flow(&mut setup().await).await;
}

#[tokio::test]
async fn plan_preview_and_encrypt() {
    let mut s = setup().await;
    let mut rw = s.wisp.api_key_client(Via::Grpc, &s.rw).await;

    // Encrypt: sealed with the piped's public key, opened with its private key.
    let private = hybrid::parse_private_key_pem(PRIVATE_PEM).expect("private key");
    let sealed = ok(rw
        .encrypt(api::EncryptRequest {
            plaintext: "db-password".into(),
            piped_id: s.piped.id.clone(),
            base64_encoding: false,
        })
        .await)
    .ciphertext;
    assert_eq!(
        hybrid::decrypt(&private, &sealed).expect("decrypt"),
        b"db-password"
    );
    assert_status(
        rw.encrypt(api::EncryptRequest {
            plaintext: "x".into(),
            piped_id: s.spare_piped.id.clone(),
            base64_encoding: false,
        })
        .await,
        Code::FailedPrecondition,
        "does not contain a public key",
    );

    // Plan preview: one command for the piped that watches the repository.
    let commands = ok(rw
        .request_plan_preview(api::RequestPlanPreviewRequest {
            repo_remote_url: REMOTE.into(),
            head_branch: "feature".into(),
            head_commit: "abc123".into(),
            base_branch: "main".into(),
            timeout: 300,
        })
        .await)
    .commands;
    assert_eq!(commands.len(), 1);
    let unhandled = ok(s
        .piped_client
        .list_unhandled_commands(ps::ListUnhandledCommandsRequest {})
        .await)
    .commands;
    let preview = unhandled
        .iter()
        .find(|c| c.id == commands[0])
        .expect("the piped sees the plan-preview command");
    assert_eq!(preview.r#type, command::Type::BuildPlanPreview as i32);
    let payload = preview.build_plan_preview.clone().expect("payload");
    assert_eq!(payload.repository_id, "examples");
    assert_eq!(payload.head_commit, "abc123");

    let results_req = || api::GetPlanPreviewResultsRequest {
        commands: commands.clone(),
        command_handle_timeout: 0,
    };
    // No ReportStat yet: the piped is offline.
    let offline = ok(rw.get_plan_preview_results(results_req()).await).results;
    assert_eq!(offline[0].error, "Maybe Piped is offline currently.");
    // Online and still within the handle timeout: NOT_FOUND, the client retries.
    ok(s.piped_client
        .report_stat(ps::ReportStatRequest {
            piped_stats: b"# metrics".to_vec(),
        })
        .await);
    assert_status(
        rw.get_plan_preview_results(results_req()).await,
        Code::NotFound,
        "Waiting for result",
    );
    // The piped reports its result as the command's output (JSON, as upstream's piped).
    let output = serde_json::json!({
        "command_id": commands[0],
        "piped_id": s.piped.id,
        "results": [{
            "application_id": s.app,
            "application_name": "app",
            "application_kind": 0,
            "plan_summary": "MSB0byBjaGFuZ2U=",
            "no_change": false,
        }],
    });
    ok(s.piped_client
        .report_command_handled(ps::ReportCommandHandledRequest {
            command_id: commands[0].clone(),
            status: CommandStatus::CommandSucceeded as i32,
            metadata: HashMap::new(),
            handled_at: now(),
            output: serde_json::to_vec(&output).expect("json"),
        })
        .await);
    let results = ok(rw.get_plan_preview_results(results_req()).await).results;
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].piped_name, "dev");
    assert!(results[0].error.is_empty());
    assert_eq!(results[0].results[0].application_id, s.app);
    assert_eq!(results[0].results[0].plan_summary, b"1 to change");
    assert!(
        results[0].results[0]
            .application_url
            .ends_with(&format!("/applications/{}", s.app))
    );
}

#[tokio::test]
async fn grpc_web_and_the_legacy_path() {
    let s = setup().await;
    let mut web = s.wisp.api_key_client(Via::GrpcWeb, &s.rw).await;
    let apps = ok(web
        .list_applications(api::ListApplicationsRequest::default())
        .await);
    assert_eq!(apps.applications.len(), 3);
    let mut web_ro = s.wisp.api_key_client(Via::GrpcWeb, &s.ro).await;
    assert_status(
        web_ro
            .sync_application(api::SyncApplicationRequest {
                application_id: s.app.clone(),
            })
            .await,
        Code::PermissionDenied,
        "Permission denied",
    );
    let mut web_disabled = s.wisp.api_key_client(Via::GrpcWeb, &s.disabled).await;
    assert_status(
        web_disabled
            .get_piped(api::GetPipedRequest {
                piped_id: s.piped.id.clone(),
            })
            .await,
        Code::Unauthenticated,
        "Unauthenticated",
    );

    for via in [Via::Grpc, Via::GrpcWeb] {
        let transport = s.wisp.transport(via, Some(&s.rw.authorization())).await;
        let piped: api::GetPipedResponse = legacy_api_call(
            transport,
            "GetPiped",
            api::GetPipedRequest {
                piped_id: s.piped.id.clone(),
            },
        )
        .await
        .expect("legacy path");
        assert_eq!(piped.piped.expect("piped").name, "dev");
    }
}
