//! WebService: deployments (list, get, stage logs) and the operator's actions on them
//! (cancel, skip an analysis, approve), each a command the deployment's piped executes.

use wisp_model::status::{is_deployment_completed, is_stage_completed};
use wisp_proto::model::{self, command};
use wisp_proto::webservice::*;
use wisp_store::StoreError;
use wisp_store::collection::ListOptions;
use wisp_store::collection::sort_ts;
use wisp_store::entities::slot;

use super::{Authorized, WebApi, required};
use crate::error::ServiceError;
use crate::ops::deployments::DeploymentQuery;
use crate::support::new_id;

/// The console's page size when it asks for none.
const DEFAULT_PAGE_SIZE: usize = 50;
/// Largest page served at once.
const MAX_PAGE_SIZE: usize = 1000;
/// Where upstream keeps a WAIT_APPROVAL stage's approvers when the stage has no
/// `authorized_operators`.
const APPROVERS_METADATA_KEY: &str = "Approvers";
/// The only stage an operator may skip.
const ANALYSIS_STAGE: &str = "ANALYSIS";

impl WebApi {
    /// The project's deployments ([`crate::ops::deployments::list_deployments`]) updated
    /// at or after `page_min_updated_at`, filtered by status, kind, application and
    /// labels; the cursor is empty on the last page. A request without `options` is
    /// unfiltered.
    pub async fn list_deployments(
        &self,
        caller: &Authorized,
        req: ListDeploymentsRequest,
    ) -> Result<ListDeploymentsResponse, ServiceError> {
        let options = req.options.unwrap_or_default();
        let query = DeploymentQuery {
            statuses: options.statuses,
            kinds: options.kinds,
            application_ids: options.application_ids,
            application_name: options.application_name,
            labels: options.labels,
            min_updated_at: req.page_min_updated_at,
            limit: page_size(req.page_size),
            cursor: req.cursor,
        };
        let page = crate::ops::deployments::list_deployments(
            &self.stores.deployments,
            caller.project_id(),
            query,
        )
        .await?;
        Ok(ListDeploymentsResponse {
            deployments: page.items,
            cursor: page.cursor,
        })
    }

    pub async fn get_deployment(
        &self,
        caller: &Authorized,
        req: GetDeploymentRequest,
    ) -> Result<GetDeploymentResponse, ServiceError> {
        required("deployment_id", &req.deployment_id)?;
        let deployment = self.deployment_of(caller, &req.deployment_id).await?;
        Ok(GetDeploymentResponse {
            deployment: Some(deployment),
        })
    }

    /// A stage's log blocks from `offset_index` on, live while the stage runs.
    pub async fn get_stage_log(
        &self,
        caller: &Authorized,
        req: GetStageLogRequest,
    ) -> Result<GetStageLogResponse, ServiceError> {
        required("deployment_id", &req.deployment_id)?;
        required("stage_id", &req.stage_id)?;
        let deployment = self.deployment_of(caller, &req.deployment_id).await?;
        let log = self
            .stores
            .stage_logs
            .fetch(
                &deployment.id,
                &req.stage_id,
                req.retried_count,
                req.offset_index,
            )
            .await
            .map_err(|e| match e {
                StoreError::NotFound(_) => ServiceError::NotFound("The stage log not found".into()),
                other => ServiceError::store(other, "get stage log"),
            })?;
        Ok(match &self.response_budget {
            Some(budget) => budget.fit_stage_log(
                log.blocks,
                log.completed,
                &wisp_store::stagelog::stage_log_path(
                    &deployment.id,
                    &req.stage_id,
                    req.retried_count,
                ),
            ),
            None => GetStageLogResponse {
                blocks: log.blocks,
                completed: log.completed,
            },
        })
    }

    /// Asks the piped to cancel a running deployment.
    pub async fn cancel_deployment(
        &self,
        caller: &Authorized,
        req: CancelDeploymentRequest,
    ) -> Result<CancelDeploymentResponse, ServiceError> {
        required("deployment_id", &req.deployment_id)?;
        let deployment = self.deployment_of(caller, &req.deployment_id).await?;
        if is_deployment_completed(deployment.status) {
            return Err(ServiceError::FailedPrecondition(
                "could not cancel the deployment because it was already completed".into(),
            ));
        }
        let cmd = deployment_command(caller, &deployment, command::Type::CancelDeployment);
        let cmd = model::Command {
            cancel_deployment: Some(command::CancelDeployment {
                deployment_id: deployment.id.clone(),
                force_rollback: req.force_rollback,
                force_no_rollback: req.force_no_rollback,
            }),
            ..cmd
        };
        let cmd = self.add_command(cmd).await?;
        Ok(CancelDeploymentResponse { command_id: cmd.id })
    }

    /// Asks the piped to skip a running ANALYSIS stage.
    pub async fn skip_stage(
        &self,
        caller: &Authorized,
        req: SkipStageRequest,
    ) -> Result<SkipStageResponse, ServiceError> {
        required("deployment_id", &req.deployment_id)?;
        required("stage_id", &req.stage_id)?;
        let deployment = self.deployment_of(caller, &req.deployment_id).await?;
        let stage = stage_of(&deployment, &req.stage_id)?;
        if stage.name != ANALYSIS_STAGE {
            return Err(ServiceError::FailedPrecondition(
                "only ANALYSIS stages can be skipped".into(),
            ));
        }
        if is_stage_completed(stage.status) {
            return Err(ServiceError::FailedPrecondition(
                "could not skip the stage because it was already completed".into(),
            ));
        }
        let cmd = deployment_command(caller, &deployment, command::Type::SkipStage);
        let cmd = model::Command {
            stage_id: stage.id.clone(),
            skip_stage: Some(command::SkipStage {
                deployment_id: deployment.id.clone(),
                stage_id: stage.id.clone(),
            }),
            ..cmd
        };
        let cmd = self.add_command(cmd).await?;
        Ok(SkipStageResponse { command_id: cmd.id })
    }

    /// Approves a waiting stage, if the caller is one of its approvers (the stage's
    /// `authorized_operators`, else its `Approvers` metadata; nobody listed means anyone).
    pub async fn approve_stage(
        &self,
        caller: &Authorized,
        req: ApproveStageRequest,
    ) -> Result<ApproveStageResponse, ServiceError> {
        required("deployment_id", &req.deployment_id)?;
        required("stage_id", &req.stage_id)?;
        let deployment = self.deployment_of(caller, &req.deployment_id).await?;
        let stage = stage_of(&deployment, &req.stage_id)?;
        if is_stage_completed(stage.status) {
            return Err(ServiceError::FailedPrecondition(
                "could not approve the stage because it was already completed".into(),
            ));
        }
        let approvers: Vec<String> = if !stage.authorized_operators.is_empty() {
            stage.authorized_operators.clone()
        } else {
            stage
                .metadata
                .get(APPROVERS_METADATA_KEY)
                .map(|list| {
                    list.split(',')
                        .map(str::trim)
                        .filter(|a| !a.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        if !approvers.is_empty() && !approvers.iter().any(|a| a == caller.subject()) {
            return Err(ServiceError::PermissionDenied(format!(
                "You are not authorized to approve this stage; approvers: {}",
                approvers.join(", ")
            )));
        }
        let cmd = deployment_command(caller, &deployment, command::Type::ApproveStage);
        let cmd = model::Command {
            stage_id: stage.id.clone(),
            approve_stage: Some(command::ApproveStage {
                deployment_id: deployment.id.clone(),
                stage_id: stage.id.clone(),
            }),
            ..cmd
        };
        let cmd = self.add_command(cmd).await?;
        Ok(ApproveStageResponse { command_id: cmd.id })
    }

    /// Deployment traces (one per commit that triggered deployments), most recently
    /// updated first, each with the project's deployments of that commit.
    pub async fn list_deployment_traces(
        &self,
        caller: &Authorized,
        req: ListDeploymentTracesRequest,
    ) -> Result<ListDeploymentTracesResponse, ServiceError> {
        let commit_hash = req.options.map(|o| o.commit_hash).unwrap_or_default();
        let matches =
            |t: &model::DeploymentTrace| commit_hash.is_empty() || t.commit_hash == commit_hash;
        let mut opts = ListOptions::new(slot::TRACE_BY_PROJECT, caller.project_id().to_string());
        if req.page_min_updated_at > 0 {
            opts.sk_from = Some(sort_ts(req.page_min_updated_at));
        }
        opts.descending = true;
        opts.limit = page_size(req.page_size);
        opts.cursor = req.cursor.clone();
        opts.filter = Some(&matches);
        let page = self
            .stores
            .deployment_traces
            .list(opts)
            .await
            .map_err(|e| ServiceError::store(e, "list deployment traces"))?;
        let mut traces = Vec::with_capacity(page.items.len());
        for trace in page.items {
            // A commit's deployments are all updated after its trace was created.
            let hash = trace.commit_hash.clone();
            let of_commit = |d: &model::Deployment| d.deployment_trace_commit_hash == hash;
            let mut opts =
                ListOptions::new(slot::DEPLOYMENT_BY_PROJECT, caller.project_id().to_string());
            opts.sk_from = Some(sort_ts(trace.created_at));
            opts.descending = true;
            opts.filter = Some(&of_commit);
            let deployments = self
                .stores
                .deployments
                .list(opts)
                .await
                .map_err(|e| ServiceError::store(e, "list deployments of a trace"))?
                .items;
            traces.push(list_deployment_traces_response::DeploymentTraceRes {
                trace: Some(trace),
                deployments,
            });
        }
        Ok(ListDeploymentTracesResponse {
            traces,
            cursor: page.cursor,
        })
    }

    async fn deployment_of(
        &self,
        caller: &Authorized,
        deployment_id: &str,
    ) -> Result<model::Deployment, ServiceError> {
        self.owned(
            &self.stores.deployments,
            deployment_id,
            caller,
            "deployment",
        )
        .await
    }
}

/// The page size asked for, defaulted and capped.
pub(super) fn page_size(asked: i32) -> usize {
    match usize::try_from(asked) {
        Ok(0) | Err(_) => DEFAULT_PAGE_SIZE,
        Ok(n) => n.min(MAX_PAGE_SIZE),
    }
}

fn stage_of<'d>(
    deployment: &'d model::Deployment,
    stage_id: &str,
) -> Result<&'d model::PipelineStage, ServiceError> {
    deployment
        .stages
        .iter()
        .find(|s| s.id == stage_id)
        .ok_or_else(|| ServiceError::NotFound("The stage was not found in the deployment".into()))
}

/// A command for `deployment`'s piped, from the signed-in user.
fn deployment_command(
    caller: &Authorized,
    deployment: &model::Deployment,
    kind: command::Type,
) -> model::Command {
    model::Command {
        id: new_id(),
        piped_id: deployment.piped_id.clone(),
        application_id: deployment.application_id.clone(),
        deployment_id: deployment.id.clone(),
        project_id: deployment.project_id.clone(),
        commander: caller.subject().to_string(),
        r#type: kind as i32,
        ..Default::default()
    }
}
