//! WebService: events.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn list_events(
        &self,
        _caller: &Authorized,
        _req: ListEventsRequest,
    ) -> Result<ListEventsResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "ListEvents is not implemented yet".into(),
        ))
    }
}
