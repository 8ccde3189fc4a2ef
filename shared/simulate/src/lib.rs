//! `wisp simulate`: a fleet of simulated pipeds that drive a running control plane over the
//! network only, at upstream's cadence, and what that fleet would cost on AWS per month.
//!
//! The pipeds and applications are registered in the store beforehand (by the CLI, as the
//! admin commands do); from then on everything goes through PipedService at `--target`.

pub mod client;
pub mod compute;
pub mod cost;
pub mod flood;
mod piped;

pub use piped::stat_payload;
pub mod report;
pub mod rng;
pub mod rpc;
pub mod stats;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use client::Target;
pub use piped::SimApp;
use piped::{PipedSpec, Shared, SimPiped};
use rpc::{MAX_CALLS_PER_DEPLOYMENT, Rpc, max_ticks};
use stats::{Budget, Recorder, RpcTotals};

/// A registered piped, with the key it authenticates with.
#[derive(Debug, Clone)]
pub struct RegisteredPiped {
    pub project: String,
    pub id: String,
    pub name: String,
    pub key: String,
    pub apps: Vec<SimApp>,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub pipeds: Vec<RegisteredPiped>,
    pub apps_per_piped: usize,
    pub duration: Duration,
    /// Pipeds start spread evenly at random over this window.
    pub ramp_up: Duration,
    pub call_timeout: Duration,
    pub deploy_rate_per_hour: f64,
    pub stat_bytes: usize,
    pub seed: u64,
    /// Calls a second of the hostile flood beside the fleet (0: none); see [`flood`].
    pub flood_rate: f64,
}

impl Plan {
    /// The most deployments one piped triggers: twice the expected number, plus two (a
    /// Poisson process rarely goes beyond that; the cap keeps the budget exact).
    pub fn max_deployments_per_piped(&self) -> u64 {
        if self.deploy_rate_per_hour <= 0.0 {
            return 0;
        }
        let expected = self.deploy_rate_per_hour * self.duration.as_secs_f64() / 3600.0;
        (2.0 * expected).ceil() as u64 + 2
    }

    /// The most requests one piped can make in the run (see [`rpc`] for each loop).
    pub fn requests_per_piped(&self) -> u64 {
        let d = self.duration;
        let apps = self.apps_per_piped as u64;
        // ReportPipedMeta, ListApplications, ListEvents, ReportUnregistered..., snapshots.
        let startup = 4 + apps;
        let steady = max_ticks(d, rpc::COMMAND_POLL)
            + max_ticks(d, rpc::LIVE_STATE_EVENTS)
            + max_ticks(d, rpc::DEPLOYMENT_POLL)
            + max_ticks(d, rpc::STATS)
            + max_ticks(d, rpc::APPLICATION_POLL)
            + max_ticks(d, rpc::EVENT_POLL)
            + max_ticks(d, rpc::EVENT_WATCHER)
            + max_ticks(d, rpc::DRIFT_CHECK) * apps
            + max_ticks(d, rpc::LIVE_STATE_SNAPSHOT) * apps
            + self.max_deployments_per_piped() * MAX_CALLS_PER_DEPLOYMENT;
        startup + steady
    }

    /// The announced maximum for the whole run.
    pub fn request_budget(&self) -> u64 {
        self.requests_per_piped()
            .saturating_mul(self.pipeds.len() as u64)
    }
}

/// One piped's part of the run.
#[derive(Debug, Clone)]
pub struct PipedOutcome {
    pub id: String,
    pub name: String,
    pub started_after: Duration,
    /// Seconds it ran before the deadline.
    pub active: Duration,
    /// Calls per RPC, indexed by [`Rpc::index`].
    pub calls: Vec<u64>,
}

/// Everything the run measured.
#[derive(Debug)]
pub struct Outcome {
    pub totals: Vec<RpcTotals>,
    pub pipeds: Vec<PipedOutcome>,
    pub budget: u64,
    pub requests: u64,
    /// Calls not made because the budget was spent (0 unless the bound is wrong).
    pub refused: u64,
    pub elapsed: Duration,
    pub deployments_triggered: u64,
    pub deployments_completed: u64,
    /// The hostile flood's calls, apart from the fleet's (`None` without one).
    pub flood: Option<flood::FloodOutcome>,
    /// The fleet's calls and failures per 10 s, from the start.
    pub timeline: Vec<stats::Bucket>,
    /// How late the simulator's own runtime ran ([`stats::Lag`]).
    pub lag: stats::Lag,
}

impl Outcome {
    pub fn errors(&self) -> u64 {
        self.totals.iter().map(RpcTotals::failed).sum()
    }

    /// Attempts turned away with `UNAVAILABLE` and made again.
    pub fn retried(&self) -> u64 {
        self.totals.iter().map(|t| t.retried).sum()
    }

    pub fn piped_seconds(&self) -> f64 {
        self.pipeds.iter().map(|p| p.active.as_secs_f64()).sum()
    }
}

/// Runs the fleet until `plan.duration` has passed and every call in flight has ended
/// (each within the call timeout).
pub async fn run(plan: &Plan) -> Result<Outcome, String> {
    let recorder = Recorder::new().map_err(|e| format!("latency histogram: {e}"))?;
    let start = Instant::now();
    let deadline = start + plan.duration;
    let shared = Arc::new(Shared {
        recorder,
        budget: Budget::new(plan.request_budget()),
        deadline,
        call_timeout: plan.call_timeout,
        stat_bytes: plan.stat_bytes,
    });
    let deploy_rate = plan.deploy_rate_per_hour / 3600.0;
    let mut rng = rng::Rng::new(plan.seed);
    let mut pipeds = Vec::with_capacity(plan.pipeds.len());
    let mut outcomes = Vec::with_capacity(plan.pipeds.len());
    for p in &plan.pipeds {
        let authorization = format!("PIPED-TOKEN {},{},{}", p.project, p.id, p.key);
        let client = client::connect(&plan.target, &authorization)?;
        let start_after = plan.ramp_up.mul_f64(rng.next_f64());
        let spec = PipedSpec {
            project: p.project.clone(),
            id: p.id.clone(),
            name: p.name.clone(),
            apps: p.apps.clone(),
            start_after,
            deploy_rate,
            max_deployments: plan.max_deployments_per_piped(),
            seed: rng.next_u64(),
        };
        outcomes.push(PipedOutcome {
            id: p.id.clone(),
            name: p.name.clone(),
            started_after: start_after,
            active: plan.duration.saturating_sub(start_after),
            calls: vec![],
        });
        pipeds.push(SimPiped::new(spec, client, Arc::clone(&shared)));
    }
    let handles: Vec<_> = pipeds
        .iter()
        .map(|p| tokio::spawn(Arc::clone(p).run(start)))
        .collect();
    let flood = (plan.flood_rate > 0.0).then(|| {
        let victims = plan
            .pipeds
            .iter()
            .map(|p| (p.project.clone(), p.id.clone()))
            .collect();
        tokio::spawn(flood::run(
            plan.target.clone(),
            victims,
            plan.flood_rate,
            deadline,
            plan.call_timeout,
            plan.seed ^ 0x5eed,
        ))
    });
    let progress = Progress::start(Arc::clone(&shared), plan.duration, start);
    let lag = tokio::spawn(
        stats::Lag::new()
            .map_err(|e| format!("lag histogram: {e}"))?
            .probe(start, deadline),
    );
    for handle in handles {
        handle
            .await
            .map_err(|e| format!("a simulated piped stopped abnormally: {e}"))?;
    }
    progress.finish().await;
    let lag = lag
        .await
        .map_err(|e| format!("the lag probe stopped abnormally: {e}"))?;
    let flood = match flood {
        Some(task) => Some(
            task.await
                .map_err(|e| format!("the flood stopped abnormally: {e}"))??,
        ),
        None => None,
    };
    let elapsed = start.elapsed();
    for (outcome, p) in outcomes.iter_mut().zip(&pipeds) {
        outcome.calls = Rpc::ALL.iter().map(|&r| p.counters.get(r)).collect();
    }
    drop(pipeds);
    let shared = Arc::try_unwrap(shared)
        .map_err(|_| "the simulated pipeds still hold the recorder".to_string())?;
    let (triggered, completed) = shared.recorder.deployments();
    let timeline = shared.recorder.timeline();
    Ok(Outcome {
        budget: shared.budget.limit(),
        requests: shared.budget.used(),
        refused: shared.budget.refused(),
        totals: shared.recorder.into_totals(),
        pipeds: outcomes,
        elapsed,
        deployments_triggered: triggered,
        deployments_completed: completed,
        flood,
        timeline,
        lag,
    })
}

/// A progress bar on stderr when it is a terminal; otherwise a line every 10 s.
struct Progress {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    fn start(shared: Arc<Shared>, duration: Duration, start: Instant) -> Progress {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let terminal = std::io::stderr().is_terminal();
        let task = tokio::spawn(async move {
            let total = duration.as_secs().max(1);
            let bar = terminal.then(|| {
                let bar = indicatif::ProgressBar::new(total);
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "{spinner} [{bar:30}] {pos}/{len} s  {msg}",
                ) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar
            });
            let every = if terminal {
                Duration::from_millis(250)
            } else {
                Duration::from_secs(10)
            };
            let mut interval = tokio::time::interval_at(start + every, every);
            loop {
                tokio::select! {
                    _ = interval.tick() => {}
                    _ = &mut stopped => break,
                }
                let (calls, failed) = shared.recorder.progress();
                let secs = start.elapsed().as_secs_f64();
                let rate = if secs > 0.0 { calls as f64 / secs } else { 0.0 };
                let message = format!("{calls} calls, {failed} failed, {rate:.0} calls/s");
                match &bar {
                    Some(bar) => {
                        bar.set_position((secs as u64).min(total));
                        bar.set_message(message);
                    }
                    None => eprintln!(
                        "wisp simulate: {:.0}/{total} s, {message}",
                        secs.min(total as f64)
                    ),
                }
            }
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
        });
        Progress { stop, task }
    }

    async fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}
