//! ApiApi over the embedded backends (SQLite, a temp directory, the in-process cache):
//! roles, project scoping and upstream's codes, filters and cursors, and the flows that
//! cross into the PipedService (commands, events, plan previews).

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use wisp_auth::{ApiKeyCaller, PipedCaller};
use wisp_proto::apiservice as api;
use wisp_proto::model::{
    self, ApplicationKind, CommandStatus, DeploymentStatus, EventStatus, LogBlock, api_key::Role,
    command,
};
use wisp_proto::pipedservice as ps;
use wisp_services::ServiceError;
use wisp_services::api::ApiApi;
use wisp_services::hybrid;
use wisp_services::piped::PipedApi;
use wisp_store::entities::{pk, slot};
use wisp_store::stores::Stores;

const P1: &str = "project-1";
const P2: &str = "project-2";
const REMOTE: &str = "git@github.com:org/repo.git";
const BASE_URL: &str = "https://wisp.example.com/";
const PUBLIC_PEM: &str = include_str!("testdata/piped-public.pem");
const PRIVATE_PEM: &str = include_str!("testdata/piped-private.pem");

struct Env {
    _dir: wisp_testkit::TempStores,
    api: ApiApi,
    piped_api: PipedApi,
    stores: Stores,
}

fn key(project: &str, id: &str, role: Role) -> ApiKeyCaller {
    ApiKeyCaller {
        id: id.into(),
        name: format!("name-of-{id}"),
        project_id: project.into(),
        role: role as i32,
    }
}

/// P1, read-write.
fn rw() -> ApiKeyCaller {
    key(P1, "key-rw", Role::ReadWrite)
}

/// P1, read-only.
fn ro() -> ApiKeyCaller {
    key(P1, "key-ro", Role::ReadOnly)
}

/// P2, read-write: a key of another project.
fn foreign() -> ApiKeyCaller {
    key(P2, "key-p2", Role::ReadWrite)
}

fn piped_caller(piped: &str) -> PipedCaller {
    PipedCaller {
        project_id: P1.into(),
        piped_id: piped.into(),
    }
}

fn repo(id: &str, remote: &str, branch: &str) -> model::ApplicationGitRepository {
    model::ApplicationGitRepository {
        id: id.into(),
        remote: remote.into(),
        branch: branch.into(),
    }
}

fn git_path(repo_id: &str) -> model::ApplicationGitPath {
    model::ApplicationGitPath {
        repo: Some(repo(repo_id, REMOTE, "main")),
        path: "apps/app".into(),
        config_filename: "app.pipecd.yaml".into(),
        url: String::new(),
    }
}

fn piped(project: &str, id: &str) -> model::Piped {
    model::Piped {
        id: id.into(),
        name: format!("name-of-{id}"),
        project_id: project.into(),
        repositories: vec![repo("repo-1", REMOTE, "main")],
        keys: vec![model::PipedKey {
            hash: "$2a$04$notarealhashnotarealhashnotarealhashnotarealhashnotre".into(),
            creator: "test".into(),
            created_at: 1,
        }],
        secret_encryption: Some(model::piped::SecretEncryption {
            r#type: "KEY_PAIR".into(),
            public_key: PUBLIC_PEM.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn app(project: &str, piped: &str, id: &str, name: &str) -> model::Application {
    model::Application {
        id: id.into(),
        name: name.into(),
        piped_id: piped.into(),
        project_id: project.into(),
        kind: ApplicationKind::Kubernetes as i32,
        git_path: Some(git_path("repo-1")),
        ..Default::default()
    }
}

fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn deployment(project: &str, app_id: &str, id: &str) -> model::Deployment {
    model::Deployment {
        id: id.into(),
        application_id: app_id.into(),
        application_name: format!("name-of-{app_id}"),
        piped_id: "piped-1".into(),
        project_id: project.into(),
        kind: ApplicationKind::Kubernetes as i32,
        git_path: Some(git_path("repo-1")),
        trigger: Some(model::DeploymentTrigger {
            commit: Some(model::Commit {
                hash: "0123abcd".into(),
                message: "change".into(),
                author: "dev".into(),
                branch: "main".into(),
                created_at: 1_700_000_000,
                ..Default::default()
            }),
            timestamp: 1_700_000_000,
            ..Default::default()
        }),
        status: DeploymentStatus::DeploymentPending as i32,
        ..Default::default()
    }
}

/// P1: piped-1 (repo-1 at REMOTE/main, a public key), piped-2 (same repo, disabled),
/// piped-3 (another repo); apps app-1 (piped-1) and app-2 (piped-2).
/// P2: piped-x and app-x.
async fn env() -> Env {
    let dir = wisp_testkit::TempStores::new();
    let stores = dir.stores.clone();
    let mut disabled = piped(P1, "piped-2");
    disabled.disabled = true;
    let mut other_repo = piped(P1, "piped-3");
    other_repo.repositories = vec![repo("repo-9", "git@github.com:org/other.git", "main")];
    for p in [
        piped(P1, "piped-1"),
        disabled,
        other_repo,
        piped(P2, "piped-x"),
    ] {
        stores.pipeds.create(p).await.expect("seed piped");
    }
    for a in [
        app(P1, "piped-1", "app-1", "one"),
        app(P1, "piped-2", "app-2", "two"),
        app(P2, "piped-x", "app-x", "x"),
    ] {
        stores.applications.create(a).await.expect("seed app");
    }
    Env {
        _dir: dir,
        api: ApiApi::new(stores.clone(), BASE_URL),
        piped_api: PipedApi::new(stores.clone(), BASE_URL),
        stores,
    }
}

#[track_caller]
fn code<T: std::fmt::Debug>(r: Result<T, ServiceError>) -> (&'static str, String) {
    match r {
        Ok(v) => panic!("want an error, got {v:?}"),
        Err(e) => {
            let name = match &e {
                ServiceError::InvalidArgument(_) => "InvalidArgument",
                ServiceError::NotFound(_) => "NotFound",
                ServiceError::AlreadyExists(_) => "AlreadyExists",
                ServiceError::PermissionDenied(_) => "PermissionDenied",
                ServiceError::FailedPrecondition(_) => "FailedPrecondition",
                ServiceError::ResourceExhausted(_) => "ResourceExhausted",
                ServiceError::Unimplemented(_) => "Unimplemented",
                ServiceError::Unavailable(_) => "Unavailable",
                ServiceError::Unauthenticated(_) => "Unauthenticated",
                ServiceError::Internal(_) => "Internal",
            };
            (name, e.to_string())
        }
    }
}

#[track_caller]
fn assert_code<T: std::fmt::Debug>(r: Result<T, ServiceError>, want: &str, contains: &str) {
    let (got, msg) = code(r);
    assert_eq!(got, want, "{msg}");
    assert!(
        msg.contains(contains),
        "{msg:?} should contain {contains:?}"
    );
}

async fn stored_app(env: &Env, id: &str) -> model::Application {
    env.stores.applications.get_any(id).await.expect("app")
}

#[tokio::test]
async fn read_only_keys_cannot_write() {
    let env = env().await;
    let k = ro();
    let denied = "Permission denied";
    let gp = Some(git_path("repo-1"));
    assert_code(
        env.api
            .add_application(
                &k,
                api::AddApplicationRequest {
                    name: "n".into(),
                    piped_id: "piped-1".into(),
                    git_path: gp.clone(),
                    ..Default::default()
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    let app_id = || "app-1".to_string();
    assert_code(
        env.api
            .sync_application(
                &k,
                api::SyncApplicationRequest {
                    application_id: app_id(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .update_application(
                &k,
                api::UpdateApplicationRequest {
                    application_id: app_id(),
                    piped_id: "piped-1".into(),
                    git_path: gp.clone(),
                    ..Default::default()
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .delete_application(
                &k,
                api::DeleteApplicationRequest {
                    application_id: app_id(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .enable_application(
                &k,
                api::EnableApplicationRequest {
                    application_id: app_id(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .disable_application(
                &k,
                api::DisableApplicationRequest {
                    application_id: app_id(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .rename_application_config_file(
                &k,
                api::RenameApplicationConfigFileRequest {
                    application_ids: vec![app_id()],
                    new_filename: "x.yaml".into(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    let mut targets = HashMap::new();
    targets.insert("kubernetes".to_string(), model::DeployTargets::default());
    assert_code(
        env.api
            .update_application_deploy_targets(
                &k,
                api::UpdateApplicationDeployTargetsRequest {
                    application_id: app_id(),
                    deploy_targets_by_plugin: targets,
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .register_piped(
                &k,
                api::RegisterPipedRequest {
                    name: "p".into(),
                    desc: String::new(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .update_piped(
                &k,
                api::UpdatePipedRequest {
                    piped_id: "piped-1".into(),
                    name: "n".into(),
                    desc: String::new(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .enable_piped(
                &k,
                api::EnablePipedRequest {
                    piped_id: "piped-1".into(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .disable_piped(
                &k,
                api::DisablePipedRequest {
                    piped_id: "piped-1".into(),
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .register_event(
                &k,
                api::RegisterEventRequest {
                    name: "e".into(),
                    data: "d".into(),
                    ..Default::default()
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    assert_code(
        env.api
            .request_plan_preview(
                &k,
                api::RequestPlanPreviewRequest {
                    repo_remote_url: REMOTE.into(),
                    head_branch: "feature".into(),
                    head_commit: "abc".into(),
                    base_branch: "main".into(),
                    timeout: 0,
                },
            )
            .await,
        "PermissionDenied",
        denied,
    );
    // Upstream requires READ_WRITE for reading plan-preview results too.
    assert_code(
        env.api
            .get_plan_preview_results(&k, api::GetPlanPreviewResultsRequest::default())
            .await,
        "PermissionDenied",
        denied,
    );
    // Nothing was written.
    let app = stored_app(&env, "app-1").await;
    assert!(!app.disabled && !app.deleted);
    let unhandled = env
        .piped_api
        .list_unhandled_commands(
            &piped_caller("piped-1"),
            ps::ListUnhandledCommandsRequest {},
        )
        .await
        .expect("list");
    assert!(unhandled.commands.is_empty());

    // Reads are fine with a read-only key.
    env.api
        .get_application(
            &k,
            api::GetApplicationRequest {
                application_id: app_id(),
            },
        )
        .await
        .expect("read-only get");
    env.api
        .list_applications(&k, api::ListApplicationsRequest::default())
        .await
        .expect("read-only list");
    env.api
        .get_piped(
            &k,
            api::GetPipedRequest {
                piped_id: "piped-1".into(),
            },
        )
        .await
        .expect("read-only get piped");
    env.api
        .encrypt(
            &k,
            api::EncryptRequest {
                plaintext: "s".into(),
                piped_id: "piped-1".into(),
                base64_encoding: false,
            },
        )
        .await
        .expect("read-only encrypt");

    // A role that is neither is refused everywhere.
    let weird = ApiKeyCaller { role: 7, ..rw() };
    assert_code(
        env.api
            .get_application(
                &weird,
                api::GetApplicationRequest {
                    application_id: app_id(),
                },
            )
            .await,
        "PermissionDenied",
        "Invalid role",
    );
}

#[tokio::test]
async fn validation_runs_first() {
    let env = env().await;
    assert_code(
        env.api
            .sync_application(&ro(), api::SyncApplicationRequest::default())
            .await,
        "InvalidArgument",
        "SyncApplicationRequest.application_id",
    );
    assert_code(
        env.api
            .add_application(
                &rw(),
                api::AddApplicationRequest {
                    name: "n".into(),
                    piped_id: "piped-1".into(),
                    ..Default::default()
                },
            )
            .await,
        "InvalidArgument",
        "AddApplicationRequest.git_path",
    );
    assert_code(
        env.api
            .register_event(
                &rw(),
                api::RegisterEventRequest {
                    name: "e".into(),
                    data: "d".into(),
                    contexts: labels(&[("bad key", "v")]),
                    ..Default::default()
                },
            )
            .await,
        "InvalidArgument",
        "RegisterEventRequest.contexts[bad key]",
    );
}

#[tokio::test]
async fn foreign_and_unknown_objects() {
    let env = env().await;
    let k = foreign();
    let not_yours = "does not belong to your project";
    // InvalidArgument for most RPCs, as upstream.
    assert_code(
        env.api
            .get_application(
                &k,
                api::GetApplicationRequest {
                    application_id: "app-1".into(),
                },
            )
            .await,
        "InvalidArgument",
        not_yours,
    );
    assert_code(
        env.api
            .sync_application(
                &k,
                api::SyncApplicationRequest {
                    application_id: "app-1".into(),
                },
            )
            .await,
        "InvalidArgument",
        not_yours,
    );
    assert_code(
        env.api
            .disable_application(
                &k,
                api::DisableApplicationRequest {
                    application_id: "app-1".into(),
                },
            )
            .await,
        "InvalidArgument",
        not_yours,
    );
    assert_code(
        env.api
            .delete_application(
                &k,
                api::DeleteApplicationRequest {
                    application_id: "app-1".into(),
                },
            )
            .await,
        "InvalidArgument",
        not_yours,
    );
    assert_code(
        env.api
            .get_piped(
                &k,
                api::GetPipedRequest {
                    piped_id: "piped-1".into(),
                },
            )
            .await,
        "InvalidArgument",
        not_yours,
    );
    assert_code(
        env.api
            .add_application(
                &k,
                api::AddApplicationRequest {
                    name: "n".into(),
                    piped_id: "piped-1".into(),
                    git_path: Some(git_path("repo-1")),
                    ..Default::default()
                },
            )
            .await,
        "InvalidArgument",
        not_yours,
    );
    // The application must be in the key's project even when the piped is.
    assert_code(
        env.api
            .update_application(
                &k,
                api::UpdateApplicationRequest {
                    application_id: "app-1".into(),
                    piped_id: "piped-x".into(),
                    git_path: Some(git_path("repo-1")),
                    ..Default::default()
                },
            )
            .await,
        "InvalidArgument",
        not_yours,
    );
    // PermissionDenied for these, as upstream.
    assert_code(
        env.api
            .enable_piped(
                &k,
                api::EnablePipedRequest {
                    piped_id: "piped-1".into(),
                },
            )
            .await,
        "PermissionDenied",
        "doesn't belong to your project",
    );
    assert_code(
        env.api
            .rename_application_config_file(
                &k,
                api::RenameApplicationConfigFileRequest {
                    application_ids: vec!["app-x".into(), "app-1".into()],
                    new_filename: "renamed.yaml".into(),
                },
            )
            .await,
        "PermissionDenied",
        "app-1",
    );
    // Checked before anything changed: app-x keeps its name.
    assert_eq!(
        stored_app(&env, "app-x")
            .await
            .git_path
            .expect("path")
            .config_filename,
        "app.pipecd.yaml"
    );
    // Unknown objects.
    assert_code(
        env.api
            .get_application(
                &rw(),
                api::GetApplicationRequest {
                    application_id: "nope".into(),
                },
            )
            .await,
        "NotFound",
        "Application is not found",
    );
    assert_code(
        env.api
            .get_piped(
                &rw(),
                api::GetPipedRequest {
                    piped_id: "nope".into(),
                },
            )
            .await,
        "NotFound",
        "Piped is not found",
    );
    assert_code(
        env.api
            .get_deployment(
                &rw(),
                api::GetDeploymentRequest {
                    deployment_id: "nope".into(),
                },
            )
            .await,
        "NotFound",
        "Deployment is not found",
    );
    assert_code(
        env.api
            .get_command(
                &rw(),
                api::GetCommandRequest {
                    command_id: "nope".into(),
                },
            )
            .await,
        "NotFound",
        "Command is not found",
    );
    assert_code(
        env.api
            .update_application(
                &rw(),
                api::UpdateApplicationRequest {
                    application_id: "app-1".into(),
                    piped_id: "nope".into(),
                    git_path: Some(git_path("repo-1")),
                    ..Default::default()
                },
            )
            .await,
        "NotFound",
        "Piped is not found",
    );
}

#[tokio::test]
async fn application_lifecycle() {
    let env = env().await;
    let added = env
        .api
        .add_application(
            &rw(),
            api::AddApplicationRequest {
                name: "canary".into(),
                piped_id: "piped-1".into(),
                git_path: Some(model::ApplicationGitPath {
                    repo: Some(model::ApplicationGitRepository {
                        id: "repo-1".into(),
                        ..Default::default()
                    }),
                    path: "kubernetes/canary".into(),
                    config_filename: "app.pipecd.yaml".into(),
                    url: String::new(),
                }),
                kind: ApplicationKind::Kubernetes as i32,
                platform_provider: "kubernetes-default".into(),
                description: "demo".into(),
                labels: labels(&[("env", "dev")]),
            },
        )
        .await
        .expect("add");
    let app = stored_app(&env, &added.application_id).await;
    assert_eq!(app.project_id, P1);
    assert_eq!(app.cloud_provider, "kubernetes-default");
    let gp = app.git_path.clone().expect("git path");
    // Remote and branch come from the piped's repository, with a link to the directory.
    assert_eq!(gp.repo, Some(repo("repo-1", REMOTE, "main")));
    assert_eq!(
        gp.url,
        "https://github.com/org/repo/tree/main/kubernetes/canary"
    );
    assert_code(
        env.api
            .add_application(
                &rw(),
                api::AddApplicationRequest {
                    name: "x".into(),
                    piped_id: "piped-1".into(),
                    git_path: Some(git_path("repo-unknown")),
                    ..Default::default()
                },
            )
            .await,
        "NotFound",
        "repository is not found",
    );

    // Deploy targets, then an update that must keep them.
    let mut targets = HashMap::new();
    targets.insert(
        "kubernetes".to_string(),
        model::DeployTargets {
            deploy_targets: vec!["cluster-1".into()],
        },
    );
    env.api
        .update_application_deploy_targets(
            &rw(),
            api::UpdateApplicationDeployTargetsRequest {
                application_id: app.id.clone(),
                deploy_targets_by_plugin: targets.clone(),
            },
        )
        .await
        .expect("deploy targets");
    let mut new_path = git_path("ignored");
    new_path.config_filename = "new.pipecd.yaml".into();
    let updated = env
        .api
        .update_application(
            &rw(),
            api::UpdateApplicationRequest {
                application_id: app.id.clone(),
                piped_id: "piped-3".into(),
                platform_provider: "kubernetes-other".into(),
                git_path: Some(new_path),
            },
        )
        .await
        .expect("update");
    assert_eq!(updated.application_id, app.id);
    let app = stored_app(&env, &app.id).await;
    assert_eq!(app.piped_id, "piped-3");
    assert_eq!(app.platform_provider, "kubernetes-other");
    let gp = app.git_path.clone().expect("git path");
    assert_eq!(gp.config_filename, "new.pipecd.yaml");
    assert_eq!(gp.path, "kubernetes/canary", "only the file name changes");
    assert_eq!(
        app.deploy_targets_by_plugin, targets,
        "deploy targets survive"
    );

    env.api
        .rename_application_config_file(
            &rw(),
            api::RenameApplicationConfigFileRequest {
                application_ids: vec![app.id.clone(), "app-1".into()],
                new_filename: "renamed.yaml".into(),
            },
        )
        .await
        .expect("rename");
    for id in [app.id.as_str(), "app-1"] {
        let gp = stored_app(&env, id).await.git_path.expect("path");
        assert_eq!(gp.config_filename, "renamed.yaml");
    }

    let disabled = env
        .api
        .disable_application(
            &rw(),
            api::DisableApplicationRequest {
                application_id: app.id.clone(),
            },
        )
        .await
        .expect("disable");
    assert_eq!(disabled.application_id, app.id);
    assert!(stored_app(&env, &app.id).await.disabled);
    env.api
        .enable_application(
            &rw(),
            api::EnableApplicationRequest {
                application_id: app.id.clone(),
            },
        )
        .await
        .expect("enable");
    assert!(!stored_app(&env, &app.id).await.disabled);

    env.api
        .delete_application(
            &rw(),
            api::DeleteApplicationRequest {
                application_id: app.id.clone(),
            },
        )
        .await
        .expect("delete");
    let deleted = stored_app(&env, &app.id).await;
    assert!(deleted.deleted && deleted.disabled && deleted.deleted_at > 0);
    assert_code(
        env.api
            .enable_application(
                &rw(),
                api::EnableApplicationRequest {
                    application_id: app.id.clone(),
                },
            )
            .await,
        "InvalidArgument",
        "deleted application",
    );
    assert_code(
        env.api
            .update_application_deploy_targets(
                &rw(),
                api::UpdateApplicationDeployTargetsRequest {
                    application_id: app.id.clone(),
                    deploy_targets_by_plugin: targets,
                },
            )
            .await,
        "InvalidArgument",
        "deleted application",
    );
    // Deleted applications are not listed, even among the disabled ones.
    let listed = env
        .api
        .list_applications(
            &ro(),
            api::ListApplicationsRequest {
                disabled: true,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert!(listed.applications.iter().all(|a| a.id != app.id));
}

async fn list_apps(env: &Env, req: api::ListApplicationsRequest) -> Vec<String> {
    env.api
        .list_applications(&ro(), req)
        .await
        .expect("list")
        .applications
        .into_iter()
        .map(|a| a.id)
        .collect()
}

#[tokio::test]
async fn list_applications_filters_and_pages() {
    let env = env().await;
    for i in 0..23 {
        let mut a = app(
            P1,
            if i % 2 == 0 { "piped-1" } else { "piped-3" },
            &format!("bulk-{i:02}"),
            &format!("bulk-{i:02}"),
        );
        if i % 3 == 0 {
            a.labels = labels(&[("env", "prod"), ("team", "a")]);
        }
        if i == 5 {
            a.kind = ApplicationKind::Terraform as i32;
        }
        if i == 7 {
            a.disabled = true;
        }
        env.stores.applications.create(a).await.expect("create");
    }
    // 22 enabled bulk apps + app-1 + app-2 = 24 enabled in P1.
    let mut seen = HashSet::new();
    let mut cursor = String::new();
    let mut pages = Vec::new();
    loop {
        let resp = env
            .api
            .list_applications(
                &ro(),
                api::ListApplicationsRequest {
                    limit: 10,
                    cursor: cursor.clone(),
                    ..Default::default()
                },
            )
            .await
            .expect("page");
        pages.push(resp.applications.len());
        for a in &resp.applications {
            assert_eq!(a.project_id, P1);
            assert!(!a.disabled);
            assert!(seen.insert(a.id.clone()), "{} listed twice", a.id);
        }
        if resp.cursor.is_empty() {
            break;
        }
        cursor = resp.cursor;
        assert!(pages.len() < 10, "pagination does not end");
    }
    assert_eq!(pages, vec![10, 10, 4]);
    assert_eq!(seen.len(), 24);

    // Exactly a multiple of the limit: the last full page has an empty cursor.
    let first = env
        .api
        .list_applications(
            &ro(),
            api::ListApplicationsRequest {
                limit: 12,
                ..Default::default()
            },
        )
        .await
        .expect("page 1");
    assert_eq!(first.applications.len(), 12);
    assert!(!first.cursor.is_empty());
    let second = env
        .api
        .list_applications(
            &ro(),
            api::ListApplicationsRequest {
                limit: 12,
                cursor: first.cursor,
                ..Default::default()
            },
        )
        .await
        .expect("page 2");
    assert_eq!(second.applications.len(), 12);
    assert!(second.cursor.is_empty());

    // Newest first.
    env.api
        .disable_application(
            &rw(),
            api::DisableApplicationRequest {
                application_id: "bulk-03".into(),
            },
        )
        .await
        .expect("disable");
    env.api
        .enable_application(
            &rw(),
            api::EnableApplicationRequest {
                application_id: "bulk-03".into(),
            },
        )
        .await
        .expect("enable");
    let all = list_apps(&env, api::ListApplicationsRequest::default()).await;
    assert_eq!(all.len(), 24);

    // Labels with pages: 8 enabled bulk apps (0,3,...,21) carry env=prod.
    let mut prod = Vec::new();
    let mut cursor = String::new();
    loop {
        let resp = env
            .api
            .list_applications(
                &ro(),
                api::ListApplicationsRequest {
                    labels: labels(&[("env", "prod")]),
                    limit: 3,
                    cursor: cursor.clone(),
                    ..Default::default()
                },
            )
            .await
            .expect("label page");
        assert!(resp.applications.len() <= 3);
        prod.extend(resp.applications.into_iter().map(|a| a.id));
        if resp.cursor.is_empty() {
            break;
        }
        cursor = resp.cursor;
    }
    prod.sort();
    let want: Vec<String> = (0..23)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("bulk-{i:02}"))
        .collect();
    assert_eq!(prod, want);

    assert_eq!(
        list_apps(
            &env,
            api::ListApplicationsRequest {
                disabled: true,
                ..Default::default()
            }
        )
        .await,
        vec!["bulk-07".to_string()]
    );
    assert_eq!(
        list_apps(
            &env,
            api::ListApplicationsRequest {
                kind: "TERRAFORM".into(),
                ..Default::default()
            }
        )
        .await,
        vec!["bulk-05".to_string()]
    );
    assert_eq!(
        list_apps(
            &env,
            api::ListApplicationsRequest {
                name: "one".into(),
                ..Default::default()
            }
        )
        .await,
        vec!["app-1".to_string()]
    );
    let on_piped_3 = list_apps(
        &env,
        api::ListApplicationsRequest {
            piped_id: "piped-3".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        on_piped_3.len(),
        10,
        "odd bulk apps but the disabled bulk-07"
    );
    assert_code(
        env.api
            .list_applications(
                &ro(),
                api::ListApplicationsRequest {
                    kind: "SPACESHIP".into(),
                    ..Default::default()
                },
            )
            .await,
        "InvalidArgument",
        "Invalid application kind",
    );
    assert_code(
        env.api
            .list_applications(
                &ro(),
                api::ListApplicationsRequest {
                    cursor: "%%%".into(),
                    ..Default::default()
                },
            )
            .await,
        "InvalidArgument",
        "cursor",
    );
    // Another project sees only its own.
    let theirs = env
        .api
        .list_applications(&foreign(), api::ListApplicationsRequest::default())
        .await
        .expect("list");
    assert_eq!(
        theirs
            .applications
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        vec!["app-x"]
    );
}

#[tokio::test]
async fn list_deployments_filters_and_pages() {
    let env = env().await;
    for i in 0..15 {
        let mut d = deployment(
            P1,
            if i < 10 { "app-1" } else { "app-2" },
            &format!("dep-{i:02}"),
        );
        if i % 2 == 1 {
            d.status = DeploymentStatus::DeploymentSuccess as i32;
        }
        if i == 4 {
            d.status = DeploymentStatus::DeploymentFailure as i32;
        }
        if i == 6 {
            d.kind = ApplicationKind::Ecs as i32;
        }
        if i % 5 == 0 {
            d.labels = labels(&[("env", "prod")]);
        }
        env.stores.deployments.create(d).await.expect("create");
    }
    env.stores
        .deployments
        .create(deployment(P2, "app-x", "dep-x"))
        .await
        .expect("create");

    let mut seen = HashSet::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let resp = env
            .api
            .list_deployments(
                &ro(),
                api::ListDeploymentsRequest {
                    limit: 4,
                    cursor: cursor.clone(),
                    ..Default::default()
                },
            )
            .await
            .expect("page");
        pages += 1;
        for d in resp.deployments {
            assert_eq!(d.project_id, P1);
            assert!(seen.insert(d.id));
        }
        if resp.cursor.is_empty() {
            break;
        }
        cursor = resp.cursor;
    }
    assert_eq!((seen.len(), pages), (15, 4));

    let ids = |resp: api::ListDeploymentsResponse| {
        let mut ids: Vec<String> = resp.deployments.into_iter().map(|d| d.id).collect();
        ids.sort();
        ids
    };
    let success = env
        .api
        .list_deployments(
            &ro(),
            api::ListDeploymentsRequest {
                statuses: vec!["DEPLOYMENT_SUCCESS".into()],
                ..Default::default()
            },
        )
        .await
        .expect("by status");
    assert_eq!(ids(success).len(), 7);
    let two_statuses = env
        .api
        .list_deployments(
            &ro(),
            api::ListDeploymentsRequest {
                statuses: vec![
                    "DEPLOYMENT_FAILURE".into(),
                    String::new(),
                    "DEPLOYMENT_SUCCESS".into(),
                ],
                ..Default::default()
            },
        )
        .await
        .expect("by statuses");
    assert_eq!(ids(two_statuses).len(), 8);
    let ecs = env
        .api
        .list_deployments(
            &ro(),
            api::ListDeploymentsRequest {
                kinds: vec!["ECS".into()],
                ..Default::default()
            },
        )
        .await
        .expect("by kind");
    assert_eq!(ids(ecs), vec!["dep-06"]);
    // One application id reads that application's index, with pages.
    let mut app2 = Vec::new();
    let mut cursor = String::new();
    loop {
        let resp = env
            .api
            .list_deployments(
                &ro(),
                api::ListDeploymentsRequest {
                    application_ids: vec!["app-2".into()],
                    limit: 2,
                    cursor: cursor.clone(),
                    ..Default::default()
                },
            )
            .await
            .expect("by app");
        app2.extend(resp.deployments.into_iter().map(|d| d.id));
        if resp.cursor.is_empty() {
            break;
        }
        cursor = resp.cursor;
    }
    app2.sort();
    assert_eq!(app2, vec!["dep-10", "dep-11", "dep-12", "dep-13", "dep-14"]);
    let by_name_and_label = env
        .api
        .list_deployments(
            &ro(),
            api::ListDeploymentsRequest {
                application_name: "name-of-app-1".into(),
                labels: labels(&[("env", "prod")]),
                ..Default::default()
            },
        )
        .await
        .expect("by name and label");
    assert_eq!(ids(by_name_and_label), vec!["dep-00", "dep-05"]);
    assert_code(
        env.api
            .list_deployments(
                &ro(),
                api::ListDeploymentsRequest {
                    statuses: vec!["DONE".into()],
                    ..Default::default()
                },
            )
            .await,
        "InvalidArgument",
        "DONE is invalid deployment status",
    );
    assert_code(
        env.api
            .list_deployments(
                &ro(),
                api::ListDeploymentsRequest {
                    kinds: vec!["VM".into()],
                    ..Default::default()
                },
            )
            .await,
        "InvalidArgument",
        "VM is invalid application kind",
    );

    let got = env
        .api
        .get_deployment(
            &ro(),
            api::GetDeploymentRequest {
                deployment_id: "dep-03".into(),
            },
        )
        .await
        .expect("get");
    assert_eq!(got.deployment.expect("deployment").id, "dep-03");
    assert_code(
        env.api
            .get_deployment(
                &ro(),
                api::GetDeploymentRequest {
                    deployment_id: "dep-x".into(),
                },
            )
            .await,
        "InvalidArgument",
        "does not belong to your project",
    );
}

#[tokio::test]
async fn stage_logs() {
    let env = env().await;
    let mut d = deployment(P1, "app-1", "dep-1");
    let stage = |id: &str, name: &str, retried: i32| model::PipelineStage {
        id: id.into(),
        name: name.into(),
        retried_count: retried,
        created_at: 1_700_000_000,
        updated_at: 1_700_000_000,
        ..Default::default()
    };
    d.stages = vec![
        stage("s1", "K8S_SYNC", 1),
        stage("s2", "WAIT", 0),
        stage("s3", "ROLLBACK", 0),
    ];
    env.stores.deployments.create(d).await.expect("create");
    let block = |index: i64, log: &str| LogBlock {
        index,
        log: log.into(),
        severity: 0,
        created_at: 1_700_000_000,
    };
    // An old attempt, and the current one (retried once), completed.
    env.stores
        .stage_logs
        .append("dep-1", "s1", 0, &[block(1, "first try")])
        .await
        .expect("append");
    env.stores
        .stage_logs
        .append_from_checkpoint("dep-1", "s1", 1, &[block(1, "a"), block(2, "b")], true)
        .await
        .expect("append");
    let logs = env
        .api
        .list_stage_logs(
            &ro(),
            api::ListStageLogsRequest {
                deployment_id: "dep-1".into(),
            },
        )
        .await
        .expect("logs")
        .stage_logs;
    assert_eq!(logs.len(), 2, "ROLLBACK without logs is left out");
    let s1 = &logs["s1"];
    assert!(s1.completed);
    assert_eq!(
        s1.blocks.iter().map(|b| b.log.as_str()).collect::<Vec<_>>(),
        vec!["a", "b"]
    );
    assert_eq!(logs["s2"], api::StageLog::default());
    assert_code(
        env.api
            .list_stage_logs(
                &foreign(),
                api::ListStageLogsRequest {
                    deployment_id: "dep-1".into(),
                },
            )
            .await,
        "InvalidArgument",
        "does not belong to your project",
    );
}

#[tokio::test]
async fn sync_command_reaches_the_piped_and_back() {
    let env = env().await;
    let synced = env
        .api
        .sync_application(
            &rw(),
            api::SyncApplicationRequest {
                application_id: "app-1".into(),
            },
        )
        .await
        .expect("sync");
    let me = piped_caller("piped-1");
    let unhandled = env
        .piped_api
        .list_unhandled_commands(&me, ps::ListUnhandledCommandsRequest {})
        .await
        .expect("unhandled")
        .commands;
    assert_eq!(unhandled.len(), 1);
    let cmd = &unhandled[0];
    assert_eq!(cmd.id, synced.command_id);
    assert_eq!(cmd.r#type, command::Type::SyncApplication as i32);
    assert_eq!(cmd.commander, "key-rw");
    assert_eq!(cmd.application_id, "app-1");
    let sync = cmd.sync_application.clone().expect("payload");
    assert_eq!(sync.application_id, "app-1");
    assert_eq!(sync.sync_strategy, model::SyncStrategy::Auto as i32);
    // Another piped of the project does not see it.
    let other = env
        .piped_api
        .list_unhandled_commands(
            &piped_caller("piped-3"),
            ps::ListUnhandledCommandsRequest {},
        )
        .await
        .expect("unhandled");
    assert!(other.commands.is_empty());

    let before = env
        .api
        .get_command(
            &ro(),
            api::GetCommandRequest {
                command_id: synced.command_id.clone(),
            },
        )
        .await
        .expect("get")
        .command
        .expect("command");
    assert_eq!(before.status, CommandStatus::CommandNotHandledYet as i32);

    env.piped_api
        .report_command_handled(
            &me,
            ps::ReportCommandHandledRequest {
                command_id: synced.command_id.clone(),
                status: CommandStatus::CommandSucceeded as i32,
                metadata: labels(&[("DeploymentID", "dep-9")]),
                handled_at: 1_700_000_100,
                output: vec![],
            },
        )
        .await
        .expect("handled");
    let after = env
        .api
        .get_command(
            &ro(),
            api::GetCommandRequest {
                command_id: synced.command_id.clone(),
            },
        )
        .await
        .expect("get")
        .command
        .expect("command");
    assert_eq!(after.status, CommandStatus::CommandSucceeded as i32);
    assert_eq!(after.metadata["DeploymentID"], "dep-9");
    assert_eq!(after.handled_at, 1_700_000_100);
    assert_code(
        env.api
            .get_command(
                &foreign(),
                api::GetCommandRequest {
                    command_id: synced.command_id,
                },
            )
            .await,
        "InvalidArgument",
        "does not belong to your project",
    );
}

#[tokio::test]
async fn registered_events_reach_the_piped() {
    let env = env().await;
    let lbls = labels(&[("app", "web"), ("env", "dev")]);
    let first = env
        .api
        .register_event(
            &rw(),
            api::RegisterEventRequest {
                name: "image-update".into(),
                data: "v1".into(),
                labels: lbls.clone(),
                ..Default::default()
            },
        )
        .await
        .expect("register");
    let me = piped_caller("piped-1");
    let latest = env
        .piped_api
        .get_latest_event(
            &me,
            ps::GetLatestEventRequest {
                name: "image-update".into(),
                labels: lbls.clone(),
            },
        )
        .await
        .expect("latest")
        .event
        .expect("event");
    assert_eq!(latest.id, first.event_id);
    assert_eq!(latest.data, "v1");
    assert_eq!(latest.status, EventStatus::EventNotHandled as i32);
    assert_eq!(
        latest.status_description,
        "It is going to be replaced by v1"
    );
    assert_eq!(
        latest.event_key,
        wisp_model::event::make_event_key("image-update", &lbls)
    );
    // Different labels are a different event.
    let other = env
        .piped_api
        .get_latest_event(
            &me,
            ps::GetLatestEventRequest {
                name: "image-update".into(),
                labels: labels(&[("app", "web")]),
            },
        )
        .await;
    assert_code(other, "NotFound", "no events found");

    // With commit information, a deployment trace is stored too.
    env.api
        .register_event(
            &rw(),
            api::RegisterEventRequest {
                name: "image-update".into(),
                data: "v2".into(),
                labels: lbls.clone(),
                contexts: labels(&[("commit-hash", "abc")]),
                commit_hash: "abc".into(),
                commit_url: "https://github.com/org/repo/commit/abc".into(),
                commit_title: "bump".into(),
                commit_author: "dev".into(),
                commit_timestamp: 1_700_000_000,
                ..Default::default()
            },
        )
        .await
        .expect("register with commit");
    let listed = env
        .piped_api
        .list_events(
            &me,
            ps::ListEventsRequest {
                status: ps::list_events_request::Status::NotHandled as i32,
                ..Default::default()
            },
        )
        .await
        .expect("list events")
        .events;
    assert_eq!(listed.len(), 2);
    let traces = env
        .stores
        .deployment_traces
        .list_all(slot::TRACE_BY_COMMIT, pk::project_commit(P1, "abc"), None)
        .await
        .expect("traces");
    assert_eq!(traces.len(), 1);
    assert_eq!(traces[0].title, "bump");
    assert_eq!(traces[0].commit_timestamp, 1_700_000_000);
    let with_trace = listed
        .iter()
        .find(|e| e.data == "v2")
        .expect("second event");
    assert_eq!(with_trace.trigger_commit_hash, "abc");
    // Other projects do not see it.
    let theirs = env
        .piped_api
        .list_events(
            &PipedCaller {
                project_id: P2.into(),
                piped_id: "piped-x".into(),
            },
            ps::ListEventsRequest::default(),
        )
        .await
        .expect("list");
    assert!(theirs.events.is_empty());
}

fn plan_result(command_id: &str, piped_id: &str) -> model::PlanPreviewCommandResult {
    model::PlanPreviewCommandResult {
        command_id: command_id.into(),
        piped_id: piped_id.into(),
        results: vec![model::ApplicationPlanPreviewResult {
            application_id: "app-1".into(),
            application_name: "one".into(),
            plan_summary: b"1 to add".to_vec(),
            plan_details: b"+ deployment".to_vec(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[tokio::test]
async fn plan_preview_timing_rules() {
    let env = env().await;
    let requested = env
        .api
        .request_plan_preview(
            &rw(),
            api::RequestPlanPreviewRequest {
                repo_remote_url: REMOTE.into(),
                head_branch: "feature".into(),
                head_commit: "abc".into(),
                base_branch: "main".into(),
                timeout: 300,
            },
        )
        .await
        .expect("request");
    // piped-1 only: piped-2 is disabled, piped-3 watches another repository, piped-x is
    // in another project.
    assert_eq!(requested.commands.len(), 1);
    let cmd_id = requested.commands[0].clone();
    let cmd = env.stores.commands.get(P1, &cmd_id).await.expect("command");
    assert_eq!(cmd.piped_id, "piped-1");
    assert_eq!(cmd.commander, "pipectl");
    let payload = cmd.build_plan_preview.clone().expect("payload");
    assert_eq!(
        (
            payload.repository_id.as_str(),
            payload.head_commit.as_str(),
            payload.timeout
        ),
        ("repo-1", "abc", 300)
    );
    let none = env
        .api
        .request_plan_preview(
            &rw(),
            api::RequestPlanPreviewRequest {
                repo_remote_url: REMOTE.into(),
                head_branch: "feature".into(),
                head_commit: "abc".into(),
                base_branch: "release".into(),
                timeout: 0,
            },
        )
        .await
        .expect("request");
    assert!(none.commands.is_empty());

    let results = |ids: Vec<String>, timeout: i64| api::GetPlanPreviewResultsRequest {
        commands: ids,
        command_handle_timeout: timeout,
    };
    // The piped never reported a stat: offline.
    let offline = env
        .api
        .get_plan_preview_results(&rw(), results(vec![cmd_id.clone()], 0))
        .await
        .expect("results")
        .results;
    assert_eq!(offline.len(), 1);
    assert_eq!(offline[0].error, "Maybe Piped is offline currently.");
    assert_eq!(offline[0].piped_name, "name-of-piped-1");
    assert_eq!(
        offline[0].piped_url,
        "https://wisp.example.com/settings/piped"
    );

    // Online and fresh: NotFound, so that the client asks again.
    env.piped_api
        .report_stat(
            &piped_caller("piped-1"),
            ps::ReportStatRequest {
                piped_stats: vec![1],
            },
        )
        .await
        .expect("stat");
    assert_code(
        env.api
            .get_plan_preview_results(&rw(), results(vec![cmd_id.clone()], 0))
            .await,
        "NotFound",
        "Waiting for result of command",
    );
    // Online but older than the handle timeout: a timeout result.
    let mut old = cmd.clone();
    old.id = "old-command".into();
    old.created_at = wisp_store::collection::now_unix() - 120;
    env.stores.commands.create(old).await.expect("old command");
    let timed_out = env
        .api
        .get_plan_preview_results(&rw(), results(vec!["old-command".into()], 60))
        .await
        .expect("results")
        .results;
    assert_eq!(
        timed_out[0].error,
        "Timed out, maybe the Piped is offline currently."
    );

    // Handled with an output: the piped's result, with URLs and the piped's name.
    let output = serde_json::to_vec(&plan_result(&cmd_id, "piped-1")).expect("json");
    let json: serde_json::Value = serde_json::from_slice(&output).expect("json");
    assert_eq!(
        json["results"][0]["plan_summary"], "MSB0byBhZGQ=",
        "bytes are base64 in the JSON, as Go writes them"
    );
    env.piped_api
        .report_command_handled(
            &piped_caller("piped-1"),
            ps::ReportCommandHandledRequest {
                command_id: cmd_id.clone(),
                status: CommandStatus::CommandSucceeded as i32,
                metadata: HashMap::new(),
                handled_at: wisp_store::collection::now_unix(),
                output,
            },
        )
        .await
        .expect("handled");
    let done = env
        .api
        .get_plan_preview_results(&rw(), results(vec![cmd_id.clone()], 0))
        .await
        .expect("results")
        .results;
    assert_eq!(done.len(), 1);
    let result = &done[0];
    assert!(result.error.is_empty());
    assert_eq!(result.piped_name, "name-of-piped-1");
    assert_eq!(result.piped_url, "https://wisp.example.com/settings/piped");
    assert_eq!(
        result.results[0].application_url,
        "https://wisp.example.com/applications/app-1"
    );
    assert_eq!(result.results[0].plan_summary, b"1 to add");

    // Handled more than a day ago: refused.
    let mut stale = cmd.clone();
    stale.id = "stale-command".into();
    stale.status = CommandStatus::CommandSucceeded as i32;
    stale.handled_at = wisp_store::collection::now_unix() - 25 * 3600;
    env.stores.commands.create(stale).await.expect("stale");
    assert_code(
        env.api
            .get_plan_preview_results(&rw(), results(vec!["stale-command".into()], 0))
            .await,
        "FailedPrecondition",
        "too old",
    );
    // Not a plan preview.
    let synced = env
        .api
        .sync_application(
            &rw(),
            api::SyncApplicationRequest {
                application_id: "app-1".into(),
            },
        )
        .await
        .expect("sync");
    assert_code(
        env.api
            .get_plan_preview_results(&rw(), results(vec![synced.command_id], 0))
            .await,
        "FailedPrecondition",
        "is not a plan preview command",
    );
    // Another project's key.
    assert_code(
        env.api
            .get_plan_preview_results(&foreign(), results(vec![cmd_id], 0))
            .await,
        "PermissionDenied",
        "does not belong to your project",
    );
}

#[tokio::test]
async fn pipeds() {
    let env = env().await;
    let got = env
        .api
        .get_piped(
            &ro(),
            api::GetPipedRequest {
                piped_id: "piped-1".into(),
            },
        )
        .await
        .expect("get")
        .piped
        .expect("piped");
    assert_eq!(got.keys.len(), 1);
    assert_eq!(got.keys[0].hash, "redacted");

    let registered = env
        .api
        .register_piped(
            &rw(),
            api::RegisterPipedRequest {
                name: "new-piped".into(),
                desc: "from pipectl".into(),
            },
        )
        .await
        .expect("register");
    let stored = env
        .stores
        .pipeds
        .get(P1, &registered.id)
        .await
        .expect("stored");
    assert_eq!(stored.name, "new-piped");
    assert_eq!(stored.keys.len(), 1);
    assert_eq!(stored.keys[0].creator, "name-of-key-rw");
    assert!(wisp_auth::verify_secret(
        &registered.key,
        &stored.keys[0].hash
    ));
    assert_eq!(registered.key.len(), 50);

    env.api
        .update_piped(
            &rw(),
            api::UpdatePipedRequest {
                piped_id: registered.id.clone(),
                name: "renamed".into(),
                desc: "d".into(),
            },
        )
        .await
        .expect("update");
    env.api
        .disable_piped(
            &rw(),
            api::DisablePipedRequest {
                piped_id: registered.id.clone(),
            },
        )
        .await
        .expect("disable");
    let stored = env
        .stores
        .pipeds
        .get(P1, &registered.id)
        .await
        .expect("stored");
    assert_eq!(
        (stored.name.as_str(), stored.desc.as_str(), stored.disabled),
        ("renamed", "d", true)
    );
    env.api
        .enable_piped(
            &rw(),
            api::EnablePipedRequest {
                piped_id: registered.id.clone(),
            },
        )
        .await
        .expect("enable");
    assert!(
        !env.stores
            .pipeds
            .get(P1, &registered.id)
            .await
            .expect("stored")
            .disabled
    );
    assert_code(
        env.api
            .disable_piped(
                &rw(),
                api::DisablePipedRequest {
                    piped_id: "nope".into(),
                },
            )
            .await,
        "NotFound",
        "Piped is not found",
    );
    assert_code(
        env.api
            .disable_piped(
                &foreign(),
                api::DisablePipedRequest {
                    piped_id: registered.id,
                },
            )
            .await,
        "PermissionDenied",
        "doesn't belong to your project",
    );
}

#[tokio::test]
async fn encrypt_with_the_pipeds_public_key() {
    let env = env().await;
    let private = hybrid::parse_private_key_pem(PRIVATE_PEM).expect("private key");
    let sealed = env
        .api
        .encrypt(
            &ro(),
            api::EncryptRequest {
                plaintext: "s3cr3t".into(),
                piped_id: "piped-1".into(),
                base64_encoding: false,
            },
        )
        .await
        .expect("encrypt")
        .ciphertext;
    assert_eq!(
        hybrid::decrypt(&private, &sealed).expect("decrypt"),
        b"s3cr3t"
    );
    let sealed = env
        .api
        .encrypt(
            &ro(),
            api::EncryptRequest {
                plaintext: "s3cr3t".into(),
                piped_id: "piped-1".into(),
                base64_encoding: true,
            },
        )
        .await
        .expect("encrypt")
        .ciphertext;
    assert_eq!(
        hybrid::decrypt(&private, &sealed).expect("decrypt"),
        b"czNjcjN0"
    );

    // Pipeds without a usable public key.
    let mut no_key = piped(P1, "no-key");
    no_key.secret_encryption = None;
    let mut kms = piped(P1, "kms");
    kms.secret_encryption = Some(model::piped::SecretEncryption {
        r#type: "GCP_KMS".into(),
        ..Default::default()
    });
    let mut bad_pem = piped(P1, "bad-pem");
    bad_pem.secret_encryption = Some(model::piped::SecretEncryption {
        r#type: "KEY_PAIR".into(),
        public_key: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n".into(),
        ..Default::default()
    });
    for p in [no_key, kms, bad_pem] {
        env.stores.pipeds.create(p).await.expect("piped");
    }
    let enc = |piped_id: &str| api::EncryptRequest {
        plaintext: "x".into(),
        piped_id: piped_id.into(),
        base64_encoding: false,
    };
    assert_code(
        env.api.encrypt(&ro(), enc("no-key")).await,
        "FailedPrecondition",
        "does not contain a public key",
    );
    assert_code(
        env.api.encrypt(&ro(), enc("kms")).await,
        "FailedPrecondition",
        "valid encryption type",
    );
    assert_code(
        env.api.encrypt(&ro(), enc("bad-pem")).await,
        "InvalidArgument",
        "Invalid public key",
    );
    assert_code(
        env.api.encrypt(&foreign(), enc("piped-1")).await,
        "InvalidArgument",
        "does not belong to your project",
    );
    assert_code(
        env.api.encrypt(&ro(), enc("nope")).await,
        "NotFound",
        "Piped is not found",
    );
}

#[tokio::test]
async fn key_use_is_recorded_at_most_once_per_interval() {
    let env = env().await;
    let stored_key = model::ApiKey {
        id: "key-rw".into(),
        name: "ci".into(),
        key_hash: "hash".into(),
        project_id: P1.into(),
        role: Role::ReadWrite as i32,
        creator: "test".into(),
        ..Default::default()
    };
    env.stores.api_keys.create(stored_key).await.expect("key");
    env.api.record_key_use(&rw()).await;
    let first = env.stores.api_keys.get(P1, "key-rw").await.expect("key");
    assert!(first.last_used_at > 0);
    // Within the interval nothing is written (the version would move).
    env.stores
        .api_keys
        .update(P1, "key-rw", |k| {
            k.last_used_at = 1;
            Ok(())
        })
        .await
        .expect("reset");
    env.api.record_key_use(&rw()).await;
    assert_eq!(
        env.stores
            .api_keys
            .get(P1, "key-rw")
            .await
            .expect("key")
            .last_used_at,
        1
    );

    // With a zero interval every use is written; an unknown key is only logged.
    let eager = ApiApi::new(env.stores.clone(), BASE_URL).with_key_use_interval(Duration::ZERO);
    eager.record_key_use(&rw()).await;
    assert!(
        env.stores
            .api_keys
            .get(P1, "key-rw")
            .await
            .expect("key")
            .last_used_at
            > 1
    );
    eager
        .record_key_use(&key(P1, "unknown", Role::ReadOnly))
        .await;
}
