//! `wisp bridge` end to end: the generated tonic clients speak native gRPC (h2c) to a
//! real `wisp bridge` process, which forwards every call as gRPC-web over HTTP/1.1 to a
//! real `wisp serve` — the path an unmodified piped or pipectl takes to the serverless
//! deployment. The scenarios are the shared ones that also run over native gRPC and
//! gRPC-web directly (`tests/e2e/support/scenarios.rs`); the failure cases put the bridge in
//! front of a stopped server and of a stand-in load balancer that only answers with
//! plain HTTP errors.

use crate::support;

use std::convert::Infallible;
use std::net::SocketAddr;

use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tonic::Code;
use tonic::codegen::Bytes;
use tonic_prost::prost::Message;
use wisp_proto::apiservice as api;
use wisp_proto::pipedservice::*;

use support::api::legacy_api_call;
use support::bridge::{Bridge, bridge_cli};
use support::{QUICKSTART, Via, Wisp, assert_status, connect, fixtures, ok, scenarios};

#[tokio::test]
async fn every_rpc_requires_credentials() {
    scenarios::every_rpc_requires_credentials(Via::Bridge).await;
}

#[tokio::test]
async fn auth_cases() {
    scenarios::auth_cases(Via::Bridge).await;
}

#[tokio::test]
async fn deployment_lifecycle() {
    scenarios::deployment_lifecycle(Via::Bridge).await;
}

#[tokio::test]
async fn large_messages() {
    scenarios::large_messages(Via::Bridge).await;
}

/// A request over the compression threshold (a 2 MB live-state snapshot) crosses the
/// bridge gzip-compressed, far under the load balancer's 1 MB; small ones go as they are.
#[tokio::test]
async fn large_requests_go_compressed() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "big");
    let app_id = wisp.add_app(&piped, "big-app", &[]);
    let mut c = wisp.piped_client(Via::Bridge, &piped).await;

    let resources: Vec<_> = (0..30_000)
        .map(|i| fixtures::k8s_resource(&format!("uid-{i:05}"), &format!("pod-{i:05}")))
        .collect();
    let request = ReportApplicationLiveStateRequest {
        snapshot: Some(fixtures::live_state_snapshot(&piped, &app_id, resources)),
    };
    let raw = request.encoded_len();
    assert!(raw > 2_000_000, "{raw} bytes");
    ok(c.report_application_live_state(request).await);
    let stored = wisp
        .filestore_object(&format!("application-live-state/{app_id}.json"))
        .expect("live state stored");
    assert!(stored.contains("pod-29999"));

    let logged = wisp.bridge().calls_logged("ReportApplicationLiveState");
    assert_eq!(logged.len(), 1, "{logged:?}");
    let (level, fields) = &logged[0];
    assert_eq!(level, "DEBUG");
    assert_eq!(fields["grpc_status"], "0", "{fields}");
    assert_eq!(fields["gzip"], true, "{fields}");
    let sent = fields["request_bytes"].as_u64().expect("request_bytes");
    assert!(
        sent < 1_000_000 && sent < raw as u64 / 4,
        "{sent} of {raw} bytes"
    );

    ok(c.report_stat(ReportStatRequest {
        piped_stats: b"small".to_vec(),
    })
    .await);
    let logged = wisp.bridge().calls_logged("ReportStat");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0].1["gzip"], false, "{logged:?}");
}

/// pipectl's APIService through the bridge: API keys pass through unchanged, the roles
/// apply, and upstream's legacy service name works.
#[tokio::test]
async fn api_service_through_the_bridge() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "dev");
    let app_id = wisp.add_app(&piped, "api-app", &[]);
    let rw = wisp.add_api_key(QUICKSTART, "ci", "READ_WRITE");
    let ro = wisp.add_api_key(QUICKSTART, "viewer", "READ_ONLY");

    let mut client = wisp.api_key_client(Via::Bridge, &rw).await;
    let apps = ok(client
        .list_applications(api::ListApplicationsRequest::default())
        .await);
    let ids: Vec<&str> = apps.applications.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, vec![app_id.as_str()]);
    let synced = ok(client
        .sync_application(api::SyncApplicationRequest {
            application_id: app_id.clone(),
        })
        .await);
    assert!(!synced.command_id.is_empty());

    let mut read_only = wisp.api_key_client(Via::Bridge, &ro).await;
    assert_status(
        read_only
            .sync_application(api::SyncApplicationRequest {
                application_id: app_id.clone(),
            })
            .await,
        Code::PermissionDenied,
        "Permission denied",
    );
    let mut anonymous = wisp.api_client(Via::Bridge, None).await;
    assert_status(
        anonymous
            .list_applications(api::ListApplicationsRequest::default())
            .await,
        Code::Unauthenticated,
        "",
    );

    let transport = wisp.transport(Via::Bridge, Some(&rw.authorization())).await;
    let got: api::GetPipedResponse = legacy_api_call(
        transport,
        "GetPiped",
        api::GetPipedRequest {
            piped_id: piped.id.clone(),
        },
    )
    .await
    .expect("legacy path through the bridge");
    assert_eq!(got.piped.expect("piped").name, "dev");
}

/// A stopped control plane: every call is UNAVAILABLE, saying where the bridge tried to
/// go, and each failure is one warning in the bridge's log, without the credentials.
#[tokio::test]
async fn upstream_down_is_unavailable() {
    let dir = support::empty_data_dir();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let bridge = Bridge::start(&format!("http://127.0.0.1:{port}"), dir.path(), &[]);
    let secret = "PIPED-TOKEN quickstart,some-piped,super-secret-key";
    let mut c = connect(bridge.addr(), Via::Bridge, Some(secret)).await;
    for _ in 0..3 {
        assert_status(
            c.report_stat(ReportStatRequest::default()).await,
            Code::Unavailable,
            &format!("cannot connect to the control plane at http://127.0.0.1:{port}"),
        );
    }
    let logged = bridge.calls_logged("ReportStat");
    assert_eq!(logged.len(), 3, "one line per failed call: {logged:?}");
    for (level, fields) in &logged {
        assert_eq!(level, "WARN", "{fields}");
        assert_eq!(fields["code"], "UNAVAILABLE", "{fields}");
    }
    assert!(!bridge.log_text().contains("super-secret-key"));
}

/// A load balancer that answers only with its own HTML error pages: 413 to a body over
/// 1 MB, 502 to anything else.
async fn failing_load_balancer() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = hyper::service::service_fn(
                |req: http::Request<hyper::body::Incoming>| async move {
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let (status, title) = if body.len() > 1_000_000 {
                        (413, "413 Request Entity Too Large")
                    } else {
                        (502, "502 Bad Gateway")
                    };
                    let page = format!(
                        "<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n\
                     <center><h1>{title}</h1></center>\r\n</body>\r\n</html>\r\n"
                    );
                    let resp = http::Response::builder()
                        .status(status)
                        .header("content-type", "text/html")
                        .header("server", "awselb/2.0")
                        .body(Full::new(Bytes::from(page)))
                        .expect("response");
                    Ok::<_, Infallible>(resp)
                },
            );
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn load_balancer_errors_become_grpc_statuses() {
    let lb = failing_load_balancer().await;
    let dir = support::empty_data_dir();
    let bridge = Bridge::start(&format!("http://{lb}"), dir.path(), &[]);
    let mut c = connect(bridge.addr(), Via::Bridge, Some("PIPED-TOKEN a,b,c")).await;

    assert_status(
        c.report_stat(ReportStatRequest::default()).await,
        Code::Unavailable,
        "HTTP 502 Bad Gateway",
    );

    // 1.5 MB that gzip cannot shrink: still over the limit once compressed.
    let mut state: u32 = 7;
    let noise: Vec<u8> = (0..1_500_000)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect();
    assert_status(
        c.put_application_shared_object(PutApplicationSharedObjectRequest {
            application_id: "app".into(),
            plugin_name: "kubernetes".into(),
            key: "manifests".into(),
            object: noise,
        })
        .await,
        Code::ResourceExhausted,
        "request too large for the load balancer (1 MB)",
    );

    for method in ["ReportStat", "PutApplicationSharedObject"] {
        let logged = bridge.calls_logged(method);
        assert_eq!(logged.len(), 1, "{method}: {logged:?}");
        assert_eq!(logged[0].0, "WARN");
    }
}

#[test]
fn refuses_bad_arguments() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["--listen", "0.0.0.0:0", "--upstream", "http://127.0.0.1:1"],
            "not a loopback address",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "ftp://cp.example.com",
            ],
            "https:// or http://",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "https://u:p@cp.example.com",
            ],
            "credentials do not belong in the URL",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "http://a",
                "--timeout",
                "0s",
            ],
            "--timeout must be more than 0",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "http://a",
                "--timeout",
                "soon",
            ],
            "expected a duration",
        ),
    ];
    for (args, needle) in cases {
        let out = bridge_cli(args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {out:?}");
    }
}

/// A plain-HTTP upstream on another machine would carry the piped's credentials in
/// clear: refused unless told explicitly; loopback (local tests) is allowed.
#[test]
fn plaintext_upstream_beyond_loopback_is_refused() {
    let dir = support::empty_data_dir();
    let out = support::wisp_command()
        .args([
            "bridge",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://cp.example.com",
        ])
        .output()
        .expect("run wisp bridge");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("in clear") && stderr.contains("--allow-insecure-upstream"),
        "{stderr}"
    );
    // Told explicitly: it starts (and is stopped here).
    let bridge = support::bridge::Bridge::start(
        "http://cp.example.com",
        dir.path(),
        &["--allow-insecure-upstream"],
    );
    drop(bridge);
}
