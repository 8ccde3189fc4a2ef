//! `wisp jobs list` and `wisp jobs run NAME`: the scheduled jobs that `wisp serve` runs on
//! a timer (and the `wisp-jobs` Lambda function on EventBridge schedules), listed with
//! their periods, or run once now against the configured stores.

use std::time::Duration;

use clap::Subcommand;
use wisp_jobs::{Deadline, Job, JobContext};

use super::flags::parse_duration;
use super::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List the jobs and how often `wisp serve` runs each (`jobs` in the config).
    List {
        #[command(flatten)]
        stores: StoreArgs,
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one job once, now, and print its report.
    Run {
        /// orphan-commands, piped-stats, plan-preview-outputs, deployment-chains or
        /// insights.
        name: String,
        #[command(flatten)]
        stores: StoreArgs,
        /// Stop the run after this long (what is left is done by the next run).
        #[arg(long, default_value = "5m", value_parser = parse_duration)]
        timeout: Duration,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(cmd: JobsCommand) -> Result<(), CliError> {
    match cmd {
        JobsCommand::List { stores, json } => {
            // The periods come from the config alone: no store is opened.
            let loaded =
                wisp_app::sources::load(&stores.sources(wisp_app::KeySource::None)).await?;
            let schedule = wisp_app::job_schedule(&loaded.config);
            if json {
                let rows: Vec<serde_json::Value> = schedule
                    .entries()
                    .iter()
                    .map(|(job, every)| {
                        serde_json::json!({"name": job.name(), "intervalSeconds": every.as_secs()})
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            } else {
                for (job, every) in schedule.entries() {
                    println!(
                        "{}\tevery {}",
                        job.name(),
                        wisp_config::format_go_duration(*every)
                    );
                }
            }
            Ok(())
        }
        JobsCommand::Run {
            name,
            stores,
            timeout,
            json,
        } => {
            let job = Job::parse(&name).ok_or_else(|| {
                CliError::Usage(format!(
                    "unknown job {name:?}; the jobs are {}",
                    Job::ALL.map(Job::name).join(", ")
                ))
            })?;
            let app = stores.open().await?;
            let ctx = JobContext::new(&app.stores, Deadline::after(timeout), app.job_settings());
            let report = wisp_jobs::run(job, &ctx)
                .await
                .map_err(|e| CliError::Failure(anyhow::Error::new(e)))?;
            if json {
                let text = serde_json::to_string(&report)
                    .map_err(|e| CliError::Failure(anyhow::anyhow!("encode the report: {e}")))?;
                println!("{text}");
            } else {
                println!(
                    "{job}: {} examined, {} changed, {} failed, {} ms{}",
                    report.examined,
                    report.changed,
                    report.failed,
                    report.elapsed_ms,
                    if report.finished {
                        String::new()
                    } else {
                        " (stopped at the timeout; the next run goes on)".to_string()
                    }
                );
                if let Some(note) = &report.note {
                    println!("note: {note}");
                }
            }
            Ok(())
        }
    }
}
