//! Bounds on the slow-hash work (bcrypt, tens of milliseconds of CPU each) a caller can
//! make a verifier do. Keys Wisp generates are stored with a fast hash and skip all of
//! this; bcrypt remains for keys imported from upstream PipeCD (and passwords). A credential id is not a secret (piped ids sit in configs, API key
//! ids on the console), so anyone can send one with made-up keys. Without bounds, each
//! such call costs one bcrypt, and two cores saturate at about 20 calls a second.
//!
//! * A key once matched against a stored hash is remembered as (id, hash) → SHA-256 of
//!   the key: re-verifying it later, after the verified cache expires, reads the store but
//!   runs no bcrypt. Removing the hash from the store (key rotation, piped deleted) ends
//!   the match.
//! * One slow check per credential id at a time: concurrent first calls of a piped share
//!   one check; the others find the result remembered.
//! * At most [`HashPolicy::failures_per_id`] failed slow checks per id and source address
//!   (an IPv6 address's /64) per [`HashPolicy::failure_window`]; past it, new keys for the
//!   id from that source are refused without a check. A key already remembered still
//!   works, and the budget is per source, so a flood aimed at a piped's id from elsewhere
//!   locks out neither the piped's remembered key nor its first check of an imported
//!   bcrypt key. (Without a known source, the budget is the id's.) What all sources
//!   together cost is bounded by the slots below.
//! * At most [`HashPolicy::slots`] slow checks run at once in the process, and at most
//!   [`HashPolicy::max_waiting`] wait for a slot, each for at most
//!   [`HashPolicy::max_wait`]. Past that a caller gets UNAVAILABLE at once, which pipeds
//!   retry, instead of a queue that grows until every caller times out.
//! * Nothing starts for a caller that has gone: waiting for a turn or a slot is part of
//!   the caller's future, dropped with it (connection closed, `grpc-timeout` passed). A
//!   check that has started finishes and records its result, so the caller's retry finds
//!   it instead of paying again.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::error::{AuthError, SourceError};
use crate::keys::{is_slow_hash, verify_secret};
use crate::ttl_cache::{MAX_TTL, TtlCache};

/// Limits on slow-hash work. `Default` is the production policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashPolicy {
    /// Slow checks running at once (default: half the CPUs, at least one, so that a
    /// flood of checks leaves the other half to the pipeds' calls).
    pub slots: usize,
    /// Checks waiting for a slot before callers are turned away.
    pub max_waiting: usize,
    /// How long a check waits for a slot (or for the check of the same id before it).
    pub max_wait: Duration,
    /// Failed slow checks per id per window.
    pub failures_per_id: u32,
    pub failure_window: Duration,
    /// How long a matched key is remembered (zero: not at all).
    pub remember_matches: Duration,
}

impl Default for HashPolicy {
    fn default() -> Self {
        HashPolicy {
            slots: std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)),
            max_waiting: 256,
            max_wait: Duration::from_secs(5),
            failures_per_id: 10,
            failure_window: Duration::from_secs(60),
            remember_matches: MAX_TTL,
        }
    }
}

/// Entries of the per-id tables.
const CAPACITY: usize = 100_000;

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Check {
    /// With the slow hash that matched, if it was one.
    Matched(Option<String>),
    NoMatch,
    /// The id failed too often lately; nothing was checked.
    TooManyFailures,
}

pub(crate) struct HashGuard {
    policy: HashPolicy,
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    /// Shared with the checks running on the blocking pool, which record their own results.
    outcomes: Arc<Outcomes>,
    /// id → the lock its slow checks take in turn.
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

struct Outcomes {
    /// (id, stored hash) → SHA-256 of the key that matched it.
    matched: TtlCache<(String, String), [u8; 32]>,
    /// id → failed slow checks in the current window.
    failures: TtlCache<String, u32>,
    /// Slow comparisons run so far.
    slow_checks: AtomicU64,
    credential: &'static str,
}

impl Outcomes {
    /// Compares `secret` with each of `hashes` (the CPU work) and records what it found
    /// (a failure under `failure_key`).
    fn compare(
        &self,
        id: &str,
        failure_key: &str,
        secret: &str,
        digest: [u8; 32],
        hashes: &[String],
    ) -> Check {
        let mut compared = 0u64;
        let found = hashes.iter().find(|hash| {
            compared += 1;
            verify_secret(secret, hash)
        });
        self.slow_checks.fetch_add(compared, Ordering::Relaxed);
        wisp_telemetry::record_slow_hashes(self.credential, compared);
        match found {
            Some(hash) => {
                self.matched.insert((id.to_owned(), hash.clone()), digest);
                Check::Matched(Some(hash.clone()))
            }
            None => {
                let failed = self
                    .failures
                    .get(failure_key)
                    .unwrap_or(0)
                    .saturating_add(1);
                self.failures.insert(failure_key.to_owned(), failed);
                Check::NoMatch
            }
        }
    }
}

pub(crate) fn sha256(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn busy() -> AuthError {
    AuthError::Unavailable(SourceError::new("too many credential checks in progress"))
}

impl HashGuard {
    /// `credential` labels the slow checks in the metrics (`piped`, `api_key`).
    pub(crate) fn new(policy: HashPolicy, credential: &'static str) -> Self {
        HashGuard {
            slots: Arc::new(Semaphore::new(policy.slots.max(1))),
            waiting: AtomicUsize::new(0),
            outcomes: Arc::new(Outcomes {
                matched: TtlCache::new(policy.remember_matches.min(MAX_TTL), CAPACITY),
                failures: TtlCache::new(policy.failure_window.min(MAX_TTL), CAPACITY),
                slow_checks: AtomicU64::new(0),
                credential,
            }),
            in_flight: Mutex::new(HashMap::new()),
            policy,
        }
    }

    pub(crate) fn slow_checks(&self) -> u64 {
        self.outcomes.slow_checks.load(Ordering::Relaxed)
    }

    pub(crate) fn forget(&self, id: &str) {
        let outcomes = &self.outcomes;
        outcomes.matched.remove_where(|(key_id, _), _| key_id == id);
        outcomes
            .failures
            .remove_where(|key, _| key == id || key.split('\n').next() == Some(id));
    }

    pub(crate) fn clear(&self) {
        self.outcomes.matched.clear();
        self.outcomes.failures.clear();
    }

    /// The stored hash `digest`'s key matched before, if any.
    fn remembered(&self, id: &str, digest: &[u8; 32], hashes: &[String]) -> Option<String> {
        hashes
            .iter()
            .find(|hash| {
                self.outcomes
                    .matched
                    .get(&(id.to_owned(), (*hash).clone()))
                    .is_some_and(|known| known == *digest)
            })
            .cloned()
    }

    fn over_budget(&self, failure_key: &str) -> bool {
        self.outcomes
            .failures
            .get(failure_key)
            .is_some_and(|n| n >= self.policy.failures_per_id)
    }

    /// Whether `secret`, sent from `source` if known, matches one of `hashes`, the stored
    /// hashes of credential `id`.
    pub(crate) async fn check(
        &self,
        id: &str,
        secret: &str,
        hashes: &[String],
        source: Option<IpAddr>,
    ) -> Result<Check, AuthError> {
        let failure_key = failure_key(id, source);
        // Generated keys' hashes cost microseconds: checked at once, no bounds needed.
        let (fast, slow): (Vec<&String>, Vec<&String>) =
            hashes.iter().partition(|h| !is_slow_hash(h));
        if fast.iter().any(|h| verify_secret(secret, h)) {
            return Ok(Check::Matched(None));
        }
        if slow.is_empty() {
            return Ok(Check::NoMatch);
        }
        let hashes: Vec<String> = slow.into_iter().cloned().collect();
        let hashes = hashes.as_slice();
        let digest = sha256(secret);
        if let Some(hash) = self.remembered(id, &digest, hashes) {
            return Ok(Check::Matched(Some(hash)));
        }
        if self.over_budget(&failure_key) {
            return Ok(Check::TooManyFailures);
        }

        // One slow check per id at a time; the next one in line looks again first.
        let lock = {
            let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(id.to_owned()).or_default().clone()
        };
        let entry = InFlightEntry {
            guard: self,
            id,
            lock,
        };
        self.check_in_turn(entry.lock.clone(), id, &failure_key, secret, digest, hashes)
            .await
    }

    async fn check_in_turn(
        &self,
        lock: Arc<tokio::sync::Mutex<()>>,
        id: &str,
        failure_key: &str,
        secret: &str,
        digest: [u8; 32],
        hashes: &[String],
    ) -> Result<Check, AuthError> {
        let turn = self.wait(lock.lock_owned()).await?;
        if let Some(hash) = self.remembered(id, &digest, hashes) {
            return Ok(Check::Matched(Some(hash)));
        }
        if self.over_budget(failure_key) {
            return Ok(Check::TooManyFailures);
        }
        let slot = self.wait(self.slots.clone().acquire_owned()).await?;
        let slot = slot.map_err(|_| busy())?;
        let (outcomes, id, failure_key, secret, hashes) = (
            self.outcomes.clone(),
            id.to_owned(),
            failure_key.to_owned(),
            secret.to_owned(),
            hashes.to_vec(),
        );
        // The turn and the slot move into the blocking task: they are held until the CPU
        // work ends, even if the caller has gone away meanwhile.
        let work = tokio::task::spawn_blocking(move || {
            let _held = (turn, slot);
            outcomes.compare(&id, &failure_key, &secret, digest, &hashes)
        });
        work.await.map_err(|_| busy())
    }

    /// Waits for `turn` within the policy's bounds on waiting.
    async fn wait<F: std::future::Future>(&self, turn: F) -> Result<F::Output, AuthError> {
        let _in_line = InLine::join(&self.waiting, self.policy.max_waiting).ok_or_else(busy)?;
        tokio::time::timeout(self.policy.max_wait, turn)
            .await
            .map_err(|_| busy())
    }
}

/// What failures are counted under: the id, and the source when known (an IPv6
/// address's /64, which one host can change at will).
fn failure_key(id: &str, source: Option<IpAddr>) -> String {
    match source {
        None => id.to_owned(),
        Some(IpAddr::V4(v4)) => format!("{id}\n{v4}"),
        Some(IpAddr::V6(v6)) => {
            let [a, b, c, d, ..] = v6.segments();
            format!("{id}\n{a:x}:{b:x}:{c:x}:{d:x}::/64")
        }
    }
}

/// The per-id lock a check took, removed from the table when nobody else holds it (also
/// when the caller has gone; a check still running keeps it for the next one).
struct InFlightEntry<'a> {
    guard: &'a HashGuard,
    id: &'a str,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Drop for InFlightEntry<'_> {
    fn drop(&mut self) {
        let mut map = self
            .guard
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // The table's reference and ours: nobody else is waiting on this id.
        if Arc::strong_count(&self.lock) <= 2 {
            map.remove(self.id);
        }
    }
}

/// A place among the waiting checks, given back when dropped (a caller that goes away
/// while waiting included).
struct InLine<'a>(&'a AtomicUsize);

impl<'a> InLine<'a> {
    fn join(waiting: &'a AtomicUsize, max: usize) -> Option<Self> {
        let place = InLine(waiting);
        (waiting.fetch_add(1, Ordering::AcqRel) < max).then_some(place)
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
