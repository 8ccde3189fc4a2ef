//! SDK errors onto `StoreError`: what a retry later may fix is `Unavailable`, the rest
//! `Internal`, always with the operation and the record it was about.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
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
    let mut context = format!("DynamoDB {operation} {what}");
    // The error code and message in the context too: they are what an operator searches
    // for. The SDK's error stays whole as the source (its code reachable by downcast, its
    // full context in the log at the edge).
    if let SdkError::ServiceError(e) = &err {
        context.push_str(&format!(
            ": {} (HTTP {}): {}",
            e.err().code().unwrap_or("unknown error"),
            e.raw().status().as_u16(),
            e.err().message().unwrap_or("no message")
        ));
    }
    if retryable {
        StoreError::unavailable_from(context, err)
    } else {
        StoreError::internal_from(context, err)
    }
}
