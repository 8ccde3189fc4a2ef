//! WebService: the 51 RPCs the PipeCD web console calls, transport-free.
//!
//! The transport verifies the session cookie into a [`WebCaller`], then asks
//! [`WebApi::authorize`] for the RPC's RBAC requirement (upstream's `(model.rbac)`
//! method options, kept in [`rbac`]); only an [`Authorized`] caller reaches a method, so
//! no RPC can skip the check. Every handler scopes reads and writes to the caller's
//! project. Deviations from upstream are marked `Deviation:` where they happen.

mod api_keys;
mod applications;
mod chains;
mod commands;
mod deployments;
mod events;
mod insights;
mod pipeds;
mod project;
pub mod rbac;

use std::sync::Arc;

use wisp_proto::model;
use wisp_store::stores::Stores;

pub use wisp_auth::WebCaller;

/// A caller whose roles allow the RPC being served. Only [`WebApi::authorize`] makes one.
#[derive(Debug, Clone)]
pub struct Authorized {
    caller: WebCaller,
}

impl Authorized {
    pub fn caller(&self) -> &WebCaller {
        &self.caller
    }

    pub fn project_id(&self) -> &str {
        &self.caller.project_id
    }

    pub fn subject(&self) -> &str {
        &self.caller.subject
    }
}

/// The WebService implementation over a set of stores.
pub struct WebApi {
    stores: Stores,
    /// Projects defined in the config file: never in the datastore, read-only from the
    /// console, built-in roles only.
    config_projects: Arc<Vec<model::Project>>,
}

impl WebApi {
    pub fn new(stores: Stores, config_projects: Vec<model::Project>) -> Self {
        WebApi {
            stores,
            config_projects: Arc::new(config_projects),
        }
    }

    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// The config-file project with this id, if any.
    pub fn config_project(&self, id: &str) -> Option<&model::Project> {
        self.config_projects.iter().find(|p| p.id == id)
    }
}
