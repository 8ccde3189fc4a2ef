//! Insight collection (upstream's insightcollector), the data behind the console's
//! Insights page, in upstream's filestore layout ([`wisp_store::insight`]):
//!
//! - applications: every project's applications (kind, status, labels), rewritten whole
//!   each run. Reads every application with a datastore scan (a batch job may scan);
//!   a run cut short writes nothing and the next one starts over.
//! - completed deployments: those completed since the milestone (at most two days back,
//!   as upstream), read per project from the project's deployments updated since then,
//!   appended to the year's chunks; the milestone moves forward only once every project
//!   is stored, so a run cut short or failing is redone by the next (appending skips
//!   deployments a chunk already holds).
//!
//! Either part can be turned off in the configuration (`insightCollector.application`
//! / `.deployment` `enabled: false`); their cron `schedule`s are not used — the
//! EventBridge rule that runs this job sets the pace.

use std::collections::BTreeMap;

use prost::Message;
use wisp_model::status::is_deployment_completed;
use wisp_proto::model::{Application, Deployment};
use wisp_store::collection::{ListOptions, sort_ts};
use wisp_store::entities::slot;
use wisp_store::insight::{
    ApplicationData, DeploymentData, InsightStore, Milestone, ProjectApplicationData,
};
use wisp_store::{Kind, StoreError};

use crate::{Job, JobContext, JobError, JobReport};

const JOB: Job = Job::Insights;
/// Upstream's `collectRangeLimit`: a collector that did not run for longer skips the gap.
pub const MAX_COLLECT_RANGE_SECS: i64 = 2 * 24 * 3600;
/// The first run (no milestone yet) looks back this far.
pub const FIRST_RUN_RANGE_SECS: i64 = 3600;
const SCAN_PAGE: usize = 500;

pub async fn run(ctx: &JobContext<'_>) -> Result<JobReport, JobError> {
    let mut report = JobReport::new(JOB);
    let insights = InsightStore::new(ctx.stores.filestore.clone());
    let mut finished = true;
    if ctx.settings.insight_applications {
        finished = collect_applications(ctx, &insights, &mut report).await?;
    }
    if finished && ctx.settings.insight_deployments {
        finished = collect_deployments(ctx, &insights, &mut report).await?;
    }
    report.finished = finished;
    Ok(report)
}

/// `Ok(false)` when the deadline stopped it.
async fn collect_applications(
    ctx: &JobContext<'_>,
    insights: &InsightStore,
    report: &mut JobReport,
) -> Result<bool, JobError> {
    let mut by_project: BTreeMap<String, Vec<ApplicationData>> = BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        if ctx.deadline.expired() {
            return Ok(false);
        }
        let page = ctx
            .stores
            .datastore
            .scan(Kind::Application, after.as_deref(), SCAN_PAGE)
            .await
            .map_err(|e| JobError::store(JOB, "scan applications", e))?;
        for (record, cursor) in &page.records {
            after = Some(cursor.clone());
            let app = match Application::decode(record.data.as_slice()) {
                Ok(app) => app,
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(application = %record.id, error = %wisp_telemetry::chain(&e), "skipping an unreadable application");
                    continue;
                }
            };
            report.examined += 1;
            // A project whose applications are all deleted still gets its (empty) file.
            let apps = by_project.entry(app.project_id.clone()).or_default();
            if !app.deleted {
                apps.push(ApplicationData::from_application(&app));
            }
        }
        if !page.more || page.records.is_empty() {
            break;
        }
    }
    for (project, applications) in by_project {
        if ctx.deadline.expired() {
            return Ok(false);
        }
        let data = ProjectApplicationData {
            applications,
            updated_at: ctx.now,
        };
        match insights.put_applications(&project, &data).await {
            Ok(()) => report.changed += 1,
            Err(e) => {
                report.failed += 1;
                tracing::warn!(project = %project, error = %wisp_telemetry::chain(&e), "failed to store application insights");
            }
        }
    }
    Ok(true)
}

/// `Ok(false)` when the deadline stopped it or a project could not be stored (the
/// milestone then stays, and the next run redoes the range).
async fn collect_deployments(
    ctx: &JobContext<'_>,
    insights: &InsightStore,
    report: &mut JobReport,
) -> Result<bool, JobError> {
    let to = ctx.now;
    let milestone = insights
        .get_milestone()
        .await
        .map_err(|e| JobError::store(JOB, "read the insight milestone", e))?;
    let mut from = milestone.map_or(to - FIRST_RUN_RANGE_SECS, |m| {
        m.deployment_completed_at_milestone
    });
    if to - from > MAX_COLLECT_RANGE_SECS {
        tracing::warn!(
            skipped_from = from,
            skipped_to = to - MAX_COLLECT_RANGE_SECS,
            "insight collection did not run for a long time; deployments completed in between are skipped"
        );
        from = to - MAX_COLLECT_RANGE_SECS;
    }
    let projects = crate::all_projects(ctx.stores, &ctx.settings.config_projects)
        .await
        .map_err(|e| JobError::store(JOB, "list projects", e))?;

    let mut all_stored = true;
    for project in projects {
        if ctx.deadline.expired() {
            return Ok(false);
        }
        let completed = match completed_between(ctx, &project, from, to).await {
            Ok(completed) => completed,
            Err(e) => {
                report.failed += 1;
                all_stored = false;
                tracing::warn!(project = %project, error = %wisp_telemetry::chain(&e), "failed to list completed deployments");
                continue;
            }
        };
        if completed.is_empty() {
            continue;
        }
        let count = completed.len() as u64;
        report.examined += count;
        match insights
            .put_completed_deployments(&project, completed, ctx.settings.insight_chunk_max_count)
            .await
        {
            Ok(()) => report.changed += count,
            Err(e) => {
                report.failed += count;
                all_stored = false;
                tracing::warn!(project = %project, error = %wisp_telemetry::chain(&e), "failed to store deployment insights");
            }
        }
    }
    if !all_stored {
        return Ok(false);
    }
    insights
        .put_milestone(&Milestone {
            deployment_completed_at_milestone: to,
        })
        .await
        .map_err(|e| JobError::store(JOB, "save the insight milestone", e))?;
    Ok(true)
}

/// The project's deployments completed in `[from, to]`: a completed deployment was last
/// updated no earlier than it completed, so the project's index by `updated_at` from
/// `from` on holds them all.
async fn completed_between(
    ctx: &JobContext<'_>,
    project: &str,
    from: i64,
    to: i64,
) -> Result<Vec<DeploymentData>, StoreError> {
    let completed = move |d: &Deployment| {
        is_deployment_completed(d.status) && from <= d.completed_at && d.completed_at <= to
    };
    let mut opts = ListOptions::<Deployment>::new(slot::DEPLOYMENT_BY_PROJECT, project);
    opts.sk_from = Some(sort_ts(from));
    opts.filter = Some(&completed);
    let page = ctx.stores.deployments.list(opts).await?;
    Ok(page
        .items
        .iter()
        .map(DeploymentData::from_deployment)
        .collect())
}
