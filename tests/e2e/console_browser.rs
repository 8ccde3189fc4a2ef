//! The web console in a real browser: headless Chromium (Debian's `chromium`, driven by
//! `playwright-core` from npm through `tests/browser/console.mjs`) against a console made
//! here with the traits that broke upstream's v0.57.0 console: an `index.html` without a
//! meta charset, scripts holding UTF-8 text, an entry script over 1 MB and a lazily loaded
//! chunk over 2 MB. The page logs in through the form, calls WebService GetMe and
//! GetStageLog (a log over 1 MB) over gRPC-web, and must fully work:
//! - on `wisp serve --web-dir`;
//! - on the AWS path: the real function bootstraps behind the ALB emulator, which enforces
//!   the ALB's 1 MB limits, with the console uploaded by `wisp console upload` to the
//!   bucket prefix the `http` function reads.
//!
//! Needs node, `npm ci --prefix tests/browser` and Chromium (`WISP_CHROMIUM`, default
//! /usr/bin/chromium); `scripts/test` installs them and sets
//! `WISP_REQUIRE_BROWSER_TESTS=1`, which turns a missing piece into a failure instead of
//! a skip. The first render of each page is printed (a benchmark figure, not asserted).
//!
//! What the user sees is asserted: the visible text of each page (the login form's
//! labels, the pipeds and applications, the deployment's status), and on `wisp serve` the
//! screenshots of the login and deployment pages, compared with the references in
//! `tests/browser/reference/` within a tolerance (tests/README.md, "Screenshots").

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use wisp_proto::model::{self, DeploymentStatus, StageStatus};
use wisp_proto::pipedservice as ps;
use wisp_proto::webservice as web;

use support::api::report_meta;
use support::{Piped, QUICKSTART, Via, Wisp, fixtures, ok};

const ENTRY: &str = "assets/index.3f2a9c1b7.js";
const CHUNK: &str = "assets/27.0d4e8a6f2.chunk.js";
/// Sizes past which the ALB path breaks (1 MB), and then some.
const ENTRY_MIN_BYTES: usize = 1_100_000;
const CHUNK_MIN_BYTES: usize = 2_100_000;
const BROWSER_TIMEOUT: Duration = Duration::from_secs(240);

/// The directory of the browser driver.
fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// Whether the browser pieces are here; `None` after a note (or a panic, when
/// `WISP_REQUIRE_BROWSER_TESTS=1`) when one is missing.
pub(crate) fn browser_available(test: &str) -> Option<()> {
    let chromium = std::env::var("WISP_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let missing = if !Path::new(&chromium).exists() {
        Some(format!(
            "no Chromium at {chromium} (apt-get install chromium)"
        ))
    } else if !browser_dir().join("node_modules/playwright-core").is_dir() {
        Some("playwright-core is not installed (npm ci --prefix tests/browser)".into())
    } else if std::process::Command::new("node")
        .arg("--version")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        Some("node is not installed".into())
    } else {
        None
    };
    match missing {
        None => Some(()),
        Some(what) if std::env::var("WISP_REQUIRE_BROWSER_TESTS").as_deref() == Ok("1") => {
            panic!("{test}: {what}, but WISP_REQUIRE_BROWSER_TESTS=1 requires this test to run")
        }
        Some(what) => {
            eprintln!("note: {test} skipped: {what}");
            None
        }
    }
}

/// JavaScript string literals of pseudo-random text (gzip cannot shrink them away), at
/// least `bytes` long in all.
fn padding(name: &str, bytes: usize, seed: u64) -> String {
    let mut x = seed | 1;
    let mut out = format!("window.{name} = [\n");
    while out.len() < bytes {
        out.push('"');
        for _ in 0..96 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                [(x % 64) as usize];
            out.push(char::from(c));
        }
        out.push_str("\",\n");
    }
    out.push_str("];\n");
    out
}

/// The test console, as a build output directory.
pub(crate) fn build_console() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("console dir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("assets")).expect("assets dir");
    // No <meta charset>: the browser must learn UTF-8 from the Content-Type.
    let index = format!(
        "<!DOCTYPE html>\n<html><head><title>Wisp test console</title>\
         <link rel=\"icon\" href=\"/favicon.ico\"></head>\n<body>\
         <p id=\"html-text\">Déjà vu ✓</p>\n<div id=\"app\" data-state=\"loading\">loading\
         </div>\n<script src=\"/{ENTRY}\"></script>\n</body></html>\n"
    );
    std::fs::write(root.join("index.html"), index).expect("index.html");
    let app = std::fs::read_to_string(browser_dir().join("app.js")).expect("tests/browser/app.js");
    let entry = format!(
        "{}\n{}",
        padding("__entryPadding", ENTRY_MIN_BYTES, 11),
        app.replace("__CHUNK_URL__", &format!("/{CHUNK}"))
    );
    std::fs::write(root.join(ENTRY), entry).expect("entry script");
    let chunk = format!(
        "{}\nwindow.__chunkLoaded({{\n  text: \"チャンク読み込み完了 ✓\",\n  \
         textOk: \"チャンク読み込み完了 ✓\" === \
         \"\\u30c1\\u30e3\\u30f3\\u30af\\u8aad\\u307f\\u8fbc\\u307f\\u5b8c\\u4e86 \\u2713\",\n  \
         bytes: window.__chunkPadding.join(\"\").length,\n}});\n",
        padding("__chunkPadding", CHUNK_MIN_BYTES, 23)
    );
    std::fs::write(root.join(CHUNK), chunk).expect("chunk");
    std::fs::write(root.join("favicon.ico"), [0u8, 0, 1, 0]).expect("favicon");
    assert!(std::fs::metadata(root.join(ENTRY)).expect("entry").len() > 1_000_000);
    assert!(std::fs::metadata(root.join(CHUNK)).expect("chunk").len() > 2_000_000);
    dir
}

/// A piped with a deployment whose stage `build` has a completed log of over 1 MB (text
/// as pipeds write it); the deployment id and the log's blocks.
pub(crate) async fn deployment_with_a_large_log(
    wisp: &Wisp,
    via: Via,
) -> (String, Vec<model::LogBlock>) {
    let piped: Piped = wisp.add_piped(QUICKSTART, "browser");
    let mut client = wisp.piped_client(via, &piped).await;
    report_meta(&mut client).await;
    let app = wisp.add_app(&piped, "web", &[]);
    // A second application for the home page's list.
    wisp.add_app(&piped, "api", &[]);
    let mut dep = fixtures::deployment(&piped, "dep-browser", &app, "web");
    let mut stage = fixtures::stage("build", "K8S_SYNC", 0, &[]);
    stage.status = StageStatus::StageSuccess as i32;
    dep.stages = vec![stage];
    dep.status = DeploymentStatus::DeploymentRunning as i32;
    ok(client
        .create_deployment(ps::CreateDeploymentRequest {
            deployment: Some(dep),
        })
        .await);
    let blocks: Vec<model::LogBlock> = (0..12_000)
        .map(|i| {
            fixtures::log_block(
                i,
                &format!(
                    "2026-11-23T10:{:02}:{:02}Z step {i}: kubectl apply -f manifests/web-{}.yaml \
                     => deployment.apps/web-{} configured (replicas {}/{})",
                    (i / 60) % 60,
                    i % 60,
                    i % 37,
                    i % 11,
                    i % 5,
                    5
                ),
            )
        })
        .collect();
    // As a piped reports a running stage: a batch at a time, the last one closing it.
    let batches: Vec<_> = blocks.chunks(2_000).collect();
    for (n, batch) in batches.iter().enumerate() {
        ok(client
            .report_stage_logs_from_last_checkpoint(ps::ReportStageLogsFromLastCheckpointRequest {
                deployment_id: "dep-browser".into(),
                stage_id: "build".into(),
                retried_count: 0,
                blocks: batch.to_vec(),
                completed: n + 1 == batches.len(),
            })
            .await);
    }
    ("dep-browser".into(), blocks)
}

/// The reference screenshots of the login and deployment pages.
fn reference_dir() -> PathBuf {
    browser_dir().join("reference")
}

/// Where the shots compared with the references (and their diff images) go, for a person
/// to look at.
fn shots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser")
}

/// `WISP_UPDATE_SCREENSHOTS=1` makes this run's shots the new references.
fn updating_references() -> bool {
    std::env::var("WISP_UPDATE_SCREENSHOTS").as_deref() == Ok("1")
}

/// Runs the browser driver against `url`; what it printed. With `compare`, the login
/// and deployment pages are also shot and compared with the references.
pub(crate) async fn drive_browser(
    url: &str,
    username: &str,
    password: &str,
    deployment: &str,
    screenshot: &Path,
    compare: bool,
    logout: bool,
) -> serde_json::Value {
    let mut args = serde_json::json!({
        "url": url,
        "project": QUICKSTART,
        "username": username,
        "password": password,
        "query": format!("?deployment={deployment}&stage=build"),
        "screenshot": screenshot,
    });
    if logout {
        args["logout"] = serde_json::json!({ "cookie": "token" });
    }
    // `wisp serve --tls-cert` with the test CA's certificate, which Chromium does not know.
    if url.starts_with("https:") {
        args["ignoreHTTPSErrors"] = serde_json::json!(true);
    }
    if compare {
        args["compare"] = serde_json::json!({
            "dir": reference_dir(),
            "out": shots_dir(),
            "update": updating_references(),
        });
    }
    let child = tokio::process::Command::new("node")
        .arg(browser_dir().join("console.mjs"))
        .arg(args.to_string())
        .current_dir(browser_dir())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(BROWSER_TIMEOUT, child)
        .await
        .expect("the browser run finished in time")
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser driver failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the driver printed no JSON ({e}): {stdout}"))
}

/// What must hold whichever way the console was served.
pub(crate) fn assert_console_worked(
    out: &serde_json::Value,
    username: &str,
    blocks: &[model::LogBlock],
    label: &str,
) {
    let pretty = serde_json::to_string_pretty(out).unwrap_or_default();
    assert_eq!(out["errors"], serde_json::json!([]), "{label}: {pretty}");
    assert_eq!(
        out["failedRequests"],
        serde_json::json!([]),
        "{label}: {pretty}"
    );
    for page in ["login", "home", "page"] {
        assert_eq!(
            out[page]["textOk"], true,
            "{label}: {page}: UTF-8 script text: {pretty}"
        );
        assert_eq!(
            out[page]["htmlTextOk"], true,
            "{label}: {page}: UTF-8 page text: {pretty}"
        );
    }
    assert_eq!(out["home"]["me"]["subject"], username, "{label}: {pretty}");
    assert_visible_text(out, username, label);
    // The page and both scripts said UTF-8, wherever they came from.
    let types = out["contentTypes"].as_object().cloned().unwrap_or_default();
    for file in ["login", "index.3f2a9c1b7.js", "27.0d4e8a6f2.chunk.js"] {
        let got = types.get(file).and_then(|t| t.as_str()).unwrap_or_default();
        assert!(
            got.ends_with("charset=utf-8"),
            "{label}: {file} came as {got:?}: {pretty}"
        );
    }
    let page = &out["page"];
    assert_eq!(page["me"]["projectId"], QUICKSTART, "{label}: {pretty}");
    assert_eq!(
        page["chunk"]["textOk"], true,
        "{label}: chunk text: {pretty}"
    );
    assert!(
        page["chunk"]["bytes"].as_u64().unwrap_or(0) > 2_000_000,
        "{label}: {pretty}"
    );
    let log_bytes: usize = blocks.iter().map(|b| b.log.len()).sum();
    assert!(log_bytes > 1_000_000, "the log is over 1 MB: {log_bytes}");
    let log = &page["stageLog"];
    assert_eq!(
        log["blocks"],
        blocks.len(),
        "{label}: every block: {pretty}"
    );
    assert_eq!(log["logBytes"], log_bytes, "{label}: {pretty}");
    assert_eq!(log["lastIndex"], blocks.len() - 1, "{label}: {pretty}");
    assert_eq!(log["completed"], true, "{label}: {pretty}");
    assert!(
        log["first"]
            .as_str()
            .is_some_and(|f| f.starts_with("2026-11-23T10:00:00Z step 0:")),
        "{label}: {pretty}"
    );
    println!(
        "{label}: first render of the login page {} ms (first contentful paint {} ms); \
         console page with its lazy chunk, GetMe and a {log_bytes}-byte stage log {} ms",
        out["login"]["renderedMs"], out["login"]["firstContentfulPaintMs"], page["renderedMs"]
    );
}

/// The visible lines of a page's text (`innerText` of the body: what the user sees,
/// hidden elements left out), trimmed, empty ones dropped.
fn visible_lines(out: &serde_json::Value, page: &str) -> Vec<String> {
    out[page]["visibleText"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect()
}

/// What the user sees on each page: the login form's labels, the signed-in user, the
/// pipeds and applications, the deployment's application and status, the stage log.
fn assert_visible_text(out: &serde_json::Value, username: &str, label: &str) {
    const UTF8_HTML: &str = "Déjà vu ✓";
    const UTF8_SCRIPT: &str = "Déploiement réussi ✓ — 日本語";
    let login = visible_lines(out, "login");
    assert_eq!(
        login,
        [
            UTF8_HTML,
            "Wisp test console",
            UTF8_SCRIPT,
            "Project",
            "Username",
            "Password",
            "Log in",
        ],
        "{label}: the login page"
    );
    let home = visible_lines(out, "home");
    assert_eq!(
        home,
        [
            UTF8_HTML.to_string(),
            format!("Signed in as {username}"),
            UTF8_SCRIPT.into(),
            "Pipeds".into(),
            "browser".into(),
            "Applications".into(),
            "api".into(),
            "web".into(),
        ],
        "{label}: the home page"
    );
    let page = visible_lines(out, "page");
    let wire = page
        .iter()
        .find(|l| l.ends_with("bytes on the wire"))
        .cloned()
        .unwrap_or_default();
    let wire_bytes: u64 = wire
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_default();
    assert!(wire_bytes > 100_000, "{label}: {wire:?}");
    let log_bytes = out["page"]["stageLog"]["logBytes"]
        .as_u64()
        .unwrap_or_default();
    let chunk_bytes = out["page"]["chunk"]["bytes"].as_u64().unwrap_or_default();
    assert_eq!(
        page,
        [
            UTF8_HTML.to_string(),
            format!("{username} @ {QUICKSTART}"),
            "web: RUNNING".into(),
            UTF8_SCRIPT.into(),
            format!("チャンク読み込み完了 ✓ ({chunk_bytes} bytes of chunk)"),
            format!("12000 log blocks, {log_bytes} bytes, completed true"),
            wire.clone(),
            "2026-11-23T10:00:00Z step 0: kubectl apply -f manifests/web-0.yaml => \
             deployment.apps/web-0 configured (replicas 0/5)"
                .into(),
        ],
        "{label}: the deployment page"
    );
}

/// Fails unless the login and deployment pages look as their references do (within
/// pixelmatch's tolerance); with `WISP_UPDATE_SCREENSHOTS=1` the shots became the
/// references.
pub(crate) fn assert_screenshots_match(out: &serde_json::Value) {
    /// At most this share of the pixels may differ (beyond pixelmatch's per-pixel
    /// threshold and its anti-aliasing detection), so font hinting passes.
    const MAX_DIFFERENT: f64 = 0.005;
    /// At most this many in any 32x32 square (of 1,024): a word set in bold, a changed
    /// colour or a moved line gathers hundreds in one place.
    const MAX_IN_A_WINDOW: u64 = 40;
    for page in ["login", "deployment"] {
        let shot = &out["screenshots"][page];
        let reference = reference_dir().join(format!("{page}.png"));
        if shot["updated"] == true {
            println!("{page}: the reference is now {}", reference.display());
            continue;
        }
        let ratio = shot["ratio"].as_f64().unwrap_or_else(|| {
            panic!("{page}: no comparison ({shot}); WISP_UPDATE_SCREENSHOTS=1 makes the references")
        });
        let most = shot["mostInAWindow"].as_u64().unwrap_or(u64::MAX);
        println!(
            "{page}: {} of {}x{} pixels differ from the reference, at most {most} in a \
             {}x{} square",
            shot["differentPixels"], shot["width"], shot["height"], shot["window"], shot["window"]
        );
        assert!(
            ratio <= MAX_DIFFERENT && most <= MAX_IN_A_WINDOW,
            "{page}: {ratio:.5} of the pixels differ from {} (at most {MAX_DIFFERENT}), \
             {most} in one square (at most {MAX_IN_A_WINDOW}); see {} and, after a \
             deliberate change, WISP_UPDATE_SCREENSHOTS=1",
            reference.display(),
            shots_dir().join(format!("{page}.diff.png")).display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_in_a_browser_on_wisp_serve() {
    if browser_available("console_in_a_browser_on_wisp_serve").is_none() {
        return;
    }
    let console = build_console();
    let wisp = Wisp::start_with_serve_args(&["--web-dir".into(), console.path().into()]);
    let (deployment, blocks) = deployment_with_a_large_log(&wisp, Via::Grpc).await;
    let shot = wisp.data_dir().join("console-serve.png");
    let url = format!("http://localhost:{}", wisp.addr().port());
    let out = drive_browser(
        &url,
        "hello-pipecd",
        "hello-pipecd",
        &deployment,
        &shot,
        true,
        false,
    )
    .await;
    assert_console_worked(&out, "hello-pipecd", &blocks, "wisp serve");
    assert_screenshots_match(&out);
    keep_screenshot(&shot, "console-serve.png");
}

/// The console over https (`wisp serve --tls-cert/--tls-key`): the page, its scripts, the
/// login form and gRPC-web all over TLS on the one port.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_in_a_browser_on_wisp_serve_over_tls() {
    if browser_available("console_in_a_browser_on_wisp_serve_over_tls").is_none() {
        return;
    }
    let console = build_console();
    let mut wisp = Wisp::start_with_serve_args(&["--web-dir".into(), console.path().into()]);
    let (deployment, blocks) = deployment_with_a_large_log(&wisp, Via::Grpc).await;
    // The same data served over TLS.
    wisp.stop();
    let tls = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
    let server = support::Server::start_with(
        wisp.data_dir(),
        &[
            "--web-dir".into(),
            console.path().into(),
            "--tls-cert".into(),
            tls.join("server-a.pem").into(),
            "--tls-key".into(),
            tls.join("server-a.key").into(),
        ],
        &[],
    );
    let shot = wisp.data_dir().join("console-serve-tls.png");
    let url = format!("https://localhost:{}", server.addr().port());
    let out = drive_browser(
        &url,
        "hello-pipecd",
        "hello-pipecd",
        &deployment,
        &shot,
        false,
        false,
    )
    .await;
    assert_console_worked(&out, "hello-pipecd", &blocks, "wisp serve over TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_in_a_browser_through_alb_and_lambda() {
    let test = "console_in_a_browser_through_alb_and_lambda";
    if browser_available(test).is_none() {
        return;
    }
    let Some(wisp) = Wisp::start_lambda(test) else {
        return;
    };
    let console = build_console();
    let console_dir = console.path().to_str().expect("UTF-8 path");
    let uploaded = wisp.cli_json(&["console", "upload", console_dir]);
    assert_eq!(uploaded["uploaded"], 4, "{uploaded}");
    assert_eq!(uploaded["prefix"], support::lambda::WEB_PREFIX);
    // Again: the hashed bundles are there already, index.html goes again.
    let again = wisp.cli_json(&["console", "upload", console_dir]);
    assert_eq!(again["unchanged"], 2, "{again}");

    let (deployment, blocks) = deployment_with_a_large_log(&wisp, Via::Bridge).await;
    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let shot = wisp.data_dir().join("console-lambda.png");
    let url = format!("http://localhost:{}", wisp.addr().port());
    let out = drive_browser(&url, &username, &password, &deployment, &shot, false, false).await;
    if out["errors"] != serde_json::json!([]) {
        eprintln!("the http function's log:\n{}", front.log_text("wisp-http"));
    }
    assert_console_worked(&out, &username, &blocks, "ALB and Lambda");
    // The 1.45 MB log fit because the function compressed it for the browser.
    assert_eq!(out["page"]["stageLog"]["contentEncoding"], "gzip");
    // The bundles came from the bucket by redirect, not through the function.
    assert!(
        out["redirects"].as_u64().unwrap_or(0) >= 2,
        "{}",
        serde_json::to_string_pretty(&out).unwrap_or_default()
    );
    assert!(front.invocations("wisp-web-api") >= 3);
    keep_screenshot(&shot, "console-lambda.png");
}

/// Copies a screenshot to `target/browser/` for a person to look at.
pub(crate) fn keep_screenshot(shot: &Path, name: &str) {
    let dir = shots_dir();
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::copy(shot, dir.join(name));
    }
}

/// A stage log too large for the ALB even compressed (text gzip cannot shrink) comes back
/// through the Lambda path as its newest blocks that fit, after a note saying how many
/// were left out and where the whole log is; never a failed call.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_oversized_stage_log_is_trimmed_with_a_note_through_alb_and_lambda() {
    let Some(wisp) =
        Wisp::start_lambda("an_oversized_stage_log_is_trimmed_with_a_note_through_alb_and_lambda")
    else {
        return;
    };
    let piped = wisp.add_piped(QUICKSTART, "noisy");
    let mut client = wisp.piped_client(Via::Bridge, &piped).await;
    report_meta(&mut client).await;
    let app = wisp.add_app(&piped, "noisy", &[]);
    let mut dep = fixtures::deployment(&piped, "dep-noisy", &app, "noisy");
    dep.stages = vec![fixtures::stage("build", "K8S_SYNC", 0, &[])];
    ok(client
        .create_deployment(ps::CreateDeploymentRequest {
            deployment: Some(dep),
        })
        .await);
    let noise = padding("x", 1_600_000, 5);
    let lines: Vec<&str> = noise.lines().collect();
    let blocks: Vec<model::LogBlock> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| fixtures::log_block(i as i64, line))
        .collect();
    for batch in blocks.chunks(2_000) {
        ok(client
            .report_stage_logs(ps::ReportStageLogsRequest {
                deployment_id: "dep-noisy".into(),
                stage_id: "build".into(),
                retried_count: 0,
                blocks: batch.to_vec(),
            })
            .await);
    }
    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let resp = wisp.login_static(QUICKSTART, &username, &password).await;
    let token = support::web::cookie_value(
        support::web::set_cookie(&resp, "token").expect("a session cookie"),
    )
    .to_string();
    // Through `wisp bridge`, which takes gzip as a browser does.
    let mut console = wisp.web_client(Via::Bridge, Some(&token)).await;
    let log = ok(console
        .get_stage_log(web::GetStageLogRequest {
            deployment_id: "dep-noisy".into(),
            stage_id: "build".into(),
            ..Default::default()
        })
        .await);
    let note = &log.blocks[0];
    assert!(
        note.log.contains("earlier log block(s)") && note.log.contains("log/dep-noisy/build/0.txt"),
        "{}",
        note.log
    );
    let kept = &log.blocks[1..];
    assert!(
        kept.len() > 1_000 && kept.len() < blocks.len(),
        "{}",
        kept.len()
    );
    assert_eq!(
        kept,
        &blocks[blocks.len() - kept.len()..],
        "the newest blocks, in order"
    );
    let sent: usize = kept.iter().map(|b| b.log.len()).sum();
    let total: usize = blocks.iter().map(|b| b.log.len()).sum();
    println!("incompressible stage log: {sent} of {total} bytes sent through the ALB");
}

/// The console in Chromium through the ALB emulator to the real function bootstraps, each
/// holding only the grants `flavour`'s deployment code gives its role, on a moto_server
/// enforcing IAM (tests/e2e/support/iam.rs): the static admin logs in through the form
/// (`http`), sees the home page and a deployment's page (`web-api`; the bundles come
/// from the bucket by the presigned URLs `http` signs with its own grants), and logs out
/// with the logout page's button; the old session cookie is then refused by `web-api`
/// within the documented bound. No call may be refused by IAM.
async fn console_in_a_browser_under_iam(flavour: support::iam::Flavour, test: &str) {
    if browser_available(test).is_none() {
        return;
    }
    let Some(stack) = support::iam::IamStack::start(test, flavour, |_| {}) else {
        return;
    };
    let wisp = &stack.wisp;
    let web_prefix = stack
        .derived
        .grants("http")
        .env
        .get("WISP_WEB_PREFIX")
        .cloned()
        .unwrap_or_default();
    let console = build_console();
    // As the operator, as an administrator would.
    let uploaded = wisp.cli_json(&[
        "console",
        "upload",
        console.path().to_str().expect("UTF-8 path"),
    ]);
    assert_eq!(uploaded["uploaded"], 4, "{uploaded}");
    assert_eq!(uploaded["prefix"], web_prefix.as_str(), "{uploaded}");

    let (deployment, blocks) = deployment_with_a_large_log(wisp, Via::Bridge).await;
    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let shot = wisp.data_dir().join("console-iam.png");
    let url = format!("http://localhost:{}", wisp.addr().port());
    let out = drive_browser(&url, &username, &password, &deployment, &shot, false, true).await;
    let pretty = serde_json::to_string_pretty(&out).unwrap_or_default();
    if out["errors"] != serde_json::json!([]) {
        eprintln!("the http function's log:\n{}", front.log_text("wisp-http"));
    }
    let label = format!("{flavour:?} grants");
    assert_console_worked(&out, &username, &blocks, &label);
    stack.assert_no_access_denied("the console in a browser");
    stack.assert_calls_within_grants();

    // The bundles came from the bucket, by URLs `http` presigned: moto checked them as
    // `http`'s own GetObject on the console's prefix.
    let bundles: Vec<_> = stack
        .function_calls()
        .into_iter()
        .filter(|(function, call)| {
            function == "http"
                && call.action == "s3:GetObject"
                && call
                    .resource
                    .contains(&format!("/{}{web_prefix}assets/", stack.derived.prefix))
        })
        .collect();
    assert!(
        bundles.len() >= 2 && bundles.iter().all(|(_, c)| c.status == 200),
        "{label}: the entry script and the chunk by presigned URL: {bundles:?}"
    );

    // Logged out in the browser: the cookie gone, the console without a session.
    let logout = &out["logout"];
    assert_eq!(logout["errors"], serde_json::json!([]), "{label}: {pretty}");
    assert_eq!(
        logout["failedRequests"],
        serde_json::json!([]),
        "{label}: {pretty}"
    );
    assert!(
        logout["pageText"]
            .as_str()
            .is_some_and(|t| t.contains("Log out of PipeCD?")),
        "{label}: the logout page: {pretty}"
    );
    assert_eq!(
        logout["cookiesAfter"],
        serde_json::json!([]),
        "{label}: {pretty}"
    );
    let after = logout["visibleText"].as_str().unwrap_or_default();
    assert!(
        after.contains("GetMe") && after.contains("grpc-status 16"),
        "{label}: after logging out the console must be refused (UNAUTHENTICATED): {pretty}"
    );
    stack.assert_no_access_denied("logout in a browser");

    // The session the browser held, refused by another function than the one that
    // ended it (`web-api`, not `http`).
    let token = logout["sessionCookie"]
        .as_str()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| panic!("{label}: the browser held no session: {pretty}"))
        .to_string();
    let console = wisp.web_client(Via::GrpcWeb, Some(&token)).await;
    crate::iam_enforced::until_refused("the browser's session after logout", || {
        let mut c = console.clone();
        async move { c.get_me(web::GetMeRequest {}).await }
    })
    .await;
    assert!(front.invocations("wisp-web-api") >= 3);
    keep_screenshot(
        &shot,
        &format!("console-iam-{flavour:?}.png").to_lowercase(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_in_a_browser_with_the_terraform_grants() {
    console_in_a_browser_under_iam(
        support::iam::Flavour::Terraform,
        "console_in_a_browser_with_the_terraform_grants",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_in_a_browser_with_the_sam_grants() {
    console_in_a_browser_under_iam(
        support::iam::Flavour::Sam,
        "console_in_a_browser_with_the_sam_grants",
    )
    .await;
}
