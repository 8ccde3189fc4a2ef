//! What the simulated pipeds did: calls, latencies, failures and bytes per RPC, the request
//! budget, and per-piped counts.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use super::rpc::Rpc;

/// The most requests a run may make. A call that would go beyond it is not made.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
    refused: AtomicU64,
}

impl Budget {
    pub fn new(limit: u64) -> Self {
        Budget {
            limit,
            used: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Takes one request from the budget; false (and nothing taken) when it is spent.
    pub fn take(&self) -> bool {
        let taken = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used < self.limit).then_some(used + 1)
            })
            .is_ok();
        if !taken {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Calls not made because the budget was spent.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// What a call is part of, which decides how the cost projection counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Made once when a piped starts: counted once per piped.
    Startup = 0,
    /// A periodic loop: scaled from the run's piped-seconds to a month.
    Steady = 1,
    /// Part of a deployment (trigger, plan, stages, completion, and the sync state and
    /// live-state events it causes): projected from the deploy rate.
    Deployment = 2,
}

/// Totals of one RPC in one phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct PhaseTotals {
    pub calls: u64,
    /// Sum of the latencies rounded up to whole milliseconds (Lambda's billing unit).
    pub billed_ms: u64,
    /// Encoded messages, both ways.
    pub bytes: u64,
}

/// One call as it went.
#[derive(Debug, Clone, Copy)]
pub struct CallRecord {
    pub rpc: Rpc,
    pub phase: Phase,
    pub latency: Duration,
    /// `None` for success.
    pub failure: Option<Failure>,
    /// Encoded request and response messages (response 0 on failure).
    pub request_bytes: usize,
    pub response_bytes: usize,
}

/// How a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    /// A gRPC status other than OK (its code number; `Code` has no order).
    Status(i32),
    /// The call did not finish within the call timeout.
    Timeout,
    /// OK status, but the response listed events the server could not apply.
    FailedIds,
}

impl Failure {
    pub fn name(self) -> &'static str {
        match self {
            Failure::Status(code) => wisp_bridge::Code::from_i32(code).name(),
            Failure::Timeout => "DEADLINE_EXCEEDED (client timeout)",
            Failure::FailedIds => "OK with failed_ids",
        }
    }
}

/// Totals of one RPC.
#[derive(Debug)]
pub struct RpcTotals {
    pub ok: u64,
    pub failures: BTreeMap<Failure, u64>,
    /// Attempts turned away with `UNAVAILABLE` and made again (each a request to the
    /// server, not a call of its own: the call's outcome is its last attempt's).
    pub retried: u64,
    /// Calls (either outcome), billed time and bytes, indexed by `Phase as usize`.
    pub phases: [PhaseTotals; 3],
    /// Latency of every call, in microseconds.
    pub latency_us: Histogram<u64>,
    /// Latency of the calls that ended after the first [`SETTLED_AFTER`] of the run (a
    /// cold start's queueing left out), in microseconds.
    pub settled_latency_us: Histogram<u64>,
}

/// Where a run's settled part starts: issue 34's fleet target is the p99 of every RPC
/// after the first 2 minutes.
pub const SETTLED_AFTER: Duration = Duration::from_secs(120);

impl RpcTotals {
    fn new() -> Result<Self, hdrhistogram::CreationError> {
        Ok(RpcTotals {
            ok: 0,
            failures: BTreeMap::new(),
            retried: 0,
            phases: [PhaseTotals::default(); 3],
            // 1 µs to 10 minutes at 3 significant digits; longer values are clamped.
            latency_us: Histogram::new_with_bounds(1, 600_000_000, 3)?,
            settled_latency_us: Histogram::new_with_bounds(1, 600_000_000, 3)?,
        })
    }

    pub fn calls(&self) -> u64 {
        self.phases.iter().map(|p| p.calls).sum()
    }

    pub fn phase(&self, phase: Phase) -> &PhaseTotals {
        &self.phases[phase as usize]
    }

    pub fn failed(&self) -> u64 {
        self.failures.values().sum()
    }

    /// The latency at `quantile` (0..=1) in milliseconds; 0 without calls.
    pub fn latency_ms(&self, quantile: f64) -> f64 {
        if self.latency_us.is_empty() {
            return 0.0;
        }
        self.latency_us.value_at_quantile(quantile) as f64 / 1000.0
    }

    /// The same over the calls that ended after [`SETTLED_AFTER`]; 0 without calls.
    pub fn settled_latency_ms(&self, quantile: f64) -> f64 {
        if self.settled_latency_us.is_empty() {
            return 0.0;
        }
        self.settled_latency_us.value_at_quantile(quantile) as f64 / 1000.0
    }
}

/// Width of one bucket of the timeline.
pub const TIMELINE_BUCKET: Duration = Duration::from_secs(10);

/// Calls that ended within one [`TIMELINE_BUCKET`] of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    pub calls: u64,
    pub failed: u64,
}

/// Everything the fleet recorded, shared by all simulated pipeds.
#[derive(Debug)]
pub struct Recorder {
    totals: Mutex<Vec<RpcTotals>>,
    /// Calls and failures by when they ended, from the recorder's creation.
    timeline: Mutex<Vec<Bucket>>,
    started: std::time::Instant,
    calls: AtomicU64,
    failed: AtomicU64,
    retried: AtomicU64,
    deployments_triggered: AtomicU64,
    deployments_completed: AtomicU64,
}

impl Recorder {
    pub fn new() -> Result<Self, hdrhistogram::CreationError> {
        let totals = Rpc::ALL
            .iter()
            .map(|_| RpcTotals::new())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Recorder {
            totals: Mutex::new(totals),
            timeline: Mutex::new(Vec::new()),
            started: std::time::Instant::now(),
            calls: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            deployments_triggered: AtomicU64::new(0),
            deployments_completed: AtomicU64::new(0),
        })
    }

    pub fn record(&self, call: &CallRecord) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if call.failure.is_some() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.on_timeline(1, u64::from(call.failure.is_some()));
        let micros = u64::try_from(call.latency.as_micros()).unwrap_or(u64::MAX);
        let billed_ms = micros.div_ceil(1000).max(1);
        let bytes = (call.request_bytes + call.response_bytes) as u64;
        let mut totals = match self.totals.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        let t = &mut totals[call.rpc.index()];
        match call.failure {
            None => t.ok += 1,
            Some(f) => *t.failures.entry(f).or_default() += 1,
        }
        let p = &mut t.phases[call.phase as usize];
        p.calls += 1;
        p.billed_ms += billed_ms;
        p.bytes += bytes;
        t.latency_us.saturating_record(micros.max(1));
        if self.started.elapsed() >= SETTLED_AFTER {
            t.settled_latency_us.saturating_record(micros.max(1));
        }
    }

    /// An attempt of `rpc` turned away with `UNAVAILABLE`, to be made again: counted
    /// apart (not a call, not a failure, not in the latencies).
    pub fn record_retry(&self, rpc: Rpc) {
        self.retried.fetch_add(1, Ordering::Relaxed);
        let mut totals = match self.totals.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        totals[rpc.index()].retried += 1;
    }

    /// Attempts made again so far.
    pub fn retried(&self) -> u64 {
        self.retried.load(Ordering::Relaxed)
    }

    /// Turns one success of `rpc` already recorded into `failure` (an OK status whose
    /// response reports a failure).
    pub fn reclassify(&self, rpc: Rpc, failure: Failure) {
        let mut totals = match self.totals.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        let t = &mut totals[rpc.index()];
        if t.ok > 0 {
            t.ok -= 1;
            *t.failures.entry(failure).or_default() += 1;
            self.failed.fetch_add(1, Ordering::Relaxed);
            drop(totals);
            self.on_timeline(0, 1);
        }
    }

    fn on_timeline(&self, calls: u64, failed: u64) {
        let at = self.started.elapsed().as_secs() / TIMELINE_BUCKET.as_secs();
        let at = usize::try_from(at).unwrap_or(usize::MAX);
        let mut timeline = match self.timeline.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        // A run lasts at most a day of buckets; later calls go in the last one.
        let at = at.min(24 * 360);
        if timeline.len() <= at {
            timeline.resize(at + 1, Bucket::default());
        }
        timeline[at].calls += calls;
        timeline[at].failed += failed;
    }

    /// Calls and failures per [`TIMELINE_BUCKET`], from the start of the run.
    pub fn timeline(&self) -> Vec<Bucket> {
        match self.timeline.lock() {
            Ok(t) => t.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn deployment_triggered(&self) {
        self.deployments_triggered.fetch_add(1, Ordering::Relaxed);
    }

    pub fn deployment_completed(&self) {
        self.deployments_completed.fetch_add(1, Ordering::Relaxed);
    }

    /// (calls, failed) so far, for the progress display.
    pub fn progress(&self) -> (u64, u64) {
        (
            self.calls.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }

    pub fn deployments(&self) -> (u64, u64) {
        (
            self.deployments_triggered.load(Ordering::Relaxed),
            self.deployments_completed.load(Ordering::Relaxed),
        )
    }

    /// The totals, once every piped has stopped.
    pub fn into_totals(self) -> Vec<RpcTotals> {
        match self.totals.into_inner() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// How late the simulator's own runtime runs: a probe task asks to wake every
/// [`LAG_PROBE_EVERY`] and records how long after that instant it actually ran. A call's
/// latency includes this lag (the response waits for the runtime like the probe does),
/// so when it is of the order of the calls' latencies, they measure the simulator, not
/// the server.
#[derive(Debug)]
pub struct Lag {
    /// Lateness of every wake-up, in microseconds: over the run, and after the first
    /// [`SETTLED_AFTER`].
    pub all_us: Histogram<u64>,
    pub settled_us: Histogram<u64>,
}

/// Period of the lag probe.
pub const LAG_PROBE_EVERY: Duration = Duration::from_millis(100);

impl Lag {
    pub fn new() -> Result<Self, hdrhistogram::CreationError> {
        Ok(Lag {
            all_us: Histogram::new_with_bounds(1, 600_000_000, 3)?,
            settled_us: Histogram::new_with_bounds(1, 600_000_000, 3)?,
        })
    }

    /// Probes until `deadline`; `started` is the run's start.
    pub async fn probe(
        mut self,
        started: tokio::time::Instant,
        deadline: tokio::time::Instant,
    ) -> Lag {
        let mut due = tokio::time::Instant::now() + LAG_PROBE_EVERY;
        while due < deadline {
            tokio::time::sleep_until(due).await;
            let now = tokio::time::Instant::now();
            let late = u64::try_from(now.saturating_duration_since(due).as_micros())
                .unwrap_or(u64::MAX)
                .max(1);
            self.all_us.saturating_record(late);
            if now.saturating_duration_since(started) >= SETTLED_AFTER {
                self.settled_us.saturating_record(late);
            }
            // The next wake-up is asked from now: a late one does not make a burst.
            due = now + LAG_PROBE_EVERY;
        }
        self
    }
}

/// Milliseconds at `quantile` of a histogram in microseconds (0 when empty).
pub fn ms_at(h: &Histogram<u64>, quantile: f64) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    h.value_at_quantile(quantile) as f64 / 1000.0
}

/// Calls one simulated piped made, per RPC.
#[derive(Debug)]
pub struct PipedCounters {
    calls: Vec<AtomicU64>,
}

impl Default for PipedCounters {
    fn default() -> Self {
        PipedCounters {
            calls: Rpc::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl PipedCounters {
    pub fn add(&self, rpc: Rpc) {
        self.calls[rpc.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, rpc: Rpc) -> u64 {
        self.calls[rpc.index()].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    /// The probe wakes once a period until the deadline (at most 3 times in 350 ms, at
    /// least once however late) and records each wake-up; none in the settled part of a
    /// run shorter than it.
    #[tokio::test]
    async fn lag_probe_records_each_wake_up() {
        let start = tokio::time::Instant::now();
        let lag = Lag::new()
            .expect("valid histogram bounds")
            .probe(start, start + Duration::from_millis(350))
            .await;
        assert!((1..=3).contains(&lag.all_us.len()), "{}", lag.all_us.len());
        assert!(lag.all_us.min() >= 1);
        assert!(lag.settled_us.is_empty());
        assert_eq!(ms_at(&lag.settled_us, 0.99), 0.0);
    }

    #[test]
    fn budget_refuses_beyond_its_limit() {
        let budget = Budget::new(3);
        assert!(budget.take());
        assert!(budget.take());
        assert!(budget.take());
        assert!(!budget.take());
        assert!(!budget.take());
        assert_eq!(budget.used(), 3);
        assert_eq!(budget.refused(), 2);
    }

    #[test]
    fn totals_by_phase_and_outcome() {
        let recorder = Recorder::new().expect("valid histogram bounds");
        let call = |phase, failure, ms| CallRecord {
            rpc: Rpc::ReportStat,
            phase,
            latency: Duration::from_micros(ms),
            failure,
            request_bytes: 100,
            response_bytes: 10,
        };
        recorder.record(&call(Phase::Steady, None, 1_500));
        recorder.record(&call(Phase::Steady, None, 200));
        recorder.record(&call(
            Phase::Startup,
            Some(Failure::Status(Code::Unavailable as i32)),
            3_000,
        ));
        assert_eq!(recorder.progress(), (3, 1));
        let totals = recorder.into_totals();
        let t = &totals[Rpc::ReportStat.index()];
        assert_eq!((t.ok, t.failed(), t.calls()), (2, 1, 3));
        let (startup, steady) = (t.phase(Phase::Startup), t.phase(Phase::Steady));
        assert_eq!((startup.calls, steady.calls), (1, 2));
        assert_eq!(t.phase(Phase::Deployment).calls, 0);
        // 1.5 ms bills 2 ms, 0.2 ms bills 1 ms.
        assert_eq!(steady.billed_ms, 3);
        assert_eq!(startup.billed_ms, 3);
        assert_eq!(steady.bytes, 220);
        assert!(
            (t.latency_ms(1.0) - 3.0).abs() < 0.01,
            "{}",
            t.latency_ms(1.0)
        );
        assert_eq!(
            t.failures.get(&Failure::Status(Code::Unavailable as i32)),
            Some(&1)
        );
    }
}
