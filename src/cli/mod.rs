//! Command-line surface. Scripts depend on these exact forms (see README).

mod aws;
mod bridge;
mod console;
mod migrate;
mod serve;
mod signals;
mod simulate;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::admin;
use crate::setup::StoreArgs;

#[derive(Debug, Parser)]
#[command(name = "wisp", version, about = "A serverless PipeCD control plane")]
pub struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `wisp=debug`.
    #[arg(long, global = true, env = "WISP_LOG", default_value = "info")]
    pub log: String,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true, env = "WISP_LOG_JSON")]
    pub log_json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the control plane: PipedService over gRPC and gRPC-web on one port.
    Serve(ServeArgs),
    /// Manage projects.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Register and manage pipeds.
    #[command(subcommand)]
    Piped(PipedCommand),
    /// Register and list applications.
    #[command(subcommand)]
    Application(ApplicationCommand),
    /// Create, list and disable API keys (for pipectl).
    #[command(subcommand)]
    ApiKey(ApiKeyCommand),
    /// Sidecar for an upstream piped or pipectl: native gRPC (h2c) on loopback in,
    /// gRPC-web over HTTPS to the control plane out.
    Bridge(bridge::BridgeArgs),
    /// Copy every record and object from the stores of one config to those of another.
    Migrate(migrate::MigrateArgs),
    /// Set up the AWS stores a config names (DynamoDB table, S3 bucket).
    #[command(subcommand)]
    Aws(aws::AwsCommand),
    /// Put a built web console where the AWS deployment serves it from.
    #[command(subcommand)]
    Console(console::ConsoleCommand),
    /// Drive a running control plane with a fleet of simulated pipeds at upstream's
    /// cadence; report calls, latencies, failures and a monthly AWS cost projection.
    Simulate(simulate::SimulateArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub stores: StoreArgs,
    /// Address to listen on (gRPC over HTTP/2 cleartext and gRPC-web over HTTP/1.1).
    #[arg(long, env = "WISP_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Encryption key file (at least 32 bytes); used to sign console sessions.
    #[arg(
        long,
        env = "WISP_ENCRYPTION_KEY_FILE",
        conflicts_with = "encryption_key_secret"
    )]
    pub encryption_key_file: Option<PathBuf>,
    /// Read the encryption key from this AWS Secrets Manager secret (name or ARN) instead
    /// of a file: its value, as the file would hold it.
    #[arg(long, env = "WISP_ENCRYPTION_KEY_SECRET", value_name = "NAME")]
    pub encryption_key_secret: Option<String>,
    /// Serve the PipeCD web console's built static files from this directory (upstream's
    /// `web` build output); every other path that is not a file gets its index.html.
    #[arg(long, env = "WISP_WEB_DIR", value_name = "DIR")]
    pub web_dir: Option<PathBuf>,
    /// Send the session cookie without `Secure`, for a console reached over plain HTTP
    /// under a name other than localhost.
    #[arg(long, env = "WISP_INSECURE_COOKIE")]
    pub insecure_cookie: bool,
}

#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project with a generated static admin (printed once).
    Add {
        id: String,
        #[arg(long, default_value = "")]
        desc: String,
        /// Log in through this entry of the config's `sharedSSOConfigs` (its client
        /// secret stays in the config, not in the project).
        #[arg(long, value_name = "NAME")]
        shared_sso: Option<String>,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// List projects.
    List {
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum PipedCommand {
    /// Register a piped; prints its id and key (the key is shown only once).
    Add {
        #[arg(long)]
        project: String,
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "")]
        desc: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// List a project's pipeds.
    List {
        #[arg(long)]
        project: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Disable a piped: its credentials stop working (within the verifier cache TTL).
    Disable(PipedRef),
    /// Enable a disabled piped.
    Enable(PipedRef),
    /// Add a new key to a piped (at most two are valid at once), printing it once.
    RotateKey {
        #[command(flatten)]
        piped: PipedRef,
        #[arg(long)]
        json: bool,
    },
    /// Drop every key of a piped but the newest, ending a rotation.
    DeleteOldKeys(PipedRef),
}

#[derive(Debug, Args)]
pub struct PipedRef {
    #[arg(long)]
    pub project: String,
    /// The piped id.
    pub id: String,
    #[command(flatten)]
    pub stores: StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum ApplicationCommand {
    /// Register an application managed by a piped.
    Add(admin::ApplicationAdd),
    /// List a project's applications.
    List {
        #[arg(long)]
        project: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ApiKeyCommand {
    /// Create an API key; prints its id and key (the key is shown only once).
    Add {
        #[arg(long)]
        project: String,
        #[arg(long)]
        name: String,
        /// READ_ONLY or READ_WRITE.
        #[arg(long)]
        role: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// List a project's API keys (never their secrets).
    List {
        #[arg(long)]
        project: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Disable an API key: it stops working (within the verifier cache TTL).
    Disable {
        #[arg(long)]
        project: String,
        /// The API key id (the part of the key before the dot).
        id: String,
        #[command(flatten)]
        stores: StoreArgs,
    },
}

/// What went wrong, and whether it was the user's mistake (exit 2) or not (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error("{0:#}")]
    Failure(#[from] anyhow::Error),
}

/// A domain operation's refusal is the user's mistake; anything else is a failure.
impl From<wisp_services::ServiceError> for CliError {
    fn from(err: wisp_services::ServiceError) -> Self {
        use wisp_services::ServiceError as E;
        match err {
            E::InvalidArgument(m)
            | E::NotFound(m)
            | E::AlreadyExists(m)
            | E::PermissionDenied(m)
            | E::FailedPrecondition(m) => CliError::Usage(m),
            other => CliError::Failure(anyhow::Error::new(other)),
        }
    }
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Failure(_) => 1,
        }
    }
}

/// Every duration flag: Go's grammar, as the config writes durations (`500ms`, `30s`,
/// `1m30s`, `1.5h`), or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(seconds));
    }
    wisp_config::parse_go_duration(text)
        .map_err(|e| format!("{text:?}: expected a duration such as 500ms, 30s, 1m30s or 1h ({e})"))
}

pub fn init_tracing(cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(&cli.log).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if cli.log_json {
        builder.json().init();
    } else {
        builder.init();
    }
}

pub async fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Project(cmd) => admin::project(cmd).await,
        Command::Piped(cmd) => admin::piped(cmd).await,
        Command::Application(cmd) => admin::application(cmd).await,
        Command::ApiKey(cmd) => admin::api_key(cmd).await,
        Command::Bridge(args) => bridge::run(args).await,
        Command::Migrate(args) => migrate::run(args).await,
        Command::Aws(cmd) => aws::run(cmd).await,
        Command::Console(cmd) => console::run(cmd).await,
        Command::Simulate(args) => simulate::run(args).await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::parse_duration;

    #[test]
    fn one_duration_grammar_for_every_flag() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        for bad in ["", "s", "5x", "-1s", "1 m"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
