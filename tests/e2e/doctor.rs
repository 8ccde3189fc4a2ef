//! `wisp doctor URL` against the deployment emulated on one machine (the real function
//! bootstraps behind the ALB emulator, state on the AWS stand-ins), reached through a TLS
//! front as a user's machine reaches the load balancer: all checks pass on a healthy
//! deployment, and each injected fault is named with its fix and fails the exit status: a
//! certificate for another name, a missing listener rule.
//!
//! A function without one of its IAM grants: the functions run on the IAM-enforcing
//! moto_server with the grants derived from infra/terraform/iam.tf
//! (tests/e2e/support/iam.rs), web-api's `s3:PutObject` on the revocations object taken
//! away; doctor's revocation check, given an admin's session, must fail naming the grant
//! and the files that give it.
//!
//! tests/fixtures/doctor: a test CA and two server certificates it signed (P-256, 100
//! years), for `localhost` and for `other.example.com`, made with `openssl req -x509` and
//! `openssl x509 -req`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

use crate::support::iam::{Flavour, IamStack};
use crate::support::{self, Wisp, web};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/doctor")
        .join(name)
}

/// A TLS front (the load balancer's HTTPS listener) with the certificate `name`, passing
/// the decrypted bytes to `backend` (the ALB emulator); its port.
async fn tls_front(backend: SocketAddr, name: &str) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pem = std::fs::read(fixture(&format!("{name}.pem"))).expect("certificate");
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate PEM");
    let key = PrivateKeyDer::from_pem_file(fixture(&format!("{name}.key"))).expect("key PEM");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server certificate");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the TLS front");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut alb) = TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut alb).await;
            });
        }
    });
    port
}

/// `wisp doctor <url> --ca-file <test CA> --json [more]`: exit status and the report.
async fn doctor(url: &str, more: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec![
        "doctor".to_string(),
        url.to_string(),
        "--ca-file".into(),
        fixture("ca.pem").display().to_string(),
        "--json".into(),
    ];
    args.extend(more.iter().map(|s| s.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_wisp"))
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run wisp doctor")
    })
    .await
    .expect("wisp doctor ran");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("wisp doctor printed no JSON ({e}): {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

/// The checks with an outcome, by name.
fn outcomes<'a>(report: &'a serde_json::Value, outcome: &str) -> Vec<&'a str> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["outcome"] == outcome)
        .map(|c| c["name"].as_str().unwrap_or_default())
        .collect()
}

fn check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn doctor_passes_a_healthy_deployment_and_names_each_fault() {
    let test = "doctor_passes_a_healthy_deployment_and_names_each_fault";
    let Some(wisp) = Wisp::start_lambda(test) else {
        return;
    };
    // A console: index.html naming a hashed bundle, which the http function redirects to
    // the bucket.
    let console = tempfile::tempdir().expect("console dir");
    std::fs::create_dir_all(console.path().join("assets")).expect("assets dir");
    std::fs::write(
        console.path().join("index.html"),
        r#"<!doctype html><html><head><script type="module" src="/assets/index-5f3c2a1b.js"></script></head><body><div id="root"></div></body></html>"#,
    )
    .expect("index.html");
    std::fs::write(
        console.path().join("assets/index-5f3c2a1b.js"),
        "console.log(1)",
    )
    .expect("bundle");
    wisp.cli_json(&[
        "console",
        "upload",
        console.path().to_str().expect("UTF-8 path"),
    ]);

    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let login = wisp
        .login_static(support::QUICKSTART, &username, &password)
        .await;
    let session =
        web::cookie_value(web::set_cookie(&login, "token").expect("a session cookie")).to_string();

    let good = tls_front(wisp.addr(), "localhost").await;
    let wrong_name = tls_front(wisp.addr(), "other.example.com").await;
    let url = format!("https://localhost:{good}");

    // Healthy: every check passes, the revocation one included.
    let (code, report, stderr) = doctor(
        &url,
        &["--session", &session, "--project", support::QUICKSTART],
    )
    .await;
    assert_eq!(
        outcomes(&report, "failed"),
        Vec::<&str>::new(),
        "{report:#}\n{stderr}"
    );
    assert_eq!(
        outcomes(&report, "skipped"),
        Vec::<&str>::new(),
        "{report:#}"
    );
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    for name in [
        "dns",
        "tls",
        "route /grpc.service.pipedservice.PipedService",
        "route /pipe.api.service.apiservice.APIService",
        "route /grpc.service.webservice.WebService",
        "console index.html",
        "console asset",
        "login page",
        "revocation",
    ] {
        assert_eq!(check(&report, name)["outcome"], "ok", "{name}: {report:#}");
    }
    assert!(
        check(&report, "console asset")["detail"]
            .as_str()
            .is_some_and(|d| d.contains("/assets/index-5f3c2a1b.js") && d.contains("redirected")),
        "{report:#}"
    );

    // A certificate for another name: TLS fails, and nothing past it is tried.
    let (code, report, _) = doctor(&format!("https://localhost:{wrong_name}"), &[]).await;
    assert_ne!(code, 0, "{report:#}");
    assert_eq!(outcomes(&report, "failed"), vec!["tls"], "{report:#}");
    let tls = check(&report, "tls");
    assert!(
        tls["detail"]
            .as_str()
            .is_some_and(|d| d.contains("not valid for name") && d.contains("other.example.com")),
        "{report:#}"
    );
    assert!(
        tls["fix"]
            .as_str()
            .is_some_and(|f| f.contains("must cover localhost")),
        "{report:#}"
    );

    // A missing listener rule: APIService's paths reach the http function, whose answer is
    // no gRPC answer; the other routes still pass.
    front.remove_route("wisp-api");
    let (code, report, _) = doctor(&url, &[]).await;
    assert_ne!(code, 0, "{report:#}");
    assert_eq!(
        outcomes(&report, "failed"),
        vec![
            "route /grpc.service.apiservice.APIService",
            "route /pipe.api.service.apiservice.APIService"
        ],
        "{report:#}"
    );
    let route = check(&report, "route /grpc.service.apiservice.APIService");
    assert!(
        route["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("not a gRPC answer")),
        "{report:#}"
    );
    assert!(
        route["fix"]
            .as_str()
            .is_some_and(|f| f.contains("to the api function")),
        "{report:#}"
    );
    assert_eq!(
        check(&report, "route /grpc.service.pipedservice.PipedService")["outcome"],
        "ok"
    );
}

/// A function without one of its grants: web-api may not write the revocations object,
/// so the throwaway API key doctor disables is not refused by the api function. Doctor
/// names the missing grant and where it is given; the routes still pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn doctor_names_a_missing_grant() {
    let Some(stack) = IamStack::start(
        "doctor_names_a_missing_grant",
        Flavour::Terraform,
        |derived| derived.remove_grant("web-api", "s3:PutObject", "revocations.json"),
    ) else {
        return;
    };
    let wisp = &stack.wisp;
    let front = wisp.lambda().expect("running as Lambda functions");
    let (username, password) = front.admin.clone().expect("the static admin");
    let login = wisp
        .login_static(support::QUICKSTART, &username, &password)
        .await;
    let session =
        web::cookie_value(web::set_cookie(&login, "token").expect("a session cookie")).to_string();
    let port = tls_front(wisp.addr(), "localhost").await;
    let (code, report, stderr) = doctor(
        &format!("https://localhost:{port}"),
        &["--session", &session, "--project", support::QUICKSTART],
    )
    .await;
    assert_ne!(code, 0, "{report:#}\n{stderr}");
    let revocation = check(&report, "revocation");
    assert_eq!(revocation["outcome"], "failed", "{report:#}");
    let fix = revocation["fix"].as_str().unwrap_or_default();
    assert!(
        fix.contains("s3:PutObject") && fix.contains("revocations.json") && fix.contains("iam.tf"),
        "the fix names the grant and the IaC file: {report:#}"
    );
    for name in [
        "dns",
        "tls",
        "route /grpc.service.pipedservice.PipedService",
        "route /grpc.service.apiservice.APIService",
        "route /grpc.service.webservice.WebService",
    ] {
        assert_eq!(check(&report, name)["outcome"], "ok", "{name}: {report:#}");
    }
    // The refusal doctor saw is moto's, of that grant.
    assert!(
        stack
            .access_denied()
            .iter()
            .any(|d| d.starts_with("web-api: s3:PutObject") && d.contains("revocations.json")),
        "{:?}",
        stack.access_denied()
    );
}
