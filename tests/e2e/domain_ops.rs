//! One domain operation per shared operation (issue 30): every operation that more than
//! one entry point offers is driven through each of them (the `wisp` CLI, APIService as
//! pipectl calls it over gRPC with an API key, WebService as the console calls it over
//! gRPC-web with a session, PipedService where it applies, `wisp simulate` where it
//! registers its fleet), and what each leaves is read back from the stores the server
//! writes, opened by this process beside it: the same record and the same refusal,
//! whichever way in.

use std::collections::BTreeSet;

use tonic::Code;
use wisp_proto::apiservice as api;
use wisp_proto::model;
use wisp_proto::pipedservice as ps;
use wisp_proto::webservice as web;
use wisp_store::stores::Stores;

use crate::support::{self, CliOutput, Piped, QUICKSTART, Via, Wisp, fixtures, ok};

/// The stores of `wisp`'s data directory, opened as the admin CLI opens them (a second
/// process on the same stores as the server).
async fn stores(wisp: &Wisp) -> Stores {
    let sources = wisp_app::Sources {
        config: wisp_app::ConfigSource::Defaults,
        key: wisp_app::KeySource::None,
        data_dir: wisp.data_dir().to_path_buf(),
        in_process_cache: false,
    };
    wisp_app::App::open(&sources)
        .await
        .expect("open the stores")
        .stores
}

/// pipectl with a READ_WRITE key named `ci` made by `wisp api-key add`, its key id, and
/// the console (gRPC-web) logged in as the static admin `hello-pipecd`.
async fn clients(wisp: &Wisp) -> (support::api::ApiClient, String, support::web::WebClient) {
    let made = wisp.cli_json(&[
        "api-key",
        "add",
        "--project",
        QUICKSTART,
        "--name",
        "ci",
        "--role",
        "READ_WRITE",
    ]);
    let key_id = made["id"].as_str().expect("id").to_string();
    let auth = format!("API-KEY {}", made["key"].as_str().expect("key"));
    let pipectl = wisp.api_client(Via::Grpc, Some(&auth)).await;
    let token = wisp.admin_session().await;
    let console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    (pipectl, key_id, console)
}

/// A refusal as a user sees it: the gRPC code (none from the CLI, which exits with 2)
/// and the message with the object's id replaced by `<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    code: Option<Code>,
    message: String,
}

fn refused_grpc<T: std::fmt::Debug>(
    result: Result<tonic::Response<T>, tonic::Status>,
    id: &str,
) -> Refusal {
    match result {
        Ok(resp) => panic!("expected a refusal, got {resp:?}"),
        Err(status) => Refusal {
            code: Some(status.code()),
            message: status.message().replace(id, "<id>"),
        },
    }
}

fn refused_cli(out: CliOutput, id: &str) -> Refusal {
    assert_eq!(out.code, 2, "a refusal exits with 2: {out:?}");
    let line = out.stderr.trim();
    let message = line
        .strip_prefix("error: ")
        .unwrap_or_else(|| panic!("one error line: {out:?}"));
    Refusal {
        code: None,
        message: message.replace(id, "<id>"),
    }
}

/// What an operation wrote, without what differs by nature between two records (id,
/// times).
fn app_shape(mut app: model::Application) -> model::Application {
    app.id.clear();
    app.created_at = 0;
    app.updated_at = 0;
    app
}

async fn stored_app(stores: &Stores, id: &str) -> model::Application {
    stores
        .applications
        .get(QUICKSTART, id)
        .await
        .unwrap_or_else(|e| panic!("application {id} stored: {e}"))
}

async fn stored_apps(stores: &Stores, ids: &[&String]) -> Vec<model::Application> {
    let mut apps = Vec::new();
    for id in ids {
        apps.push(stored_app(stores, id).await);
    }
    apps
}

/// All of `records` are the same once `shape` drops what differs by nature.
#[track_caller]
fn assert_same<T: Clone + PartialEq + std::fmt::Debug>(records: &[T], shape: impl Fn(T) -> T) {
    let first = shape(records[0].clone());
    for (i, r) in records.iter().enumerate().skip(1) {
        assert_eq!(shape(r.clone()), first, "record {i} differs from record 0");
    }
}

fn ids<'a>(it: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    it.into_iter().map(str::to_string).collect()
}

/// The ids `wisp <what> list --project quickstart --json` prints.
fn cli_listed(wisp: &Wisp, what: &str) -> BTreeSet<String> {
    let listed = wisp.cli_json(&[what, "list", "--project", QUICKSTART]);
    listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|a| a["id"].as_str().expect("id").to_string())
        .collect()
}

/// The enabled, undeleted applications each entry point lists: (CLI, pipectl, console,
/// the piped).
async fn listed_apps(
    wisp: &Wisp,
    pipectl: &mut support::api::ApiClient,
    console: &mut support::web::WebClient,
    piped: &mut support::Client,
) -> [BTreeSet<String>; 4] {
    let by_cli = wisp.cli_json(&["application", "list", "--project", QUICKSTART]);
    let by_cli = by_cli
        .as_array()
        .expect("a list")
        .iter()
        .filter(|a| a["disabled"] == false)
        .map(|a| a["id"].as_str().expect("id").to_string())
        .collect();
    let by_api = ok(pipectl
        .list_applications(api::ListApplicationsRequest::default())
        .await)
    .applications;
    let by_web = ok(console
        .list_applications(web::ListApplicationsRequest {
            options: Some(web::list_applications_request::Options {
                enabled: Some(true),
                ..Default::default()
            }),
        })
        .await)
    .applications;
    let by_piped = ok(piped
        .list_applications(ps::ListApplicationsRequest {})
        .await)
    .applications;
    [
        by_cli,
        ids(by_api.iter().map(|a| a.id.as_str())),
        ids(by_web.iter().map(|a| a.id.as_str())),
        ids(by_piped.iter().map(|a| a.id.as_str())),
    ]
}

#[track_caller]
fn assert_all_list(listed: &[BTreeSet<String>; 4], expected: &BTreeSet<String>) {
    for (who, got) in ["wisp", "pipectl", "console", "piped"].iter().zip(listed) {
        assert_eq!(got, expected, "{who} lists");
    }
}

/// A piped registered by the CLI that reported its repository.
async fn reporting_piped(wisp: &Wisp) -> (Piped, support::Client) {
    let piped = wisp.add_piped(QUICKSTART, "apps");
    let mut client = wisp.piped_client(Via::Grpc, &piped).await;
    support::api::report_meta(&mut client).await;
    (piped, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applications_leave_one_record_and_one_refusal_whichever_way_in() {
    let wisp = Wisp::start();
    let stores = stores(&wisp).await;
    let (mut pipectl, key_id, mut console) = clients(&wisp).await;
    let (piped, mut piped_client) = reporting_piped(&wisp).await;
    let labels = fixtures::string_map(&[("env", "prod")]);

    // Add: the same application three ways.
    let by_cli = wisp.add_app(&piped, "demo", &[("env", "prod")]);
    let by_api = ok(pipectl
        .add_application(api::AddApplicationRequest {
            name: "demo".into(),
            piped_id: piped.id.clone(),
            git_path: Some(fixtures::git_path("demo")),
            labels: labels.clone(),
            ..Default::default()
        })
        .await)
    .application_id;
    let by_web = ok(console
        .add_application(web::AddApplicationRequest {
            name: "demo".into(),
            piped_id: piped.id.clone(),
            git_path: Some(fixtures::git_path("demo")),
            labels: labels.clone(),
            ..Default::default()
        })
        .await)
    .application_id;
    let all = [&by_cli, &by_api, &by_web];
    let added = stored_apps(&stores, &all).await;
    assert_same(&added, app_shape);
    assert!(
        added[0]
            .git_path
            .as_ref()
            .is_some_and(|g| g.url.ends_with("/tree/main/apps/demo")),
        "{:?}",
        added[0]
    );

    // Get: both services answer the stored record.
    for id in all {
        let stored = stored_app(&stores, id).await;
        let got_api = ok(pipectl
            .get_application(api::GetApplicationRequest {
                application_id: id.clone(),
            })
            .await)
        .application;
        let got_web = ok(console
            .get_application(web::GetApplicationRequest {
                application_id: id.clone(),
            })
            .await)
        .application;
        assert_eq!(got_api.as_ref(), Some(&stored), "pipectl gets {id}");
        assert_eq!(got_web.as_ref(), Some(&stored), "the console gets {id}");
    }

    // List: everyone lists the three.
    let three = ids(all.iter().map(|s| s.as_str()));
    assert_all_list(
        &listed_apps(&wisp, &mut pipectl, &mut console, &mut piped_client).await,
        &three,
    );

    // Update (pipectl and the console): the same change leaves the same record.
    ok(pipectl
        .update_application(api::UpdateApplicationRequest {
            application_id: by_api.clone(),
            piped_id: piped.id.clone(),
            platform_provider: "kubernetes-default".into(),
            git_path: Some(model::ApplicationGitPath {
                config_filename: "other.pipecd.yaml".into(),
                ..fixtures::git_path("demo")
            }),
        })
        .await);
    ok(console
        .update_application(web::UpdateApplicationRequest {
            application_id: by_web.clone(),
            name: "demo".into(),
            piped_id: piped.id.clone(),
            kind: model::ApplicationKind::Kubernetes as i32,
            platform_provider: "kubernetes-default".into(),
            config_filename: "other.pipecd.yaml".into(),
            ..Default::default()
        })
        .await);
    let updated = stored_apps(&stores, &[&by_api, &by_web]).await;
    assert_same(&updated, app_shape);
    assert_eq!(updated[0].platform_provider, "kubernetes-default");
    assert_eq!(updated[0].cloud_provider, "kubernetes-default");
    assert_eq!(
        updated[0]
            .git_path
            .as_ref()
            .map(|g| g.config_filename.as_str()),
        Some("other.pipecd.yaml")
    );

    // Disable, then enable: the same flag three ways; the piped stops and starts seeing it.
    let q = QUICKSTART;
    wisp.cli_ok(&["application", "disable", "--project", q, &by_cli]);
    ok(pipectl
        .disable_application(api::DisableApplicationRequest {
            application_id: by_api.clone(),
        })
        .await);
    ok(console
        .disable_application(web::DisableApplicationRequest {
            application_id: by_web.clone(),
        })
        .await);
    for app in stored_apps(&stores, &all).await {
        assert!(app.disabled && !app.deleted, "{app:?}");
    }
    assert_all_list(
        &listed_apps(&wisp, &mut pipectl, &mut console, &mut piped_client).await,
        &BTreeSet::new(),
    );
    wisp.cli_ok(&["application", "enable", "--project", q, &by_cli]);
    ok(pipectl
        .enable_application(api::EnableApplicationRequest {
            application_id: by_api.clone(),
        })
        .await);
    ok(console
        .enable_application(web::EnableApplicationRequest {
            application_id: by_web.clone(),
        })
        .await);
    for app in stored_apps(&stores, &all).await {
        assert!(!app.disabled, "{app:?}");
    }
    assert_all_list(
        &listed_apps(&wisp, &mut pipectl, &mut console, &mut piped_client).await,
        &three,
    );

    // Sync (pipectl and the console): the same command for the piped, and both read it
    // back as stored.
    let by_api_cmd = ok(pipectl
        .sync_application(api::SyncApplicationRequest {
            application_id: by_cli.clone(),
        })
        .await)
    .command_id;
    let by_web_cmd = ok(console
        .sync_application(web::SyncApplicationRequest {
            application_id: by_cli.clone(),
            sync_strategy: model::SyncStrategy::Auto as i32,
        })
        .await)
    .command_id;
    let mut commands = Vec::new();
    for id in [&by_api_cmd, &by_web_cmd] {
        let stored = stores
            .commands
            .get(QUICKSTART, id)
            .await
            .expect("command stored");
        let got_api = ok(pipectl
            .get_command(api::GetCommandRequest {
                command_id: id.clone(),
            })
            .await)
        .command;
        let got_web = ok(console
            .get_command(web::GetCommandRequest {
                command_id: id.clone(),
            })
            .await)
        .command;
        assert_eq!(got_api.as_ref(), Some(&stored));
        assert_eq!(got_web.as_ref(), Some(&stored));
        commands.push(stored);
    }
    assert_eq!(
        commands[0].commander, key_id,
        "pipectl's commander is the key"
    );
    assert_eq!(commands[1].commander, "hello-pipecd");
    assert_same(&commands, |mut c| {
        c.id.clear();
        c.commander.clear();
        c.created_at = 0;
        c.updated_at = 0;
        c
    });
    assert_eq!(commands[0].piped_id, piped.id);
    assert_eq!(
        commands[0]
            .sync_application
            .as_ref()
            .map(|s| s.sync_strategy),
        Some(model::SyncStrategy::Auto as i32)
    );

    // Delete: soft, stamped with the time, three ways.
    let before = fixtures::now();
    wisp.cli_ok(&["application", "delete", "--project", q, &by_cli]);
    ok(pipectl
        .delete_application(api::DeleteApplicationRequest {
            application_id: by_api.clone(),
        })
        .await);
    ok(console
        .delete_application(web::DeleteApplicationRequest {
            application_id: by_web.clone(),
        })
        .await);
    let after = fixtures::now();
    let deleted = stored_apps(&stores, &all).await;
    for app in &deleted {
        assert!(app.deleted && app.disabled, "{app:?}");
        assert!(
            (before..=after).contains(&app.deleted_at),
            "deleted_at {} in [{before}, {after}]",
            app.deleted_at
        );
    }
    // (by_api and by_web were updated alike; by_cli was not.)
    assert_same(&deleted[1..], |a| model::Application {
        deleted_at: 0,
        ..app_shape(a)
    });
    assert_all_list(
        &listed_apps(&wisp, &mut pipectl, &mut console, &mut piped_client).await,
        &BTreeSet::new(),
    );

    // A deleted application cannot be changed: the same code and message everywhere,
    // and nothing changes.
    let id = by_web.clone();
    let frozen = stored_app(&stores, &id).await;
    let cli = |verb: &str| refused_cli(wisp.cli(&["application", verb, "--project", q, &id]), &id);
    let mut refusals: Vec<(&str, &str, Refusal)> = Vec::new();
    refusals.push((
        "update",
        "pipectl",
        refused_grpc(
            pipectl
                .update_application(api::UpdateApplicationRequest {
                    application_id: id.clone(),
                    piped_id: piped.id.clone(),
                    git_path: Some(fixtures::git_path("demo")),
                    ..Default::default()
                })
                .await,
            &id,
        ),
    ));
    refusals.push((
        "update",
        "console",
        refused_grpc(
            console
                .update_application(web::UpdateApplicationRequest {
                    application_id: id.clone(),
                    name: "demo".into(),
                    piped_id: piped.id.clone(),
                    ..Default::default()
                })
                .await,
            &id,
        ),
    ));
    refusals.push((
        "update",
        "piped",
        refused_grpc(
            piped_client
                .report_application_sync_state(ps::ReportApplicationSyncStateRequest {
                    application_id: id.clone(),
                    state: Some(model::ApplicationSyncState {
                        status: model::ApplicationSyncStatus::Synced as i32,
                        timestamp: fixtures::now(),
                        ..Default::default()
                    }),
                })
                .await,
            &id,
        ),
    ));
    for verb in ["enable", "disable", "delete"] {
        refusals.push((verb, "wisp", cli(verb)));
    }
    let rid = || id.clone();
    refusals.push((
        "enable",
        "pipectl",
        refused_grpc(
            pipectl
                .enable_application(api::EnableApplicationRequest {
                    application_id: rid(),
                })
                .await,
            &id,
        ),
    ));
    refusals.push((
        "disable",
        "pipectl",
        refused_grpc(
            pipectl
                .disable_application(api::DisableApplicationRequest {
                    application_id: rid(),
                })
                .await,
            &id,
        ),
    ));
    refusals.push((
        "delete",
        "pipectl",
        refused_grpc(
            pipectl
                .delete_application(api::DeleteApplicationRequest {
                    application_id: rid(),
                })
                .await,
            &id,
        ),
    ));
    refusals.push((
        "enable",
        "console",
        refused_grpc(
            console
                .enable_application(web::EnableApplicationRequest {
                    application_id: rid(),
                })
                .await,
            &id,
        ),
    ));
    refusals.push((
        "disable",
        "console",
        refused_grpc(
            console
                .disable_application(web::DisableApplicationRequest {
                    application_id: rid(),
                })
                .await,
            &id,
        ),
    ));
    refusals.push((
        "delete",
        "console",
        refused_grpc(
            console
                .delete_application(web::DeleteApplicationRequest {
                    application_id: rid(),
                })
                .await,
            &id,
        ),
    ));
    for (verb, who, refusal) in &refusals {
        let expected = format!(
            "Invalid argument to {verb} application <id>: cannot {verb} a deleted application"
        );
        assert_eq!(refusal.message, expected, "{who} {verb}");
        if *who != "wisp" {
            assert_eq!(refusal.code, Some(Code::InvalidArgument), "{who} {verb}");
        }
    }
    assert_eq!(stored_app(&stores, &id).await, frozen, "nothing changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeds_and_api_keys_leave_one_record_whichever_way_in() {
    let wisp = Wisp::start();
    let stores = stores(&wisp).await;
    let (mut pipectl, _, mut console) = clients(&wisp).await;
    let q = QUICKSTART;
    let stored_piped = |id: String| {
        let stores = &stores;
        async move {
            stores
                .pipeds
                .get(QUICKSTART, &id)
                .await
                .unwrap_or_else(|e| panic!("piped {id} stored: {e}"))
        }
    };
    let piped_shape = |mut p: model::Piped| {
        p.id.clear();
        p.created_at = 0;
        p.updated_at = 0;
        for k in &mut p.keys {
            k.hash.clear();
            k.creator.clear();
            k.created_at = 0;
        }
        p
    };

    // Register: the same piped three ways, each with one key of its creator.
    let by_cli = wisp.cli_json(&[
        "piped",
        "add",
        "--project",
        q,
        "--name",
        "dev",
        "--desc",
        "d",
    ]);
    let by_cli = by_cli["id"].as_str().expect("id").to_string();
    let by_api = ok(pipectl
        .register_piped(api::RegisterPipedRequest {
            name: "dev".into(),
            desc: "d".into(),
        })
        .await)
    .id;
    let by_web = ok(console
        .register_piped(web::RegisterPipedRequest {
            name: "dev".into(),
            desc: "d".into(),
        })
        .await)
    .id;
    let all = [by_cli.clone(), by_api.clone(), by_web.clone()];
    let mut registered = Vec::new();
    for id in &all {
        registered.push(stored_piped(id.clone()).await);
    }
    assert_same(&registered, piped_shape);
    let creators: Vec<&str> = registered
        .iter()
        .map(|p| {
            assert_eq!(p.keys.len(), 1, "{p:?}");
            assert!(
                p.keys[0].hash.starts_with('$'),
                "only a hash is kept: {p:?}"
            );
            p.keys[0].creator.as_str()
        })
        .collect();
    assert_eq!(creators, ["wisp-cli", "ci", "hello-pipecd"]);

    // Get and list: the stored piped, hashes redacted, whichever way.
    for id in &all {
        let mut stored = stored_piped(id.clone()).await;
        for k in &mut stored.keys {
            k.hash = "redacted".into();
        }
        let got_api = ok(pipectl
            .get_piped(api::GetPipedRequest {
                piped_id: id.clone(),
            })
            .await)
        .piped;
        let got_web = ok(console
            .get_piped(web::GetPipedRequest {
                piped_id: id.clone(),
            })
            .await)
        .piped;
        assert_eq!(got_api.as_ref(), Some(&stored));
        assert_eq!(got_web.as_ref(), Some(&stored));
    }
    let by_web_list = ok(console.list_pipeds(web::ListPipedsRequest::default()).await).pipeds;
    assert_eq!(
        cli_listed(&wisp, "piped"),
        ids(by_web_list.iter().map(|p| p.id.as_str()))
    );

    // Sealing a secret for a piped that published no key is refused alike.
    let seal_api = refused_grpc(
        pipectl
            .encrypt(api::EncryptRequest {
                plaintext: "s".into(),
                piped_id: by_cli.clone(),
                base64_encoding: false,
            })
            .await,
        &by_cli,
    );
    let seal_web = refused_grpc(
        console
            .generate_application_sealed_secret(web::GenerateApplicationSealedSecretRequest {
                piped_id: by_cli.clone(),
                data: "s".into(),
                base64_encoding: false,
            })
            .await,
        &by_cli,
    );
    assert_eq!(seal_api, seal_web);
    assert_eq!(
        seal_api.code,
        Some(Code::FailedPrecondition),
        "{seal_api:?}"
    );

    // Update (pipectl and the console); a blank name is refused alike.
    ok(pipectl
        .update_piped(api::UpdatePipedRequest {
            piped_id: by_api.clone(),
            name: "dev-2".into(),
            desc: "moved".into(),
        })
        .await);
    ok(console
        .update_piped(web::UpdatePipedRequest {
            piped_id: by_web.clone(),
            name: "dev-2".into(),
            desc: "moved".into(),
        })
        .await);
    let updated = [
        stored_piped(by_api.clone()).await,
        stored_piped(by_web.clone()).await,
    ];
    assert_same(&updated, piped_shape);
    assert_eq!(
        (updated[0].name.as_str(), updated[0].desc.as_str()),
        ("dev-2", "moved")
    );
    let blank_api = refused_grpc(
        pipectl
            .update_piped(api::UpdatePipedRequest {
                piped_id: by_api.clone(),
                name: " ".into(),
                desc: String::new(),
            })
            .await,
        &by_api,
    );
    let blank_web = refused_grpc(
        console
            .update_piped(web::UpdatePipedRequest {
                piped_id: by_web.clone(),
                name: " ".into(),
                desc: String::new(),
            })
            .await,
        &by_web,
    );
    assert_eq!(blank_api, blank_web);
    assert_eq!(blank_api.code, Some(Code::InvalidArgument));

    // Disable and enable, three ways.
    wisp.cli_ok(&["piped", "disable", "--project", q, &by_cli]);
    ok(pipectl
        .disable_piped(api::DisablePipedRequest {
            piped_id: by_api.clone(),
        })
        .await);
    ok(console
        .disable_piped(web::DisablePipedRequest {
            piped_id: by_web.clone(),
        })
        .await);
    for id in &all {
        assert!(stored_piped(id.clone()).await.disabled, "{id}");
    }
    wisp.cli_ok(&["piped", "enable", "--project", q, &by_cli]);
    ok(pipectl
        .enable_piped(api::EnablePipedRequest {
            piped_id: by_api.clone(),
        })
        .await);
    ok(console
        .enable_piped(web::EnablePipedRequest {
            piped_id: by_web.clone(),
        })
        .await);
    for id in &all {
        assert!(!stored_piped(id.clone()).await.disabled, "{id}");
    }

    // Rotate a key and end the rotation (the CLI and the console).
    wisp.cli_ok(&["piped", "rotate-key", "--project", q, &by_cli]);
    ok(console
        .recreate_piped_key(web::RecreatePipedKeyRequest { id: by_web.clone() })
        .await);
    for id in [&by_cli, &by_web] {
        assert_eq!(stored_piped(id.clone()).await.keys.len(), 2, "{id}");
    }
    wisp.cli_ok(&["piped", "delete-old-keys", "--project", q, &by_cli]);
    ok(console
        .delete_old_piped_keys(web::DeleteOldPipedKeysRequest {
            piped_id: by_web.clone(),
        })
        .await);
    let rotated = [
        stored_piped(by_cli.clone()).await,
        stored_piped(by_web.clone()).await,
    ];
    for p in &rotated {
        assert_eq!(p.keys.len(), 1, "{p:?}");
    }
    assert_ne!(
        rotated[0].keys[0].hash, registered[0].keys[0].hash,
        "the new key stays"
    );

    // API keys: generated (the CLI and the console), listed and disabled alike.
    let cli_key = wisp.cli_json(&[
        "api-key",
        "add",
        "--project",
        q,
        "--name",
        "deploy",
        "--role",
        "READ_ONLY",
    ]);
    let cli_key = cli_key["id"].as_str().expect("id").to_string();
    let web_key = ok(console
        .generate_api_key(web::GenerateApiKeyRequest {
            name: "deploy".into(),
            role: model::api_key::Role::ReadOnly as i32,
        })
        .await)
    .key;
    let web_key = web_key.split('.').next().expect("id.secret").to_string();
    let key_shape = |mut k: model::ApiKey| {
        k.id.clear();
        k.key_hash.clear();
        k.creator.clear();
        k.created_at = 0;
        k.updated_at = 0;
        k
    };
    let stored_key = |id: String| {
        let stores = &stores;
        async move {
            stores
                .api_keys
                .get(QUICKSTART, &id)
                .await
                .unwrap_or_else(|e| panic!("API key {id} stored: {e}"))
        }
    };
    let keys = [
        stored_key(cli_key.clone()).await,
        stored_key(web_key.clone()).await,
    ];
    assert_same(&keys, key_shape);
    let listed = ok(console
        .list_api_keys(web::ListApiKeysRequest::default())
        .await)
    .keys;
    assert_eq!(
        cli_listed(&wisp, "api-key"),
        ids(listed.iter().map(|k| k.id.as_str()))
    );
    wisp.cli_ok(&["api-key", "disable", "--project", q, &cli_key]);
    ok(console
        .disable_api_key(web::DisableApiKeyRequest {
            id: web_key.clone(),
        })
        .await);
    let keys = [stored_key(cli_key).await, stored_key(web_key).await];
    assert!(keys.iter().all(|k| k.disabled), "{keys:?}");
    assert_same(&keys, key_shape);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_answer_one_query_through_pipectl_and_the_console() {
    let wisp = Wisp::start();
    let stores = stores(&wisp).await;
    let (mut pipectl, _, mut console) = clients(&wisp).await;
    let (piped, mut piped_client) = reporting_piped(&wisp).await;
    let first = wisp.add_app(&piped, "first", &[]);
    let second = wisp.add_app(&piped, "second", &[]);
    for (id, app, name) in [
        ("dep-1", &first, "first"),
        ("dep-2", &second, "second"),
        ("dep-3", &first, "first"),
    ] {
        ok(piped_client
            .create_deployment(ps::CreateDeploymentRequest {
                deployment: Some(fixtures::deployment(&piped, id, app, name)),
            })
            .await);
    }

    for only in [None, Some(&first)] {
        let application_ids: Vec<String> = only.into_iter().cloned().collect();
        let by_api = ok(pipectl
            .list_deployments(api::ListDeploymentsRequest {
                application_ids: application_ids.clone(),
                ..Default::default()
            })
            .await)
        .deployments;
        let by_web = ok(console
            .list_deployments(web::ListDeploymentsRequest {
                options: Some(web::list_deployments_request::Options {
                    application_ids,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await)
        .deployments;
        assert_eq!(by_api, by_web, "the same page, in the same order");
        let expected = if only.is_some() { 2 } else { 3 };
        assert_eq!(by_api.len(), expected, "{by_api:?}");
    }

    for id in ["dep-1", "dep-2", "dep-3"] {
        let stored = stores
            .deployments
            .get(QUICKSTART, id)
            .await
            .expect("deployment stored");
        let got_api = ok(pipectl
            .get_deployment(api::GetDeploymentRequest {
                deployment_id: id.into(),
            })
            .await)
        .deployment;
        let got_web = ok(console
            .get_deployment(web::GetDeploymentRequest {
                deployment_id: id.into(),
            })
            .await)
        .deployment;
        assert_eq!(got_api.as_ref(), Some(&stored));
        assert_eq!(got_web.as_ref(), Some(&stored));
    }
}

/// `wisp simulate` registers its pipeds and applications in the store before it drives
/// the server: the same records `wisp piped add` (and pipectl, and the console) and
/// `wisp application add` make. Its piped then starts (ReportPipedMeta, the first sync
/// state) as any piped does, so each other piped reports the same metadata and the
/// application's sync state is left out of the comparison.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulators_fleet_is_registered_as_the_cli_and_the_services_register() {
    let wisp = Wisp::start();
    let stores = stores(&wisp).await;
    let (mut pipectl, _, mut console) = clients(&wisp).await;
    let q = QUICKSTART;
    let target = format!("http://{}", wisp.addr());
    let out = wisp.cli(&[
        "simulate",
        "--target",
        &target,
        "--pipeds",
        "1",
        "--apps-per-piped",
        "1",
        "--duration",
        "2s",
        "--deploy-rate",
        "0",
        "--seed",
        "7",
        "--json",
    ]);
    assert_eq!(out.code, 0, "wisp simulate failed: {out:?}");
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {:?}", out.stdout));
    assert_eq!(report["errors"], 0, "{report:#}");
    let sim_piped_id = report["per_piped"][0]["id"]
        .as_str()
        .expect("the piped's id")
        .to_string();
    let sim_piped = stores
        .pipeds
        .get(q, &sim_piped_id)
        .await
        .expect("the simulated piped stored");
    let sim_app_id = wisp
        .cli_json(&["application", "list", "--project", q])
        .as_array()
        .expect("a list")
        .iter()
        .filter(|a| a["piped_id"] == sim_piped_id.as_str())
        .map(|a| a["id"].as_str().expect("id").to_string())
        .next()
        .expect("the simulated application");
    let sim_app = stored_app(&stores, &sim_app_id).await;

    // The same piped, registered the other ways; each registered piped starts and
    // reports what the simulated one reported.
    let name = sim_piped.name.as_str();
    let desc = sim_piped.desc.as_str();
    let by_cli = wisp.cli_json(&[
        "piped",
        "add",
        "--project",
        q,
        "--name",
        name,
        "--desc",
        desc,
    ]);
    let by_cli = Piped {
        project: q.to_string(),
        id: by_cli["id"].as_str().expect("id").to_string(),
        key: by_cli["key"].as_str().expect("key").to_string(),
    };
    let by_api = ok(pipectl
        .register_piped(api::RegisterPipedRequest {
            name: name.into(),
            desc: desc.into(),
        })
        .await);
    let by_web = ok(console
        .register_piped(web::RegisterPipedRequest {
            name: name.into(),
            desc: desc.into(),
        })
        .await);
    let others = [
        by_cli.clone(),
        Piped {
            project: q.to_string(),
            id: by_api.id,
            key: by_api.key,
        },
        Piped {
            project: q.to_string(),
            id: by_web.id,
            key: by_web.key,
        },
    ];

    // The application, as `wisp application add` registers it before the piped starts
    // (pipectl and the console need a piped that reported its repositories).
    let app_name = sim_app.name.clone();
    let git = sim_app.git_path.clone().unwrap_or_default();
    let repo_id = git.repo.as_ref().map(|r| r.id.clone()).unwrap_or_default();
    let labels: Vec<String> = sim_app
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut args = vec![
        "application",
        "add",
        "--project",
        q,
        "--piped",
        &by_cli.id,
        "--name",
        &app_name,
        "--repo-id",
        &repo_id,
        "--path",
        &git.path,
        "--config-file",
        &git.config_filename,
        "--desc",
        &sim_app.description,
    ];
    for label in &labels {
        args.extend(["--label", label.as_str()]);
    }
    let cli_app_id = wisp.cli_json(&args)["id"].as_str().expect("id").to_string();

    let meta = ps::ReportPipedMetaRequest {
        version: sim_piped.version.clone(),
        platform_providers: sim_piped.platform_providers.clone(),
        plugins: sim_piped.plugins.clone(),
        repositories: sim_piped.repositories.clone(),
        secret_encryption: sim_piped.secret_encryption.clone(),
        config: sim_piped.config.clone(),
        ..Default::default()
    };
    for piped in &others {
        let mut client = wisp.piped_client(Via::Grpc, piped).await;
        ok(client.report_piped_meta(meta.clone()).await);
    }

    let piped_shape = |mut p: model::Piped| {
        p.id.clear();
        p.created_at = 0;
        p.updated_at = 0;
        p.started_at = 0;
        for k in &mut p.keys {
            k.hash.clear();
            k.creator.clear();
            k.created_at = 0;
        }
        p
    };
    let mut pipeds = vec![sim_piped];
    for piped in &others {
        pipeds.push(
            stores
                .pipeds
                .get(q, &piped.id)
                .await
                .unwrap_or_else(|e| panic!("piped {} stored: {e}", piped.id)),
        );
    }
    assert_same(&pipeds, piped_shape);
    let creators: Vec<&str> = pipeds
        .iter()
        .map(|p| {
            assert_eq!(p.keys.len(), 1, "{p:?}");
            p.keys[0].creator.as_str()
        })
        .collect();
    assert_eq!(
        creators,
        ["wisp-simulate", "wisp-cli", "ci", "hello-pipecd"]
    );

    let apps = stored_apps(&stores, &[&sim_app_id, &cli_app_id]).await;
    assert_same(&apps, |mut a| {
        a.piped_id.clear();
        a.sync_state = None;
        app_shape(a)
    });
    assert!(
        apps[0].labels.contains_key("simulated-by"),
        "the comparison covers the labels: {:?}",
        apps[0]
    );
}
