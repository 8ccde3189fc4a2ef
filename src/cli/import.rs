//! `wisp import pipecd --from CONFIG`: copies an upstream PipeCD control plane's state
//! (its MySQL datastore and its filestore, as its control-plane config names them) into
//! the stores this command's own flags name, with `wisp migrate`'s engine: a progress bar,
//! resuming from a checkpoint, the per-kind counts of both sides at the end (exit 1 when
//! they differ), and `--dry-run`.
//!
//! Records keep their ids, timestamps and key hashes: pipeds keep their ids and keys,
//! API keys keep working. docs/MIGRATE-FROM-PIPECD.md gives the steps around it.
//!
//! The dump is not trusted ([`wisp_import::guard`]): a project Wisp already holds is not
//! replaced without `--replace-projects`, only the object paths upstream writes are
//! copied (never Wisp's revocations or the console's files), and what is refused is
//! listed on stderr, by `--dry-run` too, and so are the projects whose SSO logins behave
//! otherwise on Wisp ([`wisp_import::sso`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand};
use wisp_config::{Config, DatastoreConfig, FilestoreConfig};
use wisp_import::guard::{GuardedDatastore, GuardedFilestore, ImportGuard};
use wisp_store::filestore::Filestore;
use wisp_store::migrate::{Backends, FileCheckpoint, MigrateOptions};

use crate::cli::migrate::{Wording, copy_and_report};
use crate::cli::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Copy an upstream PipeCD control plane's datastore (MySQL) and filestore (S3,
    /// MinIO or a directory) into Wisp's stores.
    Pipecd(PipecdArgs),
}

#[derive(Debug, Args)]
pub struct PipecdArgs {
    /// The upstream control plane's config (its control-plane-config.yaml): where its
    /// MySQL datastore and its filestore are.
    #[arg(long, value_name = "CONFIG")]
    pub from: PathBuf,
    /// Compare only: report what would be copied or updated, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Start from the beginning, ignoring where an interrupted run stopped.
    #[arg(long)]
    pub restart: bool,
    /// Replace the projects Wisp already holds with the dump's (their static admin,
    /// settings and records). Without it such projects, and everything of theirs, are
    /// left out and listed.
    #[arg(long)]
    pub replace_projects: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub stores: StoreArgs,
}

pub async fn run(cmd: ImportCommand) -> Result<(), CliError> {
    match cmd {
        ImportCommand::Pipecd(args) => pipecd(args).await,
    }
}

async fn pipecd(args: PipecdArgs) -> Result<(), CliError> {
    if !args.from.is_file() {
        return Err(CliError::Usage(format!(
            "--from config {} does not exist",
            args.from.display()
        )));
    }
    let mut upstream = Config::from_file(&args.from).map_err(|e| CliError::Usage(e.to_string()))?;
    if let Some(base) = canonical(&args.from).parent() {
        upstream.resolve_relative_paths(base);
    }
    let DatastoreConfig::MySql(mysql) = &upstream.spec.datastore else {
        return Err(CliError::Usage(format!(
            "--from {}: the datastore is {}; `wisp import pipecd` reads MYSQL (Firestore: see docs/MIGRATE-FROM-PIPECD.md)",
            args.from.display(),
            upstream.spec.datastore.store_type().as_str()
        )));
    };
    let source_files = open_upstream_filestore(&upstream.spec.filestore, &args.from).await?;
    let source_records = wisp_import::UpstreamMysql::connect(mysql)
        .await
        .map_err(|e| CliError::Failure(anyhow::Error::new(e)))?;

    // The stores alone: opening the app on the defaults would first create the
    // quickstart project there, which the source does not have.
    let loaded = wisp_app::sources::load(&args.stores.sources(wisp_app::KeySource::None)).await?;
    let destination = wisp_app::stores::open(&loaded.config, &args.stores.data_dir).await?;
    let guard = ImportGuard::plan(
        &source_records,
        destination.datastore.clone(),
        destination.filestore.clone(),
        args.replace_projects,
    )
    .await
    .map_err(|e| CliError::Failure(anyhow::anyhow!("read the dump's projects: {e}")))?;
    let source_records = GuardedDatastore::new(source_records, guard.clone());
    let source_files = GuardedFilestore::new(source_files, guard.clone());
    let checkpoints = FileCheckpoint::new(checkpoint_path(&args.stores));
    let mut options = MigrateOptions::new(
        format!("pipecd:{}", canonical(&args.from).display()),
        destination_name(&args.stores),
    );
    options.restart = args.restart;
    options.dry_run = args.dry_run;
    // Wisp's stores may hold projects and pipeds of their own (the quickstart project):
    // what must hold is that every upstream record and object is there.
    options.verify_presence = true;
    let result = copy_and_report(
        Backends {
            datastore: &source_records,
            filestore: &source_files,
        },
        Backends {
            datastore: destination.datastore.as_ref(),
            filestore: destination.filestore.as_ref(),
        },
        &options,
        &checkpoints,
        &Wording {
            run: "import",
            destination: "IN WISP",
            json: args.json,
            mismatch_hint: "was the upstream control plane still writing, or did Wisp's \
                            stores hold other data?",
        },
    )
    .await;
    source_records.into_inner().disconnect().await;
    print_refusals(&guard, args.dry_run);
    print_sso_changes(&guard, &loaded.config.spec);
    result
}

/// The imported projects whose SSO logins behave otherwise on Wisp, on stderr
/// (docs/MIGRATE-FROM-PIPECD.md, "Single sign-on").
fn print_sso_changes(guard: &ImportGuard, wisp: &wisp_config::ControlPlaneSpec) {
    let changes = wisp_import::sso::changes(guard.taken_projects(), wisp);
    if changes.is_empty() {
        return;
    }
    eprintln!(
        "{} project(s) whose SSO logins behave differently on Wisp (see docs/MIGRATE-FROM-PIPECD.md, \"Single sign-on\"):",
        changes.len()
    );
    for (project, why) in &changes {
        eprintln!("  project {project}: {why}");
    }
}

/// What the import left out, on stderr (stdout keeps the report, JSON or table).
fn print_refusals(guard: &ImportGuard, dry_run: bool) {
    let (listed, more) = guard.refusals().list();
    if listed.is_empty() {
        return;
    }
    let verb = if dry_run { "would refuse" } else { "refused" };
    eprintln!("{verb} {} item(s) of the dump:", listed.len() as u64 + more);
    for (what, why) in &listed {
        eprintln!("  refused {what}: {why}");
    }
    if more > 0 {
        eprintln!("  ... and {more} more");
    }
    if guard.refused_projects().next().is_some() {
        eprintln!(
            "projects Wisp holds are kept; pass --replace-projects to replace them with the dump's"
        );
    }
}

/// Upstream's filestore, opened by the one store opener (`wisp_app::stores`), to be read
/// only: S3, MinIO (through the S3 API), or a directory holding a copy of the bucket
/// (`type: LOCAL`, `config.dir`, which must exist: an upstream filestore has no default
/// directory), whose files are read as they are.
async fn open_upstream_filestore(
    config: &FilestoreConfig,
    from: &Path,
) -> Result<Arc<dyn Filestore>, CliError> {
    match config {
        FilestoreConfig::Local(c) => match &c.dir {
            None => {
                return Err(CliError::Usage(format!(
                    "--from {}: a LOCAL filestore needs config.dir (the directory holding a copy of upstream's bucket)",
                    from.display()
                )));
            }
            Some(dir) if !dir.is_dir() => {
                return Err(CliError::Usage(format!(
                    "--from {}: the filestore directory {} does not exist",
                    from.display(),
                    dir.display()
                )));
            }
            Some(_) => {}
        },
        FilestoreConfig::Gcs(_) => {
            return Err(CliError::Usage(format!(
                "--from {}: a GCS filestore cannot be read from here; copy the bucket to a directory \
                 (`gcloud storage rsync -r gs://BUCKET DIR`) and name it as a LOCAL filestore \
                 (see docs/MIGRATE-FROM-PIPECD.md)",
                from.display()
            )));
        }
        FilestoreConfig::S3(_) | FilestoreConfig::Minio(_) => {}
    }
    // The directory is set: no default under a data directory applies.
    let no_data_dir = Path::new("");
    wisp_app::stores::open_filestore_read_only(config, no_data_dir)
        .await
        .map_err(|e| {
            let message = format!("the upstream filestore: {e}");
            if e.is_operator_error() {
                CliError::Usage(message)
            } else {
                CliError::Failure(anyhow::Error::new(e).context("the upstream filestore"))
            }
        })
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// Names the destination in the checkpoint.
fn destination_name(stores: &StoreArgs) -> String {
    match (&stores.config, &stores.config_secret) {
        (Some(path), _) => canonical(path).display().to_string(),
        (None, Some(secret)) => format!("secret:{secret}"),
        (None, None) => canonical(&stores.data_dir).display().to_string(),
    }
}

/// Where the position of an unfinished import is kept: beside the destination's config,
/// or in its data directory.
fn checkpoint_path(stores: &StoreArgs) -> PathBuf {
    match &stores.config {
        Some(path) => {
            let mut name = path.as_os_str().to_owned();
            name.push(".import-state.json");
            PathBuf::from(name)
        }
        None => stores.data_dir.join("import-state.json"),
    }
}
