//! What the bridge records for Prometheus (`wisp bridge --admin-addr`): each forwarded
//! call by service, method and the code the client got, its time, the calls in flight,
//! and the calls the control plane did not answer (wisp-telemetry names them). The
//! bridge knows no protos: a call's method is a label only if [`Config::method_names`]
//! knows it, so that a client sending made-up paths cannot grow the set of series.
//!
//! [`Config::method_names`]: crate::Config::method_names

/// Looks up a method of a service (`PipedService`, `APIService`, `WebService`,
/// `TraceService`: the pipeds' OTLP spans) and
/// returns its name from a fixed list; `None` for a method the control plane has not.
pub type MethodNames = fn(service: &str, method: &str) -> Option<&'static str>;

/// The services whose calls are labelled by name; any other is `unknown`.
const SERVICES: [&str; 4] = ["PipedService", "APIService", "WebService", "TraceService"];

/// Knows no method: every call's method is `unknown` (a bridge library user without
/// the control plane's lists).
pub fn no_method_names(_service: &str, _method: &str) -> Option<&'static str> {
    None
}

/// The `service` and `method` labels of a call to `path`
/// (`/grpc.service.pipedservice.PipedService/ReportStat`, or the legacy
/// `/pipe.api.service.pipedservice.PipedService/ReportStat`).
pub fn call_labels(path: &str, names: MethodNames) -> (&'static str, &'static str) {
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let qualified = parts.next().unwrap_or_default();
    let method = parts.next().unwrap_or_default();
    let short = qualified.rsplit('.').next().unwrap_or_default();
    let Some(service) = SERVICES.iter().find(|s| **s == short) else {
        return ("unknown", "unknown");
    };
    (service, names(service, method).unwrap_or("unknown"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only_report_stat(service: &str, method: &str) -> Option<&'static str> {
        (service == "PipedService" && method == "ReportStat").then_some("ReportStat")
    }

    #[test]
    fn labels_come_from_fixed_lists() {
        for (path, want) in [
            (
                "/grpc.service.pipedservice.PipedService/ReportStat",
                ("PipedService", "ReportStat"),
            ),
            (
                "/pipe.api.service.pipedservice.PipedService/ReportStat",
                ("PipedService", "ReportStat"),
            ),
            (
                "/grpc.service.pipedservice.PipedService/MadeUp",
                ("PipedService", "unknown"),
            ),
            (
                "/grpc.service.apiservice.APIService/ReportStat",
                ("APIService", "unknown"),
            ),
            ("/evil.Service/ReportStat", ("unknown", "unknown")),
            ("/", ("unknown", "unknown")),
            ("", ("unknown", "unknown")),
        ] {
            assert_eq!(call_labels(path, only_report_stat), want, "{path}");
        }
        assert_eq!(
            call_labels(
                "/grpc.service.pipedservice.PipedService/ReportStat",
                no_method_names
            ),
            ("PipedService", "unknown")
        );
    }
}
