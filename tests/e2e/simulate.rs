//! `wisp simulate` against a spawned `wisp serve`: short runs over native gRPC and
//! gRPC-web with no failed call, call counts that follow upstream's cadence, a request
//! count within the announced budget, and the fleet it registered visible to the admin
//! CLI and in the stores.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use serde_json::Value;
use support::{CliOutput, QUICKSTART, Wisp};

const PIPEDS: u64 = 3;
const APPS: u64 = 2;
const DURATION_SECS: f64 = 20.0;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A piped's calls of `rpc` (absent = 0).
fn calls(piped: &Value, rpc: &str) -> u64 {
    piped["calls"].get(rpc).map_or(0, u)
}

/// `count` calls of a loop of `period` seconds in `active` seconds: each loop ticks first
/// at a random point of its first period, so ⌊active/period⌋ to ⌈active/period⌉ ticks
/// (no tick starts after the deadline), with half a second of slack below for a tick
/// scheduled right at the end.
#[track_caller]
fn assert_cadence(count: u64, active: f64, period: f64, what: &str) {
    let low = ((active - 0.5) / period).floor().max(0.0) as u64;
    let high = (active / period).ceil() as u64;
    assert!(
        (low..=high).contains(&count),
        "{what}: {count} calls in {active:.1} s, expected {low}..={high} (one per {period} s)"
    );
}

fn simulate(wisp: &Wisp, web: bool) -> (Value, CliOutput) {
    let target = format!("http://{}", wisp.addr());
    let pipeds = PIPEDS.to_string();
    let apps = APPS.to_string();
    let duration = format!("{DURATION_SECS}s");
    let mut args = vec![
        "simulate",
        "--target",
        &target,
        "--pipeds",
        &pipeds,
        "--apps-per-piped",
        &apps,
        "--duration",
        &duration,
        // One deployment per piped every 5 s on average: several complete within the run.
        "--deploy-rate",
        "720",
        "--seed",
        "42",
        "--json",
    ];
    if web {
        args.push("--grpc-web");
    }
    let out = wisp.cli(&args);
    assert_eq!(out.code, 0, "wisp simulate failed: {out:?}");
    let report: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {:?}", out.stdout));
    (report, out)
}

fn run_and_check(web: bool) {
    let wisp = Wisp::start();
    let (report, out) = simulate(&wisp, web);
    let transport = if web { "grpc-web" } else { "grpc" };
    assert_eq!(report["transport"], transport);
    assert_eq!(u(&report["pipeds"]), PIPEDS);

    // No failed call, of any kind.
    assert_eq!(u(&report["errors"]), 0, "{report:#}");
    assert_eq!(report["errors_by_status"], serde_json::json!({}));

    // The budget announced up front holds, and every request made is accounted for.
    let budget = u(&report["request_budget"]);
    let requests = u(&report["requests"]);
    assert!(
        out.stderr.contains(&format!("at most {budget} requests")),
        "the budget is announced: {}",
        out.stderr
    );
    assert!(requests <= budget, "{requests} requests, budget {budget}");
    assert_eq!(u(&report["refused_by_budget"]), 0);
    let total: u64 = report["calls"]
        .as_object()
        .expect("calls by rpc")
        .values()
        .map(u)
        .sum();
    // A call shed with UNAVAILABLE and made again is one call and two requests.
    assert_eq!(total + u(&report["retried_unavailable"]), requests);
    // The run stops by itself at the duration (calls in flight end within seconds).
    let elapsed = f(&report["elapsed_secs"]);
    assert!(
        (DURATION_SECS..DURATION_SECS + 5.0).contains(&elapsed),
        "elapsed {elapsed}"
    );

    // Each piped follows upstream's cadence.
    let per_piped = report["per_piped"].as_array().expect("per_piped");
    assert_eq!(per_piped.len() as u64, PIPEDS);
    for p in per_piped {
        let name = p["name"].as_str().expect("name");
        let active = f(&p["active_secs"]);
        assert!(active > DURATION_SECS / 2.0, "{name} started late: {p}");
        assert_cadence(
            calls(p, "ListUnhandledCommands"),
            active,
            5.0,
            &format!("{name} ListUnhandledCommands"),
        );
        assert_cadence(
            calls(p, "ListNotCompletedDeployments"),
            active,
            10.0,
            &format!("{name} ListNotCompletedDeployments"),
        );
        // Once at start.
        assert_eq!(calls(p, "ReportPipedMeta"), 1, "{p}");
        assert_eq!(
            calls(p, "ReportUnregisteredApplicationConfigurations"),
            1,
            "{p}"
        );
        // A snapshot of each application at start, and the 10-minute flush at most once.
        let snapshots = calls(p, "ReportApplicationLiveState");
        assert!(snapshots == APPS || snapshots == 2 * APPS, "{p}");
        // At start, then once a minute by the application store and the event watcher.
        assert!((1..=3).contains(&calls(p, "ListApplications")), "{p}");
        assert!((1..=2).contains(&calls(p, "ListEvents")), "{p}");
        assert!(calls(p, "ReportStat") <= 1, "{p}");
    }
    let startup = &report["startup_calls"];
    assert_eq!(u(&startup["ReportApplicationLiveState"]), PIPEDS * APPS);
    assert_eq!(u(&startup["ListApplications"]), PIPEDS);

    // Deployments went from trigger to completion through every step.
    let triggered = u(&report["deployments"]["triggered"]);
    let completed = u(&report["deployments"]["completed"]);
    assert!(completed >= 1, "no deployment completed: {report:#}");
    assert!(triggered >= completed);
    let c = &report["calls"];
    assert_eq!(u(&c["CreateDeployment"]), triggered);
    assert_eq!(u(&c["ReportDeploymentCompleted"]), completed);
    assert!(u(&c["ReportStageLogsFromLastCheckpoint"]) >= 3 * completed);
    assert!(u(&c["ReportDeploymentPlanned"]) >= completed);

    // The server stored the completed stage logs (upstream's format: EOL last).
    let objects = support::objects::Objects::open(wisp.data_dir());
    let logs = objects.paths("log/");
    assert!(!logs.is_empty(), "no stage log was written");
    let completed_logs = logs
        .iter()
        .filter(|path| path.ends_with("/stage-2/0.txt"))
        .filter(|path| {
            objects
                .read(path)
                .is_some_and(|text| text.ends_with(b"EOL"))
        })
        .count() as u64;
    // (A deployment can also be cut by the deadline between its last log and completion.)
    assert!(
        (completed..=triggered).contains(&completed_logs),
        "{completed_logs} completed logs of {}, {completed} deployments completed",
        logs.len()
    );

    // The fleet it registered is there for the admin CLI, reported in by the pipeds.
    let run = report["run_id"].as_str().expect("run id");
    let prefix = format!("sim-{run}-");
    let pipeds = wisp.cli_json(&["piped", "list", "--project", QUICKSTART]);
    let ours: BTreeMap<String, &Value> = pipeds
        .as_array()
        .expect("piped list")
        .iter()
        .filter(|p| p["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
        .map(|p| (p["id"].as_str().expect("id").to_string(), p))
        .collect();
    assert_eq!(ours.len() as u64, PIPEDS, "{pipeds:#}");
    for p in ours.values() {
        let version = p["version"].as_str().unwrap_or_default();
        assert!(
            version.starts_with("wisp-simulate-"),
            "ReportPipedMeta stored: {p}"
        );
    }
    let reported: BTreeSet<String> = per_piped
        .iter()
        .map(|p| p["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(reported, ours.keys().cloned().collect::<BTreeSet<_>>());
    let apps = wisp.cli_json(&["application", "list", "--project", QUICKSTART]);
    let our_apps = apps
        .as_array()
        .expect("application list")
        .iter()
        .filter(|a| {
            a["piped_id"]
                .as_str()
                .is_some_and(|id| ours.contains_key(id))
        })
        .count() as u64;
    assert_eq!(our_apps, PIPEDS * APPS);

    // A cost projection with the prices it used.
    let cost = &report["cost"];
    assert!(f(&cost["total_usd"]) > 0.0);
    assert!(f(&cost["per_piped_month_usd"]) > 0.0);
    assert!(f(&cost["month_requests"]) > requests as f64);
    assert_eq!(f(&report["prices"]["alb_hour"]), 0.0225);

    // Both compute modes at the fleet sizes of docs/COSTS.md (shared/simulate compute.rs):
    // the tasks never fewer than two, and at 10,000 pipeds cheaper than the functions.
    let compute = &report["compute"];
    assert_eq!(compute["compute"], "lambda");
    let sizes = compute["fleet_sizes"].as_array().expect("fleet sizes");
    assert_eq!(
        sizes.iter().map(|r| u(&r["pipeds"])).collect::<Vec<_>>(),
        vec![1, 10, 100, 1_000, 10_000]
    );
    for r in sizes {
        assert!(f(&r["lambda"]["total"]) > 0.0, "{r}");
        assert!(u(&r["fargate_tasks"]["tasks"]) >= 2, "{r}");
    }
    assert!(f(&sizes[4]["fargate"]["total"]) < f(&sizes[4]["lambda"]["total"]));
    // Fargate Spot (fargate_capacity, docs/COSTS.md): x86_64 tasks, all on Spot, or all
    // but one for mixed; with the same levers cheaper than on-demand's arm64 tasks.
    for r in sizes {
        let spot = &r["fargate_tasks_spot"];
        assert_eq!(spot["architecture"], "X86_64", "{r}");
        assert_eq!(spot["spot_tasks"], spot["tasks"], "{r}");
        let mixed = &r["fargate_tasks_mixed"];
        assert_eq!(u(&mixed["spot_tasks"]) + 1, u(&mixed["tasks"]), "{r}");
        assert_eq!(r["fargate_tasks"]["architecture"], "ARM64", "{r}");
        assert!(
            f(&r["fargate_all_spot"]["total"]) < f(&r["fargate_all_mixed"]["total"])
                && f(&r["fargate_all_mixed"]["total"]) < f(&r["fargate_all"]["total"]),
            "{r}"
        );
    }
    // The levers (docs/COSTS.md): provisioned capacity cuts the DynamoDB bill at 10,000
    // pipeds; upstream resized grows with the fleet; the bill by RPC names the command
    // poll, one a task could answer from memory.
    assert!(
        f(&sizes[4]["fargate_provisioned"]["dynamodb"]) < f(&sizes[4]["fargate"]["dynamodb"]) / 2.0,
        "{:#}",
        sizes[4]
    );
    assert!(f(&sizes[4]["upstream_resized"]["total"]) > f(&sizes[0]["upstream_resized"]["total"]));
    let by_rpc = compute["dynamodb_by_rpc"].as_array().expect("by rpc");
    assert!(
        by_rpc.iter().any(|r| r["rpc"] == "ListUnhandledCommands"
            && f(&r["rru"]) > 0.0
            && r["from_memory"] == true),
        "{by_rpc:#?}"
    );
}

#[test]
fn native_grpc_fleet() {
    run_and_check(false);
}

#[test]
fn grpc_web_fleet() {
    run_and_check(true);
}

/// `wisp simulate` with exactly `args` (no data dir added) and no WISP_* environment.
fn bare(args: &[&str]) -> CliOutput {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wisp"));
    for (key, _) in std::env::vars() {
        if key.starts_with("WISP_") {
            cmd.env_remove(key);
        }
    }
    let out = cmd
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run wisp");
    CliOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[track_caller]
fn assert_usage_error(out: &CliOutput, needle: &str) {
    assert_eq!(out.code, 2, "expected exit status 2: {out:?}");
    assert!(out.stdout.is_empty(), "nothing on stdout: {out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {out:?}");
    assert!(lines[0].starts_with("error: "), "{out:?}");
    assert!(lines[0].contains(needle), "mentions {needle:?}: {out:?}");
}

#[test]
fn mistakes_are_one_line_and_exit_2() {
    let dir = support::empty_data_dir();
    let data_dir = dir.path().to_str().expect("utf-8 path");
    let common = |target: &'static str, pipeds: &'static str| {
        vec![
            "simulate",
            "--target",
            target,
            "--pipeds",
            pipeds,
            "--apps-per-piped",
            "2",
            "--duration",
            "5s",
        ]
    };
    let with_dir = |mut args: Vec<&'static str>| {
        let mut owned: Vec<&str> = std::mem::take(&mut args);
        owned.extend(["--data-dir", data_dir]);
        bare(&owned)
    };
    assert_usage_error(
        &with_dir(common("http://127.0.0.1:9", "0")),
        "--pipeds must be at least 1",
    );
    assert_usage_error(&with_dir(common("127.0.0.1:8080", "3")), "--target");
    assert_usage_error(&with_dir(common("ftp://example.com", "3")), "--target");
    assert_usage_error(
        &with_dir(common("https://example.com", "3")),
        "add --grpc-web",
    );
    assert_usage_error(&bare(&common("http://127.0.0.1:9", "3")), "--data-dir");
    let mut bad_price = common("http://127.0.0.1:9", "3");
    bad_price.extend(["--price", "no_such_price=1"]);
    assert_usage_error(&with_dir(bad_price), "unknown price");
    let mut no_base = common("http://127.0.0.1:9", "3");
    no_base.extend(["--fargate-capacity", "mixed", "--on-demand-base", "0"]);
    assert_usage_error(&with_dir(no_base), "--on-demand-base must be at least 1");
    // Nothing was registered by any of them.
    assert!(
        !dir.path().join("wisp.db").exists(),
        "a refused run opened no store"
    );
}
