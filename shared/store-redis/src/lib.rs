//! `Cache` on Redis (Amazon ElastiCache, or any `redis-server`), built to be optional.
//!
//! The cache is never the only copy of anything, so a slow or dead Redis must cost a
//! request at most a few hundred milliseconds: every call is bounded by a short timeout
//! ([`DEFAULT_TIMEOUT`]), and a timeout, a refused or dropped connection or a Redis that
//! is loading, failing over or read-only is [`StoreError::Unavailable`]. Callers treat
//! that as a miss (reads) or a skipped write.
//!
//! Connections go through [`redis::aio::ConnectionManager`], which reconnects in the
//! background after a connection is lost. As a safety net, when nothing has succeeded for
//! [`REBUILD_AFTER`] the manager itself is rebuilt, so no failure mode (a connection that
//! hangs without ever erroring, as in a network partition; a reconnect that gave up) leaves
//! the cache broken for good once Redis is back.
//!
//! URLs: `redis://[:TOKEN@]HOST[:PORT][/DB]` and `rediss://…` (TLS through rustls, as
//! ElastiCache in-transit encryption needs; server certificates are checked against the
//! system roots). An AUTH token can be in the URL or given separately
//! ([`RedisCacheOptions::auth_token`]); it never appears in `Debug` output or errors.
//! With ElastiCache IAM auth ([`RedisCacheOptions::iam`], see [`iam`]) there is no token
//! to keep: each connection signs its own, and live connections re-authenticate with a
//! fresh one before it expires.

pub mod elasticache;
pub mod iam;

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, ErrorKind, FromRedisValue, IntoConnectionInfo, RedisError};
use wisp_store::cache::Cache;
use wisp_store::error::{Result, StoreError};

/// Default bound on one cache call, connection wait included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// Default bound on one connection attempt (TCP + TLS + AUTH).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Default for [`RedisCacheOptions::rebuild_after`].
pub const REBUILD_AFTER: Duration = Duration::from_secs(10);

/// How to reach Redis.
#[derive(Clone)]
pub struct RedisCacheOptions {
    /// `redis://…` or `rediss://…` (TLS).
    pub url: String,
    /// AUTH token (ElastiCache) or password; overrides one in the URL.
    pub auth_token: Option<String>,
    /// Username for Redis ACLs (Redis 6+); overrides one in the URL.
    pub username: Option<String>,
    /// ElastiCache IAM auth: sign short-lived tokens instead of a fixed AUTH token (which
    /// must then be unset, as must the username: the token's user id is the username).
    pub iam: Option<iam::IamAuth>,
    /// PEM CA certificate(s) to trust for `rediss://` instead of the system roots (a
    /// private CA, a test server).
    pub ca_cert_pem: Option<Vec<u8>>,
    /// Bound on each cache call.
    pub timeout: Duration,
    /// Bound on each connection attempt.
    pub connect_timeout: Duration,
    /// With calls failing and none succeeding for this long, the connection is replaced
    /// by a fresh one.
    pub rebuild_after: Duration,
}

impl RedisCacheOptions {
    pub fn new(url: impl Into<String>) -> Self {
        RedisCacheOptions {
            url: url.into(),
            auth_token: None,
            username: None,
            iam: None,
            ca_cert_pem: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            rebuild_after: REBUILD_AFTER,
        }
    }
}

impl std::fmt::Debug for RedisCacheOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCacheOptions")
            .field("url", &redact_url(&self.url))
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field("username", &self.username)
            .field("iam", &self.iam)
            .field("ca_cert_pem", &self.ca_cert_pem.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("rebuild_after", &self.rebuild_after)
            .finish()
    }
}

/// `scheme://host…` without any user info, for messages.
fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            format!("{scheme}://{rest}")
        }
        None => "<unparseable URL>".to_string(),
    }
}

struct Slot {
    manager: ConnectionManager,
    built: Instant,
    /// How many managers were replaced before this one.
    generation: u64,
}

/// A [`Cache`] on Redis. Cheap to share (`Arc`); all calls go over one multiplexed
/// connection.
pub struct RedisCache {
    client: redis::Client,
    manager_config: ConnectionManagerConfig,
    slot: RwLock<Slot>,
    timeout: Duration,
    rebuild_after: Duration,
    /// Where the cache points, without credentials.
    target: String,
    epoch: Instant,
    /// Milliseconds since `epoch` of the last successful call (0: none yet).
    last_ok_ms: AtomicU64,
}

impl std::fmt::Debug for RedisCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCache")
            .field("target", &self.target)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RedisCache {
    /// [`RedisCache::connect_with`] with default timeouts.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(RedisCacheOptions::new(url)).await
    }

    /// Checks the URL and prepares the connection, then tries to connect once (bounded
    /// by `connect_timeout`) so that the TCP/TLS handshake happens now (Lambda init)
    /// rather than on the first request. A Redis that cannot be reached yet is not an
    /// error — the cache reports `Unavailable` until it can be; a malformed URL is
    /// (`InvalidArgument`).
    pub async fn connect_with(options: RedisCacheOptions) -> Result<Self> {
        let connect_timeout = options.connect_timeout;
        let cache = Self::new_lazy(options)?;
        let mut manager = cache.manager();
        let warm_up = tokio::time::timeout(
            connect_timeout.max(cache.timeout),
            redis::cmd("PING").query_async::<redis::Value>(&mut manager),
        )
        .await;
        match warm_up {
            Ok(Ok(_)) => cache.note_ok(),
            Ok(Err(e)) => {
                tracing::warn!(target = %cache.target, error = %e, "Redis cache not reachable yet");
            }
            Err(_) => {
                tracing::warn!(target = %cache.target, "Redis cache not reachable yet: timed out");
            }
        }
        Ok(cache)
    }

    /// Like [`RedisCache::connect_with`] without the warm-up: no I/O until the first call.
    pub fn new_lazy(options: RedisCacheOptions) -> Result<Self> {
        let target = redact_url(&options.url);
        let invalid = |e: RedisError| {
            // The redis crate's messages do not echo the URL, so no secret leaks here.
            StoreError::InvalidArgument(format!("Redis URL {target}: {e}"))
        };
        let mut info = options
            .url
            .as_str()
            .into_connection_info()
            .map_err(invalid)?;
        if let Some(token) = &options.auth_token {
            let settings = info.redis_settings().clone().set_password(token);
            info = info.set_redis_settings(settings);
        }
        if let Some(username) = &options.username {
            let settings = info.redis_settings().clone().set_username(username);
            info = info.set_redis_settings(settings);
        }
        let has_password = info.redis_settings().password().is_some();
        let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
        if tls {
            // rustls needs a process-wide crypto provider when more than one is compiled
            // in; use the one the AWS SDK uses. An already installed one is kept.
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        }
        let client = match options.ca_cert_pem {
            Some(pem) if tls => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                },
            ),
            Some(_) => {
                return Err(StoreError::InvalidArgument(format!(
                    "Redis URL {target}: a CA certificate needs a rediss:// (TLS) URL"
                )));
            }
            None => redis::Client::open(info),
        }
        .map_err(invalid)?;
        let mut manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.timeout))
            .set_number_of_retries(3)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1));
        if let Some(iam) = options.iam {
            if options.auth_token.is_some() || options.username.is_some() || has_password {
                return Err(StoreError::InvalidArgument(format!(
                    "Redis {target}: IAM auth signs its own tokens; remove the AUTH token and \
                     username from the cache config"
                )));
            }
            // Each new connection takes the stream's first (fresh) token; the live one
            // re-authenticates with each later one.
            manager_config = manager_config.set_credentials_provider(iam);
        }
        let manager =
            ConnectionManager::new_lazy_with_config(client.clone(), manager_config.clone())
                .map_err(|e| StoreError::internal_from(format!("Redis {target}"), e))?;
        Ok(RedisCache {
            client,
            manager_config,
            slot: RwLock::new(Slot {
                manager,
                built: Instant::now(),
                generation: 0,
            }),
            timeout: options.timeout,
            rebuild_after: options.rebuild_after,
            target,
            epoch: Instant::now(),
            last_ok_ms: AtomicU64::new(0),
        })
    }

    /// One round trip to Redis (`PING`), within the call timeout.
    pub async fn ping(&self) -> Result<()> {
        self.run(redis::cmd("PING"), |_: redis::Value| ()).await
    }

    /// How many times the connection was given up and replaced (see
    /// [`RedisCacheOptions::rebuild_after`]); for metrics and tests.
    pub fn rebuilds(&self) -> u64 {
        match self.slot.read() {
            Ok(slot) => slot.generation,
            Err(poisoned) => poisoned.into_inner().generation,
        }
    }

    fn manager(&self) -> ConnectionManager {
        match self.slot.read() {
            Ok(slot) => slot.manager.clone(),
            Err(poisoned) => poisoned.into_inner().manager.clone(),
        }
    }

    fn note_ok(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ok_ms.store(ms.max(1), Ordering::Relaxed);
    }

    /// After a connection-level failure: when nothing has worked for `rebuild_after`
    /// (since the last success, or since the manager was built), start over with a
    /// fresh manager.
    fn note_failure(&self) {
        let last_ok = Duration::from_millis(self.last_ok_ms.load(Ordering::Relaxed));
        let since_ok = self.epoch.elapsed().saturating_sub(last_ok);
        if since_ok < self.rebuild_after {
            return;
        }
        let mut slot = match self.slot.write() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        if slot.built.elapsed() < self.rebuild_after {
            return;
        }
        match ConnectionManager::new_lazy_with_config(
            self.client.clone(),
            self.manager_config.clone(),
        ) {
            Ok(manager) => {
                tracing::info!(target = %self.target, "rebuilding the Redis connection manager");
                *slot = Slot {
                    manager,
                    built: Instant::now(),
                    generation: slot.generation + 1,
                };
            }
            Err(e) => {
                tracing::warn!(target = %self.target, error = %e, "rebuilding the Redis connection manager")
            }
        }
    }

    /// Runs `cmd` within the call timeout and converts the reply.
    async fn run<T, R>(&self, cmd: Cmd, convert: impl FnOnce(T) -> R) -> Result<R>
    where
        T: FromRedisValue,
    {
        let mut manager = self.manager();
        let outcome = tokio::time::timeout(self.timeout, cmd.query_async::<T>(&mut manager)).await;
        match outcome {
            Ok(Ok(value)) => {
                self.note_ok();
                Ok(convert(value))
            }
            Ok(Err(e)) => {
                let error = self.map_error(e);
                if matches!(error, StoreError::Unavailable { .. }) {
                    self.note_failure();
                } else {
                    // Redis answered (e.g. WRONGTYPE): the connection works.
                    self.note_ok();
                }
                Err(error)
            }
            Err(_) => {
                self.note_failure();
                wisp_telemetry::record_cache_timeout("redis");
                Err(StoreError::unavailable(format!(
                    "Redis {}: no answer within {:?}",
                    self.target, self.timeout
                )))
            }
        }
    }

    fn map_error(&self, e: RedisError) -> StoreError {
        let target = &self.target;
        if e.code() == Some("WRONGTYPE") {
            return StoreError::InvalidArgument(format!(
                "Redis {target}: the key holds another type of value"
            ));
        }
        match e.kind() {
            ErrorKind::Server(
                redis::ServerErrorKind::BusyLoading
                | redis::ServerErrorKind::TryAgain
                | redis::ServerErrorKind::ClusterDown
                | redis::ServerErrorKind::MasterDown
                | redis::ServerErrorKind::ReadOnly
                | redis::ServerErrorKind::Moved
                | redis::ServerErrorKind::Ask,
            )
            | ErrorKind::Io
            | ErrorKind::AuthenticationFailed
            | ErrorKind::ClusterConnectionNotFound => {
                StoreError::unavailable_from(format!("Redis {target}"), e)
            }
            _ if e.code() == Some("OOM") || e.is_timeout() || e.is_connection_dropped() => {
                StoreError::unavailable_from(format!("Redis {target}"), e)
            }
            _ => StoreError::internal_from(format!("Redis {target}"), e),
        }
    }
}

fn millis(ttl: Duration) -> u64 {
    // PX needs at least 1 ms; a zero TTL would be an error in Redis.
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[async_trait]
impl Cache for RedisCache {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(key);
        self.run(cmd, |v: Option<Vec<u8>>| v).await
    }

    async fn put(&self, key: &str, value: Vec<u8>, ttl: Option<Duration>) -> Result<()> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value);
        if let Some(ttl) = ttl {
            cmd.arg("PX").arg(millis(ttl));
        }
        self.run(cmd, |_: redis::Value| ()).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(key);
        self.run(cmd, |_: i64| ()).await
    }

    async fn hash_set(&self, key: &str, field: &str, value: Vec<u8>) -> Result<()> {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key).arg(field).arg(value);
        self.run(cmd, |_: i64| ()).await
    }

    async fn hash_get(&self, key: &str, field: &str) -> Result<Option<Vec<u8>>> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(key).arg(field);
        self.run(cmd, |v: Option<Vec<u8>>| v).await
    }

    async fn hash_get_all(&self, key: &str) -> Result<HashMap<String, Vec<u8>>> {
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(key);
        self.run(cmd, |v: HashMap<String, Vec<u8>>| v).await
    }

    async fn hash_delete(&self, key: &str, field: &str) -> Result<()> {
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(key).arg(field);
        self.run(cmd, |_: i64| ()).await
    }

    /// Every instance and task connects to the same Redis.
    fn shared(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact_url("rediss://:s3cret@cache.example:6379/0"),
            "rediss://cache.example:6379/0"
        );
        assert_eq!(redact_url("redis://user:p@ss@host:1"), "redis://host:1");
        assert_eq!(redact_url("redis://host"), "redis://host");
        let options = RedisCacheOptions {
            auth_token: Some("tok3n".into()),
            ..RedisCacheOptions::new("rediss://:s3cret@h:6379")
        };
        let shown = format!("{options:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("tok3n"),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn bad_urls_are_invalid_arguments() {
        for url in ["http://host", "not a url", ""] {
            let err = RedisCache::new_lazy(RedisCacheOptions::new(url)).expect_err(url);
            assert!(
                matches!(err, StoreError::InvalidArgument(_)),
                "{url}: {err:?}"
            );
        }
    }

    #[tokio::test]
    async fn tls_urls_parse_with_a_separate_token() {
        let options = RedisCacheOptions {
            auth_token: Some("tok3n".into()),
            ..RedisCacheOptions::new("rediss://cache.example:6379")
        };
        let cache = RedisCache::new_lazy(options).expect("rediss URL");
        let info = cache.client.get_connection_info();
        assert!(matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }));
        assert_eq!(info.redis_settings().password(), Some("tok3n"));
        assert!(!format!("{cache:?}").contains("tok3n"));
    }

    #[tokio::test]
    async fn nothing_listening_is_unavailable_quickly() {
        // A port that refuses: bind, note the port, close.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        // Generous deadlines: they only catch a call that waits for good (timing
        // belongs in benches/).
        let hung = Duration::from_secs(60);
        let cache = tokio::time::timeout(
            hung,
            RedisCache::connect(&format!("redis://127.0.0.1:{port}")),
        )
        .await
        .expect("connect returns")
        .expect("connect never fails on an unreachable Redis");
        for _ in 0..3 {
            let err = tokio::time::timeout(hung, cache.get("k"))
                .await
                .expect("the call returns")
                .expect_err("nothing listening");
            assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
        }
    }
}
