//! Stale piped stats (upstream's staledpipedstatcleaner): cached stats whose last report
//! is older than 24 hours are dropped from the cache hash, which otherwise keeps one
//! field per piped ever seen.
//!
//! The datastore copies are not swept here: each `PipedStat` record carries
//! `expires_at` = report + 24 h, reads ignore it from then on, and the backend deletes
//! it (the DynamoDB table's TTL on `expires_at`; `SqliteDatastore::purge_expired` for
//! the embedded store). A scan could not even see them: expired records are invisible
//! to every read, scans included.
//!
//! Deleting a field is idempotent; a run cut short leaves the rest for the next one.

use wisp_store::pipedstat::PIPED_STAT_EXPIRY_SECS;

use crate::{Job, JobContext, JobError, JobReport};

const JOB: Job = Job::PipedStats;

pub async fn run(ctx: &JobContext<'_>) -> Result<JobReport, JobError> {
    let mut report = JobReport::new(JOB);
    let cutoff = ctx.now.saturating_sub(PIPED_STAT_EXPIRY_SECS);
    let stale = ctx
        .stores
        .piped_stats
        .stale_cached(cutoff)
        .await
        .map_err(|e| JobError::store(JOB, "read the cached piped stats", e))?;
    for piped_id in stale {
        if ctx.deadline.expired() {
            return Ok(report);
        }
        report.examined += 1;
        match ctx.stores.piped_stats.forget_cached(&piped_id).await {
            Ok(()) => report.changed += 1,
            Err(e) => {
                report.failed += 1;
                tracing::warn!(piped = %piped_id, error = %wisp_telemetry::chain(&e), "failed to drop a stale cached piped stat");
            }
        }
    }
    report.finished = true;
    Ok(report)
}
