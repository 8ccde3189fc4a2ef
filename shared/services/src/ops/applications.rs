//! Applications: register one on a piped, in a repository that piped reported; read,
//! list, update, enable, disable and (soft) delete them. A deleted application cannot be
//! changed, whichever way the change comes in ([`refuse_deleted`]).

use std::collections::HashMap;

use wisp_model::event::contains_labels;
use wisp_proto::model::{self, ApplicationKind};
use wisp_store::collection::{Collection, EntityPage, ListOptions};
use wisp_store::entities::slot;

use crate::error::ServiceError;
use crate::support::{new_id, now_unix, update_checked};

/// An application to register, as every entry point describes it.
#[derive(Debug, Clone, Default)]
pub struct NewApplication {
    pub name: String,
    /// The piped's `repositories[].repoId`.
    pub repo_id: String,
    /// The application's directory in the repository.
    pub path: String,
    /// Its config file in that directory (`app.pipecd.yaml`).
    pub config_filename: String,
    pub kind: i32,
    pub platform_provider: String,
    pub description: String,
    pub labels: HashMap<String, String>,
    pub deploy_targets_by_plugin: HashMap<String, model::DeployTargets>,
}

/// Which repositories an application may be registered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepositoryCheck {
    /// Only those the piped reported (NotFound otherwise): APIService and WebService, as
    /// upstream.
    Reported,
    /// Those, and any repository while the piped has reported none yet: the operator
    /// (`wisp application add`, `wisp simulate`) registers applications before a piped's
    /// first start. Such an application has no remote, branch or URL.
    ReportedOrNoneYet,
}

/// Registers `new` on `piped` (the caller has checked that the piped is the project's)
/// in `project_id`. Names need not be unique (as upstream). The repository's remote and
/// branch come from what the piped reported, and the URL of the application's directory
/// is made from them.
pub async fn add_application(
    applications: &Collection<model::Application>,
    project_id: &str,
    piped: &model::Piped,
    new: NewApplication,
    check: RepositoryCheck,
) -> Result<model::Application, ServiceError> {
    let invalid = |m: &str| Err(ServiceError::InvalidArgument(m.to_string()));
    if new.name.trim().is_empty() {
        return invalid("application name must not be empty");
    }
    if new.repo_id.trim().is_empty() {
        return invalid("the application's repository id must not be empty");
    }
    if new.path.is_empty() || new.path.starts_with('/') {
        return invalid(
            "the application's path must be a directory relative to the repository root",
        );
    }
    if ApplicationKind::try_from(new.kind).is_err() {
        return Err(ServiceError::InvalidArgument(format!(
            "unknown application kind {}",
            new.kind
        )));
    }
    let git_path = git_path(piped, &new, check)?;
    let app = model::Application {
        id: new_id(),
        name: new.name,
        piped_id: piped.id.clone(),
        project_id: project_id.to_string(),
        git_path: Some(git_path),
        kind: new.kind,
        // Upstream still fills the deprecated field with the same value.
        cloud_provider: new.platform_provider.clone(),
        platform_provider: new.platform_provider,
        description: new.description,
        labels: new.labels,
        deploy_targets_by_plugin: new.deploy_targets_by_plugin,
        ..Default::default()
    };
    let what = format!("add application {}", app.id);
    applications
        .create(app)
        .await
        .map_err(|e| ServiceError::store(e, &what))
}

/// Upstream's datastore rule, checked inside every application update: a deleted
/// application is frozen. One code and one text for every entry point: InvalidArgument
/// `"Invalid argument to <verb> application <id>: cannot <verb> a deleted application"`
/// (upstream's `gRPCStoreError` text for its updaters' ErrInvalidArgument, and why).
pub fn refuse_deleted(app: &model::Application, verb: &str) -> Result<(), ServiceError> {
    if app.deleted {
        return Err(ServiceError::InvalidArgument(format!(
            "Invalid argument to {verb} application {}: cannot {verb} a deleted application",
            app.id
        )));
    }
    Ok(())
}

/// An application of any project (the caller checks whose it is).
pub async fn get_application(
    applications: &Collection<model::Application>,
    id: &str,
) -> Result<model::Application, ServiceError> {
    super::find(applications, id, "application").await
}

/// Read-modify-write of application `app_id` of `project_id` that is not deleted:
/// `mutate` runs after [`refuse_deleted`] (with `verb`, e.g. "update") and may run more
/// than once.
pub async fn change_application<F>(
    applications: &Collection<model::Application>,
    project_id: &str,
    app_id: &str,
    verb: &str,
    mut mutate: F,
) -> Result<model::Application, ServiceError>
where
    F: FnMut(&mut model::Application) -> Result<(), ServiceError> + Send,
{
    let what = format!("{verb} application {app_id}");
    update_checked(applications, project_id, app_id, &what, |app| {
        refuse_deleted(app, verb)?;
        mutate(app)
    })
    .await
}

/// What an update sets; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct ApplicationUpdate {
    /// The piped it moves to (the caller has checked that it is the project's).
    pub piped_id: String,
    /// Also written to the deprecated `cloud_provider`, as on registration.
    pub platform_provider: String,
    pub config_filename: String,
    pub name: Option<String>,
    pub kind: Option<i32>,
    pub deploy_targets_by_plugin: Option<HashMap<String, model::DeployTargets>>,
}

/// Moves the application to another piped of the project and sets its platform
/// provider, config file name and whatever else `update` names.
pub async fn update_application(
    applications: &Collection<model::Application>,
    project_id: &str,
    app_id: &str,
    update: ApplicationUpdate,
) -> Result<model::Application, ServiceError> {
    if let Some(kind) = update.kind
        && ApplicationKind::try_from(kind).is_err()
    {
        return Err(ServiceError::InvalidArgument(format!(
            "unknown application kind {kind}"
        )));
    }
    change_application(applications, project_id, app_id, "update", |app| {
        app.piped_id = update.piped_id.clone();
        app.platform_provider = update.platform_provider.clone();
        app.cloud_provider = update.platform_provider.clone();
        app.git_path.get_or_insert_default().config_filename = update.config_filename.clone();
        if let Some(name) = update.name.as_ref().filter(|n| !n.trim().is_empty()) {
            app.name = name.clone();
        }
        if let Some(kind) = update.kind {
            app.kind = kind;
        }
        if let Some(targets) = &update.deploy_targets_by_plugin {
            app.deploy_targets_by_plugin = targets.clone();
        }
        Ok(())
    })
    .await
}

/// Enables or disables an application: a disabled one is left out of its piped's list.
pub async fn set_application_disabled(
    applications: &Collection<model::Application>,
    project_id: &str,
    app_id: &str,
    disabled: bool,
) -> Result<model::Application, ServiceError> {
    let verb = if disabled { "disable" } else { "enable" };
    change_application(applications, project_id, app_id, verb, |app| {
        app.disabled = disabled;
        Ok(())
    })
    .await
}

/// Soft delete, as upstream: the application stays, deleted and disabled, stamped with
/// the time of its deletion; deleting it again is refused as any other change.
pub async fn delete_application(
    applications: &Collection<model::Application>,
    project_id: &str,
    app_id: &str,
) -> Result<model::Application, ServiceError> {
    let now = now_unix();
    change_application(applications, project_id, app_id, "delete", |app| {
        app.deleted = true;
        app.disabled = true;
        app.deleted_at = now;
        Ok(())
    })
    .await
}

/// Which of a project's applications to list; empty fields match everything.
#[derive(Debug, Clone, Default)]
pub struct ApplicationQuery {
    /// Only the disabled (`Some(true)`) or enabled (`Some(false)`) ones.
    pub disabled: Option<bool>,
    /// Any of these kinds.
    pub kinds: Vec<i32>,
    /// Any of these sync statuses.
    pub sync_statuses: Vec<i32>,
    pub name: String,
    pub piped_id: String,
    /// Every one of these labels.
    pub labels: HashMap<String, String>,
    /// Page size; 0 means all.
    pub limit: usize,
    pub cursor: String,
}

/// The project's applications, most recently updated first, matching `query`.
///
/// Deviation: deleted applications (which upstream keeps as disabled) are left out,
/// through every entry point.
pub async fn list_applications(
    applications: &Collection<model::Application>,
    project_id: &str,
    query: ApplicationQuery,
) -> Result<EntityPage<model::Application>, ServiceError> {
    let q = &query;
    let matches = |a: &model::Application| {
        let sync_status = a.sync_state.as_ref().map(|s| s.status).unwrap_or_default();
        !a.deleted
            && q.disabled.is_none_or(|d| a.disabled == d)
            && (q.kinds.is_empty() || q.kinds.contains(&a.kind))
            && (q.sync_statuses.is_empty() || q.sync_statuses.contains(&sync_status))
            && (q.name.is_empty() || a.name == q.name)
            && (q.piped_id.is_empty() || a.piped_id == q.piped_id)
            && contains_labels(&a.labels, &q.labels)
    };
    let mut opts = ListOptions::new(slot::APPLICATION_BY_PROJECT, project_id.to_string());
    opts.descending = true;
    opts.limit = q.limit;
    opts.cursor = q.cursor.clone();
    opts.filter = Some(&matches);
    applications
        .list(opts)
        .await
        .map_err(|e| ServiceError::store(e, "list applications"))
}

/// Upstream's `makeGitPath`: the reported repository and the directory's URL.
fn git_path(
    piped: &model::Piped,
    new: &NewApplication,
    check: RepositoryCheck,
) -> Result<model::ApplicationGitPath, ServiceError> {
    let repo = match piped.repositories.iter().find(|r| r.id == new.repo_id) {
        Some(repo) => repo.clone(),
        None if check == RepositoryCheck::ReportedOrNoneYet && piped.repositories.is_empty() => {
            return Ok(model::ApplicationGitPath {
                repo: Some(model::ApplicationGitRepository {
                    id: new.repo_id.clone(),
                    ..Default::default()
                }),
                path: new.path.clone(),
                config_filename: new.config_filename.clone(),
                url: String::new(),
            });
        }
        None => {
            // Upstream's text, then which repository and piped.
            return Err(ServiceError::NotFound(format!(
                "The requested repository is not found in the Piped configuration \
                 (repository {:?}, piped {})",
                new.repo_id, piped.id
            )));
        }
    };
    let url = wisp_model::git::make_dir_url(&repo.remote, &new.path, &repo.branch)
        .map_err(|e| ServiceError::internal("Failed to make GitPath URL", e))?;
    Ok(model::ApplicationGitPath {
        repo: Some(repo),
        path: new.path.clone(),
        config_filename: new.config_filename.clone(),
        url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piped(repos: &[(&str, &str)]) -> model::Piped {
        model::Piped {
            id: "p".into(),
            repositories: repos
                .iter()
                .map(|(id, remote)| model::ApplicationGitRepository {
                    id: id.to_string(),
                    remote: remote.to_string(),
                    branch: "main".into(),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn new(repo_id: &str) -> NewApplication {
        NewApplication {
            name: "web".into(),
            repo_id: repo_id.into(),
            path: "apps/web".into(),
            config_filename: "app.pipecd.yaml".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_repository_must_be_reported_unless_none_is_yet_for_the_operator() {
        let reported = piped(&[("examples", "https://github.com/pipe-cd/examples.git")]);
        let path = git_path(&reported, &new("examples"), RepositoryCheck::Reported).expect("known");
        assert_eq!(
            path.url,
            "https://github.com/pipe-cd/examples/tree/main/apps/web"
        );
        assert_eq!(path.repo.expect("repo").branch, "main");
        for check in [
            RepositoryCheck::Reported,
            RepositoryCheck::ReportedOrNoneYet,
        ] {
            assert!(matches!(
                git_path(&reported, &new("other"), check),
                Err(ServiceError::NotFound(_))
            ));
        }
        let silent = piped(&[]);
        assert!(matches!(
            git_path(&silent, &new("examples"), RepositoryCheck::Reported),
            Err(ServiceError::NotFound(_))
        ));
        let early = git_path(
            &silent,
            &new("examples"),
            RepositoryCheck::ReportedOrNoneYet,
        )
        .expect("accepted before the first report");
        assert_eq!(early.url, "");
        assert_eq!(early.repo.expect("repo").id, "examples");
    }
}
