//! The simulated pipeds: one HTTP/2 (h2c) connection each, one call in flight each, and
//! the two load shapes (back-to-back saturation; the real 5 s / 60 s cadence).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use hdrhistogram::Histogram;
use tokio::time::Instant;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use wisp_proto::pipedservice::piped_service_client::PipedServiceClient;
use wisp_proto::pipedservice::{ListUnhandledCommandsRequest, ReportStatRequest};

use crate::servers::PipedIdentity;

/// Latencies are recorded in nanoseconds, from 1 µs to 60 s, 3 significant digits.
#[allow(
    clippy::expect_used,
    reason = "constant bounds within hdrhistogram's limits: it cannot fail"
)]
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).expect("valid histogram bounds")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    ListUnhandledCommands,
    ReportStat,
}

/// Which RPCs the saturation phase calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    /// ListUnhandledCommands and ReportStat alternately.
    Both,
    /// ListUnhandledCommands only.
    List,
    /// ReportStat only.
    Stat,
}

/// One simulated piped: its own connection and credentials.
#[derive(Clone)]
pub struct SimPiped {
    index: usize,
    client: PipedServiceClient<Channel>,
    authorization: AsciiMetadataValue,
    /// Static part of the OpenMetrics-like payload sent with ReportStat.
    stat_body: Arc<Vec<u8>>,
    /// Shared by the clones each phase makes, so reports never repeat across phases.
    stat_seq: Arc<AtomicU64>,
}

impl SimPiped {
    /// Opens one connection (one tonic `Channel`, HTTP/2 cleartext) to `addr`.
    pub async fn connect(
        addr: SocketAddr,
        index: usize,
        identity: &PipedIdentity,
        stat_bytes: usize,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            addr.ip().is_loopback(),
            "the benchmark only talks to 127.0.0.1"
        );
        let channel = Endpoint::from_shared(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10))
            .connect()
            .await
            .with_context(|| format!("connect piped {index} to {addr}"))?;
        let authorization = MetadataValue::try_from(identity.token.to_authorization_value())
            .context("authorization header")?;
        Ok(SimPiped {
            index,
            client: PipedServiceClient::new(channel),
            authorization,
            stat_body: Arc::new(stat_payload(index, stat_bytes)),
            stat_seq: Arc::new(AtomicU64::new(0)),
        })
    }

    /// One call; `Err` carries the status message.
    pub async fn call(&mut self, rpc: Rpc) -> Result<(), String> {
        match rpc {
            Rpc::ListUnhandledCommands => {
                let mut request = tonic::Request::new(ListUnhandledCommandsRequest {});
                request
                    .metadata_mut()
                    .insert("authorization", self.authorization.clone());
                self.client.list_unhandled_commands(request).await.map(drop)
            }
            Rpc::ReportStat => {
                // A real piped's counters move between reports, so every report differs
                // (and is written, not skipped as unchanged).
                let seq = self.stat_seq.fetch_add(1, Ordering::Relaxed) + 1;
                let mut metrics = Vec::with_capacity(self.stat_body.len() + 64);
                metrics.extend_from_slice(&self.stat_body);
                metrics.extend_from_slice(
                    format!(
                        "piped_bench_reports_total{{piped=\"{}\"}} {}\n",
                        self.index, seq
                    )
                    .as_bytes(),
                );
                let mut request = tonic::Request::new(ReportStatRequest {
                    piped_stats: metrics,
                });
                request
                    .metadata_mut()
                    .insert("authorization", self.authorization.clone());
                self.client.report_stat(request).await.map(drop)
            }
        }
        .map_err(|status| format!("{:?}: {}", status.code(), status.message()))
    }
}

/// About `size` bytes of Prometheus text exposition, like the metrics a piped reports.
fn stat_payload(index: usize, size: usize) -> Vec<u8> {
    let mut out = String::with_capacity(size + 128);
    out.push_str("# HELP piped_bench_gauge A stand-in for a piped metric.\n");
    out.push_str("# TYPE piped_bench_gauge gauge\n");
    let mut n = 0;
    while out.len() < size {
        out.push_str(&format!(
            "piped_bench_gauge{{piped=\"{index}\",series=\"{n}\"}} {n}\n"
        ));
        n += 1;
    }
    out.into_bytes()
}

/// What one phase measured against one server.
pub struct PhaseOutcome {
    pub all: Histogram<u64>,
    pub list: Histogram<u64>,
    pub stat: Histogram<u64>,
    pub errors: u64,
    pub first_error: Option<String>,
    /// From the common start to the last call's end (saturation), or the phase duration.
    pub elapsed: Duration,
    /// True when the request cap, not the clock, ended the phase.
    pub capped: bool,
}

impl PhaseOutcome {
    fn new() -> Self {
        PhaseOutcome {
            all: new_histogram(),
            list: new_histogram(),
            stat: new_histogram(),
            errors: 0,
            first_error: None,
            elapsed: Duration::ZERO,
            capped: false,
        }
    }

    fn record(&mut self, rpc: Rpc, result: Result<(), String>, latency: Duration) {
        match result {
            Ok(()) => {
                let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
                self.all.saturating_record(ns);
                match rpc {
                    Rpc::ListUnhandledCommands => self.list.saturating_record(ns),
                    Rpc::ReportStat => self.stat.saturating_record(ns),
                }
            }
            Err(e) => {
                self.errors += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(format!("{rpc:?}: {e}"));
                }
            }
        }
    }

    fn merge(&mut self, other: PhaseOutcome) {
        // Same bounds everywhere, so `add` cannot fail.
        let _ = self.all.add(&other.all);
        let _ = self.list.add(&other.list);
        let _ = self.stat.add(&other.stat);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.capped |= other.capped;
    }

    pub fn ok_requests(&self) -> u64 {
        self.all.len()
    }
}

async fn timed_call(
    piped: &mut SimPiped,
    rpc: Rpc,
    timeout: Duration,
) -> (Result<(), String>, Duration) {
    let started = Instant::now();
    let result = match tokio::time::timeout(timeout, piped.call(rpc)).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    };
    (result, started.elapsed())
}

/// One call per piped, all at once, not measured: fills the verifier cache (one check
/// per piped) and creates each piped's stored stat. Every call must succeed.
pub async fn warm_up(pipeds: &[SimPiped], timeout: Duration) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for piped in pipeds {
        let mut piped = piped.clone();
        tasks.spawn(async move {
            for rpc in [Rpc::ListUnhandledCommands, Rpc::ReportStat] {
                let (result, _) = timed_call(&mut piped, rpc, timeout).await;
                result.map_err(|e| {
                    anyhow::anyhow!("warm-up {rpc:?} of piped {}: {e}", piped.index)
                })?;
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.context("warm-up task")??;
    }
    Ok(())
}

/// Phase A: every piped calls back to back (with [`Mix::Both`], alternating
/// ListUnhandledCommands and ReportStat, half of them starting with each) until `duration`
/// has passed or `max_requests` calls have been started, whichever comes first.
pub async fn saturate(
    pipeds: &[SimPiped],
    mix: Mix,
    duration: Duration,
    max_requests: u64,
    timeout: Duration,
) -> anyhow::Result<PhaseOutcome> {
    let started_calls = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for piped in pipeds {
        let mut piped = piped.clone();
        let started_calls = started_calls.clone();
        tasks.spawn(async move {
            let mut outcome = PhaseOutcome::new();
            let mut next_is_list = piped.index % 2 == 0;
            let mut last_end = start;
            while Instant::now() < deadline {
                if started_calls.fetch_add(1, Ordering::Relaxed) >= max_requests {
                    outcome.capped = true;
                    break;
                }
                let rpc = match mix {
                    Mix::List => Rpc::ListUnhandledCommands,
                    Mix::Stat => Rpc::ReportStat,
                    Mix::Both if next_is_list => Rpc::ListUnhandledCommands,
                    Mix::Both => Rpc::ReportStat,
                };
                next_is_list = !next_is_list;
                let (result, latency) = timed_call(&mut piped, rpc, timeout).await;
                outcome.record(rpc, result, latency);
                last_end = Instant::now();
            }
            (outcome, last_end)
        });
    }
    let mut total = PhaseOutcome::new();
    let mut last_end = start;
    while let Some(joined) = tasks.join_next().await {
        let (outcome, end) = joined.context("load task")?;
        total.merge(outcome);
        last_end = last_end.max(end);
    }
    total.elapsed = last_end.duration_since(start);
    Ok(total)
}

/// The schedule of Phase B.
#[derive(Debug, Clone, Copy)]
pub struct Cadence {
    pub list_every: Duration,
    pub stat_every: Duration,
    pub seed: u64,
}

/// Phase B: each piped calls ListUnhandledCommands every `list_every` and ReportStat every
/// `stat_every`, from random offsets within one period (so the pipeds do not poll in
/// lockstep), one call in flight, until `duration` has passed or `max_requests` calls
/// have been started.
pub async fn cadence(
    pipeds: &[SimPiped],
    cadence: Cadence,
    duration: Duration,
    max_requests: u64,
    timeout: Duration,
) -> anyhow::Result<PhaseOutcome> {
    let started_calls = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for piped in pipeds {
        let mut piped = piped.clone();
        let started_calls = started_calls.clone();
        let salt = cadence.seed ^ (piped.index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut next_list = start + jitter(cadence.list_every, splitmix64(salt));
        let mut next_stat = start + jitter(cadence.stat_every, splitmix64(salt ^ 0x0051_57A7));
        tasks.spawn(async move {
            let mut outcome = PhaseOutcome::new();
            loop {
                let (when, rpc) = if next_list <= next_stat {
                    (next_list, Rpc::ListUnhandledCommands)
                } else {
                    (next_stat, Rpc::ReportStat)
                };
                if when >= deadline {
                    break;
                }
                tokio::time::sleep_until(when).await;
                if started_calls.fetch_add(1, Ordering::Relaxed) >= max_requests {
                    outcome.capped = true;
                    break;
                }
                let (result, latency) = timed_call(&mut piped, rpc, timeout).await;
                outcome.record(rpc, result, latency);
                // Like a ticker: the next call is one period after the scheduled one, not
                // after this call's end (a slow call is followed at once by the next one).
                match rpc {
                    Rpc::ListUnhandledCommands => next_list += cadence.list_every,
                    Rpc::ReportStat => next_stat += cadence.stat_every,
                }
            }
            outcome
        });
    }
    let mut total = PhaseOutcome::new();
    while let Some(joined) = tasks.join_next().await {
        total.merge(joined.context("load task")?);
    }
    total.elapsed = duration;
    Ok(total)
}

/// A point in `[0, period)` picked by `random`.
fn jitter(period: Duration, random: u64) -> Duration {
    let nanos = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1);
    Duration::from_nanos(random % nanos)
}

/// SplitMix64: a tiny deterministic generator, enough to spread start times.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
