//! The PipedService calls a simulated piped makes, and upstream's cadence for each.
//!
//! Intervals were read from upstream PipeCD's classic piped (pkg/app/piped/...; the file is
//! named beside each constant). A simulated piped joins a fleet in steady state: the first
//! tick of each periodic loop falls at a random point of its period (a fleet's pipeds were
//! started at different times), and the calls upstream makes once when a piped starts are
//! made once, when the simulated piped starts.

use std::time::Duration;

/// `apistore/commandstore/store.go`: the command store syncs every 5 s
/// (ListUnhandledCommands).
pub const COMMAND_POLL: Duration = Duration::from_secs(5);
/// `apistore/deploymentstore/store.go`: the deployment store syncs every 10 s
/// (ListNotCompletedDeployments); the controller plans from what it lists.
pub const DEPLOYMENT_POLL: Duration = Duration::from_secs(10);
/// `apistore/applicationstore/store.go`: ListApplications at start, then every minute.
pub const APPLICATION_POLL: Duration = Duration::from_secs(60);
/// `apistore/eventstore/store.go`: ListEvents (not handled, last 24 h) at start, then
/// every minute.
pub const EVENT_POLL: Duration = Duration::from_secs(60);
/// `eventwatcher/eventwatcher.go`: per configured repository, every minute (default
/// `checkInterval`), a ListApplications; GetLatestEvent and ReportEventStatuses only when
/// the event store holds events not handled yet, which a simulated fleet never registers.
pub const EVENT_WATCHER: Duration = Duration::from_secs(60);
/// `statsreporter/reporter.go`: ReportStat every minute (first one after a minute).
pub const STATS: Duration = Duration::from_secs(60);
/// `driftdetector/kubernetes/detector.go` checks every minute; `driftdetector/detector.go`
/// reports an application's sync state only when it differs from the last one reported.
pub const DRIFT_CHECK: Duration = Duration::from_secs(60);
/// `livestatereporter/kubernetes/reporter.go`: one ReportApplicationLiveState per
/// application when the state store is ready, then every 10 minutes.
pub const LIVE_STATE_SNAPSHOT: Duration = Duration::from_secs(600);
/// `livestatereporter/kubernetes/reporter.go`: resource events are flushed every 5 s, only
/// when there are some (here: the resources a finished deployment changed).
pub const LIVE_STATE_EVENTS: Duration = Duration::from_secs(5);

/// How long a simulated piped keeps retrying a call turned away with `UNAVAILABLE`: a
/// call that has not succeeded a minute after its first attempt failed (issue 34).
pub const RETRY_WINDOW: Duration = Duration::from_secs(60);

/// The wait before retry number `attempt` (1 for the first retry) of a call turned away
/// with `UNAVAILABLE`, `uniform` being a random number in [0, 1): upstream's
/// `pipedservice.NewRetry` (`pkg/app/server/service/pipedservice/retry.go`), an
/// exponential backoff with full jitter (`pkg/backoff/exponential.go`) from 2 s, capped
/// at a minute. Upstream's reporters (stage and deployment status, piped meta, the most
/// recent deployment) retry so; its polling stores make the same call again at their
/// next tick (5–60 s later).
/// Deviation: every simulated call retries with this backoff, polls included (instead of
/// at the next tick), and only on `UNAVAILABLE` (upstream also retries other codes it
/// deems transient, such as `INTERNAL`, which the simulator counts as failures at once).
pub fn retry_wait(attempt: u32, uniform: f64) -> Duration {
    const BASE: Duration = Duration::from_secs(2);
    const MAX: Duration = Duration::from_secs(60);
    if attempt == 0 {
        return Duration::ZERO;
    }
    let ceiling = BASE
        .checked_mul(1u32 << (attempt - 1).min(16))
        .map_or(MAX, |d| d.min(MAX));
    ceiling.mul_f64(uniform.clamp(0.0, 1.0))
}

macro_rules! rpcs {
    ($($variant:ident),* $(,)?) => {
        /// One PipedService method.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Rpc {
            $($variant),*
        }

        impl Rpc {
            pub const ALL: &'static [Rpc] = &[$(Rpc::$variant),*];

            /// The method name, as in the gRPC path.
            pub fn name(self) -> &'static str {
                match self {
                    $(Rpc::$variant => stringify!($variant)),*
                }
            }
        }
    };
}

rpcs!(
    ReportPipedMeta,
    ReportUnregisteredApplicationConfigurations,
    ListApplications,
    ListUnhandledCommands,
    ListNotCompletedDeployments,
    ListEvents,
    ReportStat,
    ReportApplicationLiveState,
    ReportApplicationLiveStateEvents,
    ReportApplicationSyncState,
    CreateDeployment,
    ReportApplicationMostRecentDeployment,
    GetApplicationMostRecentDeployment,
    ReportApplicationDeployingStatus,
    ReportDeploymentPlanned,
    ReportDeploymentStatusChanged,
    ReportStageStatusChanged,
    ReportStageLogs,
    ReportStageLogsFromLastCheckpoint,
    ReportDeploymentCompleted,
);

impl Rpc {
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The PipedService RPCs a simulated piped does not call, and why: every RPC of the
/// service is either an [`Rpc`] or here (a test checks both against `proto/`), so a new
/// RPC is simulated or excluded on purpose.
pub const NOT_SIMULATED: &[(&str, &str)] = &[
    (
        "GetDeployment",
        "the classic piped reads deployments from its store, filled by ListNotCompletedDeployments",
    ),
    (
        "SaveDeploymentMetadata",
        "written by stages that keep metadata; the simulated pipeline's stages keep none",
    ),
    (
        "SaveDeploymentSharedMetadata",
        "written by stages that keep metadata; the simulated pipeline's stages keep none",
    ),
    ("SaveDeploymentPluginMetadata", "pipedv1 plugins only"),
    (
        "SaveStageMetadata",
        "written by stages that keep metadata; the simulated pipeline's stages keep none",
    ),
    (
        "ReportCommandHandled",
        "only after a command (sync, cancel, approval, plan preview); none is sent to a simulated fleet",
    ),
    (
        "GetLatestEvent",
        "only when the event store holds events not handled yet, which a simulated fleet never registers",
    ),
    (
        "ReportEventStatuses",
        "only when the event store holds events not handled yet, which a simulated fleet never registers",
    ),
    (
        "GetLatestAnalysisResult",
        "the ANALYSIS stage only, absent from the simulated pipeline",
    ),
    (
        "PutLatestAnalysisResult",
        "the ANALYSIS stage only, absent from the simulated pipeline",
    ),
    (
        "GetDesiredVersion",
        "called by the piped launcher, a process of its own, not by the piped",
    ),
    (
        "UpdateApplicationConfigurations",
        "only when a registered application's config changes in Git, which a simulated fleet's never does",
    ),
    (
        "CreateDeploymentChain",
        "deployment chains only (postSync.chain), absent from the simulated applications",
    ),
    (
        "InChainDeploymentPlannable",
        "deployment chains only (postSync.chain), absent from the simulated applications",
    ),
    ("GetApplicationSharedObject", "pipedv1 plugins only"),
    ("PutApplicationSharedObject", "pipedv1 plugins only"),
];

/// Stages of a simulated deployment, as a Kubernetes canary pipeline plans them.
pub const STAGES: [&str; 3] = [
    "K8S_CANARY_ROLLOUT",
    "K8S_PRIMARY_ROLLOUT",
    "K8S_CANARY_CLEAN",
];

/// Calls a deployment makes from trigger to completion, at most: CreateDeployment and the
/// PENDING reference (trigger); the most recent successful deployment (once per
/// application), deploying on, PLANNED, RUNNING (controller); per stage RUNNING, one live
/// log flush, the final checkpoint and SUCCESS (scheduler, log persister); COMPLETED, the
/// SUCCESS reference, deploying off.
pub const MAX_CALLS_PER_DEPLOYMENT: u64 = 2 + 4 + 4 * STAGES.len() as u64 + 3;

/// Calls of each RPC in one deployment once a piped has run a while, for the monthly
/// projection: as [`MAX_CALLS_PER_DEPLOYMENT`] without the lookup of the most recent
/// successful deployment (a piped remembers it per application), plus the drift detector's
/// report of the new sync state and a live-state events flush of the changed resources.
pub fn calls_per_deployment(rpc: Rpc) -> u64 {
    let stages = STAGES.len() as u64;
    match rpc {
        Rpc::CreateDeployment
        | Rpc::ReportDeploymentPlanned
        | Rpc::ReportDeploymentStatusChanged
        | Rpc::ReportDeploymentCompleted
        | Rpc::ReportApplicationSyncState
        | Rpc::ReportApplicationLiveStateEvents => 1,
        Rpc::ReportApplicationMostRecentDeployment | Rpc::ReportApplicationDeployingStatus => 2,
        Rpc::ReportStageStatusChanged => 2 * stages,
        Rpc::ReportStageLogs | Rpc::ReportStageLogsFromLastCheckpoint => stages,
        _ => 0,
    }
}

/// How many times a loop of `period`, whose first tick falls within its first period after
/// the piped starts, can tick in `run`: at most ⌊run/period⌋ + 1.
pub fn max_ticks(run: Duration, period: Duration) -> u64 {
    (run.as_nanos() / period.as_nanos().max(1)) as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_indexes_line_up() {
        for (i, rpc) in Rpc::ALL.iter().enumerate() {
            assert_eq!(rpc.index(), i);
        }
        assert_eq!(Rpc::ListUnhandledCommands.name(), "ListUnhandledCommands");
        assert_eq!(Rpc::ALL.len(), 20);
    }

    /// Every PipedService RPC of `proto/` is simulated or excluded with a reason, and
    /// no name is stale.
    #[test]
    fn every_piped_rpc_is_simulated_or_excluded() {
        let mut ours: Vec<&str> = Rpc::ALL
            .iter()
            .map(|r| r.name())
            .chain(NOT_SIMULATED.iter().map(|(name, _)| *name))
            .collect();
        ours.sort_unstable();
        let mut proto = wisp_proto::rpcs::PIPED_SERVICE.to_vec();
        proto.sort_unstable();
        assert_eq!(ours, proto, "simulated or in NOT_SIMULATED, each once");
        assert!(NOT_SIMULATED.iter().all(|(_, why)| !why.is_empty()));
    }

    #[test]
    fn deployment_calls() {
        let total: u64 = Rpc::ALL.iter().map(|&r| calls_per_deployment(r)).sum();
        // The bound leaves out the two induced reports and includes the one-off lookup.
        assert_eq!(total, MAX_CALLS_PER_DEPLOYMENT - 1 + 2);
        assert_eq!(calls_per_deployment(Rpc::ListUnhandledCommands), 0);
    }

    #[test]
    fn retry_backoff_is_upstreams() {
        // Full jitter: the ceiling doubles from 2 s and stops at a minute.
        assert_eq!(retry_wait(0, 0.9), Duration::ZERO);
        assert_eq!(retry_wait(1, 1.0), Duration::from_secs(2));
        assert_eq!(retry_wait(2, 1.0), Duration::from_secs(4));
        assert_eq!(retry_wait(3, 0.5), Duration::from_secs(4));
        assert_eq!(retry_wait(6, 1.0), Duration::from_secs(60));
        assert_eq!(retry_wait(40, 1.0), Duration::from_secs(60));
        assert_eq!(retry_wait(4, 0.0), Duration::ZERO);
    }

    #[test]
    fn tick_bound() {
        let p = Duration::from_secs(5);
        assert_eq!(max_ticks(Duration::from_secs(12), p), 3);
        assert_eq!(max_ticks(Duration::from_secs(10), p), 3);
        assert_eq!(max_ticks(Duration::from_secs(4), p), 1);
    }
}
