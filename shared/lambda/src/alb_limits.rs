// The ALB's size limits for Lambda targets, in one place: included by `limits.rs` (the
// functions refuse what the ALB would) and by the end-to-end tests' ALB emulator
// (tests/e2e/support/lambda.rs), which holds requests and responses to the same limits.
// A fragment for `include!`, so no inner doc: AWS, Elastic Load Balancing User Guide,
// "Lambda functions as targets" (elasticloadbalancing/latest/application/
// lambda-functions.html): "The maximum size of the request body that you can send to a
// Lambda function is 1 MB" and "The maximum size of the response JSON that the Lambda
// function can send is 1 MB". Whether a MB is 10^6 or 2^20 bytes is not said; we take
// the smaller.

/// Largest request body the ALB hands to a Lambda function.
pub const ALB_MAX_REQUEST_BODY: usize = 1_000_000;
/// Largest response document (JSON) the ALB accepts from a Lambda function.
pub const ALB_MAX_RESPONSE_JSON: usize = 1_000_000;
