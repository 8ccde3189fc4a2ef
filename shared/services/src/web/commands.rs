//! WebService: commands.

use wisp_proto::webservice::*;

use super::{Authorized, WebApi};
use crate::error::ServiceError;

impl WebApi {
    pub async fn get_command(
        &self,
        _caller: &Authorized,
        _req: GetCommandRequest,
    ) -> Result<GetCommandResponse, ServiceError> {
        Err(ServiceError::Unimplemented(
            "GetCommand is not implemented yet".into(),
        ))
    }
}
