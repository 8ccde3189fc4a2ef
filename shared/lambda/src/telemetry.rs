//! Logs for CloudWatch: one JSON object per line on stdout, the level from `WISP_LOG`
//! (or `RUST_LOG`), default `info`.

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = std::env::var("WISP_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    // Errors only if a subscriber is already set (tests): keep that one.
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        // The call's service and method (the gate's `rpc` span) on each line.
        .with_current_span(true)
        .with_span_list(false)
        .with_ansi(false)
        .with_target(true)
        .with_env_filter(filter)
        .try_init();
}
