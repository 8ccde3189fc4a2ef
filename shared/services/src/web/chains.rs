//! WebService: deployment chains.

use wisp_proto::webservice::*;
use wisp_store::collection::{ListOptions, sort_ts};
use wisp_store::entities::slot;

use super::deployments::page_size;
use super::{Authorized, WebApi, required};
use crate::error::ServiceError;

impl WebApi {
    /// The project's chains, most recently updated first.
    pub async fn list_deployment_chains(
        &self,
        caller: &Authorized,
        req: ListDeploymentChainsRequest,
    ) -> Result<ListDeploymentChainsResponse, ServiceError> {
        let mut opts = ListOptions::new(slot::CHAIN_BY_PROJECT, caller.project_id().to_string());
        if req.page_min_updated_at > 0 {
            opts.sk_from = Some(sort_ts(req.page_min_updated_at));
        }
        opts.descending = true;
        opts.limit = page_size(req.page_size);
        opts.cursor = req.cursor.clone();
        let page = self
            .stores
            .deployment_chains
            .list(opts)
            .await
            .map_err(|e| ServiceError::store(e, "list deployment chains"))?;
        Ok(ListDeploymentChainsResponse {
            deployment_chains: page.items,
            cursor: page.cursor,
        })
    }

    pub async fn get_deployment_chain(
        &self,
        caller: &Authorized,
        req: GetDeploymentChainRequest,
    ) -> Result<GetDeploymentChainResponse, ServiceError> {
        required("deployment_chain_id", &req.deployment_chain_id)?;
        let chain = self
            .owned(
                &self.stores.deployment_chains,
                &req.deployment_chain_id,
                caller,
                "deployment chain",
            )
            .await?;
        Ok(GetDeploymentChainResponse {
            deployment_chain: Some(chain),
        })
    }
}
