//! The piped itself: heartbeat stats, startup metadata, the launcher's desired version.

use wisp_model::validate::Validate;
use wisp_proto::model::piped::PlatformProvider;
use wisp_proto::pipedservice::*;

use super::{PipedApi, PipedCaller, now_unix, update_checked};
use crate::error::ServiceError;

impl PipedApi {
    /// Stores the piped's OpenMetrics payload with the time it arrived (its presence
    /// decides ONLINE/OFFLINE). `report_interval` stays 0, as upstream.
    pub async fn report_stat(
        &self,
        caller: &PipedCaller,
        req: ReportStatRequest,
    ) -> Result<ReportStatResponse, ServiceError> {
        req.validate()?;
        self.stores
            .piped_stats
            .put(
                &caller.project_id,
                &caller.piped_id,
                req.piped_stats,
                now_unix(),
            )
            .await
            .map_err(|e| ServiceError::internal("failed to store the reported piped stat", e))?;
        Ok(ReportStatResponse::default())
    }

    /// Records what the piped runs with (version, config, repositories, platform
    /// providers, plugins, secret encryption) and when it started. Legacy
    /// `cloud_providers` become platform providers. Returns the piped's name and the
    /// console URL.
    pub async fn report_piped_meta(
        &self,
        caller: &PipedCaller,
        req: ReportPipedMetaRequest,
    ) -> Result<ReportPipedMetaResponse, ServiceError> {
        req.validate()?;
        let mut platform_providers: Vec<PlatformProvider> = req
            .cloud_providers
            .iter()
            .map(|cp| PlatformProvider {
                name: cp.name.clone(),
                r#type: cp.r#type.clone(),
            })
            .collect();
        platform_providers.extend(req.platform_providers.iter().cloned());
        let started_at = now_unix();
        let what = format!("update metadata of piped {}", caller.piped_id);
        let piped = update_checked(
            &self.stores.pipeds,
            &caller.project_id,
            &caller.piped_id,
            &what,
            |piped| {
                piped.cloud_providers.clear();
                piped.platform_providers = platform_providers.clone();
                piped.plugins = req.plugins.clone();
                piped.repositories = req.repositories.clone();
                piped.secret_encryption = req.secret_encryption.clone();
                piped.version = req.version.clone();
                piped.config = req.config.clone();
                piped.started_at = started_at;
                Ok(())
            },
        )
        .await?;
        Ok(ReportPipedMetaResponse {
            name: piped.name,
            web_base_url: self.web_base_url.clone(),
        })
    }

    /// The version the launcher should run (set from the console).
    pub async fn get_desired_version(
        &self,
        caller: &PipedCaller,
        req: GetDesiredVersionRequest,
    ) -> Result<GetDesiredVersionResponse, ServiceError> {
        req.validate()?;
        let piped = self
            .stores
            .pipeds
            .get(&caller.project_id, &caller.piped_id)
            .await
            .map_err(|e| ServiceError::store(e, &format!("get piped {}", caller.piped_id)))?;
        Ok(GetDesiredVersionResponse {
            version: piped.desired_version,
        })
    }
}
