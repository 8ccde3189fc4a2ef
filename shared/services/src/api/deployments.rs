//! Deployments and their stage logs, read-only.

use std::collections::HashMap;

use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::{ApplicationKind, DeploymentStatus, api_key::Role};
use wisp_store::StoreError;

use super::{ApiApi, ApiKeyCaller, check_project, require};
use crate::error::ServiceError;
use crate::ops::deployments::{self as ops, DeploymentQuery};

/// The stage upstream adds to every pipeline on its own; it has no logs until it runs.
const ROLLBACK_STAGE: &str = "ROLLBACK";

impl ApiApi {
    pub async fn get_deployment(
        &self,
        caller: &ApiKeyCaller,
        req: GetDeploymentRequest,
    ) -> Result<GetDeploymentResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let deployment = self.deployment(&req.deployment_id).await?;
        check_project(caller, &deployment.project_id, "deployment")?;
        Ok(GetDeploymentResponse {
            deployment: Some(deployment),
        })
    }

    /// The project's deployments ([`ops::list_deployments`]), filtered by status and kind
    /// (enum names, e.g. `DEPLOYMENT_SUCCESS`, `KUBERNETES`), application id, application
    /// name and labels. `limit` 0 means all; the cursor is empty on the last page.
    pub async fn list_deployments(
        &self,
        caller: &ApiKeyCaller,
        req: ListDeploymentsRequest,
    ) -> Result<ListDeploymentsResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let mut statuses = Vec::new();
        for s in req.statuses.iter().filter(|s| !s.is_empty()) {
            let status = DeploymentStatus::from_str_name(s).ok_or_else(|| {
                ServiceError::InvalidArgument(format!("{s} is invalid deployment status"))
            })?;
            statuses.push(status as i32);
        }
        let mut kinds = Vec::new();
        for k in req.kinds.iter().filter(|k| !k.is_empty()) {
            let kind = ApplicationKind::from_str_name(k).ok_or_else(|| {
                ServiceError::InvalidArgument(format!("{k} is invalid application kind"))
            })?;
            kinds.push(kind as i32);
        }
        let query = DeploymentQuery {
            statuses,
            kinds,
            application_ids: req.application_ids,
            application_name: req.application_name,
            labels: req.labels,
            limit: usize::try_from(req.limit).unwrap_or(0),
            cursor: req.cursor,
            ..Default::default()
        };
        let page =
            ops::list_deployments(&self.stores.deployments, &caller.project_id, query).await?;
        Ok(ListDeploymentsResponse {
            deployments: page.items,
            cursor: page.cursor,
        })
    }

    /// The log of every stage at its current retry, keyed by stage id. A stage without a
    /// log gets an empty one, except the automatic ROLLBACK stage, which is left out.
    pub async fn list_stage_logs(
        &self,
        caller: &ApiKeyCaller,
        req: ListStageLogsRequest,
    ) -> Result<ListStageLogsResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadOnly)?;
        let deployment = self.deployment(&req.deployment_id).await?;
        check_project(caller, &deployment.project_id, "deployment")?;
        let mut stage_logs = HashMap::new();
        for stage in &deployment.stages {
            let fetched = self
                .stores
                .stage_logs
                .fetch(&deployment.id, &stage.id, stage.retried_count, 0)
                .await;
            match fetched {
                Ok(log) => {
                    stage_logs.insert(
                        stage.id.clone(),
                        StageLog {
                            blocks: log.blocks,
                            completed: log.completed,
                        },
                    );
                }
                Err(StoreError::NotFound(_)) if stage.name == ROLLBACK_STAGE => {}
                Err(StoreError::NotFound(_)) => {
                    stage_logs.insert(stage.id.clone(), StageLog::default());
                }
                Err(e) => return Err(ServiceError::internal("Failed to get stage logs", e)),
            }
        }
        Ok(ListStageLogsResponse { stage_logs })
    }
}
