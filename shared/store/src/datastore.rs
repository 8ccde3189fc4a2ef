//! The record-level datastore contract every backend implements. See
//! docs/ARCHITECTURE.md ("Datastore model") for why it is shaped like this.

use async_trait::async_trait;

use crate::error::Result;

/// Number of secondary-index slots a record may fill (DynamoDB GSIs / SQLite indexes).
pub const INDEX_SLOTS: usize = 3;

/// The collections Wisp stores. The string forms are stable: they are persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Project,
    Application,
    Command,
    Deployment,
    Piped,
    ApiKey,
    Event,
    DeploymentChain,
    DeploymentTrace,
    /// Last ReportStat per piped (decides ONLINE/OFFLINE); kept out of the cache-only path.
    PipedStat,
    /// Unregistered application configs reported per piped.
    UnregisteredApps,
    /// The audit log (`crate::audit`): JSON entries that expire after the retention.
    AuditEvent,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Project,
        Kind::Application,
        Kind::Command,
        Kind::Deployment,
        Kind::Piped,
        Kind::ApiKey,
        Kind::Event,
        Kind::DeploymentChain,
        Kind::DeploymentTrace,
        Kind::PipedStat,
        Kind::UnregisteredApps,
        Kind::AuditEvent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Project => "Project",
            Kind::Application => "Application",
            Kind::Command => "Command",
            Kind::Deployment => "Deployment",
            Kind::Piped => "Piped",
            Kind::ApiKey => "APIKey",
            Kind::Event => "Event",
            Kind::DeploymentChain => "DeploymentChain",
            Kind::DeploymentTrace => "DeploymentTrace",
            Kind::PipedStat => "PipedStat",
            Kind::UnregisteredApps => "UnregisteredApps",
            Kind::AuditEvent => "AuditEvent",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a secondary index: partition value and sort value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexKey {
    pub pk: String,
    pub sk: String,
}

impl IndexKey {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        IndexKey {
            pk: pk.into(),
            sk: sk.into(),
        }
    }
}

/// A stored entity as the backend sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub id: String,
    pub project_id: String,
    /// Optimistic-concurrency counter; backends set it (1 on create, +1 per put).
    pub version: u64,
    /// Protobuf encoding of the entity.
    pub data: Vec<u8>,
    /// Secondary-index entries; `None` keeps the record out of that index.
    pub indexes: [Option<IndexKey>; INDEX_SLOTS],
    /// Unix seconds after which the record may be dropped (DynamoDB TTL); `None` = never.
    pub expires_at: Option<i64>,
}

/// A range read on one secondary index.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub kind: Kind,
    pub slot: usize,
    pub pk: String,
    /// Inclusive lower bound on `sk`.
    pub sk_from: Option<String>,
    /// Exclusive upper bound on `sk`.
    pub sk_to: Option<String>,
    /// Order by `(sk, id)` descending instead of ascending.
    pub descending: bool,
    /// At most this many records in the page (backends may return fewer).
    pub page_size: usize,
    /// Resume strictly after the record this cursor was issued for.
    pub after: Option<String>,
}

impl Query {
    pub fn new(kind: Kind, slot: usize, pk: impl Into<String>) -> Self {
        Query {
            kind,
            slot,
            pk: pk.into(),
            sk_from: None,
            sk_to: None,
            descending: false,
            page_size: 100,
            after: None,
        }
    }
}

/// One page of a query or scan. Each record comes with the opaque cursor that resumes
/// right after it, so a caller that stops mid-page can still hand out a cursor.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub records: Vec<(Record, String)>,
    /// True when the backend may have more records after the last one returned.
    pub more: bool,
}

#[async_trait]
pub trait Datastore: Send + Sync + 'static {
    /// `NotFound` when absent.
    async fn get(&self, kind: Kind, id: &str) -> Result<Record>;
    /// `AlreadyExists` when the id is taken. Stores version 1 whatever `record.version` says.
    async fn create(&self, kind: Kind, record: Record) -> Result<()>;
    /// Replace the record if its stored version is `expected_version`; store
    /// `expected_version + 1`. `NotFound` when absent, `Conflict` on a version mismatch.
    async fn put(&self, kind: Kind, record: Record, expected_version: u64) -> Result<()>;
    /// Delete the record if its stored version is `expected_version` (`Conflict` otherwise,
    /// `NotFound` when absent).
    async fn delete(&self, kind: Kind, id: &str, expected_version: u64) -> Result<()>;
    /// A range read on one index slot, ordered by `(sk, id)`.
    async fn query(&self, query: &Query) -> Result<Page>;
    /// Every record of a kind in id order. Batch jobs and `wisp migrate` only — never a
    /// request path.
    async fn scan(&self, kind: Kind, after: Option<&str>, page_size: usize) -> Result<Page>;
}
