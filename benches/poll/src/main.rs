//! `poll-bench`: the piped poll path (ListUnhandledCommands + ReportStat) of the real Wisp
//! server against a no-op gRPC server, both in this process, both served as `wisp serve`
//! serves, over real 127.0.0.1 sockets. See benches/README.md.

mod load;
mod report;
mod servers;
mod sysload;

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

use load::{Cadence, Mix, SimPiped};
use report::{BcryptCount, PhaseReport, Report, Settings};

/// Benchmark of the piped poll path of Wisp against a no-op gRPC server.
#[derive(Debug, Parser)]
#[command(name = "poll-bench", version)]
struct Args {
    /// Simulated pipeds: one connection and one call in flight each.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pipeds: u64,
    /// Length of the measured saturation phase (0 skips it).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    saturation_secs: u64,
    /// Unmeasured back-to-back load before each measured saturation phase.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=600))]
    warmup_secs: u64,
    /// RPCs of the saturation phase: both alternately (the poll path), or one of them alone
    /// (to see which one costs what).
    #[arg(long, value_enum, default_value_t = Mix::Both)]
    mix: Mix,
    /// Length of the measured cadence phase (0 skips it).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    cadence_secs: u64,
    /// Cadence phase: each piped calls ListUnhandledCommands this often.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    list_every_secs: u64,
    /// Cadence phase: each piped calls ReportStat this often.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    stat_every_secs: u64,
    /// Cap on the calls started in one phase against one server.
    #[arg(long, default_value_t = 5_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    max_requests: u64,
    /// A call without an answer after this long counts as an error.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    call_timeout_secs: u64,
    /// Size of the metrics payload of each ReportStat (it changes on every report).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    stat_bytes: u64,
    /// Worker threads of the runtime both servers run on (default: the CPU count).
    #[arg(long)]
    server_threads: Option<usize>,
    /// Worker threads of the runtime the simulated pipeds run on (default: the CPU count).
    #[arg(long)]
    client_threads: Option<usize>,
    /// Override the verifier's verified-credential TTL (default: production, 5 min); a TTL
    /// shorter than the phases shows what re-verification costs.
    #[arg(long)]
    verified_ttl_secs: Option<u64>,
    /// Seed of the cadence phase's start offsets.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Record metrics as `wisp serve` does (its Prometheus recorder installed), to measure
    /// what recording costs; without it, recording is a no-op.
    #[arg(long)]
    metrics: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Exit with status 1 when a target is missed.
    #[arg(long)]
    check: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let server_threads = args.server_threads.unwrap_or(cpus).clamp(1, 64);
    let client_threads = args.client_threads.unwrap_or(cpus).clamp(1, 64);
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(server_threads)
        .thread_name("server")
        .enable_all()
        .build()
        .context("server runtime")?;
    // On the server runtime, as in `wisp serve` (its upkeep task runs there).
    let metrics = if args.metrics {
        let _on_server = server_rt.enter();
        Some(wisp_telemetry::prometheus::install().context("metrics recorder")?)
    } else {
        None
    };
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(client_threads)
        .thread_name("pipeds")
        .enable_all()
        .build()
        .context("client runtime")?;

    let settings = Settings {
        pipeds: args.pipeds,
        saturation_secs: args.saturation_secs,
        warmup_secs: args.warmup_secs,
        mix: args.mix,
        cadence_secs: args.cadence_secs,
        list_every_secs: args.list_every_secs,
        stat_every_secs: args.stat_every_secs,
        max_requests: args.max_requests,
        stat_bytes: args.stat_bytes,
        cpus,
        server_threads,
        client_threads,
        verified_ttl_secs: args
            .verified_ttl_secs
            .unwrap_or(wisp_auth::VERIFIED_TTL.as_secs()),
    };

    let dir = tempfile::tempdir().context("temporary data directory")?;
    let pipeds = usize::try_from(args.pipeds)?;
    let verified_ttl = args.verified_ttl_secs.map(Duration::from_secs);
    progress("starting the servers and registering the pipeds");
    let (noop, wisp) = server_rt.block_on(async {
        let wisp = servers::start_wisp(dir.path(), pipeds, verified_ttl).await?;
        let noop = servers::start_noop(wisp.console.clone()).await?;
        anyhow::Ok((noop, wisp))
    })?;
    let noop_addr = noop.addr;
    let wisp_addr = wisp.server.addr;
    let verifier = wisp.verifier.clone();
    let bcrypt = || verifier.bcrypt_verifications();

    let timeout = Duration::from_secs(args.call_timeout_secs);
    let stat_bytes = usize::try_from(args.stat_bytes)?;
    let run = client_rt.block_on(async {
        let connect = |addr| {
            let identities = wisp.pipeds.clone();
            async move {
                let mut sims = Vec::with_capacity(identities.len());
                for (i, identity) in identities.iter().enumerate() {
                    sims.push(SimPiped::connect(addr, i, identity, stat_bytes).await?);
                }
                anyhow::Ok(sims)
            }
        };
        progress("connecting and warming up (one call of each RPC per piped)");
        let noop_pipeds = connect(noop_addr).await?;
        let wisp_pipeds = connect(wisp_addr).await?;
        let warm_started = Instant::now();
        load::warm_up(&noop_pipeds, Duration::from_secs(120)).await?;
        load::warm_up(&wisp_pipeds, Duration::from_secs(120)).await?;
        let warm_up_time = warm_started.elapsed();
        let warm_up_bcrypt = bcrypt();

        let mut phases = Vec::new();
        if args.saturation_secs > 0 {
            for (server, sims) in [("noop", &noop_pipeds), ("wisp", &wisp_pipeds)] {
                if args.warmup_secs > 0 {
                    progress(&format!("saturation warm-up: {server}"));
                    let warm = Duration::from_secs(args.warmup_secs);
                    load::saturate(sims, args.mix, warm, args.max_requests, timeout).await?;
                }
                progress(&format!("saturation: {server}, {} s", args.saturation_secs));
                let (before, cpu_before) = (bcrypt(), sysload::sample());
                let duration = Duration::from_secs(args.saturation_secs);
                let outcome =
                    load::saturate(sims, args.mix, duration, args.max_requests, timeout).await?;
                let count = (server == "wisp").then(|| BcryptCount(bcrypt() - before));
                let cpu = sysload::share(cpu_before, sysload::sample());
                phases.push(PhaseReport::new("saturation", server, &outcome, count, cpu));
            }
        }
        if args.cadence_secs > 0 {
            let cadence = Cadence {
                list_every: Duration::from_secs(args.list_every_secs),
                stat_every: Duration::from_secs(args.stat_every_secs),
                seed: args.seed,
            };
            for (server, sims) in [("noop", &noop_pipeds), ("wisp", &wisp_pipeds)] {
                progress(&format!("cadence: {server}, {} s", args.cadence_secs));
                let (before, cpu_before) = (bcrypt(), sysload::sample());
                let duration = Duration::from_secs(args.cadence_secs);
                let outcome =
                    load::cadence(sims, cadence, duration, args.max_requests, timeout).await?;
                let count = (server == "wisp").then(|| BcryptCount(bcrypt() - before));
                let cpu = sysload::share(cpu_before, sysload::sample());
                phases.push(PhaseReport::new("cadence", server, &outcome, count, cpu));
            }
        }
        anyhow::Ok((phases, warm_up_time, warm_up_bcrypt))
    });

    // Stop the servers whatever happened to the load.
    let stopped = server_rt.block_on(async {
        noop.stop().await?;
        wisp.server.stop().await
    });
    let (phases, warm_up_time, warm_up_bcrypt) = run?;
    stopped?;
    client_rt.shutdown_timeout(Duration::from_secs(5));
    server_rt.shutdown_timeout(Duration::from_secs(5));

    let report = Report::new(
        settings,
        wisp.register_time,
        warm_up_time,
        warm_up_bcrypt,
        phases,
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    if let Some(metrics) = metrics {
        // Proof that the recorder was fed: what a scrape would have returned.
        let text = metrics.render();
        let calls = text
            .lines()
            .filter(|l| l.starts_with("wisp_grpc_requests_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
        progress(&format!(
            "metrics recorded: {calls} calls in wisp_grpc_requests_total, a scrape of {} bytes",
            text.len()
        ));
    }
    if args.check && !report.all_targets_met() {
        std::process::exit(1);
    }
    Ok(())
}

/// Progress goes to stderr, so `--json` output on stdout stays clean.
fn progress(what: &str) {
    eprintln!("poll-bench: {what}");
}
