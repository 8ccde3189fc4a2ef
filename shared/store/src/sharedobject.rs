//! Objects plugins share per application (pipedv1), opaque bytes at
//! `application-shared-objects/<appID>/<pluginName>/<key>.json` (upstream's layout; the
//! content need not be JSON).

use std::sync::Arc;

use crate::error::Result;
use crate::filestore::{Filestore, PutCondition};
use crate::support::check_segment;

/// The object path; `InvalidArgument` if a part is empty or would leave its segment.
pub fn shared_object_path(app_id: &str, plugin_name: &str, key: &str) -> Result<String> {
    check_segment("application id", app_id)?;
    check_segment("plugin name", plugin_name)?;
    // Plugins may nest keys (`a/b`), as upstream allows; every segment must be a plain name.
    if key.is_empty() {
        check_segment("shared object key", key)?;
    }
    for segment in key.split('/') {
        check_segment("shared object key segment", segment)?;
    }
    Ok(format!(
        "application-shared-objects/{app_id}/{plugin_name}/{key}.json"
    ))
}

#[derive(Clone)]
pub struct SharedObjectStore {
    filestore: Arc<dyn Filestore>,
}

impl std::fmt::Debug for SharedObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedObjectStore").finish_non_exhaustive()
    }
}

impl SharedObjectStore {
    pub fn new(filestore: Arc<dyn Filestore>) -> Self {
        SharedObjectStore { filestore }
    }

    /// `NotFound` when absent.
    pub async fn get(&self, app_id: &str, plugin_name: &str, key: &str) -> Result<Vec<u8>> {
        let path = shared_object_path(app_id, plugin_name, key)?;
        Ok(self.filestore.get(&path).await?.data)
    }

    pub async fn put(
        &self,
        app_id: &str,
        plugin_name: &str,
        key: &str,
        data: Vec<u8>,
    ) -> Result<()> {
        let path = shared_object_path(app_id, plugin_name, key)?;
        self.filestore.put(&path, data, PutCondition::Any).await?;
        Ok(())
    }
}
