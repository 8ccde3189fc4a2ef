//! What the credential verifiers read, served from the stores: the wiring between
//! `wisp-auth` (store-free) and `wisp-store`.

use async_trait::async_trait;
use wisp_auth::{ApiKeyAuthInfo, ApiKeyAuthSource, PipedAuthInfo, PipedKeySource, SourceError};
use wisp_store::projects::ProjectDirectory;
use wisp_store::revocations::Revoked;
use wisp_store::{StoreError, stores::Stores};

#[derive(Clone)]
pub struct StoreKeySource {
    stores: Stores,
    /// The config file's projects (never in the datastore) over the datastore's.
    projects: ProjectDirectory,
}

impl std::fmt::Debug for StoreKeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreKeySource").finish_non_exhaustive()
    }
}

impl StoreKeySource {
    pub fn new(stores: Stores, config_projects: impl IntoIterator<Item = String>) -> Self {
        StoreKeySource {
            projects: ProjectDirectory::with_config_ids(stores.projects.clone(), config_projects),
            stores,
        }
    }
}

/// The store's error kept whole as the source: the edge logs its chain (the backend's
/// own error code), the client never sees it.
fn source_error(err: StoreError) -> SourceError {
    SourceError::caused_by("read the credential's records", err)
}

#[async_trait]
impl PipedKeySource for StoreKeySource {
    async fn project_exists(&self, project_id: &str) -> Result<bool, SourceError> {
        self.projects.exists(project_id).await.map_err(source_error)
    }

    async fn piped(&self, piped_id: &str) -> Result<Option<PipedAuthInfo>, SourceError> {
        match self.stores.pipeds.get_any(piped_id).await {
            Ok(p) => Ok(Some(PipedAuthInfo {
                project_id: p.project_id,
                disabled: p.disabled,
                key_hashes: p.keys.into_iter().map(|k| k.hash).collect(),
            })),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(source_error(e)),
        }
    }

    async fn piped_revoked_since(&self, project_id: &str, piped_id: &str, since_ms: i64) -> bool {
        self.stores
            .revocations
            .revoked_since(
                Revoked::Piped {
                    project_id,
                    piped_id,
                },
                since_ms,
            )
            .await
    }

    async fn replace_piped_key_hash(&self, project_id: &str, piped_id: &str, old: &str, new: &str) {
        let what = format!("upgrade a key hash of piped {piped_id}");
        let result = crate::support::update_checked(
            &self.stores.pipeds,
            project_id,
            piped_id,
            &what,
            |piped| {
                for key in piped.keys.iter_mut().filter(|k| k.hash == old) {
                    key.hash = new.to_string();
                }
                Ok(())
            },
        )
        .await;
        match result {
            Ok(_) => tracing::info!(
                piped_id,
                "piped key from upstream now stored with the fast hash"
            ),
            Err(e) => {
                tracing::warn!(piped_id, error = %wisp_store::error::chain(&e), "could not upgrade a piped key hash")
            }
        }
    }
}

#[async_trait]
impl ApiKeyAuthSource for StoreKeySource {
    async fn api_key(&self, id: &str) -> Result<Option<ApiKeyAuthInfo>, SourceError> {
        match self.stores.api_keys.get_any(id).await {
            Ok(k) => Ok(Some(ApiKeyAuthInfo {
                id: k.id,
                name: k.name,
                project_id: k.project_id,
                role: k.role,
                disabled: k.disabled,
                key_hash: k.key_hash,
            })),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(source_error(e)),
        }
    }

    async fn api_key_revoked_since(&self, project_id: &str, id: &str, since_ms: i64) -> bool {
        self.stores
            .revocations
            .revoked_since(Revoked::ApiKey { project_id, id }, since_ms)
            .await
    }

    async fn replace_api_key_hash(&self, project_id: &str, id: &str, old: &str, new: &str) {
        let what = format!("upgrade the hash of API key {id}");
        let result =
            crate::support::update_checked(&self.stores.api_keys, project_id, id, &what, |key| {
                if key.key_hash == old {
                    key.key_hash = new.to_string();
                }
                Ok(())
            })
            .await;
        match result {
            Ok(_) => tracing::info!(
                api_key_id = id,
                "API key from upstream now stored with the fast hash"
            ),
            Err(e) => {
                tracing::warn!(api_key_id = id, error = %wisp_store::error::chain(&e), "could not upgrade an API key hash")
            }
        }
    }
}
