//! `wisp api-key add|list|disable` (keys for pipectl).

use clap::Subcommand;
use serde_json::json;
use wisp_proto::model;
use wisp_services::{ServiceError, ops};

use super::admin::{CLI_CREATOR, print_json, require_project, usage};
use super::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum ApiKeyCommand {
    /// Create an API key; prints its id and key (the key is shown only once).
    Add {
        #[arg(long)]
        project: String,
        #[arg(long)]
        name: String,
        /// READ_ONLY or READ_WRITE.
        #[arg(long)]
        role: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// List a project's API keys (never their secrets).
    List {
        #[arg(long)]
        project: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Disable an API key: it stops working (within the verifier cache TTL).
    Disable {
        #[arg(long)]
        project: String,
        /// The API key id (the part of the key before the dot).
        id: String,
        #[command(flatten)]
        stores: StoreArgs,
    },
}

fn role_name(role: i32) -> &'static str {
    model::api_key::Role::try_from(role).map_or("UNKNOWN", |r| r.as_str_name())
}

pub async fn run(cmd: ApiKeyCommand) -> Result<(), CliError> {
    match cmd {
        ApiKeyCommand::Add {
            project,
            name,
            role,
            stores,
            json,
        } => {
            let role = ops::api_keys::parse_role(&role)?;
            let opened = stores.open().await?;
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
            let opened = stores.open().await?;
            require_project(&opened, &project).await?;
            let keys =
                ops::api_keys::list_api_keys(&opened.stores.api_keys, &project, None).await?;
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
            let opened = stores.open().await?;
            require_project(&opened, &project).await?;
            ops::api_keys::disable_api_key(&opened.stores, &project, &id)
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
