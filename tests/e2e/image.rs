//! The container image (`scripts/image`) as a user gets it: built twice from one binary
//! (the same digest), pushed with skopeo to a registry (Debian's `docker-registry`,
//! `scripts/registry.sh`), pulled back by digest, unpacked with umoci, and its binary run
//! from the unpacked root filesystem as the image's user (65532): `wisp serve` answers
//! `/healthz` (in a chroot, and in runc with the root filesystem read-only), podman runs
//! the image by digest from the registry, and `wisp bridge` from the image carries
//! upstream-proto piped and pipectl calls to the Lambda functions behind the ALB emulator.
//!
//! The image holds `WISP_IMAGE_BINARY` when set (CI: the static release binary that
//! `scripts/image build` compiled), else this test build's own `wisp` (a debug build,
//! dynamically linked: the image then carries its interpreter and libraries), so that
//! the tests need no release build. Needs `WISP_TEST_REGISTRY` (`scripts/test` starts
//! one), skopeo, umoci and runc; otherwise the tests print a note and pass, unless
//! `WISP_REQUIRE_IMAGE_TESTS=1`.

use crate::support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use support::api::{registered_events_flow, setup_on};
use support::bridge::Bridge;
use support::{Via, Wisp, http_request_to, scenarios};

const REQUIRE_VAR: &str = "WISP_REQUIRE_IMAGE_TESTS";
/// The image's user and group.
const USER: &str = "65532:65532";
/// How long a process from the image may take to print its address.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

fn skip<T>(test: &str, what: &str) -> Option<T> {
    if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
        panic!("{test}: {what}, but {REQUIRE_VAR}=1 requires this test to run");
    }
    eprintln!("note: {test} skipped: {what}");
    None
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd`, which must succeed; its stdout.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The image, built, pushed, pulled back by digest and unpacked, once for all the tests.
struct Image {
    /// `sha256:...` of the image index.
    digest: String,
    /// `<registry>/<repository>@<digest>`.
    reference: String,
    /// The OCI layout skopeo pulled (this machine's platform), tag `pulled`.
    pulled: PathBuf,
    /// umoci's runtime bundle: `config.json` and `rootfs/`.
    bundle: PathBuf,
    /// Whether the binary in it is static.
    static_binary: bool,
    work: PathBuf,
}

static IMAGE: OnceLock<Option<Image>> = OnceLock::new();

fn image(test: &str) -> Option<&'static Image> {
    IMAGE.get_or_init(|| build_push_pull(test)).as_ref()
}

fn build_push_pull(test: &str) -> Option<Image> {
    let Some(registry) = std::env::var("WISP_TEST_REGISTRY")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        return skip(test, "WISP_TEST_REGISTRY is not set (scripts/registry.sh)");
    };
    for tool in ["skopeo", "umoci", "runc", "python3"] {
        if !have(tool) {
            return skip(test, &format!("{tool} is not installed"));
        }
    }
    let binary = std::env::var("WISP_IMAGE_BINARY")
        .ok()
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_wisp")), PathBuf::from);
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-tests");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("create the work directory");

    // Two builds of one commit and binary: one digest.
    let build = |name: &str| {
        let out = run(Command::new(repo_root().join("scripts/image"))
            .current_dir(repo_root())
            .args(["build", "--binary"])
            .arg(&binary)
            .arg("--out")
            .arg(work.join(name))
            .args(["--tag", "test"])
            .env("WISP_IMAGE_GZIP_LEVEL", "1"));
        out.lines().last().unwrap_or_default().trim().to_string()
    };
    let digest = build("oci-a");
    assert!(digest.starts_with("sha256:"), "{digest:?}");
    assert_eq!(build("oci-b"), digest, "two builds gave two digests");

    // Pushed with its digest kept, then read back by digest.
    let repository = format!("wisp-test-{}", uuid::Uuid::new_v4().simple());
    run(Command::new("skopeo")
        .args([
            "copy",
            "--all",
            "--preserve-digests",
            "--dest-tls-verify=false",
        ])
        .arg(format!("oci:{}:test", work.join("oci-a").display()))
        .arg(format!("docker://{registry}/{repository}:test")));
    let reference = format!("{registry}/{repository}@{digest}");
    let raw = run(Command::new("skopeo").args([
        "inspect",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{reference}"),
    ]));
    let index: serde_json::Value = serde_json::from_str(&raw).expect("the index as JSON");
    assert_eq!(
        index["mediaType"], "application/vnd.oci.image.index.v1+json",
        "{raw}"
    );
    let pulled = work.join("pulled");
    run(Command::new("skopeo")
        .args(["copy", "--src-tls-verify=false"])
        .arg(format!("docker://{reference}"))
        .arg(format!("oci:{}:pulled", pulled.display())));
    let bundle = work.join("bundle");
    run(Command::new("umoci")
        .arg("unpack")
        .arg("--image")
        .arg(format!("{}:pulled", pulled.display()))
        .arg(&bundle));
    let config = image_config(&pulled);
    let static_binary = config["config"]["Labels"]["dev.wisp.linking"] == "static";
    Some(Image {
        digest,
        reference,
        pulled,
        bundle,
        static_binary,
        work,
    })
}

fn image_config(layout: &Path) -> serde_json::Value {
    let text = run(Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci:{}:pulled", layout.display())));
    serde_json::from_str(&text).expect("the image config as JSON")
}

/// Spawns `cmd` (stdout piped) and waits for its `<prefix><addr>` line.
fn spawn_ready(cmd: &mut Command, prefix: &str) -> (Child, SocketAddr) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(line) => {
                if let Some(addr) = line.strip_prefix(prefix) {
                    return (child, addr.trim().parse().expect("an address"));
                }
            }
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{cmd:?} printed no {prefix:?} line: {err}");
            }
        }
    }
}

/// The image's binary run in its root filesystem as its user, with the image's
/// environment only: `wisp` as `chroot` runs it.
fn chroot_wisp(image: &Image) -> Command {
    // By its path: the child's environment (and PATH) is the image's.
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chroot (coreutils)");
    let mut cmd = Command::new(chroot);
    cmd.env_clear()
        .env("PATH", "/usr/local/bin")
        .env("HOME", "/home/wisp")
        .env("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
        .arg(format!("--userspec={USER}"))
        .arg(image.bundle.join("rootfs"))
        .arg("/usr/local/bin/wisp");
    cmd
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn image_is_reproducible_labelled_and_minimal() {
    let Some(image) = image("image_is_reproducible_labelled_and_minimal") else {
        return;
    };
    let config = image_config(&image.pulled);
    let c = &config["config"];
    assert_eq!(c["User"], USER, "{config}");
    assert_eq!(c["Entrypoint"][0], "/usr/local/bin/wisp", "{config}");
    let labels = &c["Labels"];
    let revision = run(Command::new("git")
        .current_dir(repo_root())
        .args(["rev-parse", "HEAD"]));
    assert_eq!(labels["org.opencontainers.image.revision"], revision.trim());
    assert_eq!(labels["org.opencontainers.image.version"], "0.1.0");
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert!(
        labels["org.opencontainers.image.source"].is_string(),
        "{labels}"
    );

    let rootfs = image.bundle.join("rootfs");
    // No shell, nothing but what the binary needs.
    assert!(!rootfs.join("bin").exists() && !rootfs.join("usr/bin").exists());
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).expect("/etc/passwd");
    assert!(passwd.contains("wisp:x:65532:65532:"), "{passwd}");
    assert!(!passwd.contains("/bin/sh"), "{passwd}");
    let ca = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt"))
        .expect("the CA bundle");
    assert!(ca.matches("BEGIN CERTIFICATE").count() > 50);
    assert_eq!(
        image.static_binary,
        !rootfs.join("lib64").exists() && !rootfs.join("lib").exists(),
        "a static binary comes alone; a dynamic one with its libraries"
    );

    // The SBOM: SPDX, the crates in the binary with their licences.
    let sbom: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(rootfs.join("usr/share/doc/wisp/sbom.spdx.json"))
            .expect("the SBOM"),
    )
    .expect("the SBOM as JSON");
    assert_eq!(sbom["spdxVersion"], "SPDX-2.3");
    let packages = sbom["packages"].as_array().expect("packages");
    for name in ["wisp", "wisp-bridge", "tokio", "rustls", "aws-sdk-dynamodb"] {
        let p = packages
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in the SBOM"));
        assert_ne!(p["licenseDeclared"], "NOASSERTION", "{p}");
    }
    assert!(
        !packages.iter().any(|p| p["name"] == "proptest"),
        "a dev-dependency is not in the binary"
    );
    assert!(
        image.reference.ends_with(&image.digest),
        "pulled by digest: {}",
        image.reference
    );
}

#[tokio::test]
async fn wisp_serve_runs_from_the_image() {
    let Some(image) = image("wisp_serve_runs_from_the_image") else {
        return;
    };

    // In a chroot of the unpacked root filesystem, as the image's user.
    let (child, addr) = spawn_ready(
        chroot_wisp(image).args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
            "--data-dir",
            "/home/wisp/data",
            "--no-jobs",
        ]),
        "wisp listening on ",
    );
    let child = Killed(child);
    let (status, body) = http_request_to(addr, http::Method::GET, "/healthz").await;
    assert_eq!((status.as_u16(), body.trim()), (200, "ok"));
    drop(child);

    // In runc, as the image's config says (its user, its environment), the root
    // filesystem read-only and a tmpfs home as in a Kubernetes pod; the host's network.
    let bundle = image.work.join("runc-bundle");
    std::fs::create_dir_all(&bundle).expect("bundle dir");
    let mut spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(image.bundle.join("config.json")).expect("config.json"),
    )
    .expect("runtime spec");
    assert_eq!(spec["process"]["user"]["uid"], 65532);
    spec["root"]["path"] = image.bundle.join("rootfs").display().to_string().into();
    spec["root"]["readonly"] = true.into();
    spec["process"]["terminal"] = false.into();
    spec["process"]["args"] = serde_json::json!([
        "/usr/local/bin/wisp",
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--admin-addr",
        "127.0.0.1:0",
        "--data-dir",
        "/home/wisp/data",
        "--no-jobs"
    ]);
    let namespaces = spec["linux"]["namespaces"]
        .as_array_mut()
        .expect("namespaces");
    namespaces.retain(|ns| ns["type"] != "network");
    spec["mounts"]
        .as_array_mut()
        .expect("mounts")
        .push(serde_json::json!({
            "destination": "/home/wisp",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=755", "uid=65532", "gid=65532"]
        }));
    std::fs::write(bundle.join("config.json"), spec.to_string()).expect("write config.json");
    let id = format!("wisp-test-{}", uuid::Uuid::new_v4().simple());
    let state = image.work.join("runc-state");
    let (child, addr) = spawn_ready(
        Command::new("runc")
            .arg("--root")
            .arg(&state)
            .args(["run", "--bundle"])
            .arg(&bundle)
            .arg(&id),
        "wisp listening on ",
    );
    let child = Killed(child);
    let (status, body) = http_request_to(addr, http::Method::GET, "/healthz").await;
    assert_eq!((status.as_u16(), body.trim()), (200, "ok"));
    let _ = Command::new("runc")
        .arg("--root")
        .arg(&state)
        .args(["kill", &id, "KILL"])
        .status();
    drop(child);
    let _ = Command::new("runc")
        .arg("--root")
        .arg(&state)
        .args(["delete", "--force", &id])
        .status();

    // podman, pulling the image by digest from the registry (DESIGN.md: runc, vfs,
    // cgroupfs; crun fails on this machine's hybrid cgroups).
    if !have("podman") {
        skip::<()>(
            "wisp_serve_runs_from_the_image (podman)",
            "podman is not installed",
        );
        return;
    }
    let podman = image.work.join("podman");
    let out = run(Command::new("podman")
        .arg("--root")
        .arg(podman.join("root"))
        .arg("--runroot")
        .arg(podman.join("run"))
        .args([
            "--runtime",
            "runc",
            "--storage-driver",
            "vfs",
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "file",
            "run",
            "--rm",
            "--tls-verify=false",
            "--network",
            "host",
            "--read-only",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            &format!("docker://{}", image.reference),
            "--version",
        ]));
    assert_eq!(out.trim(), "wisp 0.1.0 (PipeCD v0.57.1)");
}

#[tokio::test]
async fn bridge_from_the_image_reaches_the_lambda_functions() {
    const TEST: &str = "bridge_from_the_image_reaches_the_lambda_functions";
    let Some(image) = image(TEST) else {
        return;
    };
    let Some(wisp) = Wisp::start_lambda(TEST) else {
        return;
    };
    let bridge = Bridge::start_command(
        chroot_wisp(image),
        &format!("http://{}", wisp.addr()),
        wisp.data_dir(),
        &[],
    );
    wisp.use_bridge(bridge);
    // A piped's calls (upstream's PipedService protos), then pipectl's (APIService).
    scenarios::deployment_lifecycle_on(&wisp, Via::Bridge).await;
    let mut setup = setup_on(wisp).await;
    registered_events_flow(&mut setup).await;
    let front = setup.wisp.lambda().expect("running as Lambda functions");
    assert!(front.invocations("wisp-piped-api") > 10);
    assert!(front.invocations("wisp-api") > 0);
    let logged = setup.wisp.bridge().calls_logged("ListApplications");
    assert!(
        !logged.is_empty(),
        "the calls went through the image's bridge"
    );
}
