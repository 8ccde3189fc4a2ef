//! `wisp piped add|list|disable|enable|rotate-key|delete-old-keys`.

use clap::{Args, Subcommand};
use serde_json::json;
use wisp_proto::model;
use wisp_services::{ServiceError, ops};
use wisp_store::StoreError;

use super::admin::{CLI_CREATOR, print_json, require_project, store_failure, usage};
use crate::error::CliError;
use wisp_app::App;

use super::stores::StoreArgs;

#[derive(Debug, Subcommand)]
pub enum PipedCommand {
    /// Register a piped; prints its id and key (the key is shown only once).
    Add {
        #[arg(long)]
        project: String,
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "")]
        desc: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// List a project's pipeds.
    List {
        #[arg(long)]
        project: String,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Disable a piped: its credentials stop working (within the verifier cache TTL).
    Disable(PipedRef),
    /// Enable a disabled piped.
    Enable(PipedRef),
    /// Add a new key to a piped (at most two are valid at once), printing it once.
    RotateKey {
        #[command(flatten)]
        piped: PipedRef,
        #[arg(long)]
        json: bool,
    },
    /// Drop every key of a piped but the newest, ending a rotation.
    DeleteOldKeys(PipedRef),
}

#[derive(Debug, Args)]
pub struct PipedRef {
    #[arg(long)]
    pub project: String,
    /// The piped id.
    pub id: String,
    #[command(flatten)]
    pub stores: StoreArgs,
}

pub(crate) async fn get_piped(opened: &App, r: &PipedRef) -> Result<model::Piped, CliError> {
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

pub async fn run(cmd: PipedCommand) -> Result<(), CliError> {
    match cmd {
        PipedCommand::Add {
            project,
            name,
            desc,
            stores,
            json,
        } => {
            let opened = stores.open().await?;
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
            let opened = stores.open().await?;
            require_project(&opened, &project).await?;
            let pipeds = ops::pipeds::list_pipeds(&opened.stores.pipeds, &project, None).await?;
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
            let opened = piped.stores.open().await?;
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
            let opened = r.stores.open().await?;
            get_piped(&opened, &r).await?;
            ops::pipeds::delete_old_piped_keys(&opened.stores, &r.project, &r.id).await?;
            println!("Piped {} now has only its newest key.", r.id);
            Ok(())
        }
    }
}

async fn set_disabled(r: PipedRef, disabled: bool) -> Result<(), CliError> {
    let opened = r.stores.open().await?;
    get_piped(&opened, &r).await?;
    ops::pipeds::set_piped_disabled(&opened.stores, &r.project, &r.id, disabled).await?;
    let state = if disabled { "disabled" } else { "enabled" };
    println!(
        "Piped {} {state}. Servers already running apply it within {} s (credential cache).",
        r.id,
        wisp_auth::VERIFIED_TTL.as_secs()
    );
    Ok(())
}
