//! Pipeds: read one, register one (its key is returned once), rename, enable, disable.

use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::{self, api_key::Role};

use super::{ApiApi, ApiKeyCaller, check_project, require};
use crate::error::ServiceError;
use crate::support::{hash_secret, new_id, now_unix, update_checked};

/// What replaces secrets (key hashes) in pipeds handed to clients (upstream's text).
const REDACTED: &str = "redacted";

impl ApiApi {
    /// A piped of the project, its key hashes redacted.
    pub async fn get_piped(
        &self,
        caller: &ApiKeyCaller,
        req: GetPipedRequest,
    ) -> Result<GetPipedResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let mut piped = self.piped(&req.piped_id).await?;
        check_project(caller, &piped.project_id, "piped")?;
        for key in &mut piped.keys {
            key.hash = REDACTED.to_string();
        }
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
        let key = wisp_auth::generate_piped_key();
        let hash = hash_secret(key.clone(), "piped key").await?;
        let piped = model::Piped {
            id: new_id(),
            name: req.name,
            desc: req.desc,
            project_id: caller.project_id.clone(),
            keys: vec![model::PipedKey {
                hash,
                creator: caller.name.clone(),
                created_at: now_unix(),
            }],
            ..Default::default()
        };
        let what = format!("add piped {}", piped.id);
        let piped = self
            .stores
            .pipeds
            .create(piped)
            .await
            .map_err(|e| ServiceError::store(e, &what))?;
        Ok(RegisterPipedResponse { id: piped.id, key })
    }

    pub async fn update_piped(
        &self,
        caller: &ApiKeyCaller,
        req: UpdatePipedRequest,
    ) -> Result<UpdatePipedResponse, ServiceError> {
        req.validate()?;
        self.change_piped(caller, &req.piped_id, |piped| {
            piped.name = req.name.clone();
            piped.desc = req.desc.clone();
        })
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
        self.change_piped(caller, &req.piped_id, |piped| piped.disabled = false)
            .await?;
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
        self.change_piped(caller, &req.piped_id, |piped| piped.disabled = true)
            .await?;
        Ok(DisablePipedResponse {})
    }

    /// Upstream's `updatePiped`: READ_WRITE, the piped must exist (`NotFound`) and be in
    /// the key's project (`PermissionDenied`).
    async fn change_piped<F>(
        &self,
        caller: &ApiKeyCaller,
        piped_id: &str,
        mut change: F,
    ) -> Result<(), ServiceError>
    where
        F: FnMut(&mut model::Piped) + Send,
    {
        require(caller, Role::ReadWrite)?;
        let piped = self.piped(piped_id).await?;
        if piped.project_id != caller.project_id {
            return Err(ServiceError::PermissionDenied(
                "Requested piped doesn't belong to your project".into(),
            ));
        }
        let what = format!("update piped {piped_id}");
        update_checked(
            &self.stores.pipeds,
            &caller.project_id,
            piped_id,
            &what,
            |piped| {
                change(piped);
                Ok(())
            },
        )
        .await?;
        Ok(())
    }
}
