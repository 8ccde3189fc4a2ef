//! `spec.cache`: upstream's `ttl`, plus Wisp's choice of backend in the same
//! `{type, config}` shape as `datastore` and `filestore`:
//!
//! ```yaml
//! cache:
//!   ttl: 5m
//!   type: REDIS            # or MEMORY, the default (an in-process cache)
//!   config:
//!     address: my-cache.xxxxxx.use1.cache.amazonaws.com:6379   # or redis://… / rediss://…
//!     tls: true            # ElastiCache in-transit encryption
//!     authTokenFile: /etc/wisp/redis-auth-token   # or authToken: …
//! ```
//!
//! Or, on ElastiCache, by id rather than address (read through the ElastiCache API at
//! init), here with IAM auth (no AUTH token to keep):
//!
//! ```yaml
//!   config:
//!     cacheId: wisp-cache      # replication group id, or serverless cache name
//!     serverless: true         # cacheId names an ElastiCache Serverless cache
//!     iamAuth: true            # sign short-lived IAM tokens as this ElastiCache user:
//!     username: wisp-app
//! ```
//!
//! The cache is never the only copy of anything, so Redis being absent or down only costs
//! speed. Without `type` the cache is in process memory, as upstream's `cache: {ttl}`
//! configurations expect.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::store::{ConfigSeed, TaggedStore, config_or_default};
use crate::{ConfigError, DEFAULT_CACHE_TTL, GoDuration, SecretString};

/// The value of `spec.cache.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CacheType {
    /// In process memory (the default; `LOCAL` and `EMBEDDED` are accepted as aliases).
    #[serde(rename = "MEMORY", alias = "LOCAL", alias = "EMBEDDED")]
    Memory,
    /// Redis: Amazon ElastiCache or any `redis-server`.
    #[serde(rename = "REDIS")]
    Redis,
}

impl CacheType {
    /// The spelling used in YAML.
    pub const fn as_str(self) -> &'static str {
        match self {
            CacheType::Memory => "MEMORY",
            CacheType::Redis => "REDIS",
        }
    }
}

impl fmt::Display for CacheType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `spec.cache`: how long entries stay fresh, and where they live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// How long cached items stay fresh. Default (also when zero): 5m.
    pub ttl: GoDuration,
    /// `type` + `config`; [`CacheBackend::Memory`] when `type` is absent.
    pub backend: CacheBackend,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            ttl: GoDuration(DEFAULT_CACHE_TTL),
            backend: CacheBackend::default(),
        }
    }
}

impl CacheConfig {
    pub const fn cache_type(&self) -> CacheType {
        self.backend.cache_type()
    }

    /// The Redis settings, when `type: REDIS`.
    pub fn redis(&self) -> Option<&RedisCacheConfig> {
        match &self.backend {
            CacheBackend::Redis(c) => Some(c),
            CacheBackend::Memory(_) => None,
        }
    }

    pub(crate) fn problems(&self, out: &mut Vec<String>) {
        if let CacheBackend::Redis(c) = &self.backend {
            c.problems(out);
        }
    }
}

/// The cache backend and its `config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheBackend {
    Memory(MemoryCacheConfig),
    Redis(RedisCacheConfig),
}

impl Default for CacheBackend {
    fn default() -> Self {
        CacheBackend::Memory(MemoryCacheConfig::default())
    }
}

impl CacheBackend {
    pub const fn cache_type(&self) -> CacheType {
        match self {
            CacheBackend::Memory(_) => CacheType::Memory,
            CacheBackend::Redis(_) => CacheType::Redis,
        }
    }
}

/// Config of the `MEMORY` cache: nothing to set (bounded in entries and bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryCacheConfig {}

/// Config of the `REDIS` cache.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RedisCacheConfig {
    /// `host:port` (port 6379 when omitted), or a `redis://` / `rediss://` URL
    /// (`rediss` is TLS). Required unless `cacheId` is set.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// The ElastiCache replication group id (or serverless cache name with
    /// `serverless: true`) to read the address, TLS and auth mode from at init, instead
    /// of `address`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_id: Option<String>,
    /// `cacheId` names an ElastiCache Serverless cache.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub serverless: bool,
    /// ElastiCache IAM auth: Wisp signs short-lived tokens for `username` (an ElastiCache
    /// user with IAM auth) instead of using an AUTH token. Needs `cacheId`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub iam_auth: bool,
    /// Region of the cache (with `cacheId`); default: the SDK's region chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// ElastiCache API endpoint (with `cacheId`), for tests against a stand-in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Connect with TLS (ElastiCache in-transit encryption) when `address` is `host:port`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// Username for Redis ACLs (ElastiCache RBAC); none with a plain AUTH token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// AUTH token (ElastiCache) or password. Prefer `authTokenFile`, or keep the whole
    /// configuration in Secrets Manager (`--config-secret`).
    #[serde(skip_serializing_if = "SecretString::is_empty")]
    pub auth_token: SecretString,
    /// File holding the AUTH token (trailing newline ignored); a relative path is
    /// resolved against the configuration file's directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_token_file: Option<PathBuf>,
    /// Bound on each cache call (connection wait included); a slower Redis counts as a
    /// miss. Default 250ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<GoDuration>,
}

impl fmt::Debug for RedisCacheConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCacheConfig")
            .field("address", &redact_userinfo(&self.address))
            .field("cache_id", &self.cache_id)
            .field("serverless", &self.serverless)
            .field("iam_auth", &self.iam_auth)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("auth_token", &self.auth_token)
            .field("auth_token_file", &self.auth_token_file)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// `scheme://host…` without user info (a URL may carry the AUTH token).
pub(crate) fn redact_userinfo(address: &str) -> String {
    match address.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('/') {
            Some((authority, path)) => {
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                format!("{scheme}://{host}/{path}")
            }
            None => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                format!("{scheme}://{host}")
            }
        },
        None => address
            .rsplit_once('@')
            .map_or(address, |(_, h)| h)
            .to_owned(),
    }
}

impl RedisCacheConfig {
    /// The URL to connect to: `address` itself when it is a URL, else
    /// `redis://address` (`rediss://` with `tls: true`). May contain credentials when the
    /// address does: do not log it (see [`RedisCacheConfig::display_address`]).
    pub fn url(&self) -> String {
        let address = self.address.trim();
        if address.contains("://") {
            address.to_owned()
        } else if self.tls {
            format!("rediss://{address}")
        } else {
            format!("redis://{address}")
        }
    }

    /// The address without credentials, for messages (the ElastiCache id when the cache
    /// is named by id).
    pub fn display_address(&self) -> String {
        match self.cache_id.as_deref() {
            Some(id) if self.address.trim().is_empty() => {
                let kind = if self.serverless {
                    "serverless cache"
                } else {
                    "replication group"
                };
                format!("ElastiCache {kind} {id}")
            }
            _ => redact_userinfo(&self.url()),
        }
    }

    /// Whether the connection uses TLS.
    pub fn uses_tls(&self) -> bool {
        self.url().starts_with("rediss://")
    }

    /// The per-call timeout, when configured (and not zero).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout.map(|t| t.as_std()).filter(|t| !t.is_zero())
    }

    /// The AUTH token: `authToken`, or the content of `authTokenFile` (without trailing
    /// line breaks), or `None`.
    pub fn load_auth_token(&self) -> Result<Option<SecretString>, ConfigError> {
        if !self.auth_token.is_empty() {
            return Ok(Some(self.auth_token.clone()));
        }
        let Some(path) = &self.auth_token_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.clone(),
            source,
        })?;
        let token = text.trim_end_matches(['\n', '\r']);
        if token.is_empty() {
            return Err(ConfigError::Unsupported(format!(
                "{}: the Redis AUTH token file is empty",
                path.display()
            )));
        }
        Ok(Some(SecretString::new(token)))
    }

    pub(crate) fn resolve_relative_paths(&mut self, base_dir: &Path) {
        if let Some(path) = self.auth_token_file.as_mut()
            && path.is_relative()
        {
            *path = base_dir.join(&*path);
        }
    }

    fn problems(&self, out: &mut Vec<String>) {
        let address = self.address.trim();
        let cache_id = self.cache_id.as_deref().map(str::trim);
        if cache_id.is_some_and(str::is_empty) {
            out.push("cache.config.cacheId must not be empty when given".into());
        }
        if cache_id.is_some() && !address.is_empty() {
            out.push(
                "cache.config: set address or cacheId, not both (with cacheId the address \
                 comes from the ElastiCache API)"
                    .into(),
            );
        }
        if cache_id.is_none() {
            if self.serverless {
                out.push("cache.config.serverless needs cacheId".into());
            }
            if self.iam_auth {
                out.push("cache.config.iamAuth needs cacheId (the token names the cache)".into());
            }
        }
        if self.iam_auth {
            if self.username.is_none() {
                out.push(
                    "cache.config.iamAuth needs username (the ElastiCache user with IAM auth)"
                        .into(),
                );
            }
            if !self.auth_token.is_empty() || self.auth_token_file.is_some() {
                out.push(
                    "cache.config: iamAuth signs its own tokens; remove authToken/authTokenFile"
                        .into(),
                );
            }
        }
        if address.is_empty() {
            if cache_id.is_none() {
                out.push("cache.config.address or cacheId is required for type REDIS".into());
            }
        } else if let Some((scheme, rest)) = address.split_once("://") {
            match scheme {
                "redis" if self.tls => out.push(
                    "cache.config.tls is true but the address is a redis:// URL \
                     (use rediss://, or host:port with tls: true)"
                        .into(),
                ),
                "redis" | "rediss" => {}
                other => out.push(format!(
                    "cache.config.address: unsupported scheme {other:?} \
                     (use host:port, redis:// or rediss://)"
                )),
            }
            if rest.is_empty() {
                out.push("cache.config.address has no host".into());
            }
        }
        if !self.auth_token.is_empty() && self.auth_token_file.is_some() {
            out.push("cache.config: set authToken or authTokenFile, not both".into());
        }
        if self
            .auth_token_file
            .as_ref()
            .is_some_and(|p| p.as_os_str().is_empty())
        {
            out.push("cache.config.authTokenFile must not be empty when given".into());
        }
        if self
            .username
            .as_deref()
            .is_some_and(|u| u.trim().is_empty())
        {
            out.push("cache.config.username must not be empty when given".into());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Serde: `{ttl, type, config}`, with `config` read once `type` is known (see store.rs).

impl TaggedStore for CacheBackend {
    type Kind = CacheType;
    const EXPECTING: &'static str = "a cache `{ttl, type, config}` mapping";

    fn read_config<'de, D: Deserializer<'de>>(kind: CacheType, d: D) -> Result<Self, D::Error> {
        Ok(match kind {
            CacheType::Memory => CacheBackend::Memory(config_or_default(d)?),
            CacheType::Redis => CacheBackend::Redis(config_or_default(d)?),
        })
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum CacheField {
    Ttl,
    Type,
    Config,
}

struct CacheVisitor;

impl<'de> Visitor<'de> for CacheVisitor {
    type Value = CacheConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(<CacheBackend as TaggedStore>::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CacheConfig, A::Error> {
        let mut ttl: Option<GoDuration> = None;
        let mut kind: Option<CacheType> = None;
        let mut backend: Option<CacheBackend> = None;
        // `config` seen before `type`: kept as a YAML value until the type is known.
        let mut early_config: Option<serde_norway::Value> = None;
        while let Some(field) = map.next_key::<CacheField>()? {
            match field {
                CacheField::Ttl => {
                    if ttl.is_some() {
                        return Err(de::Error::duplicate_field("ttl"));
                    }
                    // `ttl:` with no value reads as unset (zero: the default applies).
                    ttl = Some(map.next_value::<Option<GoDuration>>()?.unwrap_or_default());
                }
                CacheField::Type => {
                    if kind.is_some() {
                        return Err(de::Error::duplicate_field("type"));
                    }
                    kind = Some(map.next_value()?);
                }
                CacheField::Config => {
                    if backend.is_some() || early_config.is_some() {
                        return Err(de::Error::duplicate_field("config"));
                    }
                    match kind {
                        Some(k) => {
                            backend = Some(map.next_value_seed(ConfigSeed::<CacheBackend>(k))?)
                        }
                        None => early_config = Some(map.next_value()?),
                    }
                }
            }
        }
        let backend = match (backend, early_config, kind) {
            (Some(backend), _, _) => backend,
            (None, Some(value), kind) => {
                ConfigSeed::<CacheBackend>(kind.unwrap_or(CacheType::Memory))
                    .deserialize(value)
                    .map_err(|e| de::Error::custom(format_args!("config: {e}")))?
            }
            (None, None, Some(kind)) => ConfigSeed::<CacheBackend>(kind)
                .deserialize(de::value::UnitDeserializer::<A::Error>::new())?,
            (None, None, None) => CacheBackend::default(),
        };
        Ok(CacheConfig {
            // A zero TTL is replaced by the default when the document's defaults apply.
            ttl: ttl.unwrap_or(GoDuration(DEFAULT_CACHE_TTL)),
            backend,
        })
    }
}

impl<'de> Deserialize<'de> for CacheConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct("CacheConfig", &["ttl", "type", "config"], CacheVisitor)
    }
}

impl Serialize for CacheConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.backend {
            // What upstream writes: just the TTL.
            CacheBackend::Memory(_) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("ttl", &self.ttl)?;
                map.end()
            }
            CacheBackend::Redis(c) => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("ttl", &self.ttl)?;
                map.serialize_entry("type", &CacheType::Redis)?;
                map.serialize_entry("config", c)?;
                map.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(yaml: &str) -> Result<CacheConfig, serde_norway::Error> {
        serde_norway::from_str(yaml)
    }

    fn redis(yaml: &str) -> RedisCacheConfig {
        match cache(yaml) {
            Ok(CacheConfig {
                backend: CacheBackend::Redis(r),
                ..
            }) => r,
            other => panic!("not a Redis cache: {other:?}"),
        }
    }

    #[test]
    fn upstream_shape_is_memory() {
        let c = cache("ttl: 10m\n").expect("ttl only");
        assert_eq!(c.ttl.as_std(), Duration::from_secs(600));
        assert_eq!(c.cache_type(), CacheType::Memory);
        assert!(c.redis().is_none());
        for yaml in [
            "type: MEMORY\n",
            "type: LOCAL\nconfig: {}\n",
            "{}\n",
            "type: EMBEDDED\nconfig:\n",
        ] {
            let c = cache(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
            assert_eq!(c.backend, CacheBackend::default(), "{yaml}");
        }
        let err = cache("type: MEMORY\nconfig: {maxBytes: 3}\n").unwrap_err();
        assert!(
            err.to_string().contains("unknown field `maxBytes`"),
            "{err}"
        );
    }

    #[test]
    fn redis_fields_and_urls() {
        let r = redis(
            "ttl: 5m
type: REDIS
config:
  address: my-cache.abc.use1.cache.amazonaws.com:6379
  tls: true
  username: wisp
  authTokenFile: /etc/wisp/redis-token
  timeout: 500ms
",
        );
        assert_eq!(
            r.url(),
            "rediss://my-cache.abc.use1.cache.amazonaws.com:6379"
        );
        assert!(r.uses_tls());
        assert_eq!(r.username.as_deref(), Some("wisp"));
        assert_eq!(r.timeout(), Some(Duration::from_millis(500)));
        assert_eq!(
            r.auth_token_file.as_deref(),
            Some(Path::new("/etc/wisp/redis-token"))
        );

        let r = redis("type: REDIS\nconfig: {address: 'localhost:6379'}\n");
        assert_eq!(r.url(), "redis://localhost:6379");
        assert!(!r.uses_tls());
        assert_eq!(r.timeout(), None);

        let r = redis("type: REDIS\nconfig: {address: 'rediss://:tok3n@host:6380/2'}\n");
        assert_eq!(r.url(), "rediss://:tok3n@host:6380/2");
        assert_eq!(r.display_address(), "rediss://host:6380/2");
        assert!(r.uses_tls());
        assert!(!format!("{r:?}").contains("tok3n"), "{r:?}");

        // `config` before `type` works too.
        let r = redis("config: {address: 'h:1'}\ntype: REDIS\n");
        assert_eq!(r.address, "h:1");
    }

    #[test]
    fn elasticache_by_id_with_iam_auth() {
        let r = redis(
            "type: REDIS
config: {cacheId: wisp-cache, serverless: true, iamAuth: true, username: wisp-app, region: eu-west-1}
",
        );
        assert_eq!(r.cache_id.as_deref(), Some("wisp-cache"));
        assert!(r.serverless && r.iam_auth);
        assert_eq!(
            r.display_address(),
            "ElastiCache serverless cache wisp-cache"
        );
        let mut problems = Vec::new();
        r.problems(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");

        let mut problems = Vec::new();
        redis("type: REDIS\nconfig: {address: h, iamAuth: true, authToken: t}\n")
            .problems(&mut problems);
        assert_eq!(
            problems,
            [
                "cache.config.iamAuth needs cacheId (the token names the cache)",
                "cache.config.iamAuth needs username (the ElastiCache user with IAM auth)",
                "cache.config: iamAuth signs its own tokens; remove authToken/authTokenFile",
            ]
        );
        let mut problems = Vec::new();
        redis("type: REDIS\nconfig: {address: h, cacheId: c}\n").problems(&mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("not both"), "{problems:?}");
    }

    #[test]
    fn auth_token_inline_or_file() {
        let r = redis("type: REDIS\nconfig: {address: h, authToken: s3cret}\n");
        assert!(!format!("{r:?}").contains("s3cret"));
        assert_eq!(
            r.load_auth_token()
                .expect("token")
                .map(|t| t.expose().to_owned()),
            Some("s3cret".into())
        );

        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("token"), "from-file\n").expect("write");
        let mut r = redis("type: REDIS\nconfig: {address: h, authTokenFile: token}\n");
        r.resolve_relative_paths(dir.path());
        assert_eq!(
            r.load_auth_token()
                .expect("token")
                .map(|t| t.expose().to_owned()),
            Some("from-file".into())
        );

        let r = redis("type: REDIS\nconfig: {address: h}\n");
        assert!(r.load_auth_token().expect("none").is_none());

        let r = redis("type: REDIS\nconfig: {address: h, authTokenFile: /no/such/file}\n");
        let err = r.load_auth_token().unwrap_err();
        assert!(err.to_string().contains("/no/such/file"), "{err}");
    }

    #[test]
    fn problems_are_reported() {
        let cases = [
            ("type: REDIS\n", "address or cacheId is required"),
            (
                "type: REDIS\nconfig: {address: ''}\n",
                "address or cacheId is required",
            ),
            (
                "type: REDIS\nconfig: {address: 'redis://h', tls: true}\n",
                "use rediss://",
            ),
            (
                "type: REDIS\nconfig: {address: 'http://h'}\n",
                "unsupported scheme \"http\"",
            ),
            (
                "type: REDIS\nconfig: {address: h, authToken: a, authTokenFile: /f}\n",
                "not both",
            ),
        ];
        for (yaml, needle) in cases {
            let c = cache(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
            let mut out = Vec::new();
            c.problems(&mut out);
            assert!(
                out.iter().any(|p| p.contains(needle)),
                "{yaml}: {out:?} lacks {needle:?}"
            );
        }
        let mut out = Vec::new();
        cache("type: REDIS\nconfig: {address: 'rediss://h:6379', authToken: a}\n")
            .expect("valid")
            .problems(&mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn bad_shapes_are_rejected() {
        let err = cache("type: MEMCACHED\n").unwrap_err().to_string();
        assert!(err.contains("MEMCACHED") && err.contains("REDIS"), "{err}");
        let err = cache("ttl: 5m\ntll: 5m\n").unwrap_err().to_string();
        assert!(err.contains("unknown field `tll`"), "{err}");
        let err = cache("type: REDIS\nconfig:\n  address: h\n  pasword: x\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `pasword`"), "{err}");
        let loc = err.location().expect("location");
        assert_eq!((loc.line(), loc.column()), (4, 3), "{err}");
        let err = cache("type: REDIS\ntype: REDIS\n").unwrap_err().to_string();
        assert!(err.contains("duplicate"), "{err}");
    }

    #[test]
    fn round_trip() {
        for yaml in [
            "ttl: 5m\n",
            "ttl: 1h\ntype: REDIS\nconfig: {address: 'h:6379', tls: true, authToken: t, timeout: 1s}\n",
        ] {
            let c = cache(yaml).expect("parse");
            let text = serde_norway::to_string(&c).expect("serialize");
            assert_eq!(cache(&text).expect("reparse"), c, "{text}");
        }
        let text = serde_norway::to_string(&cache("ttl: 5m\n").expect("parse")).expect("ser");
        assert_eq!(text.trim(), "ttl: 5m0s");
    }
}
