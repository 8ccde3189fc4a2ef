//! Deployment-chain progress (upstream's deploymentchaincontroller and its updaters):
//! for every open chain, link each in-chain application's deployment to its node once
//! the piped created it, copy the deployments' statuses onto the nodes, and derive the
//! blocks' and the chain's statuses from them. A chain whose status becomes final leaves
//! the open index.
//!
//! Reads the sparse index of open chains (`slot::CHAIN_OPEN`, least recently updated
//! first). A chain is written only when something changed, in one optimistic
//! read-modify-write whose change is a pure function of what was read, so repeating a
//! run changes nothing. A run cut short saves its index position in a marker and the
//! next run continues from there (a completed walk clears it), so every open chain is
//! visited even when there are more than one run can handle.
//!
//! Deviation from upstream: upstream recomputes block and chain statuses only when a
//! linked deployment's status changes, so a deployment that already completed when it
//! was linked never completes its block. Here any change recomputes them.

use std::collections::HashMap;

use wisp_model::status::{
    chain_block_desired_status, chain_desired_status, is_chain_block_completed, is_chain_completed,
    is_deployment_completed,
};
use wisp_proto::model::{ChainDeploymentRef, Deployment, DeploymentChain};
use wisp_store::StoreError;
use wisp_store::collection::{ListOptions, sort_ts};
use wisp_store::entities::{pk, slot};

use crate::marker;
use crate::{Job, JobContext, JobError, JobReport};

const PAGE: usize = 50;
const JOB: Job = Job::DeploymentChains;

pub async fn run(ctx: &JobContext<'_>) -> Result<JobReport, JobError> {
    let mut report = JobReport::new(JOB);
    let mut cursor = marker::load(ctx.stores, JOB)
        .await?
        .map(|m| m.after)
        .unwrap_or_default();
    loop {
        if ctx.deadline.expired() {
            marker::save(ctx.stores, JOB, non_empty(&cursor), ctx.now).await?;
            return Ok(report);
        }
        let mut opts = ListOptions::<DeploymentChain>::new(slot::CHAIN_OPEN, pk::CHAIN_OPEN);
        opts.limit = PAGE;
        opts.cursor = cursor.clone();
        let page = match ctx.stores.deployment_chains.list(opts).await {
            Ok(page) => page,
            // A marker from an older layout of the index: start over.
            Err(StoreError::InvalidCursor) if !cursor.is_empty() => {
                cursor.clear();
                continue;
            }
            Err(e) => return Err(JobError::store(JOB, "list open deployment chains", e)),
        };
        // Page by page: a cut-short run resumes after the last page it finished (at most
        // one page is looked at again, which changes nothing).
        for chain in &page.items {
            if ctx.deadline.expired() {
                marker::save(ctx.stores, JOB, non_empty(&cursor), ctx.now).await?;
                return Ok(report);
            }
            report.examined += 1;
            match sync_chain(ctx, chain).await {
                Ok(true) => report.changed += 1,
                Ok(false) => {}
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(chain = %chain.id, project = %chain.project_id, error = %wisp_telemetry::chain(&e), "failed to update a deployment chain");
                }
            }
        }
        if page.cursor.is_empty() {
            marker::save(ctx.stores, JOB, None, ctx.now).await?;
            report.finished = true;
            return Ok(report);
        }
        cursor = page.cursor;
    }
}

fn non_empty(cursor: &str) -> Option<&str> {
    (!cursor.is_empty()).then_some(cursor)
}

/// What the chain's deployments look like now.
#[derive(Debug, Default)]
pub struct Observed {
    /// Current status and reason of linked deployments that were still open.
    pub statuses: HashMap<String, (i32, String)>,
    /// In-chain deployments of applications whose node has none linked yet.
    pub unlinked: Vec<Deployment>,
}

/// Reads the chain's deployments and writes the chain if that changes it. `Ok(true)`
/// when it was written.
async fn sync_chain(ctx: &JobContext<'_>, chain: &DeploymentChain) -> Result<bool, StoreError> {
    let observed = observe(ctx, chain).await?;
    let mut updated = chain.clone();
    if !apply(&mut updated, &observed, ctx.now) {
        return Ok(false);
    }
    let now = ctx.now;
    let result = ctx
        .stores
        .deployment_chains
        .update(&chain.project_id, &chain.id, |c| {
            if apply(c, &observed, now) {
                Ok(())
            } else {
                // Someone else made the same change first.
                Err(StoreError::FailedPrecondition("unchanged".into()))
            }
        })
        .await;
    match result {
        Ok(stored) => {
            tracing::info!(
                chain = %stored.id,
                project = %stored.project_id,
                status = stored.status,
                "deployment chain updated"
            );
            Ok(true)
        }
        Err(StoreError::FailedPrecondition(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

async fn observe(ctx: &JobContext<'_>, chain: &DeploymentChain) -> Result<Observed, StoreError> {
    let mut observed = Observed::default();
    let mut unlinked_apps: Vec<&str> = Vec::new();
    for node in chain.blocks.iter().flat_map(|b| &b.nodes) {
        match &node.deployment_ref {
            Some(r) if !is_deployment_completed(r.status) => {
                match ctx
                    .stores
                    .deployments
                    .get(&chain.project_id, &r.deployment_id)
                    .await
                {
                    Ok(d) => {
                        observed
                            .statuses
                            .insert(d.id.clone(), (d.status, d.status_reason.clone()));
                    }
                    Err(StoreError::NotFound(_)) => {
                        tracing::warn!(chain = %chain.id, deployment = %r.deployment_id, "chain node links a missing deployment");
                    }
                    Err(e) => return Err(e),
                }
            }
            Some(_) => {}
            None => {
                if let Some(app) = &node.application_ref {
                    unlinked_apps.push(&app.application_id);
                }
            }
        }
    }
    for app_id in unlinked_apps {
        let chain_id = chain.id.as_str();
        let in_chain = move |d: &Deployment| d.deployment_chain_id == chain_id;
        let mut opts = ListOptions::<Deployment>::new(
            slot::DEPLOYMENT_BY_APPLICATION,
            pk::project_application(&chain.project_id, app_id),
        );
        // The application's deployments touched since the chain began.
        opts.sk_from = Some(sort_ts(chain.created_at));
        opts.limit = 1;
        opts.filter = Some(&in_chain);
        let page = ctx.stores.deployments.list(opts).await?;
        observed.unlinked.extend(page.items);
    }
    Ok(observed)
}

/// Applies what was observed to `chain`; true when that changed it. Pure: the same
/// chain and observation always give the same result (it runs again on lost races).
pub fn apply(chain: &mut DeploymentChain, observed: &Observed, now: i64) -> bool {
    let mut touched = vec![false; chain.blocks.len()];
    for (i, block) in chain.blocks.iter_mut().enumerate() {
        for node in &mut block.nodes {
            let Some(r) = &mut node.deployment_ref else {
                continue;
            };
            if is_deployment_completed(r.status) {
                continue;
            }
            if let Some((status, reason)) = observed.statuses.get(&r.deployment_id)
                && (r.status != *status || r.status_reason != *reason)
            {
                r.status = *status;
                r.status_reason = reason.clone();
                touched[i] = true;
            }
        }
    }
    for d in &observed.unlinked {
        let index = d.deployment_chain_block_index as usize;
        let Some(block) = chain.blocks.get_mut(index) else {
            tracing::warn!(chain = %chain.id, deployment = %d.id, index, "deployment names a block the chain does not have");
            continue;
        };
        let node = block.nodes.iter_mut().find(|n| {
            n.deployment_ref.is_none()
                && n.application_ref
                    .as_ref()
                    .is_some_and(|a| a.application_id == d.application_id)
        });
        if let Some(node) = node {
            node.deployment_ref = Some(ChainDeploymentRef {
                deployment_id: d.id.clone(),
                status: d.status,
                status_reason: d.status_reason.clone(),
            });
            touched[index] = true;
        }
    }
    if !touched.contains(&true) {
        return false;
    }
    for (block, touched) in chain.blocks.iter_mut().zip(touched) {
        if !touched || is_chain_block_completed(block.status) {
            continue;
        }
        block.status = chain_block_desired_status(block);
        if is_chain_block_completed(block.status) {
            block.completed_at = now;
        }
    }
    if !is_chain_completed(chain.status) {
        chain.status = chain_desired_status(chain);
        if is_chain_completed(chain.status) {
            chain.completed_at = now;
        }
    }
    true
}
