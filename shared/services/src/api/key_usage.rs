//! Recording when API keys were last used (`APIKey.last_used_at`, shown by
//! `wisp api-key list`).
//!
//! Upstream writes every call's time to Redis and rejects the call when that write fails;
//! an ops job copies the times to the datastore every 10 minutes. Here each instance
//! writes the datastore directly, at most once per interval per key, and a failed write
//! is only logged: recording use never decides whether a call succeeds.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use wisp_auth::ApiKeyCaller;
use wisp_store::stores::Stores;

use crate::support::now_unix;

/// Bound on the keys remembered; past it, entries older than the interval go, then all.
const CAPACITY: usize = 10_000;
/// A last-used write that takes longer than this is abandoned (and logged).
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) struct KeyUsage {
    interval: Duration,
    /// When this instance last wrote each key's time.
    written: Mutex<HashMap<String, Instant>>,
}

impl KeyUsage {
    pub(super) fn new(interval: Duration) -> Self {
        KeyUsage {
            interval,
            written: Mutex::new(HashMap::new()),
        }
    }

    /// True (and remembered) when the key's time is due for a write.
    fn due(&self, key_id: &str) -> bool {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = written.get(key_id)
            && at.elapsed() < self.interval
        {
            return false;
        }
        if written.len() >= CAPACITY {
            let interval = self.interval;
            written.retain(|_, at| at.elapsed() < interval);
            if written.len() >= CAPACITY {
                written.clear();
            }
        }
        written.insert(key_id.to_string(), Instant::now());
        true
    }

    pub(super) async fn record(&self, stores: &Stores, caller: &ApiKeyCaller) {
        if !self.due(&caller.id) {
            return;
        }
        let now = now_unix();
        let write = stores
            .api_keys
            .update(&caller.project_id, &caller.id, |key| {
                // Never move backwards (another instance may have written a later time).
                key.last_used_at = key.last_used_at.max(now);
                Ok(())
            });
        match tokio::time::timeout(WRITE_TIMEOUT, write).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %wisp_store::error::chain(&e), key = %caller.id, "failed to record API key use")
            }
            Err(_) => tracing::warn!(key = %caller.id, "recording API key use timed out"),
        }
    }
}
