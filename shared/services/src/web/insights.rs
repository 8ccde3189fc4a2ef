//! WebService: insights.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn get_insight_data(
        &self,
        _caller: &Authorized,
        _req: GetInsightDataRequest,
    ) -> Result<GetInsightDataResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetInsightData is not implemented yet".into(),
        ))
    }

    pub async fn get_insight_application_count(
        &self,
        _caller: &Authorized,
        _req: GetInsightApplicationCountRequest,
    ) -> Result<GetInsightApplicationCountResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetInsightApplicationCount is not implemented yet".into(),
        ))
    }
}
