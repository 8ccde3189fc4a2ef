//! Deployments: creation, the status lifecycle, stages, metadata and stage logs.

use wisp_model::status::{
    deployment_status_change_allowed, deployment_status_name, is_deployment_completed,
    stage_status_change_allowed, stage_status_name,
};
use wisp_model::validate::Validate;
use wisp_proto::model::{self, DeploymentStatus, ManualOperation};
use wisp_proto::pipedservice::*;
use wisp_store::StoreError;
use wisp_store::collection::ListOptions;
use wisp_store::entities::{pk, slot};

use super::{PipedApi, PipedCaller};
use crate::error::ServiceError;

/// Stage names the console offers a manual operation for on v0 (plugin-less) deployments.
const STAGE_ANALYSIS: &str = "ANALYSIS";
const STAGE_WAIT_APPROVAL: &str = "WAIT_APPROVAL";
/// v0 pipeds put a stage's approvers, comma separated, in this stage metadata key.
const METADATA_APPROVERS: &str = "Approvers";

impl PipedApi {
    pub async fn get_deployment(
        &self,
        caller: &PipedCaller,
        req: GetDeploymentRequest,
    ) -> Result<GetDeploymentResponse, ServiceError> {
        req.validate()?;
        let deployment = self.owned_deployment(caller, &req.id).await?;
        Ok(GetDeploymentResponse {
            deployment: Some(deployment),
        })
    }

    /// The piped's deployments that are not completed yet: one read of a sparse index that
    /// holds only open deployments. The request has no page size, so (as upstream, which
    /// sets no limit) everything comes back in one page and the cursor is always empty —
    /// Deviation: upstream hands out a non-empty cursor that its own datastore then rejects
    /// on the next call (see the reference, §12).
    pub async fn list_not_completed_deployments(
        &self,
        caller: &PipedCaller,
        req: ListNotCompletedDeploymentsRequest,
    ) -> Result<ListNotCompletedDeploymentsResponse, ServiceError> {
        req.validate()?;
        let pk = pk::project_piped(&caller.project_id, &caller.piped_id);
        let what = format!("list deployments of piped {}", caller.piped_id);
        // The first page is the whole range (no limit): answered from memory while the
        // piped's open deployments have not changed (`wisp_store::polls`).
        if req.cursor.is_empty() {
            let deployments = self
                .stores
                .deployments
                .list_polled(slot::DEPLOYMENT_OPEN_BY_PIPED, pk)
                .await
                .map_err(|e| ServiceError::store(e, &what))?;
            return Ok(ListNotCompletedDeploymentsResponse {
                deployments,
                cursor: String::new(),
            });
        }
        let mut opts = ListOptions::new(slot::DEPLOYMENT_OPEN_BY_PIPED, pk);
        opts.cursor = req.cursor;
        let page = self
            .stores
            .deployments
            .list(opts)
            .await
            .map_err(|e| ServiceError::store(e, &what))?;
        Ok(ListNotCompletedDeploymentsResponse {
            deployments: page.items,
            cursor: page.cursor,
        })
    }

    /// A piped triggers a deployment of one of its applications. The deployment must name
    /// the caller's piped; its project is the caller's.
    pub async fn create_deployment(
        &self,
        caller: &PipedCaller,
        req: CreateDeploymentRequest,
    ) -> Result<CreateDeploymentResponse, ServiceError> {
        req.validate()?;
        let Some(mut deployment) = req.deployment else {
            return Err(ServiceError::InvalidArgument(
                "invalid request: invalid CreateDeploymentRequest.deployment: value is required"
                    .into(),
            ));
        };
        self.check_application(caller, &deployment.application_id)
            .await?;
        prepare_new_deployment(caller, &mut deployment)?;
        let what = format!("add deployment {}", deployment.id);
        self.stores
            .deployments
            .create(deployment)
            .await
            .map_err(|e| ServiceError::store(e, &what))?;
        Ok(CreateDeploymentResponse {})
    }

    /// PLANNED, with the stages the planner built (they replace any previous ones).
    pub async fn report_deployment_planned(
        &self,
        caller: &PipedCaller,
        req: ReportDeploymentPlannedRequest,
    ) -> Result<ReportDeploymentPlannedResponse, ServiceError> {
        req.validate()?;
        let what = format!("update deployment {} as planned", req.deployment_id);
        let planned = DeploymentStatus::DeploymentPlanned as i32;
        self.update_deployment(caller, &req.deployment_id, &what, |d| {
            check_transition(d, planned)?;
            d.status = planned;
            d.summary = req.summary.clone();
            d.status_reason = req.status_reason.clone();
            d.trigger.get_or_insert_default().sync_strategy = req.sync_strategy;
            d.running_commit_hash = req.running_commit_hash.clone();
            d.running_config_filename = req.running_config_filename.clone();
            d.versions = req.versions.clone();
            d.stages = req.stages.clone();
            // Deviation: upstream marks manual operations for v0 stages only when a
            // deployment is created, which has no stages yet; do it where stages arrive.
            mark_v0_manual_operations(d);
            Ok(())
        })
        .await?;
        Ok(ReportDeploymentPlannedResponse {})
    }

    /// RUNNING or ROLLING_BACK (validation refuses anything else).
    pub async fn report_deployment_status_changed(
        &self,
        caller: &PipedCaller,
        req: ReportDeploymentStatusChangedRequest,
    ) -> Result<ReportDeploymentStatusChangedResponse, ServiceError> {
        req.validate()?;
        let what = format!("update status of deployment {}", req.deployment_id);
        self.update_deployment(caller, &req.deployment_id, &what, |d| {
            check_transition(d, req.status)?;
            d.status = req.status;
            d.status_reason = req.status_reason.clone();
            Ok(())
        })
        .await?;
        Ok(ReportDeploymentStatusChangedResponse {})
    }

    /// SUCCESS, FAILURE or CANCELLED, with the final status of each stage.
    pub async fn report_deployment_completed(
        &self,
        caller: &PipedCaller,
        req: ReportDeploymentCompletedRequest,
    ) -> Result<ReportDeploymentCompletedResponse, ServiceError> {
        req.validate()?;
        let what = format!("update deployment {} as completed", req.deployment_id);
        self.update_deployment(caller, &req.deployment_id, &what, |d| {
            if !is_deployment_completed(req.status) {
                return Err(ServiceError::InvalidArgument(format!(
                    "Invalid argument to {what}: deployment status {} is not a completed status",
                    deployment_status_name(req.status)
                )));
            }
            check_transition(d, req.status)?;
            d.status = req.status;
            d.status_reason = req.status_reason.clone();
            d.completed_at = req.completed_at;
            for stage in &mut d.stages {
                if let Some(status) = req.stage_statuses.get(&stage.id) {
                    stage.status = *status;
                }
            }
            Ok(())
        })
        .await?;
        Ok(ReportDeploymentCompletedResponse {})
    }

    /// Deprecated (v0): merges into `Deployment.metadata`.
    pub async fn save_deployment_metadata(
        &self,
        caller: &PipedCaller,
        req: SaveDeploymentMetadataRequest,
    ) -> Result<SaveDeploymentMetadataResponse, ServiceError> {
        req.validate()?;
        let what = format!("update metadata of deployment {}", req.deployment_id);
        self.update_deployment(caller, &req.deployment_id, &what, |d| {
            merge(&mut d.metadata, &req.metadata);
            Ok(())
        })
        .await?;
        Ok(SaveDeploymentMetadataResponse {})
    }

    /// Merges into `metadata_v2.shared` (created when absent — upstream crashes on a
    /// deployment without `metadata_v2`).
    pub async fn save_deployment_shared_metadata(
        &self,
        caller: &PipedCaller,
        req: SaveDeploymentSharedMetadataRequest,
    ) -> Result<SaveDeploymentSharedMetadataResponse, ServiceError> {
        req.validate()?;
        let what = format!("update shared metadata of deployment {}", req.deployment_id);
        self.update_deployment(caller, &req.deployment_id, &what, |d| {
            let shared = d
                .metadata_v2
                .get_or_insert_default()
                .shared
                .get_or_insert_default();
            merge(&mut shared.key_values, &req.metadata);
            Ok(())
        })
        .await?;
        Ok(SaveDeploymentSharedMetadataResponse {})
    }

    /// Merges into `metadata_v2.plugins[plugin_name]` (created when absent).
    pub async fn save_deployment_plugin_metadata(
        &self,
        caller: &PipedCaller,
        req: SaveDeploymentPluginMetadataRequest,
    ) -> Result<SaveDeploymentPluginMetadataResponse, ServiceError> {
        req.validate()?;
        let what = format!(
            "update plugin metadata of deployment {} for plugin {}",
            req.deployment_id, req.plugin_name
        );
        self.update_deployment(caller, &req.deployment_id, &what, |d| {
            let plugin = d
                .metadata_v2
                .get_or_insert_default()
                .plugins
                .entry(req.plugin_name.clone())
                .or_default();
            merge(&mut plugin.key_values, &req.metadata);
            Ok(())
        })
        .await?;
        Ok(SaveDeploymentPluginMetadataResponse {})
    }

    /// Merges into one stage's metadata; an unknown stage is InvalidArgument.
    pub async fn save_stage_metadata(
        &self,
        caller: &PipedCaller,
        req: SaveStageMetadataRequest,
    ) -> Result<SaveStageMetadataResponse, ServiceError> {
        req.validate()?;
        let what = format!("update stage metadata of deployment {}", req.deployment_id);
        self.update_deployment(caller, &req.deployment_id, &what, |d| {
            let stage = find_stage(d, &req.stage_id, &what)?;
            merge(&mut stage.metadata, &req.metadata);
            Ok(())
        })
        .await?;
        Ok(SaveStageMetadataResponse {})
    }

    /// One stage's status; `requires` replaces the stored one only when non-empty.
    pub async fn report_stage_status_changed(
        &self,
        caller: &PipedCaller,
        req: ReportStageStatusChangedRequest,
    ) -> Result<ReportStageStatusChangedResponse, ServiceError> {
        req.validate()?;
        let what = format!("update stage status of deployment {}", req.deployment_id);
        self.update_deployment(caller, &req.deployment_id, &what, |d| {
            let stage = find_stage(d, &req.stage_id, &what)?;
            // Deviation: upstream applies any status; a stage that already completed
            // differently is refused here (pipeds gate on the same table before reporting).
            if !stage_status_change_allowed(stage.status, req.status) {
                return Err(ServiceError::FailedPrecondition(format!(
                    "stage {} of deployment {} is {}; it cannot become {}",
                    stage.id,
                    req.deployment_id,
                    stage_status_name(stage.status),
                    stage_status_name(req.status)
                )));
            }
            stage.status = req.status;
            stage.status_reason = req.status_reason.clone();
            if !req.requires.is_empty() {
                stage.requires = req.requires.clone();
            }
            stage.visible = req.visible;
            stage.retried_count = req.retried_count;
            stage.completed_at = req.completed_at;
            Ok(())
        })
        .await?;
        Ok(ReportStageStatusChangedResponse {})
    }

    /// Live log blocks of a running stage (every few seconds), deduplicated by index.
    pub async fn report_stage_logs(
        &self,
        caller: &PipedCaller,
        req: ReportStageLogsRequest,
    ) -> Result<ReportStageLogsResponse, ServiceError> {
        req.validate()?;
        self.check_deployment(caller, &req.deployment_id).await?;
        self.stores
            .stage_logs
            .append(
                &req.deployment_id,
                &req.stage_id,
                req.retried_count,
                &req.blocks,
            )
            .await
            .map_err(stage_log_error)?;
        Ok(ReportStageLogsResponse {})
    }

    /// The logs since the last checkpoint, persisted; `completed` closes the stage's log.
    pub async fn report_stage_logs_from_last_checkpoint(
        &self,
        caller: &PipedCaller,
        req: ReportStageLogsFromLastCheckpointRequest,
    ) -> Result<ReportStageLogsFromLastCheckpointResponse, ServiceError> {
        req.validate()?;
        self.check_deployment(caller, &req.deployment_id).await?;
        self.stores
            .stage_logs
            .append_from_checkpoint(
                &req.deployment_id,
                &req.stage_id,
                req.retried_count,
                &req.blocks,
                req.completed,
            )
            .await
            .map_err(stage_log_error)?;
        Ok(ReportStageLogsFromLastCheckpointResponse {})
    }
}

/// Checks and completes a deployment a piped wants to create (directly or as the first
/// deployment of a chain): it must name the caller's piped and, if it names a project,
/// the caller's project.
pub(super) fn prepare_new_deployment(
    caller: &PipedCaller,
    deployment: &mut model::Deployment,
) -> Result<(), ServiceError> {
    if deployment.piped_id != caller.piped_id {
        return Err(ServiceError::PermissionDenied(format!(
            "deployment {} names piped {}, not yours",
            deployment.id, deployment.piped_id
        )));
    }
    if !deployment.project_id.is_empty() && deployment.project_id != caller.project_id {
        return Err(ServiceError::PermissionDenied(format!(
            "deployment {} names project {}, not yours",
            deployment.id, deployment.project_id
        )));
    }
    deployment.project_id = caller.project_id.clone();
    mark_v0_manual_operations(deployment);
    Ok(())
}

/// Upstream's console compatibility for v0 deployments (no deploy targets by plugin):
/// ANALYSIS stages can be skipped and WAIT_APPROVAL stages approved, by the approvers in
/// their metadata if any. v1 planners set these themselves.
fn mark_v0_manual_operations(deployment: &mut model::Deployment) {
    if !deployment.deploy_targets_by_plugin.is_empty() {
        return;
    }
    for stage in &mut deployment.stages {
        match stage.name.as_str() {
            STAGE_ANALYSIS => stage.available_operation = ManualOperation::Skip as i32,
            STAGE_WAIT_APPROVAL => {
                stage.available_operation = ManualOperation::Approve as i32;
                if let Some(approvers) = stage.metadata.get(METADATA_APPROVERS)
                    && !approvers.is_empty()
                {
                    stage.authorized_operators = approvers.split(',').map(str::to_string).collect();
                }
            }
            _ => {}
        }
    }
}

/// Refuses a status change the transition table does not allow (repeating the current
/// status is allowed: pipeds retry reports whose response got lost).
/// Deviation: upstream's server applies any change; pipeds consult the same table
/// (`CanUpdateDeploymentStatus`) before reporting, so this only stops broken clients from
/// reopening completed deployments.
fn check_transition(d: &model::Deployment, to: i32) -> Result<(), ServiceError> {
    if deployment_status_change_allowed(d.status, to) {
        return Ok(());
    }
    Err(ServiceError::FailedPrecondition(format!(
        "deployment {} is {}; it cannot become {}",
        d.id,
        deployment_status_name(d.status),
        deployment_status_name(to)
    )))
}

fn find_stage<'a>(
    d: &'a mut model::Deployment,
    stage_id: &str,
    what: &str,
) -> Result<&'a mut model::PipelineStage, ServiceError> {
    d.stages
        .iter_mut()
        .find(|s| s.id == stage_id)
        .ok_or_else(|| {
            ServiceError::InvalidArgument(format!(
                "Invalid argument to {what}: stage {stage_id} is not found"
            ))
        })
}

fn merge(
    into: &mut std::collections::HashMap<String, String>,
    from: &std::collections::HashMap<String, String>,
) {
    into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
}

fn stage_log_error(err: StoreError) -> ServiceError {
    match err {
        StoreError::FailedPrecondition(_) => ServiceError::FailedPrecondition(
            "could not append the logs because the stage was already completed".into(),
        ),
        StoreError::InvalidArgument(msg) => {
            ServiceError::InvalidArgument(format!("invalid stage logs: {msg}"))
        }
        other => ServiceError::internal("failed to append logs", other),
    }
}
