//! Events (`pipectl event register`): what a piped's event watcher picks up with
//! GetLatestEvent / ListEvents.

use wisp_model::event::make_event_key;
use wisp_model::validate::Validate;
use wisp_proto::apiservice::*;
use wisp_proto::model::{self, EventStatus, api_key::Role};

use super::{ApiApi, ApiKeyCaller, require};
use crate::error::ServiceError;
use crate::support::{new_id, now_unix};

impl ApiApi {
    /// Stores a NOT_HANDLED event under its key (name + labels). When the commit hash
    /// and URL are given, a deployment trace of that commit is stored too (best effort,
    /// as upstream: its failure does not fail the call).
    pub async fn register_event(
        &self,
        caller: &ApiKeyCaller,
        req: RegisterEventRequest,
    ) -> Result<RegisterEventResponse, ServiceError> {
        req.validate()?;
        require(caller, Role::ReadWrite)?;
        let id = new_id();
        let event = model::Event {
            id: id.clone(),
            event_key: make_event_key(&req.name, &req.labels),
            name: req.name,
            status_description: format!("It is going to be replaced by {}", req.data),
            data: req.data,
            labels: req.labels,
            contexts: req.contexts,
            trigger_commit_hash: req.commit_hash.clone(),
            project_id: caller.project_id.clone(),
            status: EventStatus::EventNotHandled as i32,
            ..Default::default()
        };
        self.stores
            .events
            .create(event)
            .await
            .map_err(|e| ServiceError::store(e, &format!("add event {id}")))?;

        if !req.commit_hash.is_empty() && !req.commit_url.is_empty() {
            let trace = model::DeploymentTrace {
                id: new_id(),
                project_id: caller.project_id.clone(),
                title: req.commit_title,
                commit_message: req.commit_message,
                commit_hash: req.commit_hash,
                commit_url: req.commit_url,
                // The time the event was sent, unless the commit's own time is given.
                commit_timestamp: if req.commit_timestamp != 0 {
                    req.commit_timestamp
                } else {
                    now_unix()
                },
                author: req.commit_author,
                ..Default::default()
            };
            let hash = trace.commit_hash.clone();
            if let Err(e) = self.stores.deployment_traces.create(trace).await {
                tracing::error!(error = %wisp_store::error::chain(&e), commit_hash = %hash, "failed to store deployment trace");
            }
        }
        Ok(RegisterEventResponse { event_id: id })
    }
}
