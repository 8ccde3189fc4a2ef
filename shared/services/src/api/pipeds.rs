//! Pipeds: read one, register one (its key is returned once), rename, enable, disable.

use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::api_key::Role;

use super::{ApiApi, ApiKeyCaller, check_project, require};
use crate::error::ServiceError;
use crate::ops::pipeds as ops;

impl ApiApi {
    /// A piped of the project, its key hashes redacted.
    pub async fn get_piped(
        &self,
        caller: &ApiKeyCaller,
        req: GetPipedRequest,
    ) -> Result<GetPipedResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let piped = ops::get_piped(&self.stores.pipeds, &req.piped_id).await?;
        check_project(caller, &piped.project_id, "piped")?;
        Ok(GetPipedResponse { piped: Some(piped) })
    }

    /// Creates a piped with a fresh key (created by the API key's name) and returns the
    /// key, which is stored only as a bcrypt hash.
    pub async fn register_piped(
        &self,
        caller: &ApiKeyCaller,
        req: RegisterPipedRequest,
    ) -> Result<RegisterPipedResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let (piped, key) = ops::register_piped(
            &self.stores.pipeds,
            &caller.project_id,
            req.name,
            req.desc,
            &caller.name,
        )
        .await?;
        Ok(RegisterPipedResponse { id: piped.id, key })
    }

    pub async fn update_piped(
        &self,
        caller: &ApiKeyCaller,
        req: UpdatePipedRequest,
    ) -> Result<UpdatePipedResponse, ServiceError> {
        req.validate()?;
        self.owned_piped(caller, &req.piped_id).await?;
        ops::update_piped(
            &self.stores.pipeds,
            &caller.project_id,
            &req.piped_id,
            &req.name,
            &req.desc,
        )
        .await?;
        Ok(UpdatePipedResponse {})
    }

    /// Enables a piped; its credentials work again.
    pub async fn enable_piped(
        &self,
        caller: &ApiKeyCaller,
        req: EnablePipedRequest,
    ) -> Result<EnablePipedResponse, ServiceError> {
        req.validate()?;
        self.owned_piped(caller, &req.piped_id).await?;
        ops::set_piped_disabled(&self.stores, &caller.project_id, &req.piped_id, false).await?;
        Ok(EnablePipedResponse {})
    }

    /// Disables a piped; its credentials stop working once the piped verifiers' caches
    /// expire (at most `wisp_auth::VERIFIED_TTL`).
    pub async fn disable_piped(
        &self,
        caller: &ApiKeyCaller,
        req: DisablePipedRequest,
    ) -> Result<DisablePipedResponse, ServiceError> {
        req.validate()?;
        self.owned_piped(caller, &req.piped_id).await?;
        ops::set_piped_disabled(&self.stores, &caller.project_id, &req.piped_id, true).await?;
        Ok(DisablePipedResponse {})
    }

    /// Upstream's `updatePiped` checks: READ_WRITE, the piped must exist (`NotFound`) and
    /// be in the key's project (`PermissionDenied`).
    async fn owned_piped(&self, caller: &ApiKeyCaller, piped_id: &str) -> Result<(), ServiceError> {
        require(caller, Role::ReadWrite)?;
        let piped = self.piped(piped_id).await?;
        if piped.project_id != caller.project_id {
            return Err(ServiceError::PermissionDenied(
                "Requested piped doesn't belong to your project".into(),
            ));
        }
        Ok(())
    }
}
