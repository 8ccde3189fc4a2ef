//! Every WebService RPC × Admin / Editor / Viewer of the project / Admin of another
//! project, over gRPC-web with a session cookie: PERMISSION_DENIED exactly where
//! upstream's built-in roles deny, every RPC implemented, and nothing of the project's
//! objects in any answer to the other project.

use crate::support;

use prost::Message;
use tonic::Code;
use wisp_auth::{SessionSigner, WebCaller};
use wisp_proto::model::project_rbac_policy::Action;
use wisp_proto::model::project_rbac_resource::ResourceType;
use wisp_proto::model::{DeploymentStatus, StageStatus};
use wisp_proto::pipedservice as ps;
use wisp_proto::webservice as web;
use wisp_services::web::rbac::{Requirement, requirement};

use support::api::report_meta;
use support::web::WebClient;
use support::{QUICKSTART, Via, Wisp, fixtures, ok};

/// What upstream's built-in roles allow (its `builtin*RBACRole` tables), written out
/// independently of the code under test.
fn upstream_allows(role: &str, resource: ResourceType, action: Action) -> bool {
    use Action::{Get, List};
    use ResourceType as R;
    match role {
        "Admin" => true,
        "Editor" => {
            matches!(resource, R::Application | R::Deployment)
                || (resource == R::Piped && matches!(action, Get | List))
                || (matches!(resource, R::Project | R::Insight) && action == Get)
                || (resource == R::Event && action == List)
        }
        "Viewer" => {
            (matches!(resource, R::Application | R::Deployment | R::Piped)
                && matches!(action, Get | List))
                || (matches!(resource, R::Project | R::Insight) && action == Get)
                || (resource == R::Event && action == List)
        }
        _ => false,
    }
}

/// Ids of the project's objects, used as the requests' targets.
struct Ids {
    piped: String,
    app: String,
    deployment: String,
    command: String,
}

macro_rules! call {
    ($client:expr, $method:ident, $req:expr) => {
        $client
            .$method($req)
            .await
            .map(|r| r.into_inner().encode_to_vec())
    };
}

/// Calls RPC `name` with a request aimed at the project's objects.
async fn call(c: &mut WebClient, name: &str, ids: &Ids) -> Result<Vec<u8>, tonic::Status> {
    let piped_id = ids.piped.clone();
    let app = ids.app.clone();
    let dep = ids.deployment.clone();
    match name {
        "RegisterPiped" => call!(
            c,
            register_piped,
            web::RegisterPipedRequest {
                name: "m".into(),
                desc: String::new()
            }
        ),
        "UpdatePiped" => call!(
            c,
            update_piped,
            web::UpdatePipedRequest {
                piped_id,
                name: "renamed".into(),
                desc: String::new()
            }
        ),
        "RecreatePipedKey" => call!(
            c,
            recreate_piped_key,
            web::RecreatePipedKeyRequest { id: piped_id }
        ),
        "DeleteOldPipedKeys" => call!(
            c,
            delete_old_piped_keys,
            web::DeleteOldPipedKeysRequest { piped_id }
        ),
        "EnablePiped" => call!(c, enable_piped, web::EnablePipedRequest { piped_id }),
        "DisablePiped" => call!(c, disable_piped, web::DisablePipedRequest { piped_id }),
        "ListPipeds" => call!(
            c,
            list_pipeds,
            web::ListPipedsRequest {
                with_status: true,
                options: None
            }
        ),
        "GetPiped" => call!(c, get_piped, web::GetPipedRequest { piped_id }),
        "UpdatePipedDesiredVersion" => call!(
            c,
            update_piped_desired_version,
            web::UpdatePipedDesiredVersionRequest {
                version: "v0.50.0".into(),
                piped_ids: vec![piped_id]
            }
        ),
        "RestartPiped" => call!(c, restart_piped, web::RestartPipedRequest { piped_id }),
        "ListReleasedVersions" => call!(
            c,
            list_released_versions,
            web::ListReleasedVersionsRequest {}
        ),
        "ListDeprecatedNotes" => call!(
            c,
            list_deprecated_notes,
            web::ListDeprecatedNotesRequest {
                project_id: QUICKSTART.into()
            }
        ),
        "AddApplication" => call!(
            c,
            add_application,
            web::AddApplicationRequest {
                name: "m".into(),
                piped_id,
                git_path: Some(fixtures::git_path("m")),
                ..Default::default()
            }
        ),
        "UpdateApplication" => call!(
            c,
            update_application,
            web::UpdateApplicationRequest {
                application_id: app,
                piped_id,
                name: "app".into(),
                ..Default::default()
            }
        ),
        "EnableApplication" => call!(
            c,
            enable_application,
            web::EnableApplicationRequest {
                application_id: app
            }
        ),
        "DisableApplication" => call!(
            c,
            disable_application,
            web::DisableApplicationRequest {
                application_id: app
            }
        ),
        "DeleteApplication" => call!(
            c,
            delete_application,
            web::DeleteApplicationRequest {
                application_id: app
            }
        ),
        "ListApplications" => call!(
            c,
            list_applications,
            web::ListApplicationsRequest {
                options: Some(Default::default())
            }
        ),
        "SyncApplication" => call!(
            c,
            sync_application,
            web::SyncApplicationRequest {
                application_id: app,
                sync_strategy: 0
            }
        ),
        "GetApplication" => call!(
            c,
            get_application,
            web::GetApplicationRequest {
                application_id: app
            }
        ),
        "GenerateApplicationSealedSecret" => call!(
            c,
            generate_application_sealed_secret,
            web::GenerateApplicationSealedSecretRequest {
                piped_id,
                data: "s".into(),
                base64_encoding: false
            }
        ),
        "ListUnregisteredApplications" => call!(
            c,
            list_unregistered_applications,
            web::ListUnregisteredApplicationsRequest {}
        ),
        "ListDeployments" => call!(
            c,
            list_deployments,
            web::ListDeploymentsRequest {
                page_size: 50,
                ..Default::default()
            }
        ),
        "GetDeployment" => call!(
            c,
            get_deployment,
            web::GetDeploymentRequest { deployment_id: dep }
        ),
        "GetStageLog" => call!(
            c,
            get_stage_log,
            web::GetStageLogRequest {
                deployment_id: dep,
                stage_id: "s1".into(),
                ..Default::default()
            }
        ),
        "CancelDeployment" => call!(
            c,
            cancel_deployment,
            web::CancelDeploymentRequest {
                deployment_id: dep,
                ..Default::default()
            }
        ),
        "SkipStage" => call!(
            c,
            skip_stage,
            web::SkipStageRequest {
                deployment_id: dep,
                stage_id: "analysis".into()
            }
        ),
        "ApproveStage" => call!(
            c,
            approve_stage,
            web::ApproveStageRequest {
                deployment_id: dep,
                stage_id: "s1".into()
            }
        ),
        "ListDeploymentTraces" => call!(
            c,
            list_deployment_traces,
            web::ListDeploymentTracesRequest::default()
        ),
        "GetApplicationLiveState" => call!(
            c,
            get_application_live_state,
            web::GetApplicationLiveStateRequest {
                application_id: app
            }
        ),
        "GetProject" => call!(c, get_project, web::GetProjectRequest {}),
        "UpdateProjectStaticAdmin" => call!(
            c,
            update_project_static_admin,
            web::UpdateProjectStaticAdminRequest {
                username: "hello-pipecd".into(),
                password: "hello-pipecd".into()
            }
        ),
        "EnableStaticAdmin" => call!(c, enable_static_admin, web::EnableStaticAdminRequest {}),
        "DisableStaticAdmin" => call!(c, disable_static_admin, web::DisableStaticAdminRequest {}),
        "UpdateProjectSSOConfig" => call!(
            c,
            update_project_sso_config,
            web::UpdateProjectSsoConfigRequest { sso: None }
        ),
        "UpdateProjectRBACConfig" => call!(
            c,
            update_project_rbac_config,
            web::UpdateProjectRbacConfigRequest { rbac: None }
        ),
        "GetMe" => call!(c, get_me, web::GetMeRequest {}),
        "AddProjectRBACRole" => call!(
            c,
            add_project_rbac_role,
            web::AddProjectRbacRoleRequest {
                name: "Custom".into(),
                policies: vec![]
            }
        ),
        "UpdateProjectRBACRole" => call!(
            c,
            update_project_rbac_role,
            web::UpdateProjectRbacRoleRequest {
                name: "Custom".into(),
                policies: vec![]
            }
        ),
        "DeleteProjectRBACRole" => call!(
            c,
            delete_project_rbac_role,
            web::DeleteProjectRbacRoleRequest {
                name: "Custom".into()
            }
        ),
        "AddProjectUserGroup" => call!(
            c,
            add_project_user_group,
            web::AddProjectUserGroupRequest {
                sso_group: "org/team".into(),
                role: "Viewer".into()
            }
        ),
        "DeleteProjectUserGroup" => call!(
            c,
            delete_project_user_group,
            web::DeleteProjectUserGroupRequest {
                sso_group: "org/team".into()
            }
        ),
        "GetCommand" => call!(
            c,
            get_command,
            web::GetCommandRequest {
                command_id: ids.command.clone()
            }
        ),
        "GenerateAPIKey" => call!(
            c,
            generate_api_key,
            web::GenerateApiKeyRequest {
                name: "k".into(),
                role: 0
            }
        ),
        "DisableAPIKey" => call!(
            c,
            disable_api_key,
            web::DisableApiKeyRequest {
                id: "no-such-key".into()
            }
        ),
        "ListAPIKeys" => call!(c, list_api_keys, web::ListApiKeysRequest::default()),
        "GetInsightData" => call!(
            c,
            get_insight_data,
            web::GetInsightDataRequest {
                range_from: fixtures::now() - 86400,
                range_to: fixtures::now(),
                ..Default::default()
            }
        ),
        "GetInsightApplicationCount" => call!(
            c,
            get_insight_application_count,
            web::GetInsightApplicationCountRequest {}
        ),
        "ListDeploymentChains" => call!(
            c,
            list_deployment_chains,
            web::ListDeploymentChainsRequest::default()
        ),
        "GetDeploymentChain" => call!(
            c,
            get_deployment_chain,
            web::GetDeploymentChainRequest {
                deployment_chain_id: "no-such-chain".into()
            }
        ),
        "ListEvents" => call!(c, list_events, web::ListEventsRequest::default()),
        other => panic!("no call for {other}"),
    }
}

fn session(wisp: &Wisp, project: &str, role: &str) -> String {
    let key = std::fs::read(wisp.data_dir().join("encryption-key")).expect("the server's key");
    SessionSigner::new(&key)
        .sign(&WebCaller {
            subject: format!("{role}-user"),
            avatar_url: String::new(),
            project_id: project.into(),
            roles: vec![role.into()],
            ..Default::default()
        })
        .expect("sign")
}

#[tokio::test]
async fn every_rpc_for_every_role() {
    let wisp = Wisp::start();
    wisp.add_project("other");
    let piped = wisp.add_piped(QUICKSTART, "dev");
    let mut piped_client = wisp.piped_client(Via::Grpc, &piped).await;
    report_meta(&mut piped_client).await;
    let app = wisp.add_app(&piped, "app", &[]);
    let mut dep = fixtures::deployment(&piped, "dep-matrix", &app, "app");
    let mut stage = fixtures::stage("s1", "WAIT_APPROVAL", 0, &[]);
    stage.status = StageStatus::StageRunning as i32;
    let mut analysis = fixtures::stage("analysis", "ANALYSIS", 1, &[]);
    analysis.status = StageStatus::StageRunning as i32;
    dep.stages = vec![stage, analysis];
    dep.status = DeploymentStatus::DeploymentRunning as i32;
    ok(piped_client
        .create_deployment(ps::CreateDeploymentRequest {
            deployment: Some(dep),
        })
        .await);
    // The admin's session comes from the login form; the others are signed with the
    // server's key, as an SSO login with those roles would be.
    let admin_token = wisp.admin_session().await;
    let mut admin = wisp.web_client(Via::GrpcWeb, Some(&admin_token)).await;
    let command = ok(admin
        .sync_application(web::SyncApplicationRequest {
            application_id: app.clone(),
            sync_strategy: 0,
        })
        .await)
    .command_id;
    let ids = Ids {
        piped: piped.id.clone(),
        app: app.clone(),
        deployment: "dep-matrix".into(),
        command,
    };
    let ours = [piped.id.as_str(), app.as_str(), "dep-matrix"];

    // Admin last: its writes (disabling the static admin, deleting the application)
    // would change what the others see.
    let sessions = [
        ("Viewer", QUICKSTART, session(&wisp, QUICKSTART, "Viewer")),
        ("Editor", QUICKSTART, session(&wisp, QUICKSTART, "Editor")),
        ("Admin", "other", session(&wisp, "other", "Admin")),
        ("Admin", QUICKSTART, admin_token.clone()),
    ];
    let names: Vec<&str> = wisp_services::web::rbac::RPC_REQUIREMENTS
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(names.len(), 51);
    let mut failures = Vec::new();
    for (role, project, token) in &sessions {
        let mut client = wisp.web_client(Via::GrpcWeb, Some(token)).await;
        for name in &names {
            let result = call(&mut client, name, &ids).await;
            let expected_allowed = match requirement(name).expect("a requirement") {
                Requirement::Ignored => true,
                Requirement::Policy(resource, action) => upstream_allows(role, resource, action),
            };
            let who = format!("{role}@{project} {name}");
            let denied = matches!(&result, Err(s)
                if s.code() == Code::PermissionDenied && s.message() == "Permission Denied");
            match &result {
                Err(s) if s.code() == Code::Unimplemented => {
                    failures.push(format!("{who}: unimplemented"));
                }
                _ if denied && expected_allowed => {
                    failures.push(format!("{who}: denied, upstream allows it"));
                }
                _ if !denied && !expected_allowed => {
                    failures.push(format!("{who}: allowed ({result:?}), upstream denies it"));
                }
                Ok(bytes) if *project != QUICKSTART => {
                    for id in ours {
                        if bytes.windows(id.len()).any(|w| w == id.as_bytes()) {
                            failures.push(format!("{who}: the answer leaks {id}"));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
