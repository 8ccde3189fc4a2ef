//! Wisp's control-plane configuration: upstream PipeCD's `control-plane-config.yaml`
//! (plus Wisp's store types: embedded `LOCAL`, `DYNAMODB`, and a `MEMORY`/`REDIS` cache)
//! and the encryption key file.

mod cache;
mod duration;
mod error;
pub mod jobs;
mod releases;
mod secret;
mod spec;
mod sso;
mod store;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use cache::{CacheBackend, CacheConfig, CacheType, MemoryCacheConfig, RedisCacheConfig};
pub use duration::{DurationParseError, GoDuration, format_go_duration, parse_go_duration};
pub use error::ConfigError;
pub use jobs::JobsConfig;
pub use releases::{DeprecatedNote, PipedReleasesConfig, UPSTREAM_RELEASE};
pub use secret::{EncryptionKey, SecretString};
pub use spec::{
    AuditConfig, ControlPlaneSpec, DEFAULT_APPLICATION_INSIGHT_SCHEDULE, DEFAULT_CACHE_TTL,
    DEFAULT_DEPLOYMENT_CHUNK_MAX_COUNT, DEFAULT_DEPLOYMENT_INSIGHT_SCHEDULE,
    InsightApplicationCollector, InsightCollectorConfig, InsightDeploymentCollector, ProjectConfig,
    StaticAdmin,
};
pub use sso::{
    DEFAULT_SSO_SESSION_TTL, GithubSsoConfig, GoogleSsoConfig, OidcSsoConfig, SharedSsoConfig,
    SsoProvider,
};
pub use store::{
    DatastoreConfig, DatastoreType, DynamoDbConfig, FilestoreConfig, FilestoreType,
    FirestoreConfig, GcsConfig, LocalDatastoreConfig, LocalFilestoreConfig, MinioConfig,
    MySqlConfig, S3Config, Support,
};

/// The only `apiVersion` accepted.
pub const API_VERSION: &str = "pipecd.dev/v1beta1";
/// The only `kind` accepted.
pub const KIND: &str = "ControlPlane";
/// File name of the SQLite database inside the data directory.
pub const DEFAULT_DB_FILE_NAME: &str = "wisp.db";
/// Name of the local filestore directory inside the data directory.
pub const DEFAULT_FILESTORE_DIR_NAME: &str = "filestore";

/// A loaded control-plane configuration.
///
/// Load a file with [`Config::from_file`] (or [`Config::from_yaml_str`]); with no file,
/// `wisp serve` uses [`Config::default_embedded`]. Loading rejects unknown fields (the
/// message names the field, line and column), a wrong `apiVersion`/`kind`, and
/// inconsistent values. Upstream-only backends (`MYSQL`, `FIRESTORE`, `GCS`) load fine;
/// [`Config::ensure_supported`] is what refuses them before serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where it came from (file path or the name given to `from_yaml_str`); used to
    /// prefix error messages.
    pub source: String,
    pub spec: ControlPlaneSpec,
}

/// Only `apiVersion` and `kind`, read first so that a wrong document gets a clear error
/// rather than a list of unknown fields.
#[derive(Deserialize)]
#[serde(expecting = "a control-plane configuration mapping (apiVersion, kind, spec)")]
struct Header {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a control-plane configuration mapping (apiVersion, kind, spec)"
)]
struct Document {
    #[serde(rename = "apiVersion")]
    _api_version: String,
    #[serde(rename = "kind")]
    _kind: String,
    #[serde(default, deserialize_with = "spec::null_as_default")]
    spec: ControlPlaneSpec,
}

#[derive(Serialize)]
struct DocumentRef<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    spec: &'a ControlPlaneSpec,
}

impl Config {
    /// Reads and validates a configuration file. Errors are prefixed with `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml_str(&text, &path.display().to_string())
    }

    /// Parses and validates a configuration; `source_name` prefixes error messages.
    ///
    /// Upstream defaults are applied (cache TTL 5m, insight collector schedules, ...).
    /// Unsupported store types are *not* rejected here; see [`Config::ensure_supported`].
    pub fn from_yaml_str(yaml: &str, source_name: &str) -> Result<Self, ConfigError> {
        let header: Option<Header> = serde_norway::from_str(yaml)
            .map_err(|e| ConfigError::from_yaml(source_name, &e, Some(yaml)))?;
        let Some(header) = header else {
            return Err(ConfigError::Parse {
                source_name: source_name.to_owned(),
                detail: format!(
                    "the document is empty, expected `apiVersion: {API_VERSION}`, `kind: {KIND}` and `spec`"
                ),
                line: None,
                column: None,
            });
        };
        if header.kind.as_deref() != Some(KIND) {
            return Err(ConfigError::Kind {
                source_name: source_name.to_owned(),
                found: header.kind,
            });
        }
        if header.api_version.as_deref() != Some(API_VERSION) {
            return Err(ConfigError::ApiVersion {
                source_name: source_name.to_owned(),
                found: header.api_version,
            });
        }

        let doc: Document = serde_norway::from_str(yaml)
            .map_err(|e| ConfigError::from_yaml(source_name, &e, Some(yaml)))?;
        let mut config = Config {
            source: source_name.to_owned(),
            spec: doc.spec,
        };
        config.spec.apply_defaults();
        config.validate()?;
        Ok(config)
    }

    /// What `wisp serve` runs with when no configuration is given: SQLite at
    /// `<data_dir>/wisp.db`, files under `<data_dir>/filestore`, in-process cache, and no
    /// configuration-defined projects.
    pub fn default_embedded(data_dir: impl AsRef<Path>) -> Self {
        let data_dir = data_dir.as_ref();
        let mut config = Config {
            source: "built-in defaults".to_owned(),
            spec: ControlPlaneSpec::default(),
        };
        config.fill_local_defaults(data_dir);
        config
    }

    /// Checks consistency: non-empty and unique project ids and shared SSO names, static
    /// admin credentials present, SSO provider sections present, required store fields.
    /// All problems are reported at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let problems = self.spec.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid {
                source_name: self.source.clone(),
                problems,
            })
        }
    }

    /// Fails with [`ConfigError::Unsupported`] when the datastore or filestore type is one
    /// Wisp cannot run (upstream's `MYSQL`, `FIRESTORE`, `GCS`).
    /// Wisp runs `LOCAL` and `DYNAMODB` datastores, `LOCAL`, `S3` and `MINIO` filestores, and
    /// `MEMORY` and `REDIS` caches, in any combination. Call it before serving; tools that
    /// only read a configuration (e.g. to migrate from it) need not.
    pub fn ensure_supported(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let datastore = self.spec.datastore.store_type();
        match datastore.support() {
            Support::Supported => {}
            Support::NotYet => problems.push(format!(
                "datastore type {datastore} is not supported by Wisp yet (it is only parsed); \
                 use `type: LOCAL` (embedded SQLite) or `type: DYNAMODB`"
            )),
            Support::Unsupported => problems.push(format!(
                "datastore type {datastore} is an upstream PipeCD backend that Wisp does not \
                 support; use `type: LOCAL` (embedded SQLite) or `type: DYNAMODB`"
            )),
        }
        let filestore = self.spec.filestore.store_type();
        match filestore.support() {
            Support::Supported => {}
            Support::NotYet => problems.push(format!(
                "filestore type {filestore} is not supported by Wisp yet (it is only parsed); \
                 use `type: LOCAL` (a local directory) or `type: S3` (with `endpoint` for an \
                 S3-compatible store)"
            )),
            Support::Unsupported => problems.push(format!(
                "filestore type {filestore} is an upstream PipeCD backend that Wisp does not \
                 support; use `type: LOCAL` (a local directory) or `type: S3`"
            )),
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Unsupported(format!(
                "{}: {}",
                self.source,
                problems.join("; ")
            )))
        }
    }

    /// Makes relative paths of `LOCAL` stores (and the MinIO key files and the Redis
    /// `authTokenFile`) absolute
    /// against `base_dir` (typically the directory holding the configuration file). Unset
    /// paths stay unset.
    pub fn resolve_relative_paths(&mut self, base_dir: &Path) {
        let resolve = |p: &mut Option<PathBuf>| {
            if let Some(path) = p.as_mut()
                && path.is_relative()
            {
                *path = base_dir.join(&*path);
            }
        };
        if let DatastoreConfig::Local(c) = &mut self.spec.datastore {
            resolve(&mut c.path);
        }
        match &mut self.spec.filestore {
            FilestoreConfig::Local(c) => resolve(&mut c.dir),
            FilestoreConfig::Minio(c) => {
                resolve(&mut c.access_key_file);
                resolve(&mut c.secret_key_file);
            }
            FilestoreConfig::S3(_) | FilestoreConfig::Gcs(_) => {}
        }
        if let CacheBackend::Redis(c) = &mut self.spec.cache.backend {
            c.resolve_relative_paths(base_dir);
        }
    }

    /// Sets unset `LOCAL` paths to their defaults under `data_dir`
    /// (`<data_dir>/wisp.db`, `<data_dir>/filestore`).
    pub fn fill_local_defaults(&mut self, data_dir: &Path) {
        if let DatastoreConfig::Local(c) = &mut self.spec.datastore {
            c.path = Some(c.path_or_default(data_dir));
        }
        if let FilestoreConfig::Local(c) = &mut self.spec.filestore {
            c.dir = Some(c.dir_or_default(data_dir));
        }
    }

    /// Writes the configuration back as YAML (secrets included).
    pub fn to_yaml_string(&self) -> Result<String, ConfigError> {
        serde_norway::to_string(&DocumentRef {
            api_version: API_VERSION,
            kind: KIND,
            spec: &self.spec,
        })
        .map_err(|e| ConfigError::from_yaml(&self.source, &e, None))
    }
}

#[cfg(test)]
mod tests;
