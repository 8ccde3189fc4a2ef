//! Test support shared by every crate's tests: temporary stores laid out as `wisp serve`
//! lays them out, and fixtures of the entities tests seed. A dev-dependency only; like
//! tests, it panics on a broken environment instead of returning errors.
#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use tempfile::TempDir;
use wisp_proto::model;
use wisp_store::{Cache, MemoryCache, Stores};
use wisp_store_embedded::{LocalFilestore, SqliteDatastore};

/// Embedded stores in a temporary directory (removed when dropped): the SQLite database
/// `wisp.db` and the filestore `files/` in it, and an in-process cache.
pub struct TempStores {
    pub stores: Stores,
    dir: TempDir,
}

impl std::fmt::Debug for TempStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempStores")
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl TempStores {
    /// With the default in-process cache.
    pub fn new() -> TempStores {
        TempStores::with_cache(Arc::new(MemoryCache::default()))
    }

    /// With `cache` instead (a failing or counting one, say).
    pub fn with_cache(cache: Arc<dyn Cache>) -> TempStores {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let datastore =
            SqliteDatastore::open(dir.path().join("wisp.db")).expect("open the SQLite datastore");
        let filestore =
            LocalFilestore::open(dir.path().join("files")).expect("open the local filestore");
        TempStores {
            stores: Stores::new(Arc::new(datastore), Arc::new(filestore), cache),
            dir,
        }
    }

    /// The directory holding the stores.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Default for TempStores {
    fn default() -> Self {
        TempStores::new()
    }
}

impl std::ops::Deref for TempStores {
    type Target = Stores;
    fn deref(&self) -> &Stores {
        &self.stores
    }
}

/// Entities as the admin commands create them, with only what tests vary.
pub mod fixtures {
    use super::model;

    /// A piped of `project` with no key.
    pub fn piped(project: &str, id: &str) -> model::Piped {
        model::Piped {
            id: id.into(),
            name: id.into(),
            project_id: project.into(),
            ..Default::default()
        }
    }

    /// A piped of `project` whose one key is `key`, hashed at bcrypt's lowest cost (tests
    /// verify it often).
    pub fn piped_with_key(project: &str, id: &str, key: &str) -> model::Piped {
        let hash = wisp_auth::keys::hash_secret_with_cost(key, wisp_auth::keys::MIN_COST)
            .expect("hash the key");
        model::Piped {
            keys: vec![model::PipedKey {
                hash,
                creator: "test".into(),
                created_at: 1_700_000_000,
            }],
            ..piped(project, id)
        }
    }

    /// An application of `piped` in `project`.
    pub fn application(project: &str, piped: &str, id: &str, name: &str) -> model::Application {
        model::Application {
            id: id.into(),
            name: name.into(),
            piped_id: piped.into(),
            project_id: project.into(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stores_live_in_the_directory_until_dropped() {
        let stores = TempStores::new();
        let dir = stores.dir().to_path_buf();
        stores
            .pipeds
            .create(fixtures::piped_with_key("p", "piped-1", "secret"))
            .await
            .expect("create");
        let got = stores.pipeds.get("p", "piped-1").await.expect("get");
        assert!(wisp_auth::verify_secret("secret", &got.keys[0].hash));
        assert!(dir.join("wisp.db").is_file());
        drop(stores);
        assert!(!dir.exists());
    }
}
