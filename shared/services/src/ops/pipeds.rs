//! Pipeds: register one (its key returned once), read and list them, rename, add a key,
//! keep only the newest key, enable and disable.

use wisp_proto::model;
use wisp_store::collection::{Collection, ListOptions};
use wisp_store::entities::slot;
use wisp_store::revocations::Revoked;
use wisp_store::stores::Stores;

use super::REDACTED;
use crate::error::ServiceError;
use crate::support::{new_id, now_unix, update_checked};

/// A piped's name must say something: not empty, not only spaces. It is stored as given.
fn check_name(name: &str) -> Result<(), ServiceError> {
    if name.trim().is_empty() {
        return Err(ServiceError::InvalidArgument(
            "piped name must not be empty".into(),
        ));
    }
    Ok(())
}

/// A new piped of `project_id` with one freshly generated key, and that key in clear
/// (shown once).
pub fn new_piped(
    project_id: &str,
    name: String,
    desc: String,
    creator: &str,
) -> Result<(model::Piped, String), ServiceError> {
    check_name(&name)?;
    let key = wisp_auth::generate_piped_key();
    let hash = wisp_auth::hash_generated_key(&key);
    let piped = model::Piped {
        id: new_id(),
        name,
        desc,
        project_id: project_id.to_string(),
        keys: vec![model::PipedKey {
            hash,
            creator: creator.to_string(),
            created_at: now_unix(),
        }],
        ..Default::default()
    };
    Ok((piped, key))
}

/// Registers a piped in `project_id` with a fresh key, created by `creator` (the API
/// key's name, the console user, `wisp-cli`); the piped and its key in clear.
pub async fn register_piped(
    pipeds: &Collection<model::Piped>,
    project_id: &str,
    name: String,
    desc: String,
    creator: &str,
) -> Result<(model::Piped, String), ServiceError> {
    let (piped, key) = new_piped(project_id, name, desc, creator)?;
    let what = format!("add piped {}", piped.id);
    let piped = pipeds
        .create(piped)
        .await
        .map_err(|e| ServiceError::store(e, &what))?;
    Ok((piped, key))
}

/// A piped of any project (the caller checks whose it is), key hashes redacted.
pub async fn get_piped(
    pipeds: &Collection<model::Piped>,
    id: &str,
) -> Result<model::Piped, ServiceError> {
    let mut piped = super::find(pipeds, id, "piped").await?;
    redact_piped(&mut piped);
    Ok(piped)
}

/// The project's pipeds, key hashes redacted; only the enabled (`Some(true)`) or
/// disabled (`Some(false)`) ones when asked.
pub async fn list_pipeds(
    pipeds: &Collection<model::Piped>,
    project_id: &str,
    enabled: Option<bool>,
) -> Result<Vec<model::Piped>, ServiceError> {
    let matches = |p: &model::Piped| enabled.is_none_or(|e| p.disabled != e);
    let mut opts = ListOptions::new(slot::PIPED_BY_PROJECT, project_id.to_string());
    opts.filter = Some(&matches);
    let page = pipeds
        .list(opts)
        .await
        .map_err(|e| ServiceError::store(e, "list pipeds"))?;
    Ok(page
        .items
        .into_iter()
        .map(|mut p| {
            redact_piped(&mut p);
            p
        })
        .collect())
}

/// Renames a piped and sets its description (the name as [`register_piped`] wants it).
pub async fn update_piped(
    pipeds: &Collection<model::Piped>,
    project_id: &str,
    piped_id: &str,
    name: &str,
    desc: &str,
) -> Result<model::Piped, ServiceError> {
    check_name(name)?;
    let what = format!("update piped {piped_id}");
    update_checked(pipeds, project_id, piped_id, &what, |p| {
        p.name = name.to_string();
        p.desc = desc.to_string();
        Ok(())
    })
    .await
}

/// Adds a fresh key in front of the piped's keys (it keeps working with the old one
/// until [`delete_old_piped_keys`]); the new key in clear. FailedPrecondition when the
/// piped has the most keys already.
pub async fn add_piped_key(
    pipeds: &Collection<model::Piped>,
    project_id: &str,
    piped_id: &str,
    creator: &str,
) -> Result<String, ServiceError> {
    let key = wisp_auth::generate_piped_key();
    let hash = wisp_auth::hash_generated_key(&key);
    let entry = model::PipedKey {
        hash,
        creator: creator.to_string(),
        created_at: now_unix(),
    };
    let what = format!("add a key to piped {piped_id}");
    update_checked(pipeds, project_id, piped_id, &what, |p| {
        if p.keys.len() >= wisp_auth::MAX_PIPED_KEYS {
            return Err(ServiceError::FailedPrecondition(format!(
                "piped {} already has {} keys: delete the old ones first",
                p.id,
                p.keys.len()
            )));
        }
        p.keys.insert(0, entry.clone());
        Ok(())
    })
    .await?;
    Ok(key)
}

/// Keeps only the piped's newest key; the others stop working.
pub async fn delete_old_piped_keys(
    stores: &Stores,
    project_id: &str,
    piped_id: &str,
) -> Result<model::Piped, ServiceError> {
    let what = format!("delete the old keys of piped {piped_id}");
    let piped = update_checked(&stores.pipeds, project_id, piped_id, &what, |p| {
        keep_newest_key(p);
        Ok(())
    })
    .await?;
    revoke_piped(
        stores,
        project_id,
        piped_id,
        &format!("The old keys of piped {piped_id} were deleted"),
    )
    .await?;
    Ok(piped)
}

async fn revoke_piped(
    stores: &Stores,
    project_id: &str,
    piped_id: &str,
    done: &str,
) -> Result<(), ServiceError> {
    super::revoke(
        stores,
        Revoked::Piped {
            project_id,
            piped_id,
        },
        super::credential_revocation_until(),
        done,
    )
    .await
}

/// The newest key by creation time; of keys made in the same second, the one added last
/// (keys are added in front), so a rotation never loses the key it just handed out.
pub fn keep_newest_key(piped: &mut model::Piped) {
    // A stable sort keeps the front-most of equal times first.
    piped.keys.sort_by_key(|k| std::cmp::Reverse(k.created_at));
    piped.keys.truncate(1);
}

/// Enables or disables a piped: a disabled piped's credentials stop working.
pub async fn set_piped_disabled(
    stores: &Stores,
    project_id: &str,
    piped_id: &str,
    disabled: bool,
) -> Result<model::Piped, ServiceError> {
    let what = format!("update piped {piped_id}");
    let piped = update_checked(&stores.pipeds, project_id, piped_id, &what, |p| {
        p.disabled = disabled;
        Ok(())
    })
    .await?;
    if disabled {
        revoke_piped(
            stores,
            project_id,
            piped_id,
            &format!("Piped {piped_id} was disabled"),
        )
        .await?;
    }
    Ok(piped)
}

/// The piped as clients may see it: key hashes redacted.
pub fn redact_piped(piped: &mut model::Piped) {
    for key in &mut piped.keys {
        key.hash = REDACTED.to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(hash: &str, created_at: i64) -> model::PipedKey {
        model::PipedKey {
            hash: hash.into(),
            creator: "t".into(),
            created_at,
        }
    }

    #[test]
    fn the_newest_key_stays_and_a_same_second_rotation_keeps_the_new_key() {
        let mut piped = model::Piped {
            keys: vec![key("new", 100), key("old", 100)],
            ..Default::default()
        };
        keep_newest_key(&mut piped);
        assert_eq!(piped.keys, vec![key("new", 100)]);
        let mut piped = model::Piped {
            keys: vec![key("older", 5), key("newer", 9)],
            ..Default::default()
        };
        keep_newest_key(&mut piped);
        assert_eq!(piped.keys, vec![key("newer", 9)]);
    }

    #[test]
    fn names_must_say_something() {
        assert!(check_name("dev").is_ok());
        assert!(matches!(
            check_name(""),
            Err(ServiceError::InvalidArgument(_))
        ));
        assert!(matches!(
            check_name("  "),
            Err(ServiceError::InvalidArgument(_))
        ));
    }
}
