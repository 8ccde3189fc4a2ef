//! Deployment chains: a piped starts one after a deployment (post-sync), and asks whether
//! an in-chain deployment may be planned.

use wisp_model::event::contains_labels;
use wisp_model::status::{chain_block_status_name, is_chain_block_completed};
use wisp_model::validate::Validate;
use wisp_proto::model::{
    self, ApplicationKind, ChainApplicationRef, ChainBlock, ChainBlockStatus, ChainDeploymentRef,
    ChainNode, ChainStatus, SyncStrategy,
};
use wisp_proto::pipedservice::create_deployment_chain_request::ApplicationMatcher;
use wisp_proto::pipedservice::*;
use wisp_store::StoreError;
use wisp_store::entities::{pk, slot};

use super::deployments::prepare_new_deployment;
use super::{PipedApi, PipedCaller, now_unix};
use crate::error::ServiceError;
use crate::support::derived_id;

impl PipedApi {
    /// Creates a chain whose block 0 is `first_deployment` and whose block i (i ≥ 1) holds
    /// the project's enabled applications matching matcher i-1; then creates the first
    /// deployment (with the chain id) and one CHAIN_SYNC_APPLICATION command per
    /// application of the other blocks, addressed to that application's piped.
    ///
    /// Deviation: upstream gives the chain and its commands random ids, so a retried call
    /// (a timeout the piped retries) leaves another chain each time. Here they derive from
    /// the project and the first deployment's id: a retry finds what the first attempt
    /// made, finishes what it did not, and creates nothing twice.
    pub async fn create_deployment_chain(
        &self,
        caller: &PipedCaller,
        req: CreateDeploymentChainRequest,
    ) -> Result<CreateDeploymentChainResponse, ServiceError> {
        req.validate()?;
        let Some(mut first) = req.first_deployment else {
            return Err(ServiceError::InvalidArgument(
                "invalid request: invalid CreateDeploymentChainRequest.first_deployment: value is required"
                    .into(),
            ));
        };
        self.check_application(caller, &first.application_id)
            .await?;
        prepare_new_deployment(caller, &mut first)?;

        let now = now_unix();
        let mut blocks = Vec::with_capacity(req.matchers.len() + 1);
        blocks.push(ChainBlock {
            nodes: vec![ChainNode {
                application_ref: Some(ChainApplicationRef {
                    application_id: first.application_id.clone(),
                    application_name: first.application_name.clone(),
                }),
                deployment_ref: Some(ChainDeploymentRef {
                    deployment_id: first.id.clone(),
                    status: first.status,
                    status_reason: first.status_reason.clone(),
                }),
            }],
            status: ChainBlockStatus::DeploymentBlockPending as i32,
            started_at: now,
            completed_at: 0,
        });
        let mut block_apps: Vec<Vec<model::Application>> = Vec::with_capacity(req.matchers.len());
        for matcher in &req.matchers {
            let apps = self
                .matching_applications(&caller.project_id, matcher)
                .await?;
            blocks.push(ChainBlock {
                nodes: apps
                    .iter()
                    .map(|app| ChainNode {
                        application_ref: Some(ChainApplicationRef {
                            application_id: app.id.clone(),
                            application_name: app.name.clone(),
                        }),
                        deployment_ref: None,
                    })
                    .collect(),
                status: ChainBlockStatus::DeploymentBlockPending as i32,
                started_at: now,
                completed_at: 0,
            });
            block_apps.push(apps);
        }

        let chain = model::DeploymentChain {
            id: derived_id(&["deployment-chain", &caller.project_id, &first.id]),
            project_id: caller.project_id.clone(),
            status: ChainStatus::DeploymentChainPending as i32,
            blocks,
            ..Default::default()
        };
        let chain_id = chain.id.clone();
        match self.stores.deployment_chains.create(chain).await {
            // A retry: the chain is the one the first attempt made.
            Ok(_) | Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(ServiceError::store(e, "trigger new deployment chain")),
        }

        first.deployment_chain_id = chain_id.clone();
        first.deployment_chain_block_index = 0;
        let what = format!(
            "trigger deployment {} for the first application in chain",
            first.id
        );
        match self.stores.deployments.create(first).await {
            Ok(_) | Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(ServiceError::store(e, &what)),
        }

        for (i, apps) in block_apps.into_iter().enumerate() {
            let block_index = u32::try_from(i + 1).map_err(|_| {
                ServiceError::InvalidArgument("too many application matchers".into())
            })?;
            for app in apps {
                let command = model::Command {
                    id: derived_id(&["chain-command", &chain_id, &app.id]),
                    piped_id: app.piped_id.clone(),
                    application_id: app.id.clone(),
                    project_id: app.project_id.clone(),
                    commander: chain_id.clone(),
                    r#type: model::command::Type::ChainSyncApplication as i32,
                    chain_sync_application: Some(model::command::ChainSyncApplication {
                        deployment_chain_id: chain_id.clone(),
                        block_index,
                        application_id: app.id.clone(),
                        sync_strategy: SyncStrategy::Auto as i32,
                    }),
                    ..Default::default()
                };
                match self.stores.commands.create(command).await {
                    Ok(_) | Err(StoreError::AlreadyExists(_)) => {}
                    Err(e) => {
                        return Err(ServiceError::store(
                            e,
                            &format!("create command to trigger application {} in chain", app.id),
                        ));
                    }
                }
            }
        }
        Ok(CreateDeploymentChainResponse {})
    }

    /// Whether an in-chain deployment may be planned now: yes in block 0 and once the
    /// previous block succeeded; cancel when its own block already finished or the
    /// previous block failed or was cancelled; otherwise not yet.
    pub async fn in_chain_deployment_plannable(
        &self,
        caller: &PipedCaller,
        req: InChainDeploymentPlannableRequest,
    ) -> Result<InChainDeploymentPlannableResponse, ServiceError> {
        req.validate()?;
        self.check_deployment(caller, &req.deployment_id).await?;
        let chain = match self
            .stores
            .deployment_chains
            .get(&caller.project_id, &req.deployment_chain_id)
            .await
        {
            Ok(chain) => chain,
            Err(StoreError::NotFound(_)) => {
                return Err(ServiceError::InvalidArgument(
                    "unable to find the deployment chain which this deployment belongs to".into(),
                ));
            }
            Err(e) => {
                return Err(ServiceError::store(
                    e,
                    &format!("get deployment chain {}", req.deployment_chain_id),
                ));
            }
        };
        let index = req.deployment_chain_block_index as usize;
        let Some(current) = chain.blocks.get(index) else {
            return Err(ServiceError::InvalidArgument(
                "invalid deployment with chain block index provided".into(),
            ));
        };
        if is_chain_block_completed(current.status) {
            return Ok(InChainDeploymentPlannableResponse {
                plannable: false,
                cancel: true,
                cancel_reason: format!(
                    "Block which contains this deployment is finished with {} status",
                    chain_block_status_name(current.status)
                ),
            });
        }
        let Some(previous) = index.checked_sub(1).and_then(|i| chain.blocks.get(i)) else {
            // Block 0: the chain's first deployment, planned without waiting.
            return Ok(InChainDeploymentPlannableResponse {
                plannable: true,
                ..Default::default()
            });
        };
        let mut response = InChainDeploymentPlannableResponse::default();
        match ChainBlockStatus::try_from(previous.status) {
            Ok(ChainBlockStatus::DeploymentBlockSuccess) => response.plannable = true,
            Ok(ChainBlockStatus::DeploymentBlockFailure) => {
                response.cancel = true;
                response.cancel_reason = "Previous block finished with FAILURE status".into();
            }
            Ok(ChainBlockStatus::DeploymentBlockCancelled) => {
                response.cancel = true;
                response.cancel_reason = "Previous block finished with CANCELLED status".into();
            }
            // Not finished yet: wait.
            _ => {}
        }
        Ok(response)
    }

    /// The project's enabled applications matching a chain matcher.
    ///
    /// Deviation: upstream ignores `labels` (a labels-only matcher selects every enabled
    /// application of the project); here an application must also carry all of them.
    async fn matching_applications(
        &self,
        project_id: &str,
        matcher: &ApplicationMatcher,
    ) -> Result<Vec<model::Application>, ServiceError> {
        let kind = if matcher.kind.is_empty() {
            None
        } else {
            match ApplicationKind::from_str_name(&matcher.kind) {
                Some(kind) => Some(kind as i32),
                None => {
                    return Err(ServiceError::InvalidArgument(
                        "invalid application kind given as application matcher value".into(),
                    ));
                }
            }
        };
        let labels = &matcher.labels;
        let filter = move |app: &model::Application| {
            !app.disabled
                && !app.deleted
                && kind.is_none_or(|k| app.kind == k)
                && contains_labels(&app.labels, labels)
        };
        let result = if matcher.name.is_empty() {
            self.stores
                .applications
                .list_all(
                    slot::APPLICATION_BY_PROJECT,
                    project_id.to_string(),
                    Some(&filter),
                )
                .await
        } else {
            self.stores
                .applications
                .list_all(
                    slot::APPLICATION_BY_NAME,
                    pk::project_name(project_id, &matcher.name),
                    Some(&filter),
                )
                .await
        };
        result.map_err(|e| ServiceError::store(e, "list applications for the deployment chain"))
    }
}
