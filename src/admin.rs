//! The admin CLI: project, piped and application registration, acting directly on the
//! configured stores with the operator's own access (no admin server to expose).

use std::collections::HashMap;

use clap::Args;
use serde_json::json;
use wisp_proto::model;
use wisp_services::{ServiceError, ops};
use wisp_store::StoreError;
use wisp_store::entities::{pk, slot};

use crate::cli::{
    ApiKeyCommand, ApplicationCommand, CliError, PipedCommand, PipedRef, ProjectCommand,
};
use crate::setup::{self, Opened, StoreArgs};

/// Who the CLI records as the creator of keys it makes.
const CLI_CREATOR: &str = "wisp-cli";

fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

fn store_failure(err: StoreError, what: &str) -> CliError {
    match err {
        StoreError::NotFound(_) => usage(format!("{what}: not found")),
        StoreError::AlreadyExists(_) => usage(format!("{what}: already exists")),
        StoreError::InvalidArgument(m) => usage(format!("{what}: {m}")),
        other => CliError::Failure(anyhow::anyhow!("{what}: {other}")),
    }
}

fn print_json(value: serde_json::Value) {
    println!("{value}");
}

pub async fn project(cmd: ProjectCommand) -> Result<(), CliError> {
    match cmd {
        ProjectCommand::Add {
            id,
            desc,
            shared_sso,
            stores,
            json,
        } => {
            let opened = setup::open(&stores).await?;
            let id = id.trim().to_string();
            if let Some(name) = &shared_sso
                && opened.config.spec.shared_sso_config(name).is_none()
            {
                return Err(usage(format!(
                    "--shared-sso {name}: the config has no sharedSSOConfigs entry named {name}"
                )));
            }
            let username = wisp_auth::keys::generate_random_string(10);
            let password = wisp_auth::keys::generate_random_string(30);
            let defined_in_config = opened.config_projects.contains_key(&id);
            ops::projects::create_project(
                &opened.stores.projects,
                ops::projects::NewProject {
                    id: id.clone(),
                    desc,
                    admin_username: username.clone(),
                    admin_password: password.clone(),
                    shared_sso_name: shared_sso.unwrap_or_default(),
                },
                defined_in_config,
            )
            .await?;
            if json {
                print_json(json!({"id": id, "username": username, "password": password}));
            } else {
                println!("Created project {id}.");
                println!(
                    "Static admin (shown only once): username {username}, password {password}"
                );
            }
            Ok(())
        }
        ProjectCommand::List { stores, json } => {
            let opened = setup::open(&stores).await?;
            let mut rows = Vec::new();
            for (id, desc) in opened
                .config_projects
                .iter()
                .map(|(id, p)| (id.clone(), p.desc.clone()))
            {
                rows.push((id, desc, "config"));
            }
            let stored = opened
                .stores
                .projects
                .list_all(slot::PROJECT_ALL, pk::PROJECT_ALL, None)
                .await
                .map_err(|e| store_failure(e, "list projects"))?;
            for p in stored {
                rows.push((p.id, p.desc, "datastore"));
            }
            rows.sort();
            if json {
                let list: Vec<_> = rows
                    .iter()
                    .map(|(id, desc, source)| json!({"id": id, "desc": desc, "source": source}))
                    .collect();
                print_json(json!(list));
            } else {
                for (id, desc, source) in rows {
                    println!("{id}\t{source}\t{desc}");
                }
            }
            Ok(())
        }
    }
}

async fn require_project(opened: &Opened, project: &str) -> Result<(), CliError> {
    if opened
        .project_exists(project)
        .await
        .map_err(|e| store_failure(e, "look up project"))?
    {
        Ok(())
    } else {
        Err(usage(format!(
            "unknown project {project:?} (see `wisp project list`, create one with `wisp project add`)"
        )))
    }
}

async fn get_piped(opened: &Opened, r: &PipedRef) -> Result<model::Piped, CliError> {
    require_project(opened, &r.project).await?;
    opened
        .stores
        .pipeds
        .get(&r.project, &r.id)
        .await
        .map_err(|e| match e {
            StoreError::NotFound(_) => {
                usage(format!("unknown piped {} in project {}", r.id, r.project))
            }
            other => store_failure(other, "get piped"),
        })
}

fn print_piped_key(id: &str, key: &str, json: bool) {
    if json {
        print_json(json!({"id": id, "key": key}));
    } else {
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(key);
        println!("Piped id:  {id}");
        println!("Piped key: {key}   (shown only once; put it in pipedKeyFile)");
        println!("pipedKeyData (base64): {data}");
    }
}

pub async fn piped(cmd: PipedCommand) -> Result<(), CliError> {
    match cmd {
        PipedCommand::Add {
            project,
            name,
            desc,
            stores,
            json,
        } => {
            let opened = setup::open(&stores).await?;
            require_project(&opened, &project).await?;
            let (piped, key) = ops::pipeds::register_piped(
                &opened.stores.pipeds,
                &project,
                name.trim().to_string(),
                desc,
                CLI_CREATOR,
            )
            .await?;
            let id = piped.id;
            print_piped_key(&id, &key, json);
            Ok(())
        }
        PipedCommand::List {
            project,
            stores,
            json,
        } => {
            let opened = setup::open(&stores).await?;
            require_project(&opened, &project).await?;
            let pipeds = opened
                .stores
                .pipeds
                .list_all(slot::PIPED_BY_PROJECT, project.clone(), None)
                .await
                .map_err(|e| store_failure(e, "list pipeds"))?;
            if json {
                let list: Vec<_> = pipeds
                    .iter()
                    .map(|p| {
                        json!({"id": p.id, "name": p.name, "desc": p.desc, "disabled": p.disabled,
                               "version": p.version, "keys": p.keys.len(), "started_at": p.started_at})
                    })
                    .collect();
                print_json(json!(list));
            } else {
                for p in pipeds {
                    let state = if p.disabled { "disabled" } else { "enabled" };
                    let version = if p.version.is_empty() {
                        "-"
                    } else {
                        &p.version
                    };
                    println!(
                        "{}\t{}\t{state}\t{version}\t{} key(s)",
                        p.id,
                        p.name,
                        p.keys.len()
                    );
                }
            }
            Ok(())
        }
        PipedCommand::Disable(r) => set_disabled(r, true).await,
        PipedCommand::Enable(r) => set_disabled(r, false).await,
        PipedCommand::RotateKey { piped, json } => {
            let opened = setup::open(&piped.stores).await?;
            get_piped(&opened, &piped).await?;
            let key = ops::pipeds::add_piped_key(
                &opened.stores.pipeds,
                &piped.project,
                &piped.id,
                CLI_CREATOR,
            )
            .await
            .map_err(|e| match e {
                ServiceError::FailedPrecondition(why) => usage(format!(
                    "{why}: run `wisp piped delete-old-keys --project {} {}`",
                    piped.project, piped.id
                )),
                other => other.into(),
            })?;
            print_piped_key(&piped.id, &key, json);
            Ok(())
        }
        PipedCommand::DeleteOldKeys(r) => {
            let opened = setup::open(&r.stores).await?;
            get_piped(&opened, &r).await?;
            ops::pipeds::delete_old_piped_keys(&opened.stores.pipeds, &r.project, &r.id).await?;
            println!("Piped {} now has only its newest key.", r.id);
            Ok(())
        }
    }
}

async fn set_disabled(r: PipedRef, disabled: bool) -> Result<(), CliError> {
    let opened = setup::open(&r.stores).await?;
    get_piped(&opened, &r).await?;
    ops::pipeds::set_piped_disabled(&opened.stores.pipeds, &r.project, &r.id, disabled).await?;
    let state = if disabled { "disabled" } else { "enabled" };
    println!(
        "Piped {} {state}. Servers already running apply it within {} s (credential cache).",
        r.id,
        wisp_auth::VERIFIED_TTL.as_secs()
    );
    Ok(())
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

pub async fn application(cmd: ApplicationCommand) -> Result<(), CliError> {
    match cmd {
        ApplicationCommand::Add(a) => add_application(a).await,
        ApplicationCommand::List {
            project,
            stores,
            json,
        } => {
            let opened = setup::open(&stores).await?;
            require_project(&opened, &project).await?;
            let apps = opened
                .stores
                .applications
                .list_all(slot::APPLICATION_BY_PROJECT, project.clone(), None)
                .await
                .map_err(|e| store_failure(e, "list applications"))?;
            let apps: Vec<_> = apps.into_iter().filter(|a| !a.deleted).collect();
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
    }
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
    let opened = setup::open(&a.stores).await?;
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

fn role_name(role: i32) -> &'static str {
    model::api_key::Role::try_from(role).map_or("UNKNOWN", |r| r.as_str_name())
}

pub async fn api_key(cmd: ApiKeyCommand) -> Result<(), CliError> {
    match cmd {
        ApiKeyCommand::Add {
            project,
            name,
            role,
            stores,
            json,
        } => {
            let role = ops::api_keys::parse_role(&role)?;
            let opened = setup::open(&stores).await?;
            require_project(&opened, &project).await?;
            let (api_key, key) = ops::api_keys::generate_api_key(
                &opened.stores.api_keys,
                &project,
                name.trim().to_string(),
                role,
                CLI_CREATOR,
            )
            .await?;
            let id = api_key.id;
            if json {
                print_json(json!({"id": id, "key": key}));
            } else {
                println!("API key id: {id}");
                println!("API key:    {key}   (shown only once; pass it to pipectl --api-key)");
            }
            Ok(())
        }
        ApiKeyCommand::List {
            project,
            stores,
            json,
        } => {
            let opened = setup::open(&stores).await?;
            require_project(&opened, &project).await?;
            let keys = opened
                .stores
                .api_keys
                .list_all(slot::API_KEY_BY_PROJECT, project.clone(), None)
                .await
                .map_err(|e| store_failure(e, "list API keys"))?;
            if json {
                let list: Vec<_> = keys
                    .iter()
                    .map(|k| {
                        json!({"id": k.id, "name": k.name, "role": role_name(k.role),
                               "disabled": k.disabled, "creator": k.creator,
                               "created_at": k.created_at, "last_used_at": k.last_used_at})
                    })
                    .collect();
                print_json(json!(list));
            } else {
                for k in keys {
                    let state = if k.disabled { "disabled" } else { "enabled" };
                    let last_used = if k.last_used_at == 0 {
                        "never used".to_string()
                    } else {
                        format!("last used {}", k.last_used_at)
                    };
                    println!(
                        "{}\t{}\t{}\t{state}\t{last_used}",
                        k.id,
                        k.name,
                        role_name(k.role)
                    );
                }
            }
            Ok(())
        }
        ApiKeyCommand::Disable {
            project,
            id,
            stores,
        } => {
            let opened = setup::open(&stores).await?;
            require_project(&opened, &project).await?;
            ops::api_keys::disable_api_key(&opened.stores.api_keys, &project, &id)
                .await
                .map_err(|e| match e {
                    ServiceError::NotFound(_) => {
                        usage(format!("unknown API key {id} in project {project}"))
                    }
                    other => other.into(),
                })?;
            println!(
                "API key {id} disabled. Servers already running apply it within {} s (credential cache).",
                wisp_auth::VERIFIED_TTL.as_secs()
            );
            Ok(())
        }
    }
}
