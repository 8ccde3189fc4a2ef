//! WebService over gRPC and gRPC-web: read the `token` cookie, verify the session JWT,
//! authorize the RPC (RBAC), call `WebApi`, map errors.

use std::sync::Arc;

use async_trait::async_trait;
use tonic::{Request, Response, Status};
use wisp_auth::{SessionSigner, WebCaller};
use wisp_proto::webservice::web_service_server::{WebService, WebServiceServer};
use wisp_proto::webservice::*;
use wisp_services::web::{Authorized, WebApi};

use crate::gate::{Admit, DecodeBudget, Gate, Principal};
use crate::status::{from_auth_error, from_service_error};

/// Largest message the console may receive (live states and stage logs); what it may
/// send is bounded per RPC by [`crate::limits::WEB`].
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The served WebService: the gate, then tonic.
pub type WebServer = Gate<WebAdmit, WebServiceServer<WebGrpc>>;

/// Admits signed-in users whose roles allow the RPC.
pub struct WebAdmit {
    web: Arc<WebApi>,
    signer: SessionSigner,
}

impl std::fmt::Debug for WebAdmit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebAdmit").finish_non_exhaustive()
    }
}

#[async_trait]
impl Admit for WebAdmit {
    type Caller = Authorized;
    async fn admit(
        &self,
        method: &str,
        headers: &http::HeaderMap,
        _source: Option<std::net::IpAddr>,
    ) -> Result<Authorized, Status> {
        let cookies = headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok());
        // The session the `token` cookie names, allowed to call `method`.
        let token = wisp_auth::parse_cookie_token(cookies).map_err(from_auth_error)?;
        let caller: WebCaller = self
            .signer
            .verify(token.as_str())
            .map_err(from_auth_error)?;
        self.web
            .authorize(&caller, method)
            .await
            .map_err(from_service_error)
    }
    fn principal(caller: &Authorized) -> Principal {
        let caller = caller.caller();
        Principal {
            project: caller.project_id.clone(),
            id: format!("user:{}", caller.subject),
        }
    }
}

pub struct WebGrpc {
    web: Arc<WebApi>,
    signer: SessionSigner,
}

impl std::fmt::Debug for WebGrpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebGrpc").finish_non_exhaustive()
    }
}

impl WebGrpc {
    pub fn new(web: Arc<WebApi>, signer: SessionSigner) -> Self {
        WebGrpc { web, signer }
    }

    /// The service behind its gate, ready to add to a router.
    pub fn into_server(self) -> WebServer {
        let audit = self.web.stores().audit.clone();
        let admit = Arc::new(WebAdmit {
            web: self.web.clone(),
            signer: self.signer.clone(),
        });
        let server = WebServiceServer::new(self)
            .max_decoding_message_size(crate::limits::WEB.max())
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Gate::new(admit, &crate::limits::WEB, DecodeBudget::process(), server).with_audit(audit)
    }
}

macro_rules! web_rpcs {
    ($($method:ident($name:literal, $req:ty) -> $resp:ty;)*) => {
        #[tonic::async_trait]
        impl WebService for WebGrpc {
            $(
                async fn $method(&self, request: Request<$req>) -> Result<Response<$resp>, Status> {
                    let authorized: Authorized = crate::gate::admitted(&request)?;
                    self.web
                        .$method(&authorized, request.into_inner())
                        .await
                        .map(Response::new)
                        .map_err(from_service_error)
                }
            )*
        }
    };
}

web_rpcs! {
    register_piped("RegisterPiped", RegisterPipedRequest) -> RegisterPipedResponse;
    update_piped("UpdatePiped", UpdatePipedRequest) -> UpdatePipedResponse;
    recreate_piped_key("RecreatePipedKey", RecreatePipedKeyRequest) -> RecreatePipedKeyResponse;
    delete_old_piped_keys("DeleteOldPipedKeys", DeleteOldPipedKeysRequest) -> DeleteOldPipedKeysResponse;
    enable_piped("EnablePiped", EnablePipedRequest) -> EnablePipedResponse;
    disable_piped("DisablePiped", DisablePipedRequest) -> DisablePipedResponse;
    list_pipeds("ListPipeds", ListPipedsRequest) -> ListPipedsResponse;
    get_piped("GetPiped", GetPipedRequest) -> GetPipedResponse;
    update_piped_desired_version("UpdatePipedDesiredVersion", UpdatePipedDesiredVersionRequest) -> UpdatePipedDesiredVersionResponse;
    restart_piped("RestartPiped", RestartPipedRequest) -> RestartPipedResponse;
    list_released_versions("ListReleasedVersions", ListReleasedVersionsRequest) -> ListReleasedVersionsResponse;
    list_deprecated_notes("ListDeprecatedNotes", ListDeprecatedNotesRequest) -> ListDeprecatedNotesResponse;
    add_application("AddApplication", AddApplicationRequest) -> AddApplicationResponse;
    update_application("UpdateApplication", UpdateApplicationRequest) -> UpdateApplicationResponse;
    enable_application("EnableApplication", EnableApplicationRequest) -> EnableApplicationResponse;
    disable_application("DisableApplication", DisableApplicationRequest) -> DisableApplicationResponse;
    delete_application("DeleteApplication", DeleteApplicationRequest) -> DeleteApplicationResponse;
    list_applications("ListApplications", ListApplicationsRequest) -> ListApplicationsResponse;
    sync_application("SyncApplication", SyncApplicationRequest) -> SyncApplicationResponse;
    get_application("GetApplication", GetApplicationRequest) -> GetApplicationResponse;
    generate_application_sealed_secret("GenerateApplicationSealedSecret", GenerateApplicationSealedSecretRequest) -> GenerateApplicationSealedSecretResponse;
    list_unregistered_applications("ListUnregisteredApplications", ListUnregisteredApplicationsRequest) -> ListUnregisteredApplicationsResponse;
    list_deployments("ListDeployments", ListDeploymentsRequest) -> ListDeploymentsResponse;
    get_deployment("GetDeployment", GetDeploymentRequest) -> GetDeploymentResponse;
    get_stage_log("GetStageLog", GetStageLogRequest) -> GetStageLogResponse;
    cancel_deployment("CancelDeployment", CancelDeploymentRequest) -> CancelDeploymentResponse;
    skip_stage("SkipStage", SkipStageRequest) -> SkipStageResponse;
    approve_stage("ApproveStage", ApproveStageRequest) -> ApproveStageResponse;
    list_deployment_traces("ListDeploymentTraces", ListDeploymentTracesRequest) -> ListDeploymentTracesResponse;
    get_application_live_state("GetApplicationLiveState", GetApplicationLiveStateRequest) -> GetApplicationLiveStateResponse;
    get_project("GetProject", GetProjectRequest) -> GetProjectResponse;
    update_project_static_admin("UpdateProjectStaticAdmin", UpdateProjectStaticAdminRequest) -> UpdateProjectStaticAdminResponse;
    enable_static_admin("EnableStaticAdmin", EnableStaticAdminRequest) -> EnableStaticAdminResponse;
    disable_static_admin("DisableStaticAdmin", DisableStaticAdminRequest) -> DisableStaticAdminResponse;
    update_project_sso_config("UpdateProjectSSOConfig", UpdateProjectSsoConfigRequest) -> UpdateProjectSsoConfigResponse;
    update_project_rbac_config("UpdateProjectRBACConfig", UpdateProjectRbacConfigRequest) -> UpdateProjectRbacConfigResponse;
    get_me("GetMe", GetMeRequest) -> GetMeResponse;
    add_project_rbac_role("AddProjectRBACRole", AddProjectRbacRoleRequest) -> AddProjectRbacRoleResponse;
    update_project_rbac_role("UpdateProjectRBACRole", UpdateProjectRbacRoleRequest) -> UpdateProjectRbacRoleResponse;
    delete_project_rbac_role("DeleteProjectRBACRole", DeleteProjectRbacRoleRequest) -> DeleteProjectRbacRoleResponse;
    add_project_user_group("AddProjectUserGroup", AddProjectUserGroupRequest) -> AddProjectUserGroupResponse;
    delete_project_user_group("DeleteProjectUserGroup", DeleteProjectUserGroupRequest) -> DeleteProjectUserGroupResponse;
    get_command("GetCommand", GetCommandRequest) -> GetCommandResponse;
    generate_api_key("GenerateAPIKey", GenerateApiKeyRequest) -> GenerateApiKeyResponse;
    disable_api_key("DisableAPIKey", DisableApiKeyRequest) -> DisableApiKeyResponse;
    list_api_keys("ListAPIKeys", ListApiKeysRequest) -> ListApiKeysResponse;
    get_insight_data("GetInsightData", GetInsightDataRequest) -> GetInsightDataResponse;
    get_insight_application_count("GetInsightApplicationCount", GetInsightApplicationCountRequest) -> GetInsightApplicationCountResponse;
    list_deployment_chains("ListDeploymentChains", ListDeploymentChainsRequest) -> ListDeploymentChainsResponse;
    get_deployment_chain("GetDeploymentChain", GetDeploymentChainRequest) -> GetDeploymentChainResponse;
    list_events("ListEvents", ListEventsRequest) -> ListEventsResponse;
}
