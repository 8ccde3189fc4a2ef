//! deploy/ci/with-wisp-bridge.sh, the recipe for pipectl in a CI job, end to end: the
//! script starts `wisp bridge` in the background in front of a real `wisp serve`, the
//! job's command makes pipectl's calls (upstream's APIService, with an API key) through
//! it, and the bridge is gone once the command ends, with the command's exit status.

use crate::support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::api::api_client_at;
use support::{QUICKSTART, Via, Wisp, ok};
use wisp_proto::apiservice::{ListApplicationsRequest, RegisterEventRequest};

/// The job's command: says where the bridge is, then waits for the test's go-ahead and
/// exits 7 (a failing step, whose status the job must keep).
const JOB: &str = r#"echo "$WISP_BRIDGE_ADDRESS $WISP_BRIDGE_PID" > "$1/started.tmp"
mv "$1/started.tmp" "$1/started"
while [ ! -e "$1/done" ]; do sleep 0.1; done
exit 7"#;

#[tokio::test]
async fn pipectl_calls_through_the_background_bridge_which_stops_with_the_job() {
    let wisp = Wisp::start();
    let key = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let dir = tempfile::tempdir().expect("tempdir");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/ci/with-wisp-bridge.sh");
    let mut job = Command::new(script)
        .env("WISP_BIN", env!("CARGO_BIN_EXE_wisp"))
        .env("WISP_UPSTREAM", format!("http://{}", wisp.addr()))
        .args(["--", "sh", "-c", JOB, "sh"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .spawn()
        .expect("run the recipe");

    let started = dir.path().join("started");
    let deadline = Instant::now() + Duration::from_secs(120);
    let line = loop {
        if let Ok(line) = std::fs::read_to_string(&started) {
            break line;
        }
        if let Some(status) = job.try_wait().expect("wait") {
            panic!("the recipe ended before running the command: {status}");
        }
        assert!(Instant::now() < deadline, "the command never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut parts = line.split_whitespace();
    let addr: std::net::SocketAddr = parts.next().expect("address").parse().expect("address");
    let pid: u32 = parts.next().expect("pid").parse().expect("pid");
    assert!(addr.ip().is_loopback());

    // pipectl's calls, native gRPC to the bridge: `application list`, `event register`.
    let mut api = api_client_at(addr, Via::Grpc, Some(&key.authorization())).await;
    ok(api
        .list_applications(ListApplicationsRequest::default())
        .await);
    let event = ok(api
        .register_event(RegisterEventRequest {
            name: "image-update".into(),
            data: "v1.2.3".into(),
            ..Default::default()
        })
        .await);
    assert!(!event.event_id.is_empty());
    drop(api);

    std::fs::write(dir.path().join("done"), "").expect("go-ahead");
    let status = loop {
        if let Some(status) = job.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the recipe did not end with its command"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(7), "the command's exit status");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the bridge outlived the job"
    );
    assert!(std::net::TcpStream::connect(addr).is_err());
}
