//! Request and entity validation: the rules upstream declares with `(validate.rules)`
//! annotations (protoc-gen-validate), applied the way PGV's generated `Validate()` does.
//!
//! - Every message of the wire contract implements [`Validate`]; a message without rules of
//!   its own still checks the sub-messages it carries.
//! - A set sub-message (singular, repeated item or map value) is validated recursively;
//!   `message.required` additionally demands that it be set.
//! - The first broken rule wins. Its [`ValidationError::field`] is a path rooted at the
//!   validated message, e.g. `CreateDeploymentRequest.deployment.stages[0].id` or
//!   `Event.contexts[bad_key]`; the message repeats PGV's wording.

use std::collections::HashMap;
use std::fmt::Display;

use wisp_proto::{model, pipedservice};

/// Checks a wire message against upstream's validation rules.
pub trait Validate {
    fn validate(&self) -> Result<(), ValidationError>;
}

/// The first rule a message breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {message}")]
pub struct ValidationError {
    /// `Message.field`, extended by `.field`, `[index]` or `[key]` through nested messages.
    pub field: String,
    /// Which rule failed, e.g. `value length must be at least 1 runes`.
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A string rule upstream writes as a regular expression, checked by hand.
#[derive(Clone, Copy)]
struct Pattern {
    source: &'static str,
    test: fn(&str) -> bool,
}

/// `^[^/].+$` under Go's RE2 flags: the first character is anything but `/` (a newline
/// included), then at least one more character, none of them a newline.
const RELATIVE_PATH: Pattern = Pattern {
    source: "^[^/].+$",
    test: |s| {
        let mut chars = s.chars();
        match chars.next() {
            Some(first) if first != '/' => {
                let rest = chars.as_str();
                !rest.is_empty() && !rest.contains('\n')
            }
            _ => false,
        }
    },
};

/// `^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$`: ASCII alphanumeric words joined by single dashes.
const DASHED_ALNUM: Pattern = Pattern {
    source: "^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$",
    test: |s| {
        s.split('-')
            .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric()))
    },
};

type Checked = Result<(), ValidationError>;

/// The checks of one message; `.0` is the message name heading error paths.
struct Fields(&'static str);

impl Fields {
    fn fail(&self, field: impl Display, message: impl Into<String>) -> Checked {
        Err(ValidationError::new(format!("{}.{field}", self.0), message))
    }

    fn check(&self, ok: bool, field: impl Display, message: impl FnOnce() -> String) -> Checked {
        if ok {
            Ok(())
        } else {
            self.fail(field, message())
        }
    }

    /// Re-roots a sub-message's error (`Child.x`) under this message (`Parent.field.x`).
    fn nested(&self, field: impl Display, result: Checked) -> Checked {
        result.map_err(|e| {
            let rest = e.field.split_once('.').map_or("", |(_, rest)| rest);
            let field = if rest.is_empty() {
                format!("{}.{field}", self.0)
            } else {
                format!("{}.{field}.{rest}", self.0)
            };
            ValidationError { field, ..e }
        })
    }

    fn min_len(&self, field: &str, value: &str, min: usize) -> Checked {
        self.check(value.chars().count() >= min, field, || {
            format!("value length must be at least {min} runes")
        })
    }

    fn matches(&self, field: &str, value: &str, pattern: Pattern) -> Checked {
        self.check((pattern.test)(value), field, || {
            format!("value does not match regex pattern {:?}", pattern.source)
        })
    }

    fn str_in(&self, field: &str, value: &str, list: &[&str]) -> Checked {
        self.check(list.contains(&value), field, || {
            format!("value must be in list [{}]", list.join(" "))
        })
    }

    fn defined<E: TryFrom<i32>>(&self, field: impl Display, value: i32) -> Checked {
        self.check(E::try_from(value).is_ok(), field, || {
            "value must be one of the defined enum values".into()
        })
    }

    fn enum_in(&self, field: &str, value: i32, list: &[i32]) -> Checked {
        self.check(list.contains(&value), field, || {
            let list: Vec<String> = list.iter().map(i32::to_string).collect();
            format!("value must be in list [{}]", list.join(" "))
        })
    }

    fn gt(&self, field: &str, value: i64, bound: i64) -> Checked {
        self.check(value > bound, field, || {
            format!("value must be greater than {bound}")
        })
    }

    fn gte(&self, field: &str, value: i64, bound: i64) -> Checked {
        self.check(value >= bound, field, || {
            format!("value must be greater than or equal to {bound}")
        })
    }

    fn gt_f32(&self, field: &str, value: f32, bound: f32) -> Checked {
        self.check(value > bound, field, || {
            format!("value must be greater than {bound}")
        })
    }

    fn required<T: Validate>(&self, field: &str, value: &Option<T>) -> Checked {
        match value {
            Some(v) => self.nested(field, v.validate()),
            None => self.fail(field, "value is required"),
        }
    }

    fn optional<T: Validate>(&self, field: &str, value: &Option<T>) -> Checked {
        value
            .as_ref()
            .map_or(Ok(()), |v| self.nested(field, v.validate()))
    }

    fn min_items<T>(&self, field: &str, items: &[T], min: usize) -> Checked {
        self.check(items.len() >= min, field, || {
            format!("value must contain at least {min} item(s)")
        })
    }

    fn each<T: Validate>(&self, field: &str, items: &[T]) -> Checked {
        items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| self.nested(format_args!("{field}[{i}]"), v.validate()))
    }

    fn each_defined<E: TryFrom<i32>>(&self, field: &str, items: &[i32]) -> Checked {
        items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| self.defined::<E>(format_args!("{field}[{i}]"), *v))
    }

    fn each_value<T: Validate>(&self, field: &str, map: &HashMap<String, T>) -> Checked {
        map.iter()
            .try_for_each(|(k, v)| self.nested(format_args!("{field}[{k}]"), v.validate()))
    }

    fn map_keys_min_len<V>(&self, field: &str, map: &HashMap<String, V>, min: usize) -> Checked {
        map.keys()
            .try_for_each(|k| self.min_len(&format!("{field}[{k}]"), k, min))
    }

    fn map_values_min_len(
        &self,
        field: &str,
        map: &HashMap<String, String>,
        min: usize,
    ) -> Checked {
        map.iter()
            .try_for_each(|(k, v)| self.min_len(&format!("{field}[{k}]"), v, min))
    }

    fn map_keys_match<V>(
        &self,
        field: &str,
        map: &HashMap<String, V>,
        pattern: Pattern,
    ) -> Checked {
        map.keys()
            .try_for_each(|k| self.matches(&format!("{field}[{k}]"), k, pattern))
    }
}

/// Messages that carry no rules and no sub-messages: always valid.
macro_rules! no_rules {
    ($($ty:ty),* $(,)?) => {
        $(impl Validate for $ty {
            fn validate(&self) -> Result<(), ValidationError> {
                Ok(())
            }
        })*
    };
}

no_rules!(
    model::TerraformApplicationLiveState,
    model::DeployTargets,
    model::deployment_metadata::KeyValues,
    model::InsightApplicationCount,
    model::ProjectRbacConfig,
    model::Rbac,
    model::Role,
);

no_rules!(
    pipedservice::ReportStatRequest,
    pipedservice::ReportStatResponse,
    pipedservice::ListApplicationsRequest,
    pipedservice::ReportApplicationSyncStateResponse,
    pipedservice::ReportApplicationDeployingStatusResponse,
    pipedservice::ReportApplicationMostRecentDeploymentResponse,
    pipedservice::ListNotCompletedDeploymentsRequest,
    pipedservice::CreateDeploymentResponse,
    pipedservice::ReportDeploymentPlannedResponse,
    pipedservice::ReportDeploymentStatusChangedResponse,
    pipedservice::ReportDeploymentCompletedResponse,
    pipedservice::SaveDeploymentMetadataResponse,
    pipedservice::SaveDeploymentSharedMetadataResponse,
    pipedservice::SaveDeploymentPluginMetadataResponse,
    pipedservice::SaveStageMetadataResponse,
    pipedservice::ReportStageLogsResponse,
    pipedservice::ReportStageLogsFromLastCheckpointResponse,
    pipedservice::ReportStageStatusChangedResponse,
    pipedservice::ListUnhandledCommandsRequest,
    pipedservice::ReportCommandHandledResponse,
    pipedservice::ReportApplicationLiveStateResponse,
    pipedservice::ReportApplicationLiveStateEventsResponse,
    pipedservice::ReportEventStatusesResponse,
    pipedservice::PutLatestAnalysisResultResponse,
    pipedservice::GetDesiredVersionRequest,
    pipedservice::GetDesiredVersionResponse,
    pipedservice::UpdateApplicationConfigurationsResponse,
    pipedservice::ReportUnregisteredApplicationConfigurationsResponse,
    pipedservice::create_deployment_chain_request::ApplicationMatcher,
    pipedservice::CreateDeploymentChainResponse,
    pipedservice::InChainDeploymentPlannableResponse,
    pipedservice::GetApplicationSharedObjectResponse,
    pipedservice::PutApplicationSharedObjectResponse,
);

impl Validate for model::AnalysisResult {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("AnalysisResult");
        f.gt("start_time", self.start_time, 0)?;
        Ok(())
    }
}

impl Validate for model::ApiKey {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("APIKey");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("key_hash", &self.key_hash, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.defined::<model::api_key::Role>("role", self.role)?;
        f.min_len("creator", &self.creator, 1)?;
        f.gte("last_used_at", self.last_used_at, 0)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::Application {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Application");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.defined::<model::ApplicationKind>("kind", self.kind)?;
        f.required("git_path", &self.git_path)?;
        f.each_value("deploy_targets_by_plugin", &self.deploy_targets_by_plugin)?;
        f.optional(
            "most_recently_successful_deployment",
            &self.most_recently_successful_deployment,
        )?;
        f.optional(
            "most_recently_triggered_deployment",
            &self.most_recently_triggered_deployment,
        )?;
        f.optional("sync_state", &self.sync_state)?;
        f.gte("deleted_at", self.deleted_at, 0)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::ApplicationSyncState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationSyncState");
        f.defined::<model::ApplicationSyncStatus>("status", self.status)?;
        f.gt("timestamp", self.timestamp, 0)?;
        Ok(())
    }
}

impl Validate for model::ApplicationDeploymentReference {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationDeploymentReference");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.required("trigger", &self.trigger)?;
        f.each("versions", &self.versions)?;
        f.gt("started_at", self.started_at, 0)?;
        f.gte("completed_at", self.completed_at, 0)?;
        Ok(())
    }
}

impl Validate for model::ApplicationLiveStateSnapshot {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationLiveStateSnapshot");
        f.min_len("application_id", &self.application_id, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.defined::<model::ApplicationKind>("kind", self.kind)?;
        f.optional("kubernetes", &self.kubernetes)?;
        f.optional("terraform", &self.terraform)?;
        f.optional("cloudrun", &self.cloudrun)?;
        f.optional("lambda", &self.lambda)?;
        f.optional("ecs", &self.ecs)?;
        f.required("version", &self.version)?;
        f.optional("application_live_state", &self.application_live_state)?;
        Ok(())
    }
}

impl Validate for model::ApplicationLiveStateVersion {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationLiveStateVersion");
        f.gt("timestamp", self.timestamp, 0)?;
        f.gte("index", self.index, 0)?;
        Ok(())
    }
}

impl Validate for model::KubernetesApplicationLiveState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("KubernetesApplicationLiveState");
        f.each("resources", &self.resources)?;
        Ok(())
    }
}

impl Validate for model::CloudRunApplicationLiveState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("CloudRunApplicationLiveState");
        f.each("resources", &self.resources)?;
        Ok(())
    }
}

impl Validate for model::EcsApplicationLiveState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ECSApplicationLiveState");
        f.each("resources", &self.resources)?;
        Ok(())
    }
}

impl Validate for model::LambdaApplicationLiveState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("LambdaApplicationLiveState");
        f.each("resources", &self.resources)?;
        Ok(())
    }
}

impl Validate for model::ApplicationLiveState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationLiveState");
        f.each("resources", &self.resources)?;
        Ok(())
    }
}

impl Validate for model::ResourceState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ResourceState");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.defined::<model::resource_state::HealthStatus>("health_status", self.health_status)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::KubernetesResourceState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("KubernetesResourceState");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("api_version", &self.api_version, 1)?;
        f.min_len("kind", &self.kind, 1)?;
        f.defined::<model::kubernetes_resource_state::HealthStatus>(
            "health_status",
            self.health_status,
        )?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::KubernetesResourceStateEvent {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("KubernetesResourceStateEvent");
        f.min_len("id", &self.id, 1)?;
        f.min_len("application_id", &self.application_id, 1)?;
        f.defined::<model::kubernetes_resource_state_event::Type>("type", self.r#type)?;
        f.required("state", &self.state)?;
        f.required("snapshot_version", &self.snapshot_version)?;
        f.gt("created_at", self.created_at, 0)?;
        Ok(())
    }
}

impl Validate for model::CloudRunResourceState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("CloudRunResourceState");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("api_version", &self.api_version, 1)?;
        f.min_len("kind", &self.kind, 1)?;
        f.defined::<model::cloud_run_resource_state::HealthStatus>(
            "health_status",
            self.health_status,
        )?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::EcsResourceState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ECSResourceState");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("kind", &self.kind, 1)?;
        f.defined::<model::ecs_resource_state::HealthStatus>("health_status", self.health_status)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::LambdaResourceState {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("LambdaResourceState");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("kind", &self.kind, 1)?;
        f.defined::<model::lambda_resource_state::HealthStatus>(
            "health_status",
            self.health_status,
        )?;
        Ok(())
    }
}

impl Validate for model::Command {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command");
        f.min_len("id", &self.id, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.gte("handled_at", self.handled_at, 0)?;
        f.defined::<model::command::Type>("type", self.r#type)?;
        f.optional("sync_application", &self.sync_application)?;
        f.optional("update_application_config", &self.update_application_config)?;
        f.optional("cancel_deployment", &self.cancel_deployment)?;
        f.optional("approve_stage", &self.approve_stage)?;
        f.optional("build_plan_preview", &self.build_plan_preview)?;
        f.optional("chain_sync_application", &self.chain_sync_application)?;
        f.optional("skip_stage", &self.skip_stage)?;
        f.optional("restart_piped", &self.restart_piped)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::command::SyncApplication {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command_SyncApplication");
        f.min_len("application_id", &self.application_id, 1)?;
        Ok(())
    }
}

impl Validate for model::command::UpdateApplicationConfig {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command_UpdateApplicationConfig");
        f.min_len("application_id", &self.application_id, 1)?;
        f.min_len("config_path", &self.config_path, 1)?;
        f.min_len("config", &self.config, 1)?;
        Ok(())
    }
}

impl Validate for model::command::CancelDeployment {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command_CancelDeployment");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        Ok(())
    }
}

impl Validate for model::command::ApproveStage {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command_ApproveStage");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.min_len("stage_id", &self.stage_id, 1)?;
        Ok(())
    }
}

impl Validate for model::command::BuildPlanPreview {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command_BuildPlanPreview");
        f.min_len("repository_id", &self.repository_id, 1)?;
        f.min_len("head_branch", &self.head_branch, 1)?;
        f.min_len("head_commit", &self.head_commit, 1)?;
        f.min_len("base_branch", &self.base_branch, 1)?;
        f.gte("timeout", self.timeout, 0)?;
        Ok(())
    }
}

impl Validate for model::command::ChainSyncApplication {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command_ChainSyncApplication");
        f.min_len("application_id", &self.application_id, 1)?;
        Ok(())
    }
}

impl Validate for model::command::SkipStage {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command_SkipStage");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.min_len("stage_id", &self.stage_id, 1)?;
        Ok(())
    }
}

impl Validate for model::command::RestartPiped {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Command_RestartPiped");
        f.min_len("piped_id", &self.piped_id, 1)?;
        Ok(())
    }
}

impl Validate for model::ApplicationGitPath {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationGitPath");
        f.required("repo", &self.repo)?;
        f.matches("path", &self.path, RELATIVE_PATH)?;
        Ok(())
    }
}

impl Validate for model::ApplicationGitRepository {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationGitRepository");
        f.min_len("id", &self.id, 1)?;
        Ok(())
    }
}

impl Validate for model::ApplicationInfo {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationInfo");
        f.min_len("name", &self.name, 1)?;
        f.defined::<model::ApplicationKind>("kind", self.kind)?;
        f.min_len("repo_id", &self.repo_id, 1)?;
        f.matches("path", &self.path, RELATIVE_PATH)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        Ok(())
    }
}

impl Validate for model::ArtifactVersion {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ArtifactVersion");
        f.defined::<model::artifact_version::Kind>("kind", self.kind)?;
        Ok(())
    }
}

impl Validate for model::Deployment {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Deployment");
        f.min_len("id", &self.id, 1)?;
        f.min_len("application_id", &self.application_id, 1)?;
        f.min_len("application_name", &self.application_name, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.defined::<model::ApplicationKind>("kind", self.kind)?;
        f.required("git_path", &self.git_path)?;
        f.each_value("deploy_targets_by_plugin", &self.deploy_targets_by_plugin)?;
        f.required("trigger", &self.trigger)?;
        f.each("versions", &self.versions)?;
        f.defined::<model::DeploymentStatus>("status", self.status)?;
        f.each("stages", &self.stages)?;
        f.optional("metadata_v2", &self.metadata_v2)?;
        f.gte("completed_at", self.completed_at, 0)?;
        f.gte("created_at", self.created_at, 0)?;
        f.gte("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::DeploymentTrigger {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("DeploymentTrigger");
        f.required("commit", &self.commit)?;
        f.gt("timestamp", self.timestamp, 0)?;
        Ok(())
    }
}

impl Validate for model::PipelineStage {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("PipelineStage");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.defined::<model::StageStatus>("status", self.status)?;
        f.gte("completed_at", self.completed_at, 0)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        f.defined::<model::ManualOperation>("available_operation", self.available_operation)?;
        Ok(())
    }
}

impl Validate for model::Commit {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Commit");
        f.min_len("hash", &self.hash, 1)?;
        f.min_len("message", &self.message, 1)?;
        f.min_len("author", &self.author, 1)?;
        f.min_len("branch", &self.branch, 1)?;
        f.gt("created_at", self.created_at, 0)?;
        Ok(())
    }
}

impl Validate for model::DeploymentMetadata {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("DeploymentMetadata");
        f.optional("shared", &self.shared)?;
        f.each_value("plugins", &self.plugins)?;
        Ok(())
    }
}

impl Validate for model::DeploymentChain {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("DeploymentChain");
        f.min_len("id", &self.id, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.defined::<model::ChainStatus>("status", self.status)?;
        f.each("blocks", &self.blocks)?;
        f.gte("completed_at", self.completed_at, 0)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::ChainApplicationRef {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ChainApplicationRef");
        f.min_len("application_id", &self.application_id, 1)?;
        Ok(())
    }
}

impl Validate for model::ChainDeploymentRef {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ChainDeploymentRef");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.defined::<model::DeploymentStatus>("status", self.status)?;
        Ok(())
    }
}

impl Validate for model::ChainNode {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ChainNode");
        f.required("application_ref", &self.application_ref)?;
        f.optional("deployment_ref", &self.deployment_ref)?;
        Ok(())
    }
}

impl Validate for model::ChainBlock {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ChainBlock");
        f.each("nodes", &self.nodes)?;
        f.defined::<model::ChainBlockStatus>("status", self.status)?;
        f.gte("started_at", self.started_at, 0)?;
        f.gte("completed_at", self.completed_at, 0)?;
        Ok(())
    }
}

impl Validate for model::DeploymentTrace {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("DeploymentTrace");
        f.min_len("id", &self.id, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.min_len("commit_hash", &self.commit_hash, 1)?;
        f.min_len("commit_url", &self.commit_url, 1)?;
        f.gte("commit_timestamp", self.commit_timestamp, 0)?;
        f.gte("created_at", self.created_at, 0)?;
        f.gte("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::Event {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Event");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("data", &self.data, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.min_len("event_key", &self.event_key, 1)?;
        f.defined::<model::EventStatus>("status", self.status)?;
        f.map_keys_match("contexts", &self.contexts, DASHED_ALNUM)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::InsightDataPoint {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("InsightDataPoint");
        f.gt("timestamp", self.timestamp, 0)?;
        f.gt_f32("value", self.value, 0.0)?;
        Ok(())
    }
}

impl Validate for model::InsightSample {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("InsightSample");
        f.optional("data_point", &self.data_point)?;
        Ok(())
    }
}

impl Validate for model::InsightSampleStream {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("InsightSampleStream");
        f.each("data_points", &self.data_points)?;
        Ok(())
    }
}

impl Validate for model::LogBlock {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("LogBlock");
        f.min_len("log", &self.log, 1)?;
        f.defined::<model::LogSeverity>("severity", self.severity)?;
        f.gt("created_at", self.created_at, 0)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentTriggered {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentTriggered");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentPlanned {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentPlanned");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentStarted {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentStarted");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentApproved {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentApproved");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentRollingBack {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentRollingBack");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentSucceeded {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentSucceeded");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentFailed {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentFailed");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentCancelled {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentCancelled");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentWaitApproval {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentWaitApproval");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventDeploymentTriggerFailed {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventDeploymentTriggerFailed");
        f.required("application", &self.application)?;
        f.min_len("commit_hash", &self.commit_hash, 1)?;
        f.min_len("commit_message", &self.commit_message, 1)?;
        f.min_len("reason", &self.reason, 1)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventApplicationSynced {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventApplicationSynced");
        f.required("application", &self.application)?;
        f.required("state", &self.state)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventApplicationOutOfSync {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventApplicationOutOfSync");
        f.required("application", &self.application)?;
        f.required("state", &self.state)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventPipedStarted {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventPipedStarted");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventPipedStopped {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventPipedStopped");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventStageStarted {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventStageStarted");
        f.required("deployment", &self.deployment)?;
        f.required("stage", &self.stage)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventStageSkipped {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventStageSkipped");
        f.required("deployment", &self.deployment)?;
        f.required("stage", &self.stage)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventStageSucceeded {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventStageSucceeded");
        f.required("deployment", &self.deployment)?;
        f.required("stage", &self.stage)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventStageFailed {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventStageFailed");
        f.required("deployment", &self.deployment)?;
        f.required("stage", &self.stage)?;
        Ok(())
    }
}

impl Validate for model::NotificationEventStageCancelled {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("NotificationEventStageCancelled");
        f.required("deployment", &self.deployment)?;
        f.required("stage", &self.stage)?;
        Ok(())
    }
}

impl Validate for model::Piped {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Piped");
        f.min_len("id", &self.id, 1)?;
        f.min_len("name", &self.name, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.each("cloud_providers", &self.cloud_providers)?;
        f.each("repositories", &self.repositories)?;
        f.defined::<model::piped::ConnectionStatus>("status", self.status)?;
        f.each("platform_providers", &self.platform_providers)?;
        f.each("plugins", &self.plugins)?;
        f.optional("secret_encryption", &self.secret_encryption)?;
        f.each("keys", &self.keys)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::piped::CloudProvider {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Piped_CloudProvider");
        f.min_len("name", &self.name, 1)?;
        f.min_len("type", &self.r#type, 1)?;
        Ok(())
    }
}

impl Validate for model::piped::PlatformProvider {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Piped_PlatformProvider");
        f.min_len("name", &self.name, 1)?;
        f.min_len("type", &self.r#type, 1)?;
        Ok(())
    }
}

impl Validate for model::piped::Plugin {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Piped_Plugin");
        f.min_len("name", &self.name, 1)?;
        Ok(())
    }
}

impl Validate for model::piped::SecretEncryption {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Piped_SecretEncryption");
        f.str_in(
            "type",
            &self.r#type,
            &["KEY_PAIR", "GCP_KMS", "AWS_KMS", "NONE"],
        )?;
        Ok(())
    }
}

impl Validate for model::PipedKey {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("PipedKey");
        f.min_len("hash", &self.hash, 1)?;
        f.min_len("creator", &self.creator, 1)?;
        f.gt("created_at", self.created_at, 0)?;
        Ok(())
    }
}

impl Validate for model::PipedStat {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("PipedStat");
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.gt("timestamp", self.timestamp, 0)?;
        Ok(())
    }
}

impl Validate for model::PlanPreviewCommandResult {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("PlanPreviewCommandResult");
        f.min_len("command_id", &self.command_id, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.each("results", &self.results)?;
        Ok(())
    }
}

impl Validate for model::ApplicationPlanPreviewResult {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ApplicationPlanPreviewResult");
        f.min_len("application_id", &self.application_id, 1)?;
        f.min_len("application_name", &self.application_name, 1)?;
        f.defined::<model::ApplicationKind>("application_kind", self.application_kind)?;
        f.min_len("application_directory", &self.application_directory, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.min_len("project_id", &self.project_id, 1)?;
        f.min_len("head_branch", &self.head_branch, 1)?;
        f.min_len("head_commit", &self.head_commit, 1)?;
        f.each("plugin_plan_results", &self.plugin_plan_results)?;
        f.gt("created_at", self.created_at, 0)?;
        Ok(())
    }
}

impl Validate for model::PluginPlanPreviewResult {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("PluginPlanPreviewResult");
        f.min_len("plugin_name", &self.plugin_name, 1)?;
        Ok(())
    }
}

impl Validate for model::Project {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("Project");
        f.min_len("id", &self.id, 1)?;
        f.required("static_admin", &self.static_admin)?;
        f.optional("sso", &self.sso)?;
        f.optional("rbac", &self.rbac)?;
        f.each("rbac_roles", &self.rbac_roles)?;
        f.each("user_groups", &self.user_groups)?;
        f.gt("created_at", self.created_at, 0)?;
        f.gt("updated_at", self.updated_at, 0)?;
        Ok(())
    }
}

impl Validate for model::ProjectStaticUser {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectStaticUser");
        f.min_len("username", &self.username, 1)?;
        f.min_len("password_hash", &self.password_hash, 6)?;
        Ok(())
    }
}

impl Validate for model::ProjectSsoConfig {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectSSOConfig");
        f.defined::<model::project_sso_config::Provider>("provider", self.provider)?;
        f.gt("session_ttl", self.session_ttl, 0)?;
        f.optional("github", &self.github)?;
        f.optional("google", &self.google)?;
        f.optional("oidc", &self.oidc)?;
        Ok(())
    }
}

impl Validate for model::project_sso_config::GitHub {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectSSOConfig_GitHub");
        f.min_len("client_id", &self.client_id, 1)?;
        f.min_len("client_secret", &self.client_secret, 1)?;
        Ok(())
    }
}

impl Validate for model::project_sso_config::Google {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectSSOConfig_Google");
        f.min_len("client_id", &self.client_id, 1)?;
        f.min_len("client_secret", &self.client_secret, 1)?;
        Ok(())
    }
}

impl Validate for model::project_sso_config::Oidc {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectSSOConfig_Oidc");
        f.min_len("client_id", &self.client_id, 1)?;
        f.min_len("client_secret", &self.client_secret, 1)?;
        Ok(())
    }
}

impl Validate for model::ProjectUserGroup {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectUserGroup");
        f.min_len("sso_group", &self.sso_group, 1)?;
        f.min_len("role", &self.role, 1)?;
        Ok(())
    }
}

impl Validate for model::ProjectRbacRole {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectRBACRole");
        f.min_len("name", &self.name, 1)?;
        f.min_items("policies", &self.policies, 1)?;
        f.each("policies", &self.policies)?;
        Ok(())
    }
}

impl Validate for model::ProjectRbacResource {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectRBACResource");
        f.defined::<model::project_rbac_resource::ResourceType>("type", self.r#type)?;
        f.map_keys_min_len("labels", &self.labels, 1)?;
        f.map_values_min_len("labels", &self.labels, 1)?;
        Ok(())
    }
}

impl Validate for model::ProjectRbacPolicy {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ProjectRBACPolicy");
        f.min_items("resources", &self.resources, 1)?;
        f.each("resources", &self.resources)?;
        f.min_items("actions", &self.actions, 1)?;
        f.each_defined::<model::project_rbac_policy::Action>("actions", &self.actions)?;
        Ok(())
    }
}

impl Validate for model::User {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("User");
        f.min_len("username", &self.username, 1)?;
        f.required("role", &self.role)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportPipedMetaRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportPipedMetaRequest");
        f.each("cloud_providers", &self.cloud_providers)?;
        f.each("platform_providers", &self.platform_providers)?;
        f.each("plugins", &self.plugins)?;
        f.each("repositories", &self.repositories)?;
        f.optional("secret_encryption", &self.secret_encryption)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportPipedMetaResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportPipedMetaResponse");
        f.min_len("name", &self.name, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::ListApplicationsResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ListApplicationsResponse");
        f.each("applications", &self.applications)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportApplicationSyncStateRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportApplicationSyncStateRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        f.required("state", &self.state)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportApplicationDeployingStatusRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportApplicationDeployingStatusRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportApplicationMostRecentDeploymentRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportApplicationMostRecentDeploymentRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        f.defined::<model::DeploymentStatus>("status", self.status)?;
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetApplicationMostRecentDeploymentRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetApplicationMostRecentDeploymentRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        f.defined::<model::DeploymentStatus>("status", self.status)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetApplicationMostRecentDeploymentResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetApplicationMostRecentDeploymentResponse");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetDeploymentRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetDeploymentRequest");
        f.min_len("id", &self.id, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetDeploymentResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetDeploymentResponse");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for pipedservice::ListNotCompletedDeploymentsResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ListNotCompletedDeploymentsResponse");
        f.each("deployments", &self.deployments)?;
        Ok(())
    }
}

impl Validate for pipedservice::CreateDeploymentRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("CreateDeploymentRequest");
        f.required("deployment", &self.deployment)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportDeploymentPlannedRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportDeploymentPlannedRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.each("versions", &self.versions)?;
        f.each("stages", &self.stages)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportDeploymentStatusChangedRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportDeploymentStatusChangedRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.enum_in("status", self.status, &[2, 3])?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportDeploymentCompletedRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportDeploymentCompletedRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.defined::<model::DeploymentStatus>("status", self.status)?;
        f.gt("completed_at", self.completed_at, 0)?;
        Ok(())
    }
}

impl Validate for pipedservice::SaveDeploymentMetadataRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("SaveDeploymentMetadataRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::SaveDeploymentSharedMetadataRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("SaveDeploymentSharedMetadataRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::SaveDeploymentPluginMetadataRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("SaveDeploymentPluginMetadataRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.min_len("plugin_name", &self.plugin_name, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::SaveStageMetadataRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("SaveStageMetadataRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.min_len("stage_id", &self.stage_id, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportStageLogsRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportStageLogsRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.min_len("stage_id", &self.stage_id, 1)?;
        f.each("blocks", &self.blocks)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportStageLogsFromLastCheckpointRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportStageLogsFromLastCheckpointRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.min_len("stage_id", &self.stage_id, 1)?;
        f.each("blocks", &self.blocks)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportStageStatusChangedRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportStageStatusChangedRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.min_len("stage_id", &self.stage_id, 1)?;
        f.defined::<model::StageStatus>("status", self.status)?;
        f.gt("completed_at", self.completed_at, 0)?;
        Ok(())
    }
}

impl Validate for pipedservice::ListUnhandledCommandsResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ListUnhandledCommandsResponse");
        f.each("commands", &self.commands)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportCommandHandledRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportCommandHandledRequest");
        f.min_len("command_id", &self.command_id, 1)?;
        f.defined::<model::CommandStatus>("status", self.status)?;
        f.gt("handled_at", self.handled_at, 0)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportApplicationLiveStateRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportApplicationLiveStateRequest");
        f.required("snapshot", &self.snapshot)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportApplicationLiveStateEventsRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportApplicationLiveStateEventsRequest");
        f.each("kubernetes_events", &self.kubernetes_events)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetLatestEventRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetLatestEventRequest");
        f.min_len("name", &self.name, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetLatestEventResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetLatestEventResponse");
        f.required("event", &self.event)?;
        Ok(())
    }
}

impl Validate for pipedservice::ListEventsRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ListEventsRequest");
        f.defined::<pipedservice::ListOrder>("order", self.order)?;
        f.defined::<pipedservice::list_events_request::Status>("status", self.status)?;
        Ok(())
    }
}

impl Validate for pipedservice::ListEventsResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ListEventsResponse");
        f.each("events", &self.events)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportEventStatusesRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportEventStatusesRequest");
        f.each("events", &self.events)?;
        Ok(())
    }
}

impl Validate for pipedservice::report_event_statuses_request::Event {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportEventStatusesRequest_Event");
        f.min_len("id", &self.id, 1)?;
        f.defined::<model::EventStatus>("status", self.status)?;
        f.min_len("status_description", &self.status_description, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetLatestAnalysisResultRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetLatestAnalysisResultRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetLatestAnalysisResultResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetLatestAnalysisResultResponse");
        f.required("analysis_result", &self.analysis_result)?;
        Ok(())
    }
}

impl Validate for pipedservice::PutLatestAnalysisResultRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("PutLatestAnalysisResultRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        f.required("analysis_result", &self.analysis_result)?;
        Ok(())
    }
}

impl Validate for pipedservice::UpdateApplicationConfigurationsRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("UpdateApplicationConfigurationsRequest");
        f.each("applications", &self.applications)?;
        Ok(())
    }
}

impl Validate for pipedservice::ReportUnregisteredApplicationConfigurationsRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("ReportUnregisteredApplicationConfigurationsRequest");
        f.each("applications", &self.applications)?;
        Ok(())
    }
}

impl Validate for pipedservice::CreateDeploymentChainRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("CreateDeploymentChainRequest");
        f.required("first_deployment", &self.first_deployment)?;
        f.each("matchers", &self.matchers)?;
        Ok(())
    }
}

impl Validate for pipedservice::InChainDeploymentPlannableRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("InChainDeploymentPlannableRequest");
        f.min_len("deployment_id", &self.deployment_id, 1)?;
        f.min_len("deployment_chain_id", &self.deployment_chain_id, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::GetApplicationSharedObjectRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("GetApplicationSharedObjectRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        f.min_len("plugin_name", &self.plugin_name, 1)?;
        f.min_len("key", &self.key, 1)?;
        Ok(())
    }
}

impl Validate for pipedservice::PutApplicationSharedObjectRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("PutApplicationSharedObjectRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        f.min_len("plugin_name", &self.plugin_name, 1)?;
        f.min_len("key", &self.key, 1)?;
        Ok(())
    }
}

// APIService messages; declared after `no_rules!` so that it can use the macro.
#[path = "validate_api.rs"]
mod api;

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of<T: Validate>(msg: &T) -> String {
        msg.validate().expect_err("should be invalid").field
    }

    fn commit() -> model::Commit {
        model::Commit {
            hash: "abc".into(),
            message: "fix".into(),
            author: "me".into(),
            branch: "main".into(),
            created_at: 1,
            ..Default::default()
        }
    }

    fn stage() -> model::PipelineStage {
        model::PipelineStage {
            id: "stage-0".into(),
            name: "K8S_SYNC".into(),
            created_at: 1,
            updated_at: 1,
            ..Default::default()
        }
    }

    fn deployment() -> model::Deployment {
        model::Deployment {
            id: "d".into(),
            application_id: "a".into(),
            application_name: "app".into(),
            piped_id: "p".into(),
            project_id: "proj".into(),
            git_path: Some(model::ApplicationGitPath {
                repo: Some(model::ApplicationGitRepository {
                    id: "repo".into(),
                    ..Default::default()
                }),
                path: "apps/demo".into(),
                ..Default::default()
            }),
            trigger: Some(model::DeploymentTrigger {
                commit: Some(commit()),
                timestamp: 1,
                ..Default::default()
            }),
            stages: vec![stage()],
            ..Default::default()
        }
    }

    #[test]
    fn stage_logs_request() {
        let valid = pipedservice::ReportStageLogsRequest {
            deployment_id: "d".into(),
            stage_id: "s".into(),
            blocks: vec![model::LogBlock {
                log: "hello".into(),
                created_at: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(valid.validate(), Ok(()));

        let err = pipedservice::ReportStageLogsRequest {
            deployment_id: String::new(),
            ..valid.clone()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid ReportStageLogsRequest.deployment_id: value length must be at least 1 runes"
        );

        let no_stage = pipedservice::ReportStageLogsRequest {
            stage_id: String::new(),
            ..valid.clone()
        };
        assert_eq!(field_of(&no_stage), "ReportStageLogsRequest.stage_id");

        let mut bad_block = valid.clone();
        bad_block.blocks.push(model::LogBlock {
            log: "x".into(),
            severity: 7,
            created_at: 1,
            ..Default::default()
        });
        let err = bad_block.validate().unwrap_err();
        assert_eq!(err.field, "ReportStageLogsRequest.blocks[1].severity");
        assert_eq!(err.message, "value must be one of the defined enum values");
    }

    #[test]
    fn deployment_status_changed_accepts_running_and_rolling_back_only() {
        let req =
            |status: model::DeploymentStatus| pipedservice::ReportDeploymentStatusChangedRequest {
                deployment_id: "d".into(),
                status: status as i32,
                ..Default::default()
            };
        assert!(
            req(model::DeploymentStatus::DeploymentRunning)
                .validate()
                .is_ok()
        );
        assert!(
            req(model::DeploymentStatus::DeploymentRollingBack)
                .validate()
                .is_ok()
        );
        for bad in [
            model::DeploymentStatus::DeploymentPending,
            model::DeploymentStatus::DeploymentSuccess,
        ] {
            let err = req(bad).validate().unwrap_err();
            assert_eq!(err.field, "ReportDeploymentStatusChangedRequest.status");
            assert_eq!(err.message, "value must be in list [2 3]");
        }
    }

    #[test]
    fn deployment_completed_request() {
        let valid = pipedservice::ReportDeploymentCompletedRequest {
            deployment_id: "d".into(),
            status: model::DeploymentStatus::DeploymentSuccess as i32,
            completed_at: 10,
            ..Default::default()
        };
        assert!(valid.validate().is_ok());
        let zero_time = pipedservice::ReportDeploymentCompletedRequest {
            completed_at: 0,
            ..valid.clone()
        };
        let err = zero_time.validate().unwrap_err();
        assert_eq!(err.field, "ReportDeploymentCompletedRequest.completed_at");
        assert_eq!(err.message, "value must be greater than 0");
        let unknown = pipedservice::ReportDeploymentCompletedRequest {
            status: 42,
            ..valid
        };
        assert_eq!(
            field_of(&unknown),
            "ReportDeploymentCompletedRequest.status"
        );
    }

    #[test]
    fn create_deployment_validates_the_whole_tree() {
        let valid = pipedservice::CreateDeploymentRequest {
            deployment: Some(deployment()),
        };
        assert!(valid.validate().is_ok());

        let missing = pipedservice::CreateDeploymentRequest { deployment: None };
        let err = missing.validate().unwrap_err();
        assert_eq!(err.field, "CreateDeploymentRequest.deployment");
        assert_eq!(err.message, "value is required");

        let with = |edit: fn(&mut model::Deployment)| {
            let mut d = deployment();
            edit(&mut d);
            field_of(&pipedservice::CreateDeploymentRequest {
                deployment: Some(d),
            })
        };
        assert_eq!(
            with(|d| d.trigger = None),
            "CreateDeploymentRequest.deployment.trigger"
        );
        assert_eq!(
            with(|d| d
                .trigger
                .as_mut()
                .unwrap()
                .commit
                .as_mut()
                .unwrap()
                .hash
                .clear()),
            "CreateDeploymentRequest.deployment.trigger.commit.hash"
        );
        assert_eq!(
            with(|d| d.git_path.as_mut().unwrap().path = "/abs".into()),
            "CreateDeploymentRequest.deployment.git_path.path"
        );
        assert_eq!(
            with(|d| d.git_path.as_mut().unwrap().repo = None),
            "CreateDeploymentRequest.deployment.git_path.repo"
        );
        assert_eq!(
            with(|d| d.stages[0].created_at = 0),
            "CreateDeploymentRequest.deployment.stages[0].created_at"
        );
        assert_eq!(
            with(|d| d.created_at = -1),
            "CreateDeploymentRequest.deployment.created_at"
        );
        assert_eq!(
            with(|d| d.application_name.clear()),
            "CreateDeploymentRequest.deployment.application_name"
        );
    }

    #[test]
    fn piped_meta_checks_nested_providers_and_encryption() {
        let valid = pipedservice::ReportPipedMetaRequest {
            version: "v1.0.0".into(),
            plugins: vec![model::piped::Plugin {
                name: "kubernetes".into(),
                deploy_targets: vec!["cluster-1".into()],
            }],
            secret_encryption: Some(model::piped::SecretEncryption {
                r#type: "KEY_PAIR".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(valid.validate().is_ok());
        // An unset sub-message is not validated.
        assert!(
            pipedservice::ReportPipedMetaRequest {
                secret_encryption: None,
                ..valid.clone()
            }
            .validate()
            .is_ok()
        );

        let mut bad = valid.clone();
        bad.secret_encryption.as_mut().unwrap().r#type = "PLAIN".into();
        let err = bad.validate().unwrap_err();
        assert_eq!(err.field, "ReportPipedMetaRequest.secret_encryption.type");
        assert_eq!(
            err.message,
            "value must be in list [KEY_PAIR GCP_KMS AWS_KMS NONE]"
        );

        let mut bad = valid;
        bad.plugins[0].name.clear();
        assert_eq!(field_of(&bad), "ReportPipedMetaRequest.plugins[0].name");
    }

    #[test]
    fn command_handled_request() {
        let valid = pipedservice::ReportCommandHandledRequest {
            command_id: "c".into(),
            status: model::CommandStatus::CommandSucceeded as i32,
            handled_at: 5,
            ..Default::default()
        };
        assert!(valid.validate().is_ok());
        let bad = pipedservice::ReportCommandHandledRequest {
            handled_at: 0,
            ..valid.clone()
        };
        assert_eq!(field_of(&bad), "ReportCommandHandledRequest.handled_at");
        let bad = pipedservice::ReportCommandHandledRequest {
            status: -1,
            ..valid
        };
        assert_eq!(field_of(&bad), "ReportCommandHandledRequest.status");
    }

    #[test]
    fn events_requests() {
        let list = pipedservice::ListEventsRequest {
            order: pipedservice::ListOrder::Desc as i32,
            ..Default::default()
        };
        assert!(list.validate().is_ok());
        let bad = pipedservice::ListEventsRequest { order: 3, ..list };
        assert_eq!(field_of(&bad), "ListEventsRequest.order");

        let statuses = pipedservice::ReportEventStatusesRequest {
            events: vec![pipedservice::report_event_statuses_request::Event {
                id: "e".into(),
                status: model::EventStatus::EventSuccess as i32,
                status_description: String::new(),
            }],
        };
        assert_eq!(
            field_of(&statuses),
            "ReportEventStatusesRequest.events[0].status_description"
        );

        assert_eq!(
            field_of(&pipedservice::GetLatestEventRequest::default()),
            "GetLatestEventRequest.name"
        );
    }

    #[test]
    fn shared_object_and_chain_requests() {
        let valid = pipedservice::PutApplicationSharedObjectRequest {
            application_id: "a".into(),
            plugin_name: "analysis".into(),
            key: "k".into(),
            object: vec![],
        };
        assert!(valid.validate().is_ok());
        let bad = pipedservice::PutApplicationSharedObjectRequest {
            key: String::new(),
            ..valid
        };
        assert_eq!(field_of(&bad), "PutApplicationSharedObjectRequest.key");

        let plannable = pipedservice::InChainDeploymentPlannableRequest {
            deployment_id: "d".into(),
            ..Default::default()
        };
        assert_eq!(
            field_of(&plannable),
            "InChainDeploymentPlannableRequest.deployment_chain_id"
        );

        let chain = pipedservice::CreateDeploymentChainRequest::default();
        assert_eq!(
            field_of(&chain),
            "CreateDeploymentChainRequest.first_deployment"
        );
    }

    #[test]
    fn requests_without_rules_always_pass() {
        assert!(
            pipedservice::ListApplicationsRequest::default()
                .validate()
                .is_ok()
        );
        assert!(
            pipedservice::ListUnhandledCommandsRequest::default()
                .validate()
                .is_ok()
        );
        assert!(
            pipedservice::ReportStatRequest::default()
                .validate()
                .is_ok()
        );
        assert!(
            pipedservice::ReportDeploymentPlannedRequest {
                deployment_id: "d".into(),
                ..Default::default()
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn relative_path_pattern() {
        for ok in ["ab", "apps/demo", "a/", "\nab", "日本"] {
            assert!((RELATIVE_PATH.test)(ok), "{ok:?}");
        }
        for bad in ["", "a", "/ab", "a\nb", "ab\n"] {
            assert!(!(RELATIVE_PATH.test)(bad), "{bad:?}");
        }
    }

    #[test]
    fn event_context_keys() {
        for ok in ["a", "a-b", "Key-2-x"] {
            assert!((DASHED_ALNUM.test)(ok), "{ok:?}");
        }
        for bad in ["", "-a", "a-", "a--b", "a_b", "ä"] {
            assert!(!(DASHED_ALNUM.test)(bad), "{bad:?}");
        }
        let mut event = model::Event {
            id: "e".into(),
            name: "image-update".into(),
            data: "v2".into(),
            project_id: "p".into(),
            event_key: "k".into(),
            created_at: 1,
            updated_at: 1,
            ..Default::default()
        };
        event.contexts.insert("commit-hash".into(), "x".into());
        assert!(event.validate().is_ok());
        event.contexts.insert("bad key".into(), "x".into());
        let err = event.validate().unwrap_err();
        assert_eq!(err.field, "Event.contexts[bad key]");
        assert!(
            err.message
                .starts_with("value does not match regex pattern")
        );
    }

    #[test]
    fn entities() {
        let key = model::PipedKey {
            hash: "h".into(),
            creator: "admin".into(),
            created_at: 0,
        };
        assert_eq!(field_of(&key), "PipedKey.created_at");

        let project = model::Project {
            id: "p".into(),
            static_admin: Some(model::ProjectStaticUser {
                username: "admin".into(),
                password_hash: "short".into(),
            }),
            created_at: 1,
            updated_at: 1,
            ..Default::default()
        };
        let err = project.validate().unwrap_err();
        assert_eq!(err.field, "Project.static_admin.password_hash");
        assert_eq!(err.message, "value length must be at least 6 runes");

        let policy = model::ProjectRbacPolicy {
            resources: vec![model::ProjectRbacResource::default()],
            actions: vec![],
        };
        assert_eq!(field_of(&policy), "ProjectRBACPolicy.actions");
        let policy = model::ProjectRbacPolicy {
            actions: vec![1, 99],
            ..policy
        };
        assert_eq!(field_of(&policy), "ProjectRBACPolicy.actions[1]");

        let stat = model::InsightDataPoint {
            timestamp: 1,
            value: 0.0,
        };
        assert_eq!(field_of(&stat), "InsightDataPoint.value");

        let cmd = model::Command {
            id: "c".into(),
            piped_id: "p".into(),
            r#type: model::command::Type::ApproveStage as i32,
            approve_stage: Some(model::command::ApproveStage {
                deployment_id: "d".into(),
                stage_id: String::new(),
            }),
            created_at: 1,
            updated_at: 1,
            ..Default::default()
        };
        assert_eq!(field_of(&cmd), "Command.approve_stage.stage_id");
        let err = model::command::ApproveStage::default()
            .validate()
            .unwrap_err();
        assert_eq!(err.field, "Command_ApproveStage.deployment_id");
    }
}
