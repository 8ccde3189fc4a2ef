//! Wire objects as a piped builds them: valid by upstream's rules unless a test breaks
//! them on purpose.

use std::collections::HashMap;

use wisp_proto::model::{
    self, ApplicationKind, DeploymentStatus, LogSeverity, StageStatus,
    kubernetes_resource_state::HealthStatus, kubernetes_resource_state_event,
};

use super::Piped;

/// Unix seconds now.
pub fn now() -> i64 {
    wisp_model::clock::now_unix()
}

pub fn string_map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn commit() -> model::Commit {
    model::Commit {
        hash: "0123456789abcdef".into(),
        message: "Bump the image".into(),
        author: "wisp-e2e".into(),
        branch: "main".into(),
        created_at: now(),
        ..Default::default()
    }
}

pub fn git_path(app_name: &str) -> model::ApplicationGitPath {
    model::ApplicationGitPath {
        repo: Some(model::ApplicationGitRepository {
            id: "examples".into(),
            ..Default::default()
        }),
        path: format!("apps/{app_name}"),
        config_filename: "app.pipecd.yaml".into(),
        ..Default::default()
    }
}

/// A PENDING deployment of `app_id`, triggered by a commit, as `CreateDeployment` takes it.
pub fn deployment(piped: &Piped, id: &str, app_id: &str, app_name: &str) -> model::Deployment {
    let now = now();
    model::Deployment {
        id: id.into(),
        application_id: app_id.into(),
        application_name: app_name.into(),
        piped_id: piped.id.clone(),
        project_id: piped.project.clone(),
        kind: ApplicationKind::Kubernetes as i32,
        git_path: Some(git_path(app_name)),
        trigger: Some(model::DeploymentTrigger {
            commit: Some(commit()),
            commander: "wisp-e2e".into(),
            timestamp: now,
            ..Default::default()
        }),
        status: DeploymentStatus::DeploymentPending as i32,
        created_at: now,
        updated_at: now,
        ..Default::default()
    }
}

/// A stage as the planner reports it: not started yet, after `requires`.
pub fn stage(id: &str, name: &str, index: i32, requires: &[&str]) -> model::PipelineStage {
    let now = now();
    model::PipelineStage {
        id: id.into(),
        name: name.into(),
        index,
        requires: requires.iter().map(|r| r.to_string()).collect(),
        visible: true,
        status: StageStatus::StageNotStartedYet as i32,
        created_at: now,
        updated_at: now,
        ..Default::default()
    }
}

pub fn log_block(index: i64, log: &str) -> model::LogBlock {
    model::LogBlock {
        index,
        log: log.into(),
        severity: LogSeverity::Info as i32,
        created_at: now(),
    }
}

/// What `GetApplicationMostRecentDeployment` hands back for a deployment.
pub fn deployment_reference(deployment_id: &str) -> model::ApplicationDeploymentReference {
    model::ApplicationDeploymentReference {
        deployment_id: deployment_id.into(),
        trigger: Some(model::DeploymentTrigger {
            commit: Some(commit()),
            timestamp: now(),
            ..Default::default()
        }),
        summary: "Quick sync by applying all manifests".into(),
        started_at: now(),
        completed_at: now(),
        ..Default::default()
    }
}

pub fn k8s_resource(id: &str, name: &str) -> model::KubernetesResourceState {
    model::KubernetesResourceState {
        id: id.into(),
        name: name.into(),
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: "default".into(),
        health_status: HealthStatus::Healthy as i32,
        created_at: now(),
        updated_at: now(),
        ..Default::default()
    }
}

/// A Kubernetes live-state snapshot of one of `piped`'s applications.
pub fn live_state_snapshot(
    piped: &Piped,
    app_id: &str,
    resources: Vec<model::KubernetesResourceState>,
) -> model::ApplicationLiveStateSnapshot {
    model::ApplicationLiveStateSnapshot {
        application_id: app_id.into(),
        piped_id: piped.id.clone(),
        project_id: piped.project.clone(),
        kind: ApplicationKind::Kubernetes as i32,
        kubernetes: Some(model::KubernetesApplicationLiveState { resources }),
        version: Some(model::ApplicationLiveStateVersion {
            timestamp: now(),
            index: 0,
        }),
        ..Default::default()
    }
}

/// An add-or-update event of `resource`, newer than any snapshot taken so far.
pub fn k8s_event(
    id: &str,
    app_id: &str,
    resource: model::KubernetesResourceState,
) -> model::KubernetesResourceStateEvent {
    model::KubernetesResourceStateEvent {
        id: id.into(),
        application_id: app_id.into(),
        r#type: kubernetes_resource_state_event::Type::AddOrUpdated as i32,
        state: Some(resource),
        snapshot_version: Some(model::ApplicationLiveStateVersion {
            timestamp: now() + 1,
            index: 1,
        }),
        created_at: now(),
    }
}

/// An application config found in git, as the piped's app config reporter sends it.
pub fn application_info(
    piped: &Piped,
    id: &str,
    name: &str,
    labels: &[(&str, &str)],
) -> model::ApplicationInfo {
    model::ApplicationInfo {
        id: id.into(),
        name: name.into(),
        kind: ApplicationKind::Kubernetes as i32,
        labels: string_map(labels),
        repo_id: "examples".into(),
        path: format!("apps/{name}"),
        config_filename: "app.pipecd.yaml".into(),
        piped_id: piped.id.clone(),
        description: format!("{name} from git"),
    }
}
