//! The Lambda functions as AWS runs them, on one machine: each real `bootstrap` binary
//! (`target/debug/wisp-piped-api`, ...) runs as its own process against a Lambda Runtime
//! API emulator, and an ALB emulator in front turns each HTTP request into an ALB
//! target-group event for the function its path belongs to, and the function's ALB
//! response back into HTTP. State lives on the AWS stand-ins (DynamoDB Local, moto), the
//! config and the encryption key in Secrets Manager (moto), as in a deployment.
//!
//! The Runtime API of the functions behind the ALB is cargo-lambda's, a maintained
//! emulator (PyPI `cargo-lambda`, `cargo lambda watch --only-lambda-apis`; one process
//! serves every function at `/.rt/<function>`, and invokes them at
//! `/2015-03-31/functions/<function>/invocations`). The ALB emulator here is only the
//! adapter in front: the event shape and the ALB's limits. The scheduled `jobs` function
//! stays on the hand-written Runtime API below, and `WISP_TEST_RUNTIME_API=hand-written`
//! puts every function there (tests/README.md, "The Lambda Runtime API", says why).
//!
//! Like AWS, each function instance handles one event at a time; the ALB emulator queues
//! the rest. The ALB's limits for Lambda targets hold here as there: a request body over
//! 1 MB is refused with 413 before any function sees it, and a function response whose
//! JSON is over 1 MB becomes a 502. The `http` function reads the console's files from
//! the bucket's `console/` prefix (the deployment's `web_prefix`), where `wisp console
//! upload` puts them.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use super::aws::{AwsBackend, AwsEnv, skip, unique_name};
use super::{QUICKSTART, Wisp, run_cli_with};

/// The functions behind the ALB, and the path prefixes routed to each (the rest goes to
/// `http`). The same table the ALB listener rules implement.
const ROUTES: &[(&str, &[&str])] = &[
    (
        "wisp-piped-api",
        &[
            "/grpc.service.pipedservice.PipedService/",
            "/pipe.api.service.pipedservice.PipedService/",
            "/opentelemetry.proto.collector.trace.v1.TraceService/",
            "/v1/traces",
        ],
    ),
    (
        "wisp-api",
        &[
            "/grpc.service.apiservice.APIService/",
            "/pipe.api.service.apiservice.APIService/",
        ],
    ),
    (
        "wisp-web-api",
        &[
            "/grpc.service.webservice.WebService/",
            "/pipe.api.service.webservice.WebService/",
        ],
    ),
];
const DEFAULT_FUNCTION: &str = "wisp-http";
/// Functions that take no ALB traffic, invoked directly (EventBridge in AWS).
const SCHEDULED: &[&str] = &["wisp-jobs"];

// The ALB's limits for Lambda targets (ALB_MAX_REQUEST_BODY, ALB_MAX_RESPONSE_JSON):
// the functions' own copy, one file with AWS's words for them.
mod alb_limits {
    include!("../../../shared/lambda/src/alb_limits.rs");
}
pub use alb_limits::{ALB_MAX_REQUEST_BODY, ALB_MAX_RESPONSE_JSON};
/// The `http` function's WISP_WEB_PREFIX, as the Terraform module and SAM template set it.
pub const WEB_PREFIX: &str = "console/";

/// How long an invocation may take before the emulator gives up (the ALB's timeout).
const INVOKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a function may take to reach its first `next` call.
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// cargo-lambda's `--timeout`, far beyond any test: it bounds the Runtime API's `next`
/// long poll too, answering an idle function's `next` with a 408 that carries no request
/// id, on which lambda_runtime panics and the function exits. The ALB adapter keeps the
/// ALB's own timeout ([`INVOKE_TIMEOUT`]) on each invocation.
const CARGO_LAMBDA_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The directory cargo put the workspace's binaries in (this test's `../..`).
pub fn binary_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// The function binaries, or the first one missing.
pub fn function_binaries() -> Result<Vec<(&'static str, PathBuf)>, PathBuf> {
    let dir = binary_dir();
    ROUTES
        .iter()
        .map(|(name, _)| *name)
        .chain([DEFAULT_FUNCTION])
        .chain(SCHEDULED.iter().copied())
        .map(|name| {
            let path = dir.join(name);
            if path.is_file() {
                Ok((name, path))
            } else {
                Err(path)
            }
        })
        .collect()
}

/// Changes to each function's environment, by function name: `None` removes a variable.
pub type FunctionEnv = HashMap<&'static str, Vec<(String, Option<String>)>>;

/// Where a function's response (or error text) goes.
type Reply = oneshot::Sender<Result<Vec<u8>, String>>;

/// How an event reaches a function instance.
#[derive(Clone)]
enum Invoker {
    /// The hand-written Runtime API's queue.
    Queue(mpsc::UnboundedSender<Invocation>),
    /// cargo-lambda's invoke endpoint for the function.
    CargoLambda {
        url: String,
        client: Arc<HyperClient<HttpConnector, Full<Bytes>>>,
    },
}

/// The PyPI package the tests install (scripts/test, .ci/run) for the Runtime API.
pub const CARGO_LAMBDA: &str = "cargo-lambda==1.9.2";
/// `hand-written` runs every function on the hand-written Runtime API instead.
pub const RUNTIME_API_VAR: &str = "WISP_TEST_RUNTIME_API";

/// cargo-lambda's Runtime API emulator, serving every function it is given.
struct CargoLambda {
    child: Child,
    log: PathBuf,
    /// `http://127.0.0.1:PORT`.
    base: String,
}

impl CargoLambda {
    /// Whether to use it: yes unless `WISP_TEST_RUNTIME_API=hand-written`, or it is not
    /// installed (a note; a failure under `WISP_REQUIRE_AWS_TESTS=1`).
    fn wanted() -> bool {
        if std::env::var(RUNTIME_API_VAR).as_deref() == Ok("hand-written") {
            return false;
        }
        let installed = Command::new("cargo-lambda")
            .args(["lambda", "--version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            let what = format!(
                "cargo-lambda is not installed (pip install {CARGO_LAMBDA}; scripts/test \
                 installs it)"
            );
            assert!(
                std::env::var("WISP_REQUIRE_AWS_TESTS").as_deref() != Ok("1"),
                "{what}, but WISP_REQUIRE_AWS_TESTS=1 requires the Lambda tests to run on it"
            );
            eprintln!("note: {what}: the functions run on the hand-written Runtime API");
        }
        installed
    }

    /// Starts `cargo lambda watch --only-lambda-apis` for `functions` on a free port.
    /// It takes the function names from a Cargo manifest's binaries (invocations of
    /// other names are refused), so it runs in a directory holding one that names them.
    fn start(dir: &Path, functions: &[&str]) -> CargoLambda {
        let project = dir.join("cargo-lambda");
        std::fs::create_dir_all(&project).expect("cargo-lambda's directory");
        let mut manifest = String::from(
            "[package]\nname = \"wisp-functions\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             [workspace]\n",
        );
        for name in functions {
            manifest.push_str(&format!("[[bin]]\nname = \"{name}\"\npath = \"main.rs\"\n"));
        }
        std::fs::write(project.join("Cargo.toml"), manifest).expect("its manifest");
        std::fs::write(project.join("main.rs"), "fn main() {}\n").expect("its main.rs");
        let log = dir.join("cargo-lambda.log");
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let out = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("open cargo-lambda's log");
            let mut child = Command::new("cargo-lambda")
                .args([
                    "lambda",
                    "watch",
                    "--only-lambda-apis",
                    "-A",
                    "127.0.0.1",
                    "-P",
                ])
                .arg(port.to_string())
                .arg("--timeout")
                .arg(CARGO_LAMBDA_TIMEOUT.as_secs().to_string())
                .current_dir(&project)
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("log handle"))
                .stderr(out)
                .spawn()
                .expect("start cargo-lambda");
            let started = Instant::now();
            loop {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return CargoLambda {
                        child,
                        log,
                        base: format!("http://127.0.0.1:{port}"),
                    };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken meanwhile, most likely: another one
                }
                assert!(
                    started.elapsed() < INIT_TIMEOUT,
                    "cargo-lambda did not listen within {INIT_TIMEOUT:?}:\n{}",
                    read_log(&log)
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("cargo-lambda did not start:\n{}", read_log(&log));
    }
}

/// One invocation waiting for, or held by, a function instance.
struct Invocation {
    event: Vec<u8>,
    reply: Reply,
}

/// The Runtime API side of one function: a queue of events, the ones in flight, and
/// whether the instance has asked for its first event (init done).
struct RuntimeApi {
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Invocation>>,
    in_flight: Mutex<HashMap<String, Reply>>,
    ready: Mutex<Option<Instant>>,
    init_error: Mutex<Option<String>>,
}

/// A function: its process, its Runtime API emulator (the hand-written one's state, or
/// none for cargo-lambda's), and how to invoke it.
struct Function {
    name: &'static str,
    child: Child,
    log: PathBuf,
    invoke: Invoker,
    api: Option<Arc<RuntimeApi>>,
}

/// The running emulation; everything stops on drop.
pub struct LambdaFront {
    addr: SocketAddr,
    functions: Routes,
    children: Vec<(&'static str, Child, PathBuf)>,
    runtime: Option<tokio::runtime::Runtime>,
    /// How long each function took from spawn to its first `next` call.
    pub init_times: Vec<(&'static str, Duration)>,
    /// The quickstart project's static admin (username, password).
    pub admin: Option<(String, String)>,
    /// Functions whose listener rule is gone (`remove_route`).
    unrouted: Unrouted,
}

/// Functions whose ALB listener rule was removed: their paths go to the default action.
type Unrouted = Arc<Mutex<std::collections::HashSet<&'static str>>>;

impl LambdaFront {
    /// Starts every function (config and key read from the secrets `backend` names, on
    /// moto) and the ALB emulator; returns once each function asked for its first event.
    pub fn start(backend: &AwsBackend, dir: &Path) -> LambdaFront {
        Self::start_with(backend, dir, &HashMap::new())
    }

    /// [`LambdaFront::start`] with each function's environment changed as `env` says
    /// (by function name, `wisp-api`, ...): a value sets a variable, `None` removes it
    /// (support/iam.rs: each function's own credentials and the deployment's variables).
    pub fn start_with(backend: &AwsBackend, dir: &Path, env: &FunctionEnv) -> LambdaFront {
        let binaries = function_binaries().unwrap_or_else(|missing| {
            panic!(
                "{} is missing: run the whole workspace's tests (`cargo test --workspace`, as \
                 scripts/test does), which builds the function bootstraps",
                missing.display()
            )
        });
        let config_secret = backend
            .config_secret
            .clone()
            .expect("the functions read their config from a secret");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the emulator's runtime");

        // The functions behind the ALB on cargo-lambda's Runtime API; the scheduled ones
        // on the hand-written one (tests/README.md).
        let on_cargo_lambda: Vec<&'static str> = binaries
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| !SCHEDULED.contains(name))
            .collect();
        let cargo_lambda = CargoLambda::wanted().then(|| CargoLambda::start(dir, &on_cargo_lambda));
        let mut functions = Vec::new();
        for (name, path) in binaries {
            let (dir, backend, config_secret) =
                (dir.to_path_buf(), backend.clone(), config_secret.clone());
            let own = env.get(name).cloned().unwrap_or_default();
            let base = cargo_lambda
                .as_ref()
                .filter(|_| on_cargo_lambda.contains(&name))
                .map(|c| c.base.clone());
            let function = run_on(&runtime, async move {
                start_function(name, &path, &dir, &backend, &config_secret, &own, base).await
            });
            functions.push(function);
        }

        // Wait for every instance to finish init: its first `next` on the hand-written
        // Runtime API; on cargo-lambda's, its answer to the ALB's health check (which the
        // ALB also sends before it routes traffic to a target).
        let spawned = Instant::now();
        let mut init_times = Vec::new();
        // A function that fails its init stops the start; the others, and cargo-lambda,
        // are stopped rather than left running.
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for f in &mut functions {
                let Some(api) = f.api.clone() else {
                    let probe = runtime.spawn(invoke(f.invoke.clone(), health_check_event(f.name)));
                    loop {
                        if probe.is_finished() {
                            let answer = run_on(&runtime, probe).expect("the health check ran");
                            let answer = answer.unwrap_or_else(|e| {
                                panic!("{}: health check failed: {e}\n{}", f.name, read_log(&f.log))
                            });
                            let answer = alb_response(&answer)
                                .unwrap_or_else(|e| panic!("{}: health check answer: {e}", f.name));
                            assert_eq!(answer.status(), StatusCode::OK, "{}: health check", f.name);
                            init_times.push((f.name, spawned.elapsed()));
                            break;
                        }
                        if let Ok(Some(status)) = f.child.try_wait() {
                            panic!(
                                "{} exited during init ({status}):\n{}",
                                f.name,
                                read_log(&f.log)
                            );
                        }
                        assert!(
                            spawned.elapsed() < INIT_TIMEOUT,
                            "{} did not answer a health check within {INIT_TIMEOUT:?}:\n{}",
                            f.name,
                            read_log(&f.log)
                        );
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    continue;
                };
                loop {
                    if let Some(at) = *api.ready.lock().expect("ready") {
                        init_times.push((f.name, at.duration_since(spawned)));
                        break;
                    }
                    if let Some(err) = api.init_error.lock().expect("init error").clone() {
                        panic!(
                            "{} reported an init error: {err}\n{}",
                            f.name,
                            read_log(&f.log)
                        );
                    }
                    if let Ok(Some(status)) = f.child.try_wait() {
                        panic!(
                            "{} exited during init ({status}):\n{}",
                            f.name,
                            read_log(&f.log)
                        );
                    }
                    assert!(
                        spawned.elapsed() < INIT_TIMEOUT,
                        "{} did not finish init within {INIT_TIMEOUT:?}:\n{}",
                        f.name,
                        read_log(&f.log)
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }));
        if let Err(panic) = waited {
            for f in &mut functions {
                let _ = f.child.kill();
                let _ = f.child.wait();
            }
            if let Some(mut c) = cargo_lambda {
                let _ = c.child.kill();
                let _ = c.child.wait();
            }
            runtime.shutdown_background();
            std::panic::resume_unwind(panic);
        }

        let routes: HashMap<&'static str, Route> = functions
            .iter()
            .map(|f| {
                let route = Route {
                    tx: f.invoke.clone(),
                    log: f.log.clone(),
                    invocations: Default::default(),
                };
                (f.name, route)
            })
            .collect();
        let routes = Arc::new(routes);
        let listener =
            run_on(&runtime, TcpListener::bind("127.0.0.1:0")).expect("bind the ALB emulator");
        let addr = listener.local_addr().expect("ALB address");
        let unrouted = Unrouted::default();
        runtime.spawn(serve_alb(listener, routes.clone(), unrouted.clone()));

        let mut children: Vec<(&'static str, Child, PathBuf)> = functions
            .into_iter()
            .map(|f| (f.name, f.child, f.log))
            .collect();
        if let Some(c) = cargo_lambda {
            children.push(("cargo-lambda", c.child, c.log));
        }
        LambdaFront {
            addr,
            functions: routes,
            children,
            runtime: Some(runtime),
            init_times,
            admin: None,
            unrouted,
        }
    }

    /// Removes the listener rule of `function` (e.g. `wisp-api`): its paths then go to
    /// the default action, the http function, as on an ALB missing that rule.
    pub fn remove_route(&self, function: &'static str) {
        self.unrouted.lock().expect("routes").insert(function);
    }

    /// Where the "ALB" listens (plain HTTP/1.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Invokes `function` directly with `event` (as EventBridge does); its response.
    pub fn invoke(&self, function: &str, event: &serde_json::Value) -> Result<Vec<u8>, String> {
        let route = self
            .functions
            .get(function)
            .unwrap_or_else(|| panic!("no function {function}"));
        route
            .invocations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tx = route.tx.clone();
        let event = serde_json::to_vec(event).expect("event JSON");
        run_on(self.runtime.as_ref().expect("running"), invoke(tx, event))
    }

    /// How many events `function` has been sent.
    pub fn invocations(&self, function: &str) -> u64 {
        self.functions
            .get(function)
            .map(|r| r.invocations.load(std::sync::atomic::Ordering::Relaxed))
            .unwrap_or(0)
    }

    /// The process id of `function`'s instance, while it runs (`None` once it exited).
    pub fn pid(&mut self, function: &str) -> Option<u32> {
        let (_, child, _) = self
            .children
            .iter_mut()
            .find(|(name, _, _)| *name == function)?;
        match child.try_wait() {
            Ok(None) => Some(child.id()),
            _ => None,
        }
    }

    /// Everything `function` logged so far.
    pub fn log_text(&self, function: &str) -> String {
        self.children
            .iter()
            .find(|(name, _, _)| *name == function)
            .map(|(_, _, log)| read_log(log))
            .unwrap_or_default()
    }
}

impl Drop for LambdaFront {
    fn drop(&mut self) {
        for (_, child, _) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `future` on the emulator's own runtime and waits for it; usable from a test's
/// (async) thread, where `block_on` is not.
fn run_on<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    future: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        let _ = tx.send(future.await);
    });
    rx.recv().expect("the emulator's runtime is running")
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

async fn start_function(
    name: &'static str,
    path: &Path,
    dir: &Path,
    backend: &AwsBackend,
    config_secret: &str,
    own_env: &[(String, Option<String>)],
    cargo_lambda: Option<String>,
) -> Function {
    // cargo-lambda's Runtime API (at `base`), or a hand-written one of its own.
    let (runtime_api, invoke, api) = match cargo_lambda {
        Some(base) => {
            let invoker = Invoker::CargoLambda {
                url: format!("{base}/2015-03-31/functions/{name}/invocations"),
                client: Arc::new(HyperClient::builder(TokioExecutor::new()).build_http()),
            };
            (format!("{base}/.rt/{name}"), invoker, None)
        }
        None => {
            let (invoke, queue) = mpsc::unbounded_channel();
            let api = Arc::new(RuntimeApi {
                queue: tokio::sync::Mutex::new(queue),
                in_flight: Mutex::new(HashMap::new()),
                ready: Mutex::new(None),
                init_error: Mutex::new(None),
            });
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind a Runtime API emulator");
            let addr = listener.local_addr().expect("Runtime API address");
            tokio::spawn(serve_runtime_api(listener, api.clone()));
            (addr.to_string(), Invoker::Queue(invoke), Some(api))
        }
    };

    let log = dir.join(format!("{name}.log"));
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .expect("open the function log");
    let mut cmd = Command::new(path);
    for (key, value) in backend.env() {
        cmd.env(key, value);
    }
    super::aws::child_env(&mut cmd);
    cmd.env("AWS_LAMBDA_RUNTIME_API", runtime_api)
        .env("AWS_LAMBDA_FUNCTION_NAME", name)
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
        .env("WISP_CONFIG_SECRET", config_secret)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log handle"))
        .stderr(out);
    if let Some(key) = &backend.key_secret {
        cmd.env("WISP_ENCRYPTION_KEY_SECRET", key);
    }
    if name == DEFAULT_FUNCTION {
        cmd.env("WISP_WEB_PREFIX", WEB_PREFIX);
    }
    for (key, value) in own_env {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", path.display()));
    Function {
        name,
        child,
        log,
        invoke,
        api,
    }
}

/// Invokes a function with `event`: its response, or the error it (or its Runtime API)
/// reported.
async fn invoke(invoker: Invoker, event: Vec<u8>) -> Result<Vec<u8>, String> {
    match invoker {
        Invoker::Queue(tx) => {
            let (reply, response) = oneshot::channel();
            tx.send(Invocation { event, reply })
                .map_err(|_| "the function is gone".to_string())?;
            match tokio::time::timeout(INVOKE_TIMEOUT, response).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err("the function dropped the invocation".into()),
                Err(_) => Err(format!("no response within {INVOKE_TIMEOUT:?}")),
            }
        }
        Invoker::CargoLambda { url, client } => {
            let request = Request::post(&url)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(event)))
                .map_err(|e| e.to_string())?;
            let call = async {
                let response = client.request(request).await.map_err(|e| e.to_string())?;
                let status = response.status();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?
                    .to_bytes();
                // A function error comes back as a 500 with the error document. A
                // response over 1 MiB comes back as an empty 200 (cargo-lambda 1.9.2
                // drops it); over the ALB's limit either way, and never empty otherwise.
                if status == StatusCode::OK && body.is_empty() {
                    Err(
                        "cargo-lambda passed on an empty response (it drops those over \
                         1 MiB)"
                            .into(),
                    )
                } else if status == StatusCode::OK {
                    Ok(body.to_vec())
                } else {
                    Err(format!(
                        "cargo-lambda answered {status}: {}",
                        String::from_utf8_lossy(&body)
                    ))
                }
            };
            match tokio::time::timeout(INVOKE_TIMEOUT, call).await {
                Ok(result) => result,
                Err(_) => Err(format!("no response within {INVOKE_TIMEOUT:?}")),
            }
        }
    }
}

type HttpResponse = Response<Full<Bytes>>;

fn respond(status: StatusCode, body: impl Into<Bytes>) -> HttpResponse {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

async fn serve_http<F, Fut>(listener: TcpListener, handler: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = HttpResponse> + Send + 'static,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The Lambda Runtime API (2018-06-01) for one function instance.
async fn serve_runtime_api(listener: TcpListener, api: Arc<RuntimeApi>) {
    serve_http(listener, move |req| {
        let api = api.clone();
        async move { runtime_api(api, req).await }
    })
    .await;
}

async fn runtime_api(api: Arc<RuntimeApi>, req: Request<Incoming>) -> HttpResponse {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes().to_vec(),
        Err(e) => return respond(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let Some(rest) = path.strip_prefix("/2018-06-01/runtime/") else {
        return respond(StatusCode::NOT_FOUND, "unknown path");
    };
    match (method.as_str(), rest) {
        ("GET", "invocation/next") => {
            {
                let mut ready = api.ready.lock().expect("ready");
                ready.get_or_insert_with(Instant::now);
            }
            let next = api.queue.lock().await.recv().await;
            let Some(invocation) = next else {
                return respond(StatusCode::GONE, "shutting down");
            };
            let id = uuid::Uuid::new_v4().to_string();
            api.in_flight
                .lock()
                .expect("in flight")
                .insert(id.clone(), invocation.reply);
            let deadline = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() + INVOKE_TIMEOUT.as_millis())
                .unwrap_or_default();
            let mut response = respond(StatusCode::OK, invocation.event);
            let headers = response.headers_mut();
            let set = |headers: &mut http::HeaderMap, name: &'static str, value: String| {
                headers.insert(name, value.parse().expect("header value"));
            };
            set(headers, "lambda-runtime-aws-request-id", id);
            set(headers, "lambda-runtime-deadline-ms", deadline.to_string());
            set(
                headers,
                "lambda-runtime-invoked-function-arn",
                "arn:aws:lambda:us-east-1:123456789012:function:wisp".into(),
            );
            set(headers, "lambda-runtime-trace-id", "Root=1-0-0".into());
            set(headers, "content-type", "application/json".into());
            response
        }
        ("POST", "init/error") => {
            *api.init_error.lock().expect("init error") =
                Some(String::from_utf8_lossy(&body).into_owned());
            respond(StatusCode::ACCEPTED, "")
        }
        ("POST", rest) => {
            let Some(rest) = rest.strip_prefix("invocation/") else {
                return respond(StatusCode::NOT_FOUND, "unknown path");
            };
            let (id, outcome) = match rest.rsplit_once('/') {
                Some((id, "response")) => (id, Ok(body)),
                Some((id, "error")) => (id, Err(String::from_utf8_lossy(&body).into_owned())),
                _ => return respond(StatusCode::NOT_FOUND, "unknown path"),
            };
            match api.in_flight.lock().expect("in flight").remove(id) {
                Some(reply) => {
                    let _ = reply.send(outcome);
                    respond(StatusCode::ACCEPTED, "")
                }
                None => respond(StatusCode::BAD_REQUEST, "unknown request id"),
            }
        }
        _ => respond(StatusCode::NOT_FOUND, "unknown path"),
    }
}

/// How the emulator reaches one function, and how often it did.
struct Route {
    tx: Invoker,
    log: PathBuf,
    invocations: std::sync::atomic::AtomicU64,
}

type Routes = Arc<HashMap<&'static str, Route>>;

/// The ALB: HTTP/1.1 in, one Lambda invocation per request, HTTP out.
async fn serve_alb(listener: TcpListener, routes: Routes, unrouted: Unrouted) {
    serve_http(listener, move |req| {
        let routes = routes.clone();
        let unrouted = unrouted.clone();
        async move { alb(routes, unrouted, req).await }
    })
    .await;
}

fn function_for(path: &str) -> &'static str {
    ROUTES
        .iter()
        .find(|(_, prefixes)| prefixes.iter().any(|p| path.starts_with(p)))
        .map(|(name, _)| *name)
        .unwrap_or(DEFAULT_FUNCTION)
}

async fn alb(routes: Routes, unrouted: Unrouted, req: Request<Incoming>) -> HttpResponse {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return respond(StatusCode::BAD_REQUEST, e.to_string()),
    };
    if body.len() > ALB_MAX_REQUEST_BODY {
        eprintln!(
            "ALB emulator: refused a request body of {} bytes for {} (limit {ALB_MAX_REQUEST_BODY})",
            body.len(),
            parts.uri.path()
        );
        return respond(
            StatusCode::PAYLOAD_TOO_LARGE,
            "413 Request Entity Too Large",
        );
    }
    let mut function = function_for(parts.uri.path());
    if unrouted.lock().expect("routes").contains(function) {
        function = DEFAULT_FUNCTION;
    }
    let Some(Route {
        tx,
        log,
        invocations,
    }) = routes.get(function)
    else {
        return respond(StatusCode::BAD_GATEWAY, format!("no function {function}"));
    };

    let event = alb_event(function, &parts.method, &parts.uri, &parts.headers, &body);
    invocations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let reply = match invoke(tx.clone(), event).await {
        Ok(reply) => reply,
        Err(e) => {
            eprintln!(
                "ALB emulator: {function} failed: {e}\n{}",
                read_log(log)
                    .lines()
                    .rev()
                    .take(20)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            return respond(StatusCode::BAD_GATEWAY, "502 Bad Gateway");
        }
    };
    if reply.len() > ALB_MAX_RESPONSE_JSON {
        eprintln!(
            "ALB emulator: {function} answered {} with {} bytes of JSON (limit \
             {ALB_MAX_RESPONSE_JSON}): 502",
            parts.uri.path(),
            reply.len()
        );
        return respond(StatusCode::BAD_GATEWAY, "502 Bad Gateway");
    }
    alb_response(&reply).unwrap_or_else(|e| {
        eprintln!("ALB emulator: {function} sent an invalid response: {e}");
        respond(StatusCode::BAD_GATEWAY, "502 Bad Gateway")
    })
}

/// The ALB's target-group event for a request to `function`: multi-value headers off, so
/// one value per header (the last one), names lower-cased; the body always base64 (ALB
/// does so for binary content types).
fn alb_event(
    function: &str,
    method: &http::Method,
    uri: &http::Uri,
    request_headers: &http::HeaderMap,
    body: &[u8],
) -> Vec<u8> {
    let mut headers = serde_json::Map::new();
    for (name, value) in request_headers {
        if let Ok(value) = value.to_str() {
            headers.insert(name.as_str().to_string(), value.into());
        }
    }
    let query: serde_json::Map<String, serde_json::Value> = uri
        .query()
        .map(|q| {
            q.split('&')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (k.to_string(), serde_json::Value::from(v))
                })
                .collect()
        })
        .unwrap_or_default();
    let event = serde_json::json!({
        "requestContext": {"elb": {"targetGroupArn":
            format!("arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/{function}/0123456789abcdef")}},
        "httpMethod": method.as_str(),
        "path": uri.path(),
        "queryStringParameters": query,
        "headers": headers,
        "body": BASE64.encode(body),
        "isBase64Encoded": true,
    });
    serde_json::to_vec(&event).expect("event JSON")
}

/// The ALB's target health check, as its health checker sends it (`GET /`).
fn health_check_event(function: &str) -> Vec<u8> {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::USER_AGENT,
        http::HeaderValue::from_static("ELB-HealthChecker/2.0"),
    );
    alb_event(
        function,
        &http::Method::GET,
        &http::Uri::from_static("/"),
        &headers,
        &[],
    )
}

/// An ALB target-group response (`statusCode`, `headers` and/or `multiValueHeaders`,
/// `body`, `isBase64Encoded`) as HTTP.
fn alb_response(reply: &[u8]) -> Result<HttpResponse, String> {
    let v: serde_json::Value = serde_json::from_slice(reply).map_err(|e| e.to_string())?;
    let status = v["statusCode"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .ok_or("no statusCode")?;
    let body = v["body"].as_str().unwrap_or_default();
    let body = if v["isBase64Encoded"].as_bool().unwrap_or(false) {
        BASE64.decode(body).map_err(|e| e.to_string())?
    } else {
        body.as_bytes().to_vec()
    };
    let mut response = respond(status, body);
    let headers = response.headers_mut();
    if let Some(map) = v["headers"].as_object() {
        for (name, value) in map {
            if let (Ok(name), Some(Ok(value))) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                value.as_str().map(http::HeaderValue::from_str),
            ) {
                headers.insert(name, value);
            }
        }
    }
    if let Some(map) = v["multiValueHeaders"].as_object() {
        for (name, values) in map {
            let Ok(name) = http::HeaderName::from_bytes(name.as_bytes()) else {
                continue;
            };
            headers.remove(&name);
            for value in values.as_array().into_iter().flatten() {
                if let Some(Ok(value)) = value.as_str().map(http::HeaderValue::from_str) {
                    headers.append(name.clone(), value);
                }
            }
        }
    }
    Ok(response)
}

impl Wisp {
    /// The control plane as deployed on AWS: the Lambda functions behind the ALB emulator,
    /// state on the stand-ins (a fresh table and bucket by `wisp aws init`), config and
    /// encryption key in Secrets Manager, project `quickstart` made by `wisp project add`.
    /// `None` (after a note) when the stand-ins or the function binaries are missing.
    pub fn start_lambda(test: &str) -> Option<Wisp> {
        Self::start_lambda_with(test, &HashMap::new())
    }

    /// [`Wisp::start_lambda`] with each function's environment changed as `function_env`
    /// says ([`LambdaFront::start_with`]).
    pub fn start_lambda_with(test: &str, function_env: &FunctionEnv) -> Option<Wisp> {
        let env = AwsEnv::from_env(test)?;
        if let Err(missing) = function_binaries() {
            return skip(
                test,
                &format!(
                    "{} is missing (`cargo test --workspace` builds the Lambda functions)",
                    missing.display()
                ),
            );
        }
        let dir = tempfile::tempdir().expect("create a data dir");
        let mut backend = AwsBackend::new(&env, dir.path(), None);
        let init = backend.init(dir.path());
        assert_eq!(init.code, 0, "wisp aws init failed: {init:?}");
        let config_secret = unique_name("wisp-lambda/config");
        let key_secret = unique_name("wisp-lambda/key");
        backend.put_secret(&config_secret, &backend.config_yaml());
        backend.put_secret(
            &key_secret,
            &format!("key-{}", uuid::Uuid::new_v4().simple()),
        );
        backend.config_secret = Some(config_secret);
        backend.key_secret = Some(key_secret);
        let out = run_cli_with(
            dir.path(),
            &["project", "add", QUICKSTART, "--json"],
            &backend.store_args(),
            &backend.env(),
        );
        assert_eq!(out.code, 0, "wisp project add quickstart failed: {out:?}");
        let admin: serde_json::Value =
            serde_json::from_str(&out.stdout).expect("project add --json output");
        let admin = (
            admin["username"].as_str().expect("username").to_string(),
            admin["password"].as_str().expect("password").to_string(),
        );
        let mut front = LambdaFront::start_with(&backend, dir.path(), function_env);
        front.admin = Some(admin);
        Some(Wisp {
            aws: Some(backend),
            lambda: Some(front),
            ..Wisp::stopped(dir)
        })
    }

    /// The Lambda emulation, when this control plane runs as functions.
    pub fn lambda(&self) -> Option<&LambdaFront> {
        self.lambda.as_ref()
    }

    /// The same, to ask after its processes ([`LambdaFront::pid`]).
    pub fn lambda_mut(&mut self) -> Option<&mut LambdaFront> {
        self.lambda.as_mut()
    }
}
