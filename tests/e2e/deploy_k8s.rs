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

const RELEASE: &str = "pipecd";
const NAMESPACE: &str = "pipecd";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn render(values: &str) -> String {
    let out = Command::new(root().join("scripts/helm-render"))
        .arg(root().join("deploy/helm/wisp-bridge"))
        .arg("-f")
        .arg(root().join("deploy/helm/examples").join(values))
        .args(["--release", RELEASE, "--namespace", NAMESPACE])
        .output()
        .expect("run scripts/helm-render");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
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
        let scheme = container["readinessProbe"]["httpGet"]["scheme"].as_str();
        assert_eq!(scheme == Some("HTTPS"), tls);
        assert_eq!(from["namespaceSelector"].is_object(), tls);
    }
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
