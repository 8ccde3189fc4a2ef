//! The jobs on a timer, for `wisp serve` (the Lambda deployment has EventBridge instead):
//! each job on its own interval, one run of a job at a time, every run bounded by a
//! deadline. A run that fails is logged and the next one comes on schedule; a run cut by
//! its deadline resumes on the next (the jobs are idempotent and resumable).

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;
use wisp_store::stores::Stores;

use crate::{Deadline, Job, JobContext, Settings};

/// The first run of a job comes after its interval or this, whichever is shorter: soon
/// after start, but not while the server is still opening.
pub const FIRST_RUN_AFTER_AT_MOST: Duration = Duration::from_secs(10);
/// Bounds of one run's deadline: its interval, but at least the minimum (a job on a short
/// interval still gets a useful run) and at most the maximum (a long job leaves the rest
/// to its next run instead of holding a shutdown).
pub const RUN_BUDGET_MIN: Duration = Duration::from_secs(10);
pub const RUN_BUDGET_MAX: Duration = Duration::from_secs(5 * 60);

/// Which jobs run, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    entries: Vec<(Job, Duration)>,
}

impl Schedule {
    /// Zero intervals are raised to one second (a zero interval would spin).
    pub fn new(entries: Vec<(Job, Duration)>) -> Schedule {
        Schedule {
            entries: entries
                .into_iter()
                .map(|(job, every)| (job, every.max(Duration::from_secs(1))))
                .collect(),
        }
    }

    pub fn entries(&self) -> &[(Job, Duration)] {
        &self.entries
    }

    /// The interval of `job`, if it is scheduled.
    pub fn interval(&self, job: Job) -> Option<Duration> {
        self.entries
            .iter()
            .find(|(j, _)| *j == job)
            .map(|(_, every)| *every)
    }
}

/// The deadline budget of one run of a job scheduled every `interval`.
pub fn run_budget(interval: Duration) -> Duration {
    interval.clamp(RUN_BUDGET_MIN, RUN_BUDGET_MAX)
}

/// Runs the scheduled jobs until `stop` completes; a run in progress then is abandoned
/// (its work so far is kept; the next start resumes it).
pub async fn run_until(
    stores: Stores,
    settings: Settings,
    schedule: Schedule,
    stop: impl Future<Output = ()>,
) {
    let mut tasks = JoinSet::new();
    for &(job, every) in schedule.entries() {
        let stores = stores.clone();
        let settings = settings.clone();
        tasks.spawn(async move { every_interval(job, every, stores, settings).await });
    }
    tracing::info!(
        jobs = %schedule
            .entries()
            .iter()
            .map(|(job, every)| format!("{job}={}s", every.as_secs()))
            .collect::<Vec<_>>()
            .join(" "),
        "scheduled jobs started"
    );
    stop.await;
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
}

async fn every_interval(job: Job, every: Duration, stores: Stores, settings: Settings) {
    let first = tokio::time::Instant::now() + every.min(FIRST_RUN_AFTER_AT_MOST);
    let mut ticks = tokio::time::interval_at(first, every);
    // A run longer than the interval delays the next one; runs never pile up.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let ctx = JobContext::new(
            &stores,
            Deadline::after(run_budget(every)),
            settings.clone(),
        );
        // `crate::run` logs the report or the error; the schedule goes on either way.
        let _ = crate::run(job, &ctx).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_and_intervals_are_bounded() {
        assert_eq!(run_budget(Duration::from_secs(1)), RUN_BUDGET_MIN);
        assert_eq!(run_budget(Duration::from_secs(60)), Duration::from_secs(60));
        assert_eq!(run_budget(Duration::from_secs(86_400)), RUN_BUDGET_MAX);
        let s = Schedule::new(vec![(Job::Insights, Duration::ZERO)]);
        assert_eq!(s.interval(Job::Insights), Some(Duration::from_secs(1)));
        assert_eq!(s.interval(Job::PipedStats), None);
    }
}
