//! What Wisp measures. Every crate records through the `metrics` facade with the names
//! below, so that a metric is named, typed and explained in one place; the binary picks
//! the exporter (`wisp serve`: Prometheus text on its admin address). Without an
//! installed recorder, recording costs a branch and nothing else.
//!
//! Labels are bounded: services, methods and codes come from fixed lists (an unknown
//! method is recorded as `unknown`), credentials and outcomes from enums. No id is ever a
//! label.
//!
//! Label profiles ([`Profile`]). Prometheus (`wisp serve`) gets every label: a series
//! costs nothing. CloudWatch (the Lambda functions, `emf`) bills each combination of
//! dimensions as a custom metric, so there the basic profile records only what the alarms
//! and the dashboard read, and the detailed one keeps few labels: `code_class` instead of
//! method and code, the store and whether it failed instead of kind, operation and
//! outcome, no store or job latency (the functions' own `Duration` metric covers it).
//! docs/METRICS.md lists them.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

pub use metrics;

mod error_chain;
pub use error_chain::{ErrorChain, chain};
pub mod process;

/// Which labels (and how many metrics) the process records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Profile {
    /// Every metric with every label (`wisp serve`).
    Prometheus = 0,
    /// CloudWatch, what the alarms and the dashboard read: calls by code class, connected
    /// pipeds, init failures (a dozen custom metrics).
    CloudWatchBasic = 1,
    /// CloudWatch, every metric with the few labels listed in docs/METRICS.md.
    CloudWatchDetailed = 2,
}

static PROFILE: AtomicU8 = AtomicU8::new(Profile::Prometheus as u8);

fn profile() -> Profile {
    match PROFILE.load(Ordering::Relaxed) {
        1 => Profile::CloudWatchBasic,
        2 => Profile::CloudWatchDetailed,
        _ => Profile::Prometheus,
    }
}

/// Whether the process records for CloudWatch (either profile).
fn lean() -> bool {
    profile() != Profile::Prometheus
}

/// Whether this CloudWatch process records only the basic metrics.
fn basic() -> bool {
    profile() == Profile::CloudWatchBasic
}

/// gRPC calls answered, by `service`, `method` and `code` (a counter).
pub const GRPC_REQUESTS: &str = "wisp_grpc_requests_total";
/// Time from a call's arrival to its answer, by `service` and `method` (seconds).
pub const GRPC_DURATION: &str = "wisp_grpc_request_duration_seconds";
/// Calls being worked on now (`wisp serve --max-in-flight` bounds it).
pub const GRPC_IN_FLIGHT: &str = "wisp_grpc_requests_in_flight";
/// Calls turned away because too many were in flight (or the caller had its share of
/// them), or because the caller was past its call rate.
pub const GRPC_SHED: &str = "wisp_grpc_requests_shed_total";
/// Credential checks, by `credential` (`piped`, `api_key`) and `outcome` (`cached`:
/// answered from the verified cache; `verified`: checked against the store; `rejected`;
/// `unavailable`: the store could not be read or the server was too busy to check).
pub const AUTH_VERIFICATIONS: &str = "wisp_auth_verifications_total";
/// Slow hash comparisons (bcrypt) run, by `credential`.
pub const AUTH_SLOW_HASHES: &str = "wisp_auth_slow_hash_checks_total";

/// Store operations, by `store` (`datastore`, `filestore`, `cache`), `backend` (`sqlite`,
/// `dynamodb`, `local`, `s3`, `memory`, `redis`), `kind` (the entity kind; `object` or
/// `entry` for files and cache entries), `op` and `outcome` (`ok`, `not_found`,
/// `conflict`, `unavailable`, …).
pub const STORE_OPERATIONS: &str = "wisp_store_operations_total";
/// Time a store operation took, by `store`, `backend` and `op` (seconds).
pub const STORE_DURATION: &str = "wisp_store_operation_duration_seconds";
/// DynamoDB capacity units each request consumed, as DynamoDB reported them, by
/// `operation` and `capacity` (`read`, `write`); its `_sum` is the units consumed.
pub const DYNAMODB_CAPACITY: &str = "wisp_dynamodb_consumed_capacity_units";
/// Cache reads, by `backend` and `result` (`hit`, `miss`, `error`).
pub const CACHE_READS: &str = "wisp_cache_reads_total";
/// Cache calls that got no answer in time, by `backend`.
pub const CACHE_TIMEOUTS: &str = "wisp_cache_timeouts_total";
/// Pipeds registered (not disabled), by `project` and `version`.
pub const PIPEDS_REGISTERED: &str = "wisp_pipeds_registered";
/// Pipeds connected (a stat within the last 2 minutes), by `project` and `version`; on
/// CloudWatch the fleet's total.
pub const PIPEDS_CONNECTED: &str = "wisp_pipeds_connected";
/// Deployments not yet completed, by `project` and `status`.
pub const DEPLOYMENTS_OPEN: &str = "wisp_deployments_open";
/// Lambda functions that failed to start (the config, a secret or a store), by function.
pub const INIT_FAILURES: &str = "wisp_init_failures_total";
/// Revocations that could not be shared with other instances, by `op` (`record`: a
/// disable, key deletion or logout whose entry was not written, and which failed;
/// `read`: the list could not be read or parsed, and checks fail closed).
pub const REVOCATION_FAILURES: &str = "wisp_revocation_failures_total";

/// Scheduled job runs, by `job` and `outcome` (`finished`; `partial`: the run's time was
/// up and the next run continues; `failed`).
pub const JOB_RUNS: &str = "wisp_job_runs_total";
/// Time a job run took, by `job` (seconds).
pub const JOB_DURATION: &str = "wisp_job_duration_seconds";
/// Items job runs looked at, changed, or failed to change, by `job` and `result`
/// (`examined`, `changed`, `failed`).
pub const JOB_ITEMS: &str = "wisp_job_items_total";
/// When a run of `job` last ended without error (Unix seconds).
pub const JOB_LAST_SUCCESS: &str = "wisp_job_last_success_timestamp_seconds";

/// `wisp bridge`: calls forwarded to the control plane, by `service`, `method` (from the
/// control plane's fixed lists; `unknown` otherwise) and `code` (the gRPC status the
/// client got, from the control plane or from the bridge itself).
pub const BRIDGE_CALLS: &str = "wisp_bridge_calls_total";
/// `wisp bridge`: time from a call's arrival to its answer, by `service` and `method`
/// (seconds).
pub const BRIDGE_DURATION: &str = "wisp_bridge_call_duration_seconds";
/// `wisp bridge`: calls being forwarded now.
pub const BRIDGE_IN_FLIGHT: &str = "wisp_bridge_calls_in_flight";
/// `wisp bridge`: calls the control plane did not answer with a gRPC status, by `reason`
/// (`connect`, `send`, `read`, `timeout`, `http_status`: the load balancer answered
/// plain HTTP such as a 502, `too_large`, `malformed`).
pub const BRIDGE_UPSTREAM_ERRORS: &str = "wisp_bridge_upstream_errors_total";

/// Every metric name above.
pub const ALL: &[&str] = &[
    GRPC_REQUESTS,
    GRPC_DURATION,
    GRPC_IN_FLIGHT,
    GRPC_SHED,
    AUTH_VERIFICATIONS,
    AUTH_SLOW_HASHES,
    STORE_OPERATIONS,
    STORE_DURATION,
    DYNAMODB_CAPACITY,
    CACHE_READS,
    CACHE_TIMEOUTS,
    INIT_FAILURES,
    REVOCATION_FAILURES,
    PIPEDS_REGISTERED,
    PIPEDS_CONNECTED,
    DEPLOYMENTS_OPEN,
    JOB_RUNS,
    JOB_DURATION,
    JOB_ITEMS,
    JOB_LAST_SUCCESS,
    BRIDGE_CALLS,
    BRIDGE_DURATION,
    BRIDGE_IN_FLIGHT,
    BRIDGE_UPSTREAM_ERRORS,
];

/// Latency buckets (seconds) for every `_duration_seconds` histogram: from a cached
/// lookup (sub-millisecond) to a client's deadline.
pub const DURATION_BUCKETS: &[f64] = &[
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Buckets (capacity units) of [`DYNAMODB_CAPACITY`]: from an eventually consistent read
/// of a small item to a page of a large query.
pub const CAPACITY_BUCKETS: &[f64] = &[0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];

/// Registers help texts and units with the installed recorder (call once, after
/// installing it).
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        GRPC_REQUESTS,
        "gRPC calls answered, by service, method and code"
    );
    describe_histogram!(
        GRPC_DURATION,
        Unit::Seconds,
        "Time from a call's arrival to its answer"
    );
    describe_gauge!(GRPC_IN_FLIGHT, "gRPC calls being worked on now");
    describe_counter!(
        GRPC_SHED,
        "gRPC calls turned away with UNAVAILABLE because too many were in flight"
    );
    describe_counter!(
        AUTH_VERIFICATIONS,
        "Credential checks, by credential type and outcome"
    );
    describe_counter!(
        AUTH_SLOW_HASHES,
        "Slow (bcrypt) hash comparisons, by credential type"
    );
    describe_counter!(
        STORE_OPERATIONS,
        "Store operations, by store, backend, kind, operation and outcome"
    );
    describe_histogram!(STORE_DURATION, Unit::Seconds, "Time a store operation took");
    describe_histogram!(
        DYNAMODB_CAPACITY,
        "DynamoDB capacity units per request, by operation and read or write"
    );
    describe_counter!(CACHE_READS, "Cache reads, by backend and result");
    describe_counter!(JOB_RUNS, "Scheduled job runs, by job and outcome");
    describe_histogram!(JOB_DURATION, Unit::Seconds, "Time a job run took");
    describe_counter!(
        JOB_ITEMS,
        "Items job runs examined, changed or failed to change"
    );
    describe_gauge!(
        JOB_LAST_SUCCESS,
        Unit::Seconds,
        "When a run of the job last ended without error (Unix time)"
    );
    describe_counter!(CACHE_TIMEOUTS, "Cache calls that got no answer in time");
    describe_counter!(INIT_FAILURES, "Function starts that failed");
    describe_counter!(
        REVOCATION_FAILURES,
        "Revocations not recorded (op=record) or not readable (op=read) in the shared list"
    );
    describe_gauge!(PIPEDS_REGISTERED, "Pipeds registered and not disabled");
    describe_gauge!(
        PIPEDS_CONNECTED,
        "Pipeds that reported within the last 2 minutes"
    );
    describe_gauge!(DEPLOYMENTS_OPEN, "Deployments not yet completed, by status");
    describe_counter!(
        BRIDGE_CALLS,
        "Calls wisp bridge forwarded, by service, method and the code the client got"
    );
    describe_histogram!(
        BRIDGE_DURATION,
        Unit::Seconds,
        "Time from a call's arrival at wisp bridge to its answer"
    );
    describe_gauge!(BRIDGE_IN_FLIGHT, "Calls wisp bridge is forwarding now");
    describe_counter!(
        BRIDGE_UPSTREAM_ERRORS,
        "Calls the control plane did not answer with a gRPC status, by reason"
    );
}

/// The class of a gRPC code for dashboards and alarms: `ok`; `client_error` (the caller's
/// doing: bad input, credentials, not found); `server_error` (ours or a store's:
/// INTERNAL, UNAVAILABLE, UNKNOWN, DATA_LOSS, DEADLINE_EXCEEDED).
pub fn grpc_code_class(code: i32) -> &'static str {
    match code {
        0 => "ok",
        2 | 4 | 13 | 14 | 15 => "server_error",
        _ => "client_error",
    }
}

/// The name of a gRPC status code as the gRPC spec spells it (`OK`, `UNAVAILABLE`);
/// `UNKNOWN` for a number outside the spec.
pub fn grpc_code_name(code: i32) -> &'static str {
    usize::try_from(code)
        .ok()
        .and_then(|i| GRPC_CODE_NAMES.get(i))
        .copied()
        .unwrap_or("UNKNOWN")
}

/// The number of a gRPC code's name (`NOT_FOUND` is 5).
pub fn grpc_code_number(name: &str) -> Option<u8> {
    GRPC_CODE_NAMES
        .iter()
        .position(|n| *n == name)
        .and_then(|i| u8::try_from(i).ok())
}

/// gRPC's codes by number.
const GRPC_CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// Records one answered gRPC call.
pub fn record_grpc_call(service: &'static str, method: &'static str, code: i32, took: Duration) {
    if lean() {
        metrics::counter!(GRPC_REQUESTS, "code_class" => grpc_code_class(code)).increment(1);
        if !basic() {
            metrics::histogram!(GRPC_DURATION).record(took.as_secs_f64());
        }
        return;
    }
    metrics::counter!(GRPC_REQUESTS, "service" => service, "method" => method, "code" => grpc_code_name(code))
        .increment(1);
    metrics::histogram!(GRPC_DURATION, "service" => service, "method" => method)
        .record(took.as_secs_f64());
}

/// Records one call `wisp bridge` forwarded (or answered itself, when the control plane
/// could not be reached): `code` is the gRPC status the client got.
pub fn record_bridge_call(service: &'static str, method: &'static str, code: i32, took: Duration) {
    metrics::counter!(BRIDGE_CALLS, "service" => service, "method" => method, "code" => grpc_code_name(code))
        .increment(1);
    metrics::histogram!(BRIDGE_DURATION, "service" => service, "method" => method)
        .record(took.as_secs_f64());
}

/// Records a call the control plane did not answer with a gRPC status (see
/// [`BRIDGE_UPSTREAM_ERRORS`] for the reasons).
pub fn record_bridge_upstream_error(reason: &'static str) {
    metrics::counter!(BRIDGE_UPSTREAM_ERRORS, "reason" => reason).increment(1);
}

/// A call `wisp bridge` is forwarding: counted in [`BRIDGE_IN_FLIGHT`] until dropped
/// (also when the client goes away mid-call).
#[derive(Debug)]
pub struct BridgeInFlight(());

impl BridgeInFlight {
    pub fn start() -> BridgeInFlight {
        metrics::gauge!(BRIDGE_IN_FLIGHT).increment(1.0);
        BridgeInFlight(())
    }
}

impl Drop for BridgeInFlight {
    fn drop(&mut self) {
        metrics::gauge!(BRIDGE_IN_FLIGHT).decrement(1.0);
    }
}

/// Records one credential check: `credential` is `piped` or `api_key`; `outcome` is
/// `cached`, `verified`, `rejected` or `unavailable`.
pub fn record_verification(credential: &'static str, outcome: &'static str) {
    if basic() {
        return;
    }
    if lean() {
        metrics::counter!(AUTH_VERIFICATIONS, "outcome" => outcome).increment(1);
        return;
    }
    metrics::counter!(AUTH_VERIFICATIONS, "credential" => credential, "outcome" => outcome)
        .increment(1);
}

/// Records `n` slow (bcrypt) hash comparisons.
pub fn record_slow_hashes(credential: &'static str, n: u64) {
    if basic() {
        return;
    }
    if lean() {
        metrics::counter!(AUTH_SLOW_HASHES).increment(n);
        return;
    }
    metrics::counter!(AUTH_SLOW_HASHES, "credential" => credential).increment(n);
}

/// Records a failure of the shared revocation list: `op` is `record` or `read`. In every
/// profile, since an alarm reads it (on CloudWatch without `op`: one metric per function).
pub fn record_revocation_failure(op: &'static str) {
    if lean() {
        metrics::counter!(REVOCATION_FAILURES).increment(1);
        return;
    }
    metrics::counter!(REVOCATION_FAILURES, "op" => op).increment(1);
}

/// Records a cache call that got no answer in time.
pub fn record_cache_timeout(backend: &'static str) {
    if basic() {
        return;
    }
    metrics::counter!(CACHE_TIMEOUTS, "backend" => backend).increment(1);
}

/// Records one store operation.
pub fn record_store_operation(
    store: &'static str,
    backend: &'static str,
    kind: &'static str,
    op: &'static str,
    outcome: &'static str,
    took: Duration,
) {
    if basic() {
        return;
    }
    if lean() {
        // The store's failures only; a record not found or a lost race is the caller's
        // business, not the store's health.
        let outcome = match outcome {
            "unavailable" | "internal" => "error",
            _ => "ok",
        };
        metrics::counter!(STORE_OPERATIONS, "store" => store, "outcome" => outcome).increment(1);
        return;
    }
    metrics::counter!(
        STORE_OPERATIONS,
        "store" => store,
        "backend" => backend,
        "kind" => kind,
        "op" => op,
        "outcome" => outcome
    )
    .increment(1);
    metrics::histogram!(STORE_DURATION, "store" => store, "backend" => backend, "op" => op)
        .record(took.as_secs_f64());
}

/// Records the capacity DynamoDB reported for one request of `operation` (Prometheus
/// only: on Lambda, the table's own CloudWatch metrics count it).
pub fn record_dynamodb_capacity(operation: &'static str, read: f64, write: f64) {
    if lean() {
        return;
    }
    for (capacity, units) in [("read", read), ("write", write)] {
        if units > 0.0 {
            metrics::histogram!(DYNAMODB_CAPACITY, "operation" => operation, "capacity" => capacity)
                .record(units);
        }
    }
}

/// Records one cache read: `result` is `hit`, `miss` or `error`.
pub fn record_cache_read(backend: &'static str, result: &'static str) {
    if basic() {
        return;
    }
    if lean() {
        metrics::counter!(CACHE_READS, "result" => result).increment(1);
        return;
    }
    metrics::counter!(CACHE_READS, "backend" => backend, "result" => result).increment(1);
}

/// Records the pipeds of one project and version (Prometheus only: CloudWatch gets the
/// total, [`record_pipeds_connected_total`]). Project ids are bounded by configuration.
pub fn record_pipeds(project: &str, version: &str, registered: u64, connected: u64) {
    if lean() {
        return;
    }
    let labels = [
        ("project", project.to_owned()),
        ("version", version.to_owned()),
    ];
    metrics::gauge!(PIPEDS_REGISTERED, &labels).set(registered as f64);
    metrics::gauge!(PIPEDS_CONNECTED, &labels).set(connected as f64);
}

/// Records the fleet's connected pipeds in all (CloudWatch only).
pub fn record_pipeds_connected_total(connected: u64) {
    if lean() {
        metrics::gauge!(PIPEDS_CONNECTED).set(connected as f64);
    }
}

/// Records the deployments of one project in one status that are not completed
/// (Prometheus only).
pub fn record_open_deployments(project: &str, status: &'static str, n: u64) {
    if lean() {
        return;
    }
    let labels = [
        ("project", project.to_owned()),
        ("status", status.to_owned()),
    ];
    metrics::gauge!(DEPLOYMENTS_OPEN, &labels).set(n as f64);
}

/// What one job run did, for [`record_job_run`].
#[derive(Debug, Clone, Copy, Default)]
pub struct JobRun {
    /// `None`: the run failed.
    pub finished: Option<bool>,
    pub examined: u64,
    pub changed: u64,
    pub failed: u64,
    pub took: Duration,
}

/// Records one run of `job`.
pub fn record_job_run(job: &'static str, run: JobRun) {
    if basic() {
        return;
    }
    let outcome = match run.finished {
        Some(true) => "finished",
        Some(false) => "partial",
        None => "failed",
    };
    metrics::counter!(JOB_RUNS, "job_name" => job, "outcome" => outcome).increment(1);
    if lean() {
        // The jobs function's own Duration covers the time; items that failed are what an
        // alarm needs.
        metrics::counter!(JOB_ITEMS, "job_name" => job, "result" => "failed").increment(run.failed);
        return;
    }
    metrics::histogram!(JOB_DURATION, "job_name" => job).record(run.took.as_secs_f64());
    for (result, n) in [
        ("examined", run.examined),
        ("changed", run.changed),
        ("failed", run.failed),
    ] {
        metrics::counter!(JOB_ITEMS, "job_name" => job, "result" => result).increment(n);
    }
    if run.finished.is_some() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        metrics::gauge!(JOB_LAST_SUCCESS, "job_name" => job).set(now);
    }
}

/// CloudWatch Embedded Metric Format: what the Lambda functions write on stdout, one JSON
/// document per set of dimensions, read by CloudWatch Logs into metrics with no API call.
#[cfg(feature = "emf")]
pub mod emf {
    use std::sync::OnceLock;

    use metrics_cloudwatch_embedded::{Builder, Collector};

    static COLLECTOR: OnceLock<&'static Collector> = OnceLock::new();

    #[derive(Debug, thiserror::Error)]
    #[error("cannot install the metrics recorder: {0}")]
    pub struct InstallError(String);

    /// Installs the process's recorder, in a CloudWatch profile (the detailed one or the
    /// basic one): metrics go to `namespace` with the dimensions `Deployment` and
    /// `Function`, and the labels each metric keeps there. Once per process.
    pub fn install(
        namespace: &str,
        deployment: &str,
        function: &str,
        detailed: bool,
    ) -> Result<(), InstallError> {
        let profile = if detailed {
            super::Profile::CloudWatchDetailed
        } else {
            super::Profile::CloudWatchBasic
        };
        super::PROFILE.store(profile as u8, std::sync::atomic::Ordering::Relaxed);
        let collector = Builder::new()
            .cloudwatch_namespace(namespace.to_owned())
            .with_dimension("Deployment", deployment.to_owned())
            .with_dimension("Function", function.to_owned())
            .init()
            .map_err(|e| InstallError(e.to_string()))?;
        super::describe();
        let _ = COLLECTOR.set(collector);
        Ok(())
    }

    /// Writes what was recorded since the last flush to stdout (nothing when no recorder
    /// is installed). The functions call it at the end of each invocation: Lambda freezes
    /// the process between invocations.
    pub fn flush() {
        if let Some(collector) = COLLECTOR.get() {
            // Holding stdout's lock keeps log lines from interleaving with a document.
            if let Err(err) = collector.flush(std::io::stdout().lock()) {
                tracing::warn!(error = %err, "cannot write metrics");
            }
        }
    }
}

/// A piped's metrics text above this is not re-exported.
pub const PIPED_METRICS_MAX_BYTES_PER_PIPED: usize = 256 * 1024;
/// One project's pipeds' metrics text re-exported in all; its pipeds past it are left out,
/// so that one project cannot push the others out of [`PIPED_METRICS_MAX_BYTES`].
pub const PIPED_METRICS_MAX_BYTES_PER_PROJECT: usize = 2 * 1024 * 1024;
/// Pipeds' metrics text re-exported in all; pipeds past it are left out.
pub const PIPED_METRICS_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Whether a piped's metrics text of `len` bytes is re-exported, `kept` bytes being kept
/// already in all and `kept_in_project` of them from the piped's project.
pub fn piped_metrics_fit(kept: usize, kept_in_project: usize, len: usize) -> bool {
    len <= PIPED_METRICS_MAX_BYTES_PER_PIPED
        && kept_in_project.saturating_add(len) <= PIPED_METRICS_MAX_BYTES_PER_PROJECT
        && kept.saturating_add(len) <= PIPED_METRICS_MAX_BYTES
}

/// What one piped last reported with ReportStat (its own metrics, Prometheus text), for
/// `reexport`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipedMetrics {
    pub project_id: String,
    pub piped_id: String,
    pub text: Vec<u8>,
}

#[cfg(feature = "otlp")]
pub mod otlp;

/// Makes a call's `span` (not yet entered) a child of the caller's span named by W3C
/// trace context (`traceparent`, `tracestate`), when spans are exported (the `otlp`
/// feature, `wisp serve`); otherwise, and for malformed context, nothing changes.
pub fn continue_trace(span: &tracing::Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    #[cfg(feature = "otlp")]
    otlp::continue_trace(span, traceparent, tracestate);
    #[cfg(not(feature = "otlp"))]
    let _ = (span, traceparent, tracestate);
}

#[cfg(feature = "prometheus")]
pub mod reexport;

/// The Prometheus exporter of `wisp serve`.
#[cfg(feature = "prometheus")]
pub mod prometheus {
    use super::metrics;
    pub use metrics_exporter_prometheus::PrometheusHandle;
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

    #[derive(Debug, thiserror::Error)]
    #[error("cannot install the metrics recorder: {0}")]
    pub struct InstallError(String);

    /// How often histograms are folded into their buckets between scrapes.
    const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

    /// Installs the process's recorder for `wisp serve`; its handle renders the text
    /// format. Once per process (a second call fails). Must be called within a tokio
    /// runtime: a task keeps the recorded histogram samples folded into buckets, so that
    /// memory stays bounded however rarely `/metrics` is scraped.
    pub fn install() -> Result<PrometheusHandle, InstallError> {
        let handle = install_recorder()?;
        // Present from the first scrape, so that dashboards and alerts see a zero.
        metrics::gauge!(super::GRPC_IN_FLIGHT).set(0.0);
        metrics::counter!(super::GRPC_SHED).absolute(0);
        Ok(handle)
    }

    /// [`install`] for `wisp bridge`: the same recorder and buckets, with the bridge's
    /// gauge at zero from the first scrape (and not the server's).
    pub fn install_bridge() -> Result<PrometheusHandle, InstallError> {
        let handle = install_recorder()?;
        metrics::gauge!(super::BRIDGE_IN_FLIGHT).set(0.0);
        Ok(handle)
    }

    fn install_recorder() -> Result<PrometheusHandle, InstallError> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Suffix("_duration_seconds".into()),
                super::DURATION_BUCKETS,
            )
            .map_err(|e| InstallError(e.to_string()))?
            .set_buckets_for_metric(
                Matcher::Full(super::DYNAMODB_CAPACITY.into()),
                super::CAPACITY_BUCKETS,
            )
            .map_err(|e| InstallError(e.to_string()))?
            .install_recorder()
            .map_err(|e| InstallError(e.to_string()))?;
        super::describe();
        let upkeep = handle.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(UPKEEP_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                every.tick().await;
                upkeep.run_upkeep();
            }
        });
        Ok(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_name_every_metric() {
        let docs = include_str!("../../../docs/METRICS.md");
        for name in ALL.iter().chain(process::ALL) {
            assert!(
                docs.contains(&format!("`{name}`")),
                "docs/METRICS.md lacks {name}"
            );
        }
    }

    /// The dashboards and alarms read only metrics that exist: each `wisp_…` name they
    /// mention is in the catalogue (histograms by their `_bucket`, `_sum`, `_count`).
    #[test]
    fn dashboards_and_alarms_name_real_metrics() {
        let sources = [
            (
                "dashboards/wisp-serve.json",
                include_str!("../../../dashboards/wisp-serve.json"),
            ),
            (
                "infra/terraform/dashboard.tf",
                include_str!("../../../infra/terraform/dashboard.tf"),
            ),
            (
                "infra/terraform/alarms.tf",
                include_str!("../../../infra/terraform/alarms.tf"),
            ),
            ("template.yaml", include_str!("../../../template.yaml")),
            (
                "dashboards/alerts/wisp-serve.rules.yml",
                include_str!("../../../dashboards/alerts/wisp-serve.rules.yml"),
            ),
        ];
        for (path, text) in sources {
            let mut named = 0;
            for (at, _) in text.match_indices("wisp_") {
                let name: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(&name);
                assert!(
                    ALL.contains(&base),
                    "{path} names {name}, which is no metric"
                );
                named += 1;
            }
            assert!(named > 0, "{path} names no metric at all");
        }
    }

    /// What each profile records of the same calls: every label for Prometheus, few for
    /// CloudWatch, only the calls by code class in the basic set.
    #[test]
    fn each_profile_records_its_set() {
        use metrics_util::debugging::DebuggingRecorder;
        let recorded = |profile: Profile| {
            PROFILE.store(profile as u8, Ordering::Relaxed);
            let recorder = DebuggingRecorder::new();
            let snapshotter = recorder.snapshotter();
            metrics::with_local_recorder(&recorder, || {
                record_grpc_call("PipedService", "ReportStat", 0, Duration::from_millis(2));
                record_grpc_call("PipedService", "ReportStat", 16, Duration::from_millis(1));
                record_verification("piped", "cached");
                record_store_operation(
                    "datastore",
                    "dynamodb",
                    "Piped",
                    "get",
                    "not_found",
                    Duration::from_millis(3),
                );
                record_job_run("insights", JobRun::default());
                record_revocation_failure("record");
            });
            let mut seen: Vec<String> = snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, _)| {
                    let key = key.key();
                    let mut labels: Vec<String> = key
                        .labels()
                        .map(|l| format!("{}={}", l.key(), l.value()))
                        .collect();
                    labels.sort();
                    format!("{}{{{}}}", key.name(), labels.join(","))
                })
                .collect();
            seen.sort();
            seen
        };
        let basic = recorded(Profile::CloudWatchBasic);
        let detailed = recorded(Profile::CloudWatchDetailed);
        let prometheus = recorded(Profile::Prometheus);

        assert_eq!(
            basic,
            [
                "wisp_grpc_requests_total{code_class=client_error}",
                "wisp_grpc_requests_total{code_class=ok}",
                "wisp_revocation_failures_total{}",
            ]
        );

        let has = |set: &[String], key: &str| set.iter().any(|k| k == key);
        assert!(has(&detailed, "wisp_grpc_request_duration_seconds{}"));
        assert!(has(&detailed, "wisp_revocation_failures_total{}"));
        assert!(has(
            &prometheus,
            "wisp_revocation_failures_total{op=record}"
        ));
        assert!(has(
            &detailed,
            "wisp_auth_verifications_total{outcome=cached}"
        ));
        assert!(has(
            &detailed,
            "wisp_store_operations_total{outcome=ok,store=datastore}"
        ));
        assert!(has(
            &detailed,
            "wisp_job_runs_total{job_name=insights,outcome=failed}"
        ));
        assert!(
            !detailed
                .iter()
                .any(|k| k.contains("method=") || k.contains("kind="))
        );
        assert!(has(
            &prometheus,
            "wisp_grpc_requests_total{code=UNAUTHENTICATED,method=ReportStat,service=PipedService}"
        ));
        assert!(has(
            &prometheus,
            "wisp_store_operations_total{backend=dynamodb,kind=Piped,op=get,outcome=not_found,store=datastore}"
        ));
        // Prometheus sets `job` and `instance` on every sample it scrapes: a metric's own
        // label of either name would be renamed `exported_…` and lost to queries.
        for key in prometheus.iter().chain(&detailed) {
            assert!(
                !key.contains("{job=") && !key.contains(",job=") && !key.contains("instance="),
                "{key} has a label Prometheus owns"
            );
        }
    }

    #[test]
    fn code_classes() {
        assert_eq!(grpc_code_class(0), "ok");
        assert_eq!(grpc_code_class(16), "client_error");
        assert_eq!(grpc_code_class(5), "client_error");
        for code in [2, 4, 13, 14, 15] {
            assert_eq!(grpc_code_class(code), "server_error");
        }
    }

    #[test]
    fn code_names_follow_the_grpc_spec() {
        assert_eq!(grpc_code_name(0), "OK");
        assert_eq!(grpc_code_name(14), "UNAVAILABLE");
        assert_eq!(grpc_code_name(16), "UNAUTHENTICATED");
        assert_eq!(grpc_code_name(17), "UNKNOWN");
        assert_eq!(grpc_code_name(-1), "UNKNOWN");
    }
}
