//! Commands no piped handled within 24 hours become `COMMAND_TIMEOUT` (upstream's
//! orphancommandcleaner), so that whoever waits on them (pipectl, the console, a chain)
//! stops waiting.
//!
//! Reads the sparse index of unhandled commands (`slot::COMMAND_UNHANDLED`, oldest
//! first) up to the cutoff: a timed-out command leaves the index, so a run that runs out
//! of time leaves the rest first in line for the next run — no marker needed.

use wisp_proto::model::{Command, CommandStatus};
use wisp_store::StoreError;
use wisp_store::collection::{ListOptions, sort_ts};
use wisp_store::entities::{pk, slot};

use crate::{Job, JobContext, JobError, JobReport};

/// Upstream's `commandTimeOut`.
/// Upstream's: a command unhandled for a day times out.
pub const COMMAND_TIMEOUT_SECS: i64 = 24 * 3600;
const PAGE: usize = 100;
const JOB: Job = Job::OrphanCommands;

pub async fn run(ctx: &JobContext<'_>) -> Result<JobReport, JobError> {
    let mut report = JobReport::new(JOB);
    let cutoff = ctx.now.saturating_sub(ctx.settings.command_timeout_secs);
    let mut cursor = String::new();
    loop {
        if ctx.deadline.expired() {
            return Ok(report);
        }
        let mut opts = ListOptions::<Command>::new(slot::COMMAND_UNHANDLED, pk::COMMAND_UNHANDLED);
        // created_at <= cutoff, as upstream (the upper bound is exclusive).
        opts.sk_to = Some(sort_ts(cutoff.saturating_add(1)));
        opts.limit = PAGE;
        opts.cursor = cursor;
        let page = ctx
            .stores
            .commands
            .list(opts)
            .await
            .map_err(|e| JobError::store(JOB, "list unhandled commands", e))?;
        for command in page.items {
            if ctx.deadline.expired() {
                return Ok(report);
            }
            report.examined += 1;
            match time_out(ctx, &command).await {
                Ok(true) => report.changed += 1,
                Ok(false) => {}
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(
                        command = %command.id,
                        project = %command.project_id,
                        error = %wisp_telemetry::chain(&e),
                        "failed to mark an orphan command as timed out"
                    );
                }
            }
        }
        if page.cursor.is_empty() {
            report.finished = true;
            return Ok(report);
        }
        cursor = page.cursor;
    }
}

/// `Ok(false)` when the command was handled (or deleted) meanwhile.
async fn time_out(ctx: &JobContext<'_>, command: &Command) -> Result<bool, StoreError> {
    let now = ctx.now;
    let result = ctx
        .stores
        .commands
        .update(&command.project_id, &command.id, |c| {
            if c.status != CommandStatus::CommandNotHandledYet as i32 {
                return Err(StoreError::FailedPrecondition("already handled".into()));
            }
            c.status = CommandStatus::CommandTimeout as i32;
            c.handled_at = now;
            Ok(())
        })
        .await;
    match result {
        Ok(_) => {
            tracing::info!(command = %command.id, project = %command.project_id, "command timed out");
            Ok(true)
        }
        Err(StoreError::FailedPrecondition(_) | StoreError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}
