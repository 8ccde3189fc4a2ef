//! Applications: register one on a piped, in a repository that piped reported.

use std::collections::HashMap;

use wisp_proto::model::{self, ApplicationKind};
use wisp_store::collection::Collection;

use crate::error::ServiceError;
use crate::support::new_id;

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
