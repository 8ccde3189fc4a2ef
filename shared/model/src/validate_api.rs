//! Validation of the APIService messages (pipectl's requests), with the helpers of the
//! parent module. Kept apart only because validate.rs is long already.

use std::collections::HashMap;

use wisp_proto::apiservice as api;
use wisp_proto::model;

use super::{Checked, DASHED_ALNUM, Fields, Validate, ValidationError};

impl Fields {
    fn max_items<T>(&self, field: &str, items: &[T], max: usize) -> Checked {
        self.check(items.len() <= max, field, || {
            format!("value must contain no more than {max} item(s)")
        })
    }

    fn min_pairs<V>(&self, field: &str, map: &HashMap<String, V>, min: usize) -> Checked {
        self.check(map.len() >= min, field, || {
            format!("value must contain at least {min} pair(s)")
        })
    }
}

no_rules!(
    api::SyncApplicationResponse,
    api::ListApplicationsRequest,
    api::RegisterPipedResponse,
    api::UpdatePipedResponse,
    api::RenameApplicationConfigFileResponse,
    api::UpdateApplicationDeployTargetsResponse,
    api::GetDeploymentRequest,
    api::ListDeploymentsRequest,
    api::EnablePipedResponse,
    api::DisablePipedResponse,
    api::RequestPlanPreviewResponse,
    api::GetPlanPreviewResultsRequest,
);

/// Messages whose only rule is a non-empty string field.
macro_rules! non_empty {
    ($($ty:ident . $field:ident),* $(,)?) => {
        $(impl Validate for api::$ty {
            fn validate(&self) -> Result<(), ValidationError> {
                Fields(stringify!($ty)).min_len(stringify!($field), &self.$field, 1)
            }
        })*
    };
}

non_empty!(
    AddApplicationResponse.application_id,
    SyncApplicationRequest.application_id,
    GetApplicationRequest.application_id,
    GetPipedRequest.piped_id,
    RegisterPipedRequest.name,
    EnableApplicationRequest.application_id,
    EnableApplicationResponse.application_id,
    DisableApplicationRequest.application_id,
    DisableApplicationResponse.application_id,
    UpdateApplicationResponse.application_id,
    DeleteApplicationRequest.application_id,
    DeleteApplicationResponse.application_id,
    GetCommandRequest.command_id,
    EnablePipedRequest.piped_id,
    DisablePipedRequest.piped_id,
    RegisterEventResponse.event_id,
    EncryptResponse.ciphertext,
    ListStageLogsRequest.deployment_id,
);

impl Validate for api::AddApplicationRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("AddApplicationRequest");
        f.min_len("name", &self.name, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.required("git_path", &self.git_path)?;
        f.defined::<model::ApplicationKind>("kind", self.kind)?;
        Ok(())
    }
}

impl Validate for api::GetApplicationResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("GetApplicationResponse").optional("application", &self.application)
    }
}

impl Validate for api::ListApplicationsResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("ListApplicationsResponse").each("applications", &self.applications)
    }
}

impl Validate for api::GetPipedResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("GetPipedResponse").optional("piped", &self.piped)
    }
}

impl Validate for api::UpdatePipedRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("UpdatePipedRequest");
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.min_len("name", &self.name, 1)?;
        Ok(())
    }
}

impl Validate for api::UpdateApplicationRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("UpdateApplicationRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        f.required("git_path", &self.git_path)?;
        Ok(())
    }
}

impl Validate for api::RenameApplicationConfigFileRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("RenameApplicationConfigFileRequest");
        f.min_items("application_ids", &self.application_ids, 1)?;
        f.max_items("application_ids", &self.application_ids, 50)?;
        f.min_len("new_filename", &self.new_filename, 1)?;
        Ok(())
    }
}

impl Validate for api::UpdateApplicationDeployTargetsRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("UpdateApplicationDeployTargetsRequest");
        f.min_len("application_id", &self.application_id, 1)?;
        f.min_pairs(
            "deploy_targets_by_plugin",
            &self.deploy_targets_by_plugin,
            1,
        )?;
        f.each_value("deploy_targets_by_plugin", &self.deploy_targets_by_plugin)?;
        Ok(())
    }
}

impl Validate for api::GetDeploymentResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("GetDeploymentResponse").optional("deployment", &self.deployment)
    }
}

impl Validate for api::ListDeploymentsResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("ListDeploymentsResponse").each("deployments", &self.deployments)
    }
}

impl Validate for api::GetCommandResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("GetCommandResponse").optional("command", &self.command)
    }
}

impl Validate for api::RegisterEventRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("RegisterEventRequest");
        f.min_len("name", &self.name, 1)?;
        f.min_len("data", &self.data, 1)?;
        f.map_keys_min_len("labels", &self.labels, 1)?;
        f.map_values_min_len("labels", &self.labels, 1)?;
        f.map_keys_min_len("contexts", &self.contexts, 1)?;
        f.map_keys_match("contexts", &self.contexts, DASHED_ALNUM)?;
        f.map_values_min_len("contexts", &self.contexts, 1)?;
        Ok(())
    }
}

impl Validate for api::RequestPlanPreviewRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("RequestPlanPreviewRequest");
        f.min_len("repo_remote_url", &self.repo_remote_url, 1)?;
        f.min_len("head_branch", &self.head_branch, 1)?;
        f.min_len("head_commit", &self.head_commit, 1)?;
        f.min_len("base_branch", &self.base_branch, 1)?;
        f.gte("timeout", self.timeout, 0)?;
        Ok(())
    }
}

impl Validate for api::GetPlanPreviewResultsResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("GetPlanPreviewResultsResponse").each("results", &self.results)
    }
}

impl Validate for api::EncryptRequest {
    fn validate(&self) -> Result<(), ValidationError> {
        let f = Fields("EncryptRequest");
        f.min_len("plaintext", &self.plaintext, 1)?;
        f.min_len("piped_id", &self.piped_id, 1)?;
        Ok(())
    }
}

impl Validate for api::StageLog {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("StageLog").each("blocks", &self.blocks)
    }
}

impl Validate for api::ListStageLogsResponse {
    fn validate(&self) -> Result<(), ValidationError> {
        Fields("ListStageLogsResponse").each_value("stage_logs", &self.stage_logs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of<T: Validate>(msg: &T) -> String {
        match msg.validate() {
            Err(e) => e.field,
            Ok(()) => "<valid>".into(),
        }
    }

    fn git_path() -> model::ApplicationGitPath {
        model::ApplicationGitPath {
            repo: Some(model::ApplicationGitRepository {
                id: "repo".into(),
                ..Default::default()
            }),
            path: "apps/a".into(),
            ..Default::default()
        }
    }

    #[test]
    fn add_application_request() {
        let valid = api::AddApplicationRequest {
            name: "a".into(),
            piped_id: "p".into(),
            git_path: Some(git_path()),
            ..Default::default()
        };
        assert_eq!(field_of(&valid), "<valid>");
        let no_path = api::AddApplicationRequest {
            git_path: None,
            ..valid.clone()
        };
        assert_eq!(field_of(&no_path), "AddApplicationRequest.git_path");
        let bad_path = api::AddApplicationRequest {
            git_path: Some(model::ApplicationGitPath {
                path: "/abs".into(),
                ..git_path()
            }),
            ..valid.clone()
        };
        assert_eq!(field_of(&bad_path), "AddApplicationRequest.git_path.path");
        let bad_kind = api::AddApplicationRequest { kind: 99, ..valid };
        assert_eq!(field_of(&bad_kind), "AddApplicationRequest.kind");
    }

    #[test]
    fn simple_required_fields() {
        assert_eq!(
            field_of(&api::SyncApplicationRequest::default()),
            "SyncApplicationRequest.application_id"
        );
        assert_eq!(
            field_of(&api::EncryptRequest {
                plaintext: "x".into(),
                ..Default::default()
            }),
            "EncryptRequest.piped_id"
        );
        assert_eq!(
            field_of(&api::UpdatePipedRequest {
                piped_id: "p".into(),
                ..Default::default()
            }),
            "UpdatePipedRequest.name"
        );
        assert_eq!(
            field_of(&api::ListApplicationsRequest::default()),
            "<valid>"
        );
        assert_eq!(field_of(&api::GetDeploymentRequest::default()), "<valid>");
    }

    #[test]
    fn rename_and_deploy_targets_bounds() {
        let ids = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>();
        let req = |n| api::RenameApplicationConfigFileRequest {
            application_ids: ids(n),
            new_filename: "app.pipecd.yaml".into(),
        };
        assert_eq!(
            field_of(&req(0)),
            "RenameApplicationConfigFileRequest.application_ids"
        );
        assert_eq!(field_of(&req(1)), "<valid>");
        assert_eq!(field_of(&req(50)), "<valid>");
        assert_eq!(
            field_of(&req(51)),
            "RenameApplicationConfigFileRequest.application_ids"
        );

        let mut targets = api::UpdateApplicationDeployTargetsRequest {
            application_id: "a".into(),
            deploy_targets_by_plugin: HashMap::new(),
        };
        assert_eq!(
            field_of(&targets),
            "UpdateApplicationDeployTargetsRequest.deploy_targets_by_plugin"
        );
        targets
            .deploy_targets_by_plugin
            .insert("kubernetes".into(), model::DeployTargets::default());
        assert_eq!(field_of(&targets), "<valid>");
    }

    #[test]
    fn register_event_maps() {
        let valid = api::RegisterEventRequest {
            name: "image-update".into(),
            data: "v2".into(),
            ..Default::default()
        };
        assert_eq!(field_of(&valid), "<valid>");
        let mut empty_label = valid.clone();
        empty_label.labels.insert("env".into(), String::new());
        assert_eq!(field_of(&empty_label), "RegisterEventRequest.labels[env]");
        let mut bad_context = valid.clone();
        bad_context.contexts.insert("bad_key".into(), "v".into());
        assert_eq!(
            field_of(&bad_context),
            "RegisterEventRequest.contexts[bad_key]"
        );
        let mut good_context = valid;
        good_context
            .contexts
            .insert("commit-hash".into(), "abc".into());
        assert_eq!(field_of(&good_context), "<valid>");
    }

    #[test]
    fn plan_preview_timeout_not_negative() {
        let req = api::RequestPlanPreviewRequest {
            repo_remote_url: "r".into(),
            head_branch: "h".into(),
            head_commit: "c".into(),
            base_branch: "b".into(),
            timeout: -1,
        };
        assert_eq!(field_of(&req), "RequestPlanPreviewRequest.timeout");
    }
}
