//! The PipeCD console against `wisp serve`: the static admin logs in through the HTML
//! form, the session cookie carries every WebService call (gRPC-web, as the console
//! sends them), and the operator's actions reach a piped as commands.

use crate::support;

use std::time::Duration;

use tonic::Code;
use wisp_auth::{SessionSigner, WebCaller};
use wisp_proto::model::{self, DeploymentStatus, StageStatus, command};
use wisp_proto::pipedservice as ps;
use wisp_proto::webservice as web;

use support::api::report_meta;
use support::web::{cookie_value, session_for, set_cookie};
use support::{Piped, QUICKSTART, Via, Wisp, assert_status, fixtures, ok};

#[tokio::test]
async fn static_admin_login_sets_a_session_cookie() {
    let wisp = Wisp::start();
    let resp = wisp
        .login_static(QUICKSTART, "hello-pipecd", "hello-pipecd")
        .await;
    assert_eq!(resp.status, http::StatusCode::FOUND, "{resp:?}");
    assert_eq!(resp.headers["location"], "/");
    let cookie = set_cookie(&resp, "token").expect("a token cookie");
    for attribute in [
        "Path=/",
        "HttpOnly",
        "SameSite=Strict",
        "Secure",
        "Max-Age=604800",
    ] {
        assert!(
            cookie.contains(attribute),
            "{attribute} missing in {cookie}"
        );
    }
    assert!(set_cookie(&resp, "error").is_none());

    let token = cookie_value(cookie);
    let mut console = wisp.web_client(Via::GrpcWeb, Some(token)).await;
    let me = ok(console.get_me(web::GetMeRequest {}).await);
    assert_eq!(me.subject, "hello-pipecd");
    assert_eq!(me.project_id, QUICKSTART);
    let project = ok(console.get_project(web::GetProjectRequest {}).await)
        .project
        .expect("a project");
    let admin = project.static_admin.expect("a static admin");
    assert_eq!(
        admin.password_hash, "redacted",
        "the hash must not leave the server"
    );
}

#[tokio::test]
async fn failed_logins_explain_themselves_in_the_error_cookie() {
    let wisp = Wisp::start();
    for (project, user, password, message) in [
        (QUICKSTART, "hello-pipecd", "wrong", "Unable%20to%20login"),
        (QUICKSTART, "someone", "hello-pipecd", "Unable%20to%20login"),
        // No oracle for which projects exist (issue 33): the same answer.
        (
            "nope",
            "hello-pipecd",
            "hello-pipecd",
            "Unable%20to%20login",
        ),
        (QUICKSTART, "hello-pipecd", "", "Missing%20password"),
        ("", "hello-pipecd", "hello-pipecd", "Missing%20project%20id"),
    ] {
        let resp = wisp.login_static(project, user, password).await;
        assert_eq!(resp.status, http::StatusCode::SEE_OTHER, "{resp:?}");
        assert!(
            set_cookie(&resp, "token").is_none(),
            "a session for a bad login"
        );
        let error = set_cookie(&resp, "error").expect("an error cookie");
        assert!(error.contains(message), "{error} does not say {message}");
        assert!(!error.contains("HttpOnly"), "the login page must read it");
    }
}

#[tokio::test]
async fn calls_without_a_valid_session_are_unauthenticated() {
    let wisp = Wisp::start();
    let mut anonymous = wisp.web_client(Via::GrpcWeb, None).await;
    assert_status(
        anonymous.get_me(web::GetMeRequest {}).await,
        Code::Unauthenticated,
        "",
    );
    let mut forged = wisp.web_client(Via::GrpcWeb, Some("not.a.jwt")).await;
    assert_status(
        forged.get_me(web::GetMeRequest {}).await,
        Code::Unauthenticated,
        "",
    );
    let other_key = SessionSigner::new(b"some-other-key-some-other-key-123")
        .sign(&WebCaller {
            subject: "mallory".into(),
            avatar_url: String::new(),
            project_id: QUICKSTART.into(),
            roles: vec!["Admin".into()],
            ..Default::default()
        })
        .expect("sign");
    let mut forged = wisp.web_client(Via::Grpc, Some(&other_key)).await;
    assert_status(
        forged.list_pipeds(web::ListPipedsRequest::default()).await,
        Code::Unauthenticated,
        "",
    );
}

#[tokio::test]
async fn console_registers_a_piped_adds_an_application_and_syncs_it() {
    let wisp = Wisp::start();
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;

    let (piped, mut piped_client) = register_and_connect(&wisp, &mut console, "dev").await;

    let listed = ok(console
        .list_pipeds(web::ListPipedsRequest {
            with_status: true,
            options: None,
        })
        .await)
    .pipeds;
    let listed = listed
        .iter()
        .find(|p| p.id == piped.id)
        .expect("the new piped is listed");
    assert!(listed.keys.iter().all(|k| k.hash == "redacted"));

    assert_status(
        console
            .add_application(web::AddApplicationRequest {
                name: "app".into(),
                piped_id: piped.id.clone(),
                git_path: Some(model::ApplicationGitPath {
                    repo: Some(model::ApplicationGitRepository {
                        id: "not-watched".into(),
                        ..Default::default()
                    }),
                    path: "apps/app".into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await,
        Code::NotFound,
        "not-watched",
    );
    let app_id = ok(console
        .add_application(web::AddApplicationRequest {
            name: "app".into(),
            piped_id: piped.id.clone(),
            git_path: Some(model::ApplicationGitPath {
                repo: Some(model::ApplicationGitRepository {
                    id: "examples".into(),
                    ..Default::default()
                }),
                path: "apps/app".into(),
                config_filename: "app.pipecd.yaml".into(),
                ..Default::default()
            }),
            kind: model::ApplicationKind::Kubernetes as i32,
            labels: fixtures::string_map(&[("env", "dev")]),
            ..Default::default()
        })
        .await)
    .application_id;

    // The console always sends options, but a request without them must not fail.
    let apps = ok(console
        .list_applications(web::ListApplicationsRequest { options: None })
        .await)
    .applications;
    assert_eq!(apps.len(), 1);
    assert_eq!(apps[0].id, app_id);
    assert_eq!(
        apps[0]
            .git_path
            .as_ref()
            .and_then(|g| g.repo.as_ref())
            .map(|r| r.remote.as_str()),
        Some(support::api::REMOTE),
        "the repository comes from the piped's report"
    );
    let piped_apps = ok(piped_client
        .list_applications(ps::ListApplicationsRequest {})
        .await)
    .applications;
    assert!(piped_apps.iter().any(|a| a.id == app_id));

    let command_id = ok(console
        .sync_application(web::SyncApplicationRequest {
            application_id: app_id.clone(),
            sync_strategy: model::SyncStrategy::QuickSync as i32,
        })
        .await)
    .command_id;
    handle_command(
        &mut piped_client,
        &command_id,
        command::Type::SyncApplication,
    )
    .await;
    let handled = ok(console
        .get_command(web::GetCommandRequest {
            command_id: command_id.clone(),
        })
        .await)
    .command
    .expect("a command");
    assert_eq!(
        handled.status,
        model::CommandStatus::CommandSucceeded as i32
    );

    let restart = ok(console
        .restart_piped(web::RestartPipedRequest {
            piped_id: piped.id.clone(),
        })
        .await)
    .command_id;
    handle_command(&mut piped_client, &restart, command::Type::RestartPiped).await;
}

/// Registers a piped from the console, and connects it as the piped would (its first
/// ReportPipedMeta, watching the `examples` repository).
async fn register_and_connect(
    wisp: &Wisp,
    console: &mut support::web::WebClient,
    name: &str,
) -> (Piped, support::Client) {
    let registered = ok(console
        .register_piped(web::RegisterPipedRequest {
            name: name.into(),
            desc: "from the console".into(),
        })
        .await);
    let piped = Piped {
        project: QUICKSTART.into(),
        id: registered.id,
        key: registered.key,
    };
    let mut piped_client = wisp.piped_client(Via::Grpc, &piped).await;
    report_meta(&mut piped_client).await;
    (piped, piped_client)
}

/// The piped finds `command_id` among its unhandled commands and reports it handled.
async fn handle_command(piped_client: &mut support::Client, command_id: &str, kind: command::Type) {
    let unhandled = ok(piped_client
        .list_unhandled_commands(ps::ListUnhandledCommandsRequest {})
        .await)
    .commands;
    let cmd = unhandled
        .iter()
        .find(|c| c.id == command_id)
        .unwrap_or_else(|| panic!("{command_id} is not among {unhandled:?}"));
    assert_eq!(cmd.r#type, kind as i32);
    ok(piped_client
        .report_command_handled(ps::ReportCommandHandledRequest {
            command_id: command_id.into(),
            status: model::CommandStatus::CommandSucceeded as i32,
            handled_at: fixtures::now(),
            ..Default::default()
        })
        .await);
}

/// A piped with an application and a running deployment: WAIT_APPROVAL (approvers
/// `approvers`) then ANALYSIS, both running.
async fn running_deployment(wisp: &Wisp, approvers: &[&str]) -> (support::Client, String) {
    let piped = wisp.add_piped(QUICKSTART, "dev");
    let mut piped_client = wisp.piped_client(Via::Grpc, &piped).await;
    report_meta(&mut piped_client).await;
    let app = wisp.add_app(&piped, "app", &[]);
    let mut dep = fixtures::deployment(&piped, "dep-1", &app, "app");
    let mut approval = fixtures::stage("approve", "WAIT_APPROVAL", 0, &[]);
    approval.authorized_operators = approvers.iter().map(|a| a.to_string()).collect();
    approval.status = StageStatus::StageRunning as i32;
    let mut analysis = fixtures::stage("analysis", "ANALYSIS", 1, &[]);
    analysis.status = StageStatus::StageRunning as i32;
    dep.stages = vec![approval, analysis];
    dep.status = DeploymentStatus::DeploymentRunning as i32;
    ok(piped_client
        .create_deployment(ps::CreateDeploymentRequest {
            deployment: Some(dep),
        })
        .await);
    ok(piped_client
        .report_stage_logs(ps::ReportStageLogsRequest {
            deployment_id: "dep-1".into(),
            stage_id: "analysis".into(),
            retried_count: 0,
            blocks: vec![
                fixtures::log_block(0, "querying metrics"),
                fixtures::log_block(1, "error rate 0.1%"),
            ],
        })
        .await);
    (piped_client, "dep-1".into())
}

#[tokio::test]
async fn approve_skip_and_cancel_reach_the_piped() {
    let wisp = Wisp::start();
    let (mut piped_client, dep) = running_deployment(&wisp, &["hello-pipecd"]).await;
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;

    // The deployments page: 50 per page, the last 30 days.
    let thirty_days_ago = fixtures::now() - Duration::from_secs(30 * 86400).as_secs() as i64;
    let page = ok(console
        .list_deployments(web::ListDeploymentsRequest {
            options: Some(web::list_deployments_request::Options::default()),
            page_size: 50,
            cursor: String::new(),
            page_min_updated_at: thirty_days_ago,
        })
        .await);
    assert_eq!(page.deployments.len(), 1);
    assert!(
        page.cursor.is_empty(),
        "one page only: the cursor must end paging"
    );
    let future = ok(console
        .list_deployments(web::ListDeploymentsRequest {
            page_min_updated_at: fixtures::now() + 3600,
            ..Default::default()
        })
        .await);
    assert!(future.deployments.is_empty());

    let log = ok(console
        .get_stage_log(web::GetStageLogRequest {
            deployment_id: dep.clone(),
            stage_id: "analysis".into(),
            retried_count: 0,
            offset_index: 1,
        })
        .await);
    assert_eq!(log.blocks.len(), 1, "blocks before the offset are left out");
    assert_eq!(log.blocks[0].log, "error rate 0.1%");
    assert_status(
        console
            .get_stage_log(web::GetStageLogRequest {
                deployment_id: dep.clone(),
                stage_id: "approve".into(),
                ..Default::default()
            })
            .await,
        Code::NotFound,
        "",
    );

    let approve = ok(console
        .approve_stage(web::ApproveStageRequest {
            deployment_id: dep.clone(),
            stage_id: "approve".into(),
        })
        .await)
    .command_id;
    handle_command(&mut piped_client, &approve, command::Type::ApproveStage).await;

    assert_status(
        console
            .skip_stage(web::SkipStageRequest {
                deployment_id: dep.clone(),
                stage_id: "approve".into(),
            })
            .await,
        Code::FailedPrecondition,
        "ANALYSIS",
    );
    let skip = ok(console
        .skip_stage(web::SkipStageRequest {
            deployment_id: dep.clone(),
            stage_id: "analysis".into(),
        })
        .await)
    .command_id;
    handle_command(&mut piped_client, &skip, command::Type::SkipStage).await;

    let cancel = ok(console
        .cancel_deployment(web::CancelDeploymentRequest {
            deployment_id: dep.clone(),
            force_rollback: true,
            force_no_rollback: false,
        })
        .await)
    .command_id;
    handle_command(&mut piped_client, &cancel, command::Type::CancelDeployment).await;

    ok(piped_client
        .report_deployment_completed(ps::ReportDeploymentCompletedRequest {
            deployment_id: dep.clone(),
            status: DeploymentStatus::DeploymentCancelled as i32,
            status_reason: "cancelled from the console".into(),
            completed_at: fixtures::now(),
            ..Default::default()
        })
        .await);
    assert_status(
        console
            .cancel_deployment(web::CancelDeploymentRequest {
                deployment_id: dep.clone(),
                ..Default::default()
            })
            .await,
        Code::FailedPrecondition,
        "already completed",
    );
}

#[tokio::test]
async fn only_listed_approvers_may_approve() {
    let wisp = Wisp::start();
    let (_piped_client, dep) = running_deployment(&wisp, &["alice", "bob"]).await;
    let token = wisp.admin_session().await;
    let mut admin = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    assert_status(
        admin
            .approve_stage(web::ApproveStageRequest {
                deployment_id: dep.clone(),
                stage_id: "approve".into(),
            })
            .await,
        Code::PermissionDenied,
        "alice, bob",
    );
    let bob = session_for(&wisp, QUICKSTART, "bob", &["Editor"]);
    let mut bob = wisp.web_client(Via::GrpcWeb, Some(&bob)).await;
    ok(bob
        .approve_stage(web::ApproveStageRequest {
            deployment_id: dep,
            stage_id: "approve".into(),
        })
        .await);
}

#[tokio::test]
async fn viewers_read_and_other_projects_see_nothing() {
    let wisp = Wisp::start();
    let (_piped_client, dep) = running_deployment(&wisp, &[]).await;

    let viewer = session_for(&wisp, QUICKSTART, "val", &["Viewer"]);
    let mut viewer = wisp.web_client(Via::GrpcWeb, Some(&viewer)).await;
    let apps = ok(viewer
        .list_applications(web::ListApplicationsRequest::default())
        .await)
    .applications;
    assert_eq!(apps.len(), 1);
    ok(viewer
        .get_deployment(web::GetDeploymentRequest {
            deployment_id: dep.clone(),
        })
        .await);
    assert_status(
        viewer
            .approve_stage(web::ApproveStageRequest {
                deployment_id: dep.clone(),
                stage_id: "approve".into(),
            })
            .await,
        Code::PermissionDenied,
        "",
    );
    assert_status(
        viewer
            .register_piped(web::RegisterPipedRequest {
                name: "sneaky".into(),
                desc: String::new(),
            })
            .await,
        Code::PermissionDenied,
        "",
    );
    assert_status(
        viewer
            .list_api_keys(web::ListApiKeysRequest::default())
            .await,
        Code::PermissionDenied,
        "",
    );

    // A role the project does not define grants nothing.
    let stranger = session_for(&wisp, QUICKSTART, "sam", &["Auditor"]);
    let mut stranger = wisp.web_client(Via::GrpcWeb, Some(&stranger)).await;
    assert_status(
        stranger
            .list_applications(web::ListApplicationsRequest::default())
            .await,
        Code::PermissionDenied,
        "",
    );

    // An admin of another project reads none of this project's objects.
    wisp.add_project("other");
    let outsider = session_for(&wisp, "other", "olga", &["Admin"]);
    let mut outsider = wisp.web_client(Via::GrpcWeb, Some(&outsider)).await;
    assert_status(
        outsider
            .get_deployment(web::GetDeploymentRequest {
                deployment_id: dep.clone(),
            })
            .await,
        Code::PermissionDenied,
        "does not belong to your project",
    );
    assert_status(
        outsider
            .approve_stage(web::ApproveStageRequest {
                deployment_id: dep,
                stage_id: "approve".into(),
            })
            .await,
        Code::PermissionDenied,
        "does not belong to your project",
    );
    let theirs = ok(outsider
        .list_deployments(web::ListDeploymentsRequest::default())
        .await);
    assert!(theirs.deployments.is_empty());
    let theirs = ok(outsider
        .list_applications(web::ListApplicationsRequest::default())
        .await);
    assert!(theirs.applications.is_empty());
    let theirs = ok(outsider
        .list_pipeds(web::ListPipedsRequest::default())
        .await);
    assert!(theirs.pipeds.is_empty());
}

#[tokio::test]
async fn api_keys_from_the_console_work_for_pipectl() {
    let wisp = Wisp::start();
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let key = ok(console
        .generate_api_key(web::GenerateApiKeyRequest {
            name: "ci".into(),
            role: model::api_key::Role::ReadOnly as i32,
        })
        .await)
    .key;
    let listed = ok(console
        .list_api_keys(web::ListApiKeysRequest::default())
        .await)
    .keys;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].key_hash, "redacted",
        "the hash must not leave the server (upstream's redaction)"
    );

    let mut pipectl = wisp
        .api_client(Via::Grpc, Some(&format!("API-KEY {key}")))
        .await;
    ok(pipectl
        .list_applications(wisp_proto::apiservice::ListApplicationsRequest::default())
        .await);

    ok(console
        .disable_api_key(web::DisableApiKeyRequest {
            id: listed[0].id.clone(),
        })
        .await);
    let enabled = ok(console
        .list_api_keys(web::ListApiKeysRequest {
            options: Some(web::list_api_keys_request::Options {
                enabled: Some(true),
            }),
        })
        .await)
    .keys;
    assert!(enabled.is_empty());
}

#[tokio::test]
async fn console_static_files_and_client_side_routes() {
    let dir = tempfile::tempdir().expect("a web dir");
    std::fs::write(dir.path().join("index.html"), "<html>console</html>").expect("index");
    std::fs::create_dir(dir.path().join("assets")).expect("assets");
    std::fs::write(dir.path().join("assets/main.0123abcd.js"), "console()").expect("bundle");
    let wisp = Wisp::start_with_serve_args(&[
        "--web-dir".into(),
        dir.path().as_os_str().to_owned(),
        "--insecure-cookie".into(),
    ]);
    let (status, body) = wisp.http_get("/").await;
    assert_eq!(
        (status, body.as_str()),
        (http::StatusCode::OK, "<html>console</html>")
    );
    let (status, body) = wisp.http_get("/deployments/abc").await;
    assert_eq!(
        (status, body.as_str()),
        (http::StatusCode::OK, "<html>console</html>")
    );
    let (status, body) = wisp.http_get("/assets/main.0123abcd.js").await;
    assert_eq!((status, body.as_str()), (http::StatusCode::OK, "console()"));
    let (status, _) = wisp.http_get("/assets/missing.js").await;
    assert_eq!(status, http::StatusCode::NOT_FOUND);
    let (status, _) = wisp.http_get("/../../etc/passwd").await;
    assert_ne!(status, http::StatusCode::INTERNAL_SERVER_ERROR);
    let (status, body) = wisp.http_get("/healthz").await;
    assert_eq!((status, body.as_str()), (http::StatusCode::OK, "ok"));

    // Over plain HTTP the operator asked for cookies without `Secure`.
    let resp = wisp
        .login_static(QUICKSTART, "hello-pipecd", "hello-pipecd")
        .await;
    let cookie = set_cookie(&resp, "token").expect("a token cookie");
    assert!(!cookie.contains("Secure"), "{cookie}");
    // Plain HTTP: the framing and sniffing guards, but no HSTS.
    assert_eq!(resp.headers["x-frame-options"], "DENY");
    assert_eq!(
        resp.headers["content-security-policy"],
        "frame-ancestors 'none'"
    );
    assert_eq!(resp.headers["x-content-type-options"], "nosniff");
    assert!(resp.headers.get("strict-transport-security").is_none());
    let resp = wisp.http_post("/auth/logout", &[], Vec::new()).await;
    let cleared = set_cookie(&resp, "token").expect("the cookie is cleared");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
}

/// `--web-prefix` (the Fargate tasks' WISP_WEB_PREFIX): the console's files from the
/// filestore, where `wisp console upload` put them, as the http function serves them.
#[tokio::test]
async fn console_files_from_the_filestore() {
    let dir = tempfile::tempdir().expect("a web dir");
    std::fs::write(dir.path().join("index.html"), "<html>uploaded</html>").expect("index");
    std::fs::create_dir(dir.path().join("assets")).expect("assets");
    std::fs::write(dir.path().join("assets/main.0123abcd.js"), "uploaded()").expect("bundle");
    let wisp = Wisp::start_with_serve_args(&["--web-prefix".into(), "console/".into()]);
    wisp.cli_ok(&[
        "console",
        "upload",
        dir.path().to_str().expect("a UTF-8 path"),
    ]);
    for path in ["/", "/deployments/abc"] {
        let (status, body) = wisp.http_get(path).await;
        assert_eq!(
            (status, body.as_str()),
            (http::StatusCode::OK, "<html>uploaded</html>"),
            "{path}"
        );
    }
    let (status, body) = wisp.http_get("/assets/main.0123abcd.js").await;
    assert_eq!(
        (status, body.as_str()),
        (http::StatusCode::OK, "uploaded()")
    );
    let (status, _) = wisp.http_get("/assets/missing.js").await;
    assert_eq!(status, http::StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn project_settings_roles_and_user_groups() {
    let wisp = Wisp::start();
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;

    use model::project_rbac_policy::Action;
    use model::project_rbac_resource::ResourceType;
    let deployer = vec![model::ProjectRbacPolicy {
        resources: vec![model::ProjectRbacResource {
            r#type: ResourceType::Deployment as i32,
            labels: Default::default(),
        }],
        actions: vec![Action::All as i32],
    }];
    assert_status(
        console
            .add_project_rbac_role(web::AddProjectRbacRoleRequest {
                name: "Viewer".into(),
                policies: deployer.clone(),
            })
            .await,
        Code::InvalidArgument,
        "built-in",
    );
    ok(console
        .add_project_rbac_role(web::AddProjectRbacRoleRequest {
            name: "Deployer".into(),
            policies: deployer.clone(),
        })
        .await);
    assert_status(
        console
            .add_project_user_group(web::AddProjectUserGroupRequest {
                sso_group: "acme/ops".into(),
                role: "Nobody".into(),
            })
            .await,
        Code::InvalidArgument,
        "does not exist",
    );
    ok(console
        .add_project_user_group(web::AddProjectUserGroupRequest {
            sso_group: "acme/ops".into(),
            role: "Deployer".into(),
        })
        .await);
    assert_status(
        console
            .delete_project_rbac_role(web::DeleteProjectRbacRoleRequest {
                name: "Deployer".into(),
            })
            .await,
        Code::FailedPrecondition,
        "acme/ops",
    );

    // A custom role is honoured: Deployer may list deployments but not pipeds.
    let deployer_session = session_for(&wisp, QUICKSTART, "dora", &["Deployer"]);
    let mut dora = wisp.web_client(Via::GrpcWeb, Some(&deployer_session)).await;
    ok(dora
        .list_deployments(web::ListDeploymentsRequest::default())
        .await);
    assert_status(
        dora.list_pipeds(web::ListPipedsRequest::default()).await,
        Code::PermissionDenied,
        "",
    );

    // SSO secrets are stored encrypted and never shown again.
    ok(console
        .update_project_sso_config(web::UpdateProjectSsoConfigRequest {
            sso: Some(model::ProjectSsoConfig {
                github: Some(model::project_sso_config::GitHub {
                    client_id: "gh-client".into(),
                    client_secret: "gh-secret".into(),
                    ..Default::default()
                }),
                session_ttl: 24,
                ..Default::default()
            }),
        })
        .await);
    let project = ok(console.get_project(web::GetProjectRequest {}).await)
        .project
        .expect("a project");
    let github = project.sso.and_then(|s| s.github).expect("github settings");
    assert_eq!(github.client_secret, "redacted");
    assert!(project.rbac_roles.iter().any(|r| r.name == "Deployer"));
    assert!(
        project
            .rbac_roles
            .iter()
            .any(|r| r.name == "Admin" && r.is_builtin)
    );
    assert!(
        project
            .user_groups
            .iter()
            .any(|g| g.sso_group == "acme/ops")
    );
    let db = std::fs::read(wisp.data_dir().join("wisp.db")).unwrap_or_default();
    assert!(
        !db.windows(9).any(|w| w == b"gh-secret"),
        "the SSO secret is stored in the clear"
    );

    ok(console
        .delete_project_user_group(web::DeleteProjectUserGroupRequest {
            sso_group: "acme/ops".into(),
        })
        .await);
    ok(console
        .delete_project_rbac_role(web::DeleteProjectRbacRoleRequest {
            name: "Deployer".into(),
        })
        .await);

    // The static admin can change its password; the old one stops working.
    ok(console
        .update_project_static_admin(web::UpdateProjectStaticAdminRequest {
            username: "hello-pipecd".into(),
            password: "a-new-password".into(),
        })
        .await);
    let old = wisp
        .login_static(QUICKSTART, "hello-pipecd", "hello-pipecd")
        .await;
    assert!(set_cookie(&old, "token").is_none());
    let new = wisp
        .login_static(QUICKSTART, "hello-pipecd", "a-new-password")
        .await;
    let new_token = cookie_value(set_cookie(&new, "token").expect("a session")).to_string();
    // The change ended the sessions opened with the old password, this one included.
    assert_status(
        console.get_me(web::GetMeRequest {}).await,
        Code::Unauthenticated,
        "session ended",
    );
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&new_token)).await;
    ok(console
        .disable_static_admin(web::DisableStaticAdminRequest {})
        .await);
    let disabled = wisp
        .login_static(QUICKSTART, "hello-pipecd", "a-new-password")
        .await;
    assert!(set_cookie(&disabled, "token").is_none(), "{disabled:?}");
    // The same answer as any refused login (issue 33): a stranger learns nothing.
    let error = set_cookie(&disabled, "error").expect("an error cookie");
    assert!(error.contains("Unable%20to%20login"), "{error}");
}

#[tokio::test]
async fn sealed_secrets_events_and_the_remaining_pages() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "dev");
    let mut piped_client = wisp.piped_client(Via::Grpc, &piped).await;
    report_meta(&mut piped_client).await;
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;

    let sealed = ok(console
        .generate_application_sealed_secret(web::GenerateApplicationSealedSecretRequest {
            piped_id: piped.id.clone(),
            data: "db-password".into(),
            base64_encoding: false,
        })
        .await)
    .data;
    let private = wisp_services::hybrid::parse_private_key_pem(include_str!(
        "../../shared/services/tests/testdata/piped-private.pem"
    ))
    .expect("the piped's private key");
    let opened = wisp_services::hybrid::decrypt(&private, &sealed).expect("the piped opens it");
    assert_eq!(opened, b"db-password");

    let rw = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let mut pipectl = wisp.api_key_client(Via::Grpc, &rw).await;
    ok(pipectl
        .register_event(wisp_proto::apiservice::RegisterEventRequest {
            name: "image-update".into(),
            data: "v2".into(),
            labels: fixtures::string_map(&[("app", "web")]),
            ..Default::default()
        })
        .await);
    let events = ok(console
        .list_events(web::ListEventsRequest {
            options: Some(web::list_events_request::Options {
                name: "image-update".into(),
                ..Default::default()
            }),
            page_size: 50,
            ..Default::default()
        })
        .await);
    assert_eq!(events.events.len(), 1);
    assert_eq!(events.events[0].data, "v2");

    let traces = ok(console
        .list_deployment_traces(web::ListDeploymentTracesRequest::default())
        .await);
    assert!(traces.traces.is_empty() && traces.cursor.is_empty());
    let chains = ok(console
        .list_deployment_chains(web::ListDeploymentChainsRequest::default())
        .await);
    assert!(chains.deployment_chains.is_empty());
    let frequency = ok(console
        .get_insight_data(web::GetInsightDataRequest {
            metrics_kind: model::InsightMetricsKind::DeploymentFrequency as i32,
            range_from: fixtures::now() - 7 * 86400,
            range_to: fixtures::now(),
            resolution: model::InsightResolution::Daily as i32,
            ..Default::default()
        })
        .await);
    let points = &frequency.matrix[0].data_points;
    assert!(
        (7..=8).contains(&points.len()),
        "one point per day: {points:?}"
    );
    assert!(points.iter().all(|p| p.value == 0.0));
    assert_status(
        console
            .get_insight_data(web::GetInsightDataRequest {
                metrics_kind: model::InsightMetricsKind::Mttr as i32,
                range_from: 1,
                range_to: 2,
                ..Default::default()
            })
            .await,
        Code::Unimplemented,
        "MTTR",
    );
    let unregistered = ok(console
        .list_unregistered_applications(web::ListUnregisteredApplicationsRequest {})
        .await);
    assert!(unregistered.applications.is_empty());
}

#[tokio::test]
async fn a_plugin_applications_live_state_spans_its_deploy_targets() {
    let wisp = Wisp::start();
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let (piped, mut piped_client) = register_and_connect(&wisp, &mut console, "v1").await;
    let targets = |t: &[&str]| model::DeployTargets {
        deploy_targets: t.iter().map(|s| s.to_string()).collect(),
    };
    let app_id = ok(console
        .add_application(web::AddApplicationRequest {
            name: "multi".into(),
            piped_id: piped.id.clone(),
            git_path: Some(model::ApplicationGitPath {
                repo: Some(model::ApplicationGitRepository {
                    id: "examples".into(),
                    ..Default::default()
                }),
                path: "apps/multi".into(),
                ..Default::default()
            }),
            deploy_targets_by_plugin: [
                ("kubernetes".to_string(), targets(&["east", "west"])),
                ("terraform".to_string(), targets(&["infra"])),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        })
        .await)
    .application_id;

    // The piped reports every plugin's resources on every target in one snapshot, in
    // whatever order its plugins answered.
    let resource =
        |id: &str, plugin: &str, target: &str, health: model::resource_state::HealthStatus| {
            model::ResourceState {
                id: id.into(),
                name: id.into(),
                plugin_name: plugin.into(),
                deploy_target: target.into(),
                health_status: health as i32,
                created_at: fixtures::now(),
                updated_at: fixtures::now(),
                ..Default::default()
            }
        };
    use model::resource_state::HealthStatus::{Healthy, Unhealthy};
    let report =
        |resources: Vec<model::ResourceState>, at: i64| ps::ReportApplicationLiveStateRequest {
            snapshot: Some(model::ApplicationLiveStateSnapshot {
                application_id: app_id.clone(),
                piped_id: piped.id.clone(),
                project_id: QUICKSTART.into(),
                version: Some(model::ApplicationLiveStateVersion {
                    timestamp: at,
                    index: 0,
                }),
                application_live_state: Some(model::ApplicationLiveState {
                    resources,
                    health_status: 0,
                }),
                ..Default::default()
            }),
        };
    ok(piped_client
        .report_application_live_state(report(
            vec![
                resource("tf-vpc", "terraform", "infra", Healthy),
                resource("west-deploy", "kubernetes", "west", Unhealthy),
                resource("east-deploy", "kubernetes", "east", Healthy),
                resource("east-svc", "kubernetes", "east", Healthy),
            ],
            fixtures::now(),
        ))
        .await);
    let snapshot = ok(console
        .get_application_live_state(web::GetApplicationLiveStateRequest {
            application_id: app_id.clone(),
        })
        .await)
    .snapshot
    .expect("a snapshot");
    let live = snapshot.application_live_state.clone().expect("live state");
    let ids: Vec<&str> = live.resources.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["east-deploy", "east-svc", "west-deploy", "tf-vpc"]);
    assert_eq!(
        snapshot.health_status,
        model::application_live_state_snapshot::Status::Unhealthy as i32,
        "one unhealthy target makes the application unhealthy"
    );
    assert_eq!(
        live.health_status,
        model::application_live_state::Status::Other as i32
    );

    // The next report replaces the state: a target that became healthy shows it.
    ok(piped_client
        .report_application_live_state(report(
            vec![
                resource("west-deploy", "kubernetes", "west", Healthy),
                resource("east-deploy", "kubernetes", "east", Healthy),
            ],
            fixtures::now() + 60,
        ))
        .await);
    let snapshot = ok(console
        .get_application_live_state(web::GetApplicationLiveStateRequest {
            application_id: app_id.clone(),
        })
        .await)
    .snapshot
    .expect("a snapshot");
    assert_eq!(
        snapshot.health_status,
        model::application_live_state_snapshot::Status::Healthy as i32
    );
    let ids: Vec<String> = snapshot
        .application_live_state
        .map(|l| l.resources.into_iter().map(|r| r.id).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["east-deploy", "west-deploy"]);
}

/// Behind HTTPS (cookies `Secure`, the default) console responses also carry HSTS.
#[tokio::test]
async fn console_responses_carry_security_headers() {
    let wisp = Wisp::start();
    let resp = wisp.login_static(QUICKSTART, "hello-pipecd", "wrong").await;
    assert_eq!(resp.headers["x-frame-options"], "DENY", "{resp:?}");
    assert_eq!(resp.headers["referrer-policy"], "same-origin");
    assert!(
        resp.headers["strict-transport-security"]
            .to_str()
            .expect("ASCII")
            .starts_with("max-age="),
        "{resp:?}"
    );
}
