//! APIService over gRPC: authenticate the `API-KEY`, note its use, call `ApiApi`, map
//! errors.

use std::sync::Arc;

use async_trait::async_trait;
use tonic::{Request, Response, Status};
use wisp_auth::{ApiKeyAuthSource, ApiKeyCaller, ApiKeyVerifier};
use wisp_proto::apiservice::api_service_server::{ApiService, ApiServiceServer};
use wisp_proto::apiservice::*;
use wisp_services::api::ApiApi;

use crate::gate::{Admit, DecodeBudget, Gate, Principal};
use crate::status::{from_auth_error, from_service_error};

/// Largest message pipectl may receive (stage logs can be long); what it may send is
/// bounded per RPC by [`crate::limits::API`].
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The served APIService: the gate, then tonic.
pub type ApiServer<S> = Gate<ApiAdmit<S>, ApiServiceServer<ApiGrpc<S>>>;

/// Admits callers by their `API-KEY`.
pub struct ApiAdmit<S: ApiKeyAuthSource> {
    api: Arc<ApiApi>,
    verifier: Arc<ApiKeyVerifier<S>>,
}

impl<S: ApiKeyAuthSource> std::fmt::Debug for ApiAdmit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiAdmit").finish_non_exhaustive()
    }
}

#[async_trait]
impl<S: ApiKeyAuthSource + 'static> Admit for ApiAdmit<S> {
    type Caller = ApiKeyCaller;
    async fn admit(
        &self,
        _method: &str,
        headers: &http::HeaderMap,
        source: Option<std::net::IpAddr>,
    ) -> Result<ApiKeyCaller, Status> {
        let header = headers.get("authorization").and_then(|v| v.to_str().ok());
        authenticate(&self.api, &self.verifier, header, source).await
    }
    fn principal(caller: &ApiKeyCaller) -> Principal {
        Principal {
            project: caller.project_id.clone(),
            id: format!("api-key:{}", caller.id),
        }
    }
}

async fn authenticate<S: ApiKeyAuthSource>(
    api: &ApiApi,
    verifier: &ApiKeyVerifier<S>,
    header: Option<&str>,
    source: Option<std::net::IpAddr>,
) -> Result<ApiKeyCaller, Status> {
    let credential = wisp_auth::parse_api_key(header).map_err(from_auth_error)?;
    let caller = verifier
        .verify_from(&credential, source)
        .await
        .map_err(from_auth_error)?;
    api.record_key_use(&caller).await;
    Ok(caller)
}

pub struct ApiGrpc<S: ApiKeyAuthSource> {
    api: Arc<ApiApi>,
    verifier: Arc<ApiKeyVerifier<S>>,
}

impl<S: ApiKeyAuthSource> std::fmt::Debug for ApiGrpc<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiGrpc").finish_non_exhaustive()
    }
}

impl<S: ApiKeyAuthSource + 'static> ApiGrpc<S> {
    pub fn new(api: Arc<ApiApi>, verifier: Arc<ApiKeyVerifier<S>>) -> Self {
        ApiGrpc { api, verifier }
    }

    /// The service behind its gate, ready to add to a router. The gate decompresses
    /// (`wisp bridge` gzips large requests: an ALB passes at most 1 MB to a Lambda).
    pub fn into_server(self) -> ApiServer<S> {
        let audit = self.api.stores().audit.clone();
        let admit = Arc::new(ApiAdmit {
            api: self.api.clone(),
            verifier: self.verifier.clone(),
        });
        let server = ApiServiceServer::new(self)
            .max_decoding_message_size(crate::limits::API.max())
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Gate::new(admit, &crate::limits::API, DecodeBudget::process(), server).with_audit(audit)
    }
}

macro_rules! api_rpcs {
    ($($method:ident($req:ty) -> $resp:ty;)*) => {
        #[tonic::async_trait]
        impl<S: ApiKeyAuthSource + 'static> ApiService for ApiGrpc<S> {
            $(
                async fn $method(&self, request: Request<$req>) -> Result<Response<$resp>, Status> {
                    let caller: ApiKeyCaller = crate::gate::admitted(&request)?;
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

api_rpcs! {
    add_application(AddApplicationRequest) -> AddApplicationResponse;
    sync_application(SyncApplicationRequest) -> SyncApplicationResponse;
    get_application(GetApplicationRequest) -> GetApplicationResponse;
    list_applications(ListApplicationsRequest) -> ListApplicationsResponse;
    update_application(UpdateApplicationRequest) -> UpdateApplicationResponse;
    delete_application(DeleteApplicationRequest) -> DeleteApplicationResponse;
    enable_application(EnableApplicationRequest) -> EnableApplicationResponse;
    disable_application(DisableApplicationRequest) -> DisableApplicationResponse;
    rename_application_config_file(RenameApplicationConfigFileRequest) -> RenameApplicationConfigFileResponse;
    update_application_deploy_targets(UpdateApplicationDeployTargetsRequest) -> UpdateApplicationDeployTargetsResponse;
    get_deployment(GetDeploymentRequest) -> GetDeploymentResponse;
    list_deployments(ListDeploymentsRequest) -> ListDeploymentsResponse;
    get_command(GetCommandRequest) -> GetCommandResponse;
    get_piped(GetPipedRequest) -> GetPipedResponse;
    register_piped(RegisterPipedRequest) -> RegisterPipedResponse;
    update_piped(UpdatePipedRequest) -> UpdatePipedResponse;
    enable_piped(EnablePipedRequest) -> EnablePipedResponse;
    disable_piped(DisablePipedRequest) -> DisablePipedResponse;
    register_event(RegisterEventRequest) -> RegisterEventResponse;
    request_plan_preview(RequestPlanPreviewRequest) -> RequestPlanPreviewResponse;
    get_plan_preview_results(GetPlanPreviewResultsRequest) -> GetPlanPreviewResultsResponse;
    encrypt(EncryptRequest) -> EncryptResponse;
    list_stage_logs(ListStageLogsRequest) -> ListStageLogsResponse;
}
