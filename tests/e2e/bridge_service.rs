//! `wisp bridge` as an in-cluster service (the Helm chart in deploy/helm/wisp-bridge):
//! `/readyz` follows the control plane while `/healthz` does not, SIGTERM drains (ready
//! fails, clients still served for `--shutdown-delay`, then calls finish and it exits 0),
//! and TLS from certificate files is checked at start.

use crate::support;

use std::time::Duration;

use support::bridge::{Bridge, bridge_cli};
use support::{QUICKSTART, Wisp, http_request_to, ok};
use wisp_proto::pipedservice::*;

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/shared/bridge/tests/testdata");

#[tokio::test]
async fn readiness_follows_the_control_plane() {
    let mut wisp = Wisp::start();
    let bridge = Bridge::start(&format!("http://{}", wisp.addr()), wisp.data_dir(), &[]);
    let (status, body) = http_request_to(bridge.addr(), http::Method::GET, "/readyz").await;
    assert_eq!((status.as_u16(), body.as_str()), (200, "ready"));

    wisp.stop();
    let (status, body) = http_request_to(bridge.addr(), http::Method::GET, "/readyz").await;
    assert_eq!(status.as_u16(), 503, "{body}");
    assert!(body.contains("cannot reach the control plane"), "{body}");
    let (status, _) = http_request_to(bridge.addr(), http::Method::GET, "/healthz").await;
    assert_eq!(
        status.as_u16(),
        200,
        "liveness does not follow the control plane"
    );

    wisp.restart();
    let bridge = Bridge::start(&format!("http://{}", wisp.addr()), wisp.data_dir(), &[]);
    let (status, _) = http_request_to(bridge.addr(), http::Method::GET, "/readyz").await;
    assert_eq!(status.as_u16(), 200);
}

#[tokio::test]
async fn sigterm_drains_then_exits() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "drained");
    let mut bridge = Bridge::start(
        &format!("http://{}", wisp.addr()),
        wisp.data_dir(),
        &["--shutdown-delay", "10s", "--shutdown-grace", "5s"],
    );
    let addr = bridge.addr();
    let (status, _) = http_request_to(addr, http::Method::GET, "/readyz").await;
    assert_eq!(status.as_u16(), 200);

    let sent = std::process::Command::new("kill")
        .args(["-TERM", &bridge_pid(&bridge)])
        .status()
        .expect("kill");
    assert!(sent.success());
    // Not ready from the signal on; the process keeps serving through the delay.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http_request_to(addr, http::Method::GET, "/readyz").await;
        if status.as_u16() == 503 {
            assert!(body.contains("shutting down"), "{body}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still ready after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A client arriving during the delay (a Service not yet updated) is still served.
    let mut client = support::connect(addr, support::Via::Grpc, Some(&piped.authorization())).await;
    ok(client.report_stat(ReportStatRequest::default()).await);

    let status = bridge
        .wait_exit(Duration::from_secs(60))
        .await
        .expect("the bridge exits after the delay");
    assert!(status.success(), "{status:?}");
    assert!(
        bridge.log_text().contains("finishing in-flight calls"),
        "{}",
        bridge.log_text()
    );
}

fn bridge_pid(bridge: &Bridge) -> String {
    bridge.pid().to_string()
}

#[test]
fn tls_files_are_checked_at_start() {
    let out = bridge_cli(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "http://127.0.0.1:1",
        "--tls-cert",
        &format!("{TESTDATA}/server.pem"),
    ]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("--tls-key"), "{}", out.stderr);

    let out = bridge_cli(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "http://127.0.0.1:1",
        "--tls-cert",
        &format!("{TESTDATA}/server.pem"),
        "--tls-key",
        &format!("{TESTDATA}/ca.pem"),
    ]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("no PEM private key"), "{}", out.stderr);
}
