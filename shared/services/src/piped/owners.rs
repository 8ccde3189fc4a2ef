//! Which piped owns a deployment, remembered per instance.
//!
//! Safe to be stale by design: a deployment never changes piped, so a remembered owner is
//! never wrong. (Upstream also caches application owners for 24 h; applications move
//! between pipeds, so Wisp reads them every time.) It only ever answers "yes, the caller
//! owns it": a miss or a different owner sends the caller back to the store.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const DEPLOYMENT: &str = "dep";

/// How long an entry is kept (it never goes wrong; this only bounds memory churn).
const TTL: Duration = Duration::from_secs(10 * 60);
/// Bound on the entries kept; past it, expired entries go, then everything.
const CAPACITY: usize = 20_000;

#[derive(Default)]
pub struct OwnerCache {
    entries: Mutex<HashMap<String, (String, Instant)>>,
}

fn key(kind: &str, project_id: &str, id: &str) -> String {
    // Ids and project ids never contain a newline (validated upstream-style), and the
    // project is part of the key so that a lookup never crosses projects.
    format!("{kind}\n{project_id}\n{id}")
}

impl OwnerCache {
    pub fn new() -> Self {
        OwnerCache::default()
    }

    /// True only when a fresh entry says `piped_id` owns the object.
    pub fn owned_by(&self, kind: &str, project_id: &str, id: &str, piped_id: &str) -> bool {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match entries.get(&key(kind, project_id, id)) {
            Some((owner, at)) => owner == piped_id && at.elapsed() < TTL,
            None => false,
        }
    }

    pub fn remember(&self, kind: &str, project_id: &str, id: &str, piped_id: &str) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.len() >= CAPACITY {
            entries.retain(|_, (_, at)| at.elapsed() < TTL);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(
            key(kind, project_id, id),
            (piped_id.to_string(), Instant::now()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_only_for_the_remembered_owner_and_project() {
        let cache = OwnerCache::new();
        assert!(!cache.owned_by(DEPLOYMENT, "p", "d", "piped-1"));
        cache.remember(DEPLOYMENT, "p", "d", "piped-1");
        assert!(cache.owned_by(DEPLOYMENT, "p", "d", "piped-1"));
        assert!(!cache.owned_by(DEPLOYMENT, "p", "d", "piped-2"));
        assert!(!cache.owned_by(DEPLOYMENT, "other", "d", "piped-1"));
    }

    #[test]
    fn stays_bounded() {
        let cache = OwnerCache::new();
        for i in 0..CAPACITY + 10 {
            cache.remember(DEPLOYMENT, "p", &i.to_string(), "x");
        }
        let len = cache.entries.lock().map(|e| e.len()).unwrap_or(usize::MAX);
        assert!(len <= CAPACITY);
    }
}
