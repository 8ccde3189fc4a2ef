//! WebService: events (what `pipectl event register` and pipeds' event watchers see).

use wisp_model::event::contains_labels;
use wisp_proto::model;
use wisp_proto::webservice::*;
use wisp_store::collection::ListOptions;
use wisp_store::entities::slot;

use super::deployments::page_size;
use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    /// The project's events, newest first, updated at or after `page_min_updated_at`,
    /// filtered by name, status and labels; the cursor is empty on the last page.
    pub async fn list_events(
        &self,
        caller: &Authorized,
        req: ListEventsRequest,
    ) -> Result<ListEventsResponse, ServiceError> {
        let options = req.options.unwrap_or_default();
        let min_updated_at = req.page_min_updated_at;
        let matches = |e: &model::Event| {
            e.updated_at >= min_updated_at
                && (options.name.is_empty() || e.name == options.name)
                && (options.statuses.is_empty() || options.statuses.contains(&e.status))
                && contains_labels(&e.labels, &options.labels)
        };
        let mut opts = ListOptions::new(slot::EVENT_BY_PROJECT, caller.project_id().to_string());
        opts.descending = true;
        opts.limit = page_size(req.page_size);
        opts.cursor = req.cursor.clone();
        opts.filter = Some(&matches);
        let page = self
            .stores
            .events
            .list(opts)
            .await
            .map_err(|e| ServiceError::store(e, "list events"))?;
        Ok(ListEventsResponse {
            events: page.items,
            cursor: page.cursor,
        })
    }
}
