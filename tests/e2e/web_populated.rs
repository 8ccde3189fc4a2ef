//! WebService RPCs on a populated project, through `wisp serve` over gRPC-web with the
//! static admin's session: several pipeds, applications (one deleted), deployments
//! (completed, failed, running), commands and events, and a second project whose objects
//! must never show. Each test checks the RPC's answer AND its stored effect, read back
//! another way (another RPC, the piped's own view, pipectl, a restarted server).
//!
//! tests/README.md maps every WebService RPC to the test that checks it; the
//! `web_coverage` module fails when an RPC has no row there.

use crate::support;

use std::time::{Duration, Instant};

use tonic::Code;
use wisp_proto::apiservice as api;
use wisp_proto::model::{self, DeploymentStatus};
use wisp_proto::pipedservice as ps;
use wisp_proto::webservice as web;

use support::api::report_meta;
use support::web::{WebClient, session_for};
use support::{Piped, QUICKSTART, Via, Wisp, assert_status, fixtures, ok};

const OTHER: &str = "other";
const LIMIT: Duration = Duration::from_secs(60);

/// Waits (polling) until `check` returns `Some`, at most `limit`: caches in the server
/// may hold the old answer for a while, so the test waits for the effect.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
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
            started.elapsed() < LIMIT,
            "{what}: not after {} s",
            LIMIT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A project with something of everything, and a second project beside it.
struct Populated {
    wisp: Wisp,
    console: WebClient,
    dev: Piped,
    prod: Piped,
    staging: Piped,
    other_piped: Piped,
    /// On `dev`, labels env=dev.
    frontend: String,
    /// On `prod`, labels env=prod.
    backend: String,
    /// On `dev`, labels env=dev.
    worker: String,
    /// On `staging`, deleted from the console.
    legacy: String,
    other_app: String,
}

/// A deployment of `app` labelled as the application is, completed with `status` (or
/// left running when `None`).
async fn deploy(
    client: &mut support::Client,
    piped: &Piped,
    id: &str,
    (app, name, env): (&str, &str, &str),
    status: Option<DeploymentStatus>,
) {
    let mut dep = fixtures::deployment(piped, id, app, name);
    dep.labels = fixtures::string_map(&[("env", env)]);
    dep.status = DeploymentStatus::DeploymentRunning as i32;
    ok(client
        .create_deployment(ps::CreateDeploymentRequest {
            deployment: Some(dep),
        })
        .await);
    if let Some(status) = status {
        ok(client
            .report_deployment_completed(ps::ReportDeploymentCompletedRequest {
                deployment_id: id.into(),
                status: status as i32,
                completed_at: fixtures::now(),
                ..Default::default()
            })
            .await);
    }
}

async fn populate(wisp: Wisp) -> Populated {
    wisp.add_project(OTHER);
    let dev = wisp.add_piped(QUICKSTART, "dev");
    let prod = wisp.add_piped(QUICKSTART, "prod");
    let staging = wisp.add_piped(QUICKSTART, "staging");
    let other_piped = wisp.add_piped(OTHER, "dev");
    let mut dev_client = wisp.piped_client(Via::Grpc, &dev).await;
    let mut prod_client = wisp.piped_client(Via::Grpc, &prod).await;
    let mut other_client = wisp.piped_client(Via::Grpc, &other_piped).await;
    for client in [&mut dev_client, &mut prod_client, &mut other_client] {
        report_meta(client).await;
    }
    let frontend = wisp.add_app(&dev, "frontend", &[("env", "dev")]);
    let backend = wisp.add_app(&prod, "backend", &[("env", "prod")]);
    let worker = wisp.add_app(&dev, "worker", &[("env", "dev")]);
    let legacy = wisp.add_app(&staging, "legacy", &[]);
    let other_app = wisp.add_app(&other_piped, "frontend", &[("env", "dev")]);

    use DeploymentStatus::{DeploymentFailure, DeploymentSuccess};
    let fe = (frontend.as_str(), "frontend", "dev");
    let be = (backend.as_str(), "backend", "prod");
    let wk = (worker.as_str(), "worker", "dev");
    deploy(
        &mut dev_client,
        &dev,
        "dep-fe-1",
        fe,
        Some(DeploymentSuccess),
    )
    .await;
    deploy(
        &mut prod_client,
        &prod,
        "dep-be-1",
        be,
        Some(DeploymentFailure),
    )
    .await;
    deploy(&mut prod_client, &prod, "dep-be-2", be, None).await;
    deploy(
        &mut dev_client,
        &dev,
        "dep-wk-1",
        wk,
        Some(DeploymentSuccess),
    )
    .await;
    let other = (other_app.as_str(), "frontend", "dev");
    deploy(
        &mut other_client,
        &other_piped,
        "dep-other-1",
        other,
        Some(DeploymentFailure),
    )
    .await;

    let token = if wisp.aws().is_some() {
        // `wisp project add` gave the static admin a name and password nobody kept.
        let reset = wisp.cli_json(&["project", "reset-password", QUICKSTART]);
        let username = reset["username"].as_str().expect("a username");
        let password = reset["password"].as_str().expect("a password");
        let resp = wisp.login_static(QUICKSTART, username, password).await;
        let cookie = support::web::set_cookie(&resp, "token")
            .unwrap_or_else(|| panic!("no session: {resp:?} {reset}"));
        support::web::cookie_value(cookie).to_string()
    } else {
        wisp.admin_session().await
    };
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    ok(console
        .sync_application(web::SyncApplicationRequest {
            application_id: frontend.clone(),
            sync_strategy: model::SyncStrategy::QuickSync as i32,
        })
        .await);
    let rw = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let mut pipectl = wisp.api_key_client(Via::Grpc, &rw).await;
    ok(pipectl
        .register_event(api::RegisterEventRequest {
            name: "image-update".into(),
            data: "v2".into(),
            ..Default::default()
        })
        .await);
    ok(console
        .delete_application(web::DeleteApplicationRequest {
            application_id: legacy.clone(),
        })
        .await);
    Populated {
        wisp,
        console,
        dev,
        prod,
        staging,
        other_piped,
        frontend,
        backend,
        worker,
        legacy,
        other_app,
    }
}

async fn populated() -> Populated {
    populate(Wisp::start()).await
}

async fn get_piped(console: &mut WebClient, id: &str) -> model::Piped {
    ok(console
        .get_piped(web::GetPipedRequest {
            piped_id: id.into(),
        })
        .await)
    .piped
    .expect("a piped")
}

async fn get_app(console: &mut WebClient, id: &str) -> model::Application {
    ok(console
        .get_application(web::GetApplicationRequest {
            application_id: id.into(),
        })
        .await)
    .application
    .expect("an application")
}

/// Names of the pipeds ListPipeds gives with `enabled` as the filter.
async fn piped_names(console: &mut WebClient, enabled: Option<bool>) -> Vec<String> {
    let mut names: Vec<String> = ok(console
        .list_pipeds(web::ListPipedsRequest {
            with_status: true,
            options: Some(web::list_pipeds_request::Options { enabled }),
        })
        .await)
    .pipeds
    .into_iter()
    .map(|p| p.name)
    .collect();
    names.sort();
    names
}

/// Names of the applications ListApplications gives with `enabled` as the filter.
async fn app_names(console: &mut WebClient, enabled: Option<bool>) -> Vec<String> {
    let mut names: Vec<String> = ok(console
        .list_applications(web::ListApplicationsRequest {
            options: Some(web::list_applications_request::Options {
                enabled,
                ..Default::default()
            }),
        })
        .await)
    .applications
    .into_iter()
    .map(|a| a.name)
    .collect();
    names.sort();
    names
}

/// Ids of the applications the piped is told to watch (its own, enabled ones).
async fn piped_sees(wisp: &Wisp, piped: &Piped) -> Vec<String> {
    let mut client = wisp.piped_client(Via::Grpc, piped).await;
    let mut ids: Vec<String> = ok(client
        .list_applications(ps::ListApplicationsRequest {})
        .await)
    .applications
    .into_iter()
    .map(|a| a.id)
    .collect();
    ids.sort();
    ids
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn get_piped_and_update_piped_among_several() {
    let Populated {
        mut wisp,
        mut console,
        dev,
        prod,
        other_piped,
        ..
    } = populated().await;

    let got = get_piped(&mut console, &prod.id).await;
    assert_eq!(got.id, prod.id);
    assert_eq!(got.name, "prod");
    assert_eq!(got.project_id, QUICKSTART);
    assert!(!got.disabled);
    assert!(!got.keys.is_empty() && got.keys.iter().all(|k| k.hash == "redacted"));
    assert_eq!(got.version, "v0.57.1", "from its ReportPipedMeta");
    assert_eq!(got.repositories.len(), 1);
    assert_status(
        console
            .get_piped(web::GetPipedRequest {
                piped_id: other_piped.id.clone(),
            })
            .await,
        Code::PermissionDenied,
        "does not belong to your project",
    );
    assert_status(
        console
            .get_piped(web::GetPipedRequest {
                piped_id: "no-such-piped".into(),
            })
            .await,
        Code::NotFound,
        "",
    );

    ok(console
        .update_piped(web::UpdatePipedRequest {
            piped_id: prod.id.clone(),
            name: "production".into(),
            desc: "eu-west-1".into(),
        })
        .await);
    let got = get_piped(&mut console, &prod.id).await;
    assert_eq!(
        (got.name.as_str(), got.desc.as_str()),
        ("production", "eu-west-1")
    );
    assert_eq!(
        piped_names(&mut console, None).await,
        ["dev", "production", "staging"]
    );
    // Bad input changes nothing; another project's piped is refused.
    assert_status(
        console
            .update_piped(web::UpdatePipedRequest {
                piped_id: dev.id.clone(),
                name: String::new(),
                desc: "x".into(),
            })
            .await,
        Code::InvalidArgument,
        "name",
    );
    assert_status(
        console
            .update_piped(web::UpdatePipedRequest {
                piped_id: other_piped.id.clone(),
                name: "mine".into(),
                desc: String::new(),
            })
            .await,
        Code::PermissionDenied,
        "",
    );
    assert_eq!(get_piped(&mut console, &dev.id).await.desc, "");

    // Stored: a restarted server still has it, and the piped's key still works.
    wisp.restart();
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let got = get_piped(&mut console, &prod.id).await;
    assert_eq!(
        (got.name.as_str(), got.desc.as_str()),
        ("production", "eu-west-1")
    );
    assert_eq!(get_piped(&mut console, &dev.id).await.name, "dev");
    let mut prod_client = wisp.piped_client(Via::Grpc, &prod).await;
    report_meta(&mut prod_client).await;
    let other_session = session_for(&wisp, OTHER, "olga", &["Admin"]);
    let mut olga = wisp.web_client(Via::GrpcWeb, Some(&other_session)).await;
    assert_eq!(get_piped(&mut olga, &other_piped.id).await.name, "dev");
}

#[tokio::test]
async fn enable_piped_and_disable_piped_among_several() {
    let Populated {
        wisp,
        mut console,
        staging,
        other_piped,
        ..
    } = populated().await;

    ok(console
        .disable_piped(web::DisablePipedRequest {
            piped_id: staging.id.clone(),
        })
        .await);
    assert!(get_piped(&mut console, &staging.id).await.disabled);
    assert_eq!(piped_names(&mut console, Some(true)).await, ["dev", "prod"]);
    assert_eq!(piped_names(&mut console, Some(false)).await, ["staging"]);
    // The disabled piped is refused once the server's credential cache lets go.
    eventually("the disabled piped refused", || {
        let wisp = &wisp;
        let staging = &staging;
        async move {
            let mut client = wisp.piped_client(Via::Grpc, staging).await;
            client
                .list_applications(ps::ListApplicationsRequest {})
                .await
                .err()
                .filter(|s| s.code() == Code::Unauthenticated)
        }
    })
    .await;

    ok(console
        .enable_piped(web::EnablePipedRequest {
            piped_id: staging.id.clone(),
        })
        .await);
    assert!(!get_piped(&mut console, &staging.id).await.disabled);
    assert_eq!(
        piped_names(&mut console, Some(true)).await,
        ["dev", "prod", "staging"]
    );
    assert!(piped_names(&mut console, Some(false)).await.is_empty());
    eventually("the enabled piped accepted again", || {
        let wisp = &wisp;
        let staging = &staging;
        async move {
            let mut client = wisp.piped_client(Via::Grpc, staging).await;
            client
                .list_applications(ps::ListApplicationsRequest {})
                .await
                .ok()
        }
    })
    .await;
    assert_status(
        console
            .enable_piped(web::EnablePipedRequest {
                piped_id: other_piped.id.clone(),
            })
            .await,
        Code::PermissionDenied,
        "",
    );
}

#[tokio::test]
async fn desired_version_reaches_the_chosen_pipeds_and_the_release_lists_have_the_defaults() {
    let Populated {
        wisp,
        mut console,
        dev,
        prod,
        staging,
        other_piped,
        ..
    } = populated().await;

    ok(console
        .update_piped_desired_version(web::UpdatePipedDesiredVersionRequest {
            version: "v0.50.0".into(),
            piped_ids: vec![dev.id.clone(), prod.id.clone()],
        })
        .await);
    for (piped, want) in [(&dev, "v0.50.0"), (&prod, "v0.50.0"), (&staging, "")] {
        assert_eq!(
            get_piped(&mut console, &piped.id).await.desired_version,
            want
        );
        // What the piped itself is told to run.
        let mut client = wisp.piped_client(Via::Grpc, piped).await;
        let told = ok(client
            .get_desired_version(ps::GetDesiredVersionRequest {})
            .await)
        .version;
        assert_eq!(told, want, "{}", piped.id);
    }
    assert_status(
        console
            .update_piped_desired_version(web::UpdatePipedDesiredVersionRequest {
                version: "0.51.0".into(),
                piped_ids: vec![dev.id.clone()],
            })
            .await,
        Code::InvalidArgument,
        "must start with \"v\"",
    );
    // Every id is checked before any piped changes.
    assert_status(
        console
            .update_piped_desired_version(web::UpdatePipedDesiredVersionRequest {
                version: "v0.51.0".into(),
                piped_ids: vec![dev.id.clone(), other_piped.id.clone()],
            })
            .await,
        Code::PermissionDenied,
        "",
    );
    assert_eq!(
        get_piped(&mut console, &dev.id).await.desired_version,
        "v0.50.0"
    );

    // Deviation (pipeds.rs): no GitHub call; with no `pipedReleases` configured the
    // dialog offers the upstream release Wisp was checked against, and there are no notes.
    let released = ok(console
        .list_released_versions(web::ListReleasedVersionsRequest {})
        .await);
    assert_eq!(
        released.versions,
        vec![wisp_config::UPSTREAM_RELEASE.to_string()]
    );
    let notes = ok(console
        .list_deprecated_notes(web::ListDeprecatedNotesRequest {
            project_id: QUICKSTART.into(),
        })
        .await);
    assert_eq!(notes.notes, "");
}

#[tokio::test]
async fn get_update_enable_and_disable_applications_among_several() {
    let Populated {
        wisp,
        mut console,
        dev,
        prod,
        frontend,
        backend,
        worker,
        legacy,
        other_app,
        ..
    } = populated().await;

    let app = get_app(&mut console, &backend).await;
    assert_eq!(app.name, "backend");
    assert_eq!(app.piped_id, prod.id);
    assert_eq!(app.project_id, QUICKSTART);
    assert_eq!(app.labels.get("env").map(String::as_str), Some("prod"));
    let git = app.git_path.clone().expect("a git path");
    assert_eq!(git.path, "apps/backend");
    assert_eq!(git.repo.map(|r| r.id).as_deref(), Some("examples"));
    assert!(!app.disabled && !app.deleted);
    // A deleted application can still be read, as deleted.
    let gone = get_app(&mut console, &legacy).await;
    assert!(gone.deleted && gone.disabled, "{gone:?}");
    assert_status(
        console
            .get_application(web::GetApplicationRequest {
                application_id: other_app.clone(),
            })
            .await,
        Code::PermissionDenied,
        "does not belong to your project",
    );

    ok(console
        .disable_application(web::DisableApplicationRequest {
            application_id: worker.clone(),
        })
        .await);
    assert!(get_app(&mut console, &worker).await.disabled);
    assert_eq!(
        app_names(&mut console, Some(true)).await,
        ["backend", "frontend"]
    );
    assert_eq!(app_names(&mut console, Some(false)).await, ["worker"]);
    assert_eq!(
        piped_sees(&wisp, &dev).await,
        sorted(vec![frontend.clone()])
    );
    assert!(!get_app(&mut console, &frontend).await.disabled);

    ok(console
        .enable_application(web::EnableApplicationRequest {
            application_id: worker.clone(),
        })
        .await);
    assert!(!get_app(&mut console, &worker).await.disabled);
    assert_eq!(
        app_names(&mut console, None).await,
        ["backend", "frontend", "worker"]
    );
    assert_eq!(
        piped_sees(&wisp, &dev).await,
        sorted(vec![frontend.clone(), worker.clone()])
    );

    // Moved to another piped and renamed: the pipeds' own lists follow.
    ok(console
        .update_application(web::UpdateApplicationRequest {
            application_id: backend.clone(),
            name: "api".into(),
            piped_id: dev.id.clone(),
            kind: model::ApplicationKind::Kubernetes as i32,
            config_filename: "api.pipecd.yaml".into(),
            ..Default::default()
        })
        .await);
    let moved = get_app(&mut console, &backend).await;
    assert_eq!(
        (moved.name.as_str(), moved.piped_id.as_str()),
        ("api", dev.id.as_str())
    );
    assert_eq!(
        moved.git_path.map(|g| g.config_filename).as_deref(),
        Some("api.pipecd.yaml")
    );
    assert_eq!(
        piped_sees(&wisp, &dev).await,
        sorted(vec![frontend.clone(), worker.clone(), backend.clone()])
    );
    assert!(piped_sees(&wisp, &prod).await.is_empty());

    // A deleted application stays deleted; another project's is refused.
    for enable in [true, false] {
        let result = if enable {
            console
                .enable_application(web::EnableApplicationRequest {
                    application_id: legacy.clone(),
                })
                .await
                .map(|_| ())
        } else {
            console
                .disable_application(web::DisableApplicationRequest {
                    application_id: legacy.clone(),
                })
                .await
                .map(|_| ())
        };
        assert_status(result, Code::InvalidArgument, "deleted");
    }
    assert!(get_app(&mut console, &legacy).await.disabled);
    assert_status(
        console
            .disable_application(web::DisableApplicationRequest {
                application_id: other_app.clone(),
            })
            .await,
        Code::PermissionDenied,
        "",
    );
}

/// RIGHT behaviour, as APIService's DeleteApplication has it (WebService differed until
/// issue 35: it left `deleted_at` at 0 and let the console update a deleted
/// application): the deletion is stamped, and a deleted application refuses updates.
#[tokio::test]
async fn delete_application_stamps_deleted_at_and_freezes_it_as_apiservice_does() {
    let Populated {
        wisp,
        mut console,
        dev,
        frontend,
        backend,
        worker,
        ..
    } = populated().await;

    let before = fixtures::now();
    ok(console
        .delete_application(web::DeleteApplicationRequest {
            application_id: worker.clone(),
        })
        .await);
    let after = fixtures::now();
    let app = get_app(&mut console, &worker).await;
    assert!(app.deleted && app.disabled, "{app:?}");
    assert!(
        (before..=after).contains(&app.deleted_at),
        "deleted_at {} not in [{before}, {after}]",
        app.deleted_at
    );
    assert_eq!(app_names(&mut console, None).await, ["backend", "frontend"]);
    assert_eq!(piped_sees(&wisp, &dev).await, vec![frontend.clone()]);
    // Its deployments stay on record.
    let dep = ok(console
        .get_deployment(web::GetDeploymentRequest {
            deployment_id: "dep-wk-1".into(),
        })
        .await)
    .deployment
    .expect("a deployment");
    assert_eq!(dep.application_id, worker);

    // pipectl's delete leaves the same record.
    let rw = wisp.add_api_key(QUICKSTART, "ops", "READ_WRITE");
    let mut pipectl = wisp.api_key_client(Via::Grpc, &rw).await;
    ok(pipectl
        .delete_application(api::DeleteApplicationRequest {
            application_id: backend.clone(),
        })
        .await);
    let by_api = get_app(&mut console, &backend).await;
    assert!(by_api.deleted && by_api.disabled && by_api.deleted_at >= before);

    // A deleted application refuses updates (APIService: InvalidArgument).
    assert_status(
        console
            .update_application(web::UpdateApplicationRequest {
                application_id: worker.clone(),
                name: "worker-2".into(),
                piped_id: dev.id.clone(),
                kind: model::ApplicationKind::Kubernetes as i32,
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        "deleted application",
    );
    let app = get_app(&mut console, &worker).await;
    assert_eq!(app.name, "worker", "the refused update changed nothing");
    assert_status(
        console
            .enable_application(web::EnableApplicationRequest {
                application_id: worker.clone(),
            })
            .await,
        Code::InvalidArgument,
        "deleted",
    );
    assert!(get_app(&mut console, &worker).await.disabled);
    // The one left is untouched.
    let fe = get_app(&mut console, &frontend).await;
    assert!(!fe.deleted && !fe.disabled && fe.deleted_at == 0);
}

#[tokio::test]
async fn enable_static_admin_lets_the_static_admin_log_in_again() {
    let Populated {
        wisp, mut console, ..
    } = populated().await;
    ok(console
        .disable_static_admin(web::DisableStaticAdminRequest {})
        .await);
    let project = |p: Option<model::Project>| p.expect("a project");
    let sso_admin = session_for(&wisp, QUICKSTART, "ada", &["Admin"]);
    let mut ada = wisp.web_client(Via::GrpcWeb, Some(&sso_admin)).await;
    assert!(
        project(ok(ada.get_project(web::GetProjectRequest {}).await).project).static_admin_disabled
    );
    let refused = wisp
        .login_static(QUICKSTART, "hello-pipecd", "hello-pipecd")
        .await;
    assert!(support::web::set_cookie(&refused, "token").is_none());

    ok(ada
        .enable_static_admin(web::EnableStaticAdminRequest {})
        .await);
    let got = project(ok(ada.get_project(web::GetProjectRequest {}).await).project);
    assert!(!got.static_admin_disabled);
    assert_eq!(
        got.static_admin.map(|a| a.username).as_deref(),
        Some("hello-pipecd"),
        "the same static admin"
    );
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    assert_eq!(
        ok(console.get_me(web::GetMeRequest {}).await).subject,
        "hello-pipecd"
    );
    // The pipeds and applications the project had are all still there.
    assert_eq!(
        piped_names(&mut console, None).await,
        ["dev", "prod", "staging"]
    );
}

#[tokio::test]
async fn a_custom_role_updated_then_deleted_changes_what_its_users_may_do() {
    let Populated {
        wisp, mut console, ..
    } = populated().await;
    use model::project_rbac_policy::Action;
    use model::project_rbac_resource::ResourceType;
    let policy = |resource: ResourceType, actions: &[Action]| model::ProjectRbacPolicy {
        resources: vec![model::ProjectRbacResource {
            r#type: resource as i32,
            labels: Default::default(),
        }],
        actions: actions.iter().map(|a| *a as i32).collect(),
    };
    ok(console
        .add_project_rbac_role(web::AddProjectRbacRoleRequest {
            name: "Deployer".into(),
            policies: vec![policy(ResourceType::Deployment, &[Action::All])],
        })
        .await);
    let dora_session = session_for(&wisp, QUICKSTART, "dora", &["Deployer"]);
    let mut dora = wisp.web_client(Via::GrpcWeb, Some(&dora_session)).await;
    assert_status(
        dora.list_pipeds(web::ListPipedsRequest::default()).await,
        Code::PermissionDenied,
        "",
    );

    let updated = vec![
        policy(ResourceType::Deployment, &[Action::All]),
        policy(ResourceType::Piped, &[Action::List]),
    ];
    ok(console
        .update_project_rbac_role(web::UpdateProjectRbacRoleRequest {
            name: "Deployer".into(),
            policies: updated.clone(),
        })
        .await);
    let roles = ok(console.get_project(web::GetProjectRequest {}).await)
        .project
        .expect("a project")
        .rbac_roles;
    let deployer = roles
        .iter()
        .find(|r| r.name == "Deployer")
        .expect("the role");
    assert_eq!(deployer.policies, updated);
    assert!(!deployer.is_builtin);
    let listed = eventually("Deployer may list pipeds", || {
        let mut dora = dora.clone();
        async move {
            dora.list_pipeds(web::ListPipedsRequest::default())
                .await
                .ok()
                .map(|r| r.into_inner().pipeds.len())
        }
    })
    .await;
    assert_eq!(listed, 3, "the project's three pipeds");
    assert_status(
        dora.get_piped(web::GetPipedRequest {
            piped_id: "any".into(),
        })
        .await,
        Code::PermissionDenied,
        "",
    );
    for (name, code) in [
        ("Viewer", Code::InvalidArgument),
        ("Nobody", Code::NotFound),
    ] {
        assert_status(
            console
                .update_project_rbac_role(web::UpdateProjectRbacRoleRequest {
                    name: name.into(),
                    policies: updated.clone(),
                })
                .await,
            code,
            "",
        );
    }

    ok(console
        .delete_project_rbac_role(web::DeleteProjectRbacRoleRequest {
            name: "Deployer".into(),
        })
        .await);
    let roles = ok(console.get_project(web::GetProjectRequest {}).await)
        .project
        .expect("a project")
        .rbac_roles;
    assert!(roles.iter().all(|r| r.name != "Deployer"), "{roles:?}");
    assert_eq!(
        roles.iter().filter(|r| r.is_builtin).count(),
        3,
        "the built-in roles stay"
    );
    eventually("a deleted role grants nothing", || {
        let mut dora = dora.clone();
        async move {
            dora.list_deployments(web::ListDeploymentsRequest::default())
                .await
                .err()
                .filter(|s| s.code() == Code::PermissionDenied)
        }
    })
    .await;
    for (name, code) in [
        ("Deployer", Code::NotFound),
        ("Admin", Code::InvalidArgument),
    ] {
        assert_status(
            console
                .delete_project_rbac_role(web::DeleteProjectRbacRoleRequest { name: name.into() })
                .await,
            code,
            "",
        );
    }
}

#[tokio::test]
async fn deployment_traces_group_each_commits_deployments() {
    let Populated {
        wisp,
        mut console,
        dev,
        prod,
        other_piped,
        frontend,
        backend,
        worker,
        other_app,
        ..
    } = populated().await;
    let event = |hash: &str, title: &str| api::RegisterEventRequest {
        name: "image-update".into(),
        data: hash.into(),
        commit_hash: hash.into(),
        commit_url: format!("https://github.com/acme/app/commit/{hash}"),
        commit_title: title.into(),
        commit_author: "alice".into(),
        ..Default::default()
    };
    let rw = wisp.add_api_key(QUICKSTART, "traces", "READ_WRITE");
    let mut pipectl = wisp.api_key_client(Via::Grpc, &rw).await;
    ok(pipectl.register_event(event("abc123", "Bump images")).await);
    ok(pipectl
        .register_event(event("def456", "Fix the worker"))
        .await);
    let theirs = wisp.add_api_key(OTHER, "traces", "READ_WRITE");
    let mut theirs = wisp.api_key_client(Via::Grpc, &theirs).await;
    ok(theirs.register_event(event("abc123", "Theirs")).await);

    let traced = |piped: &Piped, id: &str, app: &str, name: &str, hash: &str| {
        let mut dep = fixtures::deployment(piped, id, app, name);
        dep.deployment_trace_commit_hash = hash.into();
        ps::CreateDeploymentRequest {
            deployment: Some(dep),
        }
    };
    let mut d = wisp.piped_client(Via::Grpc, &dev).await;
    let mut p = wisp.piped_client(Via::Grpc, &prod).await;
    let mut o = wisp.piped_client(Via::Grpc, &other_piped).await;
    ok(
        d.create_deployment(traced(&dev, "t-fe", &frontend, "frontend", "abc123"))
            .await,
    );
    ok(
        p.create_deployment(traced(&prod, "t-be", &backend, "backend", "abc123"))
            .await,
    );
    ok(
        d.create_deployment(traced(&dev, "t-wk", &worker, "worker", "def456"))
            .await,
    );
    ok(o.create_deployment(traced(
        &other_piped,
        "t-other",
        &other_app,
        "frontend",
        "abc123",
    ))
    .await);

    let all = ok(console
        .list_deployment_traces(web::ListDeploymentTracesRequest::default())
        .await);
    let mut got: Vec<(String, String, Vec<String>)> = all
        .traces
        .iter()
        .map(|t| {
            let trace = t.trace.clone().expect("a trace");
            let mut ids: Vec<String> = t.deployments.iter().map(|d| d.id.clone()).collect();
            ids.sort();
            (trace.commit_hash, trace.title, ids)
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (
                "abc123".to_string(),
                "Bump images".to_string(),
                vec!["t-be".to_string(), "t-fe".to_string()]
            ),
            (
                "def456".to_string(),
                "Fix the worker".to_string(),
                vec!["t-wk".to_string()]
            ),
        ],
        "only this project's traces, each with its commit's deployments"
    );
    let one = ok(console
        .list_deployment_traces(web::ListDeploymentTracesRequest {
            options: Some(web::list_deployment_traces_request::Options {
                commit_hash: "def456".into(),
            }),
            ..Default::default()
        })
        .await);
    assert_eq!(one.traces.len(), 1);
    let trace = one.traces[0].trace.clone().expect("a trace");
    assert_eq!(trace.author, "alice");
    assert_eq!(
        trace.commit_url,
        "https://github.com/acme/app/commit/def456"
    );
    assert_eq!(trace.project_id, QUICKSTART);
    // A page of one, then the next.
    let first = ok(console
        .list_deployment_traces(web::ListDeploymentTracesRequest {
            page_size: 1,
            ..Default::default()
        })
        .await);
    assert_eq!(first.traces.len(), 1);
    assert!(!first.cursor.is_empty());
    let second = ok(console
        .list_deployment_traces(web::ListDeploymentTracesRequest {
            page_size: 1,
            cursor: first.cursor.clone(),
            ..Default::default()
        })
        .await);
    assert_eq!(second.traces.len(), 1);
    assert_ne!(
        first.traces[0].trace.as_ref().map(|t| &t.commit_hash),
        second.traces[0].trace.as_ref().map(|t| &t.commit_hash)
    );
}

#[tokio::test]
async fn deployment_chains_are_listed_with_their_blocks() {
    let Populated {
        wisp,
        mut console,
        dev,
        other_piped,
        frontend,
        other_app,
        ..
    } = populated().await;
    use ps::create_deployment_chain_request::ApplicationMatcher;
    let chain = |piped: &Piped, id: &str, app: &str| ps::CreateDeploymentChainRequest {
        first_deployment: Some(fixtures::deployment(piped, id, app, "frontend")),
        matchers: vec![ApplicationMatcher {
            name: "backend".into(),
            ..Default::default()
        }],
    };
    let mut d = wisp.piped_client(Via::Grpc, &dev).await;
    ok(d.create_deployment_chain(chain(&dev, "c-fe", &frontend))
        .await);
    let mut o = wisp.piped_client(Via::Grpc, &other_piped).await;
    ok(
        o.create_deployment_chain(chain(&other_piped, "c-other", &other_app))
            .await,
    );

    let listed = ok(console
        .list_deployment_chains(web::ListDeploymentChainsRequest::default())
        .await);
    assert_eq!(listed.deployment_chains.len(), 1, "{listed:?}");
    let chain = &listed.deployment_chains[0];
    assert_eq!(chain.project_id, QUICKSTART);
    assert_eq!(chain.blocks.len(), 2, "the first deployment, then backend");
    assert_eq!(
        chain.blocks[0]
            .nodes
            .iter()
            .filter_map(|n| n.deployment_ref.as_ref())
            .map(|d| d.deployment_id.as_str())
            .collect::<Vec<_>>(),
        ["c-fe"]
    );
    assert_eq!(
        chain.blocks[1]
            .nodes
            .iter()
            .filter_map(|n| n.application_ref.as_ref())
            .map(|a| a.application_name.as_str())
            .collect::<Vec<_>>(),
        ["backend"]
    );
    let got = ok(console
        .get_deployment_chain(web::GetDeploymentChainRequest {
            deployment_chain_id: chain.id.clone(),
        })
        .await)
    .deployment_chain
    .expect("a chain");
    assert_eq!(&got, chain);
    let dep = ok(console
        .get_deployment(web::GetDeploymentRequest {
            deployment_id: "c-fe".into(),
        })
        .await)
    .deployment
    .expect("the first deployment");
    assert_eq!(dep.deployment_chain_id, chain.id);
}

#[tokio::test]
async fn unregistered_applications_of_several_pipeds_sorted_by_path() {
    let Populated {
        wisp,
        mut console,
        dev,
        prod,
        other_piped,
        ..
    } = populated().await;
    let info = |piped: &Piped, name: &str| model::ApplicationInfo {
        name: name.into(),
        kind: model::ApplicationKind::Kubernetes as i32,
        repo_id: "examples".into(),
        path: format!("apps/{name}"),
        config_filename: "app.pipecd.yaml".into(),
        piped_id: piped.id.clone(),
        labels: fixtures::string_map(&[("team", "web")]),
        ..Default::default()
    };
    let report =
        |piped: &Piped, names: &[&str]| ps::ReportUnregisteredApplicationConfigurationsRequest {
            applications: names.iter().map(|n| info(piped, n)).collect(),
        };
    let mut d = wisp.piped_client(Via::Grpc, &dev).await;
    let mut p = wisp.piped_client(Via::Grpc, &prod).await;
    let mut o = wisp.piped_client(Via::Grpc, &other_piped).await;
    ok(
        d.report_unregistered_application_configurations(report(&dev, &["zeta", "alpha"]))
            .await,
    );
    ok(
        p.report_unregistered_application_configurations(report(&prod, &["middle"]))
            .await,
    );
    ok(
        o.report_unregistered_application_configurations(report(&other_piped, &["theirs"]))
            .await,
    );

    let listed = |console: &mut WebClient| {
        let mut console = console.clone();
        async move {
            ok(console
                .list_unregistered_applications(web::ListUnregisteredApplicationsRequest {})
                .await)
            .applications
            .into_iter()
            .map(|a| (a.path, a.piped_id))
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed(&mut console).await,
        [
            ("apps/alpha".to_string(), dev.id.clone()),
            ("apps/middle".to_string(), prod.id.clone()),
            ("apps/zeta".to_string(), dev.id.clone()),
        ]
    );
    let full = ok(console
        .list_unregistered_applications(web::ListUnregisteredApplicationsRequest {})
        .await)
    .applications;
    assert_eq!(
        full[0],
        info(&dev, "alpha"),
        "stored as the piped reported it"
    );

    // A piped's next report replaces its own list only.
    ok(
        d.report_unregistered_application_configurations(report(&dev, &["alpha"]))
            .await,
    );
    assert_eq!(
        listed(&mut console).await,
        [
            ("apps/alpha".to_string(), dev.id.clone()),
            ("apps/middle".to_string(), prod.id.clone()),
        ]
    );
}

/// The Insights page after the insights job ran (`wisp jobs run insights`): deployments
/// completed per day, and the change failure rate, for the project, one application, or
/// a label.
#[tokio::test]
async fn insight_data_counts_completed_deployments_and_the_change_failure_rate() {
    // The jobs are on (the config file's project), but run only when asked here.
    let p = populate(Wisp::start_with_jobs(
        "  jobs:\n    insights: {interval: 3600s}\n",
    ))
    .await;
    let mut console = p.console.clone();
    let report = p.wisp.cli_json(&["jobs", "run", "insights"]);
    assert_eq!(report["finished"], true, "{report}");

    let query = |kind: model::InsightMetricsKind, app: &str, labels: &[(&str, &str)]| {
        web::GetInsightDataRequest {
            metrics_kind: kind as i32,
            range_from: fixtures::now() - 7 * 86400,
            range_to: fixtures::now() + 60,
            resolution: model::InsightResolution::Daily as i32,
            application_id: app.into(),
            labels: fixtures::string_map(labels),
        }
    };
    let points = |resp: web::GetInsightDataResponse| -> Vec<f32> {
        assert_eq!(resp.matrix.len(), 1, "{resp:?}");
        resp.matrix[0].data_points.iter().map(|p| p.value).collect()
    };
    use model::InsightMetricsKind::{ChangeFailureRate, DeploymentFrequency};
    // Completed in this project: frontend (success), backend (failure), worker
    // (success); backend's second is still running; the other project's failure is not
    // counted.
    let frequency = points(ok(console
        .get_insight_data(query(DeploymentFrequency, "", &[]))
        .await));
    assert!(
        (8..=9).contains(&frequency.len()),
        "a point per day: {frequency:?}"
    );
    assert_eq!(frequency.iter().sum::<f32>(), 3.0, "{frequency:?}");
    let rate = points(ok(console
        .get_insight_data(query(ChangeFailureRate, "", &[]))
        .await));
    let nonzero: Vec<f32> = rate.iter().copied().filter(|v| *v != 0.0).collect();
    assert_eq!(nonzero.len(), 1, "{rate:?}");
    assert!((nonzero[0] - 1.0 / 3.0).abs() < 1e-6, "{rate:?}");
    let backend_rate = points(ok(console
        .get_insight_data(query(ChangeFailureRate, &p.backend, &[]))
        .await));
    assert_eq!(backend_rate.iter().copied().fold(0.0, f32::max), 1.0);
    let dev_rate = points(ok(console
        .get_insight_data(query(ChangeFailureRate, "", &[("env", "dev")]))
        .await));
    assert!(dev_rate.iter().all(|v| *v == 0.0), "{dev_rate:?}");
    let dev_frequency = points(ok(console
        .get_insight_data(query(DeploymentFrequency, "", &[("env", "dev")]))
        .await));
    assert_eq!(dev_frequency.iter().sum::<f32>(), 2.0);
    // A bad range changes nothing and says why.
    let mut bad = query(DeploymentFrequency, "", &[]);
    bad.range_to = bad.range_from - 1;
    assert_status(
        console.get_insight_data(bad).await,
        Code::InvalidArgument,
        "range",
    );
}

/// Runs `wisp jobs run <job>` and checks it finished.
fn run_job(wisp: &Wisp, job: &str) {
    let report = wisp.cli_json(&["jobs", "run", job]);
    assert_eq!(report["finished"], true, "{job}: {report}");
}

/// The scheduled jobs on DynamoDB Local and moto's S3, each on the populated project, each
/// checked by its stored effect as the console reads it: orphan-commands times out the
/// command nobody handled, deployment-chains moves a chain on, insights fills the
/// Insights page (deployments and the change failure rate, application counts).
#[tokio::test]
async fn scheduled_jobs_on_dynamodb_and_s3_with_populated_data() {
    let test = "scheduled_jobs_on_dynamodb_and_s3_with_populated_data";
    let Some(env) = support::aws::AwsEnv::from_env(test) else {
        return;
    };
    // Commands time out after a second; the jobs run only when asked here.
    let wisp = Wisp::start_aws_on(&env, None, |backend| {
        let config = format!(
            "{}  jobs:\n    orphanCommands: {{interval: 6h, commandTimeout: 1s}}\n    \
             deploymentChains: {{interval: 6h}}\n    insights: {{interval: 6h}}\n",
            backend.config_yaml()
        );
        std::fs::write(&backend.config_path, config).expect("write the config");
    });
    let p = populate(wisp).await;
    let mut console = p.console.clone();

    // orphan-commands: the sync command of `frontend` nobody handled.
    let mut dev_client = p.wisp.piped_client(Via::Grpc, &p.dev).await;
    let unhandled = ok(dev_client
        .list_unhandled_commands(ps::ListUnhandledCommandsRequest {})
        .await)
    .commands;
    assert_eq!(
        unhandled.len(),
        1,
        "the populated sync command: {unhandled:?}"
    );
    let command_id = unhandled[0].id.clone();
    let timed_out = eventually("the command timed out", || {
        let wisp = &p.wisp;
        let mut console = console.clone();
        let id = command_id.clone();
        async move {
            run_job(wisp, "orphan-commands");
            let command = ok(console
                .get_command(web::GetCommandRequest { command_id: id })
                .await)
            .command?;
            (command.status == model::CommandStatus::CommandTimeout as i32).then_some(command)
        }
    })
    .await;
    assert_eq!(timed_out.application_id, p.frontend);
    assert!(
        ok(dev_client
            .list_unhandled_commands(ps::ListUnhandledCommandsRequest {})
            .await)
        .commands
        .is_empty(),
        "a timed-out command is no longer the piped's to handle"
    );

    // deployment-chains: block 0 done, the job opens block 1.
    use ps::create_deployment_chain_request::ApplicationMatcher;
    ok(dev_client
        .create_deployment_chain(ps::CreateDeploymentChainRequest {
            first_deployment: Some(fixtures::deployment(
                &p.dev,
                "c-first",
                &p.frontend,
                "frontend",
            )),
            matchers: vec![ApplicationMatcher {
                name: "backend".into(),
                ..Default::default()
            }],
        })
        .await);
    ok(dev_client
        .report_deployment_completed(ps::ReportDeploymentCompletedRequest {
            deployment_id: "c-first".into(),
            status: DeploymentStatus::DeploymentSuccess as i32,
            completed_at: fixtures::now(),
            ..Default::default()
        })
        .await);
    run_job(&p.wisp, "deployment-chains");
    let chain = ok(console
        .list_deployment_chains(web::ListDeploymentChainsRequest::default())
        .await)
    .deployment_chains;
    assert_eq!(chain.len(), 1);
    assert_eq!(
        chain[0].blocks[0].status,
        model::ChainBlockStatus::DeploymentBlockSuccess as i32,
        "{chain:?}"
    );
    assert!(chain[0].blocks[0].completed_at > 0, "{chain:?}");
    assert_eq!(
        chain[0].blocks[1].status,
        model::ChainBlockStatus::DeploymentBlockPending as i32,
        "block 1 waits for its deployment: {chain:?}"
    );
    assert_eq!(chain[0].completed_at, 0, "the chain goes on: {chain:?}");

    // insights: four completed deployments now (c-first too), one failed.
    run_job(&p.wisp, "insights");
    let request = |kind: model::InsightMetricsKind| web::GetInsightDataRequest {
        metrics_kind: kind as i32,
        range_from: fixtures::now() - 2 * 86400,
        range_to: fixtures::now() + 60,
        resolution: model::InsightResolution::Daily as i32,
        ..Default::default()
    };
    let frequency = ok(console
        .get_insight_data(request(model::InsightMetricsKind::DeploymentFrequency))
        .await);
    let total: f32 = frequency.matrix[0]
        .data_points
        .iter()
        .map(|p| p.value)
        .sum();
    assert_eq!(total, 4.0, "{frequency:?}");
    let rate = ok(console
        .get_insight_data(request(model::InsightMetricsKind::ChangeFailureRate))
        .await);
    let nonzero: Vec<f32> = rate.matrix[0]
        .data_points
        .iter()
        .map(|p| p.value)
        .filter(|v| *v != 0.0)
        .collect();
    assert_eq!(nonzero, [0.25], "{rate:?}");
    let counts = ok(console
        .get_insight_application_count(web::GetInsightApplicationCountRequest {})
        .await);
    // The three live applications; the deleted one is not counted.
    let by_label: Vec<(String, String, i32)> = counts
        .counts
        .iter()
        .map(|c| {
            (
                c.labels["KIND"].clone(),
                c.labels["ACTIVE_STATUS"].clone(),
                c.count,
            )
        })
        .collect();
    assert_eq!(
        by_label,
        [("KUBERNETES".to_string(), "ENABLED".to_string(), 3)],
        "{counts:?}"
    );
}

/// The upgrade dialog's lists come from `pipedReleases`: the versions as configured, and
/// the notes of every release at or after the project's oldest enabled piped (upstream's
/// rule), none while no piped has reported a version.
#[tokio::test]
async fn released_versions_and_deprecated_notes_come_from_the_config() {
    let wisp = Wisp::start_with_jobs(
        "  pipedReleases:\n    versions: [v0.58.0, v0.57.1, v0.56.0]\n    deprecatedNotes:\n      - {version: v0.58.0, notes: \"- drop foo\"}\n      - {version: v0.57.1, notes: \"- rename bar\"}\n      - {version: v0.56.0, notes: \"- old news\"}\n",
    );
    let token = wisp.admin_session().await;
    let mut console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    let released = ok(console
        .list_released_versions(web::ListReleasedVersionsRequest {})
        .await);
    assert_eq!(released.versions, vec!["v0.58.0", "v0.57.1", "v0.56.0"]);

    let old = wisp.add_piped(QUICKSTART, "old");
    let new = wisp.add_piped(QUICKSTART, "new");
    assert_eq!(
        notes(&mut console).await,
        "",
        "no piped has reported a version"
    );

    for (piped, version) in [(&old, "v0.57.0"), (&new, "v0.58.0")] {
        let mut client = wisp.piped_client(Via::Grpc, piped).await;
        ok(client
            .report_piped_meta(ps::ReportPipedMetaRequest {
                version: version.into(),
                ..Default::default()
            })
            .await);
    }
    assert_eq!(
        notes(&mut console).await,
        "## v0.58.0\n- drop foo\n## v0.57.1\n- rename bar\n"
    );
    // A disabled piped does not hold the notes back.
    wisp.cli_ok(&["piped", "disable", "--project", QUICKSTART, &old.id]);
    assert_eq!(notes(&mut console).await, "## v0.58.0\n- drop foo\n");
}

async fn notes(console: &mut WebClient) -> String {
    ok(console
        .list_deprecated_notes(web::ListDeprecatedNotesRequest {
            project_id: QUICKSTART.into(),
        })
        .await)
    .notes
}
