//! `wisp import pipecd` (issue 19): an upstream control plane's MySQL datastore (MariaDB
//! started by `scripts/mariadb.sh`, upstream's tables, rows written as upstream writes
//! them) and its filestore (a directory in upstream's layout) are copied into Wisp's
//! stores; the imported piped then authenticates with its old key, the imported API key
//! works with APIService, and the stage log reads back on the console's API. The
//! fixtures are shared with tests/e2e/iam_enforced.rs (the same import into the AWS
//! stores, served by the functions under their own grants).

use crate::support;

use std::path::Path;

use mysql_async::prelude::Queryable;
use support::{Via, Wisp};
use wisp_proto::{apiservice as api, pipedservice as ps, webservice as ws};

pub(crate) const MYSQL_VAR: &str = "WISP_TEST_MYSQL_URL";
pub(crate) const PROJECT: &str = "acme";
pub(crate) const PIPED_ID: &str = "0b9c6f0e-3a57-4c1e-9d51-7f6c2a1e4b10";
pub(crate) const PIPED_KEY: &str = "upstream-piped-key-2c0f8a7d9e";
pub(crate) const APP_ID: &str = "5e1f8d2c-7b4a-4f6e-8a3d-1c9b0e2f4a67";
pub(crate) const DEPLOYMENT_ID: &str = "a7c3e9f1-2d4b-4e8a-9f6c-3b1d5e7a9c20";
pub(crate) const STAGE_ID: &str = "stage-0";
const API_KEY_ID: &str = "e4d2b6a8-1c3f-4a5e-b7d9-0f2e4c6a8b13";
pub(crate) const API_KEY: &str = "e4d2b6a8-1c3f-4a5e-b7d9-0f2e4c6a8b13.k3yfr0mupstr3am";
pub(crate) const ADMIN_PASSWORD: &str = "upstream-admin-password";
/// The kinds [`upstream_rows`] holds one row of each.
const IMPORTED_KINDS: [&str; 7] = [
    "Project",
    "Piped",
    "Application",
    "Deployment",
    "APIKey",
    "Event",
    "Command",
];

/// Go's bcrypt (`$2a$`), at the lowest cost: what upstream stores for keys and passwords.
fn go_bcrypt(secret: &str) -> String {
    bcrypt::hash_with_result(secret, 4)
        .expect("bcrypt")
        .format_for_version(bcrypt::Version::TwoA)
}

/// `UUID_TO_BIN(id, true)`: the time fields swapped so that v1 UUIDs sort by time.
fn uuid_to_bin(id: &str) -> Vec<u8> {
    let b = uuid::Uuid::parse_str(id).expect("a UUID").into_bytes();
    [&b[6..8], &b[4..6], &b[0..4], &b[8..16]].concat()
}

/// Upstream's `makeRowID`: a project's id is not a UUID, so its row id is one derived
/// from it.
fn row_id(id: &str) -> Vec<u8> {
    match uuid::Uuid::parse_str(id) {
        Ok(_) => uuid_to_bin(id),
        Err(_) => {
            uuid_to_bin(&uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, id.as_bytes()).to_string())
        }
    }
}

/// Labels enough that two encodings of them (prost keeps maps as `HashMap`s, in an order
/// of their own) practically never come out in the same order: `{"env":"prod",...}`.
fn many_labels() -> String {
    let more: Vec<String> = (1..=8)
        .map(|i| format!(r#""label-{i}":"value-{i}""#))
        .collect();
    format!(r#"{{"env":"prod",{}}}"#, more.join(","))
}

/// The rows, as upstream's datastore writes them: `encoding/json` of the model inside
/// its wrapper (`_extra` beside the fields), empty fields left out, enums as numbers.
fn upstream_rows() -> Vec<(&'static str, String, String)> {
    let piped_hash = go_bcrypt(PIPED_KEY);
    let api_key_hash = go_bcrypt(API_KEY);
    let admin_hash = go_bcrypt(ADMIN_PASSWORD);
    let labels = many_labels();
    vec![
        (
            "Project",
            PROJECT.into(),
            format!(
                r#"{{"id":"{PROJECT}","desc":"imported","static_admin":{{"username":"admin","password_hash":"{admin_hash}"}},"sso":{{"provider":3,"session_ttl":24,"oidc":{{"issuer":"https://idp.example.com","roles_claim_key":"groups"}}}},"rbac_roles":[{{"name":"web-ops","policies":[{{"resources":[{{"type":1,"labels":{labels}}}],"actions":[1,2]}}]}}],"created_at":1690000000,"updated_at":1690000000,"_extra":"{PROJECT}"}}"#
            ),
        ),
        (
            "Piped",
            PIPED_ID.into(),
            format!(
                r#"{{"id":"{PIPED_ID}","name":"prod","desc":"the production piped","project_id":"{PROJECT}","keys":[{{"hash":"{piped_hash}","creator":"admin","created_at":1690000100}}],"version":"v0.50.0","started_at":1700000000,"created_at":1690000100,"updated_at":1700000000,"_extra":"prod"}}"#
            ),
        ),
        (
            "Application",
            APP_ID.into(),
            format!(
                r#"{{"id":"{APP_ID}","name":"web","piped_id":"{PIPED_ID}","project_id":"{PROJECT}","kind":0,"git_path":{{"repo":{{"id":"app-repo","remote":"git@github.com:acme/app.git","branch":"main"}},"path":"web","config_filename":"app.pipecd.yaml"}},"platform_provider":"kubernetes-default","labels":{labels},"sync_state":{{"status":1,"short_reason":"","timestamp":1700000000}},"created_at":1690000200,"updated_at":1700000000,"_extra":"web"}}"#
            ),
        ),
        (
            "Deployment",
            DEPLOYMENT_ID.into(),
            format!(
                r#"{{"id":"{DEPLOYMENT_ID}","application_id":"{APP_ID}","application_name":"web","piped_id":"{PIPED_ID}","project_id":"{PROJECT}","git_path":{{"repo":{{"id":"app-repo","remote":"git@github.com:acme/app.git","branch":"main"}},"path":"web"}},"trigger":{{"commit":{{"hash":"0f1e2d3c","message":"Deploy web","author":"dev","branch":"main","created_at":1700000300}},"commander":"admin","timestamp":1700000300}},"summary":"Sync with the specified pipeline","labels":{labels},"status":2,"stages":[{{"id":"{STAGE_ID}","name":"K8S_SYNC","index":0,"predefined":true,"visible":true,"status":1,"created_at":1700000300,"updated_at":1700000310}}],"metadata_v2":{{"shared":{{"keyValues":{{"team":"web"}}}}}},"created_at":1700000300,"updated_at":1700000310,"_extra":"web"}}"#
            ),
        ),
        (
            "APIKey",
            API_KEY_ID.into(),
            format!(
                r#"{{"id":"{API_KEY_ID}","name":"ci","key_hash":"{api_key_hash}","project_id":"{PROJECT}","creator":"admin","created_at":1690000300,"updated_at":1690000300,"_extra":"ci"}}"#
            ),
        ),
        (
            "Event",
            "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f".into(),
            format!(
                r#"{{"id":"c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f","name":"image-update","data":"ghcr.io/acme/web:v2","project_id":"{PROJECT}","event_key":"3b4f","labels":{labels},"contexts":{labels},"status":2,"handled_at":1700000400,"created_at":1700000390,"updated_at":1700000400,"_extra":"image-update"}}"#
            ),
        ),
        (
            "Command",
            "d0e1f2a3-b4c5-4d6e-8f70-819203a4b5c6".into(),
            format!(
                r#"{{"id":"d0e1f2a3-b4c5-4d6e-8f70-819203a4b5c6","piped_id":"{PIPED_ID}","application_id":"{APP_ID}","project_id":"{PROJECT}","commander":"admin","status":1,"type":0,"sync_application":{{"application_id":"{APP_ID}","sync_strategy":1}},"handled_at":1700000200,"created_at":1700000100,"updated_at":1700000200,"_extra":"d0e1f2a3-b4c5-4d6e-8f70-819203a4b5c6"}}"#
            ),
        ),
    ]
}

/// Upstream's filestore layout: the stage's log (JSON lines, not completed), the
/// application's live state and a command's output.
pub(crate) fn seed_filestore(dir: &Path) {
    let write = |path: &str, body: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, body).expect("write");
    };
    write(
        &format!("log/{DEPLOYMENT_ID}/{STAGE_ID}/0.txt"),
        "{\"index\":1,\"log\":\"Applying 3 manifests\",\"created_at\":1700000301}\n\
         {\"index\":2,\"log\":\"deployment.apps/web configured\",\"severity\":1,\"created_at\":1700000305}\n",
    );
    write(
        &format!("application-live-state/{APP_ID}.json"),
        &format!(
            r#"{{"application_id":"{APP_ID}","piped_id":"{PIPED_ID}","project_id":"{PROJECT}","version":{{"index":3,"timestamp":1700000500}}}}"#
        ),
    );
    write(
        "command-output/d0e1f2a3-b4c5-4d6e-8f70-819203a4b5c6.json",
        "{\"results\":[]}",
    );
}

/// A fresh database holding upstream's tables and rows; its name.
pub(crate) async fn seed_mysql(url: &str) -> String {
    let database = format!("pipecd_{}", uuid::Uuid::new_v4().simple());
    let opts = mysql_async::Opts::from_url(url).expect("a mysql:// URL");
    let mut conn = mysql_async::Conn::new(opts)
        .await
        .expect("connect to MariaDB");
    conn.query_drop(format!("CREATE DATABASE {database}"))
        .await
        .expect("create database");
    conn.query_drop(format!("USE {database}"))
        .await
        .expect("use");
    let schema = include_str!("../fixtures/pipecd-mysql/schema.sql");
    conn.query_drop(schema).await.expect("upstream's schema");
    for (table, id, data) in upstream_rows() {
        conn.exec_drop(
            format!("INSERT INTO {table} (Id, Data) VALUES (?, ?)"),
            (row_id(&id), data),
        )
        .await
        .expect("insert");
    }
    // As an upstream control plane from before deployment traces: no such table.
    conn.query_drop("DROP TABLE DeploymentTrace")
        .await
        .expect("drop");
    conn.disconnect().await.expect("disconnect");
    database
}

/// The upstream control plane's config, as it would run it (the filestore a directory).
pub(crate) fn upstream_config(
    dir: &Path,
    url: &str,
    database: &str,
    filestore: &Path,
) -> std::path::PathBuf {
    // mysql://user:pass@host:port/... to upstream's Go DSN, `user:pass@tcp(host:port)`.
    let rest = url.strip_prefix("mysql://").expect("a mysql:// URL");
    let (credentials, address) = rest.split_once('@').expect("credentials");
    let address = address.split('/').next().expect("an address");
    let path = dir.join("control-plane-config.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: \"pipecd.dev/v1beta1\"\nkind: ControlPlane\nspec:\n  datastore:\n    type: MYSQL\n    config:\n      url: {credentials}@tcp({address})\n      database: {database}\n  filestore:\n    type: LOCAL\n    config:\n      dir: {}\n",
            filestore.display()
        ),
    )
    .expect("write the upstream config");
    path
}

fn import(data_dir: &Path, from: &Path, more: &[&str]) -> support::CliOutput {
    let from = from.to_str().expect("a UTF-8 path");
    let mut args = vec!["import", "pipecd", "--from", from];
    args.extend_from_slice(more);
    support::run_cli(data_dir, &args)
}

fn kind_row<'a>(report: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    report["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .find(|k| k["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {report}"))
}

#[tokio::test]
async fn an_upstream_control_plane_moves_to_wisp_with_its_keys() {
    let Some(url) = std::env::var(MYSQL_VAR).ok().filter(|v| !v.is_empty()) else {
        return support::aws::skip("import_pipecd", &format!("{MYSQL_VAR} is not set"))
            .unwrap_or(());
    };
    let work = tempfile::tempdir().expect("tempdir");
    let database = seed_mysql(&url).await;
    let files = work.path().join("bucket");
    seed_filestore(&files);
    let from = upstream_config(work.path(), &url, &database, &files);
    let wisp_dir = support::empty_data_dir();

    // A dry run says what would move and writes nothing.
    let dry = import(wisp_dir.path(), &from, &["--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    let report: serde_json::Value = serde_json::from_str(&dry.stdout).expect("JSON report");
    assert_eq!(kind_row(&report, "Piped")["copied"], 1, "{report}");
    assert_eq!(kind_row(&report, "Piped")["destination"], 0, "{report}");
    assert_eq!(report["objects"]["copied"], 3, "{report}");
    let listed = support::run_cli(wisp_dir.path(), &["piped", "list", "--project", PROJECT]);
    assert!(
        !listed.stdout.contains(PIPED_ID),
        "a dry run wrote: {listed:?}"
    );
    // Its OIDC logins refuse users whose claims name no role (upstream let them in): said.
    assert!(
        dry.stderr
            .contains(&format!("project {PROJECT}: a user whose role claims")),
        "{}",
        dry.stderr
    );

    // The import: every kind counted on both sides.
    let first = import(wisp_dir.path(), &from, &["--json"]);
    assert_eq!(first.code, 0, "{first:?}");
    let report: serde_json::Value = serde_json::from_str(&first.stdout).expect("JSON report");
    assert_eq!(report["counts_match"], true, "{report}");
    for kind in IMPORTED_KINDS {
        let row = kind_row(&report, kind);
        assert_eq!(
            (&row["source"], &row["destination"]),
            (&1.into(), &1.into()),
            "{kind}: {report}"
        );
    }
    assert_eq!(report["objects"]["destination"], 3, "{report}");

    // Again, twice, each a process of its own (so each encodes the labels in an order of
    // its own): nothing changed upstream, nothing is written, nothing is refused.
    for _ in 0..2 {
        let again = import(wisp_dir.path(), &from, &["--json"]);
        assert_eq!(again.code, 0, "{again:?}");
        assert!(!again.stderr.contains("refused"), "{}", again.stderr);
        let report: serde_json::Value = serde_json::from_str(&again.stdout).expect("JSON report");
        for kind in IMPORTED_KINDS {
            let row = kind_row(&report, kind);
            assert_eq!(
                (&row["copied"], &row["updated"], &row["unchanged"]),
                (&0.into(), &0.into(), &1.into()),
                "{kind}: {report}"
            );
        }
        assert_eq!(report["objects"]["unchanged"], 3, "{report}");
    }
    // Upstream's directory was only read: its files are as they were, nothing added.
    let mut upstream_files: Vec<String> = Vec::new();
    let mut dirs = vec![files.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the bucket") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let rel = path.strip_prefix(&files).expect("under the bucket");
                upstream_files.push(rel.display().to_string());
            }
        }
    }
    upstream_files.sort();
    assert_eq!(
        upstream_files,
        [
            format!("application-live-state/{APP_ID}.json"),
            "command-output/d0e1f2a3-b4c5-4d6e-8f70-819203a4b5c6.json".to_string(),
            format!("log/{DEPLOYMENT_ID}/{STAGE_ID}/0.txt"),
        ],
        "upstream's directory changed"
    );
    // What the datastore holds says the same: every record still at its first version.
    {
        let datastore = wisp_store_embedded::SqliteDatastore::open(wisp_dir.path().join("wisp.db"))
            .expect("open Wisp's datastore");
        for kind in IMPORTED_KINDS {
            let kind = wisp_store::Kind::parse(kind).expect("a kind");
            let page = wisp_store::Datastore::scan(&datastore, kind, None, 100)
                .await
                .expect("scan");
            // (Projects: the dump's and the quickstart project `wisp` makes on defaults.)
            assert!(!page.records.is_empty(), "no {kind}");
            for (record, _) in &page.records {
                assert_eq!(record.version, 1, "{kind} {} was rewritten", record.id);
            }
        }
    }

    // Wisp on the imported stores.
    let wisp = Wisp::start_in(wisp_dir, &[]);
    let piped = support::Piped {
        project: PROJECT.into(),
        id: PIPED_ID.into(),
        key: PIPED_KEY.into(),
    };
    // The piped keeps its id and key: only its apiAddress changes.
    let mut client = wisp.piped_client(Via::Grpc, &piped).await;
    let apps = support::ok(
        client
            .list_applications(ps::ListApplicationsRequest {})
            .await,
    );
    assert_eq!(
        apps.applications
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        [APP_ID]
    );
    assert_eq!(
        apps.applications[0].labels.get("env").map(String::as_str),
        Some("prod")
    );
    let running = support::ok(
        client
            .list_not_completed_deployments(ps::ListNotCompletedDeploymentsRequest::default())
            .await,
    );
    assert_eq!(running.deployments.len(), 1);
    let deployment = &running.deployments[0];
    assert_eq!(deployment.id, DEPLOYMENT_ID);
    assert_eq!(
        deployment
            .trigger
            .as_ref()
            .and_then(|t| t.commit.as_ref())
            .map(|c| c.hash.as_str()),
        Some("0f1e2d3c")
    );
    let shared = deployment
        .metadata_v2
        .as_ref()
        .and_then(|m| m.shared.as_ref());
    assert_eq!(
        shared
            .and_then(|s| s.key_values.get("team"))
            .map(String::as_str),
        Some("web")
    );
    // A wrong key is still refused.
    let wrong = piped.authorization_with(PROJECT, "not-the-key");
    let mut stranger = wisp.client(Via::Grpc, Some(&wrong)).await;
    support::assert_status(
        stranger
            .list_applications(ps::ListApplicationsRequest {})
            .await,
        tonic::Code::Unauthenticated,
        "",
    );

    // pipectl's API key keeps working.
    let mut pipectl = wisp
        .api_client(Via::Grpc, Some(&format!("API-KEY {API_KEY}")))
        .await;
    let listed = support::ok(
        pipectl
            .list_applications(api::ListApplicationsRequest::default())
            .await,
    );
    assert_eq!(listed.applications.len(), 1);

    // The project's static admin signs in with the upstream password, and the stage log
    // reads back on the console's API.
    let login = support::web::login_static_at(wisp.addr(), PROJECT, "admin", ADMIN_PASSWORD).await;
    let cookie = support::web::set_cookie(&login, "token")
        .unwrap_or_else(|| panic!("no session for the imported admin: {login:?}"));
    let token = support::web::cookie_value(cookie).to_owned();
    let mut console = wisp.web_client(Via::Grpc, Some(&token)).await;
    let log = support::ok(
        console
            .get_stage_log(ws::GetStageLogRequest {
                deployment_id: DEPLOYMENT_ID.into(),
                stage_id: STAGE_ID.into(),
                retried_count: 0,
                offset_index: 0,
            })
            .await,
    );
    assert_eq!(
        log.blocks
            .iter()
            .map(|b| b.log.as_str())
            .collect::<Vec<_>>(),
        ["Applying 3 manifests", "deployment.apps/web configured"]
    );
    assert!(!log.completed);
}

/// Upstream's `type: MINIO` filestore, read through the S3 API (moto_server stands in
/// for MinIO: path-style, the keys from the files upstream's config names).
#[tokio::test]
async fn a_minio_filestore_is_read_through_the_s3_api() {
    let Some(url) = std::env::var(MYSQL_VAR).ok().filter(|v| !v.is_empty()) else {
        return support::aws::skip("import_pipecd_minio", &format!("{MYSQL_VAR} is not set"))
            .unwrap_or(());
    };
    let Some(env) = support::aws::AwsEnv::from_env("import_pipecd_minio") else {
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let database = seed_mysql(&url).await;
    let bucket = support::aws::unique_name("pipecd");
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&env.sdk_config(&env.moto).await)
            .force_path_style(true)
            .build(),
    );
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("bucket");
    let log = format!("log/{DEPLOYMENT_ID}/{STAGE_ID}/0.txt");
    s3.put_object()
        .bucket(&bucket)
        .key(&log)
        .body(b"{\"index\":1,\"log\":\"from MinIO\"}\nEOL".to_vec().into())
        .send()
        .await
        .expect("put");
    std::fs::write(work.path().join("access-key"), "wispTest\n").expect("write");
    std::fs::write(work.path().join("secret-key"), "wispTest\n").expect("write");
    let from = upstream_config(work.path(), &url, &database, work.path());
    let config = std::fs::read_to_string(&from).expect("read");
    let (head, _) = config
        .split_once("  filestore:")
        .expect("a filestore section");
    std::fs::write(
        &from,
        format!(
            "{head}  filestore:\n    type: MINIO\n    config:\n      endpoint: {}\n      bucket: {bucket}\n      accessKeyFile: {}\n      secretKeyFile: {}\n",
            env.moto,
            work.path().join("access-key").display(),
            work.path().join("secret-key").display()
        ),
    )
    .expect("write");

    let wisp_dir = support::empty_data_dir();
    let out = import(wisp_dir.path(), &from, &["--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(report["objects"]["copied"], 1, "{report}");
    let copied = support::objects::Objects::open(wisp_dir.path())
        .read(&log)
        .map(|data| String::from_utf8(data).expect("text"))
        .expect("the stage log in Wisp's filestore");
    assert!(
        copied.contains("from MinIO") && copied.ends_with("EOL"),
        "{copied}"
    );
}

#[test]
fn a_config_without_a_mysql_datastore_is_refused_with_the_way_out() {
    let work = tempfile::tempdir().expect("tempdir");
    let from = work.path().join("control-plane-config.yaml");
    std::fs::write(
        &from,
        "apiVersion: \"pipecd.dev/v1beta1\"\nkind: ControlPlane\nspec:\n  datastore:\n    type: FIRESTORE\n    config:\n      namespace: pipecd\n      environment: dev\n      project: acme\n  filestore:\n    type: GCS\n    config:\n      bucket: acme-pipecd\n",
    )
    .expect("write");
    let out = import(work.path(), &from, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("FIRESTORE") && out.stderr.contains("MIGRATE-FROM-PIPECD"),
        "{out:?}"
    );
}

/// A dump is not trusted (issue 33): a project Wisp already holds keeps its static admin
/// and the dump's records of it are left out unless `--replace-projects`; Wisp's
/// revocations, the console's files and paths upstream never writes are never copied;
/// `--dry-run` lists every refusal and why.
#[tokio::test]
async fn a_dump_cannot_take_over_what_wisp_holds() {
    let Some(url) = std::env::var(MYSQL_VAR).ok().filter(|v| !v.is_empty()) else {
        return support::aws::skip("import_pipecd_hostile", &format!("{MYSQL_VAR} is not set"))
            .unwrap_or(());
    };
    let work = tempfile::tempdir().expect("tempdir");
    let database = seed_mysql(&url).await;
    let files = work.path().join("bucket");
    seed_filestore(&files);
    let hostile = [
        ("revocations.json", "{\"entries\":{}}"),
        ("revocations/session/x", "{}"),
        ("console/index.html", "<script>steal()</script>"),
        ("somewhere/else.json", "{}"),
    ];
    for (path, body) in hostile {
        let path = files.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, body).expect("write");
    }
    let from = upstream_config(work.path(), &url, &database, &files);

    // Wisp already holds the dump's project, with its own admin.
    let wisp_dir = support::empty_data_dir();
    let added = support::run_cli(wisp_dir.path(), &["project", "add", PROJECT, "--json"]);
    assert_eq!(added.code, 0, "{added:?}");
    let ours: serde_json::Value = serde_json::from_str(added.stdout.trim()).expect("JSON");
    let our_user = ours["username"].as_str().expect("username").to_owned();
    let our_password = ours["password"].as_str().expect("password").to_owned();

    // The dry run lists what it refuses, and why.
    let dry = import(wisp_dir.path(), &from, &["--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    for refused in [
        format!("refused Project {PROJECT}: the project exists on Wisp's side"),
        format!("refused Piped {PIPED_ID}: of project {PROJECT}"),
        "refused object revocations.json: Wisp's revocations".to_string(),
        "refused object revocations/session/x: Wisp's revocations".to_string(),
        "refused object console/index.html: the console's files".to_string(),
        "refused object somewhere/else.json: not a path upstream".to_string(),
        format!("refused object log/{DEPLOYMENT_ID}/{STAGE_ID}/0.txt"),
    ] {
        assert!(
            dry.stderr.contains(&refused),
            "{refused:?} not in {}",
            dry.stderr
        );
    }
    assert!(dry.stderr.contains("--replace-projects"), "{}", dry.stderr);

    // The import keeps Wisp's project and copies nothing of the dump's.
    let first = import(wisp_dir.path(), &from, &["--json"]);
    assert_eq!(first.code, 0, "{first:?}");
    let report: serde_json::Value = serde_json::from_str(&first.stdout).expect("JSON report");
    assert_eq!(report["counts_match"], true, "{report}");
    assert_eq!(kind_row(&report, "Piped")["copied"], 0, "{report}");
    assert_eq!(report["objects"]["copied"], 0, "{report}");
    let objects = support::objects::Objects::open(wisp_dir.path());
    for (path, _) in hostile {
        assert!(objects.read(path).is_none(), "{path} was copied");
    }
    {
        let mut wisp = Wisp::start_in(wisp_dir, &[]);
        let dump_admin =
            support::web::login_static_at(wisp.addr(), PROJECT, "admin", ADMIN_PASSWORD).await;
        assert!(
            support::web::set_cookie(&dump_admin, "token").is_none(),
            "the dump's admin logged in: {dump_admin:?}"
        );
        let our_admin =
            support::web::login_static_at(wisp.addr(), PROJECT, &our_user, &our_password).await;
        assert!(
            support::web::set_cookie(&our_admin, "token").is_some(),
            "{our_admin:?}"
        );
        // Told to, the import replaces the project; Wisp's own files stay out.
        wisp.stop();
        let replaced = import(wisp.data_dir(), &from, &["--replace-projects", "--json"]);
        assert_eq!(replaced.code, 0, "{replaced:?}");
        let report: serde_json::Value =
            serde_json::from_str(&replaced.stdout).expect("JSON report");
        assert_eq!(kind_row(&report, "Piped")["copied"], 1, "{report}");
        assert_eq!(report["objects"]["copied"], 3, "{report}");
        for (path, _) in hostile {
            assert!(objects.read(path).is_none(), "{path}");
        }
        wisp.restart();
        let dump_admin =
            support::web::login_static_at(wisp.addr(), PROJECT, "admin", ADMIN_PASSWORD).await;
        assert!(
            support::web::set_cookie(&dump_admin, "token").is_some(),
            "{dump_admin:?}"
        );
    }
}
