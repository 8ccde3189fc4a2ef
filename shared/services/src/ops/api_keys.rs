//! API keys (for pipectl): create one (the key returned once), list them, disable one.

use wisp_proto::model::{self, api_key::Role};
use wisp_store::collection::{Collection, ListOptions};
use wisp_store::entities::slot;
use wisp_store::revocations::Revoked;
use wisp_store::stores::Stores;

use super::REDACTED;
use crate::error::ServiceError;
use crate::support::update_checked;

/// `READ_ONLY` or `READ_WRITE`, in any case, with `-` for `_`.
pub fn parse_role(raw: &str) -> Result<Role, ServiceError> {
    let normalized = raw.trim().to_ascii_uppercase().replace('-', "_");
    Role::from_str_name(&normalized).ok_or_else(|| {
        ServiceError::InvalidArgument(format!(
            "bad role {raw:?}: expected READ_ONLY or READ_WRITE"
        ))
    })
}

/// Creates an API key of `project_id` with `role`, created by `creator`; the key and the
/// whole key in clear (`<id>.<secret>`, shown once; only its bcrypt hash is kept).
pub async fn generate_api_key(
    api_keys: &Collection<model::ApiKey>,
    project_id: &str,
    name: String,
    role: Role,
    creator: &str,
) -> Result<(model::ApiKey, String), ServiceError> {
    if name.trim().is_empty() {
        return Err(ServiceError::InvalidArgument(
            "API key name must not be empty".into(),
        ));
    }
    let (id, key) = wisp_auth::generate_api_key();
    let key_hash = wisp_auth::hash_generated_key(&key);
    let api_key = model::ApiKey {
        id,
        name,
        key_hash,
        project_id: project_id.to_string(),
        role: role as i32,
        creator: creator.to_string(),
        ..Default::default()
    };
    let api_key = api_keys
        .create(api_key)
        .await
        .map_err(|e| ServiceError::store(e, "add API key"))?;
    Ok((api_key, key))
}

/// Disables an API key: it stops working for pipectl.
pub async fn disable_api_key(
    stores: &Stores,
    project_id: &str,
    id: &str,
) -> Result<model::ApiKey, ServiceError> {
    let key = update_checked(
        &stores.api_keys,
        project_id,
        id,
        &format!("disable API key {id}"),
        |k| {
            k.disabled = true;
            Ok(())
        },
    )
    .await?;
    super::revoke(
        stores,
        Revoked::ApiKey { project_id, id },
        super::credential_revocation_until(),
        &format!("API key {id} was disabled"),
    )
    .await?;
    Ok(key)
}

/// The project's API keys, hashes redacted; only the enabled (`Some(true)`) or disabled
/// (`Some(false)`) ones when asked.
pub async fn list_api_keys(
    api_keys: &Collection<model::ApiKey>,
    project_id: &str,
    enabled: Option<bool>,
) -> Result<Vec<model::ApiKey>, ServiceError> {
    let matches = |k: &model::ApiKey| enabled.is_none_or(|e| k.disabled != e);
    let mut opts = ListOptions::new(slot::API_KEY_BY_PROJECT, project_id.to_string());
    opts.filter = Some(&matches);
    let page = api_keys
        .list(opts)
        .await
        .map_err(|e| ServiceError::store(e, "list API keys"))?;
    Ok(page
        .items
        .into_iter()
        .map(|mut k| {
            redact_api_key(&mut k);
            k
        })
        .collect())
}

/// The key as clients may see it: its hash redacted.
pub fn redact_api_key(key: &mut model::ApiKey) {
    key.key_hash = REDACTED.to_string();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_in_any_spelling() {
        assert_eq!(parse_role("READ_ONLY").ok(), Some(Role::ReadOnly));
        assert_eq!(parse_role(" read-write ").ok(), Some(Role::ReadWrite));
        assert!(matches!(
            parse_role("admin"),
            Err(ServiceError::InvalidArgument(_))
        ));
    }
}
