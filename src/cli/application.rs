//! `wisp application add|list|enable|disable|delete`, through the same domain
//! operations as pipectl and the console (`wisp_services::ops::applications`).

use std::collections::HashMap;

use clap::{Args, Subcommand};
use serde_json::json;
use wisp_proto::model;
use wisp_services::{ServiceError, ops};

use super::admin::{print_json, require_project, usage};
use super::piped::{PipedRef, get_piped};
use super::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum ApplicationCommand {
    /// Register an application managed by a piped.
    Add(ApplicationAdd),
    /// List a project's applications.
    List {
        #[arg(long)]
        project: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Enable a disabled application: its piped deploys it again.
    Enable(ApplicationRef),
    /// Disable an application: its piped leaves it alone.
    Disable(ApplicationRef),
    /// Delete an application (it stays on record, deleted and disabled, and can no longer
    /// be changed).
    Delete(ApplicationRef),
}

#[derive(Debug, Args)]
pub struct ApplicationRef {
    #[arg(long)]
    pub project: String,
    /// The application id.
    pub id: String,
    #[command(flatten)]
    pub stores: StoreArgs,
}

#[derive(Debug, Args)]
pub struct ApplicationAdd {
    #[arg(long)]
    pub project: String,
    /// Id of the piped that manages the application.
    #[arg(long)]
    pub piped: String,
    #[arg(long)]
    pub name: String,
    /// Repository id as configured in the piped (`repositories[].repoId`).
    #[arg(long)]
    pub repo_id: String,
    /// Directory of the application in the repository.
    #[arg(long)]
    pub path: String,
    /// Application config file name in that directory, e.g. `app.pipecd.yaml`.
    #[arg(long)]
    pub config_file: String,
    #[arg(long, default_value = "")]
    pub desc: String,
    /// A label `key=value`; repeatable.
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// A deploy target `PLUGIN=TARGET` (plugin-architecture pipeds); repeatable.
    #[arg(long = "deploy-target")]
    pub deploy_targets: Vec<String>,
    #[command(flatten)]
    pub stores: StoreArgs,
    #[arg(long)]
    pub json: bool,
}

fn split_pair<'a>(raw: &'a str, what: &str, form: &str) -> Result<(&'a str, &'a str), CliError> {
    match raw.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => Ok((k.trim(), v.trim())),
        _ => Err(usage(format!("bad {what} {raw:?}: expected {form}"))),
    }
}

pub async fn run(cmd: ApplicationCommand) -> Result<(), CliError> {
    match cmd {
        ApplicationCommand::Add(a) => add_application(a).await,
        ApplicationCommand::List {
            project,
            stores,
            json,
        } => {
            let opened = stores.open().await?;
            require_project(&opened, &project).await?;
            let apps = ops::applications::list_applications(
                &opened.stores.applications,
                &project,
                ops::applications::ApplicationQuery::default(),
            )
            .await?
            .items;
            if json {
                let list: Vec<_> = apps
                    .iter()
                    .map(|a| {
                        let git = a.git_path.clone().unwrap_or_default();
                        json!({"id": a.id, "name": a.name, "piped_id": a.piped_id, "disabled": a.disabled,
                               "repo_id": git.repo.map(|r| r.id).unwrap_or_default(), "path": git.path,
                               "config_filename": git.config_filename, "labels": a.labels})
                    })
                    .collect();
                print_json(json!(list));
            } else {
                for a in apps {
                    let state = if a.disabled { "disabled" } else { "enabled" };
                    println!("{}\t{}\tpiped={}\t{state}", a.id, a.name, a.piped_id);
                }
            }
            Ok(())
        }
        ApplicationCommand::Enable(r) => change(r, Change::Enable).await,
        ApplicationCommand::Disable(r) => change(r, Change::Disable).await,
        ApplicationCommand::Delete(r) => change(r, Change::Delete).await,
    }
}

#[derive(Debug, Clone, Copy)]
enum Change {
    Enable,
    Disable,
    Delete,
}

async fn change(r: ApplicationRef, change: Change) -> Result<(), CliError> {
    let opened = r.stores.open().await?;
    require_project(&opened, &r.project).await?;
    let applications = &opened.stores.applications;
    let done = match change {
        Change::Enable => {
            ops::applications::set_application_disabled(applications, &r.project, &r.id, false)
                .await
                .map(|_| "enabled")
        }
        Change::Disable => {
            ops::applications::set_application_disabled(applications, &r.project, &r.id, true)
                .await
                .map(|_| "disabled")
        }
        Change::Delete => ops::applications::delete_application(applications, &r.project, &r.id)
            .await
            .map(|_| "deleted"),
    }
    .map_err(|e| match e {
        ServiceError::NotFound(_) => usage(format!(
            "unknown application {} in project {}",
            r.id, r.project
        )),
        other => other.into(),
    })?;
    println!("Application {} {done}.", r.id);
    Ok(())
}

async fn add_application(a: ApplicationAdd) -> Result<(), CliError> {
    let name = a.name.trim().to_string();
    let mut labels = HashMap::new();
    for raw in &a.labels {
        let (k, v) = split_pair(raw, "label", "key=value")?;
        labels.insert(k.to_string(), v.to_string());
    }
    let mut deploy_targets: HashMap<String, model::DeployTargets> = HashMap::new();
    for raw in &a.deploy_targets {
        let (plugin, target) = split_pair(raw, "deploy target", "PLUGIN=TARGET")?;
        deploy_targets
            .entry(plugin.to_string())
            .or_default()
            .deploy_targets
            .push(target.to_string());
    }
    let opened = a.stores.open().await?;
    let piped = get_piped(
        &opened,
        &PipedRef {
            project: a.project.clone(),
            id: a.piped.clone(),
            stores: a.stores.clone(),
        },
    )
    .await?;
    let new = ops::applications::NewApplication {
        name,
        repo_id: a.repo_id.clone(),
        path: a.path.trim_matches('/').to_string(),
        config_filename: a.config_file.clone(),
        description: a.desc.clone(),
        labels,
        deploy_targets_by_plugin: deploy_targets,
        ..Default::default()
    };
    let app = ops::applications::add_application(
        &opened.stores.applications,
        &a.project,
        &piped,
        new,
        ops::applications::RepositoryCheck::ReportedOrNoneYet,
    )
    .await
    .map_err(|e| match e {
        ServiceError::NotFound(_) => {
            let known: Vec<_> = piped.repositories.iter().map(|r| r.id.as_str()).collect();
            usage(format!(
                "piped {} has no repository {:?} (it reported: {})",
                a.piped,
                a.repo_id,
                known.join(", ")
            ))
        }
        other => other.into(),
    })?;
    let id = app.id;
    if a.json {
        print_json(json!({"id": id}));
    } else {
        println!("Created application {id}.");
    }
    Ok(())
}
