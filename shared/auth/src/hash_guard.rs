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
//! * At most [`HashPolicy::failures_per_id`] failed slow checks per id per
//!   [`HashPolicy::failure_window`]; past it, new keys for the id are refused without a
//!   check. A key already remembered still works, so a flood aimed at a piped's id does
//!   not lock the piped out.
//! * At most [`HashPolicy::slots`] slow checks run at once in the process, and at most
//!   [`HashPolicy::max_waiting`] wait for a slot, each for at most
//!   [`HashPolicy::max_wait`]. Past that a caller gets UNAVAILABLE at once, which pipeds
//!   retry, instead of a queue that grows until every caller times out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::error::AuthError;
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
    /// (id, stored hash) → SHA-256 of the key that matched it.
    matched: TtlCache<(String, String), [u8; 32]>,
    /// id → failed slow checks in the current window.
    failures: TtlCache<String, u32>,
    /// id → the lock its slow checks take in turn.
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Slow comparisons run so far.
    slow_checks: AtomicU64,
}

pub(crate) fn sha256(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn busy() -> AuthError {
    AuthError::Unavailable("too many credential checks in progress".to_string())
}

impl HashGuard {
    pub(crate) fn new(policy: HashPolicy) -> Self {
        HashGuard {
            slots: Arc::new(Semaphore::new(policy.slots.max(1))),
            waiting: AtomicUsize::new(0),
            matched: TtlCache::new(policy.remember_matches.min(MAX_TTL), CAPACITY),
            failures: TtlCache::new(policy.failure_window.min(MAX_TTL), CAPACITY),
            in_flight: Mutex::new(HashMap::new()),
            slow_checks: AtomicU64::new(0),
            policy,
        }
    }

    pub(crate) fn slow_checks(&self) -> u64 {
        self.slow_checks.load(Ordering::Relaxed)
    }

    pub(crate) fn forget(&self, id: &str) {
        self.matched.remove_where(|(key_id, _), _| key_id == id);
        self.failures.remove_where(|key_id, _| key_id == id);
    }

    pub(crate) fn clear(&self) {
        self.matched.clear();
        self.failures.clear();
    }

    /// The stored hash `digest`'s key matched before, if any.
    fn remembered(&self, id: &str, digest: &[u8; 32], hashes: &[String]) -> Option<String> {
        hashes
            .iter()
            .find(|hash| {
                self.matched
                    .get(&(id.to_owned(), (*hash).clone()))
                    .is_some_and(|known| known == *digest)
            })
            .cloned()
    }

    fn over_budget(&self, id: &str) -> bool {
        self.failures
            .get(id)
            .is_some_and(|n| n >= self.policy.failures_per_id)
    }

    /// Whether `secret` matches one of `hashes`, the stored hashes of credential `id`.
    pub(crate) async fn check(
        &self,
        id: &str,
        secret: &str,
        hashes: &[String],
    ) -> Result<Check, AuthError> {
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
        if self.over_budget(id) {
            return Ok(Check::TooManyFailures);
        }

        // One slow check per id at a time; the next one in line looks again first.
        let lock = {
            let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(id.to_owned()).or_default().clone()
        };
        let outcome = self.check_in_turn(&lock, id, secret, &digest, hashes).await;
        {
            let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            // The map's reference and ours: nobody else is waiting on this id.
            if Arc::strong_count(&lock) <= 2 {
                map.remove(id);
            }
        }
        outcome
    }

    async fn check_in_turn(
        &self,
        lock: &tokio::sync::Mutex<()>,
        id: &str,
        secret: &str,
        digest: &[u8; 32],
        hashes: &[String],
    ) -> Result<Check, AuthError> {
        let _turn = self.wait(lock.lock()).await?;
        if let Some(hash) = self.remembered(id, digest, hashes) {
            return Ok(Check::Matched(Some(hash)));
        }
        if self.over_budget(id) {
            return Ok(Check::TooManyFailures);
        }
        let slot = self.wait(self.slots.clone().acquire_owned()).await?;
        let slot = slot.map_err(|_| busy())?;
        let secret_owned = secret.to_owned();
        let hashes_owned = hashes.to_vec();
        // The slot moves into the blocking task: it is freed when the CPU work ends, even
        // if the caller has gone away meanwhile.
        let work = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let mut compared = 0u64;
            for hash in &hashes_owned {
                compared += 1;
                if verify_secret(&secret_owned, hash) {
                    return (Some(hash.clone()), compared);
                }
            }
            (None, compared)
        });
        let (matched, compared) = work.await.unwrap_or((None, 0));
        self.slow_checks.fetch_add(compared, Ordering::Relaxed);
        match matched {
            Some(hash) => {
                self.matched.insert((id.to_owned(), hash.clone()), *digest);
                Ok(Check::Matched(Some(hash)))
            }
            None => {
                let failed = self.failures.get(id).unwrap_or(0).saturating_add(1);
                self.failures.insert(id.to_owned(), failed);
                Ok(Check::NoMatch)
            }
        }
    }

    /// Waits for `turn` within the policy's bounds on waiting.
    async fn wait<F: std::future::Future>(&self, turn: F) -> Result<F::Output, AuthError> {
        let _in_line = InLine::join(&self.waiting, self.policy.max_waiting).ok_or_else(busy)?;
        tokio::time::timeout(self.policy.max_wait, turn)
            .await
            .map_err(|_| busy())
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
