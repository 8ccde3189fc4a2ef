//! A small, bounded map whose entries expire a fixed time after insertion.
//!
//! Entries are never refreshed by reads: a verification result is trusted for at most
//! `ttl` after it was made. Inserting into a full map drops the oldest entry (expired or
//! not), found through a queue of keys in insertion order: O(1) amortized under the lock,
//! however full the map (a sweep of the whole map on every insert into a full one let a
//! caller who fills it with made-up ids make every verification slow).
//!
//! Each entry lives a random 80–100 % of `ttl`: pipeds that were verified together (all
//! of them, after a restart) then re-verify spread over a minute instead of all in the
//! same second, which would queue every poll behind a burst of bcrypt.

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

// tokio's clock (the system's monotonic clock, as std's `Instant`, outside tests): the
// tests move it on with tokio's paused time instead of sleeping past a TTL.
use tokio::time::Instant;

/// Longest TTL accepted (keeps `Instant + ttl` far from overflow).
pub(crate) const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

struct Entry<V> {
    value: V,
    inserted_at: Instant,
    expires_at: Instant,
}

/// A lifetime between 80 % and 100 % of `ttl`.
fn jittered(ttl: Duration) -> Duration {
    let spread = ttl / 5;
    if spread.is_zero() {
        return ttl;
    }
    let cut = rand::random_range(0..=spread.as_nanos().min(u64::MAX as u128) as u64);
    ttl.saturating_sub(Duration::from_nanos(cut))
}

pub(crate) struct TtlCache<K, V> {
    map: Mutex<Map<K, V>>,
    ttl: Duration,
    capacity: usize,
}

struct Map<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Keys in insertion order, with their insertion time: an item whose time is not its
    /// entry's any more (overwritten or removed) is skipped.
    order: VecDeque<(K, Instant)>,
}

impl<K: Eq + Hash + Clone, V> Map<K, V> {
    /// Drops the oldest entry.
    fn evict_oldest(&mut self) {
        while let Some((key, inserted_at)) = self.order.pop_front() {
            if self
                .entries
                .get(&key)
                .is_some_and(|e| e.inserted_at == inserted_at)
            {
                self.entries.remove(&key);
                return;
            }
        }
    }

    /// Keeps the queue within twice the live entries (stale items removed), so that it
    /// stays bounded whatever is overwritten: O(1) amortized.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.entries.len() + 16 {
            let entries = &self.entries;
            self.order.retain(|(key, inserted_at)| {
                entries
                    .get(key)
                    .is_some_and(|e| e.inserted_at == *inserted_at)
            });
        }
    }
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// A zero `ttl` or `capacity` disables the cache (nothing is kept).
    pub(crate) fn new(ttl: Duration, capacity: usize) -> Self {
        TtlCache {
            map: Mutex::new(Map {
                entries: HashMap::new(),
                order: VecDeque::new(),
            }),
            ttl: ttl.min(MAX_TTL),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Map<K, V>> {
        // A panic while holding the lock cannot leave the map inconsistent.
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = Instant::now();
        let mut map = self.lock();
        match map.entries.get(key) {
            Some(entry) if entry.expires_at > now => Some(entry.value.clone()),
            Some(_) => {
                map.entries.remove(key);
                None
            }
            None => None,
        }
    }

    pub(crate) fn insert(&self, key: K, value: V) {
        if self.ttl.is_zero() || self.capacity == 0 {
            return;
        }
        let now = Instant::now();
        let expires_at = now + jittered(self.ttl);
        let mut map = self.lock();
        while map.entries.len() >= self.capacity && !map.entries.contains_key(&key) {
            map.evict_oldest();
        }
        map.order.push_back((key.clone(), now));
        map.entries.insert(
            key,
            Entry {
                value,
                inserted_at: now,
                expires_at,
            },
        );
        map.compact();
    }

    /// Drops every entry for which `drop` returns true.
    pub(crate) fn remove_where(&self, mut drop: impl FnMut(&K, &V) -> bool) {
        let mut map = self.lock();
        map.entries.retain(|k, e| !drop(k, &e.value));
        map.compact();
    }

    pub(crate) fn clear(&self) {
        let mut map = self.lock();
        map.entries.clear();
        map.order.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn expires_after_ttl() {
        let c = TtlCache::new(Duration::from_millis(30), 10);
        c.insert("a".to_owned(), 1);
        // The lifetime is 24 to 30 ms.
        tokio::time::advance(Duration::from_millis(23)).await;
        assert_eq!(c.get("a"), Some(1));
        tokio::time::advance(Duration::from_millis(8)).await;
        assert_eq!(c.get("a"), None);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn lifetimes_spread_within_the_last_fifth_of_the_ttl() {
        let ttl = Duration::from_secs(300);
        let lifetimes: Vec<Duration> = (0..1000).map(|_| jittered(ttl)).collect();
        assert!(lifetimes.iter().all(|l| *l <= ttl && *l >= ttl * 4 / 5));
        let distinct: std::collections::HashSet<_> = lifetimes.iter().collect();
        assert!(
            distinct.len() > 100,
            "lifetimes are not spread: {distinct:?}"
        );
    }

    #[test]
    fn bounded_evicts_oldest() {
        let c = TtlCache::new(Duration::from_secs(60), 3);
        for (i, k) in ["a", "b", "c", "d"].into_iter().enumerate() {
            c.insert(k.to_owned(), i);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(c.len(), 3);
        assert_eq!(c.get("a"), None);
        assert_eq!(c.get("b"), Some(1));
        assert_eq!(c.get("d"), Some(3));
        // Overwriting an existing key in a full map evicts nothing.
        c.insert("b".to_owned(), 10);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get("c"), Some(2));
    }

    #[test]
    fn a_full_map_stays_bounded_and_fast() {
        // Every insert into a full map drops one entry, without a sweep: a million
        // inserts into a map of 100,000 finish in well under the time a sweep per insert
        // would take (10^11 steps), and the queue stays bounded.
        let c = TtlCache::new(Duration::from_secs(60), 100_000);
        for i in 0..1_000_000u32 {
            c.insert(i, i);
            // Overwrites leave stale queue items behind; they are compacted away.
            c.insert(i, i + 1);
        }
        assert_eq!(c.len(), 100_000);
        assert!(c.lock().order.len() <= 2 * 100_000 + 16);
        assert_eq!(c.get(&999_999), Some(1_000_000));
        assert_eq!(c.get(&0), None);
    }

    #[test]
    fn zero_disables() {
        let c = TtlCache::new(Duration::ZERO, 10);
        c.insert("a".to_owned(), 1);
        assert_eq!(c.get("a"), None);
        let c = TtlCache::new(Duration::from_secs(1), 0);
        c.insert("a".to_owned(), 1);
        assert_eq!(c.get("a"), None);
    }

    #[test]
    fn remove_where_and_clear() {
        let c = TtlCache::new(Duration::from_secs(60), 10);
        c.insert("a".to_owned(), 1);
        c.insert("b".to_owned(), 2);
        c.remove_where(|k, _| k == "a");
        assert_eq!(c.get("a"), None);
        assert_eq!(c.get("b"), Some(2));
        c.clear();
        assert_eq!(c.len(), 0);
    }
}
