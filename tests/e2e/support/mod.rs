//! Shared set-up of the end-to-end tests: the real `wisp` binary on a fresh data
//! directory, the admin CLI against the same directory, and `PipedServiceClient`s over
//! native gRPC (HTTP/2 cleartext) or gRPC-web (HTTP/1.1), the way a piped or the
//! `wisp bridge` talks to `wisp serve`.
//!
//! Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

pub mod api;
pub mod aws;
pub mod bridge;
pub mod fixtures;
pub mod iam;
pub mod image;
pub mod in_process;
pub mod lambda;
pub mod objects;
pub mod scenarios;
pub mod web;

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use tempfile::TempDir;
use tonic::body::Body;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tower::ServiceExt;
use tower::util::BoxCloneService;
use wisp_proto::pipedservice::piped_service_client::PipedServiceClient;

/// The project `wisp serve` creates when it runs without a config file.
pub const QUICKSTART: &str = "quickstart";

/// How long `wisp serve` may take to print its address.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variables of the CLI that would change what the tests run against.
const WISP_ENV: [&str; 9] = [
    "WISP_ADMIN_ADDR",
    "WISP_CONFIG",
    "WISP_CONFIG_SECRET",
    "WISP_DATA_DIR",
    "WISP_ADDR",
    "WISP_LOG",
    "WISP_LOG_JSON",
    "WISP_ENCRYPTION_KEY_FILE",
    "WISP_ENCRYPTION_KEY_SECRET",
];

pub fn wisp_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wisp"));
    for var in WISP_ENV {
        cmd.env_remove(var);
    }
    aws::child_env(&mut cmd);
    cmd
}

// ---------------------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------------------

/// A running `wisp serve`, killed on drop.
pub struct Server {
    child: Child,
    addr: SocketAddr,
    /// Where `/metrics` and `/version` are served (`--admin-addr`).
    admin_addr: Option<SocketAddr>,
    log: PathBuf,
    /// Stops what killing `child` would leave running (a container), on drop.
    on_drop: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Server {
    /// Starts `wisp serve --data-dir <data_dir> --addr 127.0.0.1:0` and waits for its
    /// `wisp listening on <addr>` line. Its log goes to `<data_dir>/serve.log`.
    pub fn start(data_dir: &Path) -> Server {
        Self::start_with(data_dir, &[], &[])
    }

    /// [`Server::start`] with more arguments (e.g. `--config FILE`) and environment. The
    /// scheduled jobs are off, so that no test sees a job change what it checks; the
    /// jobs' own tests use [`Server::start_with_jobs`].
    pub fn start_with(data_dir: &Path, args: &[OsString], env: &[(OsString, OsString)]) -> Server {
        let mut args = args.to_vec();
        args.push("--no-jobs".into());
        Self::start_with_jobs(data_dir, &args, env)
    }

    /// [`Server::start_with`], the scheduled jobs on.
    pub fn start_with_jobs(
        data_dir: &Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
    ) -> Server {
        let mut cmd = wisp_command();
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(if args.iter().any(|a| a == "--addr") {
                &[][..]
            } else {
                &["--addr", "127.0.0.1:0"][..]
            })
            // A port of its own for each server: tests run side by side.
            .args(if args.iter().any(|a| a == "--admin-addr") {
                &[][..]
            } else {
                &["--admin-addr", "127.0.0.1:0"][..]
            })
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)));
        Self::start_command(cmd, data_dir.join("serve.log"), None)
    }

    /// Spawns `cmd`, a `wisp serve` however it is run (this build's binary, or the
    /// image's in a container), its log appended to `log`, and waits for its `wisp
    /// listening on <addr>` line. `on_drop` runs first when the server is dropped.
    pub fn start_command(
        mut cmd: Command,
        log: PathBuf,
        on_drop: Option<Box<dyn FnOnce() + Send + Sync>>,
    ) -> Server {
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("open the server log");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));

        // Read stdout on a thread so that a server that never prints cannot hang the test.
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
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_addr: None,
            log,
            on_drop,
        };
        loop {
            match rx.recv_timeout(READY_TIMEOUT) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("wisp admin listening on ") {
                        server.admin_addr = addr.trim().parse().ok();
                    }
                    if let Some(addr) = line.strip_prefix("wisp listening on ") {
                        server.addr = addr.trim().parse().expect("address in the ready line");
                        return server;
                    }
                }
                Err(err) => panic!(
                    "wisp serve did not become ready ({err}); log:\n{}",
                    server.log_text()
                ),
            }
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the server serves `/metrics` and `/version`.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The server's resident memory now and at its peak, in KiB (`VmRSS`, `VmHWM`).
    pub fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read the server's /proc status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {status}"))
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Sends SIGTERM (what systemd and `docker stop` send) and waits up to `limit` for the
    /// exit; `None` if the server is still running then. Waits asynchronously, so that the
    /// test's own clients keep running (and can close their connections) meanwhile.
    pub async fn terminate(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        self.send_sigterm();
        self.wait_exit(limit).await
    }

    /// Sends SIGTERM and returns at once.
    pub fn send_sigterm(&self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
    }

    /// Waits for the process to end, for at most `limit`; `None` if it is still running.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for wisp serve") {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.on_drop.take() {
            stop();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// A data directory with a server on it
// ---------------------------------------------------------------------------------------

/// A fresh data directory with `wisp serve` running on it. The server is killed before the
/// directory is removed.
pub struct Wisp {
    server: Option<Server>,
    /// A `wisp bridge` in front of the server, started by the first [`Via::Bridge`] client.
    bridge: std::sync::OnceLock<bridge::Bridge>,
    dir: TempDir,
    /// AWS backends (a config file naming them) instead of the embedded stores.
    aws: Option<aws::AwsBackend>,
    /// The Lambda functions behind an ALB emulator, in place of `wisp serve`.
    lambda: Option<lambda::LambdaFront>,
    /// A config file for the embedded stores (`--config`), and the scheduled jobs on.
    jobs_config: Option<PathBuf>,
}

/// A registered piped and the plaintext key the CLI printed for it.
#[derive(Debug, Clone)]
pub struct Piped {
    pub project: String,
    pub id: String,
    pub key: String,
}

impl Piped {
    /// `PIPED-TOKEN <project>,<piped>,<key>`.
    pub fn authorization(&self) -> String {
        self.authorization_with(&self.project, &self.key)
    }

    /// The token of this piped, claiming `project` and presenting `key`.
    pub fn authorization_with(&self, project: &str, key: &str) -> String {
        format!("PIPED-TOKEN {project},{},{key}", self.id)
    }
}

impl Wisp {
    pub fn start() -> Wisp {
        Self::launch(tempfile::tempdir().expect("create a data dir"), None)
    }

    /// A control plane on `dir` with nothing started and embedded stores; the
    /// constructors below change what they need.
    fn stopped(dir: TempDir) -> Wisp {
        Wisp {
            server: None,
            bridge: std::sync::OnceLock::new(),
            dir,
            aws: None,
            lambda: None,
            jobs_config: None,
        }
    }

    /// Starts `wisp serve` on `dir`, with the stores `aws` names (embedded when `None`).
    fn launch(dir: TempDir, aws: Option<aws::AwsBackend>) -> Wisp {
        let mut wisp = Wisp {
            aws,
            ..Wisp::stopped(dir)
        };
        wisp.server = Some(wisp.start_server());
        wisp
    }

    /// `wisp serve` on embedded stores with the scheduled jobs on, configured by a config
    /// file whose `spec` holds `spec_yaml` (indented two spaces) beside the `LOCAL` stores
    /// and project `quickstart` (static admin hello-pipecd / hello-pipecd, as on the
    /// defaults).
    pub fn start_with_jobs(spec_yaml: &str) -> Wisp {
        let dir = tempfile::tempdir().expect("create a data dir");
        let config = dir.path().join("wisp.yaml");
        // The lowest bcrypt cost: this hash is checked at each console login of the test.
        let hash = wisp_auth::keys::hash_secret_with_cost("hello-pipecd", 4).expect("hash");
        std::fs::write(
            &config,
            format!(
                "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore:\n    type: LOCAL\n  filestore:\n    type: LOCAL\n  projects:\n    - id: {QUICKSTART}\n      staticAdmin:\n        username: hello-pipecd\n        passwordHash: \"{hash}\"\n{spec_yaml}"
            ),
        )
        .expect("write the config");
        let mut wisp = Wisp {
            jobs_config: Some(config),
            ..Wisp::stopped(dir)
        };
        wisp.server = Some(wisp.start_server());
        wisp
    }

    fn start_server(&self) -> Server {
        match (&self.aws, &self.jobs_config) {
            (Some(aws), _) => Server::start_with(self.dir.path(), &aws.serve_args(), &aws.env()),
            (None, Some(config)) => Server::start_with_jobs(
                self.dir.path(),
                &["--config".into(), config.clone().into()],
                &[],
            ),
            (None, None) => Server::start(self.dir.path()),
        }
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn server(&self) -> &Server {
        self.server.as_ref().expect("the server is running")
    }

    /// Where clients connect: `wisp serve`, or the ALB emulator in front of the Lambda
    /// functions (gRPC-web and HTTP/1.1 only, as a real ALB → Lambda path).
    pub fn addr(&self) -> SocketAddr {
        match &self.lambda {
            Some(front) => front.addr(),
            None => self.server().addr(),
        }
    }

    /// The `wisp bridge` in front of this server (started on first use).
    pub fn bridge(&self) -> &bridge::Bridge {
        self.bridge.get_or_init(|| {
            bridge::Bridge::start(&format!("http://{}", self.addr()), self.data_dir(), &[])
        })
    }

    /// Puts `bridge` (started with [`bridge::Bridge::start_command`]) in front of this
    /// control plane, before any client used the default one.
    pub fn use_bridge(&self, bridge: bridge::Bridge) {
        assert!(
            self.bridge.set(bridge).is_ok(),
            "a bridge is already in front of this control plane"
        );
    }

    /// Where a client using `via` connects: the server, or its bridge.
    fn endpoint(&self, via: Via) -> SocketAddr {
        match via {
            // Behind an ALB, native gRPC clients (pipeds, pipectl) reach the functions
            // through `wisp bridge` only.
            Via::Grpc if self.lambda.is_some() => self.bridge().addr(),
            Via::Grpc | Via::GrpcWeb => self.addr(),
            Via::Bridge => self.bridge().addr(),
        }
    }

    /// Stops the server with SIGTERM, waiting up to `limit`; returns its exit status
    /// (`None`: still running, then killed) and its log.
    pub async fn terminate(
        &mut self,
        limit: Duration,
    ) -> (Option<std::process::ExitStatus>, String) {
        let mut server = self.server.take().expect("the server is running");
        self.bridge = std::sync::OnceLock::new();
        let status = server.terminate(limit).await;
        (status, server.log_text())
    }

    /// Kills the server; the data directory stays (admin commands still work on it).
    pub fn stop(&mut self) {
        self.bridge = std::sync::OnceLock::new();
        drop(self.server.take());
    }

    /// Kills the server (SIGKILL: nothing gets a chance to flush) and starts a new one on
    /// the same data directory. Clients of the old server must be rebuilt.
    pub fn restart(&mut self) {
        self.bridge = std::sync::OnceLock::new();
        drop(self.server.take());
        self.server = Some(self.start_server());
    }

    /// Runs an admin command against this data directory (and config, on AWS backends).
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        match (&self.aws, &self.jobs_config) {
            (Some(aws), _) => run_cli_with(self.data_dir(), args, &aws.store_args(), &aws.env()),
            (None, Some(config)) => run_cli_with(
                self.data_dir(),
                args,
                &["--config".into(), config.clone().into()],
                &[],
            ),
            (None, None) => run_cli(self.data_dir(), args),
        }
    }

    /// Runs an admin command that must succeed; returns its stdout.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert_eq!(out.code, 0, "wisp {args:?} failed: {out:?}");
        out.stdout
    }

    /// Runs an admin command with `--json` that must succeed; returns the parsed output.
    pub fn cli_json(&self, args: &[&str]) -> serde_json::Value {
        let mut args = args.to_vec();
        args.push("--json");
        let stdout = self.cli_ok(&args);
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("wisp {args:?} printed no JSON ({e}): {stdout:?}"))
    }

    pub fn add_project(&self, id: &str) {
        self.cli_ok(&["project", "add", id]);
    }

    /// `wisp piped add --project <project> --name <name> --json`.
    pub fn add_piped(&self, project: &str, name: &str) -> Piped {
        let out = self.cli_json(&["piped", "add", "--project", project, "--name", name]);
        Piped {
            project: project.to_string(),
            id: json_str(&out, "id"),
            key: json_str(&out, "key"),
        }
    }

    /// `wisp piped rotate-key`: the piped's new key (the old one keeps working).
    pub fn rotate_key(&self, piped: &Piped) -> Piped {
        let out = self.cli_json(&[
            "piped",
            "rotate-key",
            "--project",
            &piped.project,
            &piped.id,
        ]);
        assert_eq!(json_str(&out, "id"), piped.id);
        Piped {
            key: json_str(&out, "key"),
            ..piped.clone()
        }
    }

    /// `wisp application add` of a Kubernetes application managed by `piped`, in repo
    /// `examples` at `apps/<name>`; returns its id.
    pub fn add_app(&self, piped: &Piped, name: &str, labels: &[(&str, &str)]) -> String {
        let path = format!("apps/{name}");
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args = vec![
            "application",
            "add",
            "--project",
            &piped.project,
            "--piped",
            &piped.id,
            "--name",
            name,
            "--repo-id",
            "examples",
            "--path",
            &path,
            "--config-file",
            "app.pipecd.yaml",
        ];
        for label in &labels {
            args.extend(["--label", label.as_str()]);
        }
        json_str(&self.cli_json(&args), "id")
    }

    /// A client that sends `authorization` (or no credentials at all).
    pub async fn client(&self, via: Via, authorization: Option<&str>) -> Client {
        connect(self.endpoint(via), via, authorization).await
    }

    /// A client authenticated as `piped`.
    pub async fn piped_client(&self, via: Via, piped: &Piped) -> Client {
        self.client(via, Some(&piped.authorization())).await
    }

    /// The raw transport and interceptor, for calls the generated client cannot make
    /// (e.g. under the legacy `/pipe.api.service.*` path).
    pub async fn transport(&self, via: Via, authorization: Option<&str>) -> Authenticated {
        InterceptedService::new(
            transport(self.endpoint(via), via).await,
            Authorization::new(authorization),
        )
    }

    /// `GET <path>` over HTTP/1.1: status and body.
    pub async fn http_get(&self, path: &str) -> (http::StatusCode, String) {
        self.http_request(http::Method::GET, path).await
    }

    pub async fn http_request(
        &self,
        method: http::Method,
        path: &str,
    ) -> (http::StatusCode, String) {
        http_request_to(self.addr(), method, path).await
    }

    /// A raw HTTP/1.1 `POST <path>` with `headers` and `body`, as a browser sends it:
    /// status, HTTP version, headers and the whole body.
    pub async fn http_post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> RawResponse {
        http_post_to(self.addr(), path, headers, body).await
    }

    /// An object of the filestore (the embedded one's `<data-dir>/filestore/objects.db`),
    /// if present and text.
    pub fn filestore_object(&self, path: &str) -> Option<String> {
        match &self.aws {
            None => objects::Objects::open(self.data_dir())
                .read(path)
                .and_then(|data| String::from_utf8(data).ok()),
            Some(aws) => aws.filestore_object(path),
        }
    }
}

/// [`Wisp::http_post`] to any server (another instance on the same stores, say).
/// `<method> <path>` over HTTP/1.1 to `addr`: status and body.
pub async fn http_request_to(
    addr: SocketAddr,
    method: http::Method,
    path: &str,
) -> (http::StatusCode, String) {
    let client = HyperClient::builder(TokioExecutor::new()).build_http::<String>();
    let req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .body(String::new())
        .expect("a valid request");
    let resp = client.request(req).await.expect("HTTP request");
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .expect("read the body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

pub async fn http_post_to(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> RawResponse {
    let client = HyperClient::builder(TokioExecutor::new())
        .build_http::<http_body_util::Full<tonic::codegen::Bytes>>();
    let mut req = http::Request::builder()
        .method(http::Method::POST)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req
        .body(http_body_util::Full::new(body.into()))
        .expect("a valid request");
    let resp = client.request(req).await.expect("HTTP request");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("read the body").to_bytes();
    RawResponse {
        status: parts.status,
        version: parts.version,
        headers: parts.headers,
        body: body.to_vec(),
    }
}

/// What [`Wisp::http_post`] got back.
#[derive(Debug)]
pub struct RawResponse {
    pub status: http::StatusCode,
    pub version: http::Version,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

fn json_str(value: &serde_json::Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("no string {field:?} in {value}"))
        .to_string()
}

// ---------------------------------------------------------------------------------------
// The admin CLI
// ---------------------------------------------------------------------------------------

/// What an admin command did.
#[derive(Debug, Clone)]
pub struct CliOutput {
    /// Exit status (-1 when killed by a signal).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `wisp <args> --data-dir <data_dir>`.
pub fn run_cli(data_dir: &Path, args: &[&str]) -> CliOutput {
    run_cli_with(data_dir, args, &[], &[])
}

/// Runs `wisp <args> --data-dir <data_dir> <more...>` with extra environment.
pub fn run_cli_with(
    data_dir: &Path,
    args: &[&str],
    more: &[OsString],
    env: &[(OsString, OsString)],
) -> CliOutput {
    let out = wisp_command()
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .args(more)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("run wisp");
    CliOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A fresh, empty data directory with no server on it.
pub fn empty_data_dir() -> TempDir {
    tempfile::tempdir().expect("create a data dir")
}

// ---------------------------------------------------------------------------------------
// gRPC clients
// ---------------------------------------------------------------------------------------

/// How a client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Native gRPC over HTTP/2 cleartext, as a piped started with `--insecure`.
    Grpc,
    /// gRPC-web over HTTP/1.1, as the console or `wisp bridge`.
    GrpcWeb,
    /// Native gRPC to a `wisp bridge`, which forwards it as gRPC-web over HTTP/1.1: an
    /// unmodified piped using the serverless deployment. (Given to [`connect`] with an
    /// address, that address is the bridge's.)
    Bridge,
}

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A transport failure (connection refused, reset, ...), as one concrete type: with the
/// bare `BoxError` as the service error, client futures cannot be proven `Send` for
/// `tokio::spawn`.
#[derive(Debug)]
pub struct TransportError(BoxError);

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref())
    }
}

/// Either transport, boxed so that both give the same client type.
pub type Transport = BoxCloneService<http::Request<Body>, http::Response<Body>, TransportError>;

/// A transport that adds the credentials to every call.
pub type Authenticated = InterceptedService<Transport, Authorization>;

/// The generated PipedService client over either transport.
pub type Client = PipedServiceClient<Authenticated>;

/// Adds `authorization: <value>` to every request (when set).
#[derive(Clone)]
pub struct Authorization(Option<AsciiMetadataValue>);

impl Authorization {
    pub fn new(value: Option<&str>) -> Self {
        Authorization(value.map(|v| MetadataValue::try_from(v).expect("an ASCII header value")))
    }
}

impl Interceptor for Authorization {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(value) = &self.0 {
            req.metadata_mut().insert("authorization", value.clone());
        }
        Ok(req)
    }
}

/// The largest message the clients accept (the server's limit).
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

pub async fn connect(addr: SocketAddr, via: Via, authorization: Option<&str>) -> Client {
    PipedServiceClient::with_interceptor(
        transport(addr, via).await,
        Authorization::new(authorization),
    )
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
}

async fn transport(addr: SocketAddr, via: Via) -> Transport {
    let origin: http::Uri = format!("http://{addr}").parse().expect("a valid origin");
    match via {
        Via::Grpc | Via::Bridge => {
            let channel = Channel::builder(origin)
                .connect()
                .await
                .expect("connect to wisp serve");
            BoxCloneService::new(channel.map_err(|e| TransportError(e.into())))
        }
        Via::GrpcWeb => {
            // hyper's HTTP/1-only client under tonic-web's client layer: what goes over
            // the socket is `application/grpc-web` on HTTP/1.1.
            let http1 = HyperClient::builder(TokioExecutor::new()).build_http();
            let web = tower::ServiceBuilder::new()
                .layer(tonic_web::GrpcWebClientLayer::new())
                .service(http1);
            let svc = AddOrigin { inner: web, origin };
            BoxCloneService::new(
                svc.map_response(|resp: http::Response<_>| resp.map(Body::new))
                    .map_err(|e| TransportError(e.into())),
            )
        }
    }
}

/// A tonic channel (connected however the test needs, e.g. over TLS) as a [`Transport`].
pub fn boxed_channel(channel: Channel) -> Transport {
    BoxCloneService::new(channel.map_err(|e| TransportError(e.into())))
}

/// Makes the request URI absolute, as hyper's client needs (tonic's `Channel` does this
/// itself; a bare service given to a generated client sends only the path).
#[derive(Clone)]
struct AddOrigin<S> {
    inner: S,
    origin: http::Uri,
}

impl<S, B> tower::Service<http::Request<B>> for AddOrigin<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let mut parts = self.origin.clone().into_parts();
        parts.path_and_query = req.uri().path_and_query().cloned();
        *req.uri_mut() = http::Uri::from_parts(parts).expect("an absolute URI");
        self.inner.call(req)
    }
}

// ---------------------------------------------------------------------------------------
// Assertions
// ---------------------------------------------------------------------------------------

/// Asserts that `result` failed with `code` and a message containing `needle`.
#[track_caller]
pub fn assert_status<T: std::fmt::Debug>(result: Result<T, Status>, code: Code, needle: &str) {
    match result {
        Ok(value) => panic!("expected {code:?} ({needle:?}), got Ok({value:?})"),
        Err(status) => {
            assert_eq!(
                status.code(),
                code,
                "expected {code:?} ({needle:?}), got {status:?}"
            );
            assert!(
                status.message().contains(needle),
                "expected a message containing {needle:?}, got {status:?}"
            );
        }
    }
}

/// Unwraps a response, failing with the status if there is none.
#[track_caller]
pub fn ok<T>(result: Result<tonic::Response<T>, Status>) -> T {
    match result {
        Ok(resp) => resp.into_inner(),
        Err(status) => panic!("unexpected error status: {status:?}"),
    }
}

/// One unary PipedService call under upstream's legacy service name
/// (`/pipe.api.service.pipedservice.PipedService/<method>`), which the server aliases.
pub async fn legacy_call<Req, Resp>(
    transport: Authenticated,
    method: &str,
    request: Req,
) -> Result<Resp, Status>
where
    Req: tonic_prost::prost::Message + Send + Sync + 'static,
    Resp: tonic_prost::prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(transport);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("transport not ready: {e}")))?;
    let path: http::uri::PathAndQuery =
        format!("/pipe.api.service.pipedservice.PipedService/{method}")
            .parse()
            .expect("a valid path");
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    grpc.unary(tonic::Request::new(request), path, codec)
        .await
        .map(tonic::Response::into_inner)
}
