//! `wisp serve`: PipedService, APIService and WebService over native gRPC (h2c) and gRPC-web on one
//! port, plus `/healthz`, on the stores the config names.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic_web::GrpcWebLayer;
use wisp_transport::EdgeLayer;
use wisp_transport::api::ApiGrpc;
use wisp_transport::piped::PipedGrpc;
use wisp_transport::web::WebGrpc;

use super::signals::Signals;
use crate::error::CliError;
use crate::setup;
use crate::setup::StoreArgs;

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

pub async fn run(args: ServeArgs) -> Result<(), CliError> {
    // Read first so a bad key fails at start, not at the first console login.
    let encryption_key = setup::load_encryption_key(
        args.encryption_key_file.as_deref(),
        args.encryption_key_secret.as_deref(),
    )
    .await?;
    let opened = setup::open(&args.stores).await?;
    opened.ensure_quickstart_project().await?;
    let encryption_key = match encryption_key {
        Some(key) => key,
        // Without a key, sessions are signed with one kept beside the embedded data, so
        // console logins survive a restart.
        None => setup::local_encryption_key(&args.stores.data_dir)?,
    };
    let session_signer = wisp_auth::SessionSigner::new(encryption_key.bytes());

    let verifier = Arc::new(wisp_auth::PipedVerifier::new(opened.key_source()));
    let web_base_url = opened.config.spec.address.clone().unwrap_or_default();
    let piped_api = Arc::new(wisp_services::piped::PipedApi::new(
        opened.stores.clone(),
        web_base_url.clone(),
    ));
    let api_key_verifier = Arc::new(wisp_auth::ApiKeyVerifier::new(opened.key_source()));
    let api_api = Arc::new(wisp_services::api::ApiApi::new(
        opened.stores.clone(),
        web_base_url,
    ));
    let web_api = Arc::new(
        wisp_services::web::WebApi::new(opened.stores.clone(), opened.config_projects_as_model())
            .with_sso_key(*encryption_key.aes_key()),
    );
    if let Some(dir) = args
        .web_dir
        .as_ref()
        .filter(|d| !d.join("index.html").is_file())
    {
        return Err(CliError::Usage(format!(
            "--web-dir {}: no index.html there (point it at the console's build output)",
            dir.display()
        )));
    }
    let mut console = wisp_console::Console::new(web_api.clone(), session_signer.clone())
        .insecure_cookie(args.insecure_cookie)
        .with_sso_key(*encryption_key.aes_key())
        .with_address(opened.config.spec.address.as_deref().unwrap_or_default())
        .with_shared_sso(&opened.config.spec.shared_sso_configs);
    if let Some(dir) = &args.web_dir {
        console = console.with_static_dir(dir);
    }
    let console = Arc::new(console);

    // Listen for signals before announcing readiness: a SIGTERM sent right after the
    // ready line must stop the server gracefully, not kill it.
    let mut signals = Signals::install().context("install signal handlers")?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();

    let listener = TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let local = listener.local_addr().context("listener address")?;
    // Tests and scripts wait for this line to know the port (useful with --addr :0).
    println!("wisp listening on {local}");
    tracing::info!(addr = %local, data = %opened.describe(), "wisp serve ready");

    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let server = Server::builder()
        .accept_http1(true)
        // Detect dead piped connections instead of holding them (and shutdown) forever.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .layer(EdgeLayer)
        .layer(wisp_console::ConsoleLayer::new(console))
        .layer(GrpcWebLayer::new())
        .add_service(PipedGrpc::new(piped_api, verifier).into_server())
        .add_service(ApiGrpc::new(api_api, api_key_verifier).into_server())
        .add_service(WebGrpc::new(web_api, session_signer).into_server())
        .serve_with_incoming_shutdown(incoming, async {
            let _ = stop_rx.await;
        });
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => {
            result.context("server failed")?;
        }
        () = signals.recv() => {
            tracing::info!("shutting down: finishing in-flight calls");
            let _ = stop_tx.send(());
            // In-flight calls get a bounded grace period; a stuck client cannot keep the
            // process alive.
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
                Ok(result) => result.context("server failed")?,
                Err(_) => tracing::warn!(
                    "connections still open after {} s; stopping anyway",
                    SHUTDOWN_GRACE.as_secs()
                ),
            }
        }
    }
    tracing::info!("wisp serve stopped");
    Ok(())
}

/// How long in-flight calls may take to finish after SIGTERM / Ctrl-C.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
