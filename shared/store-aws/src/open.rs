//! From a control-plane configuration to open, warmed-up AWS stores: what a Lambda
//! function calls once, during init, and what `wisp serve` calls for AWS store types.
//!
//! [`open_stores`] builds the DynamoDB datastore, the S3 filestore and the cache (Redis
//! when `cache.type: REDIS`, else the in-process [`MemoryCache`]), and makes one cheap
//! call on each client (DescribeTable, HeadBucket, PING) so that the first request does
//! not pay the TLS handshake. A missing table or bucket fails here, with a hint to run
//! `wisp aws init`; an unreachable Redis does not (the cache is optional: it reports
//! `Unavailable` until Redis answers, and callers treat that as a miss).
//!
//! [`open_datastore`], [`open_filestore`] and [`open_cache`] do the same for one store,
//! for configurations that mix embedded and AWS stores. [`init`] creates the table and
//! the bucket (`wisp aws init`).
//!
//! Nothing here logs or returns a secret (the Redis AUTH token, credentials in a URL).

use std::sync::Arc;

// The SDKs share one error type (`aws_smithy_runtime_api`'s), re-exported by each.
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use wisp_config::{
    CacheBackend, CacheConfig, Config, ConfigError, DatastoreConfig, DynamoDbConfig,
    FilestoreConfig, RedisCacheConfig, S3Config,
};
use wisp_store::error::StoreError;
use wisp_store::memory_cache::{DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES};
use wisp_store::{Cache, MemoryCache, Stores};
use wisp_store_redis::{RedisCache, RedisCacheOptions};

use crate::dynamodb::{self, DynamoDbDatastore};
use crate::s3::S3Filestore;

/// Why the stores could not be opened. Messages name the table, bucket or address (never
/// a credential) and say what to do when it is clear.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The configuration names store types this function does not open.
    #[error("{0}")]
    WrongTypes(String),
    /// The configuration is unsupported or a file it names cannot be read.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store refused or could not be reached.
    #[error("{what}: {source}")]
    Store {
        what: String,
        #[source]
        source: StoreError,
    },
}

impl OpenError {
    fn store(what: impl Into<String>, source: StoreError) -> Self {
        OpenError::Store {
            what: what.into(),
            source,
        }
    }

    /// Whether trying again later may help (the service was unreachable or throttling).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            OpenError::Store {
                source: StoreError::Unavailable(_),
                ..
            }
        )
    }
}

/// The opened AWS stores, as their concrete types (for request counters and the like).
pub struct AwsStores {
    pub datastore: DynamoDbDatastore,
    pub filestore: S3Filestore,
    pub cache: Arc<dyn Cache>,
}

impl std::fmt::Debug for AwsStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsStores").finish_non_exhaustive()
    }
}

impl AwsStores {
    /// The bundle the services take.
    pub fn into_stores(self) -> Stores {
        Stores::new(
            Arc::new(self.datastore),
            Arc::new(self.filestore),
            self.cache,
        )
    }
}

/// [`open_aws`], as the [`Stores`] bundle the services take.
pub async fn open_stores(config: &Config) -> Result<Stores, OpenError> {
    Ok(open_aws(config).await?.into_stores())
}

/// Opens and warms up the DynamoDB datastore, the S3 filestore and the cache of
/// `config`, concurrently. The datastore must be `DYNAMODB` and the filestore `S3`.
pub async fn open_aws(config: &Config) -> Result<AwsStores, OpenError> {
    config.ensure_supported()?;
    let (DatastoreConfig::DynamoDb(ds), FilestoreConfig::S3(fs)) =
        (&config.spec.datastore, &config.spec.filestore)
    else {
        return Err(OpenError::WrongTypes(format!(
            "{}: the AWS stores need `datastore.type: DYNAMODB` and `filestore.type: S3` \
             (found {} and {})",
            config.source,
            config.spec.datastore.store_type(),
            config.spec.filestore.store_type()
        )));
    };
    let (datastore, filestore, cache) = tokio::try_join!(
        open_datastore(ds),
        open_filestore(fs),
        open_cache(&config.spec.cache),
    )?;
    Ok(AwsStores {
        datastore,
        filestore,
        cache,
    })
}

fn table_what(c: &DynamoDbConfig) -> String {
    match c.endpoint.as_deref() {
        Some(endpoint) => format!("DynamoDB table {} at {endpoint}", c.table),
        None => format!("DynamoDB table {}", c.table),
    }
}

fn bucket_what(c: &S3Config) -> String {
    match c.endpoint.as_deref() {
        Some(endpoint) => format!("S3 bucket {} at {endpoint}", c.bucket),
        None => format!("S3 bucket {}", c.bucket),
    }
}

fn non_empty(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.trim().is_empty())
}

/// The DynamoDB datastore of `c`, after one DescribeTable (which fails when the table
/// does not exist).
pub async fn open_datastore(c: &DynamoDbConfig) -> Result<DynamoDbDatastore, OpenError> {
    let datastore =
        DynamoDbDatastore::from_config(non_empty(&c.region), non_empty(&c.endpoint), &c.table)
            .await;
    match table_exists(datastore.client(), &c.table).await {
        Ok(true) => Ok(datastore),
        Ok(false) => Err(OpenError::store(
            table_what(c),
            StoreError::NotFound(
                "the table does not exist (create it with `wisp aws init --config ...`)".into(),
            ),
        )),
        Err(e) => Err(OpenError::store(table_what(c), e)),
    }
}

/// The S3 filestore of `c`, after one HeadBucket (which fails when the bucket does not
/// exist or is not ours).
pub async fn open_filestore(c: &S3Config) -> Result<S3Filestore, OpenError> {
    let filestore = S3Filestore::from_s3_config(c)
        .await
        .map_err(|e| OpenError::store(bucket_what(c), e))?;
    match bucket_exists(&filestore).await {
        Ok(true) => Ok(filestore),
        Ok(false) => Err(OpenError::store(
            bucket_what(c),
            StoreError::NotFound(
                "the bucket does not exist (create it with `wisp aws init --config ...`)".into(),
            ),
        )),
        Err(e) => Err(OpenError::store(bucket_what(c), e)),
    }
}

/// The cache of `c`: the in-process [`MemoryCache`], or Redis (after one PING; an
/// unreachable Redis is logged, not an error).
pub async fn open_cache(c: &CacheConfig) -> Result<Arc<dyn Cache>, OpenError> {
    match &c.backend {
        CacheBackend::Memory(_) => Ok(Arc::new(MemoryCache::new(
            DEFAULT_MAX_ENTRIES,
            DEFAULT_MAX_BYTES,
        ))),
        CacheBackend::Redis(redis) => Ok(Arc::new(open_redis(redis).await?)),
    }
}

/// The Redis cache of `c`, connected (or trying to) in the background.
pub async fn open_redis(c: &RedisCacheConfig) -> Result<RedisCache, OpenError> {
    RedisCache::connect_with(redis_options(c)?)
        .await
        .map_err(|e| OpenError::store(format!("Redis cache {}", c.display_address()), e))
}

/// The connection options `c` describes (the AUTH token read from its file if need be).
pub fn redis_options(c: &RedisCacheConfig) -> Result<RedisCacheOptions, OpenError> {
    let mut options = RedisCacheOptions::new(c.url());
    options.auth_token = c.load_auth_token()?.map(|token| token.expose().to_owned());
    options.username = c.username.clone().filter(|u| !u.is_empty());
    if let Some(timeout) = c.timeout() {
        options.timeout = timeout;
    }
    Ok(options)
}

async fn table_exists(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<bool, StoreError> {
    match client.describe_table().table_name(table).send().await {
        Ok(_) => Ok(true),
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(false)
        }
        Err(e) => Err(sdk_failure("DescribeTable", e)),
    }
}

async fn bucket_exists(filestore: &S3Filestore) -> Result<bool, StoreError> {
    match filestore
        .client()
        .head_bucket()
        .bucket(filestore.bucket())
        .send()
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().is_some_and(|e| e.is_not_found()) => Ok(false),
        Err(e) => Err(sdk_failure("HeadBucket", e)),
    }
}

/// An SDK failure: `Unavailable` when the service could not be reached or was failing,
/// `Internal` otherwise (access denied, bad credentials, ...).
fn sdk_failure<E>(operation: &str, err: SdkError<E>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let transient = matches!(
        err,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_)
    );
    let detail = match err.code() {
        Some(code) => format!(
            "{operation}: {code}: {}",
            err.message().unwrap_or("no message")
        ),
        None => format!("{operation}: {}", DisplayErrorContext(&err)),
    };
    if transient {
        StoreError::Unavailable(detail)
    } else {
        StoreError::Internal(detail)
    }
}

// ---------------------------------------------------------------------------------------
// `wisp aws init`

/// One thing [`init`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// The DynamoDB table (with its indexes and TTL) was created, or already existed.
    Table {
        table: String,
        endpoint: Option<String>,
        created: bool,
    },
    /// The S3 bucket was created, or already existed.
    Bucket {
        bucket: String,
        endpoint: Option<String>,
        created: bool,
    },
    /// The Redis cache answered PING, or not (it is optional: not an error).
    Redis { address: String, reachable: bool },
}

impl std::fmt::Display for InitStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |endpoint: &Option<String>| {
            endpoint
                .as_deref()
                .map(|e| format!(" at {e}"))
                .unwrap_or_default()
        };
        match self {
            InitStep::Table {
                table,
                endpoint,
                created,
            } => write!(
                f,
                "DynamoDB table {table}{}: {}",
                at(endpoint),
                if *created {
                    "created"
                } else {
                    "already exists (design checked, TTL on)"
                }
            ),
            InitStep::Bucket {
                bucket,
                endpoint,
                created,
            } => write!(
                f,
                "S3 bucket {bucket}{}: {}",
                at(endpoint),
                if *created {
                    "created"
                } else {
                    "already exists"
                }
            ),
            InitStep::Redis { address, reachable } => write!(
                f,
                "Redis cache {address}: {}",
                if *reachable {
                    "reachable"
                } else {
                    "not reachable (the cache is optional; Wisp runs without it)"
                }
            ),
        }
    }
}

/// Creates what the AWS stores of `config` need and are missing: the DynamoDB table
/// (`DYNAMODB` datastore) and the S3 bucket (`S3` filestore); checks that a Redis cache
/// answers. Idempotent. Fails with [`OpenError::WrongTypes`] when the configuration names
/// no AWS store at all.
pub async fn init(config: &Config) -> Result<Vec<InitStep>, OpenError> {
    config.ensure_supported()?;
    let mut steps = Vec::new();
    if let DatastoreConfig::DynamoDb(c) = &config.spec.datastore {
        let client =
            dynamodb::client_from_config(non_empty(&c.region), non_empty(&c.endpoint)).await;
        let existed = table_exists(&client, &c.table)
            .await
            .map_err(|e| OpenError::store(table_what(c), e))?;
        dynamodb::create_table(&client, &c.table)
            .await
            .map_err(|e| OpenError::store(table_what(c), e))?;
        steps.push(InitStep::Table {
            table: c.table.clone(),
            endpoint: non_empty(&c.endpoint),
            created: !existed,
        });
    }
    if let FilestoreConfig::S3(c) = &config.spec.filestore {
        let filestore = S3Filestore::from_s3_config(c)
            .await
            .map_err(|e| OpenError::store(bucket_what(c), e))?;
        let existed = bucket_exists(&filestore)
            .await
            .map_err(|e| OpenError::store(bucket_what(c), e))?;
        filestore
            .create_bucket_if_missing()
            .await
            .map_err(|e| OpenError::store(bucket_what(c), e))?;
        steps.push(InitStep::Bucket {
            bucket: c.bucket.clone(),
            endpoint: non_empty(&c.endpoint),
            created: !existed,
        });
    }
    if steps.is_empty() {
        return Err(OpenError::WrongTypes(format!(
            "{}: nothing to create: the datastore is {} and the filestore {} \
             (`wisp aws init` creates a DYNAMODB table and an S3 bucket)",
            config.source,
            config.spec.datastore.store_type(),
            config.spec.filestore.store_type()
        )));
    }
    if let Some(redis) = config.spec.cache.redis() {
        let cache = RedisCache::new_lazy(redis_options(redis)?)
            .map_err(|e| OpenError::store(format!("Redis cache {}", redis.display_address()), e))?;
        steps.push(InitStep::Redis {
            address: redis.display_address(),
            reachable: cache.ping().await.is_ok(),
        });
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config(spec: &str) -> Config {
        Config::from_yaml_str(
            &format!("apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n{spec}"),
            "test.yaml",
        )
        .expect("config")
    }

    #[tokio::test]
    async fn open_needs_the_aws_types() {
        let embedded = Config::default_embedded("/tmp/unused");
        let err = open_stores(&embedded).await.expect_err("refused");
        assert!(matches!(err, OpenError::WrongTypes(_)), "{err:?}");
        assert!(err.to_string().contains("DYNAMODB"), "{err}");

        let upstream = config("  datastore: {type: MYSQL, config: {url: x}}\n");
        let err = open_stores(&upstream).await.expect_err("refused");
        assert!(matches!(err, OpenError::Config(_)), "{err:?}");

        let err = init(&embedded).await.expect_err("nothing to create");
        assert!(err.to_string().contains("nothing to create"), "{err}");
        assert!(!err.is_transient());
    }

    #[tokio::test]
    async fn memory_cache_by_default() {
        let cache = open_cache(&CacheConfig::default()).await.expect("cache");
        cache.put("k", b"v".to_vec(), None).await.expect("put");
        assert_eq!(
            cache.get("k").await.expect("get").as_deref(),
            Some(&b"v"[..])
        );
    }

    #[test]
    fn redis_options_from_config() {
        let dir = std::env::temp_dir().join(format!("wisp-open-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let token = dir.join("token");
        std::fs::write(&token, "s3cret\n").expect("write");
        let c = config(&format!(
            "  cache:\n    type: REDIS\n    config:\n      address: cache.example:6379\n      tls: true\n      username: wisp\n      authTokenFile: {}\n      timeout: 100ms\n",
            token.display()
        ));
        let redis = c.spec.cache.redis().expect("redis");
        let options = redis_options(redis).expect("options");
        assert_eq!(options.url, "rediss://cache.example:6379");
        assert_eq!(options.auth_token.as_deref(), Some("s3cret"));
        assert_eq!(options.username.as_deref(), Some("wisp"));
        assert_eq!(options.timeout, Duration::from_millis(100));
        assert!(!format!("{options:?}").contains("s3cret"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
