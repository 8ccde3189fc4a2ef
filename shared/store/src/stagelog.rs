//! Stage logs: `log/<deploymentID>/<stageID>/<retriedCount>.txt` in the filestore, in
//! upstream's format (one JSON `LogBlock` per line, a final `EOL` line once completed).
//!
//! Unlike upstream, which keeps live logs only in Redis between checkpoints, every append
//! goes to the filestore. The cache (`piped-stage-log:<dep>:<stage>:<retry>`, 5 min)
//! accelerates reads and saves appends a filestore read; it is never the only copy.
//!
//! Appends are a conditional read-modify-write on the file, so concurrent appends lose
//! nothing. A log only grows (blocks are added, `completed` goes from false to true), so
//! the cache never replaces an entry with a smaller one.
//!
//! Each stage's log is capped ([`DEFAULT_MAX_BYTES`], or the config's
//! `stageLogs.maxBytesPerStage`): the block that would pass the cap is replaced by a last
//! block saying the log was cut, and later blocks are dropped (the piped is told OK, so it
//! does not retry them). So an append rewrites at most the cap, and any stage's log can be
//! read back whole. A log stored bigger than the cap (imported, or written before the cap)
//! is read back cut the same way.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use wisp_proto::model::LogBlock;

use crate::cache::Cache;
use crate::error::{Result, StoreError};
use crate::filestore::{Filestore, PutCondition};
use crate::optimistic::{Attempt, optimistic_write};
use crate::support::{CACHE_TTL, cache_get, cache_put, check_segment, from_json, to_json};

/// The last line of a completed log file.
pub const EOL: &str = "EOL";

/// Default cap on one stage's log, as stored (JSON lines).
pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Smallest cap accepted: room for the block that says the log was cut.
pub const MIN_MAX_BYTES: usize = 4 * 1024;
/// Index of the block that says a log was cut: after any real block, and exact in
/// JavaScript (the console reads indexes as numbers).
pub const CUT_BLOCK_INDEX: i64 = (1 << 53) - 1;
/// Room kept for the cut block under the cap.
const CUT_BLOCK_RESERVE: usize = 512;

/// The block that ends a log cut at `max_bytes`.
pub fn cut_block(max_bytes: usize, created_at: i64) -> LogBlock {
    LogBlock {
        index: CUT_BLOCK_INDEX,
        log: format!(
            "[wisp] This stage's log reached the control plane's limit of {max_bytes} bytes; \
             the lines after this point were not kept. The limit is stageLogs.maxBytesPerStage \
             in the control-plane configuration."
        ),
        severity: wisp_proto::model::LogSeverity::Error as i32,
        created_at,
    }
}

fn is_cut(blocks: &[LogBlock]) -> bool {
    blocks.last().is_some_and(|b| b.index == CUT_BLOCK_INDEX)
}

/// Bytes `block` takes in the file (its JSON line).
fn line_bytes(block: &LogBlock) -> usize {
    serde_json::to_vec(block).map_or(usize::MAX / 4, |v| v.len() + 1)
}

/// `prevs` plus those of `news` that fit under `max_bytes` (sorted by index), and the cut
/// block if some did not. A cut log takes no more blocks.
fn add_within_cap(prevs: &[LogBlock], news: Vec<LogBlock>, max_bytes: usize) -> Vec<LogBlock> {
    let mut blocks = prevs.to_vec();
    if news.is_empty() || is_cut(prevs) {
        return blocks;
    }
    let room = max_bytes.saturating_sub(CUT_BLOCK_RESERVE);
    let mut used: usize = prevs.iter().map(line_bytes).sum();
    let mut cut = false;
    for block in news {
        let size = line_bytes(&block);
        if used.saturating_add(size) > room {
            cut = true;
            break;
        }
        used += size;
        blocks.push(block);
    }
    blocks.sort_by_key(|b| b.index);
    if cut {
        blocks.push(cut_block(max_bytes, now_secs()));
    }
    blocks
}

/// A stored log cut to `max_bytes` for reading (see the module doc).
fn cut_for_reading(log: StageLog, max_bytes: usize) -> StageLog {
    if is_cut(&log.blocks) {
        return log;
    }
    let total: usize = log.blocks.iter().map(line_bytes).sum();
    if total <= max_bytes {
        return log;
    }
    let created_at = log.blocks.last().map_or(0, |b| b.created_at);
    let mut blocks = add_within_cap(&[], log.blocks, max_bytes);
    if let Some(last) = blocks.last_mut()
        && last.index == CUT_BLOCK_INDEX
    {
        last.created_at = created_at;
    }
    StageLog {
        blocks,
        completed: log.completed,
    }
}

use wisp_model::clock::now_unix as now_secs;

/// A stage log as stored: blocks sorted by index, and whether it was completed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageLog {
    pub blocks: Vec<LogBlock>,
    pub completed: bool,
}

impl StageLog {
    /// Orders states of one log: along the history of a file both parts only grow.
    fn generation(&self) -> (usize, bool) {
        (self.blocks.len(), self.completed)
    }
}

/// Filestore path of one stage log (upstream's layout).
pub fn stage_log_path(deployment_id: &str, stage_id: &str, retried_count: i32) -> String {
    format!("log/{deployment_id}/{stage_id}/{retried_count}.txt")
}

/// Cache key of one stage log (upstream's key; ids holding `:` or `%` escaped).
pub fn stage_log_cache_key(deployment_id: &str, stage_id: &str, retried_count: i32) -> String {
    use crate::support::escape_part;
    format!(
        "piped-stage-log:{}:{}:{retried_count}",
        escape_part(deployment_id, ':'),
        escape_part(stage_id, ':')
    )
}

/// Upstream's file format: one compact JSON `LogBlock` per line (newline-terminated),
/// then `EOL` (no newline) when completed.
pub fn encode_stage_log(log: &StageLog) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for block in &log.blocks {
        out.extend(to_json("log block", block)?);
        out.push(b'\n');
    }
    if log.completed {
        out.extend_from_slice(EOL.as_bytes());
    }
    Ok(out)
}

/// Parses a log file; blank lines are skipped and anything after `EOL` is ignored. A
/// line that is not a `LogBlock` is an `Internal` error naming `path` and the line.
pub fn decode_stage_log(path: &str, data: &[u8]) -> Result<StageLog> {
    let text = std::str::from_utf8(data)
        .map_err(|e| StoreError::internal_from(format!("corrupt stage log {path}"), e))?;
    let mut log = StageLog::default();
    for (n, line) in text.split('\n').enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == EOL {
            log.completed = true;
            break;
        }
        let block: LogBlock = serde_json::from_str(line).map_err(|e| {
            StoreError::internal_from(format!("corrupt stage log {path} line {}", n + 1), e)
        })?;
        log.blocks.push(block);
    }
    Ok(log)
}

/// The blocks of `news` whose index is not in `prevs` (first one wins within `news`),
/// sorted by index. The cut block's index is the server's.
fn new_blocks(prevs: &[LogBlock], news: &[LogBlock]) -> Vec<LogBlock> {
    let mut seen: std::collections::HashSet<i64> = prevs.iter().map(|b| b.index).collect();
    seen.insert(CUT_BLOCK_INDEX);
    let mut added: Vec<LogBlock> = news
        .iter()
        .filter(|b| seen.insert(b.index))
        .cloned()
        .collect();
    added.sort_by_key(|b| b.index);
    added
}

/// The cache entry: upstream's `{"Blocks":[...],"Completed":bool}` plus the etag of the
/// file it was read from or written as, so an append can skip the filestore read.
#[derive(Serialize, Deserialize, Default)]
struct CachedLog {
    #[serde(rename = "Blocks", default)]
    blocks: Vec<LogBlock>,
    #[serde(rename = "Completed", default)]
    completed: bool,
    #[serde(rename = "Etag", default, skip_serializing_if = "String::is_empty")]
    etag: String,
}

#[derive(Clone)]
pub struct StageLogStore {
    filestore: Arc<dyn Filestore>,
    cache: Arc<dyn Cache>,
    max_bytes: usize,
}

impl std::fmt::Debug for StageLogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageLogStore").finish_non_exhaustive()
    }
}

impl StageLogStore {
    pub fn new(filestore: Arc<dyn Filestore>, cache: Arc<dyn Cache>) -> Self {
        StageLogStore {
            filestore,
            cache,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// The same store with another cap per stage (at least [`MIN_MAX_BYTES`]).
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes.max(MIN_MAX_BYTES);
        self
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// ReportStageLogs: merge `blocks` into the log. `FailedPrecondition` if the log was
    /// completed; a block whose index is already present is ignored.
    pub async fn append(
        &self,
        deployment_id: &str,
        stage_id: &str,
        retried_count: i32,
        blocks: &[LogBlock],
    ) -> Result<()> {
        self.merge(deployment_id, stage_id, retried_count, blocks, false)
            .await
    }

    /// ReportStageLogsFromLastCheckpoint: like `append`, and `completed` closes the log
    /// (further appends fail with `FailedPrecondition`).
    pub async fn append_from_checkpoint(
        &self,
        deployment_id: &str,
        stage_id: &str,
        retried_count: i32,
        blocks: &[LogBlock],
        completed: bool,
    ) -> Result<()> {
        self.merge(deployment_id, stage_id, retried_count, blocks, completed)
            .await
    }

    /// The blocks with `index >= offset_index`, and whether the log is completed.
    /// `NotFound` when the stage has no log at all.
    pub async fn fetch(
        &self,
        deployment_id: &str,
        stage_id: &str,
        retried_count: i32,
        offset_index: i64,
    ) -> Result<StageLog> {
        check_ids(deployment_id, stage_id)?;
        let key = stage_log_cache_key(deployment_id, stage_id, retried_count);
        // Only a completed log is served from the cache: it can never change again. An
        // open one is read from the filestore, since another instance (with a cache of
        // its own) may have appended to it; checking a cached copy's etag would cost the
        // same request as the read.
        let log = match self.cached(&key).await {
            Some((log, _)) if log.completed => log,
            _ => {
                let path = stage_log_path(deployment_id, stage_id, retried_count);
                let Some((log, etag)) = self.read_file(&path).await? else {
                    return Err(StoreError::NotFound(format!("stage log {path}")));
                };
                self.store_cache(&key, &log, &etag).await;
                log
            }
        };
        let log = cut_for_reading(log, self.max_bytes);
        Ok(StageLog {
            blocks: log
                .blocks
                .into_iter()
                .filter(|b| b.index >= offset_index)
                .collect(),
            completed: log.completed,
        })
    }

    async fn merge(
        &self,
        deployment_id: &str,
        stage_id: &str,
        retried_count: i32,
        blocks: &[LogBlock],
        complete: bool,
    ) -> Result<()> {
        check_ids(deployment_id, stage_id)?;
        let path = stage_log_path(deployment_id, stage_id, retried_count);
        let key = stage_log_cache_key(deployment_id, stage_id, retried_count);

        // First try with the cached state (it carries the etag it was stored as); a
        // stale one only costs a failed conditional put.
        let mut known = self.cached(&key).await.filter(|(_, etag)| !etag.is_empty());
        let (path, key) = (&path, &key);
        optimistic_write(|| {
            let known = known.take();
            async move {
                let (prev, etag) = match known {
                    Some((log, etag)) => (log, Some(etag)),
                    None => match self.read_file(path).await? {
                        Some((log, etag)) => (log, Some(etag)),
                        None => (StageLog::default(), None),
                    },
                };
                if prev.completed {
                    return Err(StoreError::FailedPrecondition(format!(
                        "stage log {path} was already completed"
                    )));
                }
                let news = new_blocks(&prev.blocks, blocks);
                let merged = add_within_cap(&prev.blocks, news, self.max_bytes);
                if merged.len() == prev.blocks.len() && !complete {
                    // Nothing new (every block already stored, or the log was cut).
                    return Ok(Attempt::Done(()));
                }
                let next = StageLog {
                    blocks: merged,
                    completed: complete,
                };
                let condition = match &etag {
                    Some(etag) => PutCondition::Matches(etag.clone()),
                    None => PutCondition::Absent,
                };
                let written = self
                    .filestore
                    .put(path, encode_stage_log(&next)?, condition)
                    .await;
                if let Ok(new_etag) = &written {
                    self.store_cache(key, &next, new_etag).await;
                }
                Ok(Attempt::Written(written.map(|_| ())))
            }
        })
        .await
    }

    /// The file's content and etag; `None` when absent.
    async fn read_file(&self, path: &str) -> Result<Option<(StageLog, String)>> {
        match self.filestore.get(path).await {
            Ok(object) => Ok(Some((decode_stage_log(path, &object.data)?, object.etag))),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The cached state and its etag (possibly empty); `None` on a miss, a cache error or
    /// an unreadable entry.
    async fn cached(&self, key: &str) -> Option<(StageLog, String)> {
        let raw = cache_get(self.cache.as_ref(), key).await?;
        match from_json::<CachedLog>("cached stage log", &raw) {
            Ok(c) => Some((
                StageLog {
                    blocks: c.blocks,
                    completed: c.completed,
                },
                c.etag,
            )),
            Err(e) => {
                tracing::warn!(key, error = %crate::error::chain(&e), "ignoring unreadable cache entry");
                None
            }
        }
    }

    /// Caches `log` unless the cache already holds a state at least as far along, then
    /// reads the entry back in case a racing writer put an older state over it (which a
    /// later append would also repair, since its conditional put would fail). Best effort:
    /// stops at the first cache failure or miss.
    async fn store_cache(&self, key: &str, log: &StageLog, etag: &str) {
        let entry = CachedLog {
            blocks: log.blocks.clone(),
            completed: log.completed,
            etag: etag.to_string(),
        };
        let value = match to_json("cached stage log", &entry) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(key, error = %crate::error::chain(&e), "not caching stage log");
                return;
            }
        };
        let behind = |cached: Option<(StageLog, String)>| {
            cached.is_some_and(|(current, _)| current.generation() < log.generation())
        };
        let current = self.cached(key).await;
        if current
            .as_ref()
            .is_some_and(|(c, _)| c.generation() >= log.generation())
        {
            return;
        }
        for _ in 0..3 {
            if !cache_put(self.cache.as_ref(), key, value.clone(), Some(CACHE_TTL)).await {
                return;
            }
            if !behind(self.cached(key).await) {
                return;
            }
        }
    }
}

fn check_ids(deployment_id: &str, stage_id: &str) -> Result<()> {
    check_segment("deployment id", deployment_id)?;
    check_segment("stage id", stage_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(index: i64, log: &str) -> LogBlock {
        LogBlock {
            index,
            log: log.into(),
            severity: 0,
            created_at: index,
        }
    }

    #[test]
    fn merge_keeps_existing_and_sorts() {
        let prev = vec![block(1, "a"), block(3, "c")];
        let news = new_blocks(&prev, &[block(3, "X"), block(2, "b"), block(2, "Y")]);
        let merged = add_within_cap(&prev, news, DEFAULT_MAX_BYTES);
        let logs: Vec<_> = merged.iter().map(|b| (b.index, b.log.as_str())).collect();
        assert_eq!(logs, vec![(1, "a"), (2, "b"), (3, "c")]);
        assert!(new_blocks(&merged, &[block(1, "again")]).is_empty());
        // A piped cannot write the cut block.
        assert!(new_blocks(&merged, &[block(CUT_BLOCK_INDEX, "fake")]).is_empty());
    }

    #[test]
    fn a_log_is_cut_at_the_cap() {
        let max = 8 * 1024;
        let line = "x".repeat(1000);
        let news: Vec<LogBlock> = (0..20).map(|i| block(i, &line)).collect();
        let merged = add_within_cap(&[], news, max);
        assert!(is_cut(&merged));
        let stored = encode_stage_log(&StageLog {
            blocks: merged.clone(),
            completed: false,
        })
        .unwrap();
        assert!(stored.len() <= max, "{} bytes", stored.len());
        assert!(merged.len() > 3 && merged.len() < 10, "{}", merged.len());
        // Nothing more is taken once cut.
        let again = add_within_cap(&merged, vec![block(100, "late")], max);
        assert_eq!(again, merged);
        // A log stored bigger (before the cap) reads back cut the same way.
        let big = StageLog {
            blocks: (0..20).map(|i| block(i, &line)).collect(),
            completed: true,
        };
        let read = cut_for_reading(big, max);
        assert!(is_cut(&read.blocks) && read.completed);
        assert_eq!(read.blocks.last().unwrap().created_at, 19);
    }

    #[test]
    fn decodes_upstream_files() {
        let text = "\n\t{\"index\":1,\"log\":\"Hello 1\\nWorld\",\"severity\":1,\"created_at\":1590499431}\n\
                    {\"index\":2,\"log\":\"Hello 2\",\"created_at\":1590499432}\nEOL";
        let log = decode_stage_log("p", text.as_bytes()).expect("valid");
        assert!(log.completed);
        assert_eq!(log.blocks.len(), 2);
        assert_eq!(log.blocks[0].log, "Hello 1\nWorld");
        assert_eq!(log.blocks[1].severity, 0);
        let err = decode_stage_log("log/d/s/0.txt", b"{\"index\":1}\nnot json\n");
        assert!(
            matches!(err, Err(StoreError::Internal { context, source: Some(_) }) if context.contains("log/d/s/0.txt line 2"))
        );
    }

    #[test]
    fn encodes_upstream_format() {
        let log = StageLog {
            blocks: vec![block(1, "a\nb")],
            completed: true,
        };
        let bytes = encode_stage_log(&log).expect("encodes");
        assert_eq!(
            String::from_utf8(bytes).expect("utf8"),
            "{\"index\":1,\"log\":\"a\\nb\",\"severity\":0,\"created_at\":1}\nEOL"
        );
    }
}
