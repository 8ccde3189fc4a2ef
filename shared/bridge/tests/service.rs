//! The bridge as an in-cluster service (a Kubernetes Deployment behind a Service):
//! readiness that follows the control plane, TLS from certificate files on the client
//! side, and a shutdown that lets the calls in flight finish.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot};
use wisp_bridge::frame::{self, FLAG_TRAILERS};
use wisp_bridge::inbound::InboundTls;
use wisp_bridge::{Bridge, Config};

const METHOD: &str = "/grpc.service.pipedservice.PipedService/ReportStat";
const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/testdata");

fn frame_of(flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    frame::encode_frame(flags, payload, &mut out).expect("fits");
    out.to_vec()
}

/// Holds each call: says it arrived, then waits to be released.
type Hold = (mpsc::UnboundedSender<()>, Arc<Notify>);

/// A control plane on loopback: `/healthz` answers `health`, every gRPC-web call answers
/// one message and OK, once released (when held).
async fn control_plane(health: u16, release: Option<Hold>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let release = release.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let release = release.clone();
                async move {
                    if req.uri().path() == "/healthz" {
                        let resp = Response::builder()
                            .status(health)
                            .body(Full::new(Bytes::from_static(b"health")))
                            .expect("response");
                        return Ok::<_, Infallible>(resp);
                    }
                    let _ = req.into_body().collect().await;
                    if let Some((arrived, release)) = release {
                        let _ = arrived.send(());
                        release.notified().await;
                    }
                    let mut body = frame_of(0, b"answer");
                    body.extend(frame_of(FLAG_TRAILERS, b"grpc-status: 0\r\n"));
                    let resp = Response::builder()
                        .header("content-type", "application/grpc-web+proto")
                        .body(Full::new(Bytes::from(body)))
                        .expect("response");
                    Ok(resp)
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// A bridge serving on loopback until `stop` fires (never, when dropped); returns its
/// address, the bridge (for draining) and the task running it.
async fn start(
    config: Config,
) -> (
    SocketAddr,
    Bridge,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let bridge = Bridge::new(config).expect("bridge");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = bridge.clone();
    let task = tokio::spawn(bridge.serve(
        listener,
        async move {
            let _ = stopped.await;
        },
        Duration::from_secs(60),
    ));
    (addr, handle, stop, task)
}

/// GET `path` over HTTP/1.1 (what a kubelet probe sends): status and body.
async fn probe(bridge: SocketAddr, path: &str) -> (StatusCode, String) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client
        .get(format!("http://{bridge}{path}").parse().expect("uri"))
        .await
        .expect("response");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A port nothing listens on.
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr")
}

#[tokio::test]
async fn readiness_follows_the_control_plane_and_liveness_does_not() {
    // Up: ready.
    let up = control_plane(200, None).await;
    let (bridge, handle, _stop, _task) = start(Config::new(
        format!("http://{up}").parse().expect("upstream"),
    ))
    .await;
    assert_eq!(
        probe(bridge, "/readyz").await,
        (StatusCode::OK, "ready".into())
    );
    assert_eq!(probe(bridge, "/healthz").await.0, StatusCode::OK);

    // Shutting down: not ready, still alive.
    handle.start_draining();
    let (status, body) = probe(bridge, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("shutting down"), "{body}");
    assert_eq!(probe(bridge, "/healthz").await.0, StatusCode::OK);

    // Unreachable: not ready, with the reason; alive.
    let down = closed_port().await;
    let (bridge, _, _stop, _task) = start(Config::new(
        format!("http://{down}").parse().expect("upstream"),
    ))
    .await;
    let (status, body) = probe(bridge, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.contains(&format!("cannot reach the control plane at http://{down}")),
        "{body}"
    );
    assert_eq!(probe(bridge, "/healthz").await.0, StatusCode::OK);

    // A load balancer with no healthy target (502): not ready.
    let broken = control_plane(502, None).await;
    let (bridge, _, _stop, _task) = start(Config::new(
        format!("http://{broken}").parse().expect("upstream"),
    ))
    .await;
    let (status, body) = probe(bridge, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("HTTP 502"), "{body}");
}

/// An h2c gRPC call over `io`: grpc-status and the body.
async fn h2_call_over<I>(io: I, authority: String) -> (String, Bytes)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let req = Request::post(format!("https://{authority}{METHOD}"))
        .version(http::Version::HTTP_2)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(frame_of(0, b"request"))))
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let collected = resp.into_body().collect().await.expect("body");
    let status = collected
        .trailers()
        .and_then(|t| t.get("grpc-status"))
        .map(|v| v.to_str().expect("ascii").to_string())
        .unwrap_or_default();
    (status, collected.to_bytes())
}

fn tls_config() -> InboundTls {
    InboundTls {
        cert: format!("{TESTDATA}/server.pem").into(),
        key: format!("{TESTDATA}/server.key").into(),
    }
}

#[tokio::test]
async fn serves_tls_from_certificate_files_with_h2_by_alpn() {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let up = control_plane(200, None).await;
    let mut config = Config::new(format!("http://{up}").parse().expect("upstream"));
    config.inbound_tls = Some(tls_config());
    let (bridge, _, _stop, _task) = start(config).await;

    // A gRPC client trusting the test CA, offering h2 by ALPN as grpc-go does.
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(format!("{TESTDATA}/ca.pem")).expect("CA");
    for cert in CertificateDer::pem_slice_iter(&ca) {
        roots.add(cert.expect("PEM")).expect("add CA");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let tcp = TcpStream::connect(bridge).await.expect("connect");
    let tls = connector
        .connect("localhost".try_into().expect("name"), tcp)
        .await
        .expect("TLS handshake with the bridge");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (status, body) = h2_call_over(tls, "localhost".into()).await;
    assert_eq!(status, "0");
    assert_eq!(body, Bytes::from(frame_of(0, b"answer")));

    // Plaintext to a TLS bridge gets nothing served.
    let tcp = TcpStream::connect(bridge).await.expect("connect");
    let plain = hyper::client::conn::http2::handshake::<_, _, Full<Bytes>>(
        TokioExecutor::new(),
        TokioIo::new(tcp),
    )
    .await;
    match plain {
        Err(_) => {}
        Ok((mut sender, conn)) => {
            tokio::spawn(conn);
            let req = Request::post(format!("http://{bridge}{METHOD}"))
                .header("content-type", "application/grpc")
                .body(Full::new(Bytes::new()))
                .expect("request");
            assert!(sender.send_request(req).await.is_err());
        }
    }
}

#[test]
fn bad_certificate_files_fail_at_start() {
    let upstream: wisp_bridge::Upstream = "http://127.0.0.1:1".parse().expect("url");
    for (cert, key, needle) in [
        ("/nonexistent/cert.pem", "server.key", "No such file"),
        ("server.key", "server.key", "no PEM certificate"),
        ("server.pem", "server.pem", "no PEM private key"),
        ("ca.pem", "server.key", "does not fit"),
    ] {
        let path = |p: &str| -> std::path::PathBuf {
            if p.starts_with('/') {
                p.into()
            } else {
                format!("{TESTDATA}/{p}").into()
            }
        };
        let mut config = Config::new(upstream.clone());
        config.inbound_tls = Some(InboundTls {
            cert: path(cert),
            key: path(key),
        });
        let err = Bridge::new(config).expect_err("bad TLS files");
        let text = err.to_string();
        assert!(text.contains(needle), "{cert} {key}: {text}");
        assert!(!text.contains("PRIVATE KEY"), "{text}");
    }
}

#[tokio::test]
async fn shutdown_finishes_calls_in_flight_and_stops_accepting() {
    let release = Arc::new(Notify::new());
    let (arrived, mut arrivals) = mpsc::unbounded_channel();
    let up = control_plane(200, Some((arrived, release.clone()))).await;
    let (bridge, _, stop, task) = start(Config::new(
        format!("http://{up}").parse().expect("upstream"),
    ))
    .await;

    // A call held by the control plane while the bridge is told to stop.
    let tcp = TcpStream::connect(bridge).await.expect("connect");
    let call = tokio::spawn(h2_call_over(tcp, bridge.to_string()));
    // Stopped once the call has reached the control plane (which holds it).
    arrivals.recv().await.expect("the call arrives");
    stop.send(()).expect("stop the bridge");

    // New connections are refused once the listener is closed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(bridge).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bridge still accepts after shutdown"
        );
        tokio::task::yield_now().await;
    }
    assert!(!task.is_finished(), "stopped before its call finished");

    // Released, the call completes with its answer and the bridge stops.
    release.notify_one();
    let (status, body) = call.await.expect("call");
    assert_eq!(status, "0");
    assert_eq!(body, Bytes::from(frame_of(0, b"answer")));
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the bridge stops once its calls are done")
        .expect("serve");
}
