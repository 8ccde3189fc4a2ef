//! `wisp migrate` end to end: a served embedded instance with a piped, an application, a
//! deployment, stage logs and live state, copied with LOCAL configs into a fresh
//! directory that a new `wisp serve` then serves (the piped's key still works); re-runs
//! write nothing; mistakes are one line and exit 2; differing counts exit 1. And, with the
//! AWS stand-ins (`WISP_TEST_DYNAMODB_ENDPOINT`, `WISP_TEST_MOTO_ENDPOINT`; skipped with a
//! note without them unless `WISP_REQUIRE_AWS_TESTS=1`), embedded → DynamoDB/S3 →
//! embedded.

use crate::support;

use std::path::{Path, PathBuf};

use wisp_proto::model::DeploymentStatus;
use wisp_proto::pipedservice::*;

use support::aws::{AwsBackend, AwsEnv};
use support::fixtures::{self, string_map};
use support::scenarios::{deployment_ids, parse_stage_log};
use support::{
    CliOutput, Piped, QUICKSTART, Server, Via, Wisp, connect, empty_data_dir, ok, run_cli,
    run_cli_with,
};

/// A LOCAL control-plane config for the embedded stores in `data`.
fn write_config(path: &Path, data: &Path) -> PathBuf {
    let yaml = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore:\n    type: LOCAL\n    config:\n      path: {}\n  filestore:\n    type: LOCAL\n    config:\n      dir: {}\n",
        data.join("wisp.db").display(),
        data.join("filestore").display()
    );
    std::fs::write(path, yaml).expect("write a config");
    path.to_path_buf()
}

fn migrate(configs: &Path, args: &[&str]) -> CliOutput {
    let mut all = vec!["migrate"];
    all.extend_from_slice(args);
    run_cli(configs, &all)
}

fn migrate_json(configs: &Path, from: &Path, to: &Path) -> serde_json::Value {
    let from = from.to_str().expect("utf-8 path");
    let to = to.to_str().expect("utf-8 path");
    let out = migrate(configs, &["--from", from, "--to", to, "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {out:?}"))
}

fn kind<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["kinds"]
        .as_array()
        .and_then(|kinds| kinds.iter().find(|k| k["kind"] == name))
        .unwrap_or_else(|| panic!("no kind {name} in {report}"))
}

/// One `error: ...` line mentioning `needle`, nothing on stdout, exit `code`.
#[track_caller]
fn assert_error(out: &CliOutput, code: i32, needle: &str) {
    assert_eq!(out.code, code, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {out:?}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{out:?}"
    );
}

const DEP_ID: &str = "dep-migrate";
const LOG_PATH: &str = "log/dep-migrate/stage-0/0.txt";

/// A stopped embedded instance that served a piped (registered with an API key), an
/// application, a deployment with a completed stage log, live state and a stat.
async fn served_source() -> (Wisp, Piped, String) {
    let mut wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "dev");
    let app_id = wisp.add_app(&piped, "canary", &[("env", "dev")]);
    wisp.cli_json(&[
        "api-key",
        "add",
        "--project",
        QUICKSTART,
        "--name",
        "ci",
        "--role",
        "READ_ONLY",
    ]);
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    ok(c.create_deployment(CreateDeploymentRequest {
        deployment: Some(fixtures::deployment(&piped, DEP_ID, &app_id, "canary")),
    })
    .await);
    ok(
        c.report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest {
            deployment_id: DEP_ID.into(),
            stage_id: "stage-0".into(),
            retried_count: 0,
            blocks: vec![
                fixtures::log_block(0, "rolling out"),
                fixtures::log_block(1, "done"),
            ],
            completed: true,
        })
        .await,
    );
    ok(
        c.report_application_live_state(ReportApplicationLiveStateRequest {
            snapshot: Some(fixtures::live_state_snapshot(
                &piped,
                &app_id,
                vec![fixtures::k8s_resource("r1", "web")],
            )),
        })
        .await,
    );
    ok(c.report_stat(ReportStatRequest {
        piped_stats: b"# TYPE up gauge\nup 1\n".to_vec(),
    })
    .await);
    drop(c);
    wisp.stop();
    (wisp, piped, app_id)
}

/// The counts a migration of [`served_source`] must report, all copied.
#[track_caller]
fn assert_all_copied(report: &serde_json::Value) {
    assert_eq!(report["counts_match"], true, "{report:#}");
    for (name, count) in [
        ("Project", 1),
        ("Piped", 1),
        ("Application", 1),
        ("Deployment", 1),
        ("APIKey", 1),
        ("PipedStat", 1),
    ] {
        let k = kind(report, name);
        assert_eq!(k["source"], count, "{name}: {report:#}");
        assert_eq!(k["destination"], count, "{name}: {report:#}");
        assert_eq!(k["copied"], count, "{name}: {report:#}");
    }
    let objects = report["objects"]["source"].as_u64().expect("object count");
    assert!(objects >= 2, "stage log and live state: {report:#}");
    assert_eq!(report["objects"]["destination"], objects, "{report:#}");
    assert_eq!(report["objects"]["copied"], objects, "{report:#}");
}

/// Serves `data_dir` and checks that [`served_source`]'s state is there: the piped's key
/// works, its application and deployment are listed, the stage log is whole, and a new
/// deployment can be created.
async fn assert_served(data_dir: &Path, piped: &Piped, app_id: &str) {
    let server = Server::start(data_dir);
    let mut c = connect(server.addr(), Via::Grpc, Some(&piped.authorization())).await;
    let apps = ok(c
        .list_applications(ListApplicationsRequest::default())
        .await)
    .applications;
    assert_eq!(apps.len(), 1, "{apps:?}");
    assert_eq!(apps[0].id, app_id);
    assert_eq!(apps[0].labels, string_map(&[("env", "dev")]));
    let open = ok(c
        .list_not_completed_deployments(ListNotCompletedDeploymentsRequest::default())
        .await);
    assert_eq!(deployment_ids(&open.deployments), vec![DEP_ID.to_string()]);
    assert_eq!(
        open.deployments[0].status,
        DeploymentStatus::DeploymentPending as i32
    );
    let text = support::objects::Objects::open(data_dir)
        .read(LOG_PATH)
        .map(|data| String::from_utf8(data).expect("text"))
        .expect("the stage log was copied");
    let (blocks, completed) = parse_stage_log(&text);
    assert!(completed, "{text:?}");
    assert_eq!(
        blocks,
        vec![(0, "rolling out".to_string()), (1, "done".to_string())]
    );
    ok(c.create_deployment(CreateDeploymentRequest {
        deployment: Some(fixtures::deployment(piped, "dep-after", app_id, "canary")),
    })
    .await);
    drop(c);
    drop(server);
    let pipeds = run_cli(
        data_dir,
        &["piped", "list", "--project", QUICKSTART, "--json"],
    );
    assert_eq!(pipeds.code, 0, "{pipeds:?}");
    assert!(pipeds.stdout.contains(&piped.id), "{pipeds:?}");
}

#[tokio::test]
async fn a_served_instance_moves_to_a_new_directory_and_is_served_from_there() {
    let (wisp, piped, app_id) = served_source().await;
    let configs = empty_data_dir();
    let target = empty_data_dir();
    let a = write_config(&configs.path().join("a.yaml"), wisp.data_dir());
    let b = write_config(&configs.path().join("b.yaml"), target.path());

    let report = migrate_json(configs.path(), &a, &b);
    assert_all_copied(&report);
    assert!(
        !configs.path().join("b.yaml.migrate-state.json").exists(),
        "a completed run leaves no checkpoint"
    );

    // Again, in the human form: nothing to write.
    let out = migrate(
        configs.path(),
        &["--from", path_str(&a), "--to", path_str(&b)],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .lines()
            .next()
            .is_some_and(|l| l.starts_with("KIND")),
        "{out:?}"
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["Deployment", "1", "1", "0", "0", "1"]),
        "{out:?}"
    );
    assert!(out.stdout.contains("counts match"), "{out:?}");
    let again = migrate_json(configs.path(), &a, &b);
    for k in again["kinds"].as_array().expect("kinds") {
        assert_eq!(
            (&k["copied"], &k["updated"]),
            (&0.into(), &0.into()),
            "{again:#}"
        );
    }
    assert_eq!(again["objects"]["copied"], 0, "{again:#}");
    assert_eq!(again["objects"]["updated"], 0, "{again:#}");

    // Served from the new directory: the piped's key works, and everything is there.
    assert_served(target.path(), &piped, &app_id).await;
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn mistakes_are_one_line_and_exit_2_and_differing_counts_exit_1() {
    let source = empty_data_dir();
    let target = empty_data_dir();
    let configs = empty_data_dir();
    // The admin CLI creates the source database.
    let created = run_cli(source.path(), &["project", "add", "p1"]);
    assert_eq!(created.code, 0, "{created:?}");
    let a = write_config(&configs.path().join("a.yaml"), source.path());
    let b = write_config(&configs.path().join("b.yaml"), target.path());
    let a_again = write_config(&configs.path().join("a-again.yaml"), source.path());
    let missing = configs.path().join("missing.yaml");
    let empty = write_config(
        &configs.path().join("empty.yaml"),
        &configs.path().join("none"),
    );
    let dir = configs.path();

    let out = migrate(dir, &["--from", path_str(&missing), "--to", path_str(&b)]);
    assert_error(&out, 2, "does not exist");
    let out = migrate(dir, &["--from", path_str(&a), "--to", path_str(&missing)]);
    assert_error(&out, 2, "does not exist");
    let out = migrate(dir, &["--from", path_str(&a), "--to", path_str(&a)]);
    assert_error(&out, 2, "same config");
    let out = migrate(dir, &["--from", path_str(&a), "--to", path_str(&a_again)]);
    assert_error(&out, 2, "same datastore");
    let out = migrate(dir, &["--from", path_str(&empty), "--to", path_str(&b)]);
    assert_error(&out, 2, "source database");
    std::fs::write(dir.join("bad.yaml"), "kind: Piped\n").expect("write");
    let out = migrate(
        dir,
        &[
            "--from",
            path_str(&dir.join("bad.yaml")),
            "--to",
            path_str(&b),
        ],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        !target.path().join("wisp.db").exists(),
        "nothing was opened"
    );

    // The destination holds a project the source lacks: copied, but the counts differ
    // (both sides also hold the quickstart project the admin CLI made on the defaults).
    let extra = run_cli(target.path(), &["project", "add", "extra"]);
    assert_eq!(extra.code, 0, "{extra:?}");
    let out = migrate(dir, &["--from", path_str(&a), "--to", path_str(&b)]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("<- differs"), "{out:?}");
    assert!(
        out.stderr.contains("counts differ")
            && out.stderr.contains("Project: source 2, destination 3"),
        "{out:?}"
    );
}

#[tokio::test]
async fn embedded_to_aws_and_back() {
    let test = "migrate_cli::embedded_to_aws_and_back";
    let Some(env) = AwsEnv::from_env(test) else {
        return;
    };
    let (wisp, piped, app_id) = served_source().await;
    let configs = empty_data_dir();
    let target = empty_data_dir();
    let a = write_config(&configs.path().join("a.yaml"), wisp.data_dir());
    let c = write_config(&configs.path().join("c.yaml"), target.path());
    // A fresh table and bucket, made by `wisp aws init`; the config is <dir>/wisp.yaml.
    let aws_dir = empty_data_dir();
    let backend = AwsBackend::new(&env, aws_dir.path(), None);
    let init = backend.init(aws_dir.path());
    assert_eq!(init.code, 0, "{init:?}");
    let aws = backend.config_path.clone();
    let migrate_with = |from: &Path, to: &Path| -> serde_json::Value {
        let args = [
            "migrate",
            "--from",
            path_str(from),
            "--to",
            path_str(to),
            "--json",
        ];
        let out = run_cli_with(configs.path(), &args, &[], &backend.env());
        assert_eq!(out.code, 0, "{out:?}");
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {out:?}"))
    };

    // Into AWS: everything copied, the stage log under upstream's key (below the prefix).
    let there = migrate_with(&a, &aws);
    assert_all_copied(&there);
    let log = backend
        .filestore_object(LOG_PATH)
        .expect("the stage log is in S3");
    assert!(log.contains("rolling out"), "{log:?}");
    // Again: nothing to write (S3's etags differ from the local ones; content is compared).
    let again = migrate_with(&a, &aws);
    assert_eq!(again["counts_match"], true, "{again:#}");
    for k in again["kinds"].as_array().expect("kinds") {
        assert_eq!(k["copied"], 0, "{again:#}");
        assert_eq!(k["updated"], 0, "{again:#}");
    }
    assert_eq!(again["objects"]["copied"], 0, "{again:#}");
    assert_eq!(again["objects"]["updated"], 0, "{again:#}");

    // And out of AWS into a fresh directory, which then serves it all.
    let back = migrate_with(&aws, &c);
    assert_all_copied(&back);
    assert_served(target.path(), &piped, &app_id).await;
}

#[test]
fn a_run_resumes_from_the_state_file_beside_the_destination_config() {
    let source = empty_data_dir();
    let target = empty_data_dir();
    let configs = empty_data_dir();
    for id in ["p1", "p2"] {
        let created = run_cli(source.path(), &["project", "add", id]);
        assert_eq!(created.code, 0, "{created:?}");
    }
    let a = write_config(&configs.path().join("a.yaml"), source.path());
    let b = write_config(&configs.path().join("b.yaml"), target.path());
    let canonical = |p: &Path| p.canonicalize().expect("canonical").display().to_string();
    // What a run interrupted among the objects leaves: every kind's records done.
    let state = configs.path().join("b.yaml.migrate-state.json");
    let kinds = [
        "Project",
        "Application",
        "Command",
        "Deployment",
        "Piped",
        "APIKey",
        "Event",
        "DeploymentChain",
        "DeploymentTrace",
        "PipedStat",
        "UnregisteredApps",
        "AuditEvent",
    ];
    let checkpoint = serde_json::json!({
        "format": 1,
        "source": canonical(&a),
        "destination": canonical(&b),
        "kinds_done": kinds,
    });
    std::fs::write(&state, checkpoint.to_string()).expect("write the state file");

    // Resumed: no record is copied, so the Project counts differ (exit 1), and the state
    // file is gone since the copy finished.
    let args = ["--from", path_str(&a), "--to", path_str(&b)];
    let out = migrate(configs.path(), &args);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("note: resuming"), "{out:?}");
    assert!(
        out.stderr.contains("Project: source 3, destination 0"),
        "{out:?}"
    );
    assert!(!state.exists(), "{out:?}");

    // The next run starts from the beginning and copies them.
    let out = migrate(configs.path(), &args);
    assert_eq!(out.code, 0, "{out:?}");
    // The three projects, and the audit entries of the commands that made them.
    assert!(out.stdout.contains("counts match: "), "{out:?}");
    assert!(
        out.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["Project", "3", "3", "3", "0", "0"]),
        "{out:?}"
    );

    // --restart ignores a state file, even a corrupt one; without it, a corrupt one is an
    // error that says how to get past it.
    std::fs::write(&state, "{").expect("write the state file");
    let out = migrate(configs.path(), &args);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("--restart"), "{out:?}");
    let restart = ["--from", path_str(&a), "--to", path_str(&b), "--restart"];
    let out = migrate(configs.path(), &restart);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!state.exists());
}
