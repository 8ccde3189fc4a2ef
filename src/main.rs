//! `wisp`: the PipeCD control plane on one machine (`wisp serve`) and the admin CLI that
//! acts directly on the configured stores.

mod cli;
mod error;

use std::process::ExitCode;

use clap::Parser;

// mimalloc 2 rather than glibc's malloc, for `wisp serve` (and the Fargate task, the same
// binary): at 10,000 pipeds it spent about a tenth less CPU per call, peaked lower, and
// gave the memory back once the fleet left, which glibc did not; mimalloc 3 peaked higher
// (benches/README, "mimalloc as `wisp`'s allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let exporter = {
        let _within = runtime.enter();
        match cli::init_tracing(&cli) {
            Ok(exporter) => exporter,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let result = runtime.block_on(cli::run(cli));
    if let Some(exporter) = exporter {
        // The SDK's thread sends the last batch through a connection on the runtime.
        let _within = runtime.enter();
        exporter.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}
