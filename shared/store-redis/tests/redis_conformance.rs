//! The shared cache conformance suite against a real `redis-server`, and what only a
//! networked cache can show: Redis dying, hanging and coming back mid-run, TLS with an
//! AUTH token.
//!
//! Needs `WISP_TEST_REDIS_URL` (e.g. `redis://127.0.0.1:6379`, see `scripts/redis.sh`).
//! Unset: the tests print a note and pass, unless `WISP_REQUIRE_AWS_TESTS=1`, when they
//! fail. The outage and TLS tests also start private `redis-server`s on free loopback
//! ports (the binary must be on PATH; `openssl` too for TLS).

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wisp_store::conformance as cf;
use wisp_store::{Cache, StoreError};
use wisp_store_redis::{DEFAULT_TIMEOUT, RedisCache, RedisCacheOptions};

const URL_VAR: &str = "WISP_TEST_REDIS_URL";
const REQUIRE_VAR: &str = "WISP_REQUIRE_AWS_TESTS";

fn required() -> bool {
    std::env::var(REQUIRE_VAR).as_deref() == Ok("1")
}

/// Skips (or, when required, fails) a test whose stand-in is missing.
fn missing(test: &str, what: &str) {
    if required() {
        panic!("{test}: {what}, but {REQUIRE_VAR}=1 requires this test to run");
    }
    eprintln!("note: {test} skipped: {what}");
}

/// The shared Redis under test, or `None` (after the note) when the tests are off.
fn redis_url(test: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            missing(
                test,
                &format!(
                    "{URL_VAR} is not set (start one with `scripts/redis.sh start 6379` and \
                     export {URL_VAR}=redis://127.0.0.1:6379)"
                ),
            );
            None
        }
    }
}

async fn shared_cache(test: &str) -> Option<Arc<dyn Cache>> {
    let url = redis_url(test)?;
    let cache = RedisCache::connect(&url).await.expect("valid Redis URL");
    cache
        .ping()
        .await
        .unwrap_or_else(|e| panic!("{test}: Redis at {URL_VAR} does not answer: {e}"));
    Some(Arc::new(cache))
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let Some(cache) = shared_cache(stringify!($case)).await else { return };
                cf::$case(&*cache).await;
            }
        )*
    };
}

cases!(cache_get_put_delete, cache_ttl, cache_hash);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cache_suite_twice_on_one_instance() {
    let Some(cache) = shared_cache("cache_suite_twice_on_one_instance").await else {
        return;
    };
    cf::cache_suite(cache.clone()).await;
    cf::cache_suite(cache).await;
}

#[tokio::test]
async fn wrong_type_is_an_error_not_an_outage() {
    let Some(cache) = shared_cache("wrong_type_is_an_error_not_an_outage").await else {
        return;
    };
    let key = cf::unique("cache-type");
    cache.put(&key, b"v".to_vec(), None).await.expect("put");
    let err = cache.hash_get(&key, "f").await.expect_err("string as hash");
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err:?}");
    cache.delete(&key).await.expect("delete");
}

// ---------------------------------------------------------------------------------------
// Private redis-servers: outages and TLS
// ---------------------------------------------------------------------------------------

fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

/// A `redis-server` child process, killed when dropped.
struct PrivateRedis {
    child: Child,
}

impl PrivateRedis {
    /// Plain TCP on `port`, or TLS on `port` with `tls_args`; waits until it answers.
    fn start(binary: &Path, port: u16, extra: &[String], tls: bool) -> PrivateRedis {
        let mut cmd = Command::new(binary);
        if tls {
            cmd.args(["--port", "0", "--tls-port", &port.to_string()]);
        } else {
            cmd.args(["--port", &port.to_string()]);
        }
        cmd.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(std::env::temp_dir())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let child = cmd.spawn().expect("start redis-server");
        let server = PrivateRedis { child };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let up = if tls {
                TcpStream::connect(("127.0.0.1", port)).is_ok()
            } else {
                answers_ping(port)
            };
            if up {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not come up on port {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {}", self.pid());
    }

    /// SIGKILL, like a crash or a lost node: no goodbye to the clients.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn answers_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// The redis-server binary, or `None` (after the note) when these tests are off.
fn redis_server(test: &str) -> Option<PathBuf> {
    redis_url(test)?;
    let binary = find_binary("redis-server");
    if binary.is_none() {
        missing(
            test,
            "no redis-server on PATH (scripts/redis.sh installs it)",
        );
    }
    binary
}

/// How long a call may take while Redis is down or hung before the test calls it hung:
/// every call is bounded by the call timeout (250 ms), so only a call that waits on the
/// dead server for good misses this deadline, however loaded the machine. No pass/fail
/// bound is tighter than that (timing belongs in benches/); the times are printed.
const HUNG: Duration = Duration::from_secs(60);

/// `call`'s result, which must come before [`HUNG`].
async fn unhung<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HUNG, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {HUNG:?}"))
}

/// Concurrent callers while Redis is down or hung: enough that, were they served one
/// after another (each waiting out the 250 ms call timeout), the last would miss
/// [`HUNG`] (500 x 250 ms = 125 s).
const CONCURRENT_CALLERS: usize = 500;

/// Every operation fails `Unavailable` and none hangs, also when many run at once.
async fn assert_unavailable_quickly(cache: &Arc<RedisCache>, rounds: usize) {
    assert_eq!(DEFAULT_TIMEOUT, Duration::from_millis(250));
    assert!(DEFAULT_TIMEOUT * CONCURRENT_CALLERS as u32 > HUNG * 2);
    for round in 0..rounds {
        let key = format!("down-{round}");
        let started = Instant::now();
        let results: Vec<(&str, Result<(), StoreError>)> = vec![
            ("get", unhung("get", cache.get(&key)).await.map(|_| ())),
            (
                "put",
                unhung("put", cache.put(&key, b"x".to_vec(), None)).await,
            ),
            (
                "put ttl",
                unhung(
                    "put ttl",
                    cache.put(&key, b"x".to_vec(), Some(Duration::from_secs(5))),
                )
                .await,
            ),
            ("delete", unhung("delete", cache.delete(&key)).await),
            (
                "hash_set",
                unhung("hash_set", cache.hash_set(&key, "f", b"x".to_vec())).await,
            ),
            (
                "hash_get",
                unhung("hash_get", cache.hash_get(&key, "f"))
                    .await
                    .map(|_| ()),
            ),
            (
                "hash_get_all",
                unhung("hash_get_all", cache.hash_get_all(&key))
                    .await
                    .map(|_| ()),
            ),
            (
                "hash_delete",
                unhung("hash_delete", cache.hash_delete(&key, "f")).await,
            ),
        ];
        let n = results.len();
        for (op, result) in results {
            assert!(
                matches!(result, Err(StoreError::Unavailable { .. })),
                "round {round}: {op} while Redis is down: {result:?}"
            );
        }
        println!("round {round}: {n} calls took {:?}", started.elapsed());
    }
    // Many concurrent callers: each waits for its own timeout, not for the others'.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..CONCURRENT_CALLERS {
        let cache = cache.clone();
        tasks.push(tokio::spawn(async move {
            cache.get(&format!("down-concurrent-{i}")).await
        }));
    }
    let all = async {
        for task in tasks {
            let result = task.await.expect("task");
            assert!(
                matches!(result, Err(StoreError::Unavailable { .. })),
                "{result:?}"
            );
        }
    };
    unhung("the concurrent callers", all).await;
    println!(
        "{CONCURRENT_CALLERS} concurrent calls took {:?}",
        started.elapsed()
    );
}

/// Polls until a put/get round trip works; returns how long that took.
async fn wait_until_working(cache: &RedisCache, within: Duration) -> Duration {
    let started = Instant::now();
    let key = cf::unique("cache-back");
    loop {
        let ok = cache.put(&key, b"back".to_vec(), None).await.is_ok()
            && cache.get(&key).await.ok().flatten().as_deref() == Some(&b"back"[..]);
        if ok {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "the cache did not work again within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_dies_and_comes_back() {
    let Some(binary) = redis_server("redis_dies_and_comes_back") else {
        return;
    };
    let port = free_port();
    let server = PrivateRedis::start(&binary, port, &[], false);
    let cache = Arc::new(
        RedisCache::connect(&format!("redis://127.0.0.1:{port}"))
            .await
            .expect("connect"),
    );
    cache.put("k", b"v".to_vec(), None).await.expect("put");
    cache
        .hash_set("HASHKEY:PIPED:STATS", "piped-1", b"{}".to_vec())
        .await
        .expect("hash_set");
    assert_eq!(
        cache.get("k").await.expect("get").as_deref(),
        Some(&b"v"[..])
    );

    server.kill();
    assert_unavailable_quickly(&cache, 5).await;

    // Back on the same address (empty: nothing was saved).
    let _server = PrivateRedis::start(&binary, port, &[], false);
    let took = wait_until_working(&cache, Duration::from_secs(20)).await;
    eprintln!("redis_dies_and_comes_back: working again {took:?} after the restart");
    assert_eq!(cache.get("k").await.expect("get"), None);
    cf::cache_suite(cache.clone()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_hangs_and_recovers() {
    let Some(binary) = redis_server("redis_hangs_and_recovers") else {
        return;
    };
    let port = free_port();
    let server = PrivateRedis::start(&binary, port, &[], false);
    let cache = Arc::new(
        RedisCache::connect(&format!("redis://127.0.0.1:{port}"))
            .await
            .expect("connect"),
    );
    cache.put("k", b"v".to_vec(), None).await.expect("put");

    // A frozen server: the TCP connection stays up but nothing answers.
    server.signal("-STOP");
    assert_unavailable_quickly(&cache, 2).await;
    server.signal("-CONT");
    let took = wait_until_working(&cache, Duration::from_secs(20)).await;
    eprintln!("redis_hangs_and_recovers: working again {took:?} after SIGCONT");
    assert_eq!(
        cache.get("k").await.expect("get").as_deref(),
        Some(&b"v"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_down_at_startup_then_up() {
    let Some(binary) = redis_server("redis_down_at_startup_then_up") else {
        return;
    };
    let port = free_port();
    let cache = Arc::new(
        unhung(
            "connect",
            RedisCache::connect(&format!("redis://127.0.0.1:{port}")),
        )
        .await
        .expect("connect succeeds even though nothing listens yet"),
    );
    assert_unavailable_quickly(&cache, 1).await;
    let _server = PrivateRedis::start(&binary, port, &[], false);
    let took = wait_until_working(&cache, Duration::from_secs(20)).await;
    eprintln!("redis_down_at_startup_then_up: working {took:?} after the server started");
}

/// A connection that hangs for longer than `rebuild_after` is replaced, and the fresh one
/// works once Redis answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_connection_is_replaced() {
    let Some(binary) = redis_server("a_hung_connection_is_replaced") else {
        return;
    };
    let port = free_port();
    let server = PrivateRedis::start(&binary, port, &[], false);
    let cache = Arc::new(
        RedisCache::connect_with(RedisCacheOptions {
            rebuild_after: Duration::from_millis(600),
            ..RedisCacheOptions::new(format!("redis://127.0.0.1:{port}"))
        })
        .await
        .expect("connect"),
    );
    cache.put("k", b"v".to_vec(), None).await.expect("put");
    assert_eq!(cache.rebuilds(), 0);
    server.signal("-STOP");
    // Calls keep failing (none hanging) until the connection is rebuilt; the rebuild
    // comes after 600 ms of hanging, so a deadline far past that only catches a cache
    // that never rebuilds.
    let rebuilt = async {
        while cache.rebuilds() == 0 {
            let err = unhung("get", cache.get("k")).await.expect_err("hung");
            assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
        }
    };
    unhung("the rebuild", rebuilt).await;
    server.signal("-CONT");
    let took = wait_until_working(&cache, Duration::from_secs(20)).await;
    eprintln!(
        "a_hung_connection_is_replaced: {} rebuild(s), working again {took:?} after SIGCONT",
        cache.rebuilds()
    );
    assert_eq!(
        cache.get("k").await.expect("get").as_deref(),
        Some(&b"v"[..])
    );
}

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// ElastiCache-style: `rediss://` with an AUTH token, server certificate checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tls_with_auth_token() {
    let Some(binary) = redis_server("tls_with_auth_token") else {
        return;
    };
    if find_binary("openssl").is_none() {
        missing(
            "tls_with_auth_token",
            "no openssl on PATH to make a test certificate",
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=wisp-test-ca",
        ],
    );
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(
        d.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write ext");
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "1",
            "-extfile",
            "ext.cnf",
        ],
    );
    let token = "wisp-test-token-0123456789";
    let port = free_port();
    let path = |name: &str| d.join(name).display().to_string();
    let _server = PrivateRedis::start(
        &binary,
        port,
        &[
            "--tls-cert-file".into(),
            path("server.pem"),
            "--tls-key-file".into(),
            path("server.key"),
            "--tls-ca-cert-file".into(),
            path("ca.pem"),
            "--tls-auth-clients".into(),
            "no".into(),
            "--requirepass".into(),
            token.into(),
        ],
        true,
    );
    let ca = std::fs::read(d.join("ca.pem")).expect("read CA");
    let url = format!("rediss://127.0.0.1:{port}");

    // Token as a separate option.
    let cache = RedisCache::connect_with(RedisCacheOptions {
        auth_token: Some(token.into()),
        ca_cert_pem: Some(ca.clone()),
        ..RedisCacheOptions::new(&url)
    })
    .await
    .expect("connect");
    cache.ping().await.expect("TLS + AUTH ping");
    cf::cache_suite(Arc::new(cache)).await;

    // Token in the URL.
    let cache = RedisCache::connect_with(RedisCacheOptions {
        ca_cert_pem: Some(ca.clone()),
        ..RedisCacheOptions::new(format!("rediss://:{token}@127.0.0.1:{port}"))
    })
    .await
    .expect("connect");
    cache.ping().await.expect("token in URL");

    // A wrong token, or a server certificate nobody vouches for: unavailable, quickly,
    // and the token never shows in the error.
    for options in [
        RedisCacheOptions {
            auth_token: Some("wrong-token".into()),
            ca_cert_pem: Some(ca.clone()),
            ..RedisCacheOptions::new(&url)
        },
        RedisCacheOptions {
            auth_token: Some(token.into()),
            ..RedisCacheOptions::new(&url)
        },
    ] {
        let cache = RedisCache::connect_with(options).await.expect("connect");
        let err = unhung("get", cache.get("k"))
            .await
            .expect_err("must not work");
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
        let shown = err.to_string();
        assert!(
            !shown.contains(token) && !shown.contains("wrong-token"),
            "{shown}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// ElastiCache IAM auth: an ACL user whose password is a signed token
// ---------------------------------------------------------------------------------------

mod iam {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::SystemTime;

    use aws_credential_types::Credentials;
    use aws_credential_types::provider::SharedCredentialsProvider;
    use wisp_store_redis::iam::{IamAuth, TokenTarget, sign_token};

    /// What the IaC lets its IAM-auth user run (infra/terraform redis.tf
    /// `redis_access_string`, template.yaml `RedisAppUser`): the cases below pass with
    /// exactly these commands.
    const IAC_COMMANDS: &str = "-@all +ping +get +set +del +hset +hget +hgetall +hdel";

    /// 2026-11-26T21:40:00Z, where the test clock starts.
    const START: u64 = 1_795_729_200;

    fn credentials() -> Credentials {
        Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            None,
            None,
            "test",
        )
    }

    /// Redis as ElastiCache sees it with IAM auth: a user `user` whose password is the
    /// token signed at `clock`, and a cache that signs its own tokens with that clock.
    struct IamSetup {
        admin: redis::aio::MultiplexedConnection,
        target: TokenTarget,
        clock: Arc<AtomicU64>,
        cache: RedisCache,
    }

    impl IamSetup {
        async fn new(test: &str) -> Option<IamSetup> {
            let url = redis_url(test)?;
            let mut admin = redis::Client::open(url.as_str())
                .expect("valid Redis URL")
                .get_multiplexed_async_connection()
                .await
                .unwrap_or_else(|e| panic!("{test}: Redis at {URL_VAR} does not answer: {e}"));
            let target = TokenTarget {
                cache_name: "wisp-cache".into(),
                user_id: cf::unique("wisp-iam").replace(['/', ':', '.'], "-"),
                serverless: false,
                region: "eu-west-1".into(),
            };
            let clock = Arc::new(AtomicU64::new(START));
            let mut setup = IamSetup {
                admin: admin.clone(),
                target: target.clone(),
                clock: clock.clone(),
                // Replaced below, once the user exists.
                cache: RedisCache::new_lazy(RedisCacheOptions::new(url.clone())).expect("URL"),
            };
            setup.set_password().await;
            let mut auth = IamAuth::new(target, SharedCredentialsProvider::new(credentials()));
            auth.clock = Arc::new(move || {
                SystemTime::UNIX_EPOCH + Duration::from_secs(clock.load(Ordering::SeqCst))
            });
            // Short, so that re-authentication of the live connection runs in the test.
            auth.refresh_every = Duration::from_millis(200);
            setup.cache = RedisCache::connect_with(RedisCacheOptions {
                iam: Some(auth),
                ..RedisCacheOptions::new(url)
            })
            .await
            .expect("valid options");
            let _: () = redis::cmd("PING")
                .query_async(&mut admin)
                .await
                .expect("ping");
            Some(setup)
        }

        fn token(&self) -> String {
            let now =
                SystemTime::UNIX_EPOCH + Duration::from_secs(self.clock.load(Ordering::SeqCst));
            sign_token(&self.target, &credentials(), now).expect("signs")
        }

        /// Makes the token for the current clock the user's only password.
        async fn set_password(&mut self) {
            let token = self.token();
            let _: () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg(&self.target.user_id)
                .arg("on")
                .arg("resetpass")
                .arg(format!(">{token}"))
                .arg("~*")
                .arg(IAC_COMMANDS.split(' ').collect::<Vec<_>>())
                .query_async(&mut self.admin)
                .await
                .expect("ACL SETUSER");
        }

        async fn kill_connections(&mut self) {
            let _: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("USER")
                .arg(&self.target.user_id)
                .query_async(&mut self.admin)
                .await
                .expect("CLIENT KILL");
        }

        async fn drop_user(mut self) {
            let _: i64 = redis::cmd("ACL")
                .arg("DELUSER")
                .arg(&self.target.user_id)
                .query_async(&mut self.admin)
                .await
                .expect("ACL DELUSER");
        }
    }

    macro_rules! iam_cases {
        ($($case:ident),* $(,)?) => {
            $(
                #[tokio::test]
                async fn $case() {
                    let test = concat!("iam_", stringify!($case));
                    let Some(setup) = IamSetup::new(test).await else { return };
                    setup.cache.ping().await.unwrap_or_else(|e| panic!("{test}: {e}"));
                    cf::$case(&setup.cache).await;
                    setup.drop_user().await;
                }
            )*
        };
    }

    iam_cases!(cache_get_put_delete, cache_ttl, cache_hash);

    /// Time passes, the old token is no longer accepted (here: the ACL password is
    /// replaced by the token for the new time), and the connection drops: the cache
    /// signs a new token and works again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replaced_token_is_followed_on_reconnect() {
        let test = "a_replaced_token_is_followed_on_reconnect";
        let Some(mut setup) = IamSetup::new(test).await else {
            return;
        };
        wait_until_working(&setup.cache, HUNG).await;
        let old = setup.token();
        setup.clock.fetch_add(600, Ordering::SeqCst);
        assert_ne!(setup.token(), old, "a new time signs a new token");
        setup.set_password().await;
        setup.kill_connections().await;
        wait_until_working(&setup.cache, HUNG).await;
        // And once more: the next reconnect signs again rather than reusing a token.
        setup.clock.fetch_add(600, Ordering::SeqCst);
        setup.set_password().await;
        setup.kill_connections().await;
        wait_until_working(&setup.cache, HUNG).await;
        setup.drop_user().await;
    }

    #[tokio::test]
    async fn iam_auth_refuses_a_fixed_token_too() {
        let options = RedisCacheOptions {
            auth_token: Some("tok3n".into()),
            iam: Some(IamAuth::new(
                TokenTarget {
                    cache_name: "c".into(),
                    user_id: "u".into(),
                    serverless: true,
                    region: "eu-west-1".into(),
                },
                SharedCredentialsProvider::new(credentials()),
            )),
            ..RedisCacheOptions::new("rediss://cache.example:6379")
        };
        let err = RedisCache::new_lazy(options).expect_err("both");
        assert!(matches!(err, StoreError::InvalidArgument(_)), "{err:?}");
        assert!(!err.to_string().contains("tok3n"), "{err}");
    }
}
