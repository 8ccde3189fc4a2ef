//! Deployments as operators read them (pipectl, the console): one, or a page of the
//! project's, filtered. One query for every entry point.

use std::collections::HashMap;

use wisp_model::event::contains_labels;
use wisp_proto::model;
use wisp_store::collection::{Collection, EntityPage, ListOptions, sort_ts};
use wisp_store::entities::{pk, slot};

use crate::error::ServiceError;

/// A deployment of any project (the caller checks whose it is).
pub async fn get_deployment(
    deployments: &Collection<model::Deployment>,
    id: &str,
) -> Result<model::Deployment, ServiceError> {
    super::find(deployments, id, "deployment").await
}

/// Which of a project's deployments to list; empty fields match everything.
#[derive(Debug, Clone, Default)]
pub struct DeploymentQuery {
    /// Any of these statuses.
    pub statuses: Vec<i32>,
    /// Any of these kinds.
    pub kinds: Vec<i32>,
    /// Any of these applications (empty ids are ignored).
    pub application_ids: Vec<String>,
    pub application_name: String,
    /// Every one of these labels.
    pub labels: HashMap<String, String>,
    /// Only those updated at or after this time (unix seconds; 0: all).
    pub min_updated_at: i64,
    /// Page size; 0 means all.
    pub limit: usize,
    pub cursor: String,
}

/// The project's deployments, most recently updated first, matching `query`; the
/// cursor is empty on the last page.
///
/// Deviation: every given status, kind and application id is matched (upstream uses
/// only the first of each). With exactly one application id, that application's index
/// is read instead of the project's.
pub async fn list_deployments(
    deployments: &Collection<model::Deployment>,
    project_id: &str,
    query: DeploymentQuery,
) -> Result<EntityPage<model::Deployment>, ServiceError> {
    let q = &query;
    let app_ids: Vec<&str> = q
        .application_ids
        .iter()
        .map(String::as_str)
        .filter(|id| !id.is_empty())
        .collect();
    let matches = |d: &model::Deployment| {
        (q.statuses.is_empty() || q.statuses.contains(&d.status))
            && (q.kinds.is_empty() || q.kinds.contains(&d.kind))
            && (app_ids.is_empty() || app_ids.contains(&d.application_id.as_str()))
            && (q.application_name.is_empty() || d.application_name == q.application_name)
            && contains_labels(&d.labels, &q.labels)
    };
    let mut opts = match app_ids.as_slice() {
        [only] => ListOptions::new(
            slot::DEPLOYMENT_BY_APPLICATION,
            pk::project_application(project_id, only),
        ),
        _ => ListOptions::new(slot::DEPLOYMENT_BY_PROJECT, project_id.to_string()),
    };
    if q.min_updated_at > 0 {
        opts.sk_from = Some(sort_ts(q.min_updated_at));
    }
    opts.descending = true;
    opts.limit = q.limit;
    opts.cursor = q.cursor.clone();
    opts.filter = Some(&matches);
    deployments
        .list(opts)
        .await
        // Upstream's text in both of its services.
        .map_err(|e| ServiceError::store(e, "get deployments"))
}
