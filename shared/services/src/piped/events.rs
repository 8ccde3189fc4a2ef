//! Events registered through the API (`pipectl event register`), read by the piped's
//! event watcher.

use wisp_model::event::make_event_key;
use wisp_model::validate::Validate;
use wisp_proto::model::{self, EventStatus};
use wisp_proto::pipedservice::list_events_request::Status as ListStatus;
use wisp_proto::pipedservice::*;
use wisp_store::collection::{ListOptions, sort_ts};
use wisp_store::entities::{pk, slot};

use super::{PipedApi, PipedCaller, now_unix, update_checked};
use crate::error::ServiceError;

impl PipedApi {
    /// The newest event of the project with this name and exactly these labels;
    /// `NotFound` when there is none (the event watcher relies on it).
    ///
    /// Events are read newest first on their key's index. Upstream breaks ties between
    /// events of the same second by ascending id, this by descending id: both are
    /// arbitrary among events of the same second.
    pub async fn get_latest_event(
        &self,
        caller: &PipedCaller,
        req: GetLatestEventRequest,
    ) -> Result<GetLatestEventResponse, ServiceError> {
        req.validate()?;
        let key = make_event_key(&req.name, &req.labels);
        let name = req.name.as_str();
        let same_name = move |e: &model::Event| e.name == name;
        let mut opts = ListOptions::new(
            slot::EVENT_BY_KEY,
            pk::project_event_key(&caller.project_id, &key),
        );
        opts.descending = true;
        opts.limit = 1;
        opts.filter = Some(&same_name);
        let page = self
            .stores
            .events
            .list(opts)
            .await
            .map_err(|e| ServiceError::internal("failed to list event", e))?;
        match page.items.into_iter().next() {
            Some(event) => Ok(GetLatestEventResponse { event: Some(event) }),
            None => Err(ServiceError::NotFound("no events found".into())),
        }
    }

    /// The project's events created in `[from, to)` (each bound only when > 0), of one
    /// status unless ALL, ascending by creation unless DESC.
    pub async fn list_events(
        &self,
        caller: &PipedCaller,
        req: ListEventsRequest,
    ) -> Result<ListEventsResponse, ServiceError> {
        req.validate()?;
        let status = match ListStatus::try_from(req.status) {
            Ok(ListStatus::All) => None,
            Ok(ListStatus::NotHandled) => Some(EventStatus::EventNotHandled),
            Ok(ListStatus::Success) => Some(EventStatus::EventSuccess),
            Ok(ListStatus::Failure) => Some(EventStatus::EventFailure),
            Ok(ListStatus::Outdated) => Some(EventStatus::EventOutdated),
            Err(_) => {
                return Err(ServiceError::InvalidArgument(format!(
                    "unknown status {} given",
                    req.status
                )));
            }
        };
        let wanted = status.map(|s| s as i32);
        let of_status = move |e: &model::Event| wanted.is_none_or(|s| e.status == s);
        let mut opts = ListOptions::new(slot::EVENT_BY_PROJECT, caller.project_id.clone());
        if req.from > 0 {
            opts.sk_from = Some(sort_ts(req.from));
        }
        if req.to > 0 {
            opts.sk_to = Some(sort_ts(req.to));
        }
        // NONE has no order upstream (whatever the database returns); ascending here.
        opts.descending = req.order == ListOrder::Desc as i32;
        if wanted.is_some() {
            opts.filter = Some(&of_status);
        }
        let page = self
            .stores
            .events
            .list(opts)
            .await
            .map_err(|e| ServiceError::store(e, "list events"))?;
        Ok(ListEventsResponse { events: page.items })
    }

    /// Sets the status of events the watcher handled; SUCCESS and FAILURE stamp
    /// `handled_at`. Deviation: upstream updates any event id it is given; here each event
    /// must belong to the caller's project (another project's is `NotFound`).
    pub async fn report_event_statuses(
        &self,
        caller: &PipedCaller,
        req: ReportEventStatusesRequest,
    ) -> Result<ReportEventStatusesResponse, ServiceError> {
        req.validate()?;
        for reported in &req.events {
            let what = format!("update status of event {}", reported.id);
            let now = now_unix();
            update_checked(
                &self.stores.events,
                &caller.project_id,
                &reported.id,
                &what,
                |e| {
                    e.status = reported.status;
                    e.status_description = reported.status_description.clone();
                    if e.status == EventStatus::EventSuccess as i32
                        || e.status == EventStatus::EventFailure as i32
                    {
                        e.handled_at = now;
                    }
                    Ok(())
                },
            )
            .await?;
        }
        Ok(ReportEventStatusesResponse {})
    }
}
