//! WebService: chains.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn list_deployment_chains(
        &self,
        _caller: &Authorized,
        _req: ListDeploymentChainsRequest,
    ) -> Result<ListDeploymentChainsResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListDeploymentChains is not implemented yet".into(),
        ))
    }

    pub async fn get_deployment_chain(
        &self,
        _caller: &Authorized,
        _req: GetDeploymentChainRequest,
    ) -> Result<GetDeploymentChainResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetDeploymentChain is not implemented yet".into(),
        ))
    }
}
