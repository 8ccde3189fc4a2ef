//! A cache in front of the stores. Never the only copy of anything: every caller must
//! stay correct when a get misses or a put fails. One exception, as upstream PipeCD has
//! it: a [`Cache::shared`] cache alone holds the pipeds' last stats (a minute's worth of
//! heartbeat, sent again every minute; `pipedstat`).

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;

#[async_trait]
pub trait Cache: Send + Sync + 'static {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// `ttl = None` keeps the entry until it is deleted or evicted.
    async fn put(&self, key: &str, value: Vec<u8>, ttl: Option<Duration>) -> Result<()>;
    async fn delete(&self, key: &str) -> Result<()>;
    async fn hash_set(&self, key: &str, field: &str, value: Vec<u8>) -> Result<()>;
    async fn hash_get(&self, key: &str, field: &str) -> Result<Option<Vec<u8>>>;
    async fn hash_get_all(&self, key: &str) -> Result<HashMap<String, Vec<u8>>>;
    async fn hash_delete(&self, key: &str, field: &str) -> Result<()>;

    /// Whether every instance of the control plane reads the same entries (Redis), not
    /// one process's own memory. Only then may a piped's last stat live here alone: in a
    /// per-process cache another instance would see the piped OFFLINE.
    fn shared(&self) -> bool {
        false
    }
}
