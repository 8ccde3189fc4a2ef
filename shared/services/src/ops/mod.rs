//! Domain operations on a project's pipeds and API keys, each written once: the CLI,
//! APIService, WebService and the simulator call these. A caller decides who may act
//! (roles, ownership answers of its own protocol); an operation applies the domain's
//! rules and does the write, scoped to the project it is given, so that an object of
//! another project reads as NotFound.

pub mod api_keys;
pub mod applications;
pub mod pipeds;
pub mod projects;

/// What replaces a secret (a key hash, a password hash) in objects handed to clients
/// (upstream's text).
pub const REDACTED: &str = "redacted";
