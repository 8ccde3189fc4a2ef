//! The last ReportStat of each piped, which decides ONLINE/OFFLINE.
//!
//! Upstream keeps it only in Redis (`HASHKEY:PIPED:STATS`, field = piped id), so every
//! piped shows OFFLINE without Redis. Here the datastore (kind `PipedStat`, id = piped id,
//! data = protobuf `model::PipedStat`, expiring 24 h after the report) holds it, and the
//! cache hash is a read accelerator: in upstream's JSON format in a shared cache (Redis),
//! as the datastore's compressed record in the in-process one, where nothing else reads
//! it (a fifth of the size: 10,000 pipeds' stats fit its byte budget).
//!
//! With a shared cache (Redis) the stat lives in the cache hash alone, as upstream keeps
//! it: a report is one HGET and one HSET instead of a GetItem and a PutItem of the
//! datastore each minute per piped (about half of a piped's DynamoDB bill on `wisp serve`,
//! docs/COSTS.md). A report the cache refuses goes to the datastore, as without Redis;
//! a flushed or evicted entry shows the piped OFFLINE until its next report (at most a
//! minute), as upstream does.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use prost::Message;
use serde::{Deserialize, Serialize};
use wisp_proto::model::PipedStat;

use crate::cache::Cache;
use crate::collection::now_unix;
use crate::datastore::{Datastore, Kind, Record};
use crate::error::{Result, StoreError};
use crate::optimistic::{Attempt, optimistic_write};
use crate::support::{cache_hash_get, cache_hash_set, from_json, to_json};

/// A piped is online while its last report is younger than this (upstream's
/// `PipedStatsRetention`).
pub const PIPED_STATS_RETENTION_SECS: i64 = 120;
/// Stored stats expire this long after the report (upstream's cleaner drops them at 24 h).
pub const PIPED_STAT_EXPIRY_SECS: i64 = 24 * 3600;
/// A report with unchanged metrics within this long of the stored one is not written to
/// the datastore (it still reaches the cache). Far below the retention, so a piped that
/// keeps reporting never looks stale.
pub const PIPED_STAT_MIN_WRITE_INTERVAL_SECS: i64 = 30;
pub const PIPED_STATS_CACHE_KEY: &str = "HASHKEY:PIPED:STATS";

/// Fresh while `now - timestamp < 120 s`.
pub fn is_online(stat: &PipedStat, now: i64) -> bool {
    now - stat.timestamp < PIPED_STATS_RETENTION_SECS
}

/// Upstream's cache value: Go's JSON of `model.PipedStat` (bytes as standard base64).
#[derive(Serialize, Deserialize, Default)]
struct CachedStat {
    #[serde(default)]
    piped_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    metrics: String,
    #[serde(default)]
    timestamp: i64,
}

fn encode_upstream_json(stat: &PipedStat) -> Result<Vec<u8>> {
    to_json(
        "piped stat",
        &CachedStat {
            piped_id: stat.piped_id.clone(),
            metrics: STANDARD.encode(&stat.metrics),
            timestamp: stat.timestamp,
        },
    )
}

fn decode_upstream_json(data: &[u8]) -> Result<PipedStat> {
    let cached: CachedStat = from_json("cached piped stat", data)?;
    let metrics = STANDARD
        .decode(cached.metrics.as_bytes())
        .map_err(|e| StoreError::internal_from("corrupt cached piped stat", e))?;
    Ok(PipedStat {
        piped_id: cached.piped_id,
        metrics,
        timestamp: cached.timestamp,
    })
}

/// Stored metrics longer than this are gzip-compressed: DynamoDB bills a write per KB,
/// and a piped's Prometheus text (about 5 KB each minute) shrinks to about a fifth.
const COMPRESS_ABOVE_BYTES: usize = 512;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// Bound on decompressed metrics (the gRPC message limit is 4 MB).
const MAX_METRICS_BYTES: u64 = 8 * 1024 * 1024;

/// The record's data: the stat with its metrics compressed when that pays. Metrics that
/// start like gzip are always compressed, so the reader can tell the two apart.
fn encode_record_data(stat: &PipedStat) -> Vec<u8> {
    use std::io::Write;
    let raw = &stat.metrics;
    let must = raw.starts_with(&GZIP_MAGIC);
    if !must && raw.len() <= COMPRESS_ABOVE_BYTES {
        return stat.encode_to_vec();
    }
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    match encoder.write_all(raw).and_then(|()| encoder.finish()) {
        Ok(gz) if must || gz.len() < raw.len() => PipedStat {
            metrics: gz,
            ..stat.clone()
        }
        .encode_to_vec(),
        Ok(_) => stat.encode_to_vec(),
        Err(e) => {
            // Writing to memory does not fail; if it ever does, store the metrics as
            // they came unless that would be ambiguous.
            tracing::warn!(error = %crate::error::chain(&e), "piped stat metrics not compressed");
            if must {
                PipedStat {
                    metrics: Vec::new(),
                    ..stat.clone()
                }
                .encode_to_vec()
            } else {
                stat.encode_to_vec()
            }
        }
    }
}

/// Bytes the datastore record of a stat with `metrics` holds (its data, before the key
/// and attributes around it): what the cost of a ReportStat write follows.
pub fn stored_data_bytes(piped_id: &str, metrics: &[u8]) -> usize {
    encode_record_data(&PipedStat {
        piped_id: piped_id.to_string(),
        metrics: metrics.to_vec(),
        timestamp: now_unix(),
    })
    .len()
}

fn decode_record(record: &Record) -> Result<PipedStat> {
    decode_record_data(&record.data, || {
        format!("corrupt {} {}", Kind::PipedStat, record.id)
    })
}

/// [`encode_record_data`]'s output read back; `what` names it in an error.
fn decode_record_data(data: &[u8], what: impl Fn() -> String) -> Result<PipedStat> {
    use std::io::Read;
    let corrupt = |e: crate::error::BoxError| StoreError::internal_from(what(), e);
    let mut stat = PipedStat::decode(data).map_err(|e| corrupt(e.into()))?;
    if stat.metrics.starts_with(&GZIP_MAGIC) {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(stat.metrics.as_slice())
            .take(MAX_METRICS_BYTES)
            .read_to_end(&mut raw)
            .map_err(|e| corrupt(e.into()))?;
        stat.metrics = raw;
    }
    Ok(stat)
}

#[derive(Clone)]
pub struct PipedStatStore {
    datastore: Arc<dyn Datastore>,
    cache: Arc<dyn Cache>,
}

impl std::fmt::Debug for PipedStatStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipedStatStore").finish_non_exhaustive()
    }
}

impl PipedStatStore {
    pub fn new(datastore: Arc<dyn Datastore>, cache: Arc<dyn Cache>) -> Self {
        PipedStatStore { datastore, cache }
    }

    /// The cache's value for `stat`: upstream's JSON in a shared cache, the datastore's
    /// record data in the in-process one.
    fn encode_cached(&self, stat: &PipedStat) -> Result<Vec<u8>> {
        if self.cache.shared() {
            encode_upstream_json(stat)
        } else {
            Ok(encode_record_data(stat))
        }
    }

    fn decode_cached(&self, raw: &[u8]) -> Result<PipedStat> {
        if self.cache.shared() {
            decode_upstream_json(raw)
        } else {
            decode_record_data(raw, || "corrupt cached piped stat".to_owned())
        }
    }

    /// Same as the free function, for callers holding the store.
    pub fn is_online(stat: &PipedStat, now: i64) -> bool {
        is_online(stat, now)
    }

    /// ReportStat: records `metrics` as reported at `timestamp` (unix seconds, the
    /// server's clock). A report older than the stored one changes nothing.
    pub async fn put(
        &self,
        project_id: &str,
        piped_id: &str,
        metrics: Vec<u8>,
        timestamp: i64,
    ) -> Result<()> {
        if piped_id.is_empty() {
            return Err(StoreError::InvalidArgument("empty piped id".into()));
        }
        let stat = PipedStat {
            piped_id: piped_id.to_string(),
            metrics,
            timestamp,
        };
        // Whether the shared cache just failed: then the datastore takes the report and
        // the cache is not tried a second time for it.
        let mut cache_failed = false;
        if self.cache.shared() {
            match self.put_shared(piped_id, &stat).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    cache_failed = true;
                    tracing::warn!(
                        piped_id,
                        error = %crate::error::chain(&e),
                        "the cache refused a piped stat; storing it in the datastore"
                    )
                }
            }
        }
        let data = encode_record_data(&stat);
        let record = |version: u64| Record {
            id: piped_id.to_string(),
            project_id: project_id.to_string(),
            version,
            data: data.clone(),
            indexes: Default::default(),
            expires_at: Some(timestamp.saturating_add(PIPED_STAT_EXPIRY_SECS)),
        };
        // Whether the cache is to take the stat: not if a newer one is stored.
        let (stat_ref, record) = (&stat, &record);
        let newest = optimistic_write(|| async move {
            let stat = stat_ref;
            let written = match self.datastore.get(Kind::PipedStat, piped_id).await {
                Ok(existing) => {
                    match decode_record(&existing) {
                        Ok(stored) if stored.timestamp > timestamp => {
                            return Ok(Attempt::Done(false));
                        }
                        Ok(stored)
                            if stored.metrics == stat.metrics
                                && timestamp - stored.timestamp
                                    < PIPED_STAT_MIN_WRITE_INTERVAL_SECS =>
                        {
                            // The stored stat is recent enough; only the cache moves on.
                            return Ok(Attempt::Done(true));
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(piped_id, error = %crate::error::chain(&e), "replacing corrupt piped stat")
                        }
                    }
                    self.datastore
                        .put(Kind::PipedStat, record(existing.version), existing.version)
                        .await
                }
                Err(StoreError::NotFound(_)) => {
                    self.datastore.create(Kind::PipedStat, record(1)).await
                }
                Err(e) => return Err(e),
            };
            Ok(Attempt::Written(written.map(|()| true)))
        })
        .await?;
        if !newest || cache_failed {
            return Ok(());
        }
        // Only the in-process cache gets here (a shared one took the report above or
        // failed): its value is the record just written.
        cache_hash_set(self.cache.as_ref(), PIPED_STATS_CACHE_KEY, piped_id, data).await;
        Ok(())
    }

    /// A report into the shared cache alone: unless the cached stat is newer, replaced.
    /// Read and write are two commands, not one transaction: two reports of one piped at
    /// the same moment (it sends one a minute) may leave either; both are current.
    async fn put_shared(&self, piped_id: &str, stat: &PipedStat) -> Result<()> {
        if let Some(raw) = self.cache.hash_get(PIPED_STATS_CACHE_KEY, piped_id).await?
            && let Ok(cached) = decode_upstream_json(&raw)
            && cached.timestamp > stat.timestamp
        {
            return Ok(());
        }
        let value = encode_upstream_json(stat)?;
        self.cache
            .hash_set(PIPED_STATS_CACHE_KEY, piped_id, value)
            .await
    }

    /// Pipeds whose cached stat (upstream's Redis hash) was reported before `cutoff`
    /// (unix seconds), or cannot be read. The datastore copies need no such sweep: they
    /// carry `expires_at`, are invisible once it passes, and the backend drops them (the
    /// DynamoDB TTL; `SqliteDatastore::purge_expired`). For the piped-stat cleanup job.
    pub async fn stale_cached(&self, cutoff: i64) -> Result<Vec<String>> {
        let all = self.cache.hash_get_all(PIPED_STATS_CACHE_KEY).await?;
        let mut stale: Vec<String> = all
            .into_iter()
            .filter(|(_, raw)| {
                self.decode_cached(raw)
                    .map_or(true, |stat| stat.timestamp < cutoff)
            })
            .map(|(piped_id, _)| piped_id)
            .collect();
        stale.sort();
        Ok(stale)
    }

    /// Drops one piped's cached stat (the datastore copy stays until it expires).
    pub async fn forget_cached(&self, piped_id: &str) -> Result<()> {
        self.cache
            .hash_delete(PIPED_STATS_CACHE_KEY, piped_id)
            .await
    }

    /// The latest known stat, `None` if the piped never reported (or its stat expired).
    /// A fresh cached stat is trusted; otherwise the datastore is read too and the newer
    /// of the two wins, so a stale or missing cache never turns a piped OFFLINE.
    pub async fn get(&self, piped_id: &str) -> Result<Option<PipedStat>> {
        let cached = match cache_hash_get(self.cache.as_ref(), PIPED_STATS_CACHE_KEY, piped_id)
            .await
        {
            Some(raw) => match self.decode_cached(&raw) {
                Ok(stat) => Some(stat),
                Err(e) => {
                    tracing::warn!(piped_id, error = %crate::error::chain(&e), "ignoring unreadable cache entry");
                    None
                }
            },
            None => None,
        };
        if let Some(stat) = &cached
            && is_online(stat, now_unix())
        {
            return Ok(cached);
        }
        let stored = match self.datastore.get(Kind::PipedStat, piped_id).await {
            Ok(record) => Some(decode_record(&record)?),
            Err(StoreError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        match (cached, stored) {
            (Some(c), Some(s)) if c.timestamp >= s.timestamp => Ok(Some(c)),
            (_, Some(s)) => {
                if let Ok(value) = self.encode_cached(&s) {
                    cache_hash_set(self.cache.as_ref(), PIPED_STATS_CACHE_KEY, piped_id, value)
                        .await;
                }
                Ok(Some(s))
            }
            (c, None) => Ok(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(metrics: Vec<u8>) -> (Record, PipedStat) {
        let stat = PipedStat {
            piped_id: "p".into(),
            metrics,
            timestamp: 7,
        };
        let record = Record {
            id: "p".into(),
            project_id: "proj".into(),
            version: 1,
            data: encode_record_data(&stat),
            indexes: Default::default(),
            expires_at: None,
        };
        (record, stat)
    }

    #[test]
    fn large_metrics_are_stored_compressed_and_read_back_whole() {
        let text: String = (0..200)
            .map(|i| {
                format!("pipecd_piped_process_cpu_seconds_total{{piped=\"p\",n=\"{i}\"}} {i}.5\n")
            })
            .collect();
        let (record, stat) = stored(text.into_bytes());
        assert!(
            record.data.len() * 3 < stat.metrics.len(),
            "{} bytes stored for {}",
            record.data.len(),
            stat.metrics.len()
        );
        assert_eq!(decode_record(&record).expect("decodes"), stat);
    }

    #[test]
    fn small_metrics_and_gzip_lookalikes_round_trip_exactly() {
        for metrics in [
            b"up 1\n".to_vec(),
            Vec::new(),
            vec![0x1f, 0x8b, 1, 2, 3],
            vec![0x1f, 0x8b],
        ] {
            let (record, stat) = stored(metrics);
            assert_eq!(decode_record(&record).expect("decodes"), stat);
        }
    }

    #[test]
    fn records_written_before_compression_still_read() {
        let stat = PipedStat {
            piped_id: "p".into(),
            metrics: vec![b'x'; 4096],
            timestamp: 7,
        };
        let record = Record {
            id: "p".into(),
            project_id: "proj".into(),
            version: 1,
            data: stat.encode_to_vec(),
            indexes: Default::default(),
            expires_at: None,
        };
        assert_eq!(decode_record(&record).expect("decodes"), stat);
    }
}
