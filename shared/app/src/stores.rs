//! The one store opener: embedded (SQLite) or DynamoDB, a local directory, S3 or MinIO
//! (through the S3 API), the in-process cache or Redis, in any mix the configuration
//! names and the build includes (features `embedded` and `aws`; [`datastore_feature`] and
//! [`filestore_feature`] say which links which). `wisp import` opens upstream's filestore
//! here too. The AWS stores are warmed up here (DescribeTable,
//! HeadBucket, PING) so that the first request does not pay the TLS handshake; a missing
//! table or bucket fails with a hint to run `wisp aws init`; an unreachable Redis does
//! not (the cache is optional: it reports `Unavailable` until Redis answers, and callers
//! treat that as a miss).
//!
//! Every store is wrapped here, once, in its `wisp_store::metered` measure.
//!
//! Nothing here logs or returns a secret (the Redis AUTH token, credentials in a URL).

use std::path::Path;
use std::sync::Arc;

use wisp_config::{
    CacheBackend, CacheConfig, Config, DatastoreConfig, DatastoreType, FilestoreConfig,
    FilestoreType,
};
use wisp_store::memory_cache::{DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES};
use wisp_store::metered;
use wisp_store::{Cache, Datastore, Filestore, MemoryCache, Stores};

use crate::error::AppError;

/// Opens the stores `config` names, concurrently. `LOCAL` stores without a path live in
/// `data_dir`.
pub async fn open(config: &Config, data_dir: &Path) -> Result<Stores, AppError> {
    config.ensure_supported()?;
    let (datastore, filestore, cache) = tokio::try_join!(
        open_datastore(&config.spec.datastore, data_dir),
        open_filestore(&config.spec.filestore, data_dir),
        open_cache(&config.spec.cache),
    )?;
    let mut stores = Stores::new(datastore, filestore, cache);
    stores.stage_logs = stores
        .stage_logs
        .with_max_bytes(config.spec.stage_logs.max_bytes_per_stage());
    Ok(stores)
}

/// The feature of wisp-app that links each datastore type; `None` for a type Wisp does
/// not run. Exhaustive on purpose: a new type does not compile until it is given its
/// feature here (and its arm in `open_datastore`); a test checks this against
/// [`DatastoreType::support`].
pub const fn datastore_feature(store_type: DatastoreType) -> Option<&'static str> {
    match store_type {
        DatastoreType::Local => Some("embedded"),
        DatastoreType::DynamoDb => Some("aws"),
        DatastoreType::MySql | DatastoreType::Firestore => None,
    }
}

/// The feature of wisp-app that links each filestore type; `None` for a type Wisp does
/// not run (see [`datastore_feature`]).
pub const fn filestore_feature(store_type: FilestoreType) -> Option<&'static str> {
    match store_type {
        FilestoreType::Local => Some("embedded"),
        FilestoreType::S3 | FilestoreType::Minio => Some("aws"),
        FilestoreType::Gcs => None,
    }
}

/// A type the opener has no arm for in this build: left out by a feature, or not run by
/// Wisp at all.
fn not_opened(kind: &str, store_type: &str, feature: Option<&str>) -> AppError {
    AppError::Unsupported(match feature {
        Some(feature) => format!(
            "{kind} type {store_type} is not in this build (feature `{feature}` of wisp-app)"
        ),
        None => format!("{kind} type {store_type} is not supported by Wisp"),
    })
}

async fn open_datastore(
    config: &DatastoreConfig,
    data_dir: &Path,
) -> Result<Arc<dyn Datastore>, AppError> {
    let _ = data_dir;
    match config {
        #[cfg(feature = "embedded")]
        DatastoreConfig::Local(c) => {
            let path = c.path_or_default(data_dir);
            let datastore = wisp_store_embedded::SqliteDatastore::open(&path)
                .map_err(|e| AppError::store(format!("the database {}", path.display()), e))?;
            Ok(metered::datastore(Arc::new(datastore), "sqlite"))
        }
        #[cfg(feature = "aws")]
        DatastoreConfig::DynamoDb(c) => Ok(metered::datastore(
            Arc::new(wisp_store_aws::open::open_datastore(c).await?),
            "dynamodb",
        )),
        other => Err(not_opened(
            "datastore",
            other.store_type().as_str(),
            datastore_feature(other.store_type()),
        )),
    }
}

/// What a `LOCAL` filestore in `dir` that cannot be opened fails with.
#[cfg(feature = "embedded")]
fn filestore_error(dir: &Path) -> impl FnOnce(wisp_store::StoreError) -> AppError + '_ {
    move |e| AppError::store(format!("the filestore {}", dir.display()), e)
}

/// The filestore `config` names, to be read and never changed (`wisp import pipecd`'s
/// source): `LOCAL` is then a directory of files, one per object (a copy of an upstream
/// bucket), read as it is; the other types open as [`open_filestore`] opens them.
pub async fn open_filestore_read_only(
    config: &FilestoreConfig,
    data_dir: &Path,
) -> Result<Arc<dyn Filestore>, AppError> {
    match config {
        #[cfg(feature = "embedded")]
        FilestoreConfig::Local(c) => {
            let dir = c.dir_or_default(data_dir);
            let filestore = wisp_store_embedded::DirectoryFilestore::open(&dir)
                .map_err(filestore_error(&dir))?;
            Ok(metered::filestore(Arc::new(filestore), "directory"))
        }
        other => open_filestore(other, data_dir).await,
    }
}

/// The filestore `config` names (`LOCAL` without a directory: `<data_dir>/filestore`).
pub async fn open_filestore(
    config: &FilestoreConfig,
    data_dir: &Path,
) -> Result<Arc<dyn Filestore>, AppError> {
    let _ = data_dir;
    match config {
        #[cfg(feature = "embedded")]
        FilestoreConfig::Local(c) => {
            let dir = c.dir_or_default(data_dir);
            // Opening may move an earlier Wisp's files into the database: off the runtime.
            let root = dir.clone();
            let filestore = tokio::task::spawn_blocking(move || {
                wisp_store_embedded::LocalFilestore::open(root)
            })
            .await
            .map_err(|e| wisp_store::StoreError::internal_from("opening task failed", e))
            .and_then(|opened| opened)
            .map_err(filestore_error(&dir))?;
            let moved = filestore.imported_files();
            if moved > 0 {
                tracing::info!(
                    dir = %dir.display(),
                    objects = moved,
                    "moved the filestore's objects from files into {}",
                    wisp_store_embedded::filestore::DATABASE_FILE
                );
            }
            Ok(metered::filestore(Arc::new(filestore), "local"))
        }
        #[cfg(feature = "aws")]
        FilestoreConfig::S3(c) => Ok(metered::filestore(
            Arc::new(wisp_store_aws::open::open_filestore(c).await?),
            "s3",
        )),
        #[cfg(feature = "aws")]
        FilestoreConfig::Minio(c) => Ok(metered::filestore(
            Arc::new(wisp_store_aws::open::open_minio_filestore(c).await?),
            "minio",
        )),
        other => Err(not_opened(
            "filestore",
            other.store_type().as_str(),
            filestore_feature(other.store_type()),
        )),
    }
}

/// The cache of `c`: the in-process [`MemoryCache`], or Redis (after one PING; an
/// unreachable Redis is logged, not an error).
pub async fn open_cache(c: &CacheConfig) -> Result<Arc<dyn Cache>, AppError> {
    match &c.backend {
        CacheBackend::Memory(_) => Ok(metered::cache(
            Arc::new(MemoryCache::new(DEFAULT_MAX_ENTRIES, DEFAULT_MAX_BYTES)),
            "memory",
        )),
        #[cfg(feature = "aws")]
        CacheBackend::Redis(redis) => {
            Ok(metered::cache(Arc::new(redis::open(redis).await?), "redis"))
        }
        #[cfg(not(feature = "aws"))]
        CacheBackend::Redis(_) => Err(AppError::Unsupported(
            "cache type REDIS is not in this build (feature `aws` of wisp-app)".into(),
        )),
    }
}

#[cfg(feature = "aws")]
pub mod redis {
    //! The Redis cache a configuration names.

    use wisp_config::RedisCacheConfig;
    use wisp_store_redis::elasticache::{self, AuthMode, FoundCache, Lookup};
    use wisp_store_redis::iam::{IamAuth, TokenTarget};
    use wisp_store_redis::{RedisCache, RedisCacheOptions};

    use crate::error::AppError;

    /// The Redis cache of `c`, connected (or trying to) in the background. A cache named
    /// by ElastiCache id is looked up first (once: this runs at init).
    pub async fn open(c: &RedisCacheConfig) -> Result<RedisCache, AppError> {
        let (options, _) = resolve(c).await?;
        RedisCache::connect_with(options)
            .await
            .map_err(|e| AppError::store(format!("Redis cache {}", c.display_address()), e))
    }

    /// Whether the Redis cache of `c` answers PING now, and the ElastiCache cache found
    /// when `c` names one by id.
    pub async fn reachable(c: &RedisCacheConfig) -> Result<(bool, Option<FoundCache>), AppError> {
        let (options, found) = resolve(c).await?;
        let cache = RedisCache::new_lazy(options)
            .map_err(|e| AppError::store(format!("Redis cache {}", c.display_address()), e))?;
        Ok((cache.ping().await.is_ok(), found))
    }

    /// The connection options `c` describes (the AUTH token read from its file if need
    /// be). With `cacheId`, the cache is read through the ElastiCache API (an unusable one
    /// is an error) and, with `iamAuth`, tokens are signed with the SDK's credentials.
    pub async fn resolve(
        c: &RedisCacheConfig,
    ) -> Result<(RedisCacheOptions, Option<FoundCache>), AppError> {
        let auth_token = c.load_auth_token()?.map(|token| token.expose().to_owned());
        let username = c.username.clone().filter(|u| !u.is_empty());
        let Some(cache_id) = c.cache_id.clone() else {
            let mut options = RedisCacheOptions::new(c.url());
            options.auth_token = auth_token;
            options.username = username;
            if let Some(timeout) = c.timeout() {
                options.timeout = timeout;
            }
            return Ok((options, None));
        };
        let auth = if c.iam_auth {
            AuthMode::Iam
        } else if auth_token.is_some() {
            AuthMode::Token
        } else {
            AuthMode::None
        };
        let lookup = Lookup {
            cache_id: cache_id.clone(),
            serverless: c.serverless,
            auth,
            username: username.clone(),
            region: c.region.clone(),
            endpoint: c.endpoint.clone(),
        };
        let sdk = elasticache::sdk_config(&lookup).await;
        let found = elasticache::discover(&lookup, &sdk).await?;
        let mut options = RedisCacheOptions::new(found.url());
        if let Some(timeout) = c.timeout() {
            options.timeout = timeout;
        }
        if c.iam_auth {
            let credentials = sdk.credentials_provider().ok_or_else(|| {
                AppError::Unsupported(
                    "cache.config.iamAuth: no AWS credentials to sign ElastiCache tokens with"
                        .into(),
                )
            })?;
            options.iam = Some(IamAuth::new(
                TokenTarget {
                    // ElastiCache stores ids in lower case, and checks the token's host.
                    cache_name: cache_id.to_ascii_lowercase(),
                    user_id: username.unwrap_or_default(),
                    serverless: c.serverless,
                    region: found.region.clone(),
                },
                credentials,
            ));
        } else {
            options.auth_token = auth_token;
            options.username = username;
        }
        Ok((options, Some(found)))
    }
}

/// One thing [`init_aws`] did.
#[cfg(feature = "aws")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// The DynamoDB table or the S3 bucket.
    Aws(wisp_store_aws::open::InitStep),
    /// The Redis cache answered PING, or not (it is optional: not an error); with a
    /// cache named by ElastiCache id, what the ElastiCache API said about it.
    Redis {
        address: String,
        reachable: bool,
        found: Option<wisp_store_redis::elasticache::FoundCache>,
    },
}

#[cfg(feature = "aws")]
impl std::fmt::Display for InitStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InitStep::Aws(step) => step.fmt(f),
            InitStep::Redis {
                address,
                reachable,
                found,
            } => write!(
                f,
                "Redis cache {}: {}",
                found.as_ref().map_or(address.clone(), ToString::to_string),
                if *reachable {
                    "reachable"
                } else {
                    "not reachable (the cache is optional; Wisp runs without it)"
                }
            ),
        }
    }
}

/// `wisp aws init`: creates the DynamoDB table and the S3 bucket `config` names unless
/// they exist, and checks that a Redis cache answers. Idempotent.
#[cfg(feature = "aws")]
pub async fn init_aws(config: &Config) -> Result<Vec<InitStep>, AppError> {
    let mut steps: Vec<InitStep> = wisp_store_aws::open::init(config)
        .await?
        .into_iter()
        .map(InitStep::Aws)
        .collect();
    if let Some(c) = config.spec.cache.redis() {
        let (reachable, found) = redis::reachable(c).await?;
        steps.push(InitStep::Redis {
            address: c.display_address(),
            reachable,
            found,
        });
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wisp_config::Support;

    /// Every type the configuration calls supported is linked by a feature, and no other.
    #[test]
    fn every_store_type_wisp_runs_has_its_feature() {
        for t in [
            DatastoreType::Local,
            DatastoreType::MySql,
            DatastoreType::Firestore,
            DatastoreType::DynamoDb,
        ] {
            // A new type must be listed above: this match fails to compile until it is.
            match t {
                DatastoreType::Local
                | DatastoreType::MySql
                | DatastoreType::Firestore
                | DatastoreType::DynamoDb => {}
            }
            assert_eq!(
                t.support() == Support::Supported,
                datastore_feature(t).is_some(),
                "datastore {t}"
            );
        }
        for t in [
            FilestoreType::Local,
            FilestoreType::Gcs,
            FilestoreType::S3,
            FilestoreType::Minio,
        ] {
            match t {
                FilestoreType::Local
                | FilestoreType::Gcs
                | FilestoreType::S3
                | FilestoreType::Minio => {}
            }
            assert_eq!(
                t.support() == Support::Supported,
                filestore_feature(t).is_some(),
                "filestore {t}"
            );
        }
    }

    /// A type whose feature is in the build is opened by its arm, not refused as left
    /// out (a backend whose arm is missing or behind the wrong feature fails here).
    #[tokio::test]
    async fn a_filestore_in_the_build_is_not_refused_as_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let configs = [
            FilestoreConfig::Local(Default::default()),
            // Key files that do not exist: the arm is reached and fails on reading them,
            // before any network call.
            FilestoreConfig::Minio(wisp_config::MinioConfig {
                endpoint: "http://127.0.0.1:9".into(),
                bucket: "b".into(),
                access_key_file: Some(dir.path().join("missing-access")),
                secret_key_file: Some(dir.path().join("missing-secret")),
                auto_create_bucket: false,
            }),
        ];
        for config in configs {
            let feature = filestore_feature(config.store_type()).unwrap();
            let in_build = match feature {
                "embedded" => cfg!(feature = "embedded"),
                "aws" => cfg!(feature = "aws"),
                other => panic!("unknown feature {other}"),
            };
            let result = open_filestore(&config, dir.path()).await;
            let left_out =
                matches!(&result, Err(AppError::Unsupported(m)) if m.contains("not in this build"));
            assert_eq!(
                left_out,
                !in_build,
                "{}: {:?}",
                config.store_type(),
                result.err()
            );
        }
    }

    #[tokio::test]
    async fn memory_cache_by_default() {
        let cache = open_cache(&CacheConfig::default()).await.unwrap();
        cache.put("k", b"v".to_vec(), None).await.unwrap();
        assert_eq!(cache.get("k").await.unwrap().as_deref(), Some(&b"v"[..]));
    }

    #[cfg(feature = "embedded")]
    #[tokio::test]
    async fn embedded_defaults_open_in_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default_embedded(dir.path());
        let stores = open(&config, dir.path()).await.unwrap();
        stores
            .filestore
            .put("probe.txt", b"x".to_vec(), wisp_store::PutCondition::Any)
            .await
            .unwrap();
        assert!(
            dir.path().join(wisp_config::DEFAULT_DB_FILE_NAME).is_file(),
            "the database lives in the data dir"
        );
        assert_eq!(
            stores.filestore.get("probe.txt").await.unwrap().data,
            b"x".to_vec()
        );
    }

    #[cfg(feature = "aws")]
    #[tokio::test]
    async fn redis_options_from_config() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let c = Config::from_yaml_str(
            &format!(
                "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  cache:\n    type: REDIS\n    config:\n      address: cache.example:6379\n      tls: true\n      username: wisp\n      authTokenFile: {}\n      timeout: 100ms\n",
                token.display()
            ),
            "test.yaml",
        )
        .unwrap();
        let (options, found) = redis::resolve(c.spec.cache.redis().unwrap()).await.unwrap();
        assert!(found.is_none(), "an address needs no ElastiCache lookup");
        assert_eq!(options.url, "rediss://cache.example:6379");
        assert_eq!(options.auth_token.as_deref(), Some("s3cret"));
        assert_eq!(options.username.as_deref(), Some("wisp"));
        assert_eq!(options.timeout, std::time::Duration::from_millis(100));
        assert!(!format!("{options:?}").contains("s3cret"));
    }

    #[cfg(feature = "aws")]
    #[tokio::test]
    async fn aws_init_needs_an_aws_store() {
        let dir = tempfile::tempdir().unwrap();
        let err = init_aws(&Config::default_embedded(dir.path()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("nothing to create"), "{err}");
        assert!(err.is_operator_error());
    }
}
