//! `wisp serve`: the whole control plane in one process. PipedService, APIService and
//! WebService over native gRPC (h2c, or HTTP/2 over TLS with `--tls-cert/--tls-key`) and
//! gRPC-web on one port, the console's login and files, `/healthz`, and the scheduled
//! jobs on their timers, on the stores the config names.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio::net::TcpListener;
use tonic::service::Routes;
use wisp_app::server::{DEFAULT_MAX_CONNECTIONS, Server, ServerOptions};
use wisp_app::{App, ConsoleOptions, KeySource};
use wisp_transport::load::DEFAULT_MAX_IN_FLIGHT;
use wisp_transport::rate::{DEFAULT_CALL_RATE, DEFAULT_PROJECT_CALL_RATE};

use super::signals::Signals;
use super::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub stores: StoreArgs,
    /// Address to listen on (gRPC over HTTP/2 and gRPC-web and the console over
    /// HTTP/1.1; cleartext unless --tls-cert is given).
    #[arg(long, env = "WISP_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Serve TLS with this certificate chain (PEM, the server's certificate first), for
    /// gRPC, gRPC-web and the console alike. Both files are read again when they change
    /// (new connections get the new certificate; open ones are kept).
    #[arg(long, env = "WISP_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "WISP_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
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
    /// The web console to serve: a PipeCD release (e.g. v0.57.1), fetched into the data
    /// directory's console/VERSION on first use (`wisp console fetch`), or a directory of
    /// its built files (upstream's `web` build output). Without it: the release Wisp is
    /// checked against, once `wisp console fetch` has put it in the data directory
    /// (no restart needed); until then `/` says how to get it.
    #[arg(
        long,
        env = "WISP_CONSOLE",
        value_name = "VERSION|DIR",
        conflicts_with = "web_dir"
    )]
    pub console: Option<String>,
    /// The same as `--console DIR` (kept for existing scripts).
    #[arg(long, env = "WISP_WEB_DIR", value_name = "DIR")]
    pub web_dir: Option<PathBuf>,
    #[command(flatten)]
    pub fetch_limits: super::console::FetchLimitArgs,
    /// Serve the console's built files from this prefix of the filestore (S3 on AWS;
    /// `wisp console upload` puts them there) instead of a directory: what the `http`
    /// function does with the same variable, and the Terraform module's Fargate tasks.
    #[arg(
        long,
        env = "WISP_WEB_PREFIX",
        value_name = "PREFIX",
        conflicts_with_all = ["web_dir", "console"]
    )]
    pub web_prefix: Option<String>,
    /// Send the session cookie without `Secure`, for a console reached over plain HTTP
    /// under a name other than localhost.
    #[arg(long, env = "WISP_INSECURE_COOKIE")]
    pub insecure_cookie: bool,
    /// A proxy or load balancer in front of `wisp serve` (an address or CIDR range; may
    /// be repeated, or comma-separated in the variable): its `X-Forwarded-For` names a
    /// static login's source, by which failed logins are counted. Without it the source
    /// is the connection's peer, and `X-Forwarded-For` is ignored (anyone can write one).
    #[arg(
        long,
        env = "WISP_TRUSTED_PROXIES",
        value_name = "CIDR",
        value_delimiter = ',',
        value_parser = |s: &str| s.parse::<wisp_console::login_guard::Cidr>()
    )]
    pub trusted_proxy: Vec<wisp_console::login_guard::Cidr>,
    /// Let projects' SSO settings reach private, loopback, link-local and unique-local
    /// addresses (an identity provider inside the network; plain http:// to loopback).
    /// Without it they must be https:// addresses on the public internet.
    #[arg(long, env = "WISP_SSO_ALLOW_PRIVATE_ADDRESSES")]
    pub sso_allow_private_addresses: bool,
    /// Serve on a non-loopback address even though a project's static admin still has
    /// the default password `hello-pipecd` (refused otherwise).
    #[arg(long, env = "WISP_ALLOW_DEFAULT_PASSWORD")]
    pub allow_default_password: bool,
    /// Longest time a call may take, reading its request included: a client that stalls
    /// mid-upload is cut off then (a shorter `grpc-timeout` from the client wins).
    #[arg(
        long,
        env = "WISP_REQUEST_TIMEOUT",
        default_value = "60s",
        value_parser = super::flags::parse_duration
    )]
    pub request_timeout: Duration,
    /// Most client connections open at once; at the cap new ones wait until one closes.
    #[arg(long, env = "WISP_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Most calls worked on at once (counted from when a call's request is read). Past
    /// it, calls wait in a line four times as long for at most 2 s, then get UNAVAILABLE
    /// (which pipeds retry) instead of slowing every call down until all of them time
    /// out. One piped, API key or console user may have a quarter of them, one project
    /// half.
    #[arg(long, env = "WISP_MAX_IN_FLIGHT", default_value_t = DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Most calls per second one piped, API key or console user may make (checked once
    /// the caller is authenticated, before any work for the call), with bursts of five
    /// seconds' worth; past it, calls get RESOURCE_EXHAUSTED (which pipeds retry), after
    /// 2 s.
    #[arg(long, env = "WISP_MAX_CALL_RATE", default_value_t = DEFAULT_CALL_RATE)]
    pub max_call_rate: u32,
    /// Most calls per second the callers of one project may make together (bursts of
    /// five seconds' worth); a caller refused for its own rate takes nothing from it.
    #[arg(
        long,
        env = "WISP_MAX_PROJECT_CALL_RATE",
        default_value_t = DEFAULT_PROJECT_CALL_RATE
    )]
    pub max_project_call_rate: u32,
    /// Where to serve `/metrics` (Prometheus text) and `/version`; `off` for nowhere.
    /// Loopback by default: put it on another address only where strangers cannot reach.
    /// [default: 127.0.0.1:9085; if that port is taken, the server runs without it]
    #[arg(long, env = "WISP_ADMIN_ADDR")]
    pub admin_addr: Option<String>,
    /// Close a client connection after this long without a request (none in flight and
    /// none started; answering the server's HTTP/2 pings does not count). A new
    /// connection must send within 30 s (or this, if shorter). At --max-connections, a
    /// connection that never sent an authenticated request is closed to make room.
    #[arg(
        long,
        env = "WISP_IDLE_TIMEOUT",
        default_value = "5m",
        value_parser = super::flags::parse_duration
    )]
    pub idle_timeout: Duration,
    /// On SIGTERM or Ctrl-C, go on serving this long with `/healthz` and the gRPC health
    /// check (`grpc.health.v1.Health/Check`) failing, before closing the listener and
    /// finishing the calls in flight (for at most 10 s): time for a load balancer that
    /// still routes here to see the server unhealthy and send new connections elsewhere.
    /// At most 5m.
    #[arg(
        long,
        env = "WISP_SHUTDOWN_DELAY",
        default_value = "0s",
        value_parser = parse_shutdown_delay
    )]
    pub shutdown_delay: Duration,
    /// Do not run the scheduled jobs here (for instances beside one that runs them; see
    /// `wisp jobs list` for what they are and how often they run).
    #[arg(long, env = "WISP_NO_JOBS")]
    pub no_jobs: bool,
}

/// `--shutdown-delay`: a duration of at most 5 minutes.
fn parse_shutdown_delay(value: &str) -> Result<Duration, String> {
    let delay = super::flags::parse_duration(value)?;
    if delay > Duration::from_secs(300) {
        return Err("at most 5m: the process must stop in time for its runtime".into());
    }
    Ok(delay)
}

/// Where `/metrics` is served when `--admin-addr` is not given.
const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9085";

/// `otlp_endpoint` (the global `--otlp-endpoint`) is also where the pipeds' spans go.
pub async fn run(args: ServeArgs, otlp_endpoint: Option<&str>) -> Result<(), CliError> {
    // Without a key, sessions are signed with one kept beside the embedded data, so
    // console logins survive a restart.
    let key = match (&args.encryption_key_file, &args.encryption_key_secret) {
        (Some(path), _) => KeySource::File(path.clone()),
        (None, Some(name)) => KeySource::Secret(name.clone()),
        (None, None) => KeySource::DataDir,
    };
    // The pipeds' spans go where Wisp's own do (`--otlp-endpoint`), or are dropped.
    let traces = wisp_transport::trace::Relay::from_endpoint(otlp_endpoint)
        .map_err(|e| CliError::Usage(format!("--otlp-endpoint: {e}")))?;
    if args.request_timeout.is_zero() {
        return Err(CliError::Usage(
            "--request-timeout must be more than 0".into(),
        ));
    }
    if args.idle_timeout.is_zero() {
        return Err(CliError::Usage("--idle-timeout must be more than 0".into()));
    }
    // An address given is a promise: it must bind. The default only serves if it can, so
    // that a taken port 9085 (upstream's admin port) does not stop the control plane.
    let admin_required = args.admin_addr.is_some();
    let admin_addr: Option<SocketAddr> =
        match args.admin_addr.as_deref().unwrap_or(DEFAULT_ADMIN_ADDR) {
            "off" => None,
            addr => Some(addr.parse().map_err(|_| {
                CliError::Usage(format!(
                    "--admin-addr {addr}: expected HOST:PORT (e.g. 127.0.0.1:9085) or off"
                ))
            })?),
        };
    // Before anything records: the recorder sees every metric from the start.
    let metrics = match admin_addr {
        Some(_) => Some(wisp_telemetry::prometheus::install().context("metrics")?),
        None => None,
    };
    if args.max_in_flight == 0 {
        return Err(CliError::Usage("--max-in-flight must be at least 1".into()));
    }
    if args.max_call_rate == 0 || args.max_project_call_rate == 0 {
        return Err(CliError::Usage(
            "--max-call-rate and --max-project-call-rate must be at least 1".into(),
        ));
    }
    if args.max_connections == 0 {
        return Err(CliError::Usage(
            "--max-connections must be at least 1".into(),
        ));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(Arc::new(
            wisp_app::tls::ReloadingCert::load(cert, key)
                .map_err(|e| CliError::Usage(format!("--tls-cert/--tls-key {e}")))?,
        )),
        _ => None,
    };
    // After the flags are checked: a version not yet here is fetched now.
    let console_dir = match &args.web_prefix {
        Some(_) => None,
        None => Some(console_dir(&args).await?),
    };
    let app = App::open(&args.stores.sources(key)).await?.with_sso_policy(
        wisp_services::web::sso_policy::ProviderPolicy {
            allow_private: args.sso_allow_private_addresses,
        },
    );
    check_default_passwords(&app, args.addr, args.allow_default_password).await?;
    let web_api = app.web_api();
    let console = app.console(
        web_api.clone(),
        ConsoleOptions {
            insecure_cookie: args.insecure_cookie,
            static_files: match (&args.web_prefix, console_dir) {
                // Assets by presigned URL, as the http function serves them.
                (Some(prefix), _) => Some(
                    wisp_console::StaticFiles::from_filestore(
                        app.stores.filestore.clone(),
                        prefix.clone(),
                    )
                    .redirect_assets(true),
                ),
                (None, dir) => dir.map(wisp_console::StaticFiles::new),
            },
            trusted_proxies: args.trusted_proxy.clone(),
        },
    )?;
    let web_grpc = app.web_grpc(web_api)?;

    // Listen for signals before announcing readiness: a SIGTERM sent right after the
    // ready line must stop the server gracefully, not kill it.
    let mut signals = Signals::install().context("install signal handlers")?;

    let server = Server::bind(
        args.addr,
        ServerOptions {
            request_timeout: args.request_timeout,
            max_connections: args.max_connections,
            idle_timeout: args.idle_timeout,
            max_in_flight: args.max_in_flight,
            max_call_rate: args.max_call_rate,
            max_project_call_rate: args.max_project_call_rate,
            shutdown_delay: args.shutdown_delay,
            tls: tls.clone(),
            ..ServerOptions::default()
        },
    )
    .await
    .map_err(anyhow::Error::new)?;
    let local = server.local_addr();
    let admin = match admin_addr {
        Some(addr) => match TcpListener::bind(addr).await {
            Ok(admin) => Some(admin),
            Err(err) if !admin_required => {
                tracing::warn!(
                    %addr,
                    error = %err,
                    "no /metrics: cannot listen on the default admin address (set --admin-addr)"
                );
                None
            }
            Err(err) => {
                return Err(anyhow::Error::new(err)
                    .context(format!("cannot listen on --admin-addr {addr}"))
                    .into());
            }
        },
        None => None,
    };
    if let (Some(admin), Some(metrics)) = (admin, metrics) {
        let admin_local = admin.local_addr().context("admin listener address")?;
        println!("wisp admin listening on {admin_local}");
        tracing::info!(addr = %admin_local, "metrics on /metrics, version on /version");
        let source = super::ops_endpoint::MetricsSource {
            handle: metrics,
            stores: app.stores.clone(),
            config_projects: app.job_settings().config_projects,
            fleet: std::sync::Arc::new(wisp_jobs::fleet::FleetMetrics::new(
                wisp_jobs::fleet::Scope::Everything,
            )),
        };
        tokio::spawn(super::ops_endpoint::serve(admin, source));
    }
    if tls.is_some() {
        tracing::info!(addr = %local, "serving TLS (--tls-cert)");
    } else if !local.ip().is_loopback() {
        tracing::warn!(
            addr = %local,
            "serving plaintext on an address other machines can reach: sessions, piped keys \
             and API keys cross the network readable; pass --tls-cert and --tls-key, or put \
             a TLS proxy in front"
        );
    }
    // Tests and scripts wait for this line to know the port (useful with --addr :0).
    println!("wisp listening on {local}");
    app.log_ready("wisp serve");
    tracing::info!(addr = %local, "wisp serve ready");

    let routes = Routes::new(app.piped_grpc().into_server())
        .add_service(app.api_grpc().into_server())
        .add_service(web_grpc.into_server())
        .add_service(app.trace_grpc(traces));
    let (jobs_stop, jobs_stopped) = tokio::sync::oneshot::channel::<()>();
    let jobs = if args.no_jobs {
        tracing::info!("scheduled jobs off (--no-jobs)");
        None
    } else {
        Some(tokio::spawn(wisp_jobs::schedule::run_until(
            app.stores.clone(),
            app.job_settings(),
            app.job_schedule(),
            async {
                let _ = jobs_stopped.await;
            },
        )))
    };
    let served = server
        .run_until(routes, Arc::new(console), signals.recv())
        .await;
    let _ = jobs_stop.send(());
    if let Some(jobs) = jobs {
        let _ = jobs.await;
    }
    served.map_err(anyhow::Error::new)?;
    tracing::info!("wisp serve stopped");
    Ok(())
}

/// The directory of the console to serve: `--web-dir`/`--console DIR` as given (it must
/// hold index.html), `--console VERSION` from the data directory (fetched there first if
/// missing), or the default release's place in the data directory, which may still be
/// empty: the console answers `/` with how to fill it until it is.
async fn console_dir(args: &ServeArgs) -> Result<PathBuf, CliError> {
    let data_dir = &args.stores.data_dir;
    let dir = match (&args.web_dir, &args.console) {
        (Some(dir), _) => dir.clone(),
        (None, Some(value)) if Path::new(value).is_dir() => PathBuf::from(value),
        (None, Some(value))
            if value.contains(std::path::MAIN_SEPARATOR) || value.starts_with('.') =>
        {
            return Err(CliError::Usage(format!(
                "--console {value}: no such directory (give a directory of the console's \
                 build output, or a PipeCD release such as {})",
                super::UPSTREAM_PIPECD_VERSION
            )));
        }
        (None, Some(version)) => {
            return super::console::ensure_version(data_dir, version, &args.fetch_limits).await;
        }
        (None, None) => {
            return super::console::version_dir(data_dir, super::UPSTREAM_PIPECD_VERSION);
        }
    };
    if !dir.join("index.html").is_file() {
        return Err(CliError::Usage(format!(
            "--console {}: no index.html there (point it at the console's build output)",
            dir.display()
        )));
    }
    Ok(dir)
}

/// A control plane reachable from other machines must not keep upstream's well-known
/// quickstart password: refused unless `--allow-default-password`, then warned about.
async fn check_default_passwords(
    app: &App,
    addr: SocketAddr,
    allowed: bool,
) -> Result<(), CliError> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    let projects = app.projects();
    let mut candidates: Vec<(String, String, String)> = Vec::new();
    let mut add = |p: wisp_proto::model::Project| {
        if let Some(admin) = p.static_admin.filter(|_| !p.static_admin_disabled) {
            candidates.push((p.id, admin.username, admin.password_hash));
        }
    };
    projects.config_projects().cloned().for_each(&mut add);
    // The stored quickstart project, unless the config file's shadows it.
    match projects.find(wisp_app::QUICKSTART_PROJECT).await {
        Ok(Some((p, wisp_store::projects::ProjectSource::Datastore))) => add(p),
        Ok(_) => {}
        Err(e) => {
            return Err(CliError::Failure(anyhow::anyhow!(
                "read the quickstart project: {e}"
            )));
        }
    }
    // bcrypt: off the async threads.
    let weak = tokio::task::spawn_blocking(move || {
        candidates
            .into_iter()
            .filter(|(_, _, hash)| wisp_auth::verify_secret(wisp_app::QUICKSTART_PASSWORD, hash))
            .map(|(id, username, _)| format!("{id} (user {username})"))
            .collect::<Vec<_>>()
    })
    .await
    .context("check the static admins' passwords")?;
    if weak.is_empty() {
        return Ok(());
    }
    let message = format!(
        "--addr {addr} is reachable from other machines, and the static admin of project {} \
         still has the default password {:?}; set a new one with `wisp project reset-password \
         ID` (or disable it with `wisp project update ID --static-admin-disabled true`)",
        weak.join(", "),
        wisp_app::QUICKSTART_PASSWORD
    );
    if !allowed {
        return Err(CliError::Usage(format!(
            "{message}, or pass --allow-default-password to serve anyway"
        )));
    }
    eprintln!("WARNING: {message}");
    tracing::warn!(addr = %addr, projects = %weak.join(", "), "serving with the default static admin password");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_delay_is_bounded_at_five_minutes() {
        assert_eq!(parse_shutdown_delay("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_shutdown_delay("5m"), Ok(Duration::from_secs(300)));
        let refused = parse_shutdown_delay("6m").expect_err("over 5m");
        assert!(refused.contains("at most 5m"), "{refused}");
    }
}
