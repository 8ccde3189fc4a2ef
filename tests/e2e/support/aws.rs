//! The end-to-end tests on AWS backends: `wisp serve` with its state in DynamoDB (DynamoDB
//! Local), S3 (moto_server) and, when a test asks, a Redis cache (a private
//! `redis-server` it can stop mid-run).
//!
//! The stand-ins come from the environment `scripts/test` sets up:
//! `WISP_TEST_DYNAMODB_ENDPOINT` and `WISP_TEST_MOTO_ENDPOINT`. When they are unset the
//! tests print a note and pass, unless `WISP_REQUIRE_AWS_TESTS=1`, when they fail. Each
//! server gets its own table and bucket, made by `wisp aws init`, so tests run in
//! parallel without seeing each other's data.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use tempfile::TempDir;
use wisp_store::{Filestore, StoreError};
use wisp_store_aws::s3::S3Filestore;

use super::{CliOutput, QUICKSTART, Wisp, run_cli_with};

pub const DYNAMODB_VAR: &str = "WISP_TEST_DYNAMODB_ENDPOINT";
pub const MOTO_VAR: &str = "WISP_TEST_MOTO_ENDPOINT";
pub const REQUIRE_VAR: &str = "WISP_REQUIRE_AWS_TESTS";

/// Region of every stand-in resource.
pub const REGION: &str = "us-east-1";
/// Key prefix of the test servers' filestore (exercises the prefix on every object).
pub const S3_PREFIX: &str = "wisp/";

/// Whether `WISP_REQUIRE_AWS_TESTS=1`: a missing stand-in fails the test.
pub fn required() -> bool {
    std::env::var(REQUIRE_VAR).as_deref() == Ok("1")
}

/// Skips `test` (a note on stderr) because `what` is missing, or fails it when the AWS
/// tests are required.
pub fn skip<T>(test: &str, what: &str) -> Option<T> {
    if required() {
        panic!("{test}: {what}, but {REQUIRE_VAR}=1 requires this test to run");
    }
    eprintln!("note: {test} skipped: {what}");
    None
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Stand-ins accept any credentials (DynamoDB Local wants letters and digits only); the
/// SDK must never fall back on an instance-metadata lookup. Set on every `wisp` child.
pub(super) fn child_env(cmd: &mut Command) {
    for (name, value) in [
        ("AWS_ACCESS_KEY_ID", "wispTest"),
        ("AWS_SECRET_ACCESS_KEY", "wispTest"),
        ("AWS_REGION", REGION),
    ] {
        if env_var(name).is_none() {
            cmd.env(name, value);
        }
    }
    cmd.env("AWS_EC2_METADATA_DISABLED", "true");
}

/// Where the stand-ins listen.
#[derive(Debug, Clone)]
pub struct AwsEnv {
    /// DynamoDB Local.
    pub dynamodb: String,
    /// moto_server: S3 and Secrets Manager.
    pub moto: String,
    /// The access key (id, secret) the test and the admin commands use, where the
    /// stand-in checks them (the IAM-enforcing moto of support/iam.rs); `None`: any.
    pub credentials: Option<(String, String)>,
}

impl AwsEnv {
    /// The stand-ins from the environment; `None` (after a note) when unset.
    pub fn from_env(test: &str) -> Option<AwsEnv> {
        match (env_var(DYNAMODB_VAR), env_var(MOTO_VAR)) {
            (Some(dynamodb), Some(moto)) => Some(AwsEnv {
                dynamodb,
                moto,
                credentials: None,
            }),
            _ => skip(
                test,
                &format!(
                    "{DYNAMODB_VAR} and {MOTO_VAR} are not both set (run `scripts/test`, or start \
                     the stand-ins with scripts/dynamodb-local.sh and scripts/moto.sh)"
                ),
            ),
        }
    }

    /// SDK settings for a stand-in at `endpoint`: the environment's credentials when set,
    /// else dummy ones.
    pub async fn sdk_config(&self, endpoint: &str) -> SdkConfig {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(endpoint);
        if let Some((id, secret)) = &self.credentials {
            loader = loader.credentials_provider(Credentials::new(
                id.clone(),
                secret.clone(),
                None,
                None,
                "wisp-test-operator",
            ));
        } else if env_var("AWS_ACCESS_KEY_ID").is_none() {
            loader = loader.credentials_provider(Credentials::new(
                "wispTest",
                "wispTest",
                None,
                None,
                "wisp-test",
            ));
        }
        loader.load().await
    }

    /// A Secrets Manager client on moto.
    pub async fn secrets_client(&self) -> aws_sdk_secretsmanager::Client {
        aws_sdk_secretsmanager::Client::new(&self.sdk_config(&self.moto).await)
    }
}

/// A name no other test server uses: 3-63 characters of `[a-z0-9-]` (valid as a table
/// and as a bucket name).
pub fn unique_name(prefix: &str) -> String {
    let mut name = format!("{prefix}-{}", uuid::Uuid::new_v4().simple());
    name.truncate(63);
    name
}

/// How a test server reaches its AWS stores: the config file (or secrets) and the names
/// in it.
#[derive(Debug, Clone)]
pub struct AwsBackend {
    pub env: AwsEnv,
    pub table: String,
    pub bucket: String,
    /// `redis://…` of the cache, when the config names one.
    pub redis_url: Option<String>,
    /// The config file (`<data-dir>/wisp.yaml`).
    pub config_path: PathBuf,
    /// Read the config from this Secrets Manager secret instead of the file.
    pub config_secret: Option<String>,
    /// `wisp serve --encryption-key-secret`.
    pub key_secret: Option<String>,
}

impl AwsBackend {
    /// Fresh names; the config is written to `<dir>/wisp.yaml`.
    pub fn new(env: &AwsEnv, dir: &Path, redis_url: Option<&str>) -> AwsBackend {
        let backend = AwsBackend {
            env: env.clone(),
            table: unique_name("wisp-e2e"),
            bucket: unique_name("wisp-e2e"),
            redis_url: redis_url.map(str::to_string),
            config_path: dir.join("wisp.yaml"),
            config_secret: None,
            key_secret: None,
        };
        std::fs::write(&backend.config_path, backend.config_yaml()).expect("write the config");
        backend
    }

    /// The control-plane config naming the table, the bucket and the cache.
    pub fn config_yaml(&self) -> String {
        let cache = match &self.redis_url {
            Some(url) => format!(
                "  cache:\n    ttl: 5m\n    type: REDIS\n    config:\n      address: {url}\n"
            ),
            None => "  cache:\n    ttl: 5m\n".to_string(),
        };
        format!(
            "apiVersion: pipecd.dev/v1beta1
kind: ControlPlane
spec:
  datastore:
    type: DYNAMODB
    config:
      table: {table}
      region: {REGION}
      endpoint: {dynamodb}
  filestore:
    type: S3
    config:
      bucket: {bucket}
      prefix: {S3_PREFIX}
      region: {REGION}
      endpoint: {moto}
{cache}",
            table = self.table,
            bucket = self.bucket,
            dynamodb = self.env.dynamodb,
            moto = self.env.moto,
        )
    }

    /// `--config FILE`, or `--config-secret NAME`.
    pub fn store_args(&self) -> Vec<OsString> {
        match &self.config_secret {
            Some(name) => vec!["--config-secret".into(), name.into()],
            None => vec!["--config".into(), self.config_path.clone().into()],
        }
    }

    /// [`AwsBackend::store_args`] plus the encryption key secret, for `wisp serve`.
    pub fn serve_args(&self) -> Vec<OsString> {
        let mut args = self.store_args();
        if let Some(name) = &self.key_secret {
            args.extend(["--encryption-key-secret".into(), name.into()]);
        }
        args
    }

    /// Secrets Manager is moto (the table and bucket endpoints are in the config); the
    /// operator's credentials where the stand-in checks them.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = vec![(
            "AWS_ENDPOINT_URL_SECRETS_MANAGER".into(),
            self.env.moto.clone().into(),
        )];
        if let Some((id, secret)) = &self.env.credentials {
            env.push(("AWS_ACCESS_KEY_ID".into(), id.into()));
            env.push(("AWS_SECRET_ACCESS_KEY".into(), secret.into()));
        }
        env
    }

    /// `wisp aws init` with this backend's config.
    pub fn init(&self, dir: &Path) -> CliOutput {
        run_cli_with(
            dir,
            &["aws", "init", "--json"],
            &self.store_args(),
            &self.env(),
        )
    }

    /// The S3 filestore the server uses.
    pub async fn filestore(&self) -> S3Filestore {
        S3Filestore::from_sdk_config(
            &self.env.sdk_config(&self.env.moto).await,
            self.bucket.clone(),
            Some(S3_PREFIX),
        )
        .expect("S3 filestore")
    }

    /// The object at `path` (under the prefix), if present.
    pub fn filestore_object(&self, path: &str) -> Option<String> {
        block_on(async {
            match self.filestore().await.get(path).await {
                Ok(object) => Some(String::from_utf8_lossy(&object.data).into_owned()),
                Err(StoreError::NotFound(_)) => None,
                Err(e) => panic!("read {path} from S3: {e}"),
            }
        })
    }

    /// Stores `value` as the Secrets Manager secret `name` (on moto).
    pub fn put_secret(&self, name: &str, value: &str) {
        block_on(async {
            self.env
                .secrets_client()
                .await
                .create_secret()
                .name(name)
                .secret_string(value)
                .send()
                .await
                .unwrap_or_else(|e| panic!("create secret {name}: {e:?}"));
        });
    }
}

/// Runs `future` to completion on a thread and runtime of its own, so that synchronous
/// helpers work inside a test's runtime too.
pub fn block_on<F: std::future::Future + Send>(future: F) -> F::Output
where
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(future)
            })
            .join()
            .expect("the helper thread")
    })
}

impl Wisp {
    /// [`Wisp::start`] on AWS backends (DynamoDB, S3, in-process cache): a fresh table and
    /// bucket made by `wisp aws init --config`, project `quickstart` made by
    /// `wisp project add`, then `wisp serve --config`. `None` (after a note) when the
    /// stand-ins are not configured.
    pub fn start_aws(test: &str) -> Option<Wisp> {
        let env = AwsEnv::from_env(test)?;
        Some(Self::start_aws_on(&env, None, |_| {}))
    }

    /// [`Wisp::start_aws`] with the Redis cache at `redis_url`.
    pub fn start_aws_with_redis(test: &str, redis_url: &str) -> Option<Wisp> {
        let env = AwsEnv::from_env(test)?;
        Some(Self::start_aws_on(&env, Some(redis_url), |_| {}))
    }

    /// Creates the table and bucket, then lets `prepare` change how the server is started
    /// (e.g. read its config from a secret) before starting it.
    pub fn start_aws_on(
        env: &AwsEnv,
        redis_url: Option<&str>,
        prepare: impl FnOnce(&mut AwsBackend),
    ) -> Wisp {
        let dir = tempfile::tempdir().expect("create a data dir");
        let mut backend = AwsBackend::new(env, dir.path(), redis_url);
        let init = backend.init(dir.path());
        assert_eq!(init.code, 0, "wisp aws init failed: {init:?}");
        prepare(&mut backend);
        let out = run_cli_with(
            dir.path(),
            &["project", "add", QUICKSTART],
            &backend.store_args(),
            &backend.env(),
        );
        assert_eq!(out.code, 0, "wisp project add quickstart failed: {out:?}");
        Self::launch(dir, Some(backend))
    }

    /// The AWS backends, when the server runs on them.
    pub fn aws(&self) -> Option<&AwsBackend> {
        self.aws.as_ref()
    }
}

// ---------------------------------------------------------------------------------------
// A private redis-server

/// A `redis-server` on a free loopback port, for one test; killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
}

impl RedisServer {
    /// Starts one and waits until it answers PING; `None` (after a note) when there is no
    /// `redis-server` to run.
    pub fn start(test: &str) -> Option<RedisServer> {
        let dir = tempfile::tempdir().expect("a redis dir");
        let port = free_port();
        let mut server = RedisServer {
            child: None,
            port,
            dir,
        };
        match server.spawn() {
            Ok(()) => Some(server),
            Err(e) => skip(test, &format!("cannot run redis-server: {e}")),
        }
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.command(&["PING"]).is_some_and(|r| r == "+PONG") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(std::io::Error::other("redis-server did not answer PING"))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills it (SIGKILL: as abrupt as a failed node); its data is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts an empty one again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn().expect("restart redis-server");
    }

    /// One command over RESP; the first reply line (`+PONG`, `:3`, ...), `None` when the
    /// server does not answer.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while !reply.ends_with(b"\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => reply.push(byte[0]),
                _ => return None,
            }
        }
        Some(String::from_utf8_lossy(&reply).trim_end().to_string())
    }

    /// `DBSIZE`: how many keys it holds.
    pub fn key_count(&self) -> u64 {
        self.command(&["DBSIZE"])
            .and_then(|r| r.strip_prefix(':').and_then(|n| n.parse().ok()))
            .expect("DBSIZE")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
