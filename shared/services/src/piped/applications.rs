//! Applications as a piped sees them: its list, sync state, deploying flag, most recent
//! deployments, names/labels from git, and the unregistered-app suggestions.

use wisp_model::validate::Validate;
use wisp_proto::model::DeploymentStatus;
use wisp_proto::pipedservice::*;
use wisp_store::entities::{pk, slot};

use super::{PipedApi, PipedCaller};
use crate::error::ServiceError;

impl PipedApi {
    /// The piped's enabled applications (one indexed read; no pagination, as upstream).
    pub async fn list_applications(
        &self,
        caller: &PipedCaller,
        req: ListApplicationsRequest,
    ) -> Result<ListApplicationsResponse, ServiceError> {
        req.validate()?;
        let applications = self
            .stores
            .applications
            .list_polled(
                slot::APPLICATION_ENABLED_BY_PIPED,
                pk::project_piped(&caller.project_id, &caller.piped_id),
            )
            .await
            .map_err(|e| ServiceError::store(e, "fetch applications"))?;
        Ok(ListApplicationsResponse { applications })
    }

    pub async fn report_application_sync_state(
        &self,
        caller: &PipedCaller,
        req: ReportApplicationSyncStateRequest,
    ) -> Result<ReportApplicationSyncStateResponse, ServiceError> {
        req.validate()?;
        let what = format!("update sync state of application {}", req.application_id);
        self.update_application(caller, &req.application_id, &what, |app| {
            app.sync_state = req.state.clone();
            Ok(())
        })
        .await?;
        Ok(ReportApplicationSyncStateResponse {})
    }

    pub async fn report_application_deploying_status(
        &self,
        caller: &PipedCaller,
        req: ReportApplicationDeployingStatusRequest,
    ) -> Result<ReportApplicationDeployingStatusResponse, ServiceError> {
        req.validate()?;
        let what = format!(
            "update deploying status of application {}",
            req.application_id
        );
        self.update_application(caller, &req.application_id, &what, |app| {
            app.deploying = req.deploying;
            Ok(())
        })
        .await?;
        Ok(ReportApplicationDeployingStatusResponse {})
    }

    /// SUCCESS sets the most recently successful deployment, PENDING the most recently
    /// triggered one; other statuses change nothing (as upstream).
    pub async fn report_application_most_recent_deployment(
        &self,
        caller: &PipedCaller,
        req: ReportApplicationMostRecentDeploymentRequest,
    ) -> Result<ReportApplicationMostRecentDeploymentResponse, ServiceError> {
        req.validate()?;
        let what = format!(
            "update deployment reference of application {}",
            req.application_id
        );
        let status = req.status;
        self.update_application(caller, &req.application_id, &what, |app| {
            if status == DeploymentStatus::DeploymentSuccess as i32 {
                app.most_recently_successful_deployment = req.deployment.clone();
            } else if status == DeploymentStatus::DeploymentPending as i32 {
                app.most_recently_triggered_deployment = req.deployment.clone();
            }
            Ok(())
        })
        .await?;
        Ok(ReportApplicationMostRecentDeploymentResponse {})
    }

    /// The reference stored for SUCCESS or PENDING; anything else, or nothing stored, is
    /// `NotFound "deployment is not found"` (pipeds rely on that code).
    pub async fn get_application_most_recent_deployment(
        &self,
        caller: &PipedCaller,
        req: GetApplicationMostRecentDeploymentRequest,
    ) -> Result<GetApplicationMostRecentDeploymentResponse, ServiceError> {
        req.validate()?;
        let app = self.owned_application(caller, &req.application_id).await?;
        let deployment = if req.status == DeploymentStatus::DeploymentSuccess as i32 {
            app.most_recently_successful_deployment
        } else if req.status == DeploymentStatus::DeploymentPending as i32 {
            app.most_recently_triggered_deployment
        } else {
            None
        };
        match deployment {
            Some(deployment) => Ok(GetApplicationMostRecentDeploymentResponse {
                deployment: Some(deployment),
            }),
            None => Err(ServiceError::NotFound("deployment is not found".into())),
        }
    }

    /// Name, description and labels from the application configs in git. Every
    /// application is checked first, so that a bad request changes nothing.
    pub async fn update_application_configurations(
        &self,
        caller: &PipedCaller,
        req: UpdateApplicationConfigurationsRequest,
    ) -> Result<UpdateApplicationConfigurationsResponse, ServiceError> {
        req.validate()?;
        for info in &req.applications {
            self.check_application(caller, &info.id).await?;
        }
        for info in &req.applications {
            let what = format!("update config of application {}", info.id);
            self.update_application(caller, &info.id, &what, |app| {
                app.name = info.name.clone();
                app.description = info.description.clone();
                app.labels = info.labels.clone();
                Ok(())
            })
            .await?;
        }
        Ok(UpdateApplicationConfigurationsResponse {})
    }

    /// Replaces this piped's list of application configs found in git but not registered.
    pub async fn report_unregistered_application_configurations(
        &self,
        caller: &PipedCaller,
        req: ReportUnregisteredApplicationConfigurationsRequest,
    ) -> Result<ReportUnregisteredApplicationConfigurationsResponse, ServiceError> {
        req.validate()?;
        self.stores
            .unregistered_apps
            .put(&caller.project_id, &caller.piped_id, req.applications)
            .await
            .map_err(|e| ServiceError::internal("failed to put the unregistered apps", e))?;
        Ok(ReportUnregisteredApplicationConfigurationsResponse {})
    }
}
