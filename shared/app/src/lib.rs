//! The composition root: the one place that turns sources (flags, environment) into a
//! running control plane.
//!
//! - [`sources`]: where the configuration and the encryption key come from
//!   ([`ConfigSource`], [`KeySource`]), and the one loader.
//! - [`stores`]: the one store opener (embedded or DynamoDB, local or S3, memory or
//!   Redis) and `wisp aws init`.
//! - [`App`]: the opened parts and the one builder of each service (PipedService,
//!   APIService, WebService, the console, the jobs' settings).
//! - `server` (feature `server`): the one server builder (bind, the layers in their one
//!   order, serve until shutdown) and `listen`, the connections it accepts.
//!
//! Features pick what a build includes, so that a Lambda function links only its own
//! service and the AWS stores: `embedded`, `aws`, `piped`, `api`, `web`, `console`,
//! `jobs`, `server`.

mod app;
pub mod error;
#[cfg(feature = "server")]
pub mod listen;
#[cfg(feature = "server")]
pub mod server;
pub mod sources;
pub mod stores;
#[cfg(feature = "server")]
pub mod tls;

#[cfg(feature = "console")]
pub use app::ConsoleOptions;
#[cfg(feature = "jobs")]
pub use app::job_schedule;
pub use app::{App, QUICKSTART_PASSWORD, QUICKSTART_PROJECT, QUICKSTART_USER};
pub use error::AppError;
pub use sources::{ConfigSource, KeySource, Sources};
