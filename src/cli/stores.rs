//! Where the state lives: the flags every command shares, turned into the composition
//! root's [`Sources`] and opened by [`wisp_app::App::open`].

use std::path::PathBuf;

use clap::Args;
use wisp_app::{App, ConfigSource, KeySource, Sources};

use crate::error::CliError;

/// Where the state lives; `wisp serve` and every admin command take the same flags.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Upstream-format control-plane-config.yaml. Without it (and without
    /// --config-secret), embedded stores in --data-dir.
    #[arg(long, env = "WISP_CONFIG", conflicts_with = "config_secret")]
    pub config: Option<PathBuf>,
    /// Read the whole control-plane config (the same YAML) from this AWS Secrets Manager
    /// secret (name or ARN) instead of a file. Credentials, region and endpoint come from
    /// the standard AWS environment (`AWS_REGION`, `AWS_ENDPOINT_URL_SECRETS_MANAGER`, ...).
    #[arg(long, env = "WISP_CONFIG_SECRET", value_name = "NAME")]
    pub config_secret: Option<String>,
    /// Directory of the embedded stores (SQLite database and files).
    #[arg(long, env = "WISP_DATA_DIR", default_value = ".wisp")]
    pub data_dir: PathBuf,
}

impl StoreArgs {
    /// Whether a configuration (file or secret) was given.
    pub fn has_config(&self) -> bool {
        self.config.is_some() || self.config_secret.is_some()
    }

    /// The sources these flags name, with the key from `key`.
    pub fn sources(&self, key: KeySource) -> Sources {
        let config = match (&self.config, &self.config_secret) {
            (Some(path), _) => ConfigSource::File(path.clone()),
            (None, Some(name)) => ConfigSource::Secret(name.clone()),
            (None, None) => ConfigSource::Defaults,
        };
        Sources {
            config,
            key,
            data_dir: self.data_dir.clone(),
            in_process_cache: false,
        }
    }

    /// The configuration and stores, for an admin command (no encryption key).
    pub async fn open(&self) -> Result<App, CliError> {
        Ok(App::open(&self.sources(KeySource::None)).await?)
    }
}
