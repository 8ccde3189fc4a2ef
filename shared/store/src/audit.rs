//! The audit log: one entry per change made through any entry point (the console, pipectl,
//! a piped's record-changing calls, the admin CLI, the scheduled jobs), saying who, what,
//! when, from where and with what result. Never a secret: the actor is a user name, an API
//! key's id or a piped's id; the targets are ids and names taken from the request.
//!
//! Stored as datastore kind `AuditEvent` (so every backend holds it with no code of its
//! own, and `wisp migrate` copies it): one record per entry, data = the entry as JSON,
//! index slot 0 = (project, time in milliseconds, zero-padded) so that a project's entries
//! are read newest first, and an expiry of `at + retention` (DynamoDB's TTL deletes it;
//! the embedded store stops returning it). Each entry is also written as one JSON line
//! with tracing target `audit`, so that on AWS CloudWatch Logs holds it too.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::datastore::{Datastore, IndexKey, Kind, Query, Record};
use crate::error::{Result, StoreError};

/// Index slot holding (project, `at_ms` zero-padded).
pub const AUDIT_BY_PROJECT: usize = 0;
/// How long entries are kept when the configuration says nothing: 90 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(90 * 24 * 3600);

/// One audited change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Unique; sorts by time.
    pub id: String,
    /// Unix milliseconds.
    pub at_ms: i64,
    /// The project changed (empty for a change outside any project, such as a job's run
    /// over every project).
    pub project_id: String,
    /// Who: `user:<name>`, `api-key:<id>`, `piped:<id>`, `cli:<os user>`, `job:<name>`.
    pub actor: String,
    /// What: `<Service>/<Method>` for a call (`WebService/DisablePiped`), `cli/<command>`
    /// or `job/<name>`.
    pub method: String,
    /// The ids (or names) the request named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// From where: the client's address as the edge saw it (the TCP peer on `wisp serve`,
    /// the load balancer's `X-Forwarded-For` on Lambda); `local` for the CLI and jobs.
    pub source: String,
    /// The result: a gRPC code name (`OK`, `PERMISSION_DENIED`, ...), or `ERROR` for a CLI
    /// command or job that failed.
    pub code: String,
}

impl AuditEntry {
    /// An entry stamped now, with a fresh id.
    pub fn now(
        project_id: impl Into<String>,
        actor: impl Into<String>,
        method: impl Into<String>,
        targets: Vec<String>,
        source: impl Into<String>,
        code: impl Into<String>,
    ) -> AuditEntry {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        AuditEntry {
            id: format!("{at_ms:016}-{:016x}", rand::random::<u64>()),
            at_ms,
            project_id: project_id.into(),
            actor: actor.into(),
            method: method.into(),
            targets,
            source: source.into(),
            code: code.into(),
        }
    }
}

/// What [`AuditStore::list`] returns: all given filters must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Entries at or after this time (unix milliseconds).
    pub since_ms: Option<i64>,
    /// The actor, exactly (`user:alice`) or by its id alone (`alice`).
    pub actor: Option<String>,
    /// The method, exactly (`WebService/DisablePiped`) or by its last part
    /// (`DisablePiped`).
    pub method: Option<String>,
    /// At most this many entries (newest first); 0 = no bound.
    pub limit: usize,
}

impl AuditFilter {
    fn matches(&self, e: &AuditEntry) -> bool {
        let actor_ok = self
            .actor
            .as_deref()
            .is_none_or(|a| e.actor == a || e.actor.split_once(':').is_some_and(|(_, id)| id == a));
        let method_ok = self.method.as_deref().is_none_or(|m| {
            e.method == m || e.method.rsplit('/').next().is_some_and(|last| last == m)
        });
        actor_ok && method_ok
    }
}

/// The audit log over a datastore.
#[derive(Clone)]
pub struct AuditStore {
    datastore: Arc<dyn Datastore>,
    retention: Duration,
}

impl std::fmt::Debug for AuditStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditStore")
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl AuditStore {
    pub fn new(datastore: Arc<dyn Datastore>) -> Self {
        AuditStore {
            datastore,
            retention: DEFAULT_RETENTION,
        }
    }

    /// Entries expire this long after they were made.
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// Writes the entry's JSON line (tracing target `audit`), then stores it.
    pub async fn record(&self, entry: &AuditEntry) -> Result<()> {
        let json = serde_json::to_string(entry)
            .map_err(|e| StoreError::internal_from("encode an audit entry", e))?;
        tracing::info!(target: "audit", "{json}");
        self.store(entry, json).await
    }

    /// Stores the entry without a log line (the CLI, whose stderr is for its user).
    pub async fn record_quietly(&self, entry: &AuditEntry) -> Result<()> {
        let json = serde_json::to_string(entry)
            .map_err(|e| StoreError::internal_from("encode an audit entry", e))?;
        self.store(entry, json).await
    }

    async fn store(&self, entry: &AuditEntry, json: String) -> Result<()> {
        let retention = i64::try_from(self.retention.as_secs()).unwrap_or(i64::MAX);
        let record = Record {
            id: entry.id.clone(),
            project_id: entry.project_id.clone(),
            version: 1,
            data: json.into_bytes(),
            indexes: [
                Some(IndexKey::new(
                    entry.project_id.clone(),
                    format!("{:016}", entry.at_ms),
                )),
                None,
                None,
            ],
            expires_at: Some((entry.at_ms / 1000).saturating_add(retention)),
        };
        self.datastore.create(Kind::AuditEvent, record).await
    }

    /// [`AuditStore::record`], logging (never returning) a failure to store: the change
    /// it records has already been made, and its JSON line was written.
    pub async fn record_or_log(&self, entry: &AuditEntry) {
        if let Err(e) = self.record(entry).await {
            tracing::error!(
                error = %wisp_telemetry::chain(&e),
                id = %entry.id,
                "the audit entry was logged but could not be stored"
            );
        }
    }

    /// The project's entries matching `filter`, newest first.
    pub async fn list(&self, project_id: &str, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let mut query = Query::new(Kind::AuditEvent, AUDIT_BY_PROJECT, project_id);
        query.descending = true;
        query.sk_from = filter.since_ms.map(|ms| format!("{:016}", ms.max(0)));
        let mut out = Vec::new();
        loop {
            let page = self.datastore.query(&query).await?;
            for (record, _) in &page.records {
                if record.project_id != project_id {
                    continue;
                }
                let entry: AuditEntry = serde_json::from_slice(&record.data).map_err(|e| {
                    StoreError::internal_from(
                        format!("corrupt {} {}", Kind::AuditEvent, record.id),
                        e,
                    )
                })?;
                if filter.matches(&entry) {
                    out.push(entry);
                    if filter.limit != 0 && out.len() >= filter.limit {
                        return Ok(out);
                    }
                }
            }
            match page.records.last() {
                Some((_, cursor)) if page.more => query.after = Some(cursor.clone()),
                _ => break,
            }
        }
        Ok(out)
    }
}
