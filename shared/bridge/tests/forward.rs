//! The bridge between a raw HTTP/2 gRPC client and small HTTP/1.1 upstreams that answer
//! the way a gRPC-web server or a load balancer does. (The end-to-end tests with the real
//! `wisp serve` and generated clients are in the workspace root's `tests/e2e/bridge.rs`.)

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use wisp_bridge::frame::{self, FLAG_COMPRESSED, FLAG_TRAILERS};
use wisp_bridge::{Bridge, Config, compress, status};

const METHOD: &str = "/grpc.service.pipedservice.PipedService/ReportStat";

/// What the upstream saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    version: http::Version,
    headers: HeaderMap,
    body: Bytes,
}

type Respond = Arc<dyn Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync>;

/// An HTTP/1.1 server on loopback answering with `respond`, recording every request.
async fn upstream(respond: Respond) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let respond = respond.clone();
            let record = record.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let respond = respond.clone();
                let record = record.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let seen = Seen {
                        path: parts.uri.path().to_string(),
                        version: parts.version,
                        headers: parts.headers,
                        body,
                    };
                    let response = respond(&seen);
                    record.lock().expect("lock").push(seen);
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, seen)
}

async fn bridge_to(upstream: &str, configure: impl FnOnce(&mut Config)) -> SocketAddr {
    let mut config = Config::new(upstream.parse().expect("upstream URL"));
    configure(&mut config);
    let bridge = Bridge::new(config).expect("bridge");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(bridge.serve(listener, std::future::pending(), Duration::from_secs(1)));
    addr
}

/// What the gRPC client got back.
#[derive(Debug)]
struct Got {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    trailers: Option<HeaderMap>,
}

impl Got {
    /// grpc-status and decoded grpc-message, from the trailers or (trailers-only) the
    /// headers.
    fn grpc_status(&self) -> (String, String) {
        let from = self
            .trailers
            .as_ref()
            .filter(|t| t.contains_key("grpc-status"))
            .unwrap_or(&self.headers);
        let status = from
            .get("grpc-status")
            .map(|v| v.to_str().expect("ascii").to_string())
            .expect("a grpc-status");
        let message = from
            .get("grpc-message")
            .map(|v| status::decode_message(v.as_bytes()))
            .unwrap_or_default();
        (status, message)
    }
}

/// One HTTP/2 (prior knowledge) call, as a native gRPC client makes it.
async fn h2_call(bridge: SocketAddr, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Got {
    let stream = TcpStream::connect(bridge)
        .await
        .expect("connect to the bridge");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let mut req = Request::post(format!("http://{bridge}{path}"))
        .version(http::Version::HTTP_2)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let (parts, body) = resp.into_parts();
    let collected = body.collect().await.expect("body");
    let trailers = collected.trailers().cloned();
    Got {
        status: parts.status,
        headers: parts.headers,
        body: collected.to_bytes(),
        trailers,
    }
}

fn frame_of(flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    frame::encode_frame(flags, payload, &mut out).expect("fits");
    out.to_vec()
}

fn web_response(body: Vec<u8>, headers: &[(&str, &str)]) -> Response<Full<Bytes>> {
    let mut resp = Response::builder()
        .status(200)
        .header("content-type", "application/grpc-web+proto");
    for (name, value) in headers {
        resp = resp.header(*name, *value);
    }
    resp.body(Full::new(Bytes::from(body))).expect("response")
}

fn plain(status: u16, content_type: &str, body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("response")
}

#[tokio::test]
async fn forwards_frames_headers_and_trailers() {
    let (up, seen) = upstream(Arc::new(|_: &Seen| {
        let mut body = frame_of(0, b"first");
        body.extend(frame_of(0, b"second"));
        body.extend(frame_of(
            FLAG_TRAILERS,
            b"grpc-status: 0\r\ngrpc-message: fine\r\nx-trailer: t\r\n",
        ));
        web_response(
            body,
            &[("x-header-meta", "h"), ("access-control-allow-origin", "*")],
        )
    }))
    .await;
    let bridge = bridge_to(&format!("http://{up}"), |_| {}).await;
    let got = h2_call(
        bridge,
        "/pipe.api.service.pipedservice.PipedService/ReportStat",
        &[
            ("authorization", "PIPED-TOKEN p,i,secret"),
            ("cookie", "token=abc"),
            ("x-custom", "1"),
            ("x-trace-bin", "AAEC"),
            ("grpc-timeout", "10S"),
            ("user-agent", "grpc-go/1.70.0"),
        ],
        frame_of(0, b"request"),
    )
    .await;

    let seen = seen.lock().expect("lock")[0].clone();
    assert_eq!(
        seen.path,
        "/pipe.api.service.pipedservice.PipedService/ReportStat"
    );
    assert_eq!(seen.version, http::Version::HTTP_11);
    assert_eq!(seen.headers["content-type"], "application/grpc-web+proto");
    assert_eq!(seen.headers["x-grpc-web"], "1");
    assert_eq!(seen.headers["authorization"], "PIPED-TOKEN p,i,secret");
    assert_eq!(seen.headers["cookie"], "token=abc");
    assert_eq!(seen.headers["x-custom"], "1");
    assert_eq!(seen.headers["x-trace-bin"], "AAEC");
    assert_eq!(seen.headers["grpc-timeout"], "10S");
    assert_eq!(seen.headers["user-agent"], "grpc-go/1.70.0");
    assert_eq!(seen.headers["grpc-accept-encoding"], "gzip");
    assert!(!seen.headers.contains_key("te"), "{:?}", seen.headers);
    assert!(
        !seen.headers.contains_key("grpc-encoding"),
        "small: not compressed"
    );
    assert_eq!(seen.body, Bytes::from(frame_of(0, b"request")));

    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.headers["content-type"], "application/grpc");
    assert_eq!(got.headers["x-header-meta"], "h");
    assert!(!got.headers.contains_key("access-control-allow-origin"));
    assert!(
        !got.headers.contains_key("grpc-status"),
        "not trailers-only"
    );
    let mut expected = frame_of(0, b"first");
    expected.extend(frame_of(0, b"second"));
    assert_eq!(got.body, Bytes::from(expected));
    let trailers = got.trailers.clone().expect("HTTP/2 trailers");
    assert_eq!(trailers["x-trailer"], "t");
    assert_eq!(got.grpc_status(), ("0".into(), "fine".into()));
}

#[tokio::test]
async fn codec_suffix_maps_to_grpc_web_codec() {
    let (up, seen) = upstream(Arc::new(|_: &Seen| {
        web_response(frame_of(FLAG_TRAILERS, b"grpc-status: 0\r\n"), &[])
    }))
    .await;
    let bridge = bridge_to(&format!("http://{up}/base/"), |_| {}).await;
    let got = h2_call(
        bridge,
        METHOD,
        &[("content-type", "application/grpc+proto")],
        frame_of(0, b""),
    )
    .await;
    assert_eq!(got.grpc_status().0, "0");
    let seen = seen.lock().expect("lock")[0].clone();
    assert_eq!(seen.path, format!("/base{METHOD}"));
    assert_eq!(seen.headers["content-type"], "application/grpc-web+proto");
}

#[tokio::test]
async fn trailers_only_responses_stay_trailers_only() {
    let (up, _) = upstream(Arc::new(|_: &Seen| {
        // What tonic-web (and so a Wisp Lambda function) sends for an error.
        let mut resp = web_response(Vec::new(), &[]);
        resp.headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("16"));
        resp.headers_mut().insert(
            "grpc-message",
            http::HeaderValue::from_static("missing%20credentials"),
        );
        resp
    }))
    .await;
    let bridge = bridge_to(&format!("http://{up}"), |_| {}).await;
    let got = h2_call(bridge, METHOD, &[], frame_of(0, b"x")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.headers["grpc-status"], "16");
    assert!(got.body.is_empty());
    assert!(got.trailers.is_none(), "{:?}", got.trailers);
    assert_eq!(
        got.grpc_status(),
        ("16".into(), "missing credentials".into())
    );
}

#[tokio::test]
async fn large_requests_are_gzipped_and_gzip_responses_are_inflated_unless_accepted() {
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 13) as u8).collect();
    let answer = big.clone();
    let (up, seen) = upstream(Arc::new(move |_: &Seen| {
        let packed = compress::gzip(&answer).expect("gzip");
        let mut body = frame_of(FLAG_COMPRESSED, &packed);
        body.extend(frame_of(FLAG_TRAILERS, b"grpc-status: 0\r\n"));
        web_response(body, &[("grpc-encoding", "gzip")])
    }))
    .await;
    let bridge = bridge_to(&format!("http://{up}"), |_| {}).await;

    // A client that does not take gzip gets the message inflated.
    let got = h2_call(bridge, METHOD, &[], frame_of(0, &big)).await;
    assert_eq!(got.grpc_status().0, "0");
    assert!(!got.headers.contains_key("grpc-encoding"));
    assert_eq!(got.body, Bytes::from(frame_of(0, &big)));
    {
        let seen = seen.lock().expect("lock");
        let request = &seen[0];
        assert_eq!(request.headers["grpc-encoding"], "gzip");
        assert!(
            request.body.len() < big.len() / 10,
            "{} bytes",
            request.body.len()
        );
        let frames = frame::split_frames(&request.body).expect("frames");
        assert_eq!(frames.len(), 1);
        assert!(frames[0].is_compressed());
        assert_eq!(
            compress::gunzip(&frames[0].payload, big.len()).expect("gzip"),
            big
        );
    }

    // One that does gets it as it came.
    let got = h2_call(
        bridge,
        METHOD,
        &[("grpc-accept-encoding", "identity,gzip")],
        frame_of(0, b"small"),
    )
    .await;
    assert_eq!(got.grpc_status().0, "0");
    assert_eq!(got.headers["grpc-encoding"], "gzip");
    let frames = frame::split_frames(&got.body).expect("frames");
    assert!(frames[0].is_compressed());
    assert_eq!(
        compress::gunzip(&frames[0].payload, big.len()).expect("gzip"),
        big
    );
}

/// Behind the ALB a large answer comes `Content-Encoding: gzip` as a whole (frames and
/// trailers inside); the bridge asks for it and hands the client the plain gRPC answer.
#[tokio::test]
async fn whole_body_gzip_responses_are_inflated() {
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 17) as u8).collect();
    let answer = big.clone();
    let (up, seen) = upstream(Arc::new(move |_: &Seen| {
        let mut body = frame_of(0, &answer);
        body.extend(frame_of(FLAG_TRAILERS, b"grpc-status: 0\r\n"));
        let packed = compress::gzip(&body).expect("gzip");
        web_response(
            packed,
            &[("content-encoding", "gzip"), ("vary", "accept-encoding")],
        )
    }))
    .await;
    let bridge = bridge_to(&format!("http://{up}"), |_| {}).await;
    let got = h2_call(bridge, METHOD, &[], frame_of(0, b"hello")).await;
    assert_eq!(got.grpc_status().0, "0");
    assert!(!got.headers.contains_key("content-encoding"));
    assert_eq!(got.body, Bytes::from(frame_of(0, &big)));
    assert_eq!(
        seen.lock().expect("lock")[0].headers["accept-encoding"],
        "gzip"
    );

    // A body that says gzip but is not: a clear INTERNAL, not garbage passed on.
    let (up, _) = upstream(Arc::new(|_: &Seen| {
        web_response(b"not gzip at all".to_vec(), &[("content-encoding", "gzip")])
    }))
    .await;
    let bridge = bridge_to(&format!("http://{up}"), |_| {}).await;
    let got = h2_call(bridge, METHOD, &[], frame_of(0, b"hello")).await;
    let (code, message) = got.grpc_status();
    assert_eq!(code, "13", "{message}");
    assert!(message.contains("gzip"), "{message}");
}

#[tokio::test]
async fn plain_http_failures_become_grpc_statuses() {
    let (up, _) = upstream(Arc::new(|seen: &Seen| {
        let html = "text/html";
        match seen.path.rsplit('/').next().unwrap_or_default() {
            "401" => plain(401, "text/plain", "Unauthorized"),
            "403" => plain(403, "application/json", r#"{"message":"Forbidden"}"#),
            "404" => plain(404, html, "<html><body>Not Found</body></html>"),
            "413" => plain(
                413,
                html,
                "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n\
                 <center><h1>413 Request Entity Too Large</h1></center>\r\n</body>\r\n</html>\r\n",
            ),
            "429" => plain(429, "text/plain", "slow down"),
            "502" => plain(
                502,
                html,
                "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n\
                 <center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n",
            ),
            "503" => plain(
                503,
                html,
                "<html><title>503 Service Temporarily Unavailable</title></html>",
            ),
            "504" => plain(
                504,
                html,
                "<html><title>504 Gateway Time-out</title></html>",
            ),
            _ => plain(200, html, "<html>a web page</html>"),
        }
    }))
    .await;
    let bridge = bridge_to(&format!("http://{up}"), |_| {}).await;
    let cases = [
        ("401", "16", "HTTP 401 Unauthorized"),
        ("403", "7", r#"(response: {"message":"Forbidden"})"#),
        ("404", "12", "does not serve /svc.S/404"),
        // A byte cannot be over the load balancer's 1 MB: the bound is behind it.
        ("413", "8", "the control plane refused 6 bytes as too large"),
        ("429", "14", "rate-limiting"),
        ("502", "14", "HTTP 502 Bad Gateway"),
        ("503", "14", "no healthy target"),
        ("504", "14", "did not answer in time"),
        ("200", "2", "not gRPC-web"),
    ];
    for (method, code, needle) in cases {
        let got = h2_call(bridge, &format!("/svc.S/{method}"), &[], frame_of(0, b"x")).await;
        let (status, message) = got.grpc_status();
        assert_eq!(status, code, "{method}: {message}");
        assert!(message.contains(needle), "{method}: {message}");
        assert!(
            message.contains(&format!("http://{up}")),
            "{method}: {message}"
        );
        assert!(
            got.body.is_empty() && got.trailers.is_none(),
            "trailers-only"
        );
    }
    let got = h2_call(bridge, "/svc.S/502", &[], frame_of(0, b"x")).await;
    let (_, message) = got.grpc_status();
    assert!(
        message.ends_with("(response: 502 Bad Gateway)"),
        "{message}"
    );
}

#[tokio::test]
async fn malformed_gateway_responses_are_errors() {
    let (up, _) = upstream(Arc::new(|seen: &Seen| {
        match seen.path.rsplit('/').next().unwrap_or_default() {
            // Cut off in the middle of a frame.
            "truncated" => web_response(frame_of(0, b"hello")[..7].to_vec(), &[]),
            // Messages but no trailer frame.
            "no-trailers" => web_response(frame_of(0, b"hello"), &[]),
            // A trailer frame without grpc-status.
            "no-status" => web_response(frame_of(FLAG_TRAILERS, b"x-a: 1\r\n"), &[]),
            _ => {
                let mut body = frame_of(FLAG_COMPRESSED, b"??");
                body.extend(frame_of(FLAG_TRAILERS, b"grpc-status: 0\r\n"));
                web_response(body, &[("grpc-encoding", "br")])
            }
        }
    }))
    .await;
    let bridge = bridge_to(&format!("http://{up}"), |_| {}).await;
    for (method, code, needle) in [
        ("truncated", "13", "malformed gRPC-web response"),
        ("no-trailers", "14", "ended without a gRPC status"),
        ("no-status", "13", "no grpc-status"),
        ("brotli", "13", "does not decode"),
    ] {
        let got = h2_call(bridge, &format!("/svc.S/{method}"), &[], frame_of(0, b"x")).await;
        let (status, message) = got.grpc_status();
        assert_eq!(status, code, "{method}: {message}");
        assert!(message.contains(needle), "{method}: {message}");
    }
    // And malformed requests from the client.
    let got = h2_call(bridge, METHOD, &[], vec![0, 0, 0, 0, 9, 1]).await;
    let (status, message) = got.grpc_status();
    assert_eq!(status, "13", "{message}");
    assert!(message.contains("malformed gRPC request"), "{message}");
}

#[tokio::test]
async fn deadlines_and_unreachable_upstreams() {
    // An upstream that accepts connections but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_addr = silent.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let bridge = bridge_to(&format!("http://{silent_addr}"), |c| {
        c.timeout = Duration::from_secs(2);
    })
    .await;
    // The client's grpc-timeout, when shorter, wins (the message names the deadline
    // that applied; no clock is read).
    let got = h2_call(
        bridge,
        METHOD,
        &[("grpc-timeout", "300m")],
        frame_of(0, b"x"),
    )
    .await;
    let (status, message) = got.grpc_status();
    assert_eq!(status, "4", "{message}");
    assert!(message.contains("within 300 ms"), "{message}");
    // Otherwise --timeout applies.
    let got = h2_call(bridge, METHOD, &[], frame_of(0, b"x")).await;
    let (status, message) = got.grpc_status();
    assert_eq!(status, "4", "{message}");
    assert!(message.contains("within 2 s"), "{message}");

    // Nothing listening at all.
    let gone = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let gone_addr = gone.local_addr().expect("addr");
    drop(gone);
    let bridge = bridge_to(&format!("http://{gone_addr}"), |_| {}).await;
    let got = h2_call(bridge, METHOD, &[], frame_of(0, b"x")).await;
    let (status, message) = got.grpc_status();
    assert_eq!(status, "14", "{message}");
    assert!(
        message.contains(&format!(
            "cannot connect to the control plane at http://{gone_addr}"
        )),
        "{message}"
    );
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[tokio::test]
async fn http1_gets_health_and_a_clear_refusal() {
    let bridge = bridge_to("http://127.0.0.1:9", |_| {}).await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client
        .get(format!("http://{bridge}/healthz").parse().expect("uri"))
        .await
        .expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
    let req = Request::post(format!("http://{bridge}{METHOD}"))
        .header("content-type", "application/grpc-web")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let resp = client.request(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

// ---------------------------------------------------------------------------------------
// HTTPS
// ---------------------------------------------------------------------------------------

/// testdata/: a CA and a `localhost`/127.0.0.1 server certificate it signed (P-256, valid
/// for 100 years), made with `openssl req -x509 ...` and `openssl x509 -req ...`.
const CA_PEM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/testdata/ca.pem");
const SERVER_PEM: &[u8] = include_bytes!("testdata/server.pem");
const SERVER_KEY: &[u8] = include_bytes!("testdata/server.key");

/// A gRPC-web server over TLS offering `alpn`; answers every call with one message and
/// OK, recording the HTTP version of each request.
async fn tls_upstream(alpn: &[&[u8]]) -> (SocketAddr, Arc<Mutex<Vec<http::Version>>>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs = CertificateDer::pem_slice_iter(SERVER_PEM)
        .collect::<Result<Vec<_>, _>>()
        .expect("server certificate");
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY).expect("server key");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server TLS config");
    tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let versions = Arc::new(Mutex::new(Vec::new()));
    let record = versions.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        record.lock().expect("lock").push(req.version());
                        async move {
                            let mut body = frame_of(0, b"over tls");
                            body.extend(frame_of(FLAG_TRAILERS, b"grpc-status: 0\r\n"));
                            Ok::<_, Infallible>(web_response(body, &[]))
                        }
                    });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, versions)
}

#[tokio::test]
async fn https_with_http2_or_http1_by_alpn() {
    for (alpn, want) in [
        (&[&b"h2"[..], b"http/1.1"][..], http::Version::HTTP_2),
        (&[&b"http/1.1"[..]][..], http::Version::HTTP_11),
    ] {
        let (up, versions) = tls_upstream(alpn).await;
        let bridge = bridge_to(&format!("https://localhost:{}", up.port()), |c| {
            c.ca_file = Some(CA_PEM.into());
        })
        .await;
        let got = h2_call(bridge, METHOD, &[], frame_of(0, b"x")).await;
        assert_eq!(got.grpc_status().0, "0", "{:?}", got.grpc_status());
        assert_eq!(got.body, Bytes::from(frame_of(0, b"over tls")));
        assert_eq!(*versions.lock().expect("lock"), vec![want]);
    }
}

#[tokio::test]
async fn https_to_an_untrusted_certificate_is_unavailable() {
    let (up, versions) = tls_upstream(&[b"h2", b"http/1.1"]).await;
    let url = format!("https://localhost:{}", up.port());
    // The system's CAs do not include the test CA (skipped where there are none at all).
    let mut config = Config::new(url.parse().expect("url"));
    config.timeout = Duration::from_secs(5);
    let bridge = match Bridge::new(config) {
        Ok(bridge) => bridge,
        Err(err) => {
            eprintln!("skipped: {err}");
            return;
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(bridge.serve(listener, std::future::pending(), Duration::from_secs(1)));
    let got = h2_call(addr, METHOD, &[], frame_of(0, b"x")).await;
    let (status, message) = got.grpc_status();
    assert_eq!(status, "14", "{message}");
    assert!(
        message.contains(&format!("cannot connect to the control plane at {url}")),
        "{message}"
    );
    assert!(message.contains("certificate"), "{message}");
    assert!(versions.lock().expect("lock").is_empty());
}

#[test]
fn bad_ca_files_fail_at_start() {
    let upstream: wisp_bridge::Upstream = "https://localhost".parse().expect("url");
    for (path, needle) in [
        ("/nonexistent/ca.pem", "No such file"),
        (
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/testdata/server.key"),
            "no PEM certificate",
        ),
    ] {
        let mut config = Config::new(upstream.clone());
        config.ca_file = Some(path.into());
        let err = Bridge::new(config).expect_err("a bad CA file");
        assert!(err.to_string().contains(needle), "{path}: {err}");
    }
}

/// A CA file or key that cannot be read keeps the I/O error as the source; the message
/// is unchanged.
#[test]
fn bad_tls_files_keep_their_cause_as_the_source() {
    let upstream: wisp_bridge::Upstream = "https://localhost".parse().expect("url");
    let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/testdata");
    let source_of = |err: &wisp_bridge::ConfigError| {
        std::error::Error::source(err)
            .unwrap_or_else(|| panic!("no source: {err:?}"))
            .to_string()
    };

    let mut config = Config::new(upstream.clone());
    config.ca_file = Some("/nonexistent/ca.pem".into());
    let err = Bridge::new(config).expect_err("no CA file");
    let io = std::error::Error::source(&err)
        .and_then(|e| e.downcast_ref::<std::io::Error>())
        .unwrap_or_else(|| panic!("not an I/O error below: {err:?}"));
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(
        err.to_string(),
        format!("CA file /nonexistent/ca.pem: {}", source_of(&err))
    );

    let mut config = Config::new(upstream);
    config.inbound_tls = Some(wisp_bridge::inbound::InboundTls {
        cert: format!("{testdata}/server.pem").into(),
        key: "/nonexistent/server.key".into(),
    });
    let err = Bridge::new(config).expect_err("no key file");
    assert!(
        std::error::Error::source(&err).is_some_and(|e| e.is::<std::io::Error>()),
        "{err:?}"
    );
}
