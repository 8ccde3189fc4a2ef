//! SDK errors onto `StoreError`: what a retry later may fix is `Unavailable`, the rest
//! `Internal`, always with the operation and the record it was about.

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use wisp_store::error::StoreError;

/// Error codes that mean "DynamoDB is busy or briefly failing; try again".
const RETRYABLE_CODES: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionConflictException",
    "TransactionInProgressException",
    "LimitExceededException",
];

pub fn map_sdk_err<E>(operation: &str, what: &str, err: SdkError<E>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let retryable = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => true,
        SdkError::ResponseError(e) => e.raw().status().is_server_error(),
        SdkError::ServiceError(e) => {
            e.err().code().is_some_and(|c| RETRYABLE_CODES.contains(&c))
                || e.raw().status().is_server_error()
        }
        _ => false,
    };
    let detail = match &err {
        // The error code and message say it all; the SDK's full context repeats the raw
        // response.
        SdkError::ServiceError(e) => format!(
            "{} (HTTP {}): {}",
            e.err().code().unwrap_or("unknown error"),
            e.raw().status().as_u16(),
            e.err().message().unwrap_or("no message")
        ),
        _ => DisplayErrorContext(&err).to_string(),
    };
    let message = format!("DynamoDB {operation} {what}: {detail}");
    if retryable {
        StoreError::Unavailable(message)
    } else {
        StoreError::Internal(message)
    }
}
