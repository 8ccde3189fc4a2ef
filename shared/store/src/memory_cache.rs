//! `Cache` in process memory, bounded in entries and bytes.
//!
//! TTLs are honoured on every read. When a write would exceed a bound, expired entries
//! go first, then the least recently used ones; a value larger than the whole byte budget
//! is simply not cached (a cache may always miss). Values are kept without spare
//! capacity (`compact`), so the byte budget bounds the memory they take.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::cache::Cache;
use crate::error::{Result, StoreError};
use async_trait::async_trait;

pub const DEFAULT_MAX_ENTRIES: usize = 100_000;
pub const DEFAULT_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Rough per-entry bookkeeping cost counted against the byte budget.
const ENTRY_OVERHEAD: usize = 64;

pub struct MemoryCache {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for MemoryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("MemoryCache")
            .field("entries", &inner.entries.len())
            .field("bytes", &inner.bytes)
            .field("max_entries", &inner.max_entries)
            .field("max_bytes", &inner.max_bytes)
            .finish()
    }
}

enum Value {
    Bytes(Vec<u8>),
    Hash(HashMap<String, Vec<u8>>),
}

struct Entry {
    value: Value,
    expires: Option<Instant>,
    /// Recency stamp: key of this entry in `Inner::recency`.
    stamp: u64,
    bytes: usize,
}

struct Inner {
    entries: HashMap<String, Entry>,
    /// stamp → key, oldest use first.
    recency: BTreeMap<u64, String>,
    /// (expiry, stamp) of entries with a TTL, soonest first.
    expiries: BTreeSet<(Instant, u64)>,
    next_stamp: u64,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

/// What one field of a hash counts against the byte budget.
fn field_bytes(field: &str, value: &[u8]) -> usize {
    ENTRY_OVERHEAD + field.len() + value.len()
}

fn value_bytes(key: &str, value: &Value) -> usize {
    ENTRY_OVERHEAD
        + key.len()
        + match value {
            Value::Bytes(b) => b.len(),
            Value::Hash(h) => h.iter().map(|(f, v)| field_bytes(f, v)).sum(),
        }
}

impl Inner {
    fn stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }

    fn remove(&mut self, key: &str) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        self.recency.remove(&entry.stamp);
        if let Some(at) = entry.expires {
            self.expiries.remove(&(at, entry.stamp));
        }
        self.bytes = self.bytes.saturating_sub(entry.bytes);
        Some(entry)
    }

    /// Inserts (replacing any previous entry) and enforces the bounds, never evicting
    /// the entry just inserted unless it alone is too big.
    fn insert(&mut self, key: &str, value: Value, expires: Option<Instant>, now: Instant) {
        self.remove(key);
        let bytes = value_bytes(key, &value);
        if bytes > self.max_bytes || self.max_entries == 0 {
            return;
        }
        let stamp = self.stamp();
        self.recency.insert(stamp, key.to_string());
        if let Some(at) = expires {
            self.expiries.insert((at, stamp));
        }
        self.bytes += bytes;
        self.entries.insert(
            key.to_string(),
            Entry {
                value,
                expires,
                stamp,
                bytes,
            },
        );
        self.enforce(stamp, now);
    }

    /// Evicts expired entries, then least recently used ones, until within bounds.
    fn enforce(&mut self, keep: u64, now: Instant) {
        if self.entries.len() <= self.max_entries && self.bytes <= self.max_bytes {
            return;
        }
        while let Some(&(at, stamp)) = self.expiries.first() {
            if at > now {
                break;
            }
            match self.recency.get(&stamp).cloned() {
                Some(key) => {
                    self.remove(&key);
                }
                None => {
                    self.expiries.remove(&(at, stamp));
                }
            }
        }
        while self.entries.len() > self.max_entries || self.bytes > self.max_bytes {
            let Some((&stamp, key)) = self.recency.iter().find(|(s, _)| **s != keep) else {
                break;
            };
            let key = key.clone();
            if self.remove(&key).is_none() {
                self.recency.remove(&stamp);
            }
        }
    }

    /// The live entry at `key`, marked as just used; an expired one is dropped.
    fn live(&mut self, key: &str, now: Instant) -> Option<&mut Entry> {
        let expired = match self.entries.get(key) {
            None => return None,
            Some(entry) => entry.expires.is_some_and(|at| at <= now),
        };
        if expired {
            self.remove(key);
            return None;
        }
        let stamp = self.stamp();
        let entry = self.entries.get_mut(key)?;
        let old = std::mem::replace(&mut entry.stamp, stamp);
        if let Some(at) = entry.expires {
            self.expiries.remove(&(at, old));
            self.expiries.insert((at, stamp));
        }
        self.recency.remove(&old);
        self.recency.insert(stamp, key.to_string());
        self.entries.get_mut(key)
    }
}

/// `value` without spare capacity. A serializer's buffer grows by doubling (serde_json's
/// `to_vec`), so a value can hold up to twice its length, and a cache keeps it for
/// minutes while the byte budget counts only the length: each piped's cached stat (about
/// 8 KB of JSON) sat in a 16 KiB buffer, 160 MiB at 10,000 pipeds (issue 34's heap
/// profile, benches/README.md). Shrinking copies the value at most once, outside the lock.
fn compact(mut value: Vec<u8>) -> Vec<u8> {
    value.shrink_to_fit();
    value
}

fn wrong_type(key: &str) -> StoreError {
    StoreError::InvalidArgument(format!("cache key {key} holds another type of value"))
}

impl Default for MemoryCache {
    fn default() -> Self {
        MemoryCache::new(DEFAULT_MAX_ENTRIES, DEFAULT_MAX_BYTES)
    }
}

impl MemoryCache {
    /// At most `max_entries` keys and about `max_bytes` of keys, fields and values.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        MemoryCache {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                recency: BTreeMap::new(),
                expiries: BTreeSet::new(),
                next_stamp: 0,
                bytes: 0,
                max_entries,
                max_bytes,
            }),
        }
    }

    /// Number of keys held, expired ones not yet evicted included.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every critical section leaves `Inner` consistent before it can panic.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Cache for MemoryCache {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let mut inner = self.lock();
        match inner.live(key, Instant::now()) {
            None => Ok(None),
            Some(Entry {
                value: Value::Bytes(b),
                ..
            }) => Ok(Some(b.clone())),
            Some(_) => Err(wrong_type(key)),
        }
    }

    async fn put(&self, key: &str, value: Vec<u8>, ttl: Option<Duration>) -> Result<()> {
        let now = Instant::now();
        // A TTL too large to represent means no expiry.
        let expires = ttl.and_then(|ttl| now.checked_add(ttl));
        let value = compact(value);
        self.lock().insert(key, Value::Bytes(value), expires, now);
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.lock().remove(key);
        Ok(())
    }

    async fn hash_set(&self, key: &str, field: &str, value: Vec<u8>) -> Result<()> {
        let value = compact(value);
        let now = Instant::now();
        let mut inner = self.lock();
        let max_bytes = inner.max_bytes;
        // The field changes in place and only its own bytes are counted: a hash of
        // 10,000 pipeds' stats is not recounted (nor moved) under the lock on each report.
        let (stamp, replaced, added, emptied) = match inner.live(key, now) {
            None => {
                let fields = HashMap::from([(field.to_string(), value)]);
                inner.insert(key, Value::Hash(fields), None, now);
                return Ok(());
            }
            Some(Entry {
                value: Value::Hash(h),
                bytes,
                stamp,
                ..
            }) => {
                let replaced = h.get(field).map_or(0, |old| field_bytes(field, old));
                let added = field_bytes(field, &value);
                if *bytes - replaced + added > max_bytes {
                    // The hash alone would outgrow the budget: this field is not cached
                    // (a cache may miss), and its previous value must not be read.
                    h.remove(field);
                    *bytes -= replaced;
                    (*stamp, replaced, 0, h.is_empty())
                } else {
                    h.insert(field.to_string(), value);
                    *bytes = *bytes - replaced + added;
                    (*stamp, replaced, added, false)
                }
            }
            Some(_) => return Err(wrong_type(key)),
        };
        inner.bytes = inner.bytes.saturating_sub(replaced) + added;
        if emptied {
            // Like Redis: a hash with no fields does not exist.
            inner.remove(key);
        }
        inner.enforce(stamp, now);
        Ok(())
    }

    async fn hash_get(&self, key: &str, field: &str) -> Result<Option<Vec<u8>>> {
        let mut inner = self.lock();
        match inner.live(key, Instant::now()) {
            None => Ok(None),
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Ok(h.get(field).cloned()),
            Some(_) => Err(wrong_type(key)),
        }
    }

    async fn hash_get_all(&self, key: &str) -> Result<HashMap<String, Vec<u8>>> {
        let mut inner = self.lock();
        match inner.live(key, Instant::now()) {
            None => Ok(HashMap::new()),
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => Ok(h.clone()),
            Some(_) => Err(wrong_type(key)),
        }
    }

    async fn hash_delete(&self, key: &str, field: &str) -> Result<()> {
        let now = Instant::now();
        let mut inner = self.lock();
        let (freed, empty) = match inner.live(key, now) {
            None => return Ok(()),
            Some(Entry {
                value: Value::Hash(h),
                bytes,
                ..
            }) => match h.remove(field) {
                Some(v) => {
                    let freed = field_bytes(field, &v);
                    *bytes = bytes.saturating_sub(freed);
                    (freed, h.is_empty())
                }
                None => (0, false),
            },
            Some(_) => return Err(wrong_type(key)),
        };
        inner.bytes = inner.bytes.saturating_sub(freed);
        if empty {
            // Like Redis: a hash with no fields does not exist.
            inner.remove(key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entry_bound_evicts_least_recently_used() {
        let cache = MemoryCache::new(3, usize::MAX);
        for k in ["a", "b", "c"] {
            cache.put(k, vec![1], None).await.expect("put");
        }
        cache.get("a").await.expect("get"); // a is now the most recent
        cache.put("d", vec![1], None).await.expect("put");
        assert_eq!(cache.len(), 3);
        assert!(cache.get("b").await.expect("get").is_none());
        for k in ["a", "c", "d"] {
            assert!(cache.get(k).await.expect("get").is_some(), "{k}");
        }
    }

    #[tokio::test]
    async fn expired_entries_are_evicted_before_live_ones() {
        let cache = MemoryCache::new(3, usize::MAX);
        cache.put("old", vec![1], None).await.expect("put");
        cache
            .put("short", vec![1], Some(Duration::from_millis(10)))
            .await
            .expect("put");
        cache.put("other", vec![1], None).await.expect("put");
        tokio::time::sleep(Duration::from_millis(30)).await;
        cache.put("new", vec![1], None).await.expect("put");
        assert!(cache.get("old").await.expect("get").is_some());
        assert!(cache.get("new").await.expect("get").is_some());
        assert!(cache.get("short").await.expect("get").is_none());
    }

    #[tokio::test]
    async fn byte_bound_holds_and_oversized_values_are_skipped() {
        let cache = MemoryCache::new(usize::MAX, 4096);
        for i in 0..100 {
            cache
                .put(&format!("k{i}"), vec![0; 500], None)
                .await
                .expect("put");
            assert!(cache.bytes() <= 4096);
        }
        assert!(cache.len() < 10);
        assert!(cache.get("k99").await.expect("get").is_some());
        cache.put("k99", vec![0; 10_000], None).await.expect("put");
        assert!(
            cache.get("k99").await.expect("get").is_none(),
            "stale value must not remain"
        );
        for i in 0..100 {
            cache
                .hash_set("h", &format!("f{i}"), vec![0; 100])
                .await
                .expect("hash_set");
            assert!(cache.bytes() <= 4096);
        }
    }

    /// What the byte count should be: every entry counted afresh.
    fn recount(cache: &MemoryCache) -> usize {
        let inner = cache.lock();
        inner
            .entries
            .iter()
            .map(|(key, entry)| {
                assert_eq!(entry.bytes, value_bytes(key, &entry.value), "{key}");
                entry.bytes
            })
            .sum()
    }

    /// A hash is changed field by field (each piped's stat every minute): the count
    /// follows replacements, and a field that would take the hash past the budget is not
    /// cached while the others stay; its previous value is not read any more.
    #[tokio::test]
    async fn a_hash_field_is_counted_alone_and_a_full_hash_refuses_it() {
        let cache = MemoryCache::new(usize::MAX, 2048);
        for round in 0..3usize {
            for i in 0..10 {
                let value = vec![0; 50 + 10 * ((i + round) % 4)];
                cache
                    .hash_set("h", &format!("f{i}"), value)
                    .await
                    .expect("hash_set");
                assert_eq!(cache.bytes(), recount(&cache));
            }
        }
        let before = cache.hash_get_all("h").await.expect("all");
        assert_eq!(before.len(), 10);
        cache
            .hash_set("h", "f3", vec![1; 1500])
            .await
            .expect("hash_set");
        assert_eq!(cache.hash_get("h", "f3").await.expect("get"), None);
        let after = cache.hash_get_all("h").await.expect("all");
        assert_eq!(after.len(), 9);
        for (field, value) in &after {
            assert_eq!(before.get(field), Some(value), "{field}");
        }
        assert_eq!(cache.bytes(), recount(&cache));
        assert!(cache.bytes() <= 2048);
        // Other keys still make room for the hash, least recently used first.
        cache.put("k", vec![0; 600], None).await.expect("put");
        cache
            .hash_set("h", "f3", vec![2; 300])
            .await
            .expect("hash_set");
        assert_eq!(cache.get("k").await.expect("get"), None);
        assert_eq!(
            cache.hash_get("h", "f3").await.expect("get"),
            Some(vec![2; 300])
        );
        assert_eq!(cache.bytes(), recount(&cache));
    }

    #[tokio::test]
    async fn accounting_returns_to_zero() {
        let cache = MemoryCache::default();
        cache
            .put("a", vec![0; 10], Some(Duration::from_secs(60)))
            .await
            .expect("put");
        cache
            .hash_set("h", "f", vec![0; 10])
            .await
            .expect("hash_set");
        cache
            .hash_set("h", "g", vec![0; 10])
            .await
            .expect("hash_set");
        cache.hash_delete("h", "f").await.expect("hash_delete");
        cache.hash_delete("h", "g").await.expect("hash_delete");
        cache.delete("a").await.expect("delete");
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.bytes(), 0);
        let inner = cache.lock();
        assert!(inner.recency.is_empty() && inner.expiries.is_empty());
    }

    #[tokio::test]
    async fn values_are_kept_without_spare_capacity() {
        let cache = MemoryCache::default();
        let spare = |len: usize| {
            let mut v = Vec::with_capacity(4 * len);
            v.resize(len, 7u8);
            v
        };
        cache.put("k", spare(1000), None).await.expect("put");
        cache
            .hash_set("h", "f", spare(1000))
            .await
            .expect("hash_set");
        let inner = cache.lock();
        match &inner.entries["k"].value {
            Value::Bytes(b) => assert_eq!((b.len(), b.capacity()), (1000, 1000)),
            Value::Hash(_) => panic!("k holds a hash"),
        }
        match &inner.entries["h"].value {
            Value::Hash(h) => assert_eq!((h["f"].len(), h["f"].capacity()), (1000, 1000)),
            Value::Bytes(_) => panic!("h holds bytes"),
        }
    }

    #[tokio::test]
    async fn wrong_type_is_an_error() {
        let cache = MemoryCache::default();
        cache.put("k", vec![1], None).await.expect("put");
        assert!(cache.hash_get("k", "f").await.is_err());
        cache.hash_set("h", "f", vec![1]).await.expect("hash_set");
        assert!(cache.get("h").await.is_err());
    }
}
