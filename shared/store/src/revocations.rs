//! Revocations: the credentials and sessions that stopped being valid, shared by every
//! instance through one filestore object (`revocations.json`).
//!
//! The verifiers cache verified credentials (no bcrypt and no read on the poll path); a
//! revocation must end such a cached verification everywhere. Recording one applies at
//! once in the process that made it, and is written to the object, which every instance
//! reads again at most every [`REFRESH`]: across instances a revocation takes effect
//! within `REFRESH` (plus the time of one read). The cost is one GET per instance per
//! `REFRESH`, whatever the number of pipeds.
//!
//! An entry is kept until `until` (unix seconds): past the longest time anything it
//! revokes could still be cached (credentials) or valid (sessions), then dropped by the
//! next write.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::filestore::{Filestore, PutCondition};
use crate::support::{MAX_WRITE_ATTEMPTS, backoff, from_json, to_json};

/// Where the revocations live in the filestore.
pub const REVOCATIONS_PATH: &str = "revocations.json";
/// How stale an instance's copy may get before a check reads the object again.
pub const REFRESH: Duration = Duration::from_secs(10);
/// Clocks of instances differ a little: an entry revokes verifications made up to this
/// long after it (re-verifying costs one read and one bcrypt, never a wrong answer).
pub const CLOCK_SKEW_MS: i64 = 5_000;

/// What a revocation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked<'a> {
    /// A piped's credentials (disabled, or keys deleted).
    Piped {
        project_id: &'a str,
        piped_id: &'a str,
    },
    /// An API key (disabled).
    ApiKey { project_id: &'a str, id: &'a str },
    /// One console session, by its token id (logged out).
    Session { id: &'a str },
}

impl Revoked<'_> {
    /// The entry's key: each kind has its own prefix, and each id is escaped, so keys
    /// never collide.
    fn key(&self) -> String {
        let e = |part: &str| crate::support::escape_part(part, '/').into_owned();
        match self {
            Revoked::Piped {
                project_id,
                piped_id,
            } => format!("piped/{}/{}", e(project_id), e(piped_id)),
            Revoked::ApiKey { project_id, id } => {
                format!("api-key/{}/{}", e(project_id), e(id))
            }
            Revoked::Session { id } => format!("session/{}", e(id)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    /// When it was revoked, unix milliseconds.
    at_ms: i64,
    /// Kept until then, unix seconds.
    until: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Document {
    #[serde(default)]
    entries: BTreeMap<String, Entry>,
}

#[derive(Default)]
struct Local {
    entries: BTreeMap<String, Entry>,
    fetched: Option<Instant>,
}

/// The shared list of revocations, with this instance's copy of it.
#[derive(Clone)]
pub struct Revocations {
    filestore: Arc<dyn Filestore>,
    local: Arc<Mutex<Local>>,
    refreshing: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Revocations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocations").finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Revocations {
    pub fn new(filestore: Arc<dyn Filestore>) -> Self {
        Revocations {
            filestore,
            local: Arc::new(Mutex::new(Local::default())),
            refreshing: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    fn with_local<T>(&self, f: impl FnOnce(&mut Local) -> T) -> T {
        let mut local = self
            .local
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut local)
    }

    /// Records that `what` is revoked as of now, kept until `until` (unix seconds).
    /// Applies in this process at once, then in the shared object.
    pub async fn revoke(&self, what: Revoked<'_>, until: i64) -> Result<()> {
        let key = what.key();
        let entry = Entry {
            at_ms: now_ms(),
            until,
        };
        self.with_local(|l| l.entries.insert(key.clone(), entry));
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (mut doc, condition) = match self.filestore.get(REVOCATIONS_PATH).await {
                Ok(object) => (
                    from_json::<Document>("revocations", &object.data)?,
                    PutCondition::Matches(object.etag),
                ),
                Err(StoreError::NotFound(_)) => (Document::default(), PutCondition::Absent),
                Err(e) => return Err(e),
            };
            let now = now_ms() / 1000;
            doc.entries.retain(|_, e| e.until >= now);
            doc.entries.insert(key.clone(), entry);
            let data = to_json("revocations", &doc)?;
            match self.filestore.put(REVOCATIONS_PATH, data, condition).await {
                Ok(_) => {
                    self.with_local(|l| {
                        for (k, e) in &doc.entries {
                            l.entries.insert(k.clone(), *e);
                        }
                    });
                    return Ok(());
                }
                Err(StoreError::Conflict(_) | StoreError::AlreadyExists(_))
                    if attempt < MAX_WRITE_ATTEMPTS =>
                {
                    backoff(attempt).await
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `what` was revoked after `since_ms` (unix milliseconds, less the clock
    /// skew allowance), as far as this instance knows (its copy at most [`REFRESH`] old).
    /// A failed read keeps the previous copy (logged): the filestore being down must not
    /// lock every piped out.
    pub async fn revoked_since(&self, what: Revoked<'_>, since_ms: i64) -> bool {
        self.refresh_if_stale().await;
        let key = what.key();
        self.with_local(|l| {
            l.entries
                .get(&key)
                .is_some_and(|e| e.at_ms + CLOCK_SKEW_MS >= since_ms)
        })
    }

    async fn refresh_if_stale(&self) {
        let stale = |l: &mut Local| l.fetched.is_none_or(|at| at.elapsed() >= REFRESH);
        if !self.with_local(stale) {
            return;
        }
        // One read at a time; callers arriving meanwhile wait for it.
        let _guard = self.refreshing.lock().await;
        if !self.with_local(stale) {
            return;
        }
        let fetched = match self.filestore.get(REVOCATIONS_PATH).await {
            Ok(object) => match from_json::<Document>("revocations", &object.data) {
                Ok(doc) => Some(doc.entries),
                Err(e) => {
                    tracing::warn!(error = %e, "unreadable revocations; keeping the previous copy");
                    None
                }
            },
            Err(StoreError::NotFound(_)) => Some(BTreeMap::new()),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read revocations; keeping the previous copy");
                None
            }
        };
        self.with_local(|l| {
            if let Some(entries) = fetched {
                let now = now_ms() / 1000;
                // Keep what this process revoked and the object does not hold yet.
                let mine: Vec<(String, Entry)> = l
                    .entries
                    .iter()
                    .filter(|(k, e)| e.until >= now && !entries.contains_key(*k))
                    .map(|(k, e)| (k.clone(), *e))
                    .collect();
                l.entries = entries;
                l.entries.extend(mine);
            }
            // A failed read is retried after REFRESH too, not on every call.
            l.fetched = Some(Instant::now());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_per_kind() {
        let piped = Revoked::Piped {
            project_id: "p",
            piped_id: "x",
        };
        let key = Revoked::ApiKey {
            project_id: "p",
            id: "x",
        };
        assert_ne!(piped.key(), key.key());
        assert_eq!(Revoked::Session { id: "s" }.key(), "session/s");
    }
}
