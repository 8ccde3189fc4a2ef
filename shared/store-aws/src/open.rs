//! A DynamoDB datastore and an S3 (or MinIO) filestore from their configuration, opened
//! and warmed up: one cheap call on each client (DescribeTable, HeadBucket) so that the first request
//! does not pay the TLS handshake. A missing table or bucket fails here, with a hint to
//! run `wisp aws init`. [`init`] creates the table and the bucket (`wisp aws init`).
//! Which stores a deployment opens is decided in one place, `wisp-app`.
//!
//! Nothing here logs or returns a credential.

// The SDKs share one error type (`aws_smithy_runtime_api`'s), re-exported by each.
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use wisp_config::{
    Config, ConfigError, DatastoreConfig, DynamoDbConfig, FilestoreConfig, MinioConfig, S3Config,
};
use wisp_store::error::StoreError;

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
                source: StoreError::Unavailable { .. },
                ..
            }
        )
    }
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

/// The MinIO filestore of `c` (upstream's `type: MINIO`) through the S3 API, after one
/// HeadBucket; with `autoCreateBucket`, the bucket is created first when it is missing,
/// as upstream does.
pub async fn open_minio_filestore(c: &MinioConfig) -> Result<S3Filestore, OpenError> {
    let what = format!("MinIO bucket {} at {}", c.bucket, c.endpoint);
    let (access_key, secret_key) = c.load_keys()?;
    let filestore = S3Filestore::for_minio(
        &c.endpoint,
        c.bucket.clone(),
        access_key,
        secret_key.expose().to_owned(),
    )
    .await
    .map_err(|e| OpenError::store(&what, e))?;
    if c.auto_create_bucket {
        filestore
            .create_bucket_if_missing()
            .await
            .map_err(|e| OpenError::store(&what, e))?;
    }
    match bucket_exists(&filestore).await {
        Ok(true) => Ok(filestore),
        Ok(false) => Err(OpenError::store(
            what,
            StoreError::NotFound(
                "the bucket does not exist (create it, or set autoCreateBucket: true)".into(),
            ),
        )),
        Err(e) => Err(OpenError::store(what, e)),
    }
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
        None => operation.to_string(),
    };
    if transient {
        StoreError::unavailable_from(detail, err)
    } else {
        StoreError::internal_from(detail, err)
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
        }
    }
}

/// Creates what the AWS stores of `config` need and are missing: the DynamoDB table
/// (`DYNAMODB` datastore) and the S3 bucket (`S3` filestore). Idempotent. Fails with [`OpenError::WrongTypes`] when the configuration names
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
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn init_needs_an_aws_store() {
        let embedded = Config::default_embedded("/tmp/unused");
        let err = init(&embedded).await.expect_err("nothing to create");
        assert!(err.to_string().contains("nothing to create"), "{err}");
        assert!(!err.is_transient());

        let upstream = Config::from_yaml_str(
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore: {type: MYSQL, config: {url: x}}\n",
            "test.yaml",
        )
        .expect("config");
        let err = init(&upstream).await.expect_err("refused");
        assert!(matches!(err, OpenError::Config(_)), "{err:?}");
    }
}
