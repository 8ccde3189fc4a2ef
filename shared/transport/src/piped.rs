//! PipedService over gRPC: authenticate the `PIPED-TOKEN`, call `PipedApi`, map errors.

use std::sync::Arc;

use async_trait::async_trait;
use tonic::{Request, Response, Status};
use wisp_auth::{PipedCaller, PipedKeySource, PipedVerifier};
use wisp_proto::pipedservice::piped_service_server::{PipedService, PipedServiceServer};
use wisp_proto::pipedservice::*;
use wisp_services::piped::PipedApi;

use crate::gate::{Admit, DecodeBudget, Gate, Principal};
use crate::status::{from_auth_error, from_service_error};

/// Largest message a piped may receive (live-state snapshots can be big); what it may
/// send is bounded per RPC by [`crate::limits::PIPED`].
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The served PipedService: the gate, then tonic.
pub type PipedServer<S> = Gate<PipedAdmit<S>, PipedServiceServer<PipedGrpc<S>>>;

/// Admits pipeds by their `PIPED-TOKEN`.
pub struct PipedAdmit<S: PipedKeySource> {
    verifier: Arc<PipedVerifier<S>>,
}

impl<S: PipedKeySource> std::fmt::Debug for PipedAdmit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipedAdmit").finish_non_exhaustive()
    }
}

#[async_trait]
impl<S: PipedKeySource + 'static> Admit for PipedAdmit<S> {
    type Caller = PipedCaller;
    async fn admit(
        &self,
        _method: &str,
        headers: &http::HeaderMap,
        source: Option<std::net::IpAddr>,
    ) -> Result<PipedCaller, Status> {
        let header = headers.get("authorization").and_then(|v| v.to_str().ok());
        let token = wisp_auth::credentials::parse_piped_token(header).map_err(from_auth_error)?;
        self.verifier
            .verify_from(&token, source)
            .await
            .map_err(from_auth_error)
    }
    fn principal(caller: &PipedCaller) -> Principal {
        Principal {
            project: caller.project_id.clone(),
            id: format!("piped:{}", caller.piped_id),
        }
    }
}

pub struct PipedGrpc<S: PipedKeySource> {
    api: Arc<PipedApi>,
    verifier: Arc<PipedVerifier<S>>,
}

impl<S: PipedKeySource> std::fmt::Debug for PipedGrpc<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipedGrpc").finish_non_exhaustive()
    }
}

impl<S: PipedKeySource + 'static> PipedGrpc<S> {
    pub fn new(api: Arc<PipedApi>, verifier: Arc<PipedVerifier<S>>) -> Self {
        PipedGrpc { api, verifier }
    }

    /// The service behind its gate, ready to add to a router. The gate decompresses
    /// (`wisp bridge` gzips large requests: an ALB passes at most 1 MB to a Lambda).
    pub fn into_server(self) -> PipedServer<S> {
        let audit = self.api.stores().audit.clone();
        let admit = Arc::new(PipedAdmit {
            verifier: self.verifier.clone(),
        });
        let server = PipedServiceServer::new(self)
            .max_decoding_message_size(crate::limits::PIPED.max())
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Gate::new(
            admit,
            &crate::limits::PIPED,
            DecodeBudget::process(),
            server,
        )
        .with_audit(audit)
    }
}

macro_rules! piped_rpcs {
    ($($method:ident($req:ty) -> $resp:ty;)*) => {
        #[tonic::async_trait]
        impl<S: PipedKeySource + 'static> PipedService for PipedGrpc<S> {
            $(
                async fn $method(&self, request: Request<$req>) -> Result<Response<$resp>, Status> {
                    let caller: PipedCaller = crate::gate::admitted(&request)?;
                    if let Some(id) = request.get_ref().deployment_id().filter(|id| !id.is_empty()) {
                        // On the gate's `rpc` span: one deployment's calls found together,
                        // and beside the piped's own spans of it.
                        tracing::Span::current().record("deployment_id", id);
                    }
                    self.api
                        .$method(&caller, request.into_inner())
                        .await
                        .map(Response::new)
                        .map_err(from_service_error)
                }
            )*
        }
    };
}

piped_rpcs! {
    report_stat(ReportStatRequest) -> ReportStatResponse;
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
    list_unhandled_commands(ListUnhandledCommandsRequest) -> ListUnhandledCommandsResponse;
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

/// The deployment a request names, if any: recorded on the call's span.
trait NamesDeployment {
    fn deployment_id(&self) -> Option<&str> {
        None
    }
}

macro_rules! names_deployment {
    ($($req:ty => $field:ident,)*) => {
        $(impl NamesDeployment for $req {
            fn deployment_id(&self) -> Option<&str> {
                Some(&self.$field)
            }
        })*
    };
}

macro_rules! names_no_deployment {
    ($($req:ty,)*) => {
        $(impl NamesDeployment for $req {})*
    };
}

names_deployment! {
    GetDeploymentRequest => id,
    ReportDeploymentPlannedRequest => deployment_id,
    ReportDeploymentStatusChangedRequest => deployment_id,
    ReportDeploymentCompletedRequest => deployment_id,
    SaveDeploymentMetadataRequest => deployment_id,
    SaveDeploymentSharedMetadataRequest => deployment_id,
    SaveDeploymentPluginMetadataRequest => deployment_id,
    SaveStageMetadataRequest => deployment_id,
    ReportStageLogsRequest => deployment_id,
    ReportStageLogsFromLastCheckpointRequest => deployment_id,
    ReportStageStatusChangedRequest => deployment_id,
    InChainDeploymentPlannableRequest => deployment_id,
}

impl NamesDeployment for CreateDeploymentRequest {
    fn deployment_id(&self) -> Option<&str> {
        self.deployment.as_ref().map(|d| d.id.as_str())
    }
}

names_no_deployment! {
    ReportStatRequest,
    ReportPipedMetaRequest,
    ListApplicationsRequest,
    ReportApplicationSyncStateRequest,
    ReportApplicationDeployingStatusRequest,
    ReportApplicationMostRecentDeploymentRequest,
    GetApplicationMostRecentDeploymentRequest,
    ListNotCompletedDeploymentsRequest,
    ListUnhandledCommandsRequest,
    ReportCommandHandledRequest,
    ReportApplicationLiveStateRequest,
    ReportApplicationLiveStateEventsRequest,
    GetLatestEventRequest,
    ListEventsRequest,
    ReportEventStatusesRequest,
    GetLatestAnalysisResultRequest,
    PutLatestAnalysisResultRequest,
    GetDesiredVersionRequest,
    UpdateApplicationConfigurationsRequest,
    ReportUnregisteredApplicationConfigurationsRequest,
    CreateDeploymentChainRequest,
    GetApplicationSharedObjectRequest,
    PutApplicationSharedObjectRequest,
}
