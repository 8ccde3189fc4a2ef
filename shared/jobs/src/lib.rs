//! The scheduled jobs that upstream runs as always-on ops loops, as bounded runs: each
//! takes the stores, a deadline and the current time, does as much as fits, and leaves
//! the rest for the next run (idempotent; resumes from its index order or a marker).
//!
//! Which job runs is named by the invoking event on Lambda (see
//! [`JobRequest::from_event`]); `wisp serve` runs them on a timer ([`schedule`]) with the
//! same periods, which `jobs` in the configuration changes:
//!
//! | job | upstream | default schedule | what it does |
//! |---|---|---|---|
//! | `orphan-commands` | orphancommandcleaner | `rate(6 hours)` | commands unhandled for 24 h → `COMMAND_TIMEOUT` |
//! | `piped-stats` | staledpipedstatcleaner | `rate(1 day)` | drops cached piped stats older than 24 h |
//! | `plan-preview-outputs` | planpreviewoutputcleaner | `cron(0 9 * * ? *)` | deletes command outputs older than 48 h |
//! | `deployment-chains` | deploymentchaincontroller | `rate(1 minute)` | moves open chains forward from their deployments |
//! | `insights` | insightcollector | `rate(1 hour)` | application counts and completed deployments for the Insights page |

mod deadline;
pub mod deployment_chains;
pub mod fleet;
pub mod insights;
mod marker;
pub mod orphan_commands;
pub mod piped_stats;
pub mod plan_preview_outputs;
pub mod schedule;

use std::time::Instant;

use serde::Serialize;
use wisp_store::StoreError;
use wisp_store::stores::Stores;

pub use deadline::Deadline;
pub use marker::MARKER_PREFIX;

/// One of the scheduled jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Job {
    OrphanCommands,
    PipedStats,
    PlanPreviewOutputs,
    DeploymentChains,
    Insights,
}

impl Job {
    pub const ALL: [Job; 5] = [
        Job::OrphanCommands,
        Job::PipedStats,
        Job::PlanPreviewOutputs,
        Job::DeploymentChains,
        Job::Insights,
    ];

    /// The name events use.
    pub fn name(self) -> &'static str {
        match self {
            Job::OrphanCommands => "orphan-commands",
            Job::PipedStats => "piped-stats",
            Job::PlanPreviewOutputs => "plan-preview-outputs",
            Job::DeploymentChains => "deployment-chains",
            Job::Insights => "insights",
        }
    }

    pub fn parse(name: &str) -> Option<Job> {
        Job::ALL.into_iter().find(|j| j.name() == name.trim())
    }
}

impl std::fmt::Display for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a job could not run at all (per-item failures are counted in the report instead).
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("{0}")]
    BadEvent(String),
    #[error("job {job}: {what}: {source}")]
    Store {
        job: Job,
        what: String,
        #[source]
        source: StoreError,
    },
}

impl JobError {
    pub(crate) fn store(job: Job, what: impl Into<String>, source: StoreError) -> JobError {
        JobError::Store {
            job,
            what: what.into(),
            source,
        }
    }
}

/// The event that starts a run: `{"job": NAME}` (the EventBridge target's constant
/// input, the recommended form), or an EventBridge event whose `detail` carries
/// `{"job": NAME}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRequest {
    pub job: Job,
}

impl JobRequest {
    pub fn from_event(event: &serde_json::Value) -> Result<JobRequest, JobError> {
        let name = event
            .get("job")
            .or_else(|| event.get("detail").and_then(|d| d.get("job")))
            .ok_or_else(|| {
                JobError::BadEvent(format!(
                    "the event names no job: expected {{\"job\": NAME}} or {{\"detail\": {{\"job\": NAME}}}} with NAME one of {}",
                    job_names()
                ))
            })?;
        let name = name.as_str().ok_or_else(|| {
            JobError::BadEvent(format!("\"job\" must be a string, one of {}", job_names()))
        })?;
        let job = Job::parse(name).ok_or_else(|| {
            JobError::BadEvent(format!(
                "unknown job {name:?}: expected one of {}",
                job_names()
            ))
        })?;
        Ok(JobRequest { job })
    }
}

fn job_names() -> String {
    Job::ALL.map(Job::name).join(", ")
}

/// What a run did. `finished` is false when the deadline stopped it before the end:
/// the next run continues.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct JobReport {
    pub job: Option<Job>,
    pub finished: bool,
    /// Items looked at (commands, cached stats, outputs, chains).
    pub examined: u64,
    /// Items changed or deleted.
    pub changed: u64,
    /// Items whose change failed (logged; retried by a later run).
    pub failed: u64,
    pub elapsed_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl JobReport {
    fn new(job: Job) -> JobReport {
        JobReport {
            job: Some(job),
            ..Default::default()
        }
    }
}

/// What the jobs take from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Projects defined in the configuration (they are never in the datastore).
    pub config_projects: Vec<String>,
    /// `insightCollector.application.enabled`.
    pub insight_applications: bool,
    /// `insightCollector.deployment.enabled`.
    pub insight_deployments: bool,
    /// `insightCollector.deployment.chunkMaxCount`.
    pub insight_chunk_max_count: usize,
    /// `jobs.orphanCommands.commandTimeout`, in seconds.
    pub command_timeout_secs: i64,
    /// `jobs.planPreviewOutputs.outputTtl`, in seconds.
    pub output_ttl_secs: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            config_projects: Vec::new(),
            insight_applications: true,
            insight_deployments: true,
            insight_chunk_max_count: 1000,
            command_timeout_secs: orphan_commands::COMMAND_TIMEOUT_SECS,
            output_ttl_secs: plan_preview_outputs::OUTPUT_TTL_SECS,
        }
    }
}

/// What every job is given.
pub struct JobContext<'a> {
    pub stores: &'a Stores,
    pub deadline: Deadline,
    /// Unix seconds the run treats as now (tests move it forward).
    pub now: i64,
    pub settings: Settings,
}

impl<'a> std::fmt::Debug for JobContext<'a> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext").finish_non_exhaustive()
    }
}

impl<'a> JobContext<'a> {
    pub fn new(stores: &'a Stores, deadline: Deadline, settings: Settings) -> Self {
        JobContext {
            stores,
            deadline,
            now: wisp_store::collection::now_unix(),
            settings,
        }
    }
}

/// Every project: those stored in the datastore and those only the configuration names,
/// sorted, each once.
pub async fn all_projects(
    stores: &Stores,
    config_projects: &[String],
) -> Result<Vec<String>, StoreError> {
    wisp_store::projects::ProjectDirectory::with_config_ids(
        stores.projects.clone(),
        config_projects.iter().cloned(),
    )
    .ids()
    .await
}

/// Runs one job until it is done or the deadline passes.
pub async fn run(job: Job, ctx: &JobContext<'_>) -> Result<JobReport, JobError> {
    let started = Instant::now();
    let result = match job {
        Job::OrphanCommands => orphan_commands::run(ctx).await,
        Job::PipedStats => piped_stats::run(ctx).await,
        Job::PlanPreviewOutputs => plan_preview_outputs::run(ctx).await,
        Job::DeploymentChains => deployment_chains::run(ctx).await,
        Job::Insights => insights::run(ctx).await,
    };
    let took = started.elapsed();
    let elapsed_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    let run = match &result {
        Ok(report) => wisp_telemetry::JobRun {
            finished: Some(report.finished),
            examined: report.examined,
            changed: report.changed,
            failed: report.failed,
            took,
        },
        Err(_) => wisp_telemetry::JobRun {
            took,
            ..Default::default()
        },
    };
    wisp_telemetry::record_job_run(job.name(), run);
    // The audit log holds the runs that changed records or failed, under no project
    // (a run spans every project); the counts are in the run's log line.
    let code = match &result {
        Ok(report) if report.changed > 0 => Some("OK"),
        Ok(_) => None,
        Err(_) => Some("ERROR"),
    };
    if let Some(code) = code {
        let entry = wisp_store::audit::AuditEntry::now(
            "",
            format!("job:{}", job.name()),
            format!("job/{}", job.name()),
            Vec::new(),
            "local",
            code,
        );
        ctx.stores.audit.record_or_log(&entry).await;
    }
    match result {
        Ok(mut report) => {
            report.elapsed_ms = elapsed_ms;
            tracing::info!(
                job = %job,
                finished = report.finished,
                examined = report.examined,
                changed = report.changed,
                failed = report.failed,
                elapsed_ms,
                "job run ended"
            );
            Ok(report)
        }
        Err(e) => {
            tracing::error!(job = %job, error = %wisp_telemetry::chain(&e), elapsed_ms, "job run failed");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_name_the_job() {
        for job in Job::ALL {
            let direct = JobRequest::from_event(&json!({"job": job.name()})).expect("direct");
            assert_eq!(direct.job, job);
            let eventbridge = JobRequest::from_event(&json!({
                "version": "0",
                "detail-type": "Scheduled Event",
                "source": "aws.events",
                "detail": {"job": job.name()}
            }))
            .expect("detail");
            assert_eq!(eventbridge.job, job);
        }
    }

    #[test]
    fn bad_events_say_what_is_expected() {
        let err = JobRequest::from_event(&json!({"detail": {}})).expect_err("no job");
        assert!(err.to_string().contains("orphan-commands"), "{err}");
        let err = JobRequest::from_event(&json!({"job": "reindex"})).expect_err("unknown");
        assert!(err.to_string().contains("unknown job \"reindex\""), "{err}");
        let err = JobRequest::from_event(&json!({"job": 3})).expect_err("not a string");
        assert!(err.to_string().contains("must be a string"), "{err}");
    }
}
