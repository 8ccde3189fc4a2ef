//! `spec` of the control-plane configuration and its small sections.

use std::collections::HashSet;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::{
    CacheConfig, DatastoreConfig, FilestoreConfig, GoDuration, SecretString, SharedSsoConfig,
};

/// Cache TTL when `cache.ttl` is unset or zero.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(5 * 60);
/// Default `insightCollector.application.schedule` (cron): every hour at minute 0.
pub const DEFAULT_APPLICATION_INSIGHT_SCHEDULE: &str = "0 * * * *";
/// Default `insightCollector.deployment.schedule` (cron): every hour at minute 30.
pub const DEFAULT_DEPLOYMENT_INSIGHT_SCHEDULE: &str = "30 * * * *";
/// Default `insightCollector.deployment.chunkMaxCount`.
pub const DEFAULT_DEPLOYMENT_CHUNK_MAX_COUNT: u32 = 1000;

/// `spec`: everything the control plane is configured with.
///
/// Every section may be omitted. An omitted `datastore`/`filestore` means Wisp's
/// embedded `LOCAL` stores (upstream has no default there).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ControlPlaneSpec {
    /// Public base URL of the control plane (OAuth callbacks, links sent to pipeds).
    /// Required for SSO.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Secret used to sign the OAuth `state` parameter.
    #[serde(skip_serializing_if = "SecretString::is_empty")]
    pub state_key: SecretString,
    #[serde(deserialize_with = "null_as_default")]
    pub datastore: DatastoreConfig,
    #[serde(deserialize_with = "null_as_default")]
    pub filestore: FilestoreConfig,
    #[serde(deserialize_with = "null_as_default")]
    pub cache: CacheConfig,
    #[serde(deserialize_with = "null_as_default")]
    pub insight_collector: InsightCollectorConfig,
    /// How often `wisp serve` runs the scheduled jobs (a Wisp extension).
    #[serde(deserialize_with = "null_as_default")]
    pub jobs: crate::JobsConfig,
    /// Bounds on stored stage logs (a Wisp extension).
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "StageLogsConfig::is_default"
    )]
    pub stage_logs: StageLogsConfig,
    /// The audit log (a Wisp extension): `audit: {retention: 2160h}`.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "AuditConfig::is_default"
    )]
    pub audit: AuditConfig,
    /// The piped releases the console's upgrade dialog offers (a Wisp extension).
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "crate::PipedReleasesConfig::is_default"
    )]
    pub piped_releases: crate::PipedReleasesConfig,
    /// Debug/quickstart projects that live in the configuration, not in the datastore.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub projects: Vec<ProjectConfig>,
    #[serde(
        rename = "sharedSSOConfigs",
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub shared_sso_configs: Vec<SharedSsoConfig>,
    /// Projects (ids, or `*` for all) whose OIDC logins read roles only from the
    /// project's `rolesClaimKey` (a Wisp extension). Any other project without one reads
    /// upstream's default role claims (`groups`, `roles`, `cognito:groups`,
    /// `custom:roles`, `custom:groups`), as upstream does.
    #[serde(
        rename = "oidcNoDefaultRoleClaims",
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub oidc_no_default_role_claims: Vec<String>,
}

impl ControlPlaneSpec {
    /// The configuration-defined project with this id.
    pub fn find_project(&self, id: &str) -> Option<&ProjectConfig> {
        self.projects.iter().find(|p| p.id == id)
    }

    /// Whether OIDC logins of `project` may read roles from upstream's default role
    /// claims when the project names no `rolesClaimKey`.
    pub fn oidc_default_role_claims(&self, project: &str) -> bool {
        !self
            .oidc_no_default_role_claims
            .iter()
            .any(|p| p == "*" || p == project)
    }

    /// The shared SSO configuration with this name.
    pub fn shared_sso_config(&self, name: &str) -> Option<&SharedSsoConfig> {
        self.shared_sso_configs.iter().find(|s| s.name == name)
    }

    /// Replaces zero values by upstream's defaults (upstream runs `creasty/defaults`
    /// after decoding, which treats zero values as unset).
    pub(crate) fn apply_defaults(&mut self) {
        if self.address.as_deref().is_some_and(|a| a.trim().is_empty()) {
            self.address = None;
        }
        if self.cache.ttl.is_zero() {
            self.cache.ttl = GoDuration(DEFAULT_CACHE_TTL);
        }
        let app = &mut self.insight_collector.application;
        if app.schedule.trim().is_empty() {
            app.schedule = DEFAULT_APPLICATION_INSIGHT_SCHEDULE.to_owned();
        }
        let dep = &mut self.insight_collector.deployment;
        if dep.schedule.trim().is_empty() {
            dep.schedule = DEFAULT_DEPLOYMENT_INSIGHT_SCHEDULE.to_owned();
        }
        if dep.chunk_max_count == 0 {
            dep.chunk_max_count = DEFAULT_DEPLOYMENT_CHUNK_MAX_COUNT;
        }
    }

    /// Every consistency problem, as human-readable strings.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.datastore.problems(&mut out);
        self.filestore.problems(&mut out);
        self.cache.problems(&mut out);
        self.piped_releases.problems(&mut out);
        let cap = self.stage_logs.max_bytes_per_stage;
        if cap != 0 && cap < 4096 {
            out.push("stageLogs.maxBytesPerStage: must be at least 4096 bytes (or 0 for the default, 4 MiB)".to_string());
        }

        let mut ids = HashSet::new();
        for (i, p) in self.projects.iter().enumerate() {
            let at = format!("projects[{i}]");
            if p.id.trim().is_empty() {
                out.push(format!("{at}: id must not be empty"));
            } else if !ids.insert(p.id.as_str()) {
                out.push(format!("{at}: duplicate project id {:?}", p.id));
            }
            if p.static_admin.username.trim().is_empty() {
                out.push(format!("{at}: staticAdmin.username is required"));
            }
            if p.static_admin.password_hash.expose().trim().is_empty() {
                out.push(format!("{at}: staticAdmin.passwordHash is required"));
            }
        }

        let mut names = HashSet::new();
        for (i, s) in self.shared_sso_configs.iter().enumerate() {
            let at = format!("sharedSSOConfigs[{i}]");
            if s.name.trim().is_empty() {
                out.push(format!("{at}: name must not be empty"));
            } else if !names.insert(s.name.as_str()) {
                out.push(format!(
                    "{at}: duplicate shared SSO config name {:?}",
                    s.name
                ));
            }
            s.problems(&at, &mut out);
        }
        out
    }
}

/// `insightCollector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InsightCollectorConfig {
    #[serde(deserialize_with = "null_as_default")]
    pub application: InsightApplicationCollector,
    #[serde(deserialize_with = "null_as_default")]
    pub deployment: InsightDeploymentCollector,
}

/// `insightCollector.application`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InsightApplicationCollector {
    /// Default true.
    pub enabled: bool,
    /// Cron schedule. Default `0 * * * *`.
    pub schedule: String,
}

impl Default for InsightApplicationCollector {
    fn default() -> Self {
        InsightApplicationCollector {
            enabled: true,
            schedule: DEFAULT_APPLICATION_INSIGHT_SCHEDULE.to_owned(),
        }
    }
}

/// `insightCollector.deployment`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InsightDeploymentCollector {
    /// Default true.
    pub enabled: bool,
    /// Cron schedule. Default `30 * * * *`.
    pub schedule: String,
    /// Maximum number of deployments stored in one chunk. Default (also when zero) 1000.
    pub chunk_max_count: u32,
}

impl Default for InsightDeploymentCollector {
    fn default() -> Self {
        InsightDeploymentCollector {
            enabled: true,
            schedule: DEFAULT_DEPLOYMENT_INSIGHT_SCHEDULE.to_owned(),
            chunk_max_count: DEFAULT_DEPLOYMENT_CHUNK_MAX_COUNT,
        }
    }
}

/// One entry of `projects`: a debug/quickstart project defined in the configuration.
/// Such projects are never stored in the datastore and are read-only from the web.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ProjectConfig {
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub desc: String,
    pub static_admin: StaticAdmin,
}

/// `projects[].staticAdmin`: the project's username/password account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StaticAdmin {
    pub username: String,
    /// bcrypt hash of the password.
    pub password_hash: SecretString,
}

/// A section written as `key:` with no value (YAML null) reads as its default, as in
/// upstream (where YAML is turned into JSON and `null` leaves a Go struct untouched).
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `stageLogs` (a Wisp extension): `{maxBytesPerStage: 4194304}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StageLogsConfig {
    /// Bytes one stage's log may hold as stored; past it the log ends with a block that
    /// says it was cut. Unset or 0: 4 MiB. At least 4 KiB.
    pub max_bytes_per_stage: u64,
}

impl StageLogsConfig {
    pub const DEFAULT_MAX_BYTES_PER_STAGE: u64 = 4 * 1024 * 1024;

    fn is_default(&self) -> bool {
        *self == Self::default()
    }

    pub fn max_bytes_per_stage(&self) -> usize {
        let bytes = match self.max_bytes_per_stage {
            0 => Self::DEFAULT_MAX_BYTES_PER_STAGE,
            n => n,
        };
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }
}

/// `audit` (a Wisp extension): how long audit entries are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Unset or zero: 90 days (`2160h`).
    pub retention: GoDuration,
}

impl AuditConfig {
    /// The default retention: 90 days.
    pub const DEFAULT_RETENTION: Duration = Duration::from_secs(90 * 24 * 3600);

    fn is_default(&self) -> bool {
        *self == Self::default()
    }

    pub fn retention(&self) -> Duration {
        if self.retention.is_zero() {
            Self::DEFAULT_RETENTION
        } else {
            self.retention.as_std()
        }
    }
}
