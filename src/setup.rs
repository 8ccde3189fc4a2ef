//! From flags to open stores: load the config (or the embedded defaults), open the
//! backends it names, and make sure the quickstart project exists when no config is given.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use wisp_config::{Config, DatastoreConfig, FilestoreConfig, ProjectConfig};
use wisp_proto::model;
use wisp_services::auth_source::StoreKeySource;
use wisp_store::StoreError;
use wisp_store::stores::Stores;
use wisp_store_embedded::{LocalFilestore, MemoryCache, SqliteDatastore};

use crate::cli::CliError;

pub const QUICKSTART_PROJECT: &str = "quickstart";
pub const QUICKSTART_USER: &str = "hello-pipecd";
pub const QUICKSTART_PASSWORD: &str = "hello-pipecd";

/// Where the state lives; `wisp serve` and every admin command take the same flags.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Upstream-format control-plane-config.yaml. Without it, embedded stores in --data-dir.
    #[arg(long, env = "WISP_CONFIG")]
    pub config: Option<PathBuf>,
    /// Directory of the embedded stores (SQLite database and files).
    #[arg(long, env = "WISP_DATA_DIR", default_value = ".wisp")]
    pub data_dir: PathBuf,
}

pub struct Opened {
    pub config: Config,
    /// True when running on built-in defaults (no --config).
    pub defaults: bool,
    pub stores: Stores,
    pub config_projects: BTreeMap<String, ProjectConfig>,
}

pub async fn open(args: &StoreArgs) -> Result<Opened, CliError> {
    let (mut config, defaults) = match &args.config {
        Some(path) => {
            let mut config =
                Config::from_file(path).map_err(|e| CliError::Usage(e.to_string()))?;
            if let Some(dir) = path.parent() {
                config.resolve_relative_paths(dir);
            }
            (config, false)
        }
        None => (Config::default_embedded(&args.data_dir), true),
    };
    config.fill_local_defaults(&args.data_dir);
    config.ensure_supported().map_err(|e| CliError::Usage(e.to_string()))?;

    let db_path = match &config.spec.datastore {
        DatastoreConfig::Local(c) => c.path_or_default(&args.data_dir),
        _ => return Err(CliError::Usage("only the LOCAL datastore is supported".into())),
    };
    let files_dir = match &config.spec.filestore {
        FilestoreConfig::Local(c) => c.dir_or_default(&args.data_dir),
        _ => return Err(CliError::Usage("only the LOCAL filestore is supported".into())),
    };
    if let Some(parent) = db_path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let datastore = SqliteDatastore::open(&db_path)
        .with_context(|| format!("cannot open the database {}", db_path.display()))?;
    let filestore = LocalFilestore::open(&files_dir)
        .with_context(|| format!("cannot open the filestore {}", files_dir.display()))?;
    let cache = MemoryCache::new(
        wisp_store_embedded::cache::DEFAULT_MAX_ENTRIES,
        wisp_store_embedded::cache::DEFAULT_MAX_BYTES,
    );
    let stores = Stores::new(Arc::new(datastore), Arc::new(filestore), Arc::new(cache));
    let config_projects =
        config.spec.projects.iter().map(|p| (p.id.clone(), p.clone())).collect();
    Ok(Opened { config, defaults, stores, config_projects })
}

/// A datastore project with a static admin whose password is bcrypt-hashed.
pub fn new_project(
    id: &str,
    desc: &str,
    username: &str,
    password: &str,
) -> Result<model::Project, CliError> {
    let password_hash = wisp_auth::hash_secret(password)
        .map_err(|e| CliError::Failure(anyhow::anyhow!("hash the static admin password: {e}")))?;
    Ok(model::Project {
        id: id.to_string(),
        desc: desc.to_string(),
        static_admin: Some(model::ProjectStaticUser {
            username: username.to_string(),
            password_hash,
        }),
        ..Default::default()
    })
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
        let exists = self
            .project_exists(QUICKSTART_PROJECT)
            .await
            .map_err(|e| CliError::Failure(anyhow::anyhow!("look up the quickstart project: {e}")))?;
        if exists {
            return Ok(());
        }
        let project = new_project(
            QUICKSTART_PROJECT,
            "Quickstart project",
            QUICKSTART_USER,
            QUICKSTART_PASSWORD,
        )?;
        match self.stores.projects.create(project).await {
            Ok(_) => {
                tracing::info!("created project quickstart (static admin hello-pipecd)");
                Ok(())
            }
            // Another process created it between our check and our write.
            Err(StoreError::AlreadyExists(_)) => Ok(()),
            Err(e) => Err(CliError::Failure(anyhow::anyhow!("create the quickstart project: {e}"))),
        }
    }

    pub fn key_source(&self) -> StoreKeySource {
        StoreKeySource::new(self.stores.clone(), self.config_projects.keys().cloned())
    }

    pub fn describe(&self) -> String {
        let datastore = match &self.config.spec.datastore {
            DatastoreConfig::Local(c) => {
                format!("sqlite:{}", c.path.clone().unwrap_or_default().display())
            }
            other => format!("{:?}", other.store_type()),
        };
        let filestore = match &self.config.spec.filestore {
            FilestoreConfig::Local(c) => format!("dir:{}", c.dir.clone().unwrap_or_default().display()),
            other => format!("{:?}", other.store_type()),
        };
        format!("{datastore} {filestore}")
    }
}
