//! `wisp serve --tls-cert FILE --tls-key FILE`: upstream's PipedService over gRPC (HTTP/2
//! negotiated by ALPN) and the console's HTTP side (HTTP/1.1) over TLS on the one port,
//! with clients that trust only the test CA (tests/fixtures/tls); the certificate files
//! replaced while a connection is open: a new connection gets the new certificate, the
//! open one keeps working; bad files refused at start; and the warning plaintext on a
//! non-loopback address gives.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tonic::transport::Endpoint;
use wisp_proto::pipedservice as ps;
use wisp_proto::pipedservice::piped_service_client::PipedServiceClient;

use support::{Authorization, QUICKSTART, Transport, Wisp, ok};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

fn leaf(name: &str) -> CertificateDer<'static> {
    let pem = std::fs::read(fixture(name)).expect("read the certificate");
    CertificateDer::pem_slice_iter(&pem)
        .next()
        .expect("a certificate")
        .expect("PEM")
}

/// A TLS client trusting the test CA only, offering `alpn`.
fn client_config(alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(leaf("ca.pem")).expect("the test CA");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

type TlsStream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A TLS connection to `localhost:port`, verified against the test CA.
async fn tls_connect(port: u16, alpn: &[u8]) -> Result<TlsStream, std::io::Error> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let connector = tokio_rustls::TlsConnector::from(client_config(alpn));
    let name = ServerName::try_from("localhost").expect("a name");
    connector.connect(name, tcp).await
}

/// The certificate the server presented on `stream`.
fn presented(stream: &TlsStream) -> CertificateDer<'static> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .expect("a server certificate")
        .clone()
        .into_owned()
}

/// A PipedService client over TLS (h2 by ALPN), and the certificates its connections
/// were shown, one per connection made.
async fn grpc_over_tls(
    port: u16,
    authorization: &str,
) -> (
    PipedServiceClient<tonic::service::interceptor::InterceptedService<Transport, Authorization>>,
    Arc<Mutex<Vec<CertificateDer<'static>>>>,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let connector = tower::service_fn(move |_: http::Uri| {
        let record = record.clone();
        async move {
            let stream = tls_connect(port, b"h2").await?;
            assert_eq!(
                stream.get_ref().1.alpn_protocol(),
                Some(&b"h2"[..]),
                "the server negotiates HTTP/2"
            );
            record.lock().expect("seen").push(presented(&stream));
            Ok::<_, std::io::Error>(TokioIo::new(stream))
        }
    });
    let channel = Endpoint::from_shared(format!("http://localhost:{port}"))
        .expect("an endpoint")
        .connect_with_connector(connector)
        .await
        .expect("connect over TLS");
    let transport: Transport = support::boxed_channel(channel);
    let client =
        PipedServiceClient::with_interceptor(transport, Authorization::new(Some(authorization)));
    (client, seen)
}

/// An HTTP/1.1 GET over TLS: the status and body.
async fn https_get(port: u16, path: &str) -> (http::StatusCode, String) {
    let stream = tls_connect(port, b"http/1.1").await.expect("TLS");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(conn);
    let resp = sender
        .send_request(
            http::Request::get(path)
                .header("host", format!("localhost:{port}"))
                .body(Full::new(Bytes::new()))
                .expect("request"),
        )
        .await
        .expect("an answer");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// `wisp serve` with TLS from a copy of server A's files (in its data directory, where a
/// test can replace them).
fn start_tls(extra: &[&str]) -> (Wisp, PathBuf, PathBuf) {
    let dir = support::empty_data_dir();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::copy(fixture("server-a.pem"), &cert).expect("copy the certificate");
    std::fs::copy(fixture("server-a.key"), &key).expect("copy the key");
    let mut args: Vec<std::ffi::OsString> = vec![
        "--tls-cert".into(),
        cert.clone().into(),
        "--tls-key".into(),
        key.clone().into(),
    ];
    args.extend(extra.iter().map(Into::into));
    (Wisp::start_in(dir, &args), cert, key)
}

#[tokio::test]
async fn piped_service_and_console_over_tls() {
    let (wisp, _, _) = start_tls(&[]);
    let port = wisp.addr().port();
    let piped = wisp.add_piped(QUICKSTART, "tls");
    let (mut client, seen) = grpc_over_tls(port, &piped.authorization()).await;
    ok(client
        .list_applications(ps::ListApplicationsRequest::default())
        .await);
    assert_eq!(
        seen.lock().expect("seen").as_slice(),
        &[leaf("server-a.pem")]
    );

    // The console's side over HTTP/1.1 on the same port.
    let (status, body) = https_get(port, "/healthz").await;
    assert!(status.is_success(), "{status} {body}");

    // Plaintext on a TLS port gets no HTTP answer.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut plain = tokio::net::TcpStream::connect(wisp.addr())
            .await
            .expect("connect");
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .expect("write");
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(60), plain.read_to_end(&mut answer))
            .await
            .expect("the server closes the connection");
        assert!(!answer.starts_with(b"HTTP/"), "{answer:?}");
    }
    assert!(
        !wisp.server().log_text().contains("serving plaintext"),
        "no plaintext warning with TLS"
    );
}

/// New certificate files are served to new connections; a connection made before keeps
/// working on its session.
#[tokio::test]
async fn a_replaced_certificate_is_served_without_dropping_connections() {
    let (wisp, cert, key) = start_tls(&[]);
    let port = wisp.addr().port();
    let piped = wisp.add_piped(QUICKSTART, "tls");
    let (mut before, seen) = grpc_over_tls(port, &piped.authorization()).await;
    ok(before
        .list_applications(ps::ListApplicationsRequest::default())
        .await);

    // The key first, then the certificate, as a renewal writes them: the half-written
    // pair in between is not served.
    std::fs::copy(fixture("server-b.key"), &key).expect("replace the key");
    std::fs::copy(fixture("server-b.pem"), &cert).expect("replace the certificate");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stream = tls_connect(port, b"http/1.1").await.expect("TLS");
        if presented(&stream) == leaf("server-b.pem") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "new connections still get the old certificate"
        );
        tokio::task::yield_now().await;
    }

    // The connection made before still works, and it is the same connection.
    for _ in 0..3 {
        ok(before
            .list_applications(ps::ListApplicationsRequest::default())
            .await);
    }
    assert_eq!(
        seen.lock().expect("seen").as_slice(),
        &[leaf("server-a.pem")]
    );
    // A new client gets B.
    let (mut after, seen) = grpc_over_tls(port, &piped.authorization()).await;
    ok(after
        .list_applications(ps::ListApplicationsRequest::default())
        .await);
    assert_eq!(
        seen.lock().expect("seen").as_slice(),
        &[leaf("server-b.pem")]
    );
    assert!(
        wisp.server()
            .log_text()
            .contains("TLS certificate reloaded")
    );
}

#[test]
fn bad_tls_files_are_refused_at_start() {
    let dir = support::empty_data_dir();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a key").expect("write");
    let cert = fixture("server-a.pem");
    for (cert, key, needle) in [
        (cert.clone(), junk.clone(), "no PEM private key"),
        (cert.clone(), fixture("server-b.key"), "does not fit"),
        (junk.clone(), fixture("server-a.key"), "no PEM certificate"),
    ] {
        let out = support::run_cli(
            dir.path(),
            &[
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--tls-cert",
                &cert.to_string_lossy(),
                "--tls-key",
                &key.to_string_lossy(),
            ],
        );
        assert_eq!(out.code, 2, "{out:?}");
        assert!(out.stderr.contains(needle), "{needle}: {out:?}");
        assert!(!out.stderr.contains("not a key"), "{out:?}");
    }
    let out = support::run_cli(
        dir.path(),
        &["serve", "--tls-cert", &cert.to_string_lossy()],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("--tls-key"), "{out:?}");
}

/// Plaintext on an address other machines reach is allowed, with a warning at start.
#[tokio::test]
async fn plaintext_on_a_network_address_is_warned_about() {
    let dir = support::empty_data_dir();
    let wisp = Wisp::start_in(
        dir,
        &[
            "--addr".into(),
            "0.0.0.0:0".into(),
            "--allow-default-password".into(),
        ],
    );
    assert!(
        wisp.server().log_text().contains("serving plaintext"),
        "{}",
        wisp.server().log_text()
    );
    let local = support::Wisp::start();
    assert!(!local.server().log_text().contains("serving plaintext"));
}
