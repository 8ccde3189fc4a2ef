//! Projects kept in the datastore: create one with its static admin, set the static
//! admin's name and password, turn its login off or on, and change the description and
//! flags. (Projects defined in the config file are read-only.) The CLI and WebService
//! both go through these.

use wisp_proto::model;
use wisp_store::StoreError;
use wisp_store::collection::Collection;

use crate::error::ServiceError;
use crate::support::{hash_secret, update_checked};

/// Shortest static admin password accepted.
pub const MIN_PASSWORD_LEN: usize = 8;

/// Project ids: letters, digits, `-` and `_` (they appear in URLs, keys and credentials).
pub fn validate_project_id(id: &str) -> Result<(), ServiceError> {
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ServiceError::InvalidArgument(format!(
            "invalid project id {id:?}: use letters, digits, '-' and '_'"
        )));
    }
    Ok(())
}

/// The static admin `username` with `password`, stored as a bcrypt hash.
pub async fn static_admin(
    username: &str,
    password: &str,
) -> Result<model::ProjectStaticUser, ServiceError> {
    if username.trim().is_empty() {
        return Err(ServiceError::InvalidArgument(
            "invalid request: the static admin's username must not be empty".into(),
        ));
    }
    if password.len() < MIN_PASSWORD_LEN {
        return Err(ServiceError::InvalidArgument(format!(
            "invalid request: password must be at least {MIN_PASSWORD_LEN} characters"
        )));
    }
    Ok(model::ProjectStaticUser {
        username: username.to_string(),
        password_hash: hash_secret(password.to_string(), "password").await?,
    })
}

/// A project to create.
#[derive(Debug, Clone, Default)]
pub struct NewProject {
    pub id: String,
    pub desc: String,
    pub admin_username: String,
    pub admin_password: String,
    /// The config's `sharedSSOConfigs` entry it logs in with, if any (the caller has
    /// checked that it exists).
    pub shared_sso_name: String,
}

/// Creates a project in the datastore. AlreadyExists when one of that id is there, or
/// when `defined_in_config` (the config file's projects cannot be shadowed).
pub async fn create_project(
    projects: &Collection<model::Project>,
    new: NewProject,
    defined_in_config: bool,
) -> Result<model::Project, ServiceError> {
    validate_project_id(&new.id)?;
    if defined_in_config {
        return Err(ServiceError::AlreadyExists(format!(
            "project {} is defined in the config file already",
            new.id
        )));
    }
    let project = model::Project {
        static_admin: Some(static_admin(&new.admin_username, &new.admin_password).await?),
        id: new.id,
        desc: new.desc,
        shared_sso_name: new.shared_sso_name,
        ..Default::default()
    };
    let id = project.id.clone();
    projects.create(project).await.map_err(|e| match e {
        StoreError::AlreadyExists(_) => {
            ServiceError::AlreadyExists(format!("project {id} already exists"))
        }
        other => ServiceError::store(other, &format!("create project {id}")),
    })
}

/// What to change in a project; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct ProjectSettings {
    pub desc: Option<String>,
    pub allow_stray_as_viewer: Option<bool>,
    pub static_admin_disabled: Option<bool>,
}

/// Changes a datastore project's description and flags; NotFound when there is none.
pub async fn update_settings(
    projects: &Collection<model::Project>,
    id: &str,
    settings: ProjectSettings,
) -> Result<model::Project, ServiceError> {
    change(projects, id, |p| {
        if let Some(desc) = &settings.desc {
            p.desc = desc.clone();
        }
        if let Some(allow) = settings.allow_stray_as_viewer {
            p.allow_stray_as_viewer = allow;
        }
        if let Some(disabled) = settings.static_admin_disabled {
            p.static_admin_disabled = disabled;
        }
        Ok(())
    })
    .await
}

/// Sets the static admin's password, and its username when one is given (else the
/// current one is kept).
pub async fn set_static_admin(
    projects: &Collection<model::Project>,
    id: &str,
    username: Option<&str>,
    password: &str,
) -> Result<model::Project, ServiceError> {
    let current = projects
        .get(id, id)
        .await
        .map_err(|e| not_found_or_store(e, id, "read"))?;
    let username = match username {
        Some(name) => name.to_string(),
        None => current.static_admin.map(|a| a.username).unwrap_or_default(),
    };
    let admin = static_admin(&username, password).await?;
    change(projects, id, |p| {
        p.static_admin = Some(admin.clone());
        Ok(())
    })
    .await
}

/// One optimistic read-modify-write of project `id`.
pub(crate) async fn change<F>(
    projects: &Collection<model::Project>,
    id: &str,
    mutate: F,
) -> Result<model::Project, ServiceError>
where
    F: FnMut(&mut model::Project) -> Result<(), ServiceError> + Send,
{
    update_checked(projects, id, id, &format!("update project {id}"), mutate)
        .await
        .map_err(|e| match e {
            ServiceError::NotFound(_) => ServiceError::NotFound(format!("project {id} not found")),
            other => other,
        })
}

fn not_found_or_store(err: StoreError, id: &str, what: &str) -> ServiceError {
    match err {
        StoreError::NotFound(_) => ServiceError::NotFound(format!("project {id} not found")),
        other => ServiceError::store(other, &format!("{what} project {id}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_ids() {
        for good in ["quickstart", "team-a", "team_b", "A1"] {
            assert!(validate_project_id(good).is_ok(), "{good}");
        }
        for bad in ["", "bad id!", "a/b", "é"] {
            assert!(validate_project_id(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn static_admin_passwords_have_a_minimum_length() {
        assert!(matches!(
            static_admin("admin", "short").await,
            Err(ServiceError::InvalidArgument(_))
        ));
        assert!(matches!(
            static_admin(" ", "long enough").await,
            Err(ServiceError::InvalidArgument(_))
        ));
        let admin = static_admin("admin", "long enough").await.expect("valid");
        assert!(wisp_auth::verify_secret(
            "long enough",
            &admin.password_hash
        ));
    }
}
