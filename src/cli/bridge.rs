//! `wisp bridge`: the sidecar beside an unmodified piped or pipectl. Native gRPC (h2c) in
//! on loopback, gRPC-web over HTTPS out to the control plane's load balancer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio::net::TcpListener;
use wisp_bridge::{Bridge, Config, Upstream};

use super::signals::Signals;
use crate::error::CliError;

#[derive(Debug, Args)]
pub struct BridgeArgs {
    /// Address to accept native gRPC (HTTP/2 cleartext) on: point the piped's
    /// `apiAddress` (or pipectl's `--address`) here, with `--insecure`.
    #[arg(long)]
    pub listen: SocketAddr,
    /// The control plane: `https://HOST[:PORT]` (the load balancer), or `http://` on
    /// this machine (local tests).
    #[arg(long)]
    pub upstream: String,
    /// Deadline of a call whose client sets no shorter one (`30s`, `500ms`, `2m`).
    #[arg(long, default_value = "30s", value_parser = super::flags::parse_duration)]
    pub timeout: Duration,
    /// Listen on a non-loopback address. The bridge accepts plaintext calls and passes
    /// their credentials on: expose it only on a network you trust.
    #[arg(long)]
    pub allow_remote: bool,
    /// Forward to a plain `http://` upstream on another machine. Refused otherwise: the
    /// piped's credentials would cross the network in clear.
    #[arg(long)]
    pub allow_insecure_upstream: bool,
    /// Trust the CA certificates in this PEM file instead of the system's.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// Most client connections open at once; at the cap new ones wait until one closes.
    #[arg(long, default_value_t = wisp_bridge::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Serve clients over TLS with this certificate chain (PEM), e.g. from a Kubernetes
    /// Secret; with `--tls-key`. Clients then connect without `--insecure`.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `--tls-cert`.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// After SIGTERM, keep accepting clients this long with `/readyz` failing, so that a
    /// Kubernetes Service or load balancer stops routing here before the listener closes.
    #[arg(long, default_value = "0s", value_parser = super::flags::parse_duration)]
    pub shutdown_delay: Duration,
    /// Then wait at most this long for the calls in flight to finish (keep delay + grace
    /// under the pod's `terminationGracePeriodSeconds`).
    #[arg(long, default_value = "10s", value_parser = super::flags::parse_duration)]
    pub shutdown_grace: Duration,
    /// Serve `/metrics` (Prometheus text), `/version` and `/healthz` on this address, a
    /// listener of its own beside the gRPC one (as `wisp serve --admin-addr`). Off unless
    /// given: beside a piped, its own admin server holds 9085.
    #[arg(long)]
    pub admin_addr: Option<SocketAddr>,
}

/// The control plane's RPC names, for the `method` label of the bridge's metrics.
fn method_names(service: &str, method: &str) -> Option<&'static str> {
    use wisp_transport::limits::{API, PIPED, TRACE, WEB};
    let limits = match service {
        "PipedService" => &PIPED,
        "TraceService" => &TRACE,
        "APIService" => &API,
        "WebService" => &WEB,
        _ => return None,
    };
    limits.method(method).map(|(name, _)| name)
}

pub async fn run(args: BridgeArgs) -> Result<(), CliError> {
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        return Err(CliError::Usage(format!(
            "--listen {}: not a loopback address; the bridge is a sidecar that accepts \
             plaintext calls and forwards their credentials (pass --allow-remote to listen \
             there anyway)",
            args.listen
        )));
    }
    if args.timeout.is_zero() {
        return Err(CliError::Usage("--timeout must be more than 0".into()));
    }
    if args.max_connections == 0 {
        return Err(CliError::Usage(
            "--max-connections must be at least 1".into(),
        ));
    }
    let upstream: Upstream = args
        .upstream
        .parse()
        .map_err(|e: wisp_bridge::ConfigError| CliError::Usage(e.to_string()))?;
    if !upstream.is_https() && !upstream.is_loopback() && !args.allow_insecure_upstream {
        return Err(CliError::Usage(format!(
            "--upstream {}: plain http:// to another machine would send the piped's \
             credentials in clear; use https:// (or pass --allow-insecure-upstream)",
            args.upstream
        )));
    }
    let mut config = Config::new(upstream);
    config.timeout = args.timeout;
    config.ca_file = args.ca_file;
    config.max_connections = args.max_connections;
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        config.inbound_tls = Some(wisp_bridge::inbound::InboundTls { cert, key });
    }
    config.method_names = method_names;
    let tls = config.inbound_tls.is_some();
    let bridge = Bridge::new(config).map_err(|e| CliError::Usage(e.to_string()))?;
    // Before any call is forwarded: the recorder sees every metric from the start.
    let admin = match args.admin_addr {
        Some(addr) => {
            let handle = wisp_telemetry::prometheus::install_bridge().context("metrics")?;
            let listener = TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on --admin-addr {addr}"))?;
            Some((listener, handle))
        }
        None => None,
    };

    let mut signals = Signals::install().context("install signal handlers")?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr().context("listener address")?;
    if let Some((admin, handle)) = admin {
        let admin_local = admin.local_addr().context("admin listener address")?;
        println!("wisp bridge admin listening on {admin_local}");
        tracing::info!(addr = %admin_local, "metrics on /metrics, version on /version");
        tokio::spawn(super::ops_endpoint::serve(admin, handle));
    }
    // Tests and scripts wait for this line to know the port (useful with :0).
    println!("wisp bridge listening on {local}");
    tracing::info!(
        addr = %local,
        tls,
        upstream = %bridge.config().upstream,
        timeout_s = args.timeout.as_secs_f64(),
        "wisp bridge ready"
    );
    let draining = bridge.clone();
    let delay = args.shutdown_delay;
    bridge
        .serve(
            listener,
            async move {
                signals.recv().await;
                draining.start_draining();
                if !delay.is_zero() {
                    tracing::info!(
                        delay_s = delay.as_secs_f64(),
                        "shutting down: /readyz fails, still accepting clients"
                    );
                    tokio::time::sleep(delay).await;
                }
                tracing::info!("shutting down: finishing in-flight calls");
            },
            args.shutdown_grace,
        )
        .await;
    tracing::info!("wisp bridge stopped");
    Ok(())
}
