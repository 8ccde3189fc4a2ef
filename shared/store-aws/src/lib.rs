//! AWS store backends: the DynamoDB `Datastore`, the S3 `Filestore`, and loading the
//! configuration and encryption key from Secrets Manager.

pub mod dynamodb;
pub mod open;
pub mod s3;
pub mod secrets;
