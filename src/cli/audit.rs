//! `wisp audit list`, and the audit entries of the CLI's own changes: each command that
//! changes records (`project add|update|reset-password`, `piped add|disable|enable|
//! rotate-key|delete-old-keys`, `application add|enable|disable|delete`, `api-key
//! add|disable`) is recorded once it made its change, by [`CliChange::record`], with the
//! OS user as the actor (`cli:<user>`), `local` as the source and `OK` as the result. A
//! command that failed changed nothing (each checks before it writes) and is not
//! recorded; the entry is stored without a log line, stderr being the command's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use serde_json::json;
use wisp_store::audit::{AuditEntry, AuditFilter};

use super::admin::{print_json, store_failure, usage};
use super::stores::StoreArgs;
use super::{Command, api_key, application, piped, project};
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List who changed what, newest first: one project's entries, or (without
    /// `--project`) every project's and the scheduled jobs'.
    List(AuditList),
}

#[derive(Debug, Args)]
pub struct AuditList {
    #[arg(long)]
    project: Option<String>,
    /// Entries of this recent period (`24h`, `30m`) or since this Unix time (seconds).
    #[arg(long)]
    since: Option<String>,
    /// Entries of this actor: `user:alice`, `api-key:ID`, `piped:ID`, `cli:USER`,
    /// `job:NAME`, or the part after the colon.
    #[arg(long)]
    actor: Option<String>,
    /// Entries of this method: `WebService/DisablePiped`, or `DisablePiped`.
    #[arg(long)]
    method: Option<String>,
    /// At most this many entries.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    #[command(flatten)]
    stores: StoreArgs,
    #[arg(long)]
    json: bool,
}

pub async fn run(cmd: AuditCommand) -> Result<(), CliError> {
    match cmd {
        AuditCommand::List(args) => list(args).await,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `--since`: a period back from now, or Unix seconds.
fn since_ms(raw: &str) -> Result<i64, CliError> {
    if let Ok(seconds) = raw.parse::<i64>() {
        return Ok(seconds.saturating_mul(1000));
    }
    let ago: Duration = wisp_config::parse_go_duration(raw).map_err(|_| {
        usage(format!(
            "bad --since {raw:?}: expected a period such as 24h or 30m, or Unix seconds"
        ))
    })?;
    Ok(now_ms().saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX)))
}

async fn list(args: AuditList) -> Result<(), CliError> {
    let filter = AuditFilter {
        since_ms: args.since.as_deref().map(since_ms).transpose()?,
        actor: args.actor,
        method: args.method,
        limit: args.limit,
    };
    let opened = args.stores.open().await?;
    let projects = match args.project {
        Some(p) => vec![p],
        None => {
            let config: Vec<String> = opened.config_projects().keys().cloned().collect();
            let mut all = wisp_jobs::all_projects(&opened.stores, &config)
                .await
                .map_err(|e| store_failure(e, "list projects"))?;
            // The scheduled jobs' runs are under no project.
            all.push(String::new());
            all
        }
    };
    let mut entries: Vec<AuditEntry> = Vec::new();
    for project in &projects {
        let found = opened
            .stores
            .audit
            .list(project, &filter)
            .await
            .map_err(|e| store_failure(e, "list audit entries"))?;
        entries.extend(found);
    }
    entries.sort_by(|a, b| (b.at_ms, &b.id).cmp(&(a.at_ms, &a.id)));
    if filter.limit != 0 {
        entries.truncate(filter.limit);
    }
    if args.json {
        print_json(json!(entries));
        return Ok(());
    }
    for e in &entries {
        let project = if e.project_id.is_empty() {
            "-"
        } else {
            &e.project_id
        };
        println!(
            "{}  {project}  {}  {}  [{}]  from {}  {}",
            e.at_ms / 1000,
            e.actor,
            e.method,
            e.targets.join(","),
            e.source,
            e.code
        );
    }
    Ok(())
}

/// A change the CLI is about to make, recorded once the command ran.
#[derive(Debug)]
pub struct CliChange {
    project: String,
    method: &'static str,
    targets: Vec<String>,
    stores: StoreArgs,
}

impl CliChange {
    /// What `command` changes, if it changes records.
    pub fn of(command: &Command) -> Option<CliChange> {
        let change = |project: &str, method, targets: Vec<&str>, stores: &StoreArgs| {
            Some(CliChange {
                project: project.to_string(),
                method,
                targets: targets.into_iter().map(str::to_string).collect(),
                stores: stores.clone(),
            })
        };
        match command {
            Command::Project(cmd) => match cmd {
                project::ProjectCommand::Add { id, stores, .. } => {
                    change(id, "project add", vec![id], stores)
                }
                project::ProjectCommand::Update { id, stores, .. } => {
                    change(id, "project update", vec![id], stores)
                }
                project::ProjectCommand::ResetPassword { id, stores, .. } => {
                    change(id, "project reset-password", vec![id], stores)
                }
                project::ProjectCommand::List { .. } => None,
            },
            Command::Piped(cmd) => match cmd {
                piped::PipedCommand::Add {
                    project,
                    name,
                    stores,
                    ..
                } => change(project, "piped add", vec![name], stores),
                piped::PipedCommand::Disable(r) => {
                    change(&r.project, "piped disable", vec![&r.id], &r.stores)
                }
                piped::PipedCommand::Enable(r) => {
                    change(&r.project, "piped enable", vec![&r.id], &r.stores)
                }
                piped::PipedCommand::RotateKey { piped: r, .. } => {
                    change(&r.project, "piped rotate-key", vec![&r.id], &r.stores)
                }
                piped::PipedCommand::DeleteOldKeys(r) => {
                    change(&r.project, "piped delete-old-keys", vec![&r.id], &r.stores)
                }
                piped::PipedCommand::List { .. } => None,
            },
            Command::Application(cmd) => match cmd {
                application::ApplicationCommand::Add(a) => change(
                    &a.project,
                    "application add",
                    vec![&a.name, &a.piped],
                    &a.stores,
                ),
                application::ApplicationCommand::Enable(r) => {
                    change(&r.project, "application enable", vec![&r.id], &r.stores)
                }
                application::ApplicationCommand::Disable(r) => {
                    change(&r.project, "application disable", vec![&r.id], &r.stores)
                }
                application::ApplicationCommand::Delete(r) => {
                    change(&r.project, "application delete", vec![&r.id], &r.stores)
                }
                application::ApplicationCommand::List { .. } => None,
            },
            Command::ApiKey(cmd) => match cmd {
                api_key::ApiKeyCommand::Add {
                    project,
                    name,
                    stores,
                    ..
                } => change(project, "api-key add", vec![name], stores),
                api_key::ApiKeyCommand::Disable {
                    project,
                    id,
                    stores,
                } => change(project, "api-key disable", vec![id], stores),
                api_key::ApiKeyCommand::List { .. } => None,
            },
            _ => None,
        }
    }

    /// Records the change made. A failure to record is reported on stderr (the change
    /// itself is made).
    pub async fn record(self) {
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_else(|_| "unknown".to_string());
        let entry = AuditEntry::now(
            self.project,
            format!("cli:{user}"),
            format!("cli/{}", self.method),
            self.targets,
            "local",
            "OK",
        );
        match self.stores.open().await {
            Ok(opened) => {
                if let Err(e) = opened.stores.audit.record_quietly(&entry).await {
                    eprintln!(
                        "warning: the change was made but its audit entry could not be stored: {}",
                        wisp_telemetry::chain(&e)
                    );
                }
            }
            Err(e) => eprintln!(
                "warning: the change was made but its audit entry could not be stored: {e}"
            ),
        }
    }
}
