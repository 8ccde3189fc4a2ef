//! A function's init: configuration and encryption key from Secrets Manager (or files,
//! for local runs), the stores it names opened and warmed, and how long that took.
//!
//! | variable | what |
//! |---|---|
//! | `WISP_CONFIG_SECRET` | name or ARN of the secret holding the `control-plane-config.yaml` |
//! | `WISP_CONFIG_FILE` | a config file instead (local runs, `cargo lambda watch`) |
//! | `WISP_ENCRYPTION_KEY_SECRET` | name or ARN of the secret holding the encryption key (optional) |
//! | `WISP_ENCRYPTION_KEY_FILE` | a key file instead (optional) |
//!
//! The AWS SDK reads its own environment (`AWS_REGION`, `AWS_ENDPOINT_URL`, ...).
//! Everything here runs once per instance, during the Lambda init phase.

use std::time::{Duration, Instant};

use wisp_config::{Config, EncryptionKey};
use wisp_services::auth_source::StoreKeySource;
use wisp_store::stores::Stores;

pub const CONFIG_SECRET_ENV: &str = "WISP_CONFIG_SECRET";
pub const CONFIG_FILE_ENV: &str = "WISP_CONFIG_FILE";
pub const ENCRYPTION_KEY_SECRET_ENV: &str = "WISP_ENCRYPTION_KEY_SECRET";
pub const ENCRYPTION_KEY_FILE_ENV: &str = "WISP_ENCRYPTION_KEY_FILE";

/// Why a function could not start. Messages name the variable, secret or file at fault,
/// never a secret's value.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error(
        "set {CONFIG_SECRET_ENV} (a Secrets Manager secret) or {CONFIG_FILE_ENV} (a file) to the control-plane configuration"
    )]
    NoConfig,
    #[error("{0}")]
    Secret(#[from] wisp_store_aws::secrets::SecretError),
    #[error("{0}")]
    Config(#[from] wisp_config::ConfigError),
    #[error("open the stores: {0}")]
    Stores(String),
    #[error(
        "set {ENCRYPTION_KEY_SECRET_ENV} (a Secrets Manager secret) or {ENCRYPTION_KEY_FILE_ENV} (a file): console sessions are signed with the encryption key"
    )]
    NoEncryptionKey,
}

/// What a function's main needs after init.
pub struct Boot {
    pub function: &'static str,
    pub config: Config,
    /// Present when `WISP_ENCRYPTION_KEY_SECRET` or `WISP_ENCRYPTION_KEY_FILE` is set.
    pub encryption_key: Option<EncryptionKey>,
    pub stores: Stores,
    started: Instant,
    config_time: Duration,
    stores_time: Duration,
}

impl std::fmt::Debug for Boot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Boot").finish_non_exhaustive()
    }
}

impl Boot {
    /// Loads the configuration (and the key, if configured) and opens the stores. A
    /// failure is logged (the function then exits and Lambda reports an init error).
    pub async fn load(function: &'static str) -> Result<Boot, BootError> {
        Boot::try_load(function).await.inspect_err(|e| {
            tracing::error!(function, error = %e, "init failed");
        })
    }

    async fn try_load(function: &'static str) -> Result<Boot, BootError> {
        let started = Instant::now();
        let (config, encryption_key) = load_config_and_key().await?;
        let config_time = started.elapsed();
        let opened = Instant::now();
        let stores = wisp_store_aws::open::open_stores(&config)
            .await
            .map_err(|e| BootError::Stores(e.to_string()))?;
        let stores_time = opened.elapsed();
        Ok(Boot {
            function,
            config,
            encryption_key,
            stores,
            started,
            config_time,
            stores_time,
        })
    }

    /// The credential source of the piped and API-key verifiers.
    pub fn key_source(&self) -> StoreKeySource {
        StoreKeySource::new(
            self.stores.clone(),
            self.config.spec.projects.iter().map(|p| p.id.clone()),
        )
    }

    /// The console's address (`spec.address`), for links the services hand out.
    pub fn web_base_url(&self) -> String {
        self.config.spec.address.clone().unwrap_or_default()
    }

    /// What the scheduled jobs take from the configuration.
    pub fn job_settings(&self) -> wisp_jobs::Settings {
        let insight = &self.config.spec.insight_collector;
        wisp_jobs::Settings {
            config_projects: self
                .config
                .spec
                .projects
                .iter()
                .map(|p| p.id.clone())
                .collect(),
            insight_applications: insight.application.enabled,
            insight_deployments: insight.deployment.enabled,
            insight_chunk_max_count: match insight.deployment.chunk_max_count {
                0 => wisp_config::DEFAULT_DEPLOYMENT_CHUNK_MAX_COUNT as usize,
                n => n as usize,
            },
        }
    }

    /// The WebService over this function's stores, with the config's projects.
    #[cfg(feature = "web")]
    pub fn web_api(&self) -> wisp_services::web::WebApi {
        let projects = self
            .config
            .spec
            .projects
            .iter()
            .map(|p| {
                wisp_services::web::config_project(
                    &p.id,
                    &p.desc,
                    &p.static_admin.username,
                    p.static_admin.password_hash.expose(),
                )
            })
            .collect();
        // Every WebService answer of a function goes through the ALB.
        let web = wisp_services::web::WebApi::new(self.stores.clone(), projects)
            .with_response_budget(wisp_services::web::ResponseBudget {
                max_compressed_bytes: crate::limits::WEB_RESPONSE_BUDGET,
            });
        match &self.encryption_key {
            Some(key) => web.with_sso_key(*key.aes_key()),
            None => web,
        }
    }

    /// The AES key that opens the projects' stored SSO secrets.
    #[cfg(feature = "web")]
    pub fn sso_key(&self) -> Option<[u8; 32]> {
        self.encryption_key.as_ref().map(|k| *k.aes_key())
    }

    /// Console sessions are signed with the encryption key, which the console's
    /// functions therefore require.
    #[cfg(feature = "web")]
    pub fn session_signer(&self) -> Result<wisp_auth::SessionSigner, BootError> {
        match &self.encryption_key {
            Some(key) => Ok(wisp_auth::SessionSigner::new(key.bytes())),
            None => Err(BootError::NoEncryptionKey),
        }
    }

    /// Logs the init timing; call right before the runtime loop.
    pub fn ready(&self) {
        tracing::info!(
            function = self.function,
            init_ms = ms(self.started.elapsed()),
            config_ms = ms(self.config_time),
            stores_ms = ms(self.stores_time),
            "init complete"
        );
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Both from Secrets Manager (concurrently) when named there; files otherwise.
async fn load_config_and_key() -> Result<(Config, Option<EncryptionKey>), BootError> {
    let config_secret = env(CONFIG_SECRET_ENV);
    let key_secret = env(ENCRYPTION_KEY_SECRET_ENV);
    let client = if config_secret.is_some() || key_secret.is_some() {
        Some(wisp_store_aws::secrets::client(None, None).await)
    } else {
        None
    };
    let config = async {
        match (&config_secret, &client) {
            (Some(name), Some(client)) => {
                Ok(wisp_store_aws::secrets::load_config_from_secret(client, name).await?)
            }
            _ => match env(CONFIG_FILE_ENV) {
                Some(path) => {
                    let mut config = Config::from_file(&path)?;
                    if let Some(dir) = std::path::Path::new(&path).parent() {
                        config.resolve_relative_paths(dir);
                    }
                    Ok(config)
                }
                None => Err(BootError::NoConfig),
            },
        }
    };
    let key = async {
        match (&key_secret, &client) {
            (Some(name), Some(client)) => Ok(Some(
                wisp_store_aws::secrets::load_encryption_key_from_secret(client, name).await?,
            )),
            _ => match env(ENCRYPTION_KEY_FILE_ENV) {
                Some(path) => Ok(Some(EncryptionKey::from_file(path)?)),
                None => Ok(None),
            },
        }
    };
    let (config, key): (
        Result<Config, BootError>,
        Result<Option<EncryptionKey>, BootError>,
    ) = tokio::join!(config, key);
    let config = config?;
    config.ensure_supported()?;
    Ok((config, key?))
}
