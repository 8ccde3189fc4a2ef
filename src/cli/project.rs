//! `wisp project add|list|update|reset-password`.

use clap::Subcommand;
use serde_json::json;
use wisp_services::ops;
use wisp_store::projects::ProjectSource;

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
    /// List projects, with their static admin and flags.
    List {
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Change a project's description or flags (projects in the datastore; those of the
    /// config file are changed there).
    Update {
        id: String,
        #[arg(long)]
        desc: Option<String>,
        /// Let users who match no role of the project in as viewers (SSO).
        #[arg(long, value_name = "BOOL")]
        allow_stray_as_viewer: Option<bool>,
        /// Turn the static admin's login off (true) or on (false).
        #[arg(long, value_name = "BOOL")]
        static_admin_disabled: Option<bool>,
        #[command(flatten)]
        stores: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Give the project's static admin a new generated password (printed once), and
    /// optionally a new username.
    ResetPassword {
        id: String,
        #[arg(long)]
        username: Option<String>,
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
            let defined_in_config = opened.projects().is_config_project(&id);
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
            let rows: Vec<Row> = opened
                .projects()
                .list()
                .await
                .map_err(|e| store_failure(e, "list projects"))?
                .iter()
                .map(|(p, source)| Row::of(p, *source))
                .collect();
            if json {
                print_json(json!(rows.iter().map(Row::json).collect::<Vec<_>>()));
            } else {
                for row in rows {
                    println!("{}", row.line());
                }
            }
            Ok(())
        }
        ProjectCommand::Update {
            id,
            desc,
            allow_stray_as_viewer,
            static_admin_disabled,
            stores,
            json,
        } => {
            if desc.is_none() && allow_stray_as_viewer.is_none() && static_admin_disabled.is_none()
            {
                return Err(usage(
                    "nothing to change: give --desc, --allow-stray-as-viewer or --static-admin-disabled",
                ));
            }
            let opened = stores.open().await?;
            refuse_config_project(&opened, &id)?;
            let project = ops::projects::update_settings(
                &opened.stores.projects,
                &id,
                ops::projects::ProjectSettings {
                    desc,
                    allow_stray_as_viewer,
                    static_admin_disabled,
                },
            )
            .await?;
            let row = Row::from_stored(&project);
            if json {
                print_json(row.json());
            } else {
                println!("{}", row.line());
            }
            Ok(())
        }
        ProjectCommand::ResetPassword {
            id,
            username,
            stores,
            json,
        } => {
            let opened = stores.open().await?;
            refuse_config_project(&opened, &id)?;
            let password = wisp_auth::keys::generate_random_string(30);
            let project = ops::projects::set_static_admin(
                &opened.stores.projects,
                &id,
                username.as_deref(),
                &password,
            )
            .await?;
            let username = project.static_admin.map(|a| a.username).unwrap_or_default();
            if json {
                print_json(json!({"id": id, "username": username, "password": password}));
            } else {
                println!("Reset the static admin of project {id}.");
                println!(
                    "Static admin (shown only once): username {username}, password {password}"
                );
            }
            Ok(())
        }
    }
}

/// The config file's projects are read-only here: say where to change them.
fn refuse_config_project(opened: &wisp_app::App, id: &str) -> Result<(), CliError> {
    if opened.projects().is_config_project(id) {
        return Err(usage(format!(
            "project {id} is defined in the config file ({}); change it there",
            opened.config.source
        )));
    }
    Ok(())
}

/// One line of `wisp project list`.
struct Row {
    id: String,
    desc: String,
    source: &'static str,
    admin: String,
    static_admin_disabled: bool,
    allow_stray_as_viewer: bool,
}

impl Row {
    fn from_stored(p: &wisp_proto::model::Project) -> Row {
        Row::of(p, ProjectSource::Datastore)
    }

    fn of(p: &wisp_proto::model::Project, source: ProjectSource) -> Row {
        Row {
            id: p.id.clone(),
            desc: p.desc.clone(),
            source: match source {
                ProjectSource::Config => "config",
                ProjectSource::Datastore => "datastore",
            },
            admin: p
                .static_admin
                .as_ref()
                .map(|a| a.username.clone())
                .unwrap_or_default(),
            static_admin_disabled: p.static_admin_disabled,
            allow_stray_as_viewer: p.allow_stray_as_viewer,
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "id": self.id,
            "desc": self.desc,
            "source": self.source,
            "staticAdmin": self.admin,
            "staticAdminDisabled": self.static_admin_disabled,
            "allowStrayAsViewer": self.allow_stray_as_viewer,
        })
    }

    /// `id  source  desc  flags`, tab-separated (the first three as before the flags
    /// existed, so scripts reading them keep working).
    fn line(&self) -> String {
        let mut flags = vec![format!("admin={}", self.admin)];
        if self.static_admin_disabled {
            flags.push("static-admin-disabled".into());
        }
        if self.allow_stray_as_viewer {
            flags.push("allow-stray-as-viewer".into());
        }
        format!(
            "{}\t{}\t{}\t{}",
            self.id,
            self.source,
            self.desc,
            flags.join(",")
        )
    }
}
