//! What every Lambda function shares, so that each function's main only wires config →
//! stores → service → runtime: the ALB adaptation and its size limits, the service
//! stacks, init (feature `aws`), JSON logs, and the scheduled-jobs handler.

pub mod alb;
#[cfg(feature = "aws")]
pub mod boot;
pub mod jobs;
pub mod limits;
pub mod stack;
pub mod telemetry;

pub use alb::AlbService;
