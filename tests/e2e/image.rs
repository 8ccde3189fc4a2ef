//! The container image (`scripts/image`) as a user gets it: built twice from one binary
//! (the same digest), pushed with skopeo to a registry (Debian's `docker-registry`,
//! `scripts/registry.sh`), pulled back by digest, unpacked with umoci, and its binary run
//! from the unpacked root filesystem as the image's user (65532): `wisp serve` answers
//! `/healthz` (in a chroot, and in runc with the root filesystem read-only), podman runs
//! the image by digest from the registry, and `wisp bridge` from the image carries
//! upstream-proto piped and pipectl calls to the Lambda functions behind the ALB emulator.
//!
//! The image is built, pushed, pulled and unpacked once for all the tests
//! (tests/e2e/support/image.rs: which binary it holds, what it needs, when it skips).

use crate::support;

use std::process::Command;

use support::api::{registered_events_flow, setup_on};
use support::bridge::Bridge;
use support::image::{
    Killed, USER, chroot_wisp, have, image, image_config, repo_root, run, skip, spawn_ready,
};
use support::{Via, Wisp, http_request_to, scenarios};

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
