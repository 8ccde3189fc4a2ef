//! `wisp project add|list`.

use clap::Subcommand;
use serde_json::json;
use wisp_services::ops;
use wisp_store::entities::{pk, slot};

use super::admin::{print_json, store_failure, usage};
use super::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project with a generated static admin (printed once).
    Add {
        id: String,
        #[arg(long, default_value = "")]
        desc: String,
        /// Log in through this entry of the config's `sharedSSOConfigs` (its client
        /// secret stays in the config, not in the project).
        #[arg(long, value_name = "NAME")]
        shared_sso: Option<String>,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// List projects.
    List {
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(cmd: ProjectCommand) -> Result<(), CliError> {
    match cmd {
        ProjectCommand::Add {
            id,
            desc,
            shared_sso,
            stores,
            json,
        } => {
            let opened = stores.open().await?;
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
            let defined_in_config = opened.config_projects().contains_key(&id);
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
            let opened = stores.open().await?;
            let mut rows = Vec::new();
            for (id, desc) in opened
                .config_projects()
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
