//! What recording one poll call's metrics costs with `wisp serve`'s Prometheus recorder:
//! the call by code with its latency, its credential check and two store operations with
//! theirs, as the gate, the verifier and the metered stores record them.
//!
//!   cargo run --release -p wisp-telemetry --features prometheus --example record_cost
//!
//! Compare the figure with the CPU one poll call takes (`benches/poll`: the process's CPU
//! over its calls per second).

use std::time::{Duration, Instant};

fn record_one_call(i: u64) {
    let took = Duration::from_micros(100 + i % 900);
    wisp_telemetry::record_grpc_call("PipedService", "ListUnhandledCommands", 0, took);
    wisp_telemetry::record_verification("piped", "cached");
    wisp_telemetry::record_store_operation(
        "cache",
        "memory",
        "entry",
        "get",
        "ok",
        Duration::from_micros(2),
    );
    wisp_telemetry::record_store_operation("datastore", "sqlite", "Command", "query", "ok", took);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let handle = {
        let _in_runtime = runtime.enter();
        wisp_telemetry::prometheus::install()?
    };
    const CALLS: u64 = 2_000_000;
    for i in 0..CALLS / 10 {
        record_one_call(i);
    }
    let started = Instant::now();
    for i in 0..CALLS {
        record_one_call(i);
    }
    let per_call = started.elapsed().as_nanos() as f64 / CALLS as f64;
    let scrape = handle.render();
    println!(
        "recording one poll call's metrics: {per_call:.0} ns (one thread, {CALLS} calls; a scrape is {} bytes)",
        scrape.len()
    );
    Ok(())
}
