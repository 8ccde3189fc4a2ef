//! What Wisp measures. Every crate records through the `metrics` facade with the names
//! below, so that a metric is named, typed and explained in one place; the binary picks
//! the exporter (`wisp serve`: Prometheus text on its admin address). Without an
//! installed recorder, recording costs a branch and nothing else.
//!
//! Labels are bounded: services, methods and codes come from fixed lists (an unknown
//! method is recorded as `unknown`), credentials and outcomes from enums. No id is ever a
//! label.

use std::time::Duration;

pub use metrics;

/// gRPC calls answered, by `service`, `method` and `code` (a counter).
pub const GRPC_REQUESTS: &str = "wisp_grpc_requests_total";
/// Time from a call's arrival to its answer, by `service` and `method` (seconds).
pub const GRPC_DURATION: &str = "wisp_grpc_request_duration_seconds";
/// Calls being worked on now (`wisp serve --max-in-flight` bounds it).
pub const GRPC_IN_FLIGHT: &str = "wisp_grpc_requests_in_flight";
/// Calls turned away because too many were in flight.
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
/// Cache reads, by `backend` and `result` (`hit`, `miss`, `error`).
pub const CACHE_READS: &str = "wisp_cache_reads_total";
/// Cache calls that got no answer in time, by `backend`.
pub const CACHE_TIMEOUTS: &str = "wisp_cache_timeouts_total";

/// Latency buckets (seconds) for every `_duration_seconds` histogram: from a cached
/// lookup (sub-millisecond) to a client's deadline.
pub const DURATION_BUCKETS: &[f64] = &[
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

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
    describe_counter!(CACHE_READS, "Cache reads, by backend and result");
    describe_counter!(CACHE_TIMEOUTS, "Cache calls that got no answer in time");
}

/// The name of a gRPC status code as the gRPC spec spells it (`OK`, `UNAVAILABLE`);
/// `UNKNOWN` for a number outside the spec.
pub fn grpc_code_name(code: i32) -> &'static str {
    const NAMES: [&str; 17] = [
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
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("UNKNOWN")
}

/// Records one answered gRPC call.
pub fn record_grpc_call(service: &'static str, method: &'static str, code: i32, took: Duration) {
    metrics::counter!(GRPC_REQUESTS, "service" => service, "method" => method, "code" => grpc_code_name(code))
        .increment(1);
    metrics::histogram!(GRPC_DURATION, "service" => service, "method" => method)
        .record(took.as_secs_f64());
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

/// Records one cache read: `result` is `hit`, `miss` or `error`.
pub fn record_cache_read(backend: &'static str, result: &'static str) {
    metrics::counter!(CACHE_READS, "backend" => backend, "result" => result).increment(1);
}

/// The Prometheus exporter of `wisp serve`.
#[cfg(feature = "prometheus")]
pub mod prometheus {
    use super::metrics;
    pub use metrics_exporter_prometheus::PrometheusHandle;
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

    #[derive(Debug, thiserror::Error)]
    #[error("cannot install the metrics recorder: {0}")]
    pub struct InstallError(String);

    /// Installs the process's recorder; its handle renders the text format. Once per
    /// process (a second call fails).
    pub fn install() -> Result<PrometheusHandle, InstallError> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Suffix("_duration_seconds".into()),
                super::DURATION_BUCKETS,
            )
            .map_err(|e| InstallError(e.to_string()))?
            .install_recorder()
            .map_err(|e| InstallError(e.to_string()))?;
        super::describe();
        // Present from the first scrape, so that dashboards and alerts see a zero.
        metrics::gauge!(super::GRPC_IN_FLIGHT).set(0.0);
        metrics::counter!(super::GRPC_SHED).absolute(0);
        Ok(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_follow_the_grpc_spec() {
        assert_eq!(grpc_code_name(0), "OK");
        assert_eq!(grpc_code_name(14), "UNAVAILABLE");
        assert_eq!(grpc_code_name(16), "UNAUTHENTICATED");
        assert_eq!(grpc_code_name(17), "UNKNOWN");
        assert_eq!(grpc_code_name(-1), "UNKNOWN");
    }
}
