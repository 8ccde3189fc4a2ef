//! Status rules of deployments, stages and deployment chains: which statuses are final,
//! which transitions are allowed, and how a chain's status follows from its deployments.
//!
//! Statuses are the raw `i32` values carried on the wire (prost enum fields), so that an
//! unknown value sent by a newer client is handled instead of failing to decode.

use wisp_proto::model::{
    ChainBlock, ChainBlockStatus, ChainStatus, DeploymentChain, DeploymentStatus, StageStatus,
};

const DEP_PENDING: i32 = DeploymentStatus::DeploymentPending as i32;
const DEP_PLANNED: i32 = DeploymentStatus::DeploymentPlanned as i32;
const DEP_RUNNING: i32 = DeploymentStatus::DeploymentRunning as i32;
const DEP_ROLLING_BACK: i32 = DeploymentStatus::DeploymentRollingBack as i32;
const DEP_SUCCESS: i32 = DeploymentStatus::DeploymentSuccess as i32;
const DEP_FAILURE: i32 = DeploymentStatus::DeploymentFailure as i32;
const DEP_CANCELLED: i32 = DeploymentStatus::DeploymentCancelled as i32;

const STAGE_NOT_STARTED: i32 = StageStatus::StageNotStartedYet as i32;
const STAGE_RUNNING: i32 = StageStatus::StageRunning as i32;
const STAGE_SUCCESS: i32 = StageStatus::StageSuccess as i32;
const STAGE_FAILURE: i32 = StageStatus::StageFailure as i32;
const STAGE_CANCELLED: i32 = StageStatus::StageCancelled as i32;
const STAGE_SKIPPED: i32 = StageStatus::StageSkipped as i32;
const STAGE_EXITED: i32 = StageStatus::StageExited as i32;

const BLOCK_RUNNING: i32 = ChainBlockStatus::DeploymentBlockRunning as i32;
const BLOCK_SUCCESS: i32 = ChainBlockStatus::DeploymentBlockSuccess as i32;
const BLOCK_FAILURE: i32 = ChainBlockStatus::DeploymentBlockFailure as i32;
const BLOCK_CANCELLED: i32 = ChainBlockStatus::DeploymentBlockCancelled as i32;

const CHAIN_RUNNING: i32 = ChainStatus::DeploymentChainRunning as i32;
const CHAIN_SUCCESS: i32 = ChainStatus::DeploymentChainSuccess as i32;
const CHAIN_FAILURE: i32 = ChainStatus::DeploymentChainFailure as i32;
const CHAIN_CANCELLED: i32 = ChainStatus::DeploymentChainCancelled as i32;

/// The statuses of a deployment that is still open (PENDING, PLANNED, RUNNING,
/// ROLLING_BACK), in enum order.
pub const NOT_COMPLETED_DEPLOYMENT_STATUSES: [DeploymentStatus; 4] = [
    DeploymentStatus::DeploymentPending,
    DeploymentStatus::DeploymentPlanned,
    DeploymentStatus::DeploymentRunning,
    DeploymentStatus::DeploymentRollingBack,
];

/// SUCCESS, FAILURE or CANCELLED.
pub fn is_deployment_completed(status: i32) -> bool {
    matches!(status, DEP_SUCCESS | DEP_FAILURE | DEP_CANCELLED)
}

/// SUCCESS, FAILURE, CANCELLED, SKIPPED or EXITED.
pub fn is_stage_completed(status: i32) -> bool {
    matches!(
        status,
        STAGE_SUCCESS | STAGE_FAILURE | STAGE_CANCELLED | STAGE_SKIPPED | STAGE_EXITED
    )
}

/// A chain is completed once it reached SUCCESS, FAILURE or CANCELLED.
pub fn is_chain_completed(status: i32) -> bool {
    matches!(status, CHAIN_SUCCESS | CHAIN_FAILURE | CHAIN_CANCELLED)
}

/// A chain block is completed once it reached SUCCESS, FAILURE or CANCELLED.
pub fn is_chain_block_completed(status: i32) -> bool {
    matches!(status, BLOCK_SUCCESS | BLOCK_FAILURE | BLOCK_CANCELLED)
}

/// Upstream's `CanUpdateDeploymentStatus`: a deployment only moves forward through
/// PENDING → PLANNED → RUNNING → ROLLING_BACK, and may complete from any open status;
/// a completed deployment never changes. Unknown values are never allowed.
pub fn can_update_deployment_status(from: i32, to: i32) -> bool {
    match to {
        DEP_PENDING | DEP_PLANNED | DEP_RUNNING | DEP_ROLLING_BACK => {
            (DEP_PENDING..=to).contains(&from)
        }
        DEP_SUCCESS | DEP_FAILURE | DEP_CANCELLED => {
            (DEP_PENDING..=DEP_ROLLING_BACK).contains(&from)
        }
        _ => false,
    }
}

/// Upstream's `CanUpdateStageStatus`: NOT_STARTED_YET → RUNNING → SUCCESS | FAILURE |
/// CANCELLED. Like upstream, SKIPPED and EXITED are never a valid target here (pipeds only
/// use this table to decide whether to (re)start a stage); see
/// [`stage_status_change_allowed`] for the rule a control plane applies to reports.
pub fn can_update_stage_status(from: i32, to: i32) -> bool {
    match to {
        STAGE_NOT_STARTED => from == STAGE_NOT_STARTED,
        STAGE_RUNNING => matches!(from, STAGE_NOT_STARTED | STAGE_RUNNING),
        STAGE_SUCCESS | STAGE_FAILURE | STAGE_CANCELLED => {
            matches!(from, STAGE_NOT_STARTED | STAGE_RUNNING)
        }
        _ => false,
    }
}

/// Whether a piped's report may move a deployment from `from` to `to`: the upstream
/// table, plus repeating the current status (a piped retries a report whose response was
/// lost; that must not fail).
pub fn deployment_status_change_allowed(from: i32, to: i32) -> bool {
    from == to || can_update_deployment_status(from, to)
}

/// Whether a piped's report may move a stage from `from` to `to`: the upstream table,
/// SKIPPED and EXITED from any status that is not completed yet (pipeds report both),
/// and repeating the current status (retried reports).
pub fn stage_status_change_allowed(from: i32, to: i32) -> bool {
    if from == to || can_update_stage_status(from, to) {
        return true;
    }
    matches!(to, STAGE_SKIPPED | STAGE_EXITED) && !is_stage_completed(from)
}

/// Upstream's `ChainBlock.DesiredStatus`: the status a block should have given the
/// statuses of its nodes' deployments. A completed block keeps its status.
pub fn chain_block_desired_status(block: &ChainBlock) -> i32 {
    if is_chain_block_completed(block.status) {
        return block.status;
    }
    let (mut success, mut failure, mut cancelled, mut running) = (0usize, 0usize, 0usize, 0usize);
    for node in &block.nodes {
        let Some(dep) = &node.deployment_ref else {
            continue;
        };
        match dep.status {
            DEP_SUCCESS => success += 1,
            DEP_FAILURE => failure += 1,
            DEP_CANCELLED => cancelled += 1,
            DEP_RUNNING => running += 1,
            _ => {}
        }
    }
    if success == block.nodes.len() {
        BLOCK_SUCCESS
    } else if failure > 0 {
        BLOCK_FAILURE
    } else if cancelled > 0 {
        BLOCK_CANCELLED
    } else if running > 0 {
        BLOCK_RUNNING
    } else {
        block.status
    }
}

/// Upstream's `DeploymentChain.DesiredStatus`: the status a chain should have given its
/// blocks' statuses. A completed chain keeps its status.
pub fn chain_desired_status(chain: &DeploymentChain) -> i32 {
    if is_chain_completed(chain.status) {
        return chain.status;
    }
    let (mut success, mut failure, mut cancelled, mut running) = (0usize, 0usize, 0usize, 0usize);
    for block in &chain.blocks {
        match block.status {
            BLOCK_SUCCESS => success += 1,
            BLOCK_FAILURE => failure += 1,
            BLOCK_CANCELLED => cancelled += 1,
            BLOCK_RUNNING => running += 1,
            _ => {}
        }
    }
    if success == chain.blocks.len() {
        CHAIN_SUCCESS
    } else if failure > 0 {
        CHAIN_FAILURE
    } else if cancelled > 0 {
        CHAIN_CANCELLED
    } else if running > 0 {
        CHAIN_RUNNING
    } else {
        chain.status
    }
}

/// Name of a deployment status for messages (`DEPLOYMENT_RUNNING`, or the number when
/// the value is unknown).
pub fn deployment_status_name(status: i32) -> String {
    DeploymentStatus::try_from(status)
        .map(|s| s.as_str_name().to_string())
        .unwrap_or_else(|_| status.to_string())
}

/// Name of a stage status for messages.
pub fn stage_status_name(status: i32) -> String {
    StageStatus::try_from(status)
        .map(|s| s.as_str_name().to_string())
        .unwrap_or_else(|_| status.to_string())
}

/// Name of a chain block status for messages.
pub fn chain_block_status_name(status: i32) -> String {
    ChainBlockStatus::try_from(status)
        .map(|s| s.as_str_name().to_string())
        .unwrap_or_else(|_| status.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wisp_proto::model::{ChainDeploymentRef, ChainNode};

    const ALL_DEP: [i32; 7] = [
        DEP_PENDING,
        DEP_PLANNED,
        DEP_RUNNING,
        DEP_ROLLING_BACK,
        DEP_SUCCESS,
        DEP_FAILURE,
        DEP_CANCELLED,
    ];

    #[test]
    fn completed_sets() {
        let done: Vec<i32> = ALL_DEP
            .into_iter()
            .filter(|s| is_deployment_completed(*s))
            .collect();
        assert_eq!(done, vec![DEP_SUCCESS, DEP_FAILURE, DEP_CANCELLED]);
        for s in NOT_COMPLETED_DEPLOYMENT_STATUSES {
            assert!(!is_deployment_completed(s as i32));
        }
        assert!(!is_stage_completed(STAGE_NOT_STARTED));
        assert!(!is_stage_completed(STAGE_RUNNING));
        for s in [
            STAGE_SUCCESS,
            STAGE_FAILURE,
            STAGE_CANCELLED,
            STAGE_SKIPPED,
            STAGE_EXITED,
        ] {
            assert!(is_stage_completed(s));
        }
        assert!(!is_chain_completed(
            ChainStatus::DeploymentChainPending as i32
        ));
        assert!(!is_chain_completed(CHAIN_RUNNING));
        assert!(is_chain_completed(CHAIN_CANCELLED));
    }

    #[test]
    fn deployment_transitions_match_upstream_table() {
        // (from, to, allowed) — upstream's deployment_test.go cases.
        let cases = [
            (DEP_PENDING, DEP_PENDING, true),
            (DEP_PLANNED, DEP_PENDING, false),
            (DEP_PENDING, DEP_PLANNED, true),
            (DEP_RUNNING, DEP_PLANNED, false),
            (DEP_PLANNED, DEP_RUNNING, true),
            (DEP_ROLLING_BACK, DEP_RUNNING, false),
            (DEP_RUNNING, DEP_ROLLING_BACK, true),
            (DEP_SUCCESS, DEP_ROLLING_BACK, false),
            (DEP_ROLLING_BACK, DEP_SUCCESS, true),
            (DEP_PENDING, DEP_FAILURE, true),
            (DEP_SUCCESS, DEP_FAILURE, false),
            (DEP_FAILURE, DEP_FAILURE, false),
            (DEP_CANCELLED, DEP_CANCELLED, false),
            (DEP_RUNNING, DEP_CANCELLED, true),
            (DEP_RUNNING, 42, false),
        ];
        for (from, to, want) in cases {
            assert_eq!(
                can_update_deployment_status(from, to),
                want,
                "{from} -> {to}"
            );
        }
        assert!(deployment_status_change_allowed(DEP_SUCCESS, DEP_SUCCESS));
        assert!(!deployment_status_change_allowed(DEP_SUCCESS, DEP_FAILURE));
        assert!(!deployment_status_change_allowed(
            DEP_CANCELLED,
            DEP_RUNNING
        ));
    }

    #[test]
    fn stage_transitions_match_upstream_table() {
        let cases = [
            (STAGE_NOT_STARTED, STAGE_NOT_STARTED, true),
            (STAGE_RUNNING, STAGE_NOT_STARTED, false),
            (STAGE_NOT_STARTED, STAGE_RUNNING, true),
            (STAGE_RUNNING, STAGE_RUNNING, true),
            (STAGE_SUCCESS, STAGE_RUNNING, false),
            (STAGE_RUNNING, STAGE_SUCCESS, true),
            (STAGE_FAILURE, STAGE_SUCCESS, false),
            (STAGE_RUNNING, STAGE_FAILURE, true),
            (STAGE_NOT_STARTED, STAGE_CANCELLED, true),
            (STAGE_RUNNING, STAGE_SKIPPED, false),
            (STAGE_RUNNING, STAGE_EXITED, false),
        ];
        for (from, to, want) in cases {
            assert_eq!(can_update_stage_status(from, to), want, "{from} -> {to}");
        }
        assert!(stage_status_change_allowed(STAGE_RUNNING, STAGE_SKIPPED));
        assert!(stage_status_change_allowed(STAGE_NOT_STARTED, STAGE_EXITED));
        assert!(stage_status_change_allowed(STAGE_SUCCESS, STAGE_SUCCESS));
        assert!(!stage_status_change_allowed(STAGE_SUCCESS, STAGE_SKIPPED));
        assert!(!stage_status_change_allowed(STAGE_FAILURE, STAGE_RUNNING));
    }

    fn node(status: Option<i32>) -> ChainNode {
        ChainNode {
            application_ref: None,
            deployment_ref: status.map(|status| ChainDeploymentRef {
                deployment_id: "d".into(),
                status,
                status_reason: String::new(),
            }),
        }
    }

    #[test]
    fn block_and_chain_desired_status() {
        let mut block = ChainBlock {
            nodes: vec![node(Some(DEP_SUCCESS)), node(None)],
            status: ChainBlockStatus::DeploymentBlockPending as i32,
            started_at: 0,
            completed_at: 0,
        };
        // One node has no deployment yet: stays pending.
        assert_eq!(chain_block_desired_status(&block), block.status);
        block.nodes[1] = node(Some(DEP_RUNNING));
        assert_eq!(chain_block_desired_status(&block), BLOCK_RUNNING);
        block.nodes[1] = node(Some(DEP_CANCELLED));
        assert_eq!(chain_block_desired_status(&block), BLOCK_CANCELLED);
        block.nodes[0] = node(Some(DEP_FAILURE));
        assert_eq!(chain_block_desired_status(&block), BLOCK_FAILURE);
        block.nodes = vec![node(Some(DEP_SUCCESS)), node(Some(DEP_SUCCESS))];
        assert_eq!(chain_block_desired_status(&block), BLOCK_SUCCESS);
        block.status = BLOCK_FAILURE;
        assert_eq!(
            chain_block_desired_status(&block),
            BLOCK_FAILURE,
            "completed is final"
        );

        let mut chain = DeploymentChain {
            status: ChainStatus::DeploymentChainPending as i32,
            blocks: vec![
                ChainBlock {
                    status: BLOCK_SUCCESS,
                    ..Default::default()
                },
                ChainBlock {
                    status: BLOCK_RUNNING,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(chain_desired_status(&chain), CHAIN_RUNNING);
        chain.blocks[1].status = BLOCK_SUCCESS;
        assert_eq!(chain_desired_status(&chain), CHAIN_SUCCESS);
        chain.blocks[1].status = BLOCK_CANCELLED;
        assert_eq!(chain_desired_status(&chain), CHAIN_CANCELLED);
        chain.blocks[0].status = BLOCK_FAILURE;
        assert_eq!(chain_desired_status(&chain), CHAIN_FAILURE);
        chain.status = CHAIN_SUCCESS;
        assert_eq!(
            chain_desired_status(&chain),
            CHAIN_SUCCESS,
            "completed is final"
        );
    }
}
