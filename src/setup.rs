//! From flags to open stores: load the config (a file, a Secrets Manager secret, or the
//! embedded defaults), open the backends it names — embedded (SQLite, a directory, an
//! in-process cache) or AWS (DynamoDB, S3, Redis), in any mix — and make sure the
//! quickstart project exists when no config is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use wisp_config::{
    CacheBackend, CacheConfig, Config, DatastoreConfig, EncryptionKey, FilestoreConfig,
    ProjectConfig,
};
use wisp_services::auth_source::StoreKeySource;
use wisp_store::stores::Stores;
use wisp_store::{Cache, Datastore, Filestore, StoreError};
use wisp_store_aws::open::{self as aws, OpenError};
use wisp_store_aws::secrets::{self, SecretError};
use wisp_store_embedded::{LocalFilestore, SqliteDatastore};

use crate::error::CliError;

pub const QUICKSTART_PROJECT: &str = "quickstart";
pub const QUICKSTART_USER: &str = "hello-pipecd";
pub const QUICKSTART_PASSWORD: &str = "hello-pipecd";

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
}

pub struct Opened {
    pub config: Config,
    /// True when running on built-in defaults (no --config).
    pub defaults: bool,
    pub stores: Stores,
    pub config_projects: BTreeMap<String, ProjectConfig>,
}

impl Opened {
    /// The config file's projects as the console sees them: read-only, static admin
    /// only (the password hash stays server-side).
    pub fn config_projects_as_model(&self) -> Vec<wisp_proto::model::Project> {
        self.config_projects
            .values()
            .map(|p| {
                wisp_services::web::config_project(
                    &p.id,
                    &p.desc,
                    &p.static_admin.username,
                    p.static_admin.password_hash.expose(),
                )
            })
            .collect()
    }
}

/// The configuration the flags name, with relative paths resolved and `LOCAL` paths
/// defaulted under --data-dir; the second value is true for the built-in defaults.
/// Store types are not checked here (see [`Config::ensure_supported`]).
pub async fn load_config(args: &StoreArgs) -> Result<(Config, bool), CliError> {
    let (mut config, defaults) = match (&args.config, &args.config_secret) {
        (Some(path), _) => {
            let mut config = Config::from_file(path).map_err(|e| CliError::Usage(e.to_string()))?;
            if let Some(dir) = path.parent() {
                config.resolve_relative_paths(dir);
            }
            (config, false)
        }
        (None, Some(name)) => {
            let client = secrets::client(None, None).await;
            let config = secrets::load_config_from_secret(&client, name)
                .await
                .map_err(secret_error)?;
            // Relative paths in a secret are relative to the working directory.
            (config, false)
        }
        (None, None) => (Config::default_embedded(&args.data_dir), true),
    };
    config.fill_local_defaults(&args.data_dir);
    Ok((config, defaults))
}

/// The encryption key from a file or a Secrets Manager secret (at most one is given);
/// `None` when neither is.
pub async fn load_encryption_key(
    file: Option<&Path>,
    secret: Option<&str>,
) -> Result<Option<EncryptionKey>, CliError> {
    match (file, secret) {
        (Some(path), _) => EncryptionKey::from_file(path)
            .map(Some)
            .map_err(|e| CliError::Usage(format!("encryption key: {e}"))),
        (None, Some(name)) => {
            let client = secrets::client(None, None).await;
            secrets::load_encryption_key_from_secret(&client, name)
                .await
                .map(Some)
                .map_err(|e| match secret_error(e) {
                    CliError::Usage(m) => CliError::Usage(format!("encryption key: {m}")),
                    CliError::Failure(e) => {
                        CliError::Failure(anyhow::anyhow!("encryption key: {e:#}"))
                    }
                })
        }
        (None, None) => Ok(None),
    }
}

/// File name, under --data-dir, of the key `wisp serve` makes when it is given none.
pub const LOCAL_ENCRYPTION_KEY_FILE: &str = "encryption-key";

/// The key kept in the data directory, created (random, owner-only) on first use.
pub fn local_encryption_key(data_dir: &Path) -> Result<EncryptionKey, CliError> {
    let path = data_dir.join(LOCAL_ENCRYPTION_KEY_FILE);
    if !path.exists() {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            CliError::Failure(anyhow::anyhow!("create {}: {e}", data_dir.display()))
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
                file.write_all(key.as_bytes()).map_err(|e| {
                    CliError::Failure(anyhow::anyhow!("write {}: {e}", path.display()))
                })?;
            }
            // Another process made it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(CliError::Failure(anyhow::anyhow!(
                    "create {}: {e}",
                    path.display()
                )));
            }
        }
    }
    EncryptionKey::from_file(&path)
        .map_err(|e| CliError::Usage(format!("encryption key {}: {e}", path.display())))
}

/// A missing or malformed secret is the operator's to fix (exit 2); an unreachable or
/// refusing Secrets Manager is a failure (exit 1). Messages name the secret, never its
/// value.
fn secret_error(err: SecretError) -> CliError {
    match err {
        SecretError::NotFound { .. }
        | SecretError::Empty { .. }
        | SecretError::NotUtf8 { .. }
        | SecretError::Invalid(_) => CliError::Usage(err.to_string()),
        SecretError::Denied { .. }
        | SecretError::Unavailable { .. }
        | SecretError::Other { .. } => CliError::Failure(anyhow::Error::new(err)),
    }
}

fn open_error(err: OpenError) -> CliError {
    match err {
        OpenError::WrongTypes(_) | OpenError::Config(_) => CliError::Usage(err.to_string()),
        OpenError::Store {
            source: StoreError::NotFound(_) | StoreError::InvalidArgument(_),
            ..
        } => CliError::Usage(err.to_string()),
        OpenError::Store { .. } => CliError::Failure(anyhow::Error::new(err)),
    }
}

pub async fn open(args: &StoreArgs) -> Result<Opened, CliError> {
    let (config, defaults) = load_config(args).await?;
    let stores = open_stores(&config, &args.data_dir).await?;
    let config_projects = config
        .spec
        .projects
        .iter()
        .map(|p| (p.id.clone(), p.clone()))
        .collect();
    Ok(Opened {
        config,
        defaults,
        stores,
        config_projects,
    })
}

/// Opens (and, for the AWS ones, warms up) the stores `config` names, concurrently.
pub async fn open_stores(config: &Config, data_dir: &Path) -> Result<Stores, CliError> {
    config
        .ensure_supported()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let (datastore, filestore, cache) = tokio::try_join!(
        open_datastore(&config.spec.datastore, data_dir),
        open_filestore(&config.spec.filestore, data_dir),
        open_cache(&config.spec.cache),
    )?;
    Ok(Stores::new(datastore, filestore, cache))
}

async fn open_datastore(
    config: &DatastoreConfig,
    data_dir: &Path,
) -> Result<Arc<dyn Datastore>, CliError> {
    match config {
        DatastoreConfig::Local(c) => {
            let db_path = c.path_or_default(data_dir);
            if let Some(parent) = db_path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            let datastore = SqliteDatastore::open(&db_path)
                .with_context(|| format!("cannot open the database {}", db_path.display()))?;
            Ok(Arc::new(datastore))
        }
        DatastoreConfig::DynamoDb(c) => {
            Ok(Arc::new(aws::open_datastore(c).await.map_err(open_error)?))
        }
        other => Err(CliError::Usage(format!(
            "datastore type {} is not supported",
            other.store_type()
        ))),
    }
}

async fn open_filestore(
    config: &FilestoreConfig,
    data_dir: &Path,
) -> Result<Arc<dyn Filestore>, CliError> {
    match config {
        FilestoreConfig::Local(c) => {
            let files_dir = c.dir_or_default(data_dir);
            let filestore = LocalFilestore::open(&files_dir)
                .with_context(|| format!("cannot open the filestore {}", files_dir.display()))?;
            Ok(Arc::new(filestore))
        }
        FilestoreConfig::S3(c) => Ok(Arc::new(aws::open_filestore(c).await.map_err(open_error)?)),
        other => Err(CliError::Usage(format!(
            "filestore type {} is not supported",
            other.store_type()
        ))),
    }
}

async fn open_cache(config: &CacheConfig) -> Result<Arc<dyn Cache>, CliError> {
    aws::open_cache(config).await.map_err(open_error)
}

impl Opened {
    pub async fn project_exists(&self, id: &str) -> Result<bool, StoreError> {
        if self.config_projects.contains_key(id) {
            return Ok(true);
        }
        match self.stores.projects.get_any(id).await {
            Ok(_) => Ok(true),
            Err(StoreError::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// With no config at all, project `quickstart` (static admin hello-pipecd /
    /// hello-pipecd) exists, as in upstream's quickstart.
    pub async fn ensure_quickstart_project(&self) -> Result<(), CliError> {
        if !self.defaults {
            return Ok(());
        }
        let exists = self.project_exists(QUICKSTART_PROJECT).await.map_err(|e| {
            CliError::Failure(anyhow::anyhow!("look up the quickstart project: {e}"))
        })?;
        if exists {
            return Ok(());
        }
        let created = wisp_services::ops::projects::create_project(
            &self.stores.projects,
            wisp_services::ops::projects::NewProject {
                id: QUICKSTART_PROJECT.into(),
                desc: "Quickstart project".into(),
                admin_username: QUICKSTART_USER.into(),
                admin_password: QUICKSTART_PASSWORD.into(),
                shared_sso_name: String::new(),
            },
            false,
        )
        .await;
        match created {
            Ok(_) => {
                tracing::info!("created project quickstart (static admin hello-pipecd)");
                Ok(())
            }
            // Another process created it between our check and our write.
            Err(wisp_services::ServiceError::AlreadyExists(_)) => Ok(()),
            Err(e) => Err(CliError::Failure(anyhow::anyhow!(
                "create the quickstart project: {e}"
            ))),
        }
    }

    pub fn key_source(&self) -> StoreKeySource {
        StoreKeySource::new(self.stores.clone(), self.config_projects.keys().cloned())
    }

    /// The stores in one line, for the log (no credentials).
    pub fn describe(&self) -> String {
        let spec = &self.config.spec;
        let filestore = self.describe_filestore();
        let datastore = match &spec.datastore {
            DatastoreConfig::Local(c) => {
                format!("sqlite:{}", c.path.clone().unwrap_or_default().display())
            }
            DatastoreConfig::DynamoDb(c) => match &c.endpoint {
                Some(endpoint) => format!("dynamodb:{}@{endpoint}", c.table),
                None => format!("dynamodb:{}", c.table),
            },
            other => other.store_type().to_string(),
        };
        let cache = match &spec.cache.backend {
            CacheBackend::Memory(_) => "cache:memory".to_string(),
            CacheBackend::Redis(c) => format!("cache:{}", c.display_address()),
        };
        format!("{datastore} {filestore} {cache}")
    }

    /// The filestore in a few words (no credentials).
    pub fn describe_filestore(&self) -> String {
        match &self.config.spec.filestore {
            FilestoreConfig::Local(c) => {
                format!("dir:{}", c.dir.clone().unwrap_or_default().display())
            }
            FilestoreConfig::S3(c) => {
                let at = c
                    .endpoint
                    .as_deref()
                    .map(|e| format!("@{e}"))
                    .unwrap_or_default();
                format!(
                    "s3://{}/{}{at}",
                    c.bucket,
                    c.prefix.as_deref().unwrap_or_default()
                )
            }
            other => other.store_type().to_string(),
        }
    }
}
