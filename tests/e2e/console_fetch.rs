//! `wisp console fetch --image` against Debian's `docker-registry` on loopback
//! (`scripts/registry.sh`; `WISP_TEST_REGISTRY`): images made here (tar layers, gzip,
//! an OCI index with a platform manifest, whiteouts) are pushed with the registry's own
//! HTTP API, then fetched; a console is stored by version under the data directory and
//! `wisp serve` serves it, picking up a console fetched while it runs.
//!
//! Hostile images each get a clear error and leave nothing behind (no partial console, no
//! temporary directory, an earlier console untouched): `../` and absolute paths, links
//! out of `web/static`, device files, an oversized layer, too many files, a gzip bomb.
//! What a registry itself does wrong (a manifest or blob whose content does not match its
//! digest, a token realm on another host, a stall) comes from a small proxy here in front
//! of the real registry, which also plays the anonymous bearer-token flow.
//!
//! Needs `WISP_TEST_REGISTRY` and curl; otherwise the tests print a note and pass, unless
//! `WISP_REQUIRE_IMAGE_TESTS=1`.

use crate::support;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use sha2::{Digest, Sha256};

use support::{CliOutput, Wisp, run_cli};

const REQUIRE_VAR: &str = "WISP_REQUIRE_IMAGE_TESTS";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// The registry, or `None` after a note (a panic under `WISP_REQUIRE_IMAGE_TESTS=1`).
pub(crate) fn registry(test: &str) -> Option<String> {
    match std::env::var("WISP_TEST_REGISTRY") {
        Ok(r) if !r.is_empty() => Some(r),
        _ if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") => {
            panic!(
                "{test}: WISP_TEST_REGISTRY is not set, but {REQUIRE_VAR}=1 requires this test to run"
            )
        }
        _ => {
            eprintln!(
                "note: {test} skipped: WISP_TEST_REGISTRY is not set (scripts/registry.sh start PORT)"
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------------------
// Making images
// ---------------------------------------------------------------------------------------

/// A tar entry, written by hand so that hostile names and types can be made.
#[derive(Clone)]
pub(crate) enum Entry {
    File(String, Vec<u8>),
    Dir(String),
    Symlink(String, String),
    HardLink(String, String),
    CharDevice(String),
}

fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
}

fn tar_header(name: &str, kind: u8, size: u64, link: &str) -> [u8; 512] {
    let mut h = [0u8; 512];
    assert!(
        name.len() <= 100 && link.len() <= 100,
        "short names only: {name}"
    );
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], if kind == b'5' { 0o755 } else { 0o644 });
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], 1_700_000_000);
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    h
}

/// An uncompressed tar stream of `entries`.
pub(crate) fn tar(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        let (name, kind, data, link): (&str, u8, &[u8], &str) = match entry {
            Entry::File(n, d) => (n, b'0', d, ""),
            Entry::Dir(n) => (n, b'5', &[], ""),
            Entry::Symlink(n, l) => (n, b'2', &[], l),
            Entry::HardLink(n, l) => (n, b'1', &[], l),
            Entry::CharDevice(n) => (n, b'3', &[], ""),
        };
        out.extend_from_slice(&tar_header(name, kind, data.len() as u64, link));
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn digest(data: &[u8]) -> String {
    format!("sha256:{}", hex_string(&Sha256::digest(data)))
}

fn hex_string(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A layer: its blob and media type.
pub(crate) struct Layer {
    pub blob: Vec<u8>,
    pub media_type: &'static str,
}

impl Layer {
    pub(crate) fn gzip(entries: &[Entry]) -> Layer {
        Layer {
            blob: gzip(&tar(entries)),
            media_type: LAYER_GZIP,
        }
    }
    pub(crate) fn plain(entries: &[Entry]) -> Layer {
        Layer {
            blob: tar(entries),
            media_type: LAYER_TAR,
        }
    }
}

fn curl(args: &[&str], body: Option<&[u8]>) -> String {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--fail-with-body", "--max-time", "120"])
        .args(args);
    if body.is_some() {
        cmd.args(["--data-binary", "@-"]);
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("run curl");
    {
        let mut stdin = child.stdin.take().unwrap();
        if let Some(body) = body {
            stdin.write_all(body).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "curl {args:?}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Pushes a blob (the registry checks its digest); its digest.
fn push_blob(registry: &str, repo: &str, data: &[u8]) -> String {
    let d = digest(data);
    let head = curl(
        &[
            "-X",
            "POST",
            "-D",
            "-",
            "-o",
            "/dev/null",
            &format!("http://{registry}/v2/{repo}/blobs/uploads/"),
        ],
        None,
    );
    let location = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("location")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no Location in {head}"));
    let location = if location.starts_with('/') {
        format!("http://{registry}{location}")
    } else {
        location
    };
    let sep = if location.contains('?') { '&' } else { '?' };
    curl(
        &[
            "-X",
            "PUT",
            "-H",
            "Content-Type: application/octet-stream",
            &format!("{location}{sep}digest={d}"),
        ],
        Some(data),
    );
    d
}

fn push_manifest(registry: &str, repo: &str, reference: &str, media_type: &str, body: &[u8]) {
    curl(
        &[
            "-X",
            "PUT",
            "-H",
            &format!("Content-Type: {media_type}"),
            &format!("http://{registry}/v2/{repo}/manifests/{reference}"),
        ],
        Some(body),
    );
}

/// Pushes an image of `layers` as `repo:tag`: an OCI index naming a linux/amd64 and a
/// linux/arm64 manifest (the same one), as upstream's release images are. The platform
/// manifest's digest.
pub(crate) fn push_image(registry: &str, repo: &str, tag: &str, layers: &[Layer]) -> String {
    let config = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{}}"#;
    let config_digest = push_blob(registry, repo, config);
    let layer_json: Vec<serde_json::Value> = layers
        .iter()
        .map(|l| {
            let d = push_blob(registry, repo, &l.blob);
            serde_json::json!({"mediaType": l.media_type, "digest": d, "size": l.blob.len()})
        })
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": layer_json,
    }))
    .unwrap();
    let manifest_digest = digest(&manifest);
    push_manifest(registry, repo, &manifest_digest, OCI_MANIFEST, &manifest);
    let platforms: Vec<serde_json::Value> = ["amd64", "arm64"]
        .iter()
        .map(|arch| {
            serde_json::json!({
                "mediaType": OCI_MANIFEST, "digest": manifest_digest, "size": manifest.len(),
                "platform": {"architecture": arch, "os": "linux"},
            })
        })
        .collect();
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": platforms,
    }))
    .unwrap();
    push_manifest(registry, repo, tag, OCI_INDEX, &index);
    manifest_digest
}

/// A console's files as one layer's entries under web/static/ (files only).
pub(crate) fn console_entries(dir: &Path) -> Vec<Entry> {
    let mut out = vec![Entry::Dir("web/".into()), Entry::Dir("web/static/".into())];
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&current)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path
                .strip_prefix(dir)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            if path.is_dir() {
                out.push(Entry::Dir(format!("web/static/{rel}/")));
                pending.push(path);
            } else {
                out.push(Entry::File(
                    format!("web/static/{rel}"),
                    std::fs::read(&path).unwrap(),
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Fetching
// ---------------------------------------------------------------------------------------

fn file(name: &str, text: &str) -> Entry {
    Entry::File(name.into(), text.as_bytes().to_vec())
}

/// A small console as upstream's image holds it, under other paths of the image.
fn good_layers() -> Vec<Layer> {
    vec![
        Layer::gzip(&[
            Entry::Dir("usr/".into()),
            file("usr/bin/controlplane", "#!binary"),
            Entry::Dir("web/".into()),
            Entry::Dir("web/static/".into()),
            file(
                "web/static/index.html",
                "<!DOCTYPE html><title>fetched</title>",
            ),
            file("web/static/old.js", "old"),
            file("web/static/dir/a.js", "a"),
            file("web/static/keep/x.js", "x"),
            Entry::Symlink("web/static/alias.html".into(), "index.html".into()),
        ]),
        Layer::plain(&[
            file("web/static/.wh.old.js", ""),
            file("web/static/dir/.wh..wh..opq", ""),
            file("web/static/dir/b.js", "b"),
            Entry::HardLink("web/static/keep/y.js".into(), "web/static/keep/x.js".into()),
            file("./web/static/assets/main.0123abcd9.js", "console.log('ok')"),
        ]),
    ]
}

fn fetch(data_dir: &Path, args: &[&str]) -> CliOutput {
    let mut all = vec!["console", "fetch"];
    all.extend_from_slice(args);
    run_cli(data_dir, &all)
}

/// Every file under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert!(
                !meta.file_type().is_symlink(),
                "{} is a link",
                path.display()
            );
            if meta.is_dir() {
                pending.push(path);
            } else {
                out.push(
                    path.strip_prefix(dir)
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .to_string(),
                );
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_keeps_web_static_with_whiteouts_through_the_token_flow() {
    let Some(registry) = registry("fetch_keeps_web_static_with_whiteouts_through_the_token_flow")
    else {
        return;
    };
    push_image(
        &registry,
        "wisp-test/console-good",
        "v9.9.9",
        &good_layers(),
    );
    // Through a registry that wants an anonymous bearer token first.
    let proxy = Proxy::start(
        &registry,
        Mode::Token {
            realm_host: "127.0.0.1",
        },
    )
    .await;
    let data = tempfile::tempdir().unwrap();
    let image = format!("{}/wisp-test/console-good:v9.9.9", proxy.addr);
    let out = fetch(data.path(), &["--image", &image, "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let got: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(got["version"], "v9.9.9");
    assert_eq!(got["layers"], 2);
    let dir = data.path().join("console/v9.9.9");
    assert_eq!(got["dir"], dir.display().to_string());
    assert_eq!(
        tree(&dir),
        [
            "alias.html",
            "assets/main.0123abcd9.js",
            "dir/b.js",
            "index.html",
            "keep/x.js",
            "keep/y.js"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("alias.html")).unwrap(),
        std::fs::read_to_string(dir.join("index.html")).unwrap()
    );
    assert_eq!(std::fs::read_to_string(dir.join("keep/y.js")).unwrap(), "x");
    assert!(proxy.tokens_given() >= 1, "the token flow was not used");
    assert_no_leftovers(&data.path().join("console"));

    // Again, into a directory of one's own, replacing what is there.
    let own = data.path().join("mine");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("stale.txt"), "stale").unwrap();
    // Not a console: left alone.
    let out = fetch(
        data.path(),
        &["--image", &image, "--dir", own.to_str().unwrap()],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("not a console to replace"),
        "{}",
        out.stderr
    );
    assert!(own.join("stale.txt").is_file());
    std::fs::write(own.join("index.html"), "an older console").unwrap();
    let out = fetch(
        data.path(),
        &["--image", &image, "--dir", own.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("wisp serve --console"),
        "{}",
        out.stdout
    );
    assert!(own.join("index.html").is_file() && !own.join("stale.txt").exists());
}

/// `wisp serve` without a console answers `/` with how to get one, and serves the
/// default release's console as soon as `wisp console fetch` put it in the data
/// directory; `--console VERSION` serves a fetched one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_says_how_to_get_the_console_then_serves_the_fetched_one() {
    let Some(registry) = registry("serve_says_how_to_get_the_console_then_serves_the_fetched_one")
    else {
        return;
    };
    push_image(
        &registry,
        "wisp-test/console-serve",
        "latest",
        &good_layers(),
    );
    let wisp = Wisp::start_with_serve_args(&[]);
    let (status, body) = support::http_request_to(wisp.addr(), http::Method::GET, "/").await;
    assert_eq!(status, http::StatusCode::NOT_FOUND);
    assert!(
        body.contains("<pre>wisp console fetch</pre>") && body.contains("the APIs work"),
        "{body}"
    );

    let version = wisp_version_upstream();
    let image = format!("{registry}/wisp-test/console-serve:latest");
    let out = fetch(wisp.data_dir(), &["--image", &image, "--version", &version]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.trim_end().ends_with("Serve it: wisp serve"),
        "{}",
        out.stdout
    );
    let (status, body) =
        support::http_request_to(wisp.addr(), http::Method::GET, "/deployments").await;
    assert_eq!(
        (status, body.as_str()),
        (
            http::StatusCode::OK,
            "<!DOCTYPE html><title>fetched</title>"
        )
    );

    // Another version by name, from the data directory.
    let out = fetch(
        wisp.data_dir(),
        &["--image", &image, "--version", "v0.0.1-test"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("console")).unwrap();
    copy_tree(
        &wisp.data_dir().join("console/v0.0.1-test"),
        &dir.path().join("console/v0.0.1-test"),
    );
    let other = Wisp::start_in(dir, &["--console".into(), "v0.0.1-test".into()]);
    let (status, _) = support::http_request_to(other.addr(), http::Method::GET, "/dir/b.js").await;
    assert_eq!(status, http::StatusCode::OK);
}

/// `wisp console upload --version` uploads the console fetched into the data directory
/// (the AWS deployment's path; here the embedded filestore stands in for the bucket).
#[tokio::test]
async fn upload_takes_a_fetched_version() {
    let Some(registry) = registry("upload_takes_a_fetched_version") else {
        return;
    };
    push_image(
        &registry,
        "wisp-test/console-upload",
        "v0.0.2-up",
        &good_layers(),
    );
    let data = tempfile::tempdir().unwrap();
    let missing = run_cli(data.path(), &["console", "upload", "--version", "../x"]);
    assert_eq!(missing.code, 2, "{missing:?}");
    let image = format!("{registry}/wisp-test/console-upload:v0.0.2-up");
    let out = fetch(data.path(), &["--image", &image]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = run_cli(
        data.path(),
        &["console", "upload", "--version", "v0.0.2-up", "--json"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let got: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(got["uploaded"], 6, "{got}");
    assert_eq!(got["prefix"], "console/");
}

/// The release `wisp --version` names.
fn wisp_version_upstream() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wisp"))
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let version = text
        .split("(PipeCD ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("wisp --version names no PipeCD release: {text:?}"));
    assert!(version.starts_with('v'), "{text}");
    version.to_string()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// No temporary directory of a fetch is left in `dir`.
fn assert_no_leftovers(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !left.iter().any(|n| n.starts_with(".console-fetch-")),
        "left behind in {}: {left:?}",
        dir.display()
    );
}

/// Fetching `image` (through `proxy` when given) with `extra` flags fails with an error
/// naming `expected`; the console fetched before is untouched and nothing is left over.
async fn assert_refused(
    test: &str,
    layers: Option<Vec<Layer>>,
    mode: Option<Mode>,
    extra: &[&str],
    expected: &[&str],
) {
    let Some(registry) = registry(test) else {
        return;
    };
    let repo = format!("wisp-test/{}", test.replace('_', "-"));
    // The console fetched earlier, which a failed fetch must leave alone.
    push_image(&registry, &repo, "before", &good_layers());
    if let Some(layers) = layers {
        push_image(&registry, &repo, "hostile", &layers);
    } else {
        push_image(&registry, &repo, "hostile", &good_layers());
    }
    let data = tempfile::tempdir().unwrap();
    let before = fetch(
        data.path(),
        &[
            "--image",
            &format!("{registry}/{repo}:before"),
            "--version",
            "v1.0.0",
        ],
    );
    assert_eq!(before.code, 0, "{before:?}");
    let dir = data.path().join("console/v1.0.0");
    let files = tree(&dir);

    let proxy = match mode {
        Some(mode) => Some(Proxy::start(&registry, mode).await),
        None => None,
    };
    let host = proxy
        .as_ref()
        .map(|p| p.addr.to_string())
        .unwrap_or(registry.clone());
    let mut args = vec![
        "--image".to_string(),
        format!("{host}/{repo}:hostile"),
        "--version".into(),
        "v1.0.0".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    // Off the runtime's threads: the proxy answers on them meanwhile.
    let data_dir = data.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fetch(&data_dir, &args)
    })
    .await
    .unwrap();
    assert_eq!(out.code, 1, "{test}: the fetch must fail: {out:?}");
    assert!(
        out.stderr.contains("cannot fetch the console"),
        "{test}: {}",
        out.stderr
    );
    for part in expected {
        assert!(
            out.stderr.contains(part),
            "{test}: expected {part:?} in: {}",
            out.stderr
        );
    }
    assert_eq!(tree(&dir), files, "{test}: the earlier console changed");
    assert_no_leftovers(&data.path().join("console"));
    // Nothing was written outside the console either.
    assert!(!data.path().join("evil").exists() && !Path::new("/tmp/wisp-console-evil").exists());
}

fn hostile(entries: &[Entry]) -> Option<Vec<Layer>> {
    let mut all = vec![file("web/static/index.html", "<html>")];
    all.extend_from_slice(entries);
    Some(vec![Layer::gzip(&all)])
}

#[tokio::test]
async fn a_path_climbing_out_is_refused() {
    assert_refused(
        "climbing_path",
        hostile(&[file("web/static/../../../../evil", "x")]),
        None,
        &[],
        &["climbs out with `..`"],
    )
    .await;
}

#[tokio::test]
async fn an_absolute_path_is_refused() {
    assert_refused(
        "absolute_path",
        hostile(&[file("/tmp/wisp-console-evil", "x")]),
        None,
        &[],
        &["is an absolute path"],
    )
    .await;
}

#[tokio::test]
async fn a_symlink_out_of_the_tree_is_refused() {
    assert_refused(
        "symlink_out",
        hostile(&[Entry::Symlink(
            "web/static/passwd".into(),
            "../../../etc/passwd".into(),
        )]),
        None,
        &[],
        &["is a symbolic link to ../../../etc/passwd outside web/static"],
    )
    .await;
    assert_refused(
        "symlink_absolute",
        hostile(&[Entry::Symlink(
            "web/static/passwd".into(),
            "/etc/passwd".into(),
        )]),
        None,
        &[],
        &["outside web/static"],
    )
    .await;
}

#[tokio::test]
async fn a_hard_link_out_of_the_tree_is_refused() {
    assert_refused(
        "hard_link_out",
        hostile(&[Entry::HardLink(
            "web/static/shadow".into(),
            "etc/shadow".into(),
        )]),
        None,
        &[],
        &["is a hard link to etc/shadow outside web/static"],
    )
    .await;
}

#[tokio::test]
async fn a_device_file_is_refused() {
    assert_refused(
        "device_file",
        hostile(&[Entry::CharDevice("web/static/null".into())]),
        None,
        &[],
        &["is a character device"],
    )
    .await;
}

#[tokio::test]
async fn an_oversized_layer_is_refused_before_download() {
    let big: Vec<u8> = (0..200_000u32)
        .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
        .collect();
    assert_refused(
        "oversized_layer",
        hostile(&[Entry::File("web/static/big.bin".into(), big)]),
        None,
        &["--max-layer-bytes", "100000"],
        &["more than the 100000 a layer may have"],
    )
    .await;
}

#[tokio::test]
async fn a_gzip_bomb_stops_at_the_unpacked_bound() {
    assert_refused(
        "gzip_bomb",
        hostile(&[Entry::File(
            "web/static/zeros.bin".into(),
            vec![0u8; 20 << 20],
        )]),
        None,
        &["--max-unpacked-bytes", "1000000"],
        &["more than 1000000 bytes once decompressed"],
    )
    .await;
}

#[tokio::test]
async fn too_many_files_are_refused() {
    let many: Vec<Entry> = (0..50)
        .map(|i| file(&format!("web/static/f{i}.js"), "x"))
        .collect();
    assert_refused(
        "too_many_files",
        hostile(&many),
        None,
        &["--max-files", "20"],
        &["more than 20 files in web/static"],
    )
    .await;
}

#[tokio::test]
async fn a_manifest_not_matching_its_digest_is_refused() {
    assert_refused(
        "manifest_digest",
        None,
        Some(Mode::Corrupt("/manifests/sha256:")),
        &[],
        &["the manifest sha256:", "its content's digest is"],
    )
    .await;
}

#[tokio::test]
async fn a_blob_not_matching_its_digest_is_refused() {
    assert_refused(
        "blob_digest",
        None,
        Some(Mode::Corrupt("/blobs/")),
        &[],
        &["layer sha256:"],
    )
    .await;
}

#[tokio::test]
async fn a_token_realm_on_another_host_is_refused() {
    assert_refused(
        "token_realm",
        None,
        Some(Mode::Token {
            realm_host: "localhost",
        }),
        &[],
        &["sends for a token to localhost, another host than the registry's (127.0.0.1); refusing"],
    )
    .await;
}

#[tokio::test]
async fn a_stalled_registry_times_out() {
    assert_refused(
        "stalled_registry",
        None,
        Some(Mode::Stall("/blobs/")),
        &["--registry-timeout", "2s"],
        &["/blobs/sha256:", "no answer within 2s"],
    )
    .await;
}

#[tokio::test]
async fn a_layer_longer_than_its_descriptor_is_cut_off() {
    assert_refused(
        "longer_layer",
        None,
        Some(Mode::Longer("/blobs/")),
        &[],
        &["is longer than the", "bytes its manifest says"],
    )
    .await;
}

#[tokio::test]
async fn a_trickling_registry_hits_the_fetch_deadline() {
    assert_refused(
        "trickling_registry",
        None,
        Some(Mode::Trickle("/blobs/")),
        &["--registry-timeout", "2s", "--fetch-deadline", "3s"],
        &["the fetch took longer than 3s"],
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// The proxy in front of the real registry
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Mode {
    /// Wants `Bearer <TOKEN>`, given by `/token` at `http://<realm_host>:<port>/token`.
    Token { realm_host: &'static str },
    /// Flips a byte of every answer whose path holds this.
    Corrupt(&'static str),
    /// Never answers a request whose path holds this.
    Stall(&'static str),
    /// Answers a request whose path holds this 16 bytes at a time, one piece each 500 ms.
    Trickle(&'static str),
    /// Sends 1 MB more than the registry's answer when the path holds this.
    Longer(&'static str),
}

const TOKEN: &str = "anonymous-pull-token";

struct Proxy {
    addr: SocketAddr,
    tokens: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    async fn start(registry: &str, mode: Mode) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tokens = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let registry = registry.to_string();
        let counter = tokens.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let registry = registry.clone();
                let counter = counter.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let registry = registry.clone();
                        let counter = counter.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                answer(req, &registry, addr, mode, &counter).await,
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Proxy { addr, tokens, task }
    }

    fn tokens_given(&self) -> usize {
        self.tokens.load(std::sync::atomic::Ordering::SeqCst)
    }
}

async fn answer(
    req: http::Request<hyper::body::Incoming>,
    registry: &str,
    me: SocketAddr,
    mode: Mode,
    tokens: &std::sync::atomic::AtomicUsize,
) -> http::Response<UnsyncBoxBody<Bytes, std::convert::Infallible>> {
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    if let Mode::Token { realm_host } = mode {
        if path.starts_with("/token") {
            tokens.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            assert!(path.contains("scope=repository%3A"), "{path}");
            let token = format!(r#"{{"token":"{TOKEN}"}}"#);
            return http::Response::new(Full::new(Bytes::from(token)).boxed_unsync());
        }
        let authorized = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            == Some(&format!("Bearer {TOKEN}"));
        if path.starts_with("/v2/") && !authorized {
            let mut resp = http::Response::new(
                Full::new(Bytes::from_static(
                    b"{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}",
                ))
                .boxed_unsync(),
            );
            *resp.status_mut() = http::StatusCode::UNAUTHORIZED;
            resp.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                format!(
                    r#"Bearer realm="http://{realm_host}:{}/token",service="wisp-test""#,
                    me.port()
                )
                .parse()
                .unwrap(),
            );
            return resp;
        }
    }
    if let Mode::Stall(part) = mode
        && path.contains(part)
    {
        // A registry that stopped answering: the client must give up on its own.
        std::future::pending::<()>().await;
    }
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut forward = http::Request::get(format!("http://{registry}{path}"));
    if let Some(accept) = req.headers().get(http::header::ACCEPT) {
        forward = forward.header(http::header::ACCEPT, accept);
    }
    let upstream = client
        .request(forward.body(Full::new(Bytes::new())).unwrap())
        .await
        .unwrap();
    let (parts, body) = upstream.into_parts();
    let mut body = body.collect().await.unwrap().to_bytes().to_vec();
    if let Mode::Corrupt(part) = mode
        && path.contains(part)
        && !body.is_empty()
    {
        // A digit changed: a manifest stays JSON (a size changes), a blob one byte.
        if let Some(i) = body.iter().rposition(|b| b.is_ascii_digit()) {
            body[i] = if body[i] == b'9' { b'8' } else { body[i] + 1 };
        }
    }
    if let Mode::Longer(part) = mode
        && path.contains(part)
    {
        body.extend(std::iter::repeat_n(0u8, 1 << 20));
    }
    let body = match mode {
        Mode::Trickle(part) if path.contains(part) => {
            use futures::StreamExt as _;
            let pieces: Vec<Bytes> = body.chunks(16).map(Bytes::copy_from_slice).collect();
            let stream = futures::stream::iter(pieces).then(|piece| async move {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(piece))
            });
            http_body_util::StreamBody::new(stream).boxed_unsync()
        }
        _ => Full::new(Bytes::from(body)).boxed_unsync(),
    };
    let mut resp = http::Response::new(body);
    *resp.status_mut() = parts.status;
    for name in [
        http::header::CONTENT_TYPE,
        http::HeaderName::from_static("docker-content-digest"),
        http::header::LOCATION,
    ] {
        if let Some(v) = parts.headers.get(&name) {
            resp.headers_mut().insert(name, v.clone());
        }
    }
    resp
}

// ---------------------------------------------------------------------------------------
// The fetched console in a real browser
// ---------------------------------------------------------------------------------------

/// The browser tests' console, laid out as upstream's image holds it (web/static/) and
/// pushed to the registry, fetched by `wisp console fetch --image`, served by
/// `wisp serve --console VERSION` from the data directory, and driven in Chromium as on
/// `--web-dir`: the page logs in, reads the large stage log, and looks as the references.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_in_a_browser_fetched_from_a_registry() {
    use crate::console_browser as browser;
    let test = "console_in_a_browser_fetched_from_a_registry";
    let Some(registry) = registry(test) else {
        return;
    };
    if browser::browser_available(test).is_none() {
        return;
    }
    let console = browser::build_console();
    push_image(
        &registry,
        "wisp-test/console-browser",
        "v0.0.0-browser",
        &[Layer::gzip(&console_entries(console.path()))],
    );
    let data = tempfile::tempdir().unwrap();
    let image = format!("{registry}/wisp-test/console-browser:v0.0.0-browser");
    let out = fetch(data.path(), &["--image", &image]);
    assert_eq!(out.code, 0, "{out:?}");
    let fetched = data.path().join("console/v0.0.0-browser");
    assert_eq!(tree(&fetched), tree(console.path()));
    // The browser gets only what was fetched.
    drop(console);

    let wisp = Wisp::start_in(data, &["--console".into(), "v0.0.0-browser".into()]);
    let (deployment, blocks) =
        browser::deployment_with_a_large_log(&wisp, support::Via::Grpc).await;
    let shot = wisp.data_dir().join("console-fetched.png");
    let url = format!("http://localhost:{}", wisp.addr().port());
    let out = browser::drive_browser(
        &url,
        "hello-pipecd",
        "hello-pipecd",
        &deployment,
        &shot,
        true,
        false,
    )
    .await;
    browser::assert_console_worked(&out, "hello-pipecd", &blocks, "a fetched console");
    browser::assert_screenshots_match(&out);
    browser::keep_screenshot(&shot, "console-fetched.png");
}
