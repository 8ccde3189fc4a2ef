//! `spec.datastore` and `spec.filestore`: a `type` plus a type-specific `config`.
//!
//! Upstream's types (`MYSQL`, `FIRESTORE`, `GCS`, `S3`, `MINIO`) all parse so that an
//! upstream configuration loads; [`Support`] says which ones Wisp can actually run
//! (`LOCAL`, `DYNAMODB`, `S3`, `MINIO`). Wisp adds `LOCAL` (alias `EMBEDDED`) for both, and
//! `DYNAMODB` for the datastore.

use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::SecretString;

/// Whether Wisp can run a given store type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Implemented.
    Supported,
    /// Parsed so that configurations load, but not implemented yet.
    NotYet,
    /// An upstream backend Wisp does not intend to implement.
    Unsupported,
}

// ---------------------------------------------------------------------------------------
// Datastore

/// The value of `spec.datastore.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DatastoreType {
    /// Wisp's embedded SQLite database (`EMBEDDED` is accepted as an alias).
    #[serde(rename = "LOCAL", alias = "EMBEDDED")]
    Local,
    /// Upstream's MySQL backend (not supported by Wisp).
    #[serde(rename = "MYSQL")]
    MySql,
    /// Upstream's Cloud Firestore backend (not supported by Wisp).
    #[serde(rename = "FIRESTORE")]
    Firestore,
    /// Amazon DynamoDB (one table; see `wisp-store-aws`).
    #[serde(rename = "DYNAMODB")]
    DynamoDb,
}

impl DatastoreType {
    /// The spelling used in YAML.
    pub const fn as_str(self) -> &'static str {
        match self {
            DatastoreType::Local => "LOCAL",
            DatastoreType::MySql => "MYSQL",
            DatastoreType::Firestore => "FIRESTORE",
            DatastoreType::DynamoDb => "DYNAMODB",
        }
    }

    pub const fn support(self) -> Support {
        match self {
            DatastoreType::Local | DatastoreType::DynamoDb => Support::Supported,
            DatastoreType::MySql | DatastoreType::Firestore => Support::Unsupported,
        }
    }
}

impl fmt::Display for DatastoreType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `spec.datastore`: `{type, config}`. When `config` is omitted (or null) the type's
/// defaults apply, as upstream does. When `spec.datastore` itself is omitted Wisp uses
/// `LOCAL` with its default path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", content = "config")]
pub enum DatastoreConfig {
    #[serde(rename = "LOCAL")]
    Local(LocalDatastoreConfig),
    #[serde(rename = "MYSQL")]
    MySql(MySqlConfig),
    #[serde(rename = "FIRESTORE")]
    Firestore(FirestoreConfig),
    #[serde(rename = "DYNAMODB")]
    DynamoDb(DynamoDbConfig),
}

impl Default for DatastoreConfig {
    fn default() -> Self {
        DatastoreConfig::Local(LocalDatastoreConfig::default())
    }
}

impl DatastoreConfig {
    pub const fn store_type(&self) -> DatastoreType {
        match self {
            DatastoreConfig::Local(_) => DatastoreType::Local,
            DatastoreConfig::MySql(_) => DatastoreType::MySql,
            DatastoreConfig::Firestore(_) => DatastoreType::Firestore,
            DatastoreConfig::DynamoDb(_) => DatastoreType::DynamoDb,
        }
    }

    pub const fn support(&self) -> Support {
        self.store_type().support()
    }

    pub(crate) fn problems(&self, out: &mut Vec<String>) {
        match self {
            DatastoreConfig::Local(c) => {
                if c.path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                    out.push("datastore.config.path must not be empty when given".into());
                }
            }
            DatastoreConfig::DynamoDb(c) => {
                if c.table.trim().is_empty() {
                    out.push("datastore.config.table is required for type DYNAMODB".into());
                }
                if c.endpoint.as_deref().is_some_and(|e| e.trim().is_empty()) {
                    out.push("datastore.config.endpoint must not be empty when given".into());
                }
            }
            // Parsed only: reported by `Config::ensure_supported`, not checked further.
            DatastoreConfig::MySql(_) | DatastoreConfig::Firestore(_) => {}
        }
    }
}

/// Config of the `LOCAL` (`EMBEDDED`) datastore: a SQLite file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LocalDatastoreConfig {
    /// The SQLite database file. Defaults to `<data-dir>/wisp.db`; a relative path is
    /// resolved by [`Config::resolve_relative_paths`](crate::Config::resolve_relative_paths).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

impl LocalDatastoreConfig {
    /// The configured path, or `<data_dir>/wisp.db`.
    pub fn path_or_default(&self, data_dir: &Path) -> PathBuf {
        self.path
            .clone()
            .unwrap_or_else(|| data_dir.join(crate::DEFAULT_DB_FILE_NAME))
    }
}

/// Upstream's MySQL datastore config (parsed only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MySqlConfig {
    /// Server address, possibly with credentials (`user:pass@tcp(host:3306)`).
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
}

/// Upstream's Cloud Firestore datastore config (parsed only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FirestoreConfig {
    pub namespace: String,
    pub environment: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collection_name_prefix: Option<String>,
    pub project: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_file: Option<PathBuf>,
}

/// Wisp's DynamoDB datastore config: one table holds every record kind (single-table
/// design; `wisp aws init` creates it). Credentials come from the standard AWS chain
/// (environment, profile, web identity, container or instance role).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DynamoDbConfig {
    /// The table holding every record kind (required).
    pub table: String,
    /// AWS region; the environment's (`AWS_REGION`) when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Endpoint override (DynamoDB Local, LocalStack, moto).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

// ---------------------------------------------------------------------------------------
// Filestore

/// The value of `spec.filestore.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FilestoreType {
    /// Wisp's local directory (`EMBEDDED` is accepted as an alias).
    #[serde(rename = "LOCAL", alias = "EMBEDDED")]
    Local,
    /// Google Cloud Storage (not supported by Wisp).
    #[serde(rename = "GCS")]
    Gcs,
    /// Amazon S3 (or an S3-compatible endpoint).
    #[serde(rename = "S3")]
    S3,
    /// MinIO, through the S3 API (upstream's `type: MINIO`).
    #[serde(rename = "MINIO")]
    Minio,
}

impl FilestoreType {
    /// The spelling used in YAML.
    pub const fn as_str(self) -> &'static str {
        match self {
            FilestoreType::Local => "LOCAL",
            FilestoreType::Gcs => "GCS",
            FilestoreType::S3 => "S3",
            FilestoreType::Minio => "MINIO",
        }
    }

    pub const fn support(self) -> Support {
        match self {
            FilestoreType::Local | FilestoreType::S3 | FilestoreType::Minio => Support::Supported,
            FilestoreType::Gcs => Support::Unsupported,
        }
    }
}

impl fmt::Display for FilestoreType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `spec.filestore`: `{type, config}`, read like [`DatastoreConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", content = "config")]
pub enum FilestoreConfig {
    #[serde(rename = "LOCAL")]
    Local(LocalFilestoreConfig),
    #[serde(rename = "GCS")]
    Gcs(GcsConfig),
    #[serde(rename = "S3")]
    S3(S3Config),
    #[serde(rename = "MINIO")]
    Minio(MinioConfig),
}

impl Default for FilestoreConfig {
    fn default() -> Self {
        FilestoreConfig::Local(LocalFilestoreConfig::default())
    }
}

impl FilestoreConfig {
    pub const fn store_type(&self) -> FilestoreType {
        match self {
            FilestoreConfig::Local(_) => FilestoreType::Local,
            FilestoreConfig::Gcs(_) => FilestoreType::Gcs,
            FilestoreConfig::S3(_) => FilestoreType::S3,
            FilestoreConfig::Minio(_) => FilestoreType::Minio,
        }
    }

    pub const fn support(&self) -> Support {
        self.store_type().support()
    }

    pub(crate) fn problems(&self, out: &mut Vec<String>) {
        match self {
            FilestoreConfig::Local(c) => {
                if c.dir.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                    out.push("filestore.config.dir must not be empty when given".into());
                }
            }
            FilestoreConfig::S3(c) => {
                if c.bucket.trim().is_empty() {
                    out.push("filestore.config.bucket is required for type S3".into());
                }
                if c.endpoint.as_deref().is_some_and(|e| e.trim().is_empty()) {
                    out.push("filestore.config.endpoint must not be empty when given".into());
                }
            }
            FilestoreConfig::Minio(c) => {
                if c.bucket.trim().is_empty() {
                    out.push("filestore.config.bucket is required for type MINIO".into());
                }
                if c.endpoint.trim().is_empty() {
                    out.push("filestore.config.endpoint is required for type MINIO".into());
                }
            }
            // Parsed only: reported by `Config::ensure_supported`.
            FilestoreConfig::Gcs(_) => {}
        }
    }
}

/// Config of the `LOCAL` (`EMBEDDED`) filestore: a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LocalFilestoreConfig {
    /// The root directory. Defaults to `<data-dir>/filestore`; a relative path is
    /// resolved by [`Config::resolve_relative_paths`](crate::Config::resolve_relative_paths).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
}

impl LocalFilestoreConfig {
    /// The configured directory, or `<data_dir>/filestore`.
    pub fn dir_or_default(&self, data_dir: &Path) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| data_dir.join(crate::DEFAULT_FILESTORE_DIR_NAME))
    }
}

/// Upstream's Google Cloud Storage filestore config (parsed only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GcsConfig {
    pub bucket: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_file: Option<PathBuf>,
}

/// Amazon S3 filestore config: upstream's fields plus Wisp's `prefix` and `endpoint`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct S3Config {
    pub bucket: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// AWS profile name (upstream's default is `default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_file: Option<PathBuf>,
    /// Role to assume with a web identity token.
    #[serde(
        rename = "roleARN",
        alias = "roleArn",
        skip_serializing_if = "Option::is_none"
    )]
    pub role_arn: Option<String>,
    /// Web identity token file used with `roleARN`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// Wisp: key prefix under which every object is stored (e.g. `wisp/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Wisp: endpoint override (S3-compatible stores, LocalStack).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// Upstream's MinIO filestore config: the bucket at `endpoint`, reached through the S3
/// API with the keys in `accessKeyFile` and `secretKeyFile`; `autoCreateBucket` creates
/// the bucket when it is missing, as upstream does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MinioConfig {
    pub endpoint: String,
    pub bucket: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_key_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_key_file: Option<PathBuf>,
    pub auto_create_bucket: bool,
}

impl MinioConfig {
    /// The access key and the secret key, read from their files (without trailing line
    /// breaks). Errors name the field or the file, never a key.
    pub fn load_keys(&self) -> Result<(String, SecretString), crate::ConfigError> {
        let read = |path: &Option<PathBuf>, field: &str| {
            let path = path.as_ref().ok_or_else(|| {
                crate::ConfigError::Unsupported(format!(
                    "filestore.config.{field} is required for type MINIO"
                ))
            })?;
            let text = std::fs::read_to_string(path).map_err(|source| crate::ConfigError::Io {
                path: path.clone(),
                source,
            })?;
            Ok::<_, crate::ConfigError>(text.trim_end_matches(['\n', '\r']).to_owned())
        };
        let access = read(&self.access_key_file, "accessKeyFile")?;
        let secret = read(&self.secret_key_file, "secretKeyFile")?;
        Ok((access, SecretString::new(secret)))
    }
}

// ---------------------------------------------------------------------------------------
// Deserialization of `{type, config}`.
//
// Hand-written rather than derived so that (a) `config` may be omitted or null, as
// upstream allows, and (b) when `type` comes first (the usual order) `config` is read
// straight from the YAML, so errors inside it keep their exact line and column.

/// A `{type, config}` pair: how to read `config` once the type is known.
pub(crate) trait TaggedStore: Sized {
    type Kind: for<'de> Deserialize<'de> + Copy;
    const EXPECTING: &'static str;

    /// Reads `config` for `kind` (`None` when the key is absent or null).
    fn read_config<'de, D: Deserializer<'de>>(kind: Self::Kind, d: D) -> Result<Self, D::Error>;
}

pub(crate) fn config_or_default<'de, T, D>(d: D) -> Result<T, D::Error>
where
    T: Deserialize<'de> + Default,
    D: Deserializer<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl TaggedStore for DatastoreConfig {
    type Kind = DatastoreType;
    const EXPECTING: &'static str = "a datastore `{type, config}` mapping";

    fn read_config<'de, D: Deserializer<'de>>(kind: DatastoreType, d: D) -> Result<Self, D::Error> {
        Ok(match kind {
            DatastoreType::Local => DatastoreConfig::Local(config_or_default(d)?),
            DatastoreType::MySql => DatastoreConfig::MySql(config_or_default(d)?),
            DatastoreType::Firestore => DatastoreConfig::Firestore(config_or_default(d)?),
            DatastoreType::DynamoDb => DatastoreConfig::DynamoDb(config_or_default(d)?),
        })
    }
}

impl TaggedStore for FilestoreConfig {
    type Kind = FilestoreType;
    const EXPECTING: &'static str = "a filestore `{type, config}` mapping";

    fn read_config<'de, D: Deserializer<'de>>(kind: FilestoreType, d: D) -> Result<Self, D::Error> {
        Ok(match kind {
            FilestoreType::Local => FilestoreConfig::Local(config_or_default(d)?),
            FilestoreType::Gcs => FilestoreConfig::Gcs(config_or_default(d)?),
            FilestoreType::S3 => FilestoreConfig::S3(config_or_default(d)?),
            FilestoreType::Minio => FilestoreConfig::Minio(config_or_default(d)?),
        })
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum TaggedField {
    Type,
    Config,
}

pub(crate) struct ConfigSeed<T: TaggedStore>(pub(crate) T::Kind);

impl<'de, T: TaggedStore> DeserializeSeed<'de> for ConfigSeed<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        T::read_config(self.0, d)
    }
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: TaggedStore> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut kind: Option<T::Kind> = None;
        let mut config: Option<T> = None;
        // `config` seen before `type`: kept as a YAML value until the type is known.
        let mut early_config: Option<serde_norway::Value> = None;
        while let Some(field) = map.next_key::<TaggedField>()? {
            match field {
                TaggedField::Type => {
                    if kind.is_some() {
                        return Err(de::Error::duplicate_field("type"));
                    }
                    kind = Some(map.next_value()?);
                }
                TaggedField::Config => {
                    if config.is_some() || early_config.is_some() {
                        return Err(de::Error::duplicate_field("config"));
                    }
                    match kind {
                        Some(k) => config = Some(map.next_value_seed(ConfigSeed::<T>(k))?),
                        None => early_config = Some(map.next_value()?),
                    }
                }
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        match (config, early_config) {
            (Some(config), _) => Ok(config),
            (None, Some(value)) => ConfigSeed::<T>(kind)
                .deserialize(value)
                .map_err(|e| de::Error::custom(format_args!("config: {e}"))),
            (None, None) => {
                ConfigSeed::<T>(kind).deserialize(de::value::UnitDeserializer::<A::Error>::new())
            }
        }
    }
}

const TAGGED_FIELDS: &[&str] = &["type", "config"];

impl<'de> Deserialize<'de> for DatastoreConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct("DatastoreConfig", TAGGED_FIELDS, TaggedVisitor(PhantomData))
    }
}

impl<'de> Deserialize<'de> for FilestoreConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct("FilestoreConfig", TAGGED_FIELDS, TaggedVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(yaml: &str) -> Result<DatastoreConfig, serde_norway::Error> {
        serde_norway::from_str(yaml)
    }

    fn fs(yaml: &str) -> Result<FilestoreConfig, serde_norway::Error> {
        serde_norway::from_str(yaml)
    }

    #[test]
    fn local_and_embedded_alias() {
        let a = ds("type: LOCAL\nconfig:\n  path: /var/lib/wisp/x.db\n").expect("LOCAL");
        let b = ds("type: EMBEDDED\nconfig: {path: /var/lib/wisp/x.db}\n").expect("EMBEDDED");
        assert_eq!(a, b);
        assert_eq!(a.store_type(), DatastoreType::Local);
        assert_eq!(a.support(), Support::Supported);
        assert_eq!(
            a,
            DatastoreConfig::Local(LocalDatastoreConfig {
                path: Some("/var/lib/wisp/x.db".into())
            })
        );
        let f = fs("type: EMBEDDED\nconfig: {dir: ./files}\n").expect("EMBEDDED filestore");
        assert_eq!(
            f,
            FilestoreConfig::Local(LocalFilestoreConfig {
                dir: Some("./files".into())
            })
        );
    }

    #[test]
    fn config_may_be_absent_null_or_first() {
        assert_eq!(
            ds("type: LOCAL\n").expect("absent"),
            DatastoreConfig::default()
        );
        assert_eq!(
            ds("type: LOCAL\nconfig:\n").expect("null"),
            DatastoreConfig::default()
        );
        let first = ds("config:\n  table: wisp\n  region: eu-west-1\ntype: DYNAMODB\n")
            .expect("config before type");
        assert_eq!(
            first,
            DatastoreConfig::DynamoDb(DynamoDbConfig {
                table: "wisp".into(),
                region: Some("eu-west-1".into()),
                endpoint: None,
            })
        );
        assert_eq!(first.support(), Support::Supported);
    }

    #[test]
    fn errors_inside_config_keep_their_location() {
        let err = ds("type: MYSQL\nconfig:\n  url: x\n  passwrd: y\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("unknown field `passwrd`"), "{msg}");
        let loc = err.location().expect("location");
        assert_eq!((loc.line(), loc.column()), (4, 3), "{msg}");

        // Buffered case: the message still names the field.
        let err = ds("config:\n  passwrd: y\ntype: MYSQL\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `passwrd`"), "{err}");
    }

    #[test]
    fn bad_shapes_are_rejected() {
        let err = ds("type: POSTGRES\n").unwrap_err().to_string();
        assert!(err.contains("POSTGRES") && err.contains("MYSQL"), "{err}");
        let err = ds("config: {}\n").unwrap_err().to_string();
        assert!(err.contains("missing field `type`"), "{err}");
        let err = ds("type: LOCAL\nconfigs: {}\n").unwrap_err().to_string();
        assert!(err.contains("unknown field `configs`"), "{err}");
        let err = ds("type: LOCAL\ntype: LOCAL\n").unwrap_err().to_string();
        assert!(err.contains("duplicate"), "{err}");
        let err = fs("type: LOCAL\nconfig: {path: x}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `path`"), "{err}");
    }

    #[test]
    fn s3_fields() {
        let f = fs("type: S3
config:
  bucket: b
  region: us-east-1
  profile: p
  credentialsFile: /c
  roleARN: arn:aws:iam::1:role/r
  tokenFile: /t
  prefix: wisp/
  endpoint: http://localhost:4566
")
        .expect("S3");
        let FilestoreConfig::S3(s3) = &f else {
            panic!("not S3: {f:?}")
        };
        assert_eq!(s3.role_arn.as_deref(), Some("arn:aws:iam::1:role/r"));
        assert_eq!(s3.prefix.as_deref(), Some("wisp/"));
        assert_eq!(s3.endpoint.as_deref(), Some("http://localhost:4566"));
        assert_eq!(f.support(), Support::Supported);

        // Round trip through the adjacently tagged serialization.
        let text = serde_norway::to_string(&f).expect("serialize");
        assert_eq!(fs(&text).expect("reparse"), f);
    }

    #[test]
    fn default_paths() {
        let data = Path::new("/data");
        assert_eq!(
            LocalDatastoreConfig::default().path_or_default(data),
            Path::new("/data/wisp.db")
        );
        assert_eq!(
            LocalFilestoreConfig::default().dir_or_default(data),
            Path::new("/data/filestore")
        );
    }
}
