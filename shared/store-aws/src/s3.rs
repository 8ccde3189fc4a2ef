//! `Filestore` on Amazon S3 (or an S3-compatible endpoint such as moto_server).
//!
//! Object `a/b/c.txt` is the key `<prefix>a/b/c.txt` in one bucket, so the domain stores'
//! paths give upstream's key layout (`log/<deployment>/<stage>/<retry>.txt`,
//! `application-live-state/<app>.json`, ...). The etag is S3's `ETag`, exactly as S3
//! returns it (quotes included).
//!
//! Conditional writes are S3's own, atomic on the server: [`PutCondition::Absent`] sends
//! `If-None-Match: *`, [`PutCondition::Matches`] sends `If-Match: <etag>`. A failed
//! precondition (412) is `AlreadyExists` / `Conflict`; a concurrent conditional write
//! (409 `ConditionalRequestConflict`) is `Conflict`; `If-Match` on a missing key (404) is
//! `NotFound`. Throttling, 5xx, timeouts and connection failures (after the SDK's own
//! retries) are `Unavailable`.
//!
//! Paths follow the same rules as every backend ([`wisp_store::filestore::validate_path`]);
//! keys under the prefix that break them (e.g. a console-made `folder/` marker) are not
//! listed.

use async_trait::async_trait;
use aws_config::{BehaviorVersion, ConfigLoader, Region, SdkConfig};
use aws_sdk_s3::Client;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use wisp_store::error::{BoxError, Result, StoreError};
use wisp_store::filestore::{
    Filestore, ListPage, Object, ObjectAttrs, ObjectMeta, PresignedGet, PutCondition,
    validate_path, validate_prefix,
};

/// Most keys one ListObjectsV2 call returns.
const MAX_KEYS_PER_CALL: usize = 1000;

/// An S3 bucket (optionally a key prefix within it) as a [`Filestore`]. Cheap to clone.
#[derive(Clone)]
pub struct S3Filestore {
    client: Client,
    bucket: String,
    /// Empty, or ends with `/`.
    prefix: String,
}

impl std::fmt::Debug for S3Filestore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Filestore")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl S3Filestore {
    /// Uses `client` on `bucket`; every key gets `prefix` (a trailing `/` is added when
    /// missing; `None` or `""` means the bucket root).
    pub fn new(client: Client, bucket: impl Into<String>, prefix: Option<&str>) -> Result<Self> {
        let bucket = bucket.into();
        if bucket.is_empty() {
            return Err(StoreError::InvalidArgument(
                "S3 bucket name is empty".into(),
            ));
        }
        let prefix = match prefix.map(|p| p.trim_end_matches('/')) {
            None | Some("") => String::new(),
            Some(p) => {
                validate_path(p).map_err(|_| {
                    StoreError::InvalidArgument(format!(
                        "S3 key prefix {p:?}: must be a relative path without empty, `.` or `..` segments"
                    ))
                })?;
                format!("{p}/")
            }
        };
        Ok(S3Filestore {
            client,
            bucket,
            prefix,
        })
    }

    /// Builds the client from an already loaded SDK config. When the config has an endpoint
    /// override (moto_server, MinIO, LocalStack), path-style addressing is used.
    pub fn from_sdk_config(
        sdk_config: &SdkConfig,
        bucket: impl Into<String>,
        prefix: Option<&str>,
    ) -> Result<Self> {
        let s3_config = aws_sdk_s3::config::Builder::from(sdk_config)
            .force_path_style(sdk_config.endpoint_url().is_some())
            .build();
        Self::new(Client::from_conf(s3_config), bucket, prefix)
    }

    /// Loads credentials and settings the standard AWS way (environment, profile, web
    /// identity, container or instance role), with `region` and `endpoint` overriding
    /// what the environment says. Call once at startup (Lambda init).
    pub async fn from_config(
        region: Option<String>,
        endpoint: Option<String>,
        bucket: impl Into<String>,
        prefix: Option<String>,
    ) -> Result<Self> {
        let sdk_config = load_sdk_config(region, endpoint).await;
        Self::from_sdk_config(&sdk_config, bucket, prefix.as_deref())
    }

    /// From the `filestore.config` of a control-plane configuration (`type: S3`):
    /// `bucket`, `prefix`, `region`, `endpoint` and `profile`. `credentialsFile`,
    /// `roleARN` and `tokenFile` are left to the standard AWS environment
    /// (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_ROLE_ARN`, `AWS_WEB_IDENTITY_TOKEN_FILE`).
    pub async fn from_s3_config(config: &wisp_config::S3Config) -> Result<Self> {
        let mut loader = sdk_config_loader(config.region.clone(), config.endpoint.clone());
        if let Some(profile) = config.profile.as_deref().filter(|p| !p.is_empty()) {
            loader = loader.profile_name(profile);
        }
        Self::from_sdk_config(
            &loader.load().await,
            config.bucket.clone(),
            config.prefix.as_deref(),
        )
    }

    /// A MinIO bucket (upstream's `type: MINIO` filestore) through the S3 API: its
    /// endpoint, path-style addressing, and the access keys MinIO was given.
    pub async fn for_minio(
        endpoint: &str,
        bucket: impl Into<String>,
        access_key: String,
        secret_key: String,
    ) -> Result<Self> {
        // MinIO ignores the region, but the SDK signs with one.
        let loader = sdk_config_loader(Some("us-east-1".into()), Some(endpoint.to_owned()))
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                access_key, secret_key, None, None, "minio",
            ));
        Self::from_sdk_config(&loader.load().await, bucket, None)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix: empty, or ending with `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Creates the bucket unless it exists (for `wisp aws init` and tests).
    pub async fn create_bucket_if_missing(&self) -> Result<()> {
        if self
            .client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .is_ok()
        {
            return Ok(());
        }
        let mut request = self.client.create_bucket().bucket(&self.bucket);
        // us-east-1 is the one region that refuses a location constraint naming itself.
        if let Some(region) = self.client.config().region().map(Region::as_ref)
            && region != "us-east-1"
        {
            request = request.create_bucket_configuration(
                aws_sdk_s3::types::CreateBucketConfiguration::builder()
                    .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(region))
                    .build(),
            );
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(err) => match err.code() {
                Some("BucketAlreadyOwnedByYou") => Ok(()),
                _ => Err(store_error(
                    &format!("creating bucket {}", self.bucket),
                    classify(err),
                )),
            },
        }
    }

    fn key(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }
}

/// The SDK config the AWS backends share: the standard credential and region chain,
/// with `region` and `endpoint` overriding it.
pub async fn load_sdk_config(region: Option<String>, endpoint: Option<String>) -> SdkConfig {
    sdk_config_loader(region, endpoint).load().await
}

fn sdk_config_loader(region: Option<String>, endpoint: Option<String>) -> ConfigLoader {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = region.filter(|r| !r.is_empty()) {
        loader = loader.region(Region::new(region));
    }
    if let Some(endpoint) = endpoint.filter(|e| !e.is_empty()) {
        loader = loader.endpoint_url(endpoint);
    }
    loader
}

/// What an S3 call failed with, before the caller decides what it means.
enum Failure {
    /// 404 on the object (`NoSuchKey`, or a bodiless 404).
    NotFound,
    /// 412: `If-None-Match` / `If-Match` did not hold.
    PreconditionFailed,
    /// 409 `ConditionalRequestConflict`: a concurrent conditional write won.
    ConcurrentWrite,
    /// Anything else: whether a retry may help, what S3 answered (status, code,
    /// message), and the SDK's error kept whole as the cause.
    Other {
        retryable: bool,
        detail: String,
        source: BoxError,
    },
}

fn classify<E>(err: SdkError<E>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let status = match &err {
        SdkError::ServiceError(ctx) => ctx.raw().status().as_u16(),
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            return Failure::Other {
                retryable: true,
                detail: "S3 request failed".to_string(),
                source: err.into(),
            };
        }
        _ => {
            return Failure::Other {
                retryable: false,
                detail: "S3 request failed".to_string(),
                source: err.into(),
            };
        }
    };
    let code = err.code().unwrap_or_default().to_string();
    let detail = match err.message() {
        Some(message) => format!("S3 {status} {code}: {message}"),
        None => format!("S3 {status} {code}"),
    };
    let retryable = match (status, code.as_str()) {
        (_, "NoSuchBucket") => {
            return Failure::Other {
                retryable: false,
                detail: format!("{detail} (the configured bucket does not exist)"),
                source: err.into(),
            };
        }
        (404, "NoSuchKey" | "") | (_, "NoSuchKey") => return Failure::NotFound,
        (412, _) | (_, "PreconditionFailed") => return Failure::PreconditionFailed,
        (409, "ConditionalRequestConflict") | (_, "ConditionalRequestConflict") => {
            return Failure::ConcurrentWrite;
        }
        (429 | 500..=599, _)
        | (
            _,
            "SlowDown"
            | "Throttling"
            | "ThrottlingException"
            | "RequestTimeout"
            | "ServiceUnavailable"
            | "InternalError"
            | "RequestLimitExceeded",
        ) => true,
        _ => false,
    };
    Failure::Other {
        retryable,
        detail,
        source: err.into(),
    }
}

/// A failure no caller gives a meaning of its own.
fn store_error(what: &str, failure: Failure) -> StoreError {
    match failure {
        Failure::NotFound => StoreError::NotFound(what.to_string()),
        Failure::PreconditionFailed => StoreError::Conflict(format!("{what}: precondition failed")),
        Failure::ConcurrentWrite => StoreError::Conflict(format!("{what}: concurrent write")),
        Failure::Other {
            retryable: true,
            detail,
            source,
        } => StoreError::unavailable_from(format!("{what}: {detail}"), source),
        Failure::Other {
            retryable: false,
            detail,
            source,
        } => StoreError::internal_from(format!("{what}: {detail}"), source),
    }
}

fn unix_seconds(t: Option<&aws_sdk_s3::primitives::DateTime>) -> i64 {
    t.map_or(0, aws_sdk_s3::primitives::DateTime::secs)
}

#[async_trait]
impl Filestore for S3Filestore {
    async fn get(&self, path: &str) -> Result<Object> {
        validate_path(path)?;
        let what = format!("object {path}");
        let output = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.key(path))
            .send()
            .await
            .map_err(|e| store_error(&what, classify(e)))?;
        let etag = output.e_tag().unwrap_or_default().to_string();
        let data = output
            .body
            .collect()
            .await
            .map_err(|e| StoreError::unavailable_from(format!("{what}: reading the body"), e))?
            .into_bytes()
            .to_vec();
        Ok(Object { data, etag })
    }

    async fn put(&self, path: &str, data: Vec<u8>, condition: PutCondition) -> Result<String> {
        self.put_with_meta(path, data, condition, &ObjectMeta::default())
            .await
    }

    /// `meta` becomes the object's `Content-Type` and `Cache-Control`, which S3 answers
    /// with (presigned downloads included).
    async fn put_with_meta(
        &self,
        path: &str,
        data: Vec<u8>,
        condition: PutCondition,
        meta: &ObjectMeta,
    ) -> Result<String> {
        validate_path(path)?;
        let what = format!("object {path}");
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(self.key(path))
            .set_content_type(meta.content_type.clone())
            .set_cache_control(meta.cache_control.clone())
            .body(ByteStream::from(data));
        let request = match &condition {
            PutCondition::Any => request,
            PutCondition::Absent => request.if_none_match("*"),
            PutCondition::Matches(etag) => request.if_match(etag),
        };
        let output = request
            .send()
            .await
            .map_err(|e| match (classify(e), &condition) {
                (Failure::PreconditionFailed, PutCondition::Absent) => {
                    StoreError::AlreadyExists(what.clone())
                }
                (Failure::PreconditionFailed, _) => {
                    StoreError::Conflict(format!("{what}: etag changed"))
                }
                (Failure::NotFound, PutCondition::Matches(_)) => StoreError::NotFound(what.clone()),
                (failure, _) => store_error(&what, failure),
            })?;
        match output.e_tag() {
            Some(etag) if !etag.is_empty() => Ok(etag.to_string()),
            _ => Err(StoreError::internal(format!(
                "{what}: S3 returned no ETag for the write"
            ))),
        }
    }

    /// `limit == 0` means no limit.
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<ListPage> {
        validate_prefix(prefix)?;
        let what = format!("listing {prefix:?}");
        let full_prefix = self.key(prefix);
        let mut objects = Vec::new();
        // The last key S3 returned (listed or skipped), as a store path.
        let mut last: Option<String> = None;
        let mut token: Option<String> = None;
        loop {
            let want = match limit {
                0 => MAX_KEYS_PER_CALL,
                n => (n - objects.len()).min(MAX_KEYS_PER_CALL),
            };
            let mut request = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&full_prefix)
                .max_keys(i32::try_from(want).unwrap_or(i32::MAX));
            request = match (&token, after) {
                (Some(token), _) => request.continuation_token(token),
                (None, Some(after)) => request.start_after(self.key(after)),
                (None, None) => request,
            };
            let output = request
                .send()
                .await
                .map_err(|e| store_error(&what, classify(e)))?;
            for object in output.contents() {
                let Some(path) = object.key().and_then(|k| k.strip_prefix(&self.prefix)) else {
                    continue;
                };
                last = Some(path.to_string());
                if validate_path(path).is_err() {
                    continue;
                }
                objects.push(ObjectAttrs {
                    path: path.to_string(),
                    size: object.size().map_or(0, |s| u64::try_from(s).unwrap_or(0)),
                    etag: object.e_tag().unwrap_or_default().to_string(),
                    updated_at: unix_seconds(object.last_modified()),
                });
            }
            if !output.is_truncated().unwrap_or(false) {
                return Ok(ListPage {
                    objects,
                    next: None,
                });
            }
            if limit != 0 && objects.len() >= limit {
                return Ok(ListPage {
                    objects,
                    next: last,
                });
            }
            token = match output.next_continuation_token() {
                Some(t) if !t.is_empty() => Some(t.to_string()),
                _ => {
                    return Err(StoreError::internal(format!(
                        "{what}: S3 reported more keys but gave no continuation token"
                    )));
                }
            };
        }
    }

    async fn delete(&self, path: &str) -> Result<()> {
        validate_path(path)?;
        let what = format!("object {path}");
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.key(path))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => match classify(e) {
                Failure::NotFound => Ok(()),
                failure => Err(store_error(&what, failure)),
            },
        }
    }

    /// S3's presigned GetObject URL, signed with this client's credentials (locally, no
    /// call to S3): it stops working at the earlier of its expiry and theirs.
    async fn presigned_get(&self, path: &str, request: &PresignedGet) -> Result<Option<String>> {
        validate_path(path)?;
        let what = format!("object {path}");
        let config = PresigningConfig::builder()
            .start_time(request.signed_at)
            .expires_in(request.expires_in)
            .build()
            .map_err(|e| StoreError::internal_from(format!("{what}: presigning"), e))?;
        let presigned = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.key(path))
            .set_response_content_type(request.content_type.clone())
            .set_response_cache_control(request.cache_control.clone())
            .presigned(config)
            .await
            .map_err(|e| store_error(&what, classify(e)))?;
        Ok(Some(presigned.uri().to_string()))
    }
}
