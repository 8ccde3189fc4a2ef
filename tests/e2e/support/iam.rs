//! The Lambda deployment under the permissions AWS would enforce: each real function
//! bootstrap runs with credentials of its own, an IAM user on a moto_server that checks
//! every request's signature and policy (`scripts/moto.sh start-iam`), and that user holds
//! exactly the policy the deployment code grants the function's role, derived from it by
//! `scripts/iam-policies` (the Terraform module planned by `terraform test`, or
//! template.yaml through the SAM transform). Change a grant in infra/terraform/iam.tf or
//! template.yaml and these tests run with the change.
//!
//! What moto checks: signatures, actions, and resource ARNs for S3 only (it matches every
//! other service's request against resource `*`). So before the users are made, the
//! DynamoDB and Secrets Manager statements are checked here instead: their resources must
//! name exactly the deployment's table and its indexes, and its config secret (plus the
//! encryption key where the function is given it); moto then gets them with `*`. And a
//! recording proxy between the functions and moto ([`Recorder`]) logs every call with
//! the caller, action, resource (table, index, secret id, object key) and status: the
//! tests assert no call was denied, that each DynamoDB and Secrets Manager call named a
//! resource its function's derived policy grants, and report the grants no call used.
//!
//! Everything is on moto (DynamoDB too: DynamoDB Local checks no IAM). The operator
//! (`wisp aws init`, `wisp project add`, the admin commands, `wisp migrate`) runs as
//! moto.sh's `wisp-operator`, allowed everything, as an administrator would.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::Deserialize;
use serde_json::Value;
use tokio::net::TcpListener;

use super::aws::{AwsBackend, AwsEnv, S3_PREFIX, skip};
use super::lambda::{FunctionEnv, LambdaFront, function_binaries};
use super::{QUICKSTART, Wisp, run_cli_with};

/// The IAM-enforcing moto_server (`scripts/moto.sh start-iam`).
pub const ENDPOINT_VAR: &str = "WISP_TEST_MOTO_IAM_ENDPOINT";
/// The JSON file holding its operator's access key (moto.sh writes it).
pub const OPERATOR_VAR: &str = "WISP_TEST_MOTO_IAM_OPERATOR";
/// A Python with boto3 (`scripts/moto.sh python`); default `python3`.
pub const PYTHON_VAR: &str = "WISP_TEST_PYTHON";

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

/// Which deployment code the grants come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// infra/terraform (iam.tf).
    Terraform,
    /// template.yaml (SAM).
    Sam,
    /// infra/terraform with `compute = "fargate"`: one `wisp serve` task (fargate.tf).
    TerraformFargate,
}

impl Flavour {
    fn arg(self) -> &'static str {
        match self {
            Flavour::Terraform => "terraform",
            Flavour::Sam => "sam",
            Flavour::TerraformFargate => "terraform-fargate",
        }
    }
}

/// What `scripts/iam-policies` derived: the deployment's names and each function's
/// grants and environment.
#[derive(Debug, Clone, Deserialize)]
pub struct Derived {
    pub flavour: String,
    pub table: String,
    pub bucket: String,
    pub prefix: String,
    pub secrets: Secrets,
    /// The ElastiCache cache and user, when derived with a cache mode.
    #[serde(default)]
    pub cache: Option<CacheNames>,
    /// By function (`piped-api`, `api`, `web-api`, `http`, `jobs`).
    pub functions: BTreeMap<String, Grants>,
}

/// The cache as the deployment code names it (redis.tf, template.yaml).
#[derive(Debug, Clone, Deserialize)]
pub struct CacheNames {
    /// Replication group id or serverless cache name.
    pub id: String,
    /// The ElastiCache user with IAM auth.
    pub user: String,
    pub serverless: bool,
    pub arn: String,
    pub user_arn: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Secrets {
    pub config: String,
    pub key: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Grants {
    /// The role's inline policy (IAM policy JSON).
    pub policy: Value,
    /// Managed policies attached to the role.
    pub managed_policies: Vec<String>,
    /// The function's environment as deployed.
    pub env: BTreeMap<String, String>,
    /// The Fargate task's command (after the image's entrypoint, `wisp`); empty for a
    /// function.
    #[serde(default)]
    pub command: Vec<String>,
    /// The Fargate task's container: `portMappings`, `healthCheck`, `user`,
    /// `readonlyRootFilesystem` as planned; null for a function.
    #[serde(default)]
    pub container: Value,
    /// The load balancer's target groups for the Fargate task (`grpc`, `web`): `port`,
    /// `protocol_version`, `health_check`; null for a function.
    #[serde(default)]
    pub target_groups: Value,
}

/// One policy statement, with `Action` and `Resource` as lists.
#[derive(Debug, Clone)]
pub struct Statement {
    pub sid: String,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|s| s.as_str().expect("a string").to_string())
            .collect(),
        Value::Null => vec![],
        other => panic!("not a string or a list: {other}"),
    }
}

impl Grants {
    /// The Allow statements (the deployment code has no other kind; asserted).
    pub fn statements(&self) -> Vec<Statement> {
        self.policy["Statement"]
            .as_array()
            .expect("Statement is a list")
            .iter()
            .map(|s| {
                assert_eq!(s["Effect"], "Allow", "only Allow statements: {s}");
                for unsupported in ["NotAction", "NotResource", "Condition", "Principal"] {
                    assert!(s.get(unsupported).is_none(), "{unsupported} in {s}");
                }
                Statement {
                    sid: s["Sid"].as_str().unwrap_or_default().to_string(),
                    actions: strings(&s["Action"]),
                    resources: strings(&s["Resource"]),
                }
            })
            .collect()
    }
}

/// Whether IAM pattern `pattern` (`*` any run of characters) matches `value`.
pub fn glob(pattern: &str, value: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == value;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !value.starts_with(first) || value.len() < first.len() + last.len() {
        return false;
    }
    if !value[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

impl Derived {
    /// Runs `scripts/iam-policies` for `flavour` with deployment name `name`.
    pub fn derive(flavour: Flavour, name: &str, dir: &Path) -> Derived {
        Derived::derive_with_cache(flavour, name, dir, None)
    }

    /// [`Derived::derive`] with the deployment's ElastiCache cache in `cache` mode
    /// (`node-based` or `serverless`) and IAM auth.
    pub fn derive_with_cache(
        flavour: Flavour,
        name: &str,
        dir: &Path,
        cache: Option<&str>,
    ) -> Derived {
        let out = dir.join(format!("iam-{}.json", flavour.arg()));
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let run = Command::new(root.join("scripts/iam-policies"))
            .args([flavour.arg(), name, S3_PREFIX])
            .arg(&out)
            .args(cache)
            .output()
            .expect("run scripts/iam-policies");
        assert!(
            run.status.success(),
            "scripts/iam-policies {} failed:\n{}\n{}",
            flavour.arg(),
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        let text = std::fs::read_to_string(&out).expect("the derived grants");
        serde_json::from_str(&text).expect("derived grants JSON")
    }

    pub fn table_arn(&self) -> String {
        format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{}", self.table)
    }

    pub fn grants(&self, function: &str) -> &Grants {
        self.functions
            .get(function)
            .unwrap_or_else(|| panic!("no function {function} in the derived grants"))
    }

    /// What moto cannot check, checked here: every DynamoDB statement names only the
    /// table and its indexes, every Secrets Manager statement the config secret and, for
    /// the functions given the encryption key (their environment names it), the key;
    /// S3 statements stay within the deployment's bucket; the log statements (used by
    /// Lambda itself, never by the code) name log groups; no other service.
    pub fn check_resources(&self) {
        let table = self.table_arn();
        let bucket = format!("arn:aws:s3:::{}", self.bucket);
        for (function, grants) in &self.functions {
            let gets_key = grants.env.get("WISP_ENCRYPTION_KEY_SECRET") == Some(&self.secrets.key);
            for s in grants.statements() {
                let services: BTreeSet<&str> = s
                    .actions
                    .iter()
                    .map(|a| a.split(':').next().unwrap_or_default())
                    .collect();
                assert_eq!(
                    services.len(),
                    1,
                    "{function}: statement {} mixes services",
                    s.sid
                );
                let resources: BTreeSet<&str> = s.resources.iter().map(String::as_str).collect();
                match services.into_iter().next().unwrap_or_default() {
                    "dynamodb" => assert!(
                        !resources.is_empty()
                            && resources
                                .iter()
                                .all(|r| *r == table || *r == format!("{table}/index/*")),
                        "{function}: DynamoDB grants must name only the table and its indexes: \
                         {resources:?}"
                    ),
                    "secretsmanager" => {
                        // The Fargate task's statements are the serving functions': some
                        // name the config alone.
                        let mut expected = BTreeSet::from([self.secrets.config.as_str()]);
                        if gets_key {
                            expected.insert(&self.secrets.key);
                        }
                        assert!(
                            resources.contains(self.secrets.config.as_str())
                                && resources.is_subset(&expected),
                            "{function}: secrets granted must be those it is given: \
                             {resources:?}"
                        );
                    }
                    "s3" => assert!(
                        resources
                            .iter()
                            .all(|r| *r == bucket || r.starts_with(&format!("{bucket}/"))),
                        "{function}: S3 grants outside the bucket: {resources:?}"
                    ),
                    "elasticache" => {
                        let cache = self.cache.as_ref().unwrap_or_else(|| {
                            panic!("{function}: ElastiCache grants without a cache")
                        });
                        assert!(
                            !resources.is_empty()
                                && resources
                                    .iter()
                                    .all(|r| *r == cache.arn || *r == cache.user_arn),
                            "{function}: ElastiCache grants must name only the cache and its \
                             user: {resources:?}"
                        );
                    }
                    "logs" => assert!(
                        resources.iter().all(|r| r
                            .starts_with(&format!("arn:aws:logs:{REGION}:{ACCOUNT}:log-group:"))),
                        "{function}: log grants outside log groups: {resources:?}"
                    ),
                    other => panic!("{function}: unexpected service {other} in the derived grants"),
                }
            }
        }
    }

    /// The policy moto gets for `function`: as derived, except that the resources of
    /// statements moto matches against `*` (every service but S3) are `*`, once
    /// [`Derived::check_resources`] has checked them; and that `s3:ListBucket` comes
    /// with `s3:HeadBucket`, the name moto checks HeadBucket under (AWS checks
    /// ListBucket; there is no HeadBucket permission).
    pub fn moto_policy(&self, function: &str) -> Value {
        let mut policy = self.grants(function).policy.clone();
        for s in policy["Statement"].as_array_mut().expect("statements") {
            let mut actions = strings(&s["Action"]);
            if !actions.iter().all(|a| a.starts_with("s3:")) {
                s["Resource"] = Value::from("*");
            } else if actions.iter().any(|a| a == "s3:ListBucket") {
                actions.push("s3:HeadBucket".into());
                s["Action"] = Value::from(actions);
            }
        }
        policy
    }

    /// Takes `action` on resources ending with `resource_suffix` away from `function`
    /// (the harness must then fail). Panics when no statement grants it that way.
    pub fn remove_grant(&mut self, function: &str, action: &str, resource_suffix: &str) {
        let policy = &mut self
            .functions
            .get_mut(function)
            .expect("the function")
            .policy;
        let statements = policy["Statement"].as_array_mut().expect("statements");
        let mut removed = false;
        statements.retain_mut(|s| {
            let actions = strings(&s["Action"]);
            let resources = strings(&s["Resource"]);
            if !actions.iter().any(|a| a == action)
                || !resources.iter().any(|r| r.ends_with(resource_suffix))
            {
                return true;
            }
            assert_eq!(
                resources.len(),
                1,
                "{function}: {action} shares its statement with other resources: {s}"
            );
            removed = true;
            let rest: Vec<Value> = actions
                .into_iter()
                .filter(|a| a != action)
                .map(Value::from)
                .collect();
            s["Action"] = Value::from(rest.clone());
            !rest.is_empty()
        });
        assert!(
            removed,
            "{function} has no grant of {action} on *{resource_suffix}"
        );
    }
}

/// One AWS call a process made, as the recording proxy saw it.
#[derive(Debug, Clone)]
pub struct Call {
    /// The access key id it was signed with.
    pub key: String,
    /// `dynamodb:GetItem`, `s3:PutObject`, ...
    pub action: String,
    /// The resource as an ARN (the table, `table/T/index/I`, the secret id, the object).
    pub resource: String,
    pub status: u16,
}

/// A proxy in front of moto that records every call (support/iam.rs's doc). The stores
/// reach it as their endpoint; SigV4 signatures hold, since requests pass unchanged.
pub struct Recorder {
    addr: SocketAddr,
    calls: Arc<Mutex<Vec<Call>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Recorder {
    pub fn start(upstream: &str) -> Recorder {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the proxy's runtime");
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind the recording proxy");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("proxy address");
        let calls = Arc::new(Mutex::new(Vec::new()));
        let upstream = upstream.trim_end_matches('/').to_string();
        let recorded = calls.clone();
        runtime.spawn(async move {
            let client: HyperClient<HttpConnector, Full<Bytes>> =
                HyperClient::builder(TokioExecutor::new()).build_http();
            let listener = TcpListener::from_std(listener).expect("the proxy's listener");
            serve(listener, upstream, client, recorded).await
        });
        Recorder {
            addr,
            calls,
            runtime: Some(runtime),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("calls").clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn serve(
    listener: TcpListener,
    upstream: String,
    client: HyperClient<HttpConnector, Full<Bytes>>,
    calls: Arc<Mutex<Vec<Call>>>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let (upstream, client, calls) = (upstream.clone(), client.clone(), calls.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let (upstream, client, calls) = (upstream.clone(), client.clone(), calls.clone());
                async move { Ok::<_, Infallible>(forward(req, &upstream, &client, &calls).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn forward(
    req: Request<Incoming>,
    upstream: &str,
    client: &HyperClient<HttpConnector, Full<Bytes>>,
    calls: &Mutex<Vec<Call>>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return plain(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let call = describe(&parts, &body);
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut out = Request::builder()
        .method(parts.method.clone())
        .uri(format!("{upstream}{path}"));
    for (name, value) in &parts.headers {
        out = out.header(name, value);
    }
    let out = match out.body(Full::new(body)) {
        Ok(out) => out,
        Err(e) => return plain(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let response = match client.request(out).await {
        Ok(r) => r,
        Err(e) => return plain(StatusCode::BAD_GATEWAY, e.to_string()),
    };
    let (rparts, rbody) = response.into_parts();
    let rbody = rbody
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if let Some((key, action, resource)) = call {
        calls.lock().expect("calls").push(Call {
            key,
            action,
            resource,
            status: rparts.status.as_u16(),
        });
    }
    Response::from_parts(rparts, Full::new(rbody))
}

fn plain(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = status;
    r
}

/// (access key id, action, resource) of a signed request, by its `Authorization` header
/// or, for a presigned URL (the console's bundles, fetched by the browser), by its
/// `X-Amz-Credential` query parameter; `None` for unsigned ones.
fn describe(parts: &http::request::Parts, body: &[u8]) -> Option<(String, String, String)> {
    let presigned = parts.uri.query().and_then(|q| {
        q.split('&')
            .find_map(|p| p.strip_prefix("X-Amz-Credential="))
            .map(percent_decode)
    });
    let credential = match parts.headers.get("authorization") {
        Some(auth) => auth
            .to_str()
            .ok()?
            .split("Credential=")
            .nth(1)?
            .split(',')
            .next()?
            .to_string(),
        None => presigned?,
    };
    let mut scope = credential.split('/');
    let key = scope.next()?.to_string();
    let service = scope.nth(2)?.to_string();
    let target = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit_once('.'))
        .map(|(_, op)| op.to_string());
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let (action, resource) = match service.as_str() {
        "s3" => s3_action(&parts.method, &parts.uri),
        "dynamodb" => {
            let table = json["TableName"].as_str().unwrap_or("*");
            let mut resource = format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}");
            if let Some(index) = json["IndexName"].as_str() {
                resource = format!("{resource}/index/{index}");
            }
            (format!("dynamodb:{}", target.unwrap_or_default()), resource)
        }
        "secretsmanager" => {
            let id = json["SecretId"].as_str().unwrap_or("*");
            let resource = if id.starts_with("arn:") {
                id.to_string()
            } else {
                // Secrets Manager ARNs end with a random suffix the name does not carry.
                format!("arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{id}-??????")
            };
            (
                format!("secretsmanager:{}", target.unwrap_or_default()),
                resource,
            )
        }
        // The query protocol: the action and its parameters in the form body.
        "elasticache" => {
            let form: BTreeMap<String, String> = String::from_utf8_lossy(body)
                .split('&')
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (percent_decode(k), percent_decode(&v.replace('+', " "))))
                .collect();
            let arn = format!("arn:aws:elasticache:{REGION}:{ACCOUNT}");
            let resource = if let Some(id) = form.get("ReplicationGroupId") {
                format!("{arn}:replicationgroup:{id}")
            } else if let Some(name) = form.get("ServerlessCacheName") {
                format!("{arn}:serverlesscache:{name}")
            } else if let Some(user) = form.get("UserId") {
                format!("{arn}:user:{user}")
            } else {
                "*".to_string()
            };
            (
                format!(
                    "elasticache:{}",
                    form.get("Action").cloned().unwrap_or_default()
                ),
                resource,
            )
        }
        other => (
            format!("{other}:{}", target.unwrap_or_default()),
            "*".to_string(),
        ),
    };
    Some((key, action, resource))
}

/// The IAM action and resource of a path-style S3 request.
fn s3_action(method: &http::Method, uri: &http::Uri) -> (String, String) {
    let path = uri.path().trim_start_matches('/');
    let query = uri.query().unwrap_or_default();
    let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
    let key = percent_decode(key);
    let action = match (method.as_str(), key.is_empty()) {
        ("GET" | "HEAD", true) if query.contains("list-type") || query.is_empty() => "ListBucket",
        ("HEAD" | "GET", false) => "GetObject",
        ("PUT", false) => "PutObject",
        ("DELETE", false) => "DeleteObject",
        ("POST", true) if query.contains("delete") => "DeleteObject",
        ("PUT", true) => "CreateBucket",
        _ => "Other",
    };
    let resource = if key.is_empty() {
        format!("arn:aws:s3:::{bucket}")
    } else {
        format!("arn:aws:s3:::{bucket}/{key}")
    };
    (format!("s3:{action}"), resource)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A Lambda deployment whose functions hold exactly the grants `derived` gives them.
/// Dropped in field order: the functions, then the proxy they talk through.
pub struct IamStack {
    pub wisp: Wisp,
    pub derived: Derived,
    pub recorder: Recorder,
    /// Access key id → function (`piped-api`, ...).
    pub functions_by_key: BTreeMap<String, String>,
    /// The operator's access key id.
    pub operator_key: String,
    /// The Fargate task's image (`<registry>/<repository>@<digest>`) when the task runs
    /// from it; `None` for the functions, or when the image could not be built here.
    pub image: Option<String>,
}

impl IamStack {
    /// Derives `flavour`'s grants, lets `tweak` change them (a test that must fail takes
    /// one away), makes the table and bucket as the operator, one IAM user per function,
    /// and starts the functions with those users' keys and the deployment's environment.
    /// `None` (after a note) when the IAM-enforcing moto is not configured.
    pub fn start(
        test: &str,
        flavour: Flavour,
        tweak: impl FnOnce(&mut Derived),
    ) -> Option<IamStack> {
        IamStack::start_with_cache(test, flavour, None, tweak)
    }

    /// [`IamStack::start`] with the deployment's ElastiCache cache (`node-based` or
    /// `serverless`, IAM auth): the operator makes the cache and its user in moto's
    /// ElastiCache as the deployment code names them, and the config names the cache by
    /// id, so that each function that uses it looks it up at init under its own grants.
    pub fn start_with_cache(
        test: &str,
        flavour: Flavour,
        cache: Option<&str>,
        tweak: impl FnOnce(&mut Derived),
    ) -> Option<IamStack> {
        let (Some(endpoint), Some(operator_file)) = (env_var(ENDPOINT_VAR), env_var(OPERATOR_VAR))
        else {
            return skip(
                test,
                &format!(
                    "{ENDPOINT_VAR} and {OPERATOR_VAR} are not both set (run `scripts/test`, or \
                     `scripts/moto.sh start-iam PORT`)"
                ),
            );
        };
        if let Err(missing) = function_binaries().map(|_| ()).or_else(|missing| {
            // The Fargate task runs `wisp serve`, not the functions.
            if flavour == Flavour::TerraformFargate {
                Ok(())
            } else {
                Err(missing)
            }
        }) {
            return skip(
                test,
                &format!(
                    "{} is missing (`cargo test --workspace` builds the Lambda functions)",
                    missing.display()
                ),
            );
        }
        let operator: Value = serde_json::from_str(
            &std::fs::read_to_string(&operator_file).expect("the operator's key file"),
        )
        .expect("operator key JSON");
        let operator = (
            operator["access_key_id"].as_str().expect("id").to_string(),
            operator["secret_access_key"]
                .as_str()
                .expect("secret")
                .to_string(),
        );
        let dir = tempfile::tempdir().expect("create a data dir");
        // At most 22 characters (the SAM template's Name), a valid bucket name.
        let name = format!(
            "wispiam{}",
            &uuid::Uuid::new_v4().simple().to_string()[..10]
        );
        let mut derived = Derived::derive_with_cache(flavour, &name, dir.path(), cache);
        assert_eq!(derived.prefix, S3_PREFIX);
        tweak(&mut derived);
        derived.check_resources();

        let recorder = Recorder::start(&endpoint);
        let env = AwsEnv {
            dynamodb: recorder.url(),
            moto: recorder.url(),
            credentials: Some(operator.clone()),
        };
        let mut backend = AwsBackend::new(&env, dir.path(), None);
        backend.table = derived.table.clone();
        backend.bucket = derived.bucket.clone();
        std::fs::write(&backend.config_path, backend.config_yaml()).expect("write the config");
        let init = backend.init(dir.path());
        assert_eq!(
            init.code, 0,
            "wisp aws init (as the operator) failed: {init:?}"
        );

        // The secrets under the names the deployment gives them.
        let secret_name = |arn: &str| -> String {
            let name = arn.split(":secret:").nth(1).expect("a secret ARN");
            name.rsplit_once('-')
                .map(|(n, _)| n)
                .unwrap_or(name)
                .to_string()
        };
        let config_secret = secret_name(&derived.secrets.config);
        let key_secret = secret_name(&derived.secrets.key);
        let python = env_var(PYTHON_VAR).unwrap_or_else(|| "python3".into());
        let moto_iam = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/lib/moto_iam.py");
        let mut config = backend.config_yaml();
        if let Some(cache) = &derived.cache {
            // The cache and its user, made by the operator as the IaC makes them.
            let made = Command::new(&python)
                .arg(&moto_iam)
                .args(["cache", &endpoint])
                .arg(&operator_file)
                .args([&cache.id, &cache.user])
                .output()
                .expect("run scripts/lib/moto_iam.py");
            assert!(
                made.status.success(),
                "moto_iam.py cache failed: {}",
                String::from_utf8_lossy(&made.stderr)
            );
            // As config_template (infra/terraform) writes it, pointed at the proxy.
            let section = format!(
                "  cache:\n    ttl: 5m\n    type: REDIS\n    config:\n      cacheId: {id}\n{serverless}      \
                 iamAuth: true\n      username: {user}\n      region: {REGION}\n      endpoint: {url}\n",
                id = cache.id,
                serverless = if cache.serverless {
                    "      serverless: true\n"
                } else {
                    ""
                },
                user = cache.user,
                url = recorder.url(),
            );
            assert!(config.ends_with("  cache:\n    ttl: 5m\n"), "{config}");
            config = config.replace("  cache:\n    ttl: 5m\n", &section);
        }
        backend.put_secret(&config_secret, &config);
        backend.put_secret(
            &key_secret,
            &format!("key-{}", uuid::Uuid::new_v4().simple()),
        );
        backend.config_secret = Some(config_secret.clone());
        backend.key_secret = Some(key_secret.clone());
        let out = run_cli_with(
            dir.path(),
            &["project", "add", QUICKSTART, "--json"],
            &backend.store_args(),
            &backend.env(),
        );
        assert_eq!(out.code, 0, "wisp project add quickstart failed: {out:?}");
        let admin: Value = serde_json::from_str(&out.stdout).expect("project add --json output");
        let admin = (
            admin["username"].as_str().expect("username").to_string(),
            admin["password"].as_str().expect("password").to_string(),
        );

        // One IAM user per function, holding its derived policy.
        let spec: serde_json::Map<String, Value> = derived
            .functions
            .iter()
            .map(|(function, grants)| {
                (
                    format!("{name}-{function}"),
                    serde_json::json!({
                        "policy": derived.moto_policy(function),
                        // Lambda itself, not the code, uses the network-interface
                        // policy of the functions in the VPC (with the cache); moto
                        // does not know it.
                        "managed": grants
                            .managed_policies
                            .iter()
                            .filter(|arn| !arn.ends_with("/AWSLambdaENIManagementAccess"))
                            .collect::<Vec<_>>(),
                    }),
                )
            })
            .collect();
        let spec_file = dir.path().join("iam-users.json");
        std::fs::write(&spec_file, Value::Object(spec).to_string()).expect("write the users");
        let made = Command::new(&python)
            .arg(&moto_iam)
            .args(["users", &endpoint])
            .arg(&operator_file)
            .arg(&spec_file)
            .output()
            .expect("run scripts/lib/moto_iam.py");
        assert!(
            made.status.success(),
            "moto_iam.py users failed: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let keys: Value = serde_json::from_slice(&made.stdout).expect("the users' keys");

        let mapped = |value: &str| -> String {
            if value == derived.secrets.config {
                config_secret.clone()
            } else if value == derived.secrets.key {
                key_secret.clone()
            } else {
                value.to_string()
            }
        };
        let mut functions_by_key = BTreeMap::new();
        if flavour == Flavour::TerraformFargate {
            let grants = derived.grants("task");
            let key = &keys[format!("{name}-task")];
            let id = key["access_key_id"]
                .as_str()
                .expect("an access key")
                .to_string();
            let secret = key["secret_access_key"].as_str().expect("a secret key");
            functions_by_key.insert(id.clone(), "task".to_string());
            // The task definition's environment as planned (its secret ARNs as moto names
            // them), the Secrets Manager endpoint in place of AWS's, and the task user's
            // keys in place of the role ECS hands the task.
            let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = backend
                .env()
                .into_iter()
                .filter(|(k, _)| k != "AWS_ACCESS_KEY_ID" && k != "AWS_SECRET_ACCESS_KEY")
                .collect();
            env.extend(grants.env.iter().map(|(k, v)| (k.into(), mapped(v).into())));
            env.push(("AWS_ACCESS_KEY_ID".into(), id.into()));
            env.push(("AWS_SECRET_ACCESS_KEY".into(), secret.into()));
            // The task's command after the image's entrypoint; the test adds only
            // --admin-addr and --addr 127.0.0.1:0 (ports of its own beside other tests,
            // where the task has WISP_ADDR=0.0.0.0:8080, which the test checks apart);
            // WISP_NO_JOBS comes from the environment.
            assert_eq!(grants.command, ["serve"], "the task's command");
            let (server, image) = match super::image::image(test) {
                Some(image) => {
                    env.push(("AWS_EC2_METADATA_DISABLED".into(), "true".into()));
                    let container = &grants.container;
                    let task = super::image::Task {
                        command: &grants.command,
                        env: &env,
                        user: container["user"].as_str().expect("the task's user"),
                        readonly_root: container["readonlyRootFilesystem"] == true,
                    };
                    let args = ["--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"];
                    let server = super::image::serve_task(image, &task, &args, dir.path());
                    (server, Some(image.reference.clone()))
                }
                None => {
                    eprintln!(
                        "note: {test}: the task runs this build's wisp, not the image's \
                         (the image cannot be built here)"
                    );
                    (super::Server::start_with_jobs(dir.path(), &[], &env), None)
                }
            };
            let wisp = Wisp {
                aws: Some(backend),
                server: Some(server),
                ..Wisp::stopped(dir)
            };
            return Some(IamStack {
                wisp,
                derived,
                recorder,
                functions_by_key,
                operator_key: operator.0,
                image,
            });
        }
        let mut function_env = FunctionEnv::new();
        let binaries = function_binaries().expect("the function binaries");
        for (binary, _) in &binaries {
            let function = binary.trim_start_matches("wisp-");
            let grants = derived.grants(function);
            let key = &keys[format!("{name}-{function}")];
            let id = key["access_key_id"]
                .as_str()
                .expect("an access key")
                .to_string();
            let secret = key["secret_access_key"].as_str().expect("a secret key");
            functions_by_key.insert(id.clone(), function.to_string());
            let var = |name: &str| grants.env.get(name).map(|v| mapped(v));
            function_env.insert(
                binary,
                vec![
                    ("AWS_ACCESS_KEY_ID".into(), Some(id)),
                    ("AWS_SECRET_ACCESS_KEY".into(), Some(secret.to_string())),
                    ("WISP_CONFIG_SECRET".into(), var("WISP_CONFIG_SECRET")),
                    (
                        "WISP_ENCRYPTION_KEY_SECRET".into(),
                        var("WISP_ENCRYPTION_KEY_SECRET"),
                    ),
                    ("WISP_WEB_PREFIX".into(), var("WISP_WEB_PREFIX")),
                    // The functions that do not use the cache keep theirs in process.
                    ("WISP_CACHE".into(), var("WISP_CACHE")),
                ],
            );
        }
        let mut front = LambdaFront::start_with(&backend, dir.path(), &function_env);
        front.admin = Some(admin);
        let wisp = Wisp {
            aws: Some(backend),
            lambda: Some(front),
            ..Wisp::stopped(dir)
        };
        Some(IamStack {
            wisp,
            derived,
            recorder,
            functions_by_key,
            operator_key: operator.0,
            image: None,
        })
    }

    /// The calls the functions made, as (function, call).
    pub fn function_calls(&self) -> Vec<(String, Call)> {
        self.recorder
            .calls()
            .into_iter()
            .filter_map(|c| self.functions_by_key.get(&c.key).map(|f| (f.clone(), c)))
            .collect()
    }

    /// The functions' calls moto refused (403), and every log line saying AccessDenied.
    pub fn access_denied(&self) -> Vec<String> {
        let mut found: Vec<String> = self
            .function_calls()
            .into_iter()
            .filter(|(_, c)| c.status == 403)
            .map(|(f, c)| {
                format!(
                    "{f}: {} on {} refused (403 AccessDenied)",
                    c.action, c.resource
                )
            })
            .collect();
        match self.wisp.lambda() {
            Some(front) => {
                for function in self.derived.functions.keys() {
                    for line in front.log_text(&format!("wisp-{function}")).lines() {
                        if line.contains("AccessDenied") {
                            found.push(format!("{function} logged: {line}"));
                        }
                    }
                }
            }
            // The Fargate task: `wisp serve`'s log.
            None => {
                for line in self.wisp.server().log_text().lines() {
                    if line.contains("AccessDenied") {
                        found.push(format!("task logged: {line}"));
                    }
                }
            }
        }
        found
    }

    /// Panics listing every refused call and AccessDenied log line, if any.
    pub fn assert_no_access_denied(&self, during: &str) {
        let denied = self.access_denied();
        assert!(
            denied.is_empty(),
            "{during}: {} AccessDenied:\n{}",
            denied.len(),
            denied.join("\n")
        );
    }

    /// Each function's DynamoDB and Secrets Manager calls named resources its derived
    /// policy grants (moto matched them against `*` only).
    pub fn assert_calls_within_grants(&self) {
        for (function, call) in self.function_calls() {
            if call.action.starts_with("s3:") {
                continue; // moto checked these itself
            }
            let granted = self.derived.grants(&function).statements().iter().any(|s| {
                s.actions.iter().any(|a| glob(a, &call.action))
                    && s.resources.iter().any(|r| {
                        glob(r, &call.resource)
                            || (call.resource.ends_with("-??????")
                                && glob(r, &call.resource.replace("-??????", "-AbCdEf")))
                    })
            });
            assert!(
                granted,
                "{function} called {} on {}, which its derived policy does not grant",
                call.action, call.resource
            );
        }
    }

    /// The granted (function, action, resource, statement id) that no call used.
    pub fn unused_grants(&self) -> Vec<(String, String, String, String)> {
        let calls = self.function_calls();
        let mut unused = Vec::new();
        for (function, grants) in &self.derived.functions {
            for s in grants.statements() {
                for action in &s.actions {
                    for resource in &s.resources {
                        let used = calls.iter().any(|(f, c)| {
                            f == function
                                && glob(action, &c.action)
                                && (glob(resource, &c.resource)
                                    || glob(resource, &c.resource.replace("-??????", "-AbCdEf")))
                        });
                        if !used {
                            unused.push((
                                function.clone(),
                                action.clone(),
                                resource.clone(),
                                s.sid.clone(),
                            ));
                        }
                    }
                }
            }
        }
        unused
    }

    /// Where the derived grants and the stack's files are.
    pub fn dir(&self) -> PathBuf {
        self.wisp.data_dir().to_path_buf()
    }
}
