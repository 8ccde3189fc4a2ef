//! The two servers under load, both bound to 127.0.0.1:0 and served by the server
//! builder `wisp serve` uses (`wisp_app::server`): its connection bounds, timeouts,
//! stream caps, HTTP/2 keepalive, the process's in-flight bound and its layers (edge,
//! console, gRPC-web), with `wisp serve`'s defaults.
//!
//! * [`start_wisp`]: the real PipedService (`PipedGrpc` over `PipedApi` and a
//!   `PipedVerifier` on `StoreKeySource`), routed beside the APIService as `wisp serve`
//!   routes it, on the embedded stores in a temporary directory;
//! * [`start_noop`]: the same trait, answering ListUnhandledCommands and ReportStat with
//!   empty responses at once (no auth, no store) and everything else `Unimplemented`,
//!   behind the same builder and console layer.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::oneshot;
use tonic::service::Routes;
use tonic::{Request, Response, Status};
use wisp_app::ConsoleOptions;
use wisp_app::server::{Server, ServerError, ServerOptions};
use wisp_auth::{CachePolicy, PipedToken, PipedVerifier};
use wisp_console::Console;
use wisp_proto::model;
use wisp_proto::pipedservice::piped_service_server::{PipedService, PipedServiceServer};
use wisp_proto::pipedservice::*;
use wisp_services::auth_source::StoreKeySource;
use wisp_transport::piped::MAX_MESSAGE_BYTES;

pub const PROJECT_ID: &str = "bench";
/// Signs the console's sessions (the console layer is served, as in `wisp serve`).
const KEY: &[u8] = b"poll-bench-key-poll-bench-key-poll-bench-key";

/// A server running on the server runtime until [`RunningServer::stop`].
pub struct RunningServer {
    pub addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ServerError>>,
}

impl RunningServer {
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(());
        match tokio::time::timeout(Duration::from_secs(15), self.task).await {
            Ok(joined) => joined.context("server task")?.context("server failed"),
            Err(_) => anyhow::bail!("server did not stop within 15 s"),
        }
    }
}

/// Binds 127.0.0.1:0 and serves `routes` with `wisp serve`'s builder and defaults. Must
/// run on the server runtime (the accept loop and every connection are spawned there).
async fn serve(routes: Routes, console: Arc<Console>) -> anyhow::Result<RunningServer> {
    let server = Server::bind(
        ([127, 0, 0, 1], 0).into(),
        ServerOptions {
            // Callers back to back measure the server at saturation, far past the call rate
            // a real piped or console user makes: the rates are raised (still checked).
            max_call_rate: 1_000_000,
            max_project_call_rate: 1_000_000,
            ..ServerOptions::default()
        },
    )
    .await
    .context("bind 127.0.0.1:0")?;
    let addr = server.local_addr();
    let (shutdown, stop) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run_until(routes, console, async {
        let _ = stop.await;
    }));
    Ok(RunningServer {
        addr,
        shutdown,
        task,
    })
}

/// A registered piped, as the piped itself knows it.
#[derive(Clone)]
pub struct PipedIdentity {
    pub token: PipedToken,
}

pub struct Wisp {
    pub server: RunningServer,
    /// The console the server serves (the no-op server is given the same).
    pub console: Arc<Console>,
    pub verifier: Arc<PipedVerifier<StoreKeySource>>,
    pub pipeds: Vec<PipedIdentity>,
    /// Wall time spent registering the project and the pipeds.
    pub register_time: Duration,
}

/// Opens the embedded stores in `dir` (as `wisp serve --data-dir dir`), registers project
/// [`PROJECT_ID`] and `pipeds` pipeds through the stores (as `wisp piped add` does), and
/// starts the real server.
pub async fn start_wisp(
    dir: &Path,
    pipeds: usize,
    verified_ttl: Option<Duration>,
) -> anyhow::Result<Wisp> {
    // The stores `wisp serve --data-dir dir` opens, by the same opener.
    let config = wisp_config::Config::default_embedded(dir);
    let stores = wisp_app::stores::open(&config, dir)
        .await
        .context("open the embedded stores")?;

    let started = Instant::now();
    let admin_hash = wisp_auth::hash_secret("bench-admin").context("hash admin password")?;
    stores
        .projects
        .create(model::Project {
            id: PROJECT_ID.to_string(),
            desc: "poll benchmark".to_string(),
            static_admin: Some(model::ProjectStaticUser {
                username: "bench-admin".to_string(),
                password_hash: admin_hash,
            }),
            ..Default::default()
        })
        .await
        .context("create the project")?;

    // Registered as `wisp piped add` registers them (the same domain operation).
    let mut identities = Vec::with_capacity(pipeds);
    for i in 0..pipeds {
        let (piped, key) = wisp_services::ops::pipeds::register_piped(
            &stores.pipeds,
            PROJECT_ID,
            format!("bench-{i:04}"),
            String::new(),
            "poll-bench",
        )
        .await
        .map_err(|e| anyhow::anyhow!("register piped {i}: {e}"))?;
        identities.push(PipedIdentity {
            token: PipedToken::new(PROJECT_ID, piped.id, key),
        });
    }
    let register_time = started.elapsed();

    // The services as `wisp serve` builds them: no config projects, the production cache
    // policy unless the bench overrides the TTL.
    let key = wisp_config::EncryptionKey::from_bytes(KEY.to_vec()).context("session key")?;
    let app = wisp_app::App::from_parts(config, false, stores, Some(key));
    let verifier = match verified_ttl {
        None => app.piped_verifier(),
        Some(ttl) => Arc::new(PipedVerifier::with_policy(
            app.key_source(),
            CachePolicy::default().verified_ttl(ttl),
        )),
    };
    // Both services, as `wisp serve` routes them (only PipedService is under load).
    let routes = Routes::new(app.piped_grpc_with(verifier.clone()).into_server())
        .add_service(app.api_grpc().into_server());
    let console = Arc::new(
        app.console(app.web_api(), ConsoleOptions::default())
            .context("the console")?,
    );
    let server = serve(routes, console.clone()).await?;
    Ok(Wisp {
        server,
        console,
        verifier,
        pipeds: identities,
        register_time,
    })
}

/// Starts the no-op server, serving `console` as the Wisp server does.
pub async fn start_noop(console: Arc<Console>) -> anyhow::Result<RunningServer> {
    serve(
        Routes::new(
            PipedServiceServer::new(NoopPiped)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        ),
        console,
    )
    .await
}

/// The baseline: what tonic, the layers and the socket cost with no work behind them.
pub struct NoopPiped;

// `#[async_trait]` must see every method, so the macro writes the whole impl.
macro_rules! noop_piped_service {
    ($($method:ident($req:ty) -> $resp:ty;)*) => {
        #[tonic::async_trait]
        impl PipedService for NoopPiped {
            async fn list_unhandled_commands(
                &self,
                _request: Request<ListUnhandledCommandsRequest>,
            ) -> Result<Response<ListUnhandledCommandsResponse>, Status> {
                Ok(Response::new(ListUnhandledCommandsResponse::default()))
            }

            async fn report_stat(
                &self,
                _request: Request<ReportStatRequest>,
            ) -> Result<Response<ReportStatResponse>, Status> {
                Ok(Response::new(ReportStatResponse::default()))
            }

            $(
                async fn $method(&self, _request: Request<$req>) -> Result<Response<$resp>, Status> {
                    Err(Status::unimplemented(concat!(stringify!($method), " is not served by the no-op server")))
                }
            )*
        }
    };
}

noop_piped_service! {
    report_piped_meta(ReportPipedMetaRequest) -> ReportPipedMetaResponse;
    list_applications(ListApplicationsRequest) -> ListApplicationsResponse;
    report_application_sync_state(ReportApplicationSyncStateRequest) -> ReportApplicationSyncStateResponse;
    report_application_deploying_status(ReportApplicationDeployingStatusRequest) -> ReportApplicationDeployingStatusResponse;
    report_application_most_recent_deployment(ReportApplicationMostRecentDeploymentRequest) -> ReportApplicationMostRecentDeploymentResponse;
    get_application_most_recent_deployment(GetApplicationMostRecentDeploymentRequest) -> GetApplicationMostRecentDeploymentResponse;
    get_deployment(GetDeploymentRequest) -> GetDeploymentResponse;
    list_not_completed_deployments(ListNotCompletedDeploymentsRequest) -> ListNotCompletedDeploymentsResponse;
    create_deployment(CreateDeploymentRequest) -> CreateDeploymentResponse;
    report_deployment_planned(ReportDeploymentPlannedRequest) -> ReportDeploymentPlannedResponse;
    report_deployment_status_changed(ReportDeploymentStatusChangedRequest) -> ReportDeploymentStatusChangedResponse;
    report_deployment_completed(ReportDeploymentCompletedRequest) -> ReportDeploymentCompletedResponse;
    save_deployment_metadata(SaveDeploymentMetadataRequest) -> SaveDeploymentMetadataResponse;
    save_deployment_shared_metadata(SaveDeploymentSharedMetadataRequest) -> SaveDeploymentSharedMetadataResponse;
    save_deployment_plugin_metadata(SaveDeploymentPluginMetadataRequest) -> SaveDeploymentPluginMetadataResponse;
    save_stage_metadata(SaveStageMetadataRequest) -> SaveStageMetadataResponse;
    report_stage_logs(ReportStageLogsRequest) -> ReportStageLogsResponse;
    report_stage_logs_from_last_checkpoint(ReportStageLogsFromLastCheckpointRequest) -> ReportStageLogsFromLastCheckpointResponse;
    report_stage_status_changed(ReportStageStatusChangedRequest) -> ReportStageStatusChangedResponse;
    report_command_handled(ReportCommandHandledRequest) -> ReportCommandHandledResponse;
    report_application_live_state(ReportApplicationLiveStateRequest) -> ReportApplicationLiveStateResponse;
    report_application_live_state_events(ReportApplicationLiveStateEventsRequest) -> ReportApplicationLiveStateEventsResponse;
    get_latest_event(GetLatestEventRequest) -> GetLatestEventResponse;
    list_events(ListEventsRequest) -> ListEventsResponse;
    report_event_statuses(ReportEventStatusesRequest) -> ReportEventStatusesResponse;
    get_latest_analysis_result(GetLatestAnalysisResultRequest) -> GetLatestAnalysisResultResponse;
    put_latest_analysis_result(PutLatestAnalysisResultRequest) -> PutLatestAnalysisResultResponse;
    get_desired_version(GetDesiredVersionRequest) -> GetDesiredVersionResponse;
    update_application_configurations(UpdateApplicationConfigurationsRequest) -> UpdateApplicationConfigurationsResponse;
    report_unregistered_application_configurations(ReportUnregisteredApplicationConfigurationsRequest) -> ReportUnregisteredApplicationConfigurationsResponse;
    create_deployment_chain(CreateDeploymentChainRequest) -> CreateDeploymentChainResponse;
    in_chain_deployment_plannable(InChainDeploymentPlannableRequest) -> InChainDeploymentPlannableResponse;
    get_application_shared_object(GetApplicationSharedObjectRequest) -> GetApplicationSharedObjectResponse;
    put_application_shared_object(PutApplicationSharedObjectRequest) -> PutApplicationSharedObjectResponse;
}
