//! WebService: the 51 RPCs the PipeCD web console calls, transport-free.
//!
//! The transport verifies the session cookie into a [`WebCaller`], then asks
//! [`WebApi::authorize`] for the RPC's RBAC requirement (upstream's `(model.rbac)`
//! method options, kept in [`rbac`]); only an [`Authorized`] caller reaches a method, so
//! no RPC can skip the check. Every handler scopes reads and writes to the caller's
//! project. Deviations from upstream are marked `Deviation:` where they happen.

mod api_keys;
mod applications;
mod budget;
mod chains;
mod commands;
mod deployments;
mod events;
mod insights;
pub mod logins;
mod pipeds;
mod project;
pub mod rbac;
pub mod sso_policy;

use wisp_proto::model;
use wisp_store::collection::{Collection, Entity};
use wisp_store::projects::ProjectDirectory;
use wisp_store::stores::Stores;

use crate::error::ServiceError;

pub use budget::ResponseBudget;
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

pub use wisp_store::projects::config_project;

/// The WebService implementation over a set of stores.
pub struct WebApi {
    stores: Stores,
    /// Projects defined in the config file (never in the datastore, read-only from the
    /// console, built-in roles only) over the datastore's.
    projects: ProjectDirectory,
    /// AES-256 key protecting stored SSO client secrets (the encryption key's first
    /// 32 bytes).
    sso_key: Option<[u8; 32]>,
    /// The most one answer may weigh, where the transport has a bound (behind the ALB).
    response_budget: Option<ResponseBudget>,
    /// What SSO settings may make the control plane reach.
    sso_policy: sso_policy::ProviderPolicy,
    /// What `ListReleasedVersions`/`ListDeprecatedNotes` answer.
    releases: PipedReleases,
}

/// The piped releases the console's upgrade dialog offers, from the configuration's
/// `pipedReleases` (Deviation: upstream asks GitHub; see `wisp_config::PipedReleasesConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PipedReleases {
    /// Newest first.
    pub versions: Vec<String>,
    /// `(version, notes)`: breaking-change notes per release.
    pub deprecated_notes: Vec<(String, String)>,
}

impl std::fmt::Debug for WebApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebApi").finish_non_exhaustive()
    }
}

impl WebApi {
    pub fn new(stores: Stores, config_projects: Vec<model::Project>) -> Self {
        WebApi {
            projects: ProjectDirectory::new(stores.projects.clone(), config_projects),
            stores,
            sso_key: None,
            response_budget: None,
            sso_policy: sso_policy::ProviderPolicy::default(),
            releases: PipedReleases::default(),
        }
    }

    /// The piped releases the upgrade dialog offers (none unless set).
    pub fn with_piped_releases(mut self, releases: PipedReleases) -> Self {
        self.releases = releases;
        self
    }

    /// Shortens the answers that can be shortened (stage logs) to fit `budget`.
    pub fn with_response_budget(mut self, budget: ResponseBudget) -> Self {
        self.response_budget = Some(budget);
        self
    }

    /// The key that encrypts SSO client secrets at rest.
    pub fn with_sso_key(mut self, key: [u8; 32]) -> Self {
        self.sso_key = Some(key);
        self
    }

    /// What SSO settings may make the control plane reach (checked when they are saved).
    pub fn with_sso_policy(mut self, policy: sso_policy::ProviderPolicy) -> Self {
        self.sso_policy = policy;
        self
    }

    fn sso_key(&self) -> Option<&[u8; 32]> {
        self.sso_key.as_ref()
    }

    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// The config-file project with this id, if any.
    pub fn config_project(&self, id: &str) -> Option<&model::Project> {
        self.projects.config_project(id)
    }
}

impl WebApi {
    /// The entity `id` of `collection`, if it is in the caller's project: NotFound when
    /// there is none, PermissionDenied (upstream's answer) when it is another project's.
    /// Nothing of another project's object is returned.
    async fn owned<E: Entity>(
        &self,
        collection: &Collection<E>,
        id: &str,
        caller: &Authorized,
        what: &str,
    ) -> Result<E, ServiceError> {
        let entity = crate::ops::find(collection, id, what).await?;
        if entity.project_id() != caller.project_id() {
            return Err(ServiceError::PermissionDenied(format!(
                "Requested {what} does not belong to your project"
            )));
        }
        Ok(entity)
    }

    /// Config-file projects are read-only from the console.
    fn check_project_writable(&self, caller: &Authorized) -> Result<(), ServiceError> {
        if self.config_project(caller.project_id()).is_some() {
            return Err(ServiceError::FailedPrecondition(
                "Failed to update a debug project specified in the control-plane configuration"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// An empty required field: upstream's validation message names it.
fn required(field: &str, value: &str) -> Result<(), ServiceError> {
    if value.trim().is_empty() {
        return Err(ServiceError::InvalidArgument(format!(
            "invalid request: {field} must not be empty"
        )));
    }
    Ok(())
}

/// AES-256-GCM with a random nonce, as base64 of nonce ‖ ciphertext.
fn seal(key: &[u8; 32], plaintext: &str) -> Result<String, ServiceError> {
    use aes_gcm::aead::{Aead, KeyInit};
    use base64::Engine;
    let cipher = aes_gcm::Aes256Gcm::new_from_slice(key)
        .map_err(|_| ServiceError::Internal("Failed to encrypt".into()))?;
    let nonce_bytes: [u8; 12] = rand::random();
    let mut nonce = aes_gcm::aead::Nonce::<aes_gcm::Aes256Gcm>::default();
    nonce.copy_from_slice(&nonce_bytes);
    let sealed = cipher
        .encrypt(&nonce, plaintext.as_bytes())
        .map_err(|_| ServiceError::Internal("Failed to encrypt".into()))?;
    let mut out = nonce_bytes.to_vec();
    out.extend_from_slice(&sealed);
    Ok(base64::engine::general_purpose::STANDARD.encode(out))
}

/// Opens what `seal` sealed (SSO client secrets, for the login flow).
pub fn unseal(key: &[u8; 32], sealed: &str) -> Result<String, ServiceError> {
    use aes_gcm::aead::{Aead, KeyInit};
    use base64::Engine;
    let failed = || ServiceError::FailedPrecondition("the stored SSO secret is unreadable".into());
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(sealed)
        .map_err(|_| failed())?;
    if bytes.len() < 12 {
        return Err(failed());
    }
    let (nonce_bytes, ciphertext) = bytes.split_at(12);
    let cipher = aes_gcm::Aes256Gcm::new_from_slice(key).map_err(|_| failed())?;
    let mut nonce = aes_gcm::aead::Nonce::<aes_gcm::Aes256Gcm>::default();
    nonce.copy_from_slice(nonce_bytes);
    let plain = cipher.decrypt(&nonce, ciphertext).map_err(|_| failed())?;
    String::from_utf8(plain).map_err(|_| failed())
}
