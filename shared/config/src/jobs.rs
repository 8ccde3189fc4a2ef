//! `jobs` (a Wisp extension; upstream runs these as always-on loops with fixed periods):
//! how often `wisp serve` runs each scheduled job, and the two ages the jobs act on. The
//! Lambda deployment runs the same jobs from EventBridge schedules (the Terraform
//! variable `job_schedules`, the SAM template's `Schedule` events) with the same
//! defaults; the ages apply to both.
//!
//! ```yaml
//! jobs:
//!   orphanCommands: {interval: 6h, commandTimeout: 24h}
//!   pipedStats: {interval: 24h}
//!   planPreviewOutputs: {interval: 24h, outputTtl: 48h}
//!   deploymentChains: {interval: 1m}
//!   insights: {interval: 1h}
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::GoDuration;

/// `jobs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct JobsConfig {
    pub orphan_commands: OrphanCommandsJob,
    pub piped_stats: JobInterval,
    pub plan_preview_outputs: PlanPreviewOutputsJob,
    pub deployment_chains: JobInterval,
    pub insights: JobInterval,
}

/// A job that has only a period.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct JobInterval {
    /// Time between the starts of two runs; unset or zero: the job's default.
    pub interval: GoDuration,
}

/// `jobs.orphanCommands`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OrphanCommandsJob {
    pub interval: GoDuration,
    /// A command no piped handled for this long times out; default 24h (upstream's).
    pub command_timeout: GoDuration,
}

/// `jobs.planPreviewOutputs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PlanPreviewOutputsJob {
    pub interval: GoDuration,
    /// Plan-preview outputs older than this are deleted; default 48h (upstream's).
    pub output_ttl: GoDuration,
}

/// Default periods: those of the Lambda deployment's schedules.
pub const DEFAULT_ORPHAN_COMMANDS_INTERVAL: Duration = Duration::from_secs(6 * 3600);
pub const DEFAULT_PIPED_STATS_INTERVAL: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_PLAN_PREVIEW_OUTPUTS_INTERVAL: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_DEPLOYMENT_CHAINS_INTERVAL: Duration = Duration::from_secs(60);
pub const DEFAULT_INSIGHTS_INTERVAL: Duration = Duration::from_secs(3600);
/// Upstream's ages.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_PLAN_PREVIEW_OUTPUT_TTL: Duration = Duration::from_secs(48 * 3600);

fn or_default(value: GoDuration, default: Duration) -> Duration {
    if value.as_std().is_zero() {
        default
    } else {
        value.as_std()
    }
}

impl JobsConfig {
    pub fn orphan_commands_interval(&self) -> Duration {
        or_default(
            self.orphan_commands.interval,
            DEFAULT_ORPHAN_COMMANDS_INTERVAL,
        )
    }
    pub fn piped_stats_interval(&self) -> Duration {
        or_default(self.piped_stats.interval, DEFAULT_PIPED_STATS_INTERVAL)
    }
    pub fn plan_preview_outputs_interval(&self) -> Duration {
        or_default(
            self.plan_preview_outputs.interval,
            DEFAULT_PLAN_PREVIEW_OUTPUTS_INTERVAL,
        )
    }
    pub fn deployment_chains_interval(&self) -> Duration {
        or_default(
            self.deployment_chains.interval,
            DEFAULT_DEPLOYMENT_CHAINS_INTERVAL,
        )
    }
    pub fn insights_interval(&self) -> Duration {
        or_default(self.insights.interval, DEFAULT_INSIGHTS_INTERVAL)
    }
    pub fn command_timeout(&self) -> Duration {
        or_default(
            self.orphan_commands.command_timeout,
            DEFAULT_COMMAND_TIMEOUT,
        )
    }
    pub fn plan_preview_output_ttl(&self) -> Duration {
        or_default(
            self.plan_preview_outputs.output_ttl,
            DEFAULT_PLAN_PREVIEW_OUTPUT_TTL,
        )
    }
}
