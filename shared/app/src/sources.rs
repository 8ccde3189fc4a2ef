//! Where the configuration and the encryption key come from, and the one loader that
//! reads them. `wisp serve` and the admin commands fill [`Sources`] from their flags; a
//! Lambda function from its environment ([`Sources::from_lambda_env`]).
//!
//! | Lambda variable | what |
//! |---|---|
//! | `WISP_CONFIG_SECRET` | name or ARN of the secret holding the `control-plane-config.yaml` |
//! | `WISP_CONFIG_FILE` | a config file instead (local runs, `cargo lambda watch`) |
//! | `WISP_ENCRYPTION_KEY_SECRET` | name or ARN of the secret holding the encryption key (optional) |
//! | `WISP_ENCRYPTION_KEY_FILE` | a key file instead (optional) |
//! | `WISP_CACHE` | `MEMORY`: this function keeps its cache in process, whatever cache the config names |
//!
//! `WISP_CACHE=MEMORY` is for a function that cannot reach the config's Redis (the
//! Terraform module and the SAM template keep the http function out of the VPC, so that
//! its SSO exchange reaches GitHub or the OIDC provider). Without it such a function would
//! wait out the Redis timeout on every cache call and then count nothing: the login
//! throttle would let every attempt through. In process it counts per instance, as in
//! every deployment without Redis.

use std::path::{Path, PathBuf};

use wisp_config::{CacheBackend, Config, EncryptionKey, MemoryCacheConfig};

use crate::error::AppError;

pub const CONFIG_SECRET_ENV: &str = "WISP_CONFIG_SECRET";
pub const CONFIG_FILE_ENV: &str = "WISP_CONFIG_FILE";
pub const ENCRYPTION_KEY_SECRET_ENV: &str = "WISP_ENCRYPTION_KEY_SECRET";
pub const ENCRYPTION_KEY_FILE_ENV: &str = "WISP_ENCRYPTION_KEY_FILE";
pub const CACHE_ENV: &str = "WISP_CACHE";

/// File name, under the data directory, of the key made when none is given
/// ([`KeySource::DataDir`]).
pub const LOCAL_ENCRYPTION_KEY_FILE: &str = "encryption-key";

/// Where the control-plane configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// Built-in defaults: embedded stores in the data directory, and the quickstart
    /// project.
    Defaults,
    /// An upstream-format `control-plane-config.yaml`; relative paths in it are relative
    /// to its directory.
    File(PathBuf),
    /// The same YAML in an AWS Secrets Manager secret (name or ARN); relative paths in it
    /// are relative to the working directory.
    Secret(String),
}

/// Where the encryption key (console sessions, stored SSO secrets) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// No key: what needs one (the console) refuses to start.
    None,
    /// A file of at least 32 bytes.
    File(PathBuf),
    /// An AWS Secrets Manager secret holding what the file would.
    Secret(String),
    /// The key kept in the data directory, created (random, owner-only) on first use, so
    /// that console logins of one machine survive a restart.
    DataDir,
}

/// Everything the loader reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    pub config: ConfigSource,
    pub key: KeySource,
    /// Where `LOCAL` stores without a path live, and the [`KeySource::DataDir`] key.
    pub data_dir: PathBuf,
    /// The in-process cache whatever the configuration names (`WISP_CACHE=MEMORY`).
    pub in_process_cache: bool,
}

impl Sources {
    /// A Lambda function's sources, from the variables in the module's table. Secrets
    /// take precedence over files; a function needs a configuration.
    pub fn from_lambda_env() -> Result<Sources, AppError> {
        let config = match (env(CONFIG_SECRET_ENV), env(CONFIG_FILE_ENV)) {
            (Some(name), _) => ConfigSource::Secret(name),
            (None, Some(path)) => ConfigSource::File(path.into()),
            (None, None) => return Err(AppError::NoConfig),
        };
        let key = match (env(ENCRYPTION_KEY_SECRET_ENV), env(ENCRYPTION_KEY_FILE_ENV)) {
            (Some(name), _) => KeySource::Secret(name),
            (None, Some(path)) => KeySource::File(path.into()),
            (None, None) => KeySource::None,
        };
        let in_process_cache = match env(CACHE_ENV) {
            None => false,
            Some(v) if v.trim().eq_ignore_ascii_case("MEMORY") => true,
            Some(v) => {
                return Err(AppError::Unsupported(format!(
                    "{CACHE_ENV}={v}: only MEMORY (the in-process cache) overrides the config's cache"
                )));
            }
        };
        // Lambda's only writable directory; the AWS stores do not use it.
        Ok(Sources {
            config,
            key,
            data_dir: PathBuf::from("/tmp/wisp"),
            in_process_cache,
        })
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// What the loader read.
#[derive(Debug)]
pub struct Loaded {
    /// Relative paths resolved, `LOCAL` paths defaulted under the data directory, store
    /// types checked.
    pub config: Config,
    /// True for [`ConfigSource::Defaults`].
    pub defaults: bool,
    pub encryption_key: Option<EncryptionKey>,
}

/// Reads the configuration and the key, concurrently when both are secrets (one Secrets
/// Manager client serves both).
pub async fn load(sources: &Sources) -> Result<Loaded, AppError> {
    #[cfg(feature = "aws")]
    let client = match (&sources.config, &sources.key) {
        (ConfigSource::Secret(_), _) | (_, KeySource::Secret(_)) => {
            Some(wisp_store_aws::secrets::client(None, None).await)
        }
        _ => None,
    };
    #[cfg(not(feature = "aws"))]
    let client: Option<()> = None;
    let (config, key) = tokio::join!(
        load_config(sources, client.as_ref()),
        load_key(sources, client.as_ref())
    );
    let (mut config, defaults) = config?;
    if sources.in_process_cache {
        config.spec.cache.backend = CacheBackend::Memory(MemoryCacheConfig::default());
    }
    config.fill_local_defaults(&sources.data_dir);
    config.ensure_supported()?;
    Ok(Loaded {
        config,
        defaults,
        encryption_key: key?,
    })
}

#[cfg(feature = "aws")]
type SecretsClient = wisp_store_aws::secrets::Client;
#[cfg(not(feature = "aws"))]
type SecretsClient = ();

async fn load_config(
    sources: &Sources,
    client: Option<&SecretsClient>,
) -> Result<(Config, bool), AppError> {
    match &sources.config {
        ConfigSource::Defaults => Ok((Config::default_embedded(&sources.data_dir), true)),
        ConfigSource::File(path) => {
            let mut config = Config::from_file(path)?;
            if let Some(dir) = path.parent() {
                config.resolve_relative_paths(dir);
            }
            Ok((config, false))
        }
        ConfigSource::Secret(name) => {
            let config = secret_config(client, name).await?;
            Ok((config, false))
        }
    }
}

async fn load_key(
    sources: &Sources,
    client: Option<&SecretsClient>,
) -> Result<Option<EncryptionKey>, AppError> {
    match &sources.key {
        KeySource::None => Ok(None),
        KeySource::File(path) => Ok(Some(EncryptionKey::from_file(path)?)),
        KeySource::Secret(name) => secret_key(client, name).await.map(Some),
        KeySource::DataDir => local_encryption_key(&sources.data_dir).map(Some),
    }
}

#[cfg(feature = "aws")]
async fn secret_config(client: Option<&SecretsClient>, name: &str) -> Result<Config, AppError> {
    let client = client.ok_or_else(|| AppError::Unsupported("no Secrets Manager client".into()))?;
    Ok(wisp_store_aws::secrets::load_config_from_secret(client, name).await?)
}

#[cfg(feature = "aws")]
async fn secret_key(client: Option<&SecretsClient>, name: &str) -> Result<EncryptionKey, AppError> {
    let client = client.ok_or_else(|| AppError::Unsupported("no Secrets Manager client".into()))?;
    Ok(wisp_store_aws::secrets::load_encryption_key_from_secret(client, name).await?)
}

#[cfg(not(feature = "aws"))]
async fn secret_config(_: Option<&SecretsClient>, name: &str) -> Result<Config, AppError> {
    Err(AppError::Unsupported(format!(
        "secret {name:?}: this build does not read AWS Secrets Manager"
    )))
}

#[cfg(not(feature = "aws"))]
async fn secret_key(_: Option<&SecretsClient>, name: &str) -> Result<EncryptionKey, AppError> {
    Err(AppError::Unsupported(format!(
        "secret {name:?}: this build does not read AWS Secrets Manager"
    )))
}

/// The key kept in `data_dir`, created (random, owner-only) on first use.
pub fn local_encryption_key(data_dir: &Path) -> Result<EncryptionKey, AppError> {
    let path = data_dir.join(LOCAL_ENCRYPTION_KEY_FILE);
    if !path.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(data_dir).map_err(|source| AppError::Io {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let key = wisp_auth::keys::generate_random_string(64);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&path) {
            Ok(mut file) => {
                use std::io::Write;
                file.write_all(key.as_bytes())
                    .map_err(|source| AppError::Io {
                        path: path.clone(),
                        source,
                    })?;
            }
            // Another process made it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(AppError::Io { path, source }),
        }
    }
    Ok(EncryptionKey::from_file(&path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn defaults_are_embedded_in_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let sources = Sources {
            config: ConfigSource::Defaults,
            key: KeySource::DataDir,
            data_dir: dir.path().to_path_buf(),
            in_process_cache: false,
        };
        let loaded = load(&sources).await.unwrap();
        assert!(loaded.defaults);
        let first = loaded.encryption_key.unwrap();
        // The same key on the next start.
        let again = load(&sources).await.unwrap().encryption_key.unwrap();
        assert_eq!(first.bytes(), again.bytes());
    }

    #[tokio::test]
    async fn a_missing_file_is_the_operators_to_fix() {
        let sources = Sources {
            config: ConfigSource::File("/nonexistent/wisp.yaml".into()),
            key: KeySource::None,
            data_dir: "/tmp/unused".into(),
            in_process_cache: false,
        };
        let err = load(&sources).await.unwrap_err();
        assert!(err.is_operator_error(), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/wisp.yaml"), "{err}");
    }

    #[tokio::test]
    async fn an_unsupported_store_is_refused_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore: {type: MYSQL, config: {url: x}}\n",
        )
        .unwrap();
        let sources = Sources {
            config: ConfigSource::File(path),
            key: KeySource::None,
            data_dir: dir.path().to_path_buf(),
            in_process_cache: false,
        };
        let err = load(&sources).await.unwrap_err();
        assert!(matches!(err, AppError::Config(_)), "{err:?}");
        assert!(err.is_operator_error());
    }

    #[tokio::test]
    async fn in_process_cache_replaces_the_configs_redis() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  cache:\n    type: REDIS\n    config:\n      address: cache.example:6379\n",
        )
        .unwrap();
        let mut sources = Sources {
            config: ConfigSource::File(path),
            key: KeySource::None,
            data_dir: dir.path().to_path_buf(),
            in_process_cache: false,
        };
        let named = load(&sources).await.unwrap().config;
        assert!(matches!(named.spec.cache.backend, CacheBackend::Redis(_)));
        sources.in_process_cache = true;
        let overridden = load(&sources).await.unwrap().config;
        assert!(matches!(
            overridden.spec.cache.backend,
            CacheBackend::Memory(_)
        ));
    }
}
