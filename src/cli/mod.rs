//! Command-line surface. Scripts depend on these exact forms (see README).

//! Each command is a module owning its arguments and its handler; this one only
//! dispatches.

mod admin;
mod api_key;
mod application;
mod audit;
mod aws;
mod bridge;
mod console;
mod console_fetch;
mod console_layers;
mod doctor;
mod flags;
mod import;
mod jobs;
mod migrate;
mod ops_endpoint;
mod piped;
mod project;
mod serve;
mod signals;
mod simulate;
mod stores;

use clap::{Parser, Subcommand};

use crate::error::CliError;

/// The upstream PipeCD release Wisp's wire contract was checked against: the console
/// `wisp console fetch` and `wisp serve` get by default (named once, in wisp-config).
pub const UPSTREAM_PIPECD_VERSION: &str = wisp_config::UPSTREAM_RELEASE;

#[derive(Debug, Parser)]
#[command(
    name = "wisp",
    version = concat!(env!("CARGO_PKG_VERSION"), " (PipeCD ", wisp_config::upstream_release!(), ")"),
    about = "A serverless PipeCD control plane"
)]
pub struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `wisp=debug`.
    #[arg(long, global = true, env = "WISP_LOG", default_value = "info")]
    pub log: String,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true, env = "WISP_LOG_JSON")]
    pub log_json: bool,
    /// Export spans (each call, each store operation, each job run) to an OpenTelemetry
    /// collector at this OTLP/gRPC address, e.g. `http://127.0.0.1:4317`. The SDK's
    /// `OTEL_*` variables (service name, sampler, batching) apply.
    #[arg(long, global = true, env = "WISP_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the whole control plane on one port: PipedService (pipeds), APIService
    /// (pipectl) and WebService (the console) over gRPC and gRPC-web, the console's
    /// login and files, `/healthz`, and the scheduled jobs.
    Serve(serve::ServeArgs),
    /// Manage projects.
    #[command(subcommand)]
    Project(project::ProjectCommand),
    /// Register and manage pipeds.
    #[command(subcommand)]
    Piped(piped::PipedCommand),
    /// Register and list applications.
    #[command(subcommand)]
    Application(application::ApplicationCommand),
    /// Create, list and disable API keys (for pipectl).
    #[command(subcommand)]
    ApiKey(api_key::ApiKeyCommand),
    /// Sidecar for an upstream piped or pipectl: native gRPC (h2c) on loopback in,
    /// gRPC-web over HTTPS to the control plane out.
    Bridge(bridge::BridgeArgs),
    /// Copy every record and object from the stores of one config to those of another.
    Migrate(migrate::MigrateArgs),
    /// Copy another control plane's state into Wisp's stores: `wisp import pipecd`.
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// Set up the AWS stores a config names (DynamoDB table, S3 bucket).
    #[command(subcommand)]
    Aws(aws::AwsCommand),
    /// Get upstream PipeCD's web console (`wisp console fetch`), or put it where the AWS
    /// deployment serves it from (`wisp console upload`).
    #[command(subcommand)]
    Console(console::ConsoleCommand),
    /// List the scheduled jobs, or run one now.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// Check a live deployment from here: DNS, TLS, each load-balancer route, the
    /// console's files and login page, and (with `--session`) that a revocation is
    /// recorded. One line per failure with its fix; non-zero exit status on a failure.
    Doctor(doctor::DoctorArgs),
    /// Who changed what: `wisp audit list [--project P] [--since 24h] [--actor A]
    /// [--method M] [--json]`.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Drive a running control plane with a fleet of simulated pipeds at upstream's
    /// cadence; report calls, latencies, failures and a monthly AWS cost projection.
    Simulate(simulate::SimulateArgs),
}

/// Sets up logging (stderr) and, when configured, span export. Within the Tokio runtime:
/// the exporter's connection runs on it.
pub fn init_tracing(
    cli: &Cli,
) -> Result<Option<wisp_telemetry::otlp::Exporter>, wisp_telemetry::otlp::OtlpError> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    let filter = EnvFilter::try_new(&cli.log).unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = if cli.log_json {
        logs.json().with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    let (spans, exporter) = match &cli.otlp_endpoint {
        Some(endpoint) => {
            let (layer, exporter) =
                wisp_telemetry::otlp::layer(endpoint, env!("CARGO_PKG_VERSION"))?;
            (Some(layer), Some(exporter))
        }
        None => (None, None),
    };
    tracing_subscriber::registry().with(logs).with(spans).init();
    Ok(exporter)
}

pub async fn run(cli: Cli) -> Result<(), CliError> {
    // The CLI's changes are recorded in the audit log once made (the servers' at their
    // gate, the jobs' by the job runner).
    let change = audit::CliChange::of(&cli.command);
    let result = dispatch(cli.command, cli.otlp_endpoint.as_deref()).await;
    if let Some(change) = change
        && result.is_ok()
    {
        change.record().await;
    }
    result
}

async fn dispatch(command: Command, otlp_endpoint: Option<&str>) -> Result<(), CliError> {
    match command {
        Command::Serve(args) => serve::run(args, otlp_endpoint).await,
        Command::Project(cmd) => project::run(cmd).await,
        Command::Piped(cmd) => piped::run(cmd).await,
        Command::Application(cmd) => application::run(cmd).await,
        Command::ApiKey(cmd) => api_key::run(cmd).await,
        Command::Bridge(args) => bridge::run(args).await,
        Command::Migrate(args) => migrate::run(args).await,
        Command::Import(cmd) => import::run(cmd).await,
        Command::Aws(cmd) => aws::run(cmd).await,
        Command::Console(cmd) => console::run(cmd).await,
        Command::Jobs(cmd) => jobs::run(cmd).await,
        Command::Simulate(args) => simulate::run(args).await,
        Command::Doctor(args) => doctor::run(args).await,
        Command::Audit(cmd) => audit::run(cmd).await,
    }
}
