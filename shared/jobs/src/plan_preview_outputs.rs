//! Plan-preview outputs (`command-output/<command>.json`) older than 48 hours are
//! deleted (upstream's planpreviewoutputcleaner).
//!
//! Walks the listing in path order; a run cut short saves its position (an object path)
//! in a marker and the next run continues after it; a completed walk clears the marker.
//! A failed delete is retried by the next walk.

use wisp_store::commandoutput::command_output_path;

use crate::marker;
use crate::{Job, JobContext, JobError, JobReport};

/// Upstream's `outputTTL`.
pub const OUTPUT_TTL_SECS: i64 = 48 * 3600;
const PAGE: usize = 200;
const JOB: Job = Job::PlanPreviewOutputs;

pub async fn run(ctx: &JobContext<'_>) -> Result<JobReport, JobError> {
    let mut report = JobReport::new(JOB);
    let cutoff = ctx.now.saturating_sub(ctx.settings.output_ttl_secs);
    let mut after = marker::load(ctx.stores, JOB).await?.map(|m| m.after);
    loop {
        if ctx.deadline.expired() {
            marker::save(ctx.stores, JOB, after.as_deref(), ctx.now).await?;
            return Ok(report);
        }
        let page = ctx
            .stores
            .command_outputs
            .list_older_than(cutoff, after.as_deref(), PAGE)
            .await
            .map_err(|e| JobError::store(JOB, "list command outputs", e))?;
        for command_id in &page.command_ids {
            if ctx.deadline.expired() {
                // Paths are the listing's positions: resume right after the last one done.
                marker::save(ctx.stores, JOB, after.as_deref(), ctx.now).await?;
                return Ok(report);
            }
            report.examined += 1;
            match ctx.stores.command_outputs.delete(command_id).await {
                Ok(()) => report.changed += 1,
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(command = %command_id, error = %wisp_telemetry::chain(&e), "failed to delete a stale command output");
                }
            }
            after = Some(command_output_path(command_id));
        }
        match page.next {
            Some(next) => after = Some(next),
            None => {
                marker::save(ctx.stores, JOB, None, ctx.now).await?;
                report.finished = true;
                return Ok(report);
            }
        }
    }
}
