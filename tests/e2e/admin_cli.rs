//! The admin CLI as scripts use it: `--json` output, and mistakes (unknown project,
//! duplicate names, bad labels) reported in one line with exit status 2. And the rules of
//! the domain operations the CLI shares with APIService and WebService, driven through
//! all three.

use crate::support;

use tonic::Code;
use wisp_proto::apiservice as api;
use wisp_proto::webservice as web;

use support::{
    CliOutput, Piped, QUICKSTART, Server, Via, Wisp, assert_status, empty_data_dir, ok, run_cli,
};

/// A user mistake: exit status 2, nothing on stdout, one `error: ...` line on stderr that
/// mentions `needle`.
#[track_caller]
fn assert_usage_error(out: &CliOutput, needle: &str) {
    assert_eq!(out.code, 2, "expected exit status 2: {out:?}");
    assert!(out.stdout.is_empty(), "nothing on stdout: {out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {out:?}");
    assert!(lines[0].starts_with("error: "), "{out:?}");
    assert!(
        lines[0].contains(needle),
        "stderr mentions {needle:?}: {out:?}"
    );
}

fn app_add_args<'a>(project: &'a str, piped: &'a str, name: &'a str) -> Vec<&'a str> {
    vec![
        "application",
        "add",
        "--project",
        project,
        "--piped",
        piped,
        "--name",
        name,
        "--repo-id",
        "examples",
        "--path",
        "apps/demo",
        "--config-file",
        "app.pipecd.yaml",
    ]
}

/// `wisp project list --json` of a fresh data directory.
fn quickstart_listed() -> serde_json::Value {
    serde_json::json!([{
        "id": QUICKSTART,
        "desc": "Quickstart project",
        "source": "datastore",
        "staticAdmin": "hello-pipecd",
        "staticAdminDisabled": false,
        "allowStrayAsViewer": false,
    }])
}

#[test]
fn admin_commands_on_a_fresh_data_dir_see_the_quickstart_project() {
    // As `wisp serve` does: on the built-in defaults the quickstart project exists from
    // the first command on, server or not.
    let dir = empty_data_dir();
    let before = run_cli(dir.path(), &["project", "list", "--json"]);
    assert_eq!(before.code, 0, "{before:?}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&before.stdout).expect("JSON"),
        quickstart_listed(),
        "quickstart exists before any serve"
    );
    let added = run_cli(
        dir.path(),
        &["piped", "add", "--project", QUICKSTART, "--name", "first"],
    );
    assert_eq!(added.code, 0, "{added:?}");

    // A server on the same directory serves the same project (not a second one), with
    // the piped added before it started.
    let server = Server::start(dir.path());
    let listed = run_cli(dir.path(), &["project", "list", "--json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&listed.stdout).expect("JSON"),
        quickstart_listed()
    );
    let pipeds = run_cli(
        dir.path(),
        &["piped", "list", "--project", QUICKSTART, "--json"],
    );
    assert!(pipeds.stdout.contains("\"first\""), "{pipeds:?}");
    drop(server);
}

#[test]
fn unknown_project_is_a_usage_error() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "known");
    let cases: Vec<Vec<&str>> = vec![
        vec!["piped", "add", "--project", "nosuch", "--name", "p"],
        vec!["piped", "list", "--project", "nosuch"],
        vec!["piped", "disable", "--project", "nosuch", &piped.id],
        vec!["piped", "rotate-key", "--project", "nosuch", &piped.id],
        vec!["application", "list", "--project", "nosuch"],
        app_add_args("nosuch", &piped.id, "demo"),
    ];
    for args in cases {
        let out = wisp.cli(&args);
        assert_usage_error(&out, "nosuch");
    }
    // Nothing was created anywhere.
    let pipeds = wisp.cli_json(&["piped", "list", "--project", QUICKSTART]);
    assert_eq!(pipeds.as_array().map(Vec::len), Some(1));
    assert_eq!(pipeds[0]["disabled"], false);
    let apps = wisp.cli_json(&["application", "list", "--project", QUICKSTART]);
    assert_eq!(apps, serde_json::json!([]));
}

#[test]
fn unknown_piped_is_a_usage_error() {
    let wisp = Wisp::start();
    for args in [
        vec!["piped", "disable", "--project", QUICKSTART, "no-such-piped"],
        vec!["piped", "enable", "--project", QUICKSTART, "no-such-piped"],
        vec![
            "piped",
            "rotate-key",
            "--project",
            QUICKSTART,
            "no-such-piped",
        ],
        app_add_args(QUICKSTART, "no-such-piped", "demo"),
    ] {
        assert_usage_error(&wisp.cli(&args), "no-such-piped");
    }
}

#[test]
fn bad_labels_and_deploy_targets_are_usage_errors() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "labels");
    for (flag, value) in [
        ("--label", "nokey"),
        ("--label", "=value"),
        ("--label", "key="),
        ("--deploy-target", "kubernetes"),
        ("--deploy-target", "=local"),
    ] {
        let mut args = app_add_args(QUICKSTART, &piped.id, "labelled");
        args.extend([flag, value]);
        assert_usage_error(&wisp.cli(&args), value);
    }
    let apps = wisp.cli_json(&["application", "list", "--project", QUICKSTART]);
    assert_eq!(apps, serde_json::json!([]), "nothing was created");
}

#[test]
fn other_usage_errors() {
    let wisp = Wisp::start();
    assert_usage_error(&wisp.cli(&["project", "add", "bad id!"]), "bad id!");
    assert_usage_error(&wisp.cli(&["project", "add", QUICKSTART]), QUICKSTART);
    assert_usage_error(
        &wisp.cli(&["piped", "add", "--project", QUICKSTART, "--name", "  "]),
        "name",
    );
    // At most two keys per piped.
    let piped = wisp.add_piped(QUICKSTART, "keys");
    wisp.rotate_key(&piped);
    assert_usage_error(
        &wisp.cli(&["piped", "rotate-key", "--project", QUICKSTART, &piped.id]),
        "delete-old-keys",
    );
}

/// A failure that is not the user's mistake exits with status 1.
#[test]
fn unusable_data_dir_is_a_failure() {
    let dir = empty_data_dir();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").expect("create a file");
    let out = run_cli(&file.join("data"), &["project", "list"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.starts_with("error: "), "{out:?}");
}

#[test]
fn json_outputs_parse() {
    let wisp = Wisp::start();

    let project = wisp.cli_json(&["project", "add", "team-a", "--desc", "Team A"]);
    assert_eq!(project["id"], "team-a");
    assert!(!project["username"].as_str().unwrap_or_default().is_empty());
    assert!(!project["password"].as_str().unwrap_or_default().is_empty());

    let projects = wisp.cli_json(&["project", "list"]);
    let ids: Vec<&str> = projects
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(ids, vec![QUICKSTART, "team-a"]);

    let piped = wisp.add_piped("team-a", "builder");
    assert!(!piped.id.is_empty() && !piped.key.is_empty());
    let rotated = wisp.rotate_key(&piped);
    assert_ne!(rotated.key, piped.key);

    let app_id = wisp.add_app(&piped, "site", &[("env", "prod"), ("tier", "web")]);
    let mut args = app_add_args("team-a", &piped.id, "multi");
    args.extend(["--deploy-target", "kubernetes=cluster-1", "--json"]);
    let multi = wisp.cli_ok(&args);
    let multi: serde_json::Value = serde_json::from_str(multi.trim()).expect("JSON");
    assert!(multi["id"].is_string(), "{multi}");

    let pipeds = wisp.cli_json(&["piped", "list", "--project", "team-a"]);
    assert_eq!(pipeds[0]["id"], piped.id.as_str());
    assert_eq!(pipeds[0]["name"], "builder");
    assert_eq!(pipeds[0]["keys"], 2);
    assert_eq!(pipeds[0]["disabled"], false);

    wisp.cli_ok(&["piped", "disable", "--project", "team-a", &piped.id]);
    let pipeds = wisp.cli_json(&["piped", "list", "--project", "team-a"]);
    assert_eq!(pipeds[0]["disabled"], true);

    let apps = wisp.cli_json(&["application", "list", "--project", "team-a"]);
    let site = apps
        .as_array()
        .expect("a list")
        .iter()
        .find(|a| a["id"] == app_id.as_str())
        .expect("the application is listed");
    assert_eq!(site["name"], "site");
    assert_eq!(site["piped_id"], piped.id.as_str());
    assert_eq!(site["repo_id"], "examples");
    assert_eq!(site["path"], "apps/site");
    assert_eq!(site["config_filename"], "app.pipecd.yaml");
    assert_eq!(
        site["labels"],
        serde_json::json!({"env": "prod", "tier": "web"})
    );
    assert_eq!(apps.as_array().map(Vec::len), Some(2));
}

/// Whether `piped` presenting `key` is let in.
async fn authenticates(wisp: &Wisp, piped: &Piped, key: &str) -> bool {
    let piped = Piped {
        key: key.to_string(),
        ..piped.clone()
    };
    let mut client = wisp.piped_client(Via::Grpc, &piped).await;
    match client
        .list_unhandled_commands(wisp_proto::pipedservice::ListUnhandledCommandsRequest {})
        .await
    {
        Ok(_) => true,
        Err(status) if status.code() == Code::Unauthenticated => false,
        Err(status) => panic!("unexpected status: {status:?}"),
    }
}

/// pipectl with a READ_WRITE key made by `wisp api-key add`, and the console logged in
/// as the static admin: the two other ways in beside the CLI.
async fn pipectl_and_console(wisp: &Wisp) -> (support::api::ApiClient, support::web::WebClient) {
    let api_key = wisp.cli_json(&[
        "api-key",
        "add",
        "--project",
        QUICKSTART,
        "--name",
        "ci",
        "--role",
        "READ_WRITE",
    ]);
    let api_key = format!("API-KEY {}", api_key["key"].as_str().expect("key"));
    let pipectl = wisp.api_client(Via::Grpc, Some(&api_key)).await;
    let token = wisp.admin_session().await;
    let console = wisp.web_client(Via::Grpc, Some(&token)).await;
    (pipectl, console)
}

/// One behaviour per rule, whichever way in: `wisp` (the operator), APIService (pipectl)
/// and WebService (the console) call the same operations (`wisp_services::ops`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_and_api_key_rules_are_one_through_cli_api_and_console() {
    let wisp = Wisp::start();
    let (mut pipectl, mut console) = pipectl_and_console(&wisp).await;
    let register_api = |name: &str| api::RegisterPipedRequest {
        name: name.into(),
        desc: String::new(),
    };
    let register_web = |name: &str| web::RegisterPipedRequest {
        name: name.into(),
        desc: String::new(),
    };

    // A blank piped name is refused.
    assert_usage_error(
        &wisp.cli(&["piped", "add", "--project", QUICKSTART, "--name", "  "]),
        "name must not be empty",
    );
    assert_status(
        pipectl.register_piped(register_api("  ")).await,
        Code::InvalidArgument,
        "name must not be empty",
    );
    assert_status(
        console.register_piped(register_web("  ")).await,
        Code::InvalidArgument,
        "name",
    );

    // Names need not be unique (as upstream): each way registers another "dev".
    let by_cli = wisp.add_piped(QUICKSTART, "dev");
    let again_by_cli = wisp.add_piped(QUICKSTART, "dev");
    let by_api = ok(pipectl.register_piped(register_api("dev")).await);
    let by_web = ok(console.register_piped(register_web("dev")).await);
    let listed = wisp.cli_json(&["piped", "list", "--project", QUICKSTART]);
    let ids: std::collections::BTreeSet<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter(|p| p["name"] == "dev")
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 4, "{listed}");
    for id in [&by_cli.id, &again_by_cli.id, &by_api.id, &by_web.id] {
        assert!(ids.contains(id.as_str()), "{id} in {listed}");
    }

    // Key hashes never leave the server: upstream's "redacted", on every read.
    let got = ok(pipectl
        .get_piped(api::GetPipedRequest {
            piped_id: by_api.id.clone(),
        })
        .await)
    .piped
    .expect("a piped");
    assert!(got.keys.iter().all(|k| k.hash == "redacted"), "{got:?}");
    let pipeds = ok(console.list_pipeds(web::ListPipedsRequest::default()).await).pipeds;
    assert!(
        pipeds
            .iter()
            .flat_map(|p| &p.keys)
            .all(|k| k.hash == "redacted"),
        "{pipeds:?}"
    );

    // At most two keys: a third is refused until the old ones are deleted; deleting them
    // keeps the key just handed out, even within the same second.
    let rotated = wisp.rotate_key(&by_cli);
    assert_usage_error(
        &wisp.cli(&["piped", "rotate-key", "--project", QUICKSTART, &by_cli.id]),
        "delete-old-keys",
    );
    wisp.cli_ok(&[
        "piped",
        "delete-old-keys",
        "--project",
        QUICKSTART,
        &by_cli.id,
    ]);
    assert!(authenticates(&wisp, &by_cli, &rotated.key).await);
    assert!(!authenticates(&wisp, &by_cli, &by_cli.key).await);

    let web_piped = Piped {
        project: QUICKSTART.into(),
        id: by_web.id.clone(),
        key: by_web.key.clone(),
    };
    let recreate = || web::RecreatePipedKeyRequest {
        id: by_web.id.clone(),
    };
    let new_key = ok(console.recreate_piped_key(recreate()).await).key;
    assert_status(
        console.recreate_piped_key(recreate()).await,
        Code::FailedPrecondition,
        "already has 2 keys",
    );
    ok(console
        .delete_old_piped_keys(web::DeleteOldPipedKeysRequest {
            piped_id: by_web.id.clone(),
        })
        .await);
    assert!(authenticates(&wisp, &web_piped, &new_key).await);
    assert!(!authenticates(&wisp, &web_piped, &by_web.key).await);

    // Disabling works the same way from each side.
    wisp.cli_ok(&[
        "piped",
        "disable",
        "--project",
        QUICKSTART,
        &again_by_cli.id,
    ]);
    ok(pipectl
        .disable_piped(api::DisablePipedRequest {
            piped_id: by_api.id.clone(),
        })
        .await);
    ok(console
        .disable_piped(web::DisablePipedRequest {
            piped_id: by_web.id.clone(),
        })
        .await);
    let listed = wisp.cli_json(&["piped", "list", "--project", QUICKSTART]);
    for p in listed.as_array().expect("a list") {
        let expected = p["id"] != by_cli.id.as_str();
        assert_eq!(p["disabled"], expected, "{p}");
    }

    // A blank API key name is refused; listed keys show no hash.
    assert_usage_error(
        &wisp.cli(&[
            "api-key",
            "add",
            "--project",
            QUICKSTART,
            "--name",
            " ",
            "--role",
            "READ_ONLY",
        ]),
        "name must not be empty",
    );
    assert_status(
        console
            .generate_api_key(web::GenerateApiKeyRequest {
                name: " ".into(),
                role: wisp_proto::model::api_key::Role::ReadOnly as i32,
            })
            .await,
        Code::InvalidArgument,
        "name",
    );
    let keys = ok(console
        .list_api_keys(web::ListApiKeysRequest::default())
        .await)
    .keys;
    assert!(keys.iter().all(|k| k.key_hash == "redacted"), "{keys:?}");
}

/// Registering an application, whichever way in: the repository must be one the piped
/// reported (the operator may name one before the piped's first report), its URL is made
/// from what the piped reported, and names need not be unique (as upstream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_rules_are_one_through_cli_api_and_console() {
    let wisp = Wisp::start();
    let (mut pipectl, mut console) = pipectl_and_console(&wisp).await;

    // Before the piped's first report only the operator may register an application.
    let early = wisp.add_piped(QUICKSTART, "early");
    let early_app = wisp.add_app(&early, "early", &[]);
    let git_path = |repo: &str, path: &str| wisp_proto::model::ApplicationGitPath {
        repo: Some(wisp_proto::model::ApplicationGitRepository {
            id: repo.into(),
            ..Default::default()
        }),
        path: path.into(),
        config_filename: "app.pipecd.yaml".into(),
        // Whatever a client sends, the URL is made from the piped's repository.
        url: "https://attacker.example/".into(),
    };
    let via_api = |piped: &str, repo: &str, name: &str| api::AddApplicationRequest {
        name: name.into(),
        piped_id: piped.into(),
        git_path: Some(git_path(repo, &format!("apps/{name}"))),
        ..Default::default()
    };
    let via_web = |piped: &str, repo: &str, name: &str| web::AddApplicationRequest {
        name: name.into(),
        piped_id: piped.into(),
        git_path: Some(git_path(repo, &format!("apps/{name}"))),
        ..Default::default()
    };
    assert_status(
        pipectl
            .add_application(via_api(&early.id, "examples", "x"))
            .await,
        Code::NotFound,
        "repository is not found",
    );
    assert_status(
        console
            .add_application(via_web(&early.id, "examples", "x"))
            .await,
        Code::NotFound,
        "repository is not found",
    );

    // Once it reported its repositories, an unknown one is refused by all three.
    let piped = wisp.add_piped(QUICKSTART, "apps");
    let mut client = wisp.piped_client(Via::Grpc, &piped).await;
    support::api::report_meta(&mut client).await;
    let mut args = app_add_args(QUICKSTART, &piped.id, "demo");
    let repo_at = args
        .iter()
        .position(|a| *a == "--repo-id")
        .expect("--repo-id")
        + 1;
    args[repo_at] = "nope";
    assert_usage_error(
        &wisp.cli(&args),
        "has no repository \"nope\" (it reported: examples)",
    );
    assert_status(
        pipectl
            .add_application(via_api(&piped.id, "nope", "x"))
            .await,
        Code::NotFound,
        "repository is not found",
    );
    assert_status(
        console
            .add_application(via_web(&piped.id, "nope", "x"))
            .await,
        Code::NotFound,
        "repository is not found",
    );

    // Each way registers a "demo" (names need not be unique), with the URL made from the
    // reported repository.
    let by_cli = wisp.add_app(&piped, "demo", &[]);
    let by_api = ok(pipectl
        .add_application(via_api(&piped.id, "examples", "demo"))
        .await)
    .application_id;
    let by_web = ok(console
        .add_application(via_web(&piped.id, "examples", "demo"))
        .await)
    .application_id;
    for id in [&by_cli, &by_api, &by_web] {
        let app = ok(pipectl
            .get_application(api::GetApplicationRequest {
                application_id: id.clone(),
            })
            .await)
        .application
        .expect("an application");
        assert_eq!(app.name, "demo");
        let path = app.git_path.expect("a git path");
        let repo = path.repo.expect("a repository");
        assert_eq!(repo.remote, support::api::REMOTE, "{id}");
        assert_eq!(repo.branch, "main", "{id}");
        assert!(
            path.url.ends_with("/tree/main/apps/demo") && !path.url.contains("attacker"),
            "{id}: {}",
            path.url
        );
    }
    let early = ok(pipectl
        .get_application(api::GetApplicationRequest {
            application_id: early_app,
        })
        .await)
    .application
    .expect("an application");
    assert_eq!(
        early.git_path.expect("a git path").url,
        "",
        "no remote known yet"
    );
}

/// `wisp project update` and `reset-password` act on datastore projects, `list` shows
/// the flags, the new password logs in and the old one does not; the config file's
/// projects are refused with where to change them.
#[tokio::test]
async fn project_update_and_reset_password() {
    let wisp = Wisp::start();
    let updated = wisp.cli_json(&[
        "project",
        "update",
        QUICKSTART,
        "--desc",
        "Team sandbox",
        "--allow-stray-as-viewer",
        "true",
    ]);
    assert_eq!(updated["desc"], "Team sandbox", "{updated}");
    assert_eq!(updated["allowStrayAsViewer"], true, "{updated}");
    assert_eq!(updated["staticAdminDisabled"], false, "{updated}");
    let text = wisp.cli_ok(&["project", "list"]);
    assert!(
        text.lines().any(|l| l
            == "quickstart\tdatastore\tTeam sandbox\tadmin=hello-pipecd,allow-stray-as-viewer"),
        "{text:?}"
    );
    assert_usage_error(
        &wisp.cli(&["project", "update", QUICKSTART]),
        "nothing to change",
    );
    assert_usage_error(
        &wisp.cli(&["project", "update", "nosuch", "--desc", "x"]),
        "nosuch",
    );

    // A new password: the default one stops working, the new one logs in.
    let reset = wisp.cli_json(&["project", "reset-password", QUICKSTART]);
    let password = reset["password"].as_str().expect("password").to_string();
    assert_eq!(reset["username"], "hello-pipecd", "{reset}");
    assert!(password.len() >= 8 && password != "hello-pipecd");
    let old = wisp
        .login_static(QUICKSTART, "hello-pipecd", "hello-pipecd")
        .await;
    assert!(support::web::set_cookie(&old, "token").is_none(), "{old:?}");
    let new = wisp
        .login_static(QUICKSTART, "hello-pipecd", &password)
        .await;
    assert!(support::web::set_cookie(&new, "token").is_some(), "{new:?}");

    // Disabled static admin: the login is refused.
    wisp.cli_json(&[
        "project",
        "update",
        QUICKSTART,
        "--static-admin-disabled",
        "true",
    ]);
    let refused = wisp
        .login_static(QUICKSTART, "hello-pipecd", &password)
        .await;
    assert!(
        support::web::set_cookie(&refused, "token").is_none(),
        "{refused:?}"
    );
}

/// On an address other machines can reach, `wisp serve` refuses to start while the
/// quickstart admin has the well-known password, unless told explicitly; on loopback it
/// starts as before.
#[test]
fn serve_beyond_loopback_refuses_the_default_password() {
    let dir = empty_data_dir();
    let out = run_cli(dir.path(), &["serve", "--addr", "0.0.0.0:0", "--no-jobs"]);
    assert_eq!(out.code, 2, "{out:?}");
    let error = out
        .stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("an error line: {out:?}"));
    assert!(
        error.contains("default password") && error.contains("reset-password"),
        "{out:?}"
    );

    // Told explicitly: it starts, with a warning.
    let server = Server::start_with(
        dir.path(),
        &[
            "--addr".into(),
            "0.0.0.0:0".into(),
            "--allow-default-password".into(),
        ],
        &[],
    );
    assert!(
        server.log_text().contains("default password"),
        "{}",
        server.log_text()
    );
    drop(server);

    // With a new password, no flag is needed.
    let reset = run_cli(dir.path(), &["project", "reset-password", QUICKSTART]);
    assert_eq!(reset.code, 0, "{reset:?}");
    let server = Server::start_with(dir.path(), &["--addr".into(), "0.0.0.0:0".into()], &[]);
    drop(server);
}

/// What Wisp writes on disk is its owner's only: the database, the filestore's
/// directories and objects (here the revocation list a disabled piped writes).
#[cfg(unix)]
#[test]
fn data_files_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = empty_data_dir();
    let data = dir.path().join("state");
    let data_arg = data.to_str().expect("utf-8 path");
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--data-dir", data_arg]);
        let out = support::wisp_command()
            .args(&all)
            .output()
            .expect("run wisp");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let added = cli(&[
        "piped",
        "add",
        "--project",
        QUICKSTART,
        "--name",
        "p",
        "--json",
    ]);
    let id = serde_json::from_str::<serde_json::Value>(&added).expect("JSON")["id"]
        .as_str()
        .expect("id")
        .to_string();
    cli(&["piped", "disable", "--project", QUICKSTART, &id]);
    let mode = |p: &std::path::Path| {
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&data), 0o700, "the data directory");
    assert_eq!(mode(&data.join("wisp.db")), 0o600, "the database");
    assert_eq!(mode(&data.join("filestore")), 0o700, "the filestore");
    assert_eq!(
        mode(&data.join("filestore").join("objects.db")),
        0o600,
        "the objects' database"
    );
}
