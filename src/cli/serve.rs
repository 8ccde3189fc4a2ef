//! `wisp serve`: PipedService over native gRPC (h2c) and gRPC-web on one port, plus
//! `/healthz`, on the stores the config names.

use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic_web::GrpcWebLayer;
use wisp_transport::EdgeLayer;
use wisp_transport::piped::PipedGrpc;

use crate::cli::{CliError, ServeArgs};
use crate::setup;

pub async fn run(args: ServeArgs) -> Result<(), CliError> {
    let opened = setup::open(&args.stores).await?;
    opened.ensure_quickstart_project().await?;
    if let Some(path) = &args.encryption_key_file {
        // Read now so a bad key fails at start, not at the first console login.
        wisp_config::EncryptionKey::from_file(path)
            .map_err(|e| CliError::Usage(format!("encryption key: {e}")))?;
    }

    let verifier = Arc::new(wisp_auth::PipedVerifier::new(opened.key_source()));
    let piped_api = Arc::new(wisp_services::piped::PipedApi::new(
        opened.stores.clone(),
        opened.config.spec.address.clone().unwrap_or_default(),
    ));

    let listener = TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let local = listener.local_addr().context("listener address")?;
    // Tests and scripts wait for this line to know the port (useful with --addr :0).
    println!("wisp listening on {local}");
    tracing::info!(addr = %local, data = %opened.describe(), "wisp serve ready");

    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    Server::builder()
        .accept_http1(true)
        .layer(EdgeLayer)
        .layer(GrpcWebLayer::new())
        .add_service(PipedGrpc::new(piped_api, verifier).into_server())
        .serve_with_incoming_shutdown(incoming, shutdown_signal())
        .await
        .context("server failed")?;
    tracing::info!("wisp serve stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
