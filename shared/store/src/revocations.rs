//! Revocations: the credentials and sessions that stopped being valid, shared by every
//! instance through one filestore object (`revocations.json`).
//!
//! The verifiers cache verified credentials (no bcrypt and no read on the poll path); a
//! revocation must end such a cached verification everywhere. Recording one applies at
//! once in the process that made it, and is written to the object, which every instance
//! reads again at most every [`REFRESH`]: across instances a revocation takes effect
//! within `REFRESH` (plus the time of one read). The cost is one GET per instance per
//! `REFRESH`, whatever the number of pipeds; the document is parsed again only when its
//! etag changed, and only the caller that starts a refresh waits for it (the others keep
//! the previous copy meanwhile, for at most another `REFRESH`).
//!
//! Writers never lose each other's entries: each write is a read-modify-write with a
//! conditional put (S3's `If-Match` / `If-None-Match`; the directory filestore locks the
//! path across processes), retried on a conflict. A write that still fails is an error
//! for the caller (and counted in [`wisp_telemetry::REVOCATION_FAILURES`]): never only a
//! warning.
//!
//! An entry is kept until `until` (unix seconds): past the longest time anything it
//! revokes could still be cached (credentials) or valid (sessions, at most
//! [`MAX_KEEP`]), then dropped by the next write. The document is bounded by the
//! revocations of one such period.
//!
//! Fails closed: while the object cannot be read or parsed (and the last good copy is
//! older than [`STALE_LIMIT`], or there is none), [`Revocations::status`] answers
//! [`Status::Unknown`] for everything: the verifiers then serve no cached verification
//! (each call is checked against the datastore again) and console sessions are refused
//! with UNAVAILABLE. The failure is logged as an error and counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::filestore::{Filestore, PutCondition};
use crate::optimistic::{Attempt, optimistic_write};
use crate::support::{from_json, to_json};

/// Where the revocations live in the filestore.
pub const REVOCATIONS_PATH: &str = "revocations.json";
/// How stale an instance's copy may get before a check reads the object again.
pub const REFRESH: Duration = Duration::from_secs(10);
/// How old the last good copy may get, while the object cannot be read, before checks
/// fail closed: the documented bound of a revocation across instances (30 s).
pub const STALE_LIMIT: Duration = Duration::from_secs(30);
/// The longest an entry is kept (anything longer is cut to it): past the longest console
/// session (`wisp_auth::MAX_SESSION_TTL`, 7 days) and credential cache.
pub const MAX_KEEP: Duration = Duration::from_secs(8 * 24 * 3600);
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

/// What this instance knows of one credential or session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not revoked since the time asked about.
    Open,
    /// Revoked since then.
    Revoked,
    /// The list cannot be read (see the module's doc): treat as possibly revoked.
    Unknown,
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

/// A document read: its entries and etag (`None`: there is no object).
type Fetched = (BTreeMap<String, Entry>, Option<String>);

#[derive(Default)]
struct Local {
    entries: BTreeMap<String, Entry>,
    /// When a read was last tried.
    fetched: Option<Instant>,
    /// When a read last succeeded, and the etag it read (`None`: no object).
    good: Option<(Instant, Option<String>)>,
}

impl Local {
    /// Whether checks fail closed: no good copy, or one older than [`STALE_LIMIT`].
    fn closed(&self) -> bool {
        self.good
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= STALE_LIMIT)
    }
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

use wisp_model::clock::now_unix_ms as now_ms;

/// Logs and counts a failure of `op` (`record`, `read`).
fn failed(op: &'static str, e: &StoreError) {
    wisp_telemetry::record_revocation_failure(op);
    match op {
        "record" => tracing::error!(
            error = %crate::error::chain(&e),
            path = REVOCATIONS_PATH,
            "a revocation could not be recorded; other instances keep trusting what it revokes until the action is retried"
        ),
        _ => tracing::error!(
            error = %crate::error::chain(&e),
            path = REVOCATIONS_PATH,
            "revocations cannot be read; once the last good copy is older than 30 s, cached verifications are checked again and console sessions are refused"
        ),
    }
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

    /// Records that `what` is revoked as of now, kept until `until` (unix seconds; at most
    /// [`MAX_KEEP`] from now). Applies in this process at once, then in the shared object;
    /// an error means other instances may not know of it: the caller must say so (a retry
    /// records it again, harmlessly).
    pub async fn revoke(&self, what: Revoked<'_>, until: i64) -> Result<()> {
        let key = what.key();
        let max = now_ms() / 1000 + i64::try_from(MAX_KEEP.as_secs()).unwrap_or(i64::MAX / 2);
        let entry = Entry {
            at_ms: now_ms(),
            until: until.min(max),
        };
        self.with_local(|l| l.entries.insert(key.clone(), entry));
        let result = self.write(&key, entry).await;
        if let Err(e) = &result {
            failed("record", e);
        }
        result
    }

    async fn write(&self, key: &str, entry: Entry) -> Result<()> {
        // Created or removed since the read (AlreadyExists, NotFound): read it again.
        optimistic_write(|| async move {
            let (mut doc, condition) = match self.filestore.get(REVOCATIONS_PATH).await {
                // A corrupt document is not overwritten: that would erase what it holds.
                Ok(object) => (
                    from_json::<Document>("revocations", &object.data)?,
                    PutCondition::Matches(object.etag),
                ),
                Err(StoreError::NotFound(_)) => (Document::default(), PutCondition::Absent),
                Err(e) => return Err(e),
            };
            let now = now_ms() / 1000;
            doc.entries.retain(|_, e| e.until >= now);
            doc.entries.insert(key.to_string(), entry);
            let data = to_json("revocations", &doc)?;
            let written = self.filestore.put(REVOCATIONS_PATH, data, condition).await;
            if written.is_ok() {
                self.with_local(|l| {
                    for (k, e) in &doc.entries {
                        l.entries.insert(k.clone(), *e);
                    }
                });
            }
            Ok(Attempt::Written(written.map(|_| ())))
        })
        .await
    }

    /// Whether `what` was revoked after `since_ms` (unix milliseconds, less the clock
    /// skew allowance), as far as this instance knows (its copy at most [`REFRESH`] old),
    /// or [`Status::Unknown`] while the list cannot be read.
    pub async fn status(&self, what: Revoked<'_>, since_ms: i64) -> Status {
        self.refresh_if_stale().await;
        let key = what.key();
        self.with_local(|l| {
            if l.entries
                .get(&key)
                .is_some_and(|e| e.at_ms + CLOCK_SKEW_MS >= since_ms)
            {
                Status::Revoked
            } else if l.closed() {
                Status::Unknown
            } else {
                Status::Open
            }
        })
    }

    /// [`Self::status`], failing closed: true unless known [`Status::Open`].
    pub async fn revoked_since(&self, what: Revoked<'_>, since_ms: i64) -> bool {
        self.status(what, since_ms).await != Status::Open
    }

    async fn refresh_if_stale(&self) {
        let age = |l: &mut Local| l.fetched.map(|at| at.elapsed());
        let stale = |l: &mut Local| age(l).is_none_or(|a| a >= REFRESH);
        if !self.with_local(stale) {
            return;
        }
        // One read at a time. Callers arriving meanwhile keep the copy while it is less
        // than twice REFRESH old (only the reader waits), else wait for the read.
        let _guard = match self.refreshing.try_lock() {
            Ok(guard) => guard,
            Err(_) => {
                if self.with_local(|l| age(l).is_some_and(|a| a < 2 * REFRESH)) {
                    return;
                }
                self.refreshing.lock().await
            }
        };
        if !self.with_local(stale) {
            return;
        }
        let known = self.with_local(|l| l.good.as_ref().map(|(_, etag)| etag.clone()));
        // `Ok(None)`: the object is unchanged since the last good read.
        let fetched: Result<Option<Fetched>> = match self.filestore.get(REVOCATIONS_PATH).await {
            Ok(object) if known.as_ref() == Some(&Some(object.etag.clone())) => Ok(None),
            // Parsed off the runtime's threads: a large list takes milliseconds.
            Ok(object) => tokio::task::spawn_blocking(move || {
                from_json::<Document>("revocations", &object.data)
                    .map(|doc| Some((doc.entries, Some(object.etag))))
            })
            .await
            .unwrap_or_else(|e| Err(StoreError::internal_from("parsing revocations", e))),
            Err(StoreError::NotFound(_)) => Ok(Some((BTreeMap::new(), None))),
            Err(e) => Err(e),
        };
        if let Err(e) = &fetched {
            failed("read", e);
        }
        self.with_local(|l| {
            let now = now_ms() / 1000;
            match fetched {
                Ok(Some((entries, etag))) => {
                    // Keep what this process revoked and the object does not hold yet.
                    let mine: Vec<(String, Entry)> = l
                        .entries
                        .iter()
                        .filter(|(k, e)| e.until >= now && !entries.contains_key(*k))
                        .map(|(k, e)| (k.clone(), *e))
                        .collect();
                    l.entries = entries;
                    l.entries.extend(mine);
                    l.good = Some((Instant::now(), etag));
                }
                Ok(None) => {
                    if let Some((at, _)) = &mut l.good {
                        *at = Instant::now();
                    }
                }
                Err(_) => {}
            }
            l.entries.retain(|_, e| e.until >= now);
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
