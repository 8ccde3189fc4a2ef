//! The Helm chart of `wisp bridge` (deploy/helm/wisp-bridge) with the example values in
//! deploy/helm/examples: rendered by `scripts/helm-render` (no `helm` binary can be
//! installed here; the renderer covers the chart's subset of Helm's template language
//! and tests itself), validated against the Kubernetes API's JSON schemas
//! (`kubernetes-validate --strict`, PyPI; `scripts/test` installs it), checked for what
//! the cluster relies on, and its container arguments run by the real `wisp bridge`,
//! plaintext and TLS, in front of a real `wisp serve`.

use crate::support;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use support::Wisp;
use support::bridge::Bridge;

use crate::metrics::Scrape;

const RELEASE: &str = "pipecd";
const NAMESPACE: &str = "pipecd";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn render(values: &str) -> String {
    render_with(values, &[]).expect("the chart renders")
}

/// The chart rendered with `values` and `--set` assignments; the renderer's error when it
/// refuses.
fn render_with(values: &str, sets: &[&str]) -> Result<String, String> {
    let mut command = Command::new(root().join("scripts/helm-render"));
    command
        .arg(root().join("deploy/helm/wisp-bridge"))
        .arg("-f")
        .arg(root().join("deploy/helm/examples").join(values))
        .args(["--release", RELEASE, "--namespace", NAMESPACE]);
    for set in sets {
        command.args(["--set", set]);
    }
    let out = command.output().expect("run scripts/helm-render");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8(out.stdout).expect("UTF-8"))
}

fn documents(text: &str) -> Vec<serde_json::Value> {
    text.split("\n---\n")
        .map(|doc| doc.trim_start_matches("---\n"))
        .filter(|doc| !doc.trim().is_empty())
        .map(|doc| serde_norway::from_str(doc).unwrap_or_else(|e| panic!("{e}:\n{doc}")))
        .collect()
}

fn kind<'a>(docs: &'a [serde_json::Value], kind: &str) -> &'a serde_json::Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

/// `kubernetes-validate --strict` on `text` (the schemas of Kubernetes 1.30).
fn validate(text: &str) {
    let have = Command::new("kubernetes-validate")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        assert!(
            std::env::var("WISP_REQUIRE_IMAGE_TESTS").as_deref() != Ok("1"),
            "kubernetes-validate is not installed (pip install kubernetes-validate)"
        );
        eprintln!("note: kubernetes-validate is not installed: schemas not checked");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, text).expect("write");
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "-k", "1.30.0"])
        .arg(&file)
        .output()
        .expect("run kubernetes-validate");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}\n{text}");
    assert_eq!(report.matches("passed for resource").count(), 4, "{report}");
}

#[test]
fn the_renderer_passes_its_own_tests() {
    let out = Command::new(root().join("scripts/helm-render"))
        .arg("--self-test")
        .output()
        .expect("run scripts/helm-render");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn chart_renders_valid_kubernetes_objects() {
    for values in ["bridge-plaintext.yaml", "bridge-tls.yaml"] {
        let text = render(values);
        validate(&text);
        let docs = documents(&text);
        let deployment = kind(&docs, "Deployment");
        assert_eq!(deployment["spec"]["replicas"], 2);
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        let container = &pod["containers"][0];
        assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert!(container["resources"]["requests"]["cpu"].is_string());
        assert!(container["resources"]["requests"]["memory"].is_string());
        assert!(
            container["image"]
                .as_str()
                .is_some_and(|i| i.contains("@sha256:")),
            "pinned by digest"
        );
        // Delay + grace fit in the pod's grace period.
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);

        let service = kind(&docs, "Service");
        assert_eq!(service["metadata"]["name"], "pipecd-wisp-bridge");
        assert_eq!(service["spec"]["ports"][0]["port"], 9090);
        // Metrics on a port of their own, plain HTTP whatever the gRPC port serves.
        assert_eq!(service["spec"]["ports"][1]["name"], "metrics");
        assert_eq!(service["spec"]["ports"][1]["port"], 9085);
        assert_eq!(container["ports"][1]["name"], "metrics");
        assert!(
            docs.iter().all(|d| d["kind"] != "ServiceMonitor"),
            "the ServiceMonitor is off by default"
        );
        assert_eq!(
            kind(&docs, "PodDisruptionBudget")["spec"]["minAvailable"],
            1
        );
        let policy = kind(&docs, "NetworkPolicy");
        let from = &policy["spec"]["ingress"][0]["from"][0];
        assert_eq!(
            from["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
            "piped"
        );
        assert_eq!(
            policy["spec"]["podSelector"],
            deployment["spec"]["selector"]
        );
        // The pipeds reach the gRPC port only, Prometheus the metrics port only.
        assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], 9090);
        let scrapers = &policy["spec"]["ingress"][1];
        assert_eq!(
            scrapers["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
            "prometheus"
        );
        assert_eq!(scrapers["ports"].as_array().map(Vec::len), Some(1));
        assert_eq!(scrapers["ports"][0]["port"], 9085);

        let tls = values.contains("tls");
        let args: Vec<&str> = container["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string"))
            .collect();
        assert_eq!(
            args.iter().any(|a| a.starts_with("--tls-cert=")),
            tls,
            "{args:?}"
        );
        assert!(args.contains(&"--admin-addr=0.0.0.0:9085"), "{args:?}");
        let scheme = container["readinessProbe"]["httpGet"]["scheme"].as_str();
        assert_eq!(scheme == Some("HTTPS"), tls);
        assert_eq!(from["namespaceSelector"].is_object(), tls);
    }
}

/// `scripts/lib/json_schema_check.py` on the ServiceMonitors in `text`: `Ok` when valid,
/// else its report; `None` when jsonschema (a dependency of kubernetes-validate) is
/// missing and the image tests are not required.
fn check_service_monitor(text: &str) -> Option<Result<(), String>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, text).expect("write");
    let have = Command::new("python3")
        .args(["-c", "import jsonschema, yaml"])
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        assert!(
            std::env::var("WISP_REQUIRE_IMAGE_TESTS").as_deref() != Ok("1"),
            "python3's jsonschema is not installed (pip install kubernetes-validate)"
        );
        eprintln!("note: jsonschema is not installed: the ServiceMonitor is not checked");
        return None;
    }
    let out = Command::new("python3")
        .arg(root().join("scripts/lib/json_schema_check.py"))
        .arg(root().join("deploy/helm/schemas/servicemonitor-v1.json"))
        .arg("ServiceMonitor")
        .arg(&file)
        .output()
        .expect("run json_schema_check.py");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(if out.status.success() {
        Ok(())
    } else {
        Err(report)
    })
}

/// The optional ServiceMonitor: rendered when asked for, valid as the Prometheus
/// Operator's CRD documents it, and pointing at the Service's metrics port.
#[test]
fn service_monitor_is_optional_and_valid() {
    let sets = [
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
    ];
    for values in ["bridge-plaintext.yaml", "bridge-tls.yaml"] {
        let text = render_with(values, &sets).expect("renders");
        // The Kubernetes objects are still valid (the ServiceMonitor is beyond its schemas).
        validate(&text);
        let docs = documents(&text);
        let monitor = kind(&docs, "ServiceMonitor");
        assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(
            monitor["metadata"]["labels"]["release"],
            "kube-prometheus-stack"
        );
        let service = kind(&docs, "Service");
        // Its selector picks the Service, its endpoint names the Service's metrics port.
        let selector = monitor["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("matchLabels");
        for (key, value) in selector {
            assert_eq!(&service["metadata"]["labels"][key], value, "{key}");
        }
        assert_eq!(
            monitor["spec"]["namespaceSelector"]["matchNames"][0],
            NAMESPACE
        );
        let endpoint = &monitor["spec"]["endpoints"][0];
        assert_eq!(endpoint["path"], "/metrics");
        assert_eq!(endpoint["scheme"], "http");
        let port = endpoint["port"].as_str().expect("port name");
        assert!(
            service["spec"]["ports"]
                .as_array()
                .expect("ports")
                .iter()
                .any(|p| p["name"] == port),
            "the Service has no port {port}"
        );

        let Some(checked) = check_service_monitor(&text) else {
            return;
        };
        checked.unwrap_or_else(|report| panic!("{report}\n{text}"));
        // The check can fail: a duration the CRD's pattern refuses, a misspelt field.
        for (good, bad) in [
            ("interval: 30s", "interval: 30 seconds"),
            ("scrapeTimeout:", "scrapeTimeOut:"),
        ] {
            let broken = text.replace(good, bad);
            assert_ne!(broken, text);
            let report = check_service_monitor(&broken)
                .expect("checked")
                .expect_err("an invalid ServiceMonitor passed");
            assert!(report.contains("spec.endpoints.0"), "{report}");
        }
    }

    // Without the metrics port there is nothing to monitor: refused, not rendered broken.
    let err = render_with(
        "bridge-plaintext.yaml",
        &[
            "metrics.enabled=false",
            "metrics.serviceMonitor.enabled=true",
        ],
    )
    .expect_err("a ServiceMonitor without metrics");
    assert!(err.contains("needs metrics.enabled"), "{err}");
    let text = render_with("bridge-plaintext.yaml", &["metrics.enabled=false"]).expect("renders");
    assert!(!text.contains("--admin-addr") && !text.contains("name: metrics"));
}

/// The piped chart values point at the Service the bridge chart renders.
#[test]
fn piped_values_point_at_the_bridge_service() {
    for (piped, insecure) in [("piped-plaintext.yaml", true), ("piped-tls.yaml", false)] {
        let text =
            std::fs::read_to_string(root().join("deploy/helm/examples").join(piped)).expect("read");
        let values: serde_json::Value = serde_norway::from_str(&text).expect("YAML");
        assert_eq!(values["args"]["insecure"], insecure, "{piped}");
        let config: serde_json::Value =
            serde_norway::from_str(values["config"]["data"].as_str().expect("config.data"))
                .expect("piped config");
        assert_eq!(config["kind"], "Piped");
        assert_eq!(
            config["spec"]["apiAddress"],
            format!("{RELEASE}-wisp-bridge.{NAMESPACE}.svc.cluster.local:9090")
        );
    }
}

/// The container's arguments, minus `bridge`, `--listen` and `--upstream` (the test's
/// own), with the Secret mount paths mapped to `files`.
fn chart_args(values: &str, files: &std::path::Path) -> Vec<String> {
    let docs = documents(&render(values));
    let container = &kind(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string").to_string())
        .filter(|a| a != "bridge" && !a.starts_with("--listen=") && !a.starts_with("--upstream="))
        // The metrics port on loopback, a free one: tests run side by side.
        .map(|a| {
            if a.starts_with("--admin-addr=") {
                "--admin-addr=127.0.0.1:0".to_string()
            } else {
                a
            }
        })
        .map(|a| a.replace("/etc/wisp-bridge/tls", &files.display().to_string()))
        .collect()
}

#[tokio::test]
async fn the_bridge_runs_with_the_charts_arguments() {
    let wisp = Wisp::start();
    let upstream = format!("http://{}", wisp.addr());
    let files = tempfile::tempdir().expect("tempdir");
    let testdata = root().join("shared/bridge/tests/testdata");
    std::fs::copy(testdata.join("server.pem"), files.path().join("tls.crt")).expect("copy");
    std::fs::copy(testdata.join("server.key"), files.path().join("tls.key")).expect("copy");

    // Plaintext: ready, as the kubelet's probe sees it.
    let args = chart_args("bridge-plaintext.yaml", files.path());
    let extra: Vec<&str> = args.iter().map(String::as_str).collect();
    let bridge = Bridge::start(&upstream, wisp.data_dir(), &extra);
    let (status, body) =
        support::http_request_to(bridge.addr(), http::Method::GET, "/readyz").await;
    assert_eq!((status.as_u16(), body.as_str()), (200, "ready"));

    // TLS: the probe (scheme HTTPS) gets ready over TLS, checked with the test CA.
    let args = chart_args("bridge-tls.yaml", files.path());
    assert!(args.iter().any(|a| a.starts_with("--tls-key=")), "{args:?}");
    let extra: Vec<&str> = args.iter().map(String::as_str).collect();
    let bridge = Bridge::start(&upstream, wisp.data_dir(), &extra);
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "--cacert"])
        .arg(testdata.join("ca.pem"))
        .arg(format!("https://localhost:{}/readyz", bridge.addr().port()))
        .output()
        .expect("run curl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ready",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The metrics the chart's port serves, as Prometheus gets them: a real Prometheus
/// (Debian's `prometheus`) scrapes the bridge's `/metrics` after piped calls went through
/// it, and finds them by service, method and code, with their latency histogram; a bridge
/// whose control plane is down counts the upstream errors.
#[tokio::test]
async fn prometheus_scrapes_the_bridge_metrics() {
    let test = "deploy_k8s::prometheus_scrapes_the_bridge_metrics";
    let wisp = Wisp::start();
    let upstream = format!("http://{}", wisp.addr());
    let files = tempfile::tempdir().expect("tempdir");
    let args = chart_args("bridge-plaintext.yaml", files.path());
    let extra: Vec<&str> = args.iter().map(String::as_str).collect();
    let bridge = Bridge::start(&upstream, wisp.data_dir(), &extra);

    let piped = wisp.add_piped(support::QUICKSTART, "scraped");
    let mut client = support::connect(
        bridge.addr(),
        support::Via::Grpc,
        Some(&piped.authorization()),
    )
    .await;
    for _ in 0..3 {
        client
            .report_stat(wisp_proto::pipedservice::ReportStatRequest {
                piped_stats: b"# TYPE up gauge\nup 1\n".to_vec(),
            })
            .await
            .expect("ReportStat through the bridge");
    }
    let mut stranger = support::connect(
        bridge.addr(),
        support::Via::Grpc,
        Some(&piped.authorization_with(support::QUICKSTART, "not-the-key")),
    )
    .await;
    let refused = stranger
        .report_stat(wisp_proto::pipedservice::ReportStatRequest::default())
        .await
        .expect_err("a wrong key");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    // The text itself: the families and their labels.
    let calls = "wisp_bridge_calls_total";
    let report_stat = [("service", "PipedService"), ("method", "ReportStat")];
    let with = |code: &'static str| {
        let mut labels = report_stat.to_vec();
        labels.push(("code", code));
        labels
    };
    let scrape = Scrape::at_addr(bridge.admin_addr()).await;
    assert_eq!(scrape.value(calls, &with("OK")), 3.0);
    assert_eq!(scrape.value(calls, &with("UNAUTHENTICATED")), 1.0);
    assert_eq!(scrape.value("wisp_bridge_calls_in_flight", &[]), 0.0);
    assert_eq!(
        scrape.value("wisp_bridge_call_duration_seconds", &report_stat),
        4.0
    );
    assert_eq!(scrape.sum("wisp_bridge_upstream_errors_total", &[]), 0.0);
    // The bridge's own families only: none of the server's (no calls are served here).
    let (_, text) =
        support::http_request_to(bridge.admin_addr(), http::Method::GET, "/metrics").await;
    assert!(!text.contains("wisp_grpc_"), "{text}");

    // A bridge whose control plane is down: UNAVAILABLE to the client, a connect error.
    let down = format!("http://127.0.0.1:{}", free_port());
    let orphan = Bridge::start(&down, wisp.data_dir(), &["--admin-addr", "127.0.0.1:0"]);
    let mut lost = support::connect(
        orphan.addr(),
        support::Via::Grpc,
        Some(&piped.authorization()),
    )
    .await;
    let failed = lost
        .report_stat(wisp_proto::pipedservice::ReportStatRequest::default())
        .await
        .expect_err("no control plane");
    assert_eq!(failed.code(), tonic::Code::Unavailable);
    let scrape = Scrape::at_addr(orphan.admin_addr()).await;
    assert_eq!(
        scrape.value(
            "wisp_bridge_upstream_errors_total",
            &[("reason", "connect")]
        ),
        1.0
    );
    assert_eq!(scrape.value(calls, &with("UNAVAILABLE")), 1.0);

    // A real Prometheus takes the scrape and answers queries over it.
    let Some(prometheus) = crate::hostile_tenants::Prometheus::start(test, bridge.admin_addr())
    else {
        return;
    };
    prometheus.wait_for("up{job=\"wisp\"}", "1").await;
    prometheus
        .wait_for(
            "wisp_bridge_calls_total{service=\"PipedService\",method=\"ReportStat\",code=\"OK\"}",
            "3",
        )
        .await;
    prometheus
        .wait_for("sum(wisp_bridge_calls_total{code!=\"OK\"})", "1")
        .await;
    prometheus
        .wait_for(
            "wisp_bridge_call_duration_seconds_bucket{method=\"ReportStat\",le=\"+Inf\"}",
            "4",
        )
        .await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

// ---------------------------------------------------------------------------------------
// A piped's TLS connection to the chart's Service
// ---------------------------------------------------------------------------------------

/// The Service's name as a piped in another namespace dials it: its `apiAddress` host,
/// and so the TLS server name (SNI) it sends and checks the certificate against.
const SERVICE_DNS: &str = "pipecd-wisp-bridge.pipecd.svc.cluster.local";

/// The CA certificates a Go program (a piped) trusts from `SSL_CERT_DIR`, read as Go's
/// crypto/x509 reads it on Linux: every entry of each `:`-separated directory, symlinks
/// followed (a Secret volume's files are symlinks into `..data/`) except those pointing
/// within the directory (hash links), every PEM certificate of each file, files without
/// one (the piped key beside it) ignored.
fn go_roots_from_cert_dir(ssl_cert_dir: &str) -> rustls::RootCertStore {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for dir in ssl_cert_dir.split(':').filter(|d| !d.is_empty()) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if let Ok(target) = std::fs::read_link(&path)
                && !target.to_string_lossy().contains('/')
            {
                continue;
            }
            let Ok(pem) = std::fs::read(&path) else {
                continue;
            };
            for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
                let _ = roots.add(cert);
            }
        }
    }
    roots
}

/// The piped's Secret volume as the kubelet lays it out (`secret.mountPath`,
/// /etc/piped-secret in upstream's chart): the files in a `..data` directory, symlinks
/// to them at the top. `ca` is the bridge CA's PEM.
fn piped_secret_volume(ca: &[u8]) -> tempfile::TempDir {
    let volume = tempfile::tempdir().expect("tempdir");
    let data = volume.path().join("..2026_11_26_00_00_00.000000000");
    std::fs::create_dir(&data).expect("mkdir");
    std::fs::write(data.join("piped-key"), "a piped key, not PEM").expect("write");
    std::fs::write(data.join("wisp-bridge-ca.crt"), ca).expect("write");
    std::os::unix::fs::symlink(
        data.file_name().expect("name"),
        volume.path().join("..data"),
    )
    .expect("symlink");
    for file in ["piped-key", "wisp-bridge-ca.crt"] {
        std::os::unix::fs::symlink(format!("..data/{file}"), volume.path().join(file))
            .expect("symlink");
    }
    volume
}

/// A TLS connection as grpc-go makes it for a piped with `insecure: false`: the roots of
/// `SSL_CERT_DIR`, the `apiAddress` host as server name, ALPN `h2` only.
async fn piped_tls_connect(
    bridge: std::net::SocketAddr,
    ssl_cert_dir: &str,
    server_name: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(go_roots_from_cert_dir(ssl_cert_dir))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).expect("a name");
    let tcp = tokio::net::TcpStream::connect(bridge).await?;
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
}

/// The certificate error a handshake failed with.
fn certificate_error(err: &std::io::Error) -> Option<rustls::CertificateError> {
    match err.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::InvalidCertificate(e) => Some(e.clone()),
        _ => None,
    }
}

/// A piped connecting to the chart's TLS bridge with its CA from `SSL_CERT_DIR` (what
/// deploy/helm/examples/piped-tls.yaml sets up, and docs/DEPLOY.md describes): the
/// bridge's certificate checks out against the CA in the piped's Secret volume for the
/// Service's DNS name, `h2` is negotiated and a piped call goes through to the control
/// plane. A CA that did not issue it (even one of the same name) and a name the
/// certificate does not carry are refused in the handshake, before any credential is
/// sent. No piped binary exists here: the client is this test's, doing what grpc-go
/// does (Go's crypto/x509 reading SSL_CERT_DIR, SNI and verification against the
/// `apiAddress` host, ALPN h2).
#[tokio::test]
async fn a_piped_trusts_the_bridge_by_ssl_cert_dir() {
    let wisp = Wisp::start();
    let upstream = format!("http://{}", wisp.addr());
    let testdata = root().join("shared/bridge/tests/testdata/cluster");
    let files = tempfile::tempdir().expect("tempdir");
    std::fs::copy(testdata.join("server.pem"), files.path().join("tls.crt")).expect("copy");
    std::fs::copy(testdata.join("server.key"), files.path().join("tls.key")).expect("copy");
    let args = chart_args("bridge-tls.yaml", files.path());
    let extra: Vec<&str> = args.iter().map(String::as_str).collect();
    let bridge = Bridge::start(&upstream, wisp.data_dir(), &extra);

    // The piped values of the example: SSL_CERT_DIR is the Secret's mount path.
    let piped_values: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(root().join("deploy/helm/examples/piped-tls.yaml")).expect("read"),
    )
    .expect("YAML");
    assert_eq!(piped_values["args"]["insecure"], false);
    assert_eq!(piped_values["envs"][0]["name"], "SSL_CERT_DIR");
    assert_eq!(piped_values["envs"][0]["value"], "/etc/piped-secret");
    let config: serde_json::Value = serde_norway::from_str(
        piped_values["config"]["data"]
            .as_str()
            .expect("config.data"),
    )
    .expect("piped config");
    assert_eq!(config["spec"]["apiAddress"], format!("{SERVICE_DNS}:9090"));

    let right = piped_secret_volume(&std::fs::read(testdata.join("ca.pem")).expect("read"));
    let right_dir = right.path().to_str().expect("UTF-8").to_string();
    let wrong = piped_secret_volume(&std::fs::read(testdata.join("other-ca.pem")).expect("read"));
    let wrong_dir = wrong.path().to_str().expect("UTF-8").to_string();
    // The Go reader finds the one CA, not the key beside it.
    assert_eq!(go_roots_from_cert_dir(&right_dir).len(), 1);

    // The right CA and the Service's name: h2, and a piped call through to the control
    // plane.
    let tls = piped_tls_connect(bridge.addr(), &right_dir, SERVICE_DNS)
        .await
        .expect("the handshake a piped makes");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    drop(tls);
    let piped = wisp.add_piped(support::QUICKSTART, "in-cluster");
    let addr = bridge.addr();
    let dir = right_dir.clone();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{SERVICE_DNS}:9090"))
        .expect("endpoint")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let dir = dir.clone();
            async move {
                piped_tls_connect(addr, &dir, SERVICE_DNS)
                    .await
                    .map(hyper_util::rt::TokioIo::new)
            }
        }))
        .await
        .expect("a gRPC channel over TLS");
    let mut client =
        wisp_proto::pipedservice::piped_service_client::PipedServiceClient::new(channel);
    let mut request = tonic::Request::new(wisp_proto::pipedservice::ReportStatRequest {
        piped_stats: b"# TYPE up gauge\nup 1\n".to_vec(),
    });
    request.metadata_mut().insert(
        "authorization",
        piped.authorization().parse().expect("header value"),
    );
    client
        .report_stat(request)
        .await
        .expect("ReportStat through the TLS bridge");

    // The wrong CA, though it bears the right CA's name: refused.
    let err = piped_tls_connect(bridge.addr(), &wrong_dir, SERVICE_DNS)
        .await
        .expect_err("a certificate from another CA");
    assert!(
        matches!(
            certificate_error(&err),
            Some(rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature)
        ),
        "{err}"
    );
    // The right CA, a name the certificate does not carry (another release's Service):
    // refused.
    let err = piped_tls_connect(
        bridge.addr(),
        &right_dir,
        "other-wisp-bridge.pipecd.svc.cluster.local",
    )
    .await
    .expect_err("a certificate for another name");
    assert!(
        matches!(
            certificate_error(&err),
            Some(
                rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. }
            )
        ),
        "{err}"
    );
    // No CA in the directory (SSL_CERT_DIR unset or wrong): nothing to trust it by.
    let empty = tempfile::tempdir().expect("tempdir");
    let err = piped_tls_connect(
        bridge.addr(),
        empty.path().to_str().expect("UTF-8"),
        SERVICE_DNS,
    )
    .await
    .expect_err("no CA");
    assert!(certificate_error(&err).is_some(), "{err}");
}
