//! The container image (`scripts/image`) as the tests get it: built twice from one
//! binary (one digest), pushed with skopeo to the test registry (`WISP_TEST_REGISTRY`,
//! `scripts/registry.sh`), pulled back by digest and unpacked with umoci, once per test
//! run; and its binary run from the unpacked root filesystem (a chroot as the image's
//! user, or runc as a task definition says). tests/e2e/image.rs checks the image itself;
//! tests/e2e/iam_enforced.rs runs the Fargate task from it.
//!
//! The image holds `WISP_IMAGE_BINARY` when set (CI: the static release binary that
//! `scripts/image build` compiled), else this test build's own `wisp` (a debug build,
//! dynamically linked: the image then carries its interpreter and libraries). Needs
//! `WISP_TEST_REGISTRY`, skopeo, umoci and runc; otherwise [`image`] prints a note and
//! gives `None`, unless `WISP_REQUIRE_IMAGE_TESTS=1`.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use super::Server;

pub const REQUIRE_VAR: &str = "WISP_REQUIRE_IMAGE_TESTS";
/// The image's user and group.
pub const USER: &str = "65532:65532";
/// How long a process from the image may take to print its address.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub fn skip<T>(test: &str, what: &str) -> Option<T> {
    if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
        panic!("{test}: {what}, but {REQUIRE_VAR}=1 requires this test to run");
    }
    eprintln!("note: {test} skipped: {what}");
    None
}

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd`, which must succeed; its stdout.
pub fn run(cmd: &mut Command) -> String {
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

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The image, built, pushed, pulled back by digest and unpacked, once for all the tests.
pub struct Image {
    /// `sha256:...` of the image index.
    pub digest: String,
    /// `<registry>/<repository>@<digest>`.
    pub reference: String,
    /// The OCI layout skopeo pulled (this machine's platform), tag `pulled`.
    pub pulled: PathBuf,
    /// umoci's runtime bundle: `config.json` and `rootfs/`.
    pub bundle: PathBuf,
    /// Whether the binary in it is static.
    pub static_binary: bool,
    pub work: PathBuf,
}

static IMAGE: OnceLock<Option<Image>> = OnceLock::new();

pub fn image(test: &str) -> Option<&'static Image> {
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

pub fn image_config(layout: &Path) -> serde_json::Value {
    let text = run(Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci:{}:pulled", layout.display())));
    serde_json::from_str(&text).expect("the image config as JSON")
}

/// Spawns `cmd` (stdout piped) and waits for its `<prefix><addr>` line.
pub fn spawn_ready(cmd: &mut Command, prefix: &str) -> (Child, SocketAddr) {
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
pub fn chroot_wisp(image: &Image) -> Command {
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

pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A container task as ECS runs one from a task definition: the image's entrypoint
/// followed by the definition's `command` (which replaces the image's `Cmd`), the image's
/// environment and then the definition's (`env`: the task's, as the test adapts it), as
/// the definition's `user`, on the image's root filesystem, read-only when the definition
/// says so. In runc, with the host's network (the test's stand-ins are on loopback).
pub struct Task<'a> {
    pub command: &'a [String],
    pub env: &'a [(OsString, OsString)],
    /// `uid:gid`.
    pub user: &'a str,
    pub readonly_root: bool,
}

/// Starts `task` (a `wisp serve`) from `image` with `args` after its command (the test's
/// own ports), its runc bundle and log (`serve.log`) in `dir`; the container is deleted
/// when the server is dropped.
pub fn serve_task(image: &Image, task: &Task<'_>, args: &[&str], dir: &Path) -> Server {
    let config = image_config(&image.pulled);
    let entrypoint = config["config"]["Entrypoint"]
        .as_array()
        .expect("the image's entrypoint")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string());
    let mut spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(image.bundle.join("config.json")).expect("config.json"),
    )
    .expect("runtime spec");
    let (uid, gid) = task.user.split_once(':').expect("user as uid:gid");
    spec["process"]["user"] = serde_json::json!({
        "uid": uid.parse::<u32>().expect("a uid"),
        "gid": gid.parse::<u32>().expect("a gid"),
    });
    spec["process"]["args"] = entrypoint
        .chain(task.command.iter().cloned())
        .chain(args.iter().map(|a| a.to_string()))
        .collect();
    let mut env: Vec<String> = config["config"]["Env"]
        .as_array()
        .expect("the image's environment")
        .iter()
        .map(|e| e.as_str().expect("a string").to_string())
        .collect();
    env.extend(task.env.iter().map(|(k, v)| {
        format!(
            "{}={}",
            k.to_str().expect("a UTF-8 name"),
            v.to_str().expect("a UTF-8 value")
        )
    }));
    spec["process"]["env"] = env.into();
    spec["process"]["terminal"] = false.into();
    // Fargate's open-file limit when the definition sets no ulimits, 65535 (runc's is
    // 1024), or this process's hard limit when lower (a container cannot raise it).
    let hard = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(4).map(str::to_string))
        })
        .and_then(|hard| hard.parse::<u64>().ok())
        .unwrap_or(1024);
    let nofile = hard.min(65535);
    spec["process"]["rlimits"] =
        serde_json::json!([{"type": "RLIMIT_NOFILE", "soft": nofile, "hard": nofile}]);
    spec["root"]["path"] = image.bundle.join("rootfs").display().to_string().into();
    spec["root"]["readonly"] = task.readonly_root.into();
    spec["linux"]["namespaces"]
        .as_array_mut()
        .expect("namespaces")
        .retain(|ns| ns["type"] != "network");
    let id = format!("wisp-task-{}", uuid::Uuid::new_v4().simple());
    let bundle = dir.join("runc-bundle");
    std::fs::create_dir_all(&bundle).expect("the bundle directory");
    std::fs::write(bundle.join("config.json"), spec.to_string()).expect("write config.json");
    let state = dir.join("runc-state");
    let mut cmd = Command::new("runc");
    cmd.arg("--root")
        .arg(&state)
        .args(["run", "--bundle"])
        .arg(&bundle)
        .arg(&id);
    let stop = move || {
        let _ = Command::new("runc")
            .arg("--root")
            .arg(&state)
            .args(["delete", "--force", &id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    };
    Server::start_command(cmd, dir.join("serve.log"), Some(Box::new(stop)))
}
