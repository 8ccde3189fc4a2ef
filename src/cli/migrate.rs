//! `wisp migrate --from CONFIG --to CONFIG`: copies every record and object from the
//! stores one config names to those another names (embedded ↔ AWS), with a progress bar
//! on stderr, resuming an interrupted run from `<to-config>.migrate-state.json`, and
//! ending with the per-kind counts of both sides (exit 1 when they differ).
//!
//! The library side (what is copied, how re-runs converge) is `wisp_store::migrate`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use wisp_config::{Config, DatastoreConfig, FilestoreConfig};
use wisp_store::migrate::{
    Backends, FileCheckpoint, MigrateError, MigrateOptions, MigrateProgress, MigrateReport, Stage,
    migrate,
};

use crate::error::CliError;

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Config (control-plane-config.yaml) of the stores to copy from.
    #[arg(long, value_name = "CONFIG")]
    pub from: PathBuf,
    /// Config of the stores to copy into. The progress of an unfinished run is kept
    /// beside it, in `<CONFIG>.migrate-state.json`.
    #[arg(long, value_name = "CONFIG")]
    pub to: PathBuf,
    /// Start from the beginning, ignoring where an interrupted run stopped.
    #[arg(long)]
    pub restart: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Directory of LOCAL stores whose config gives no path (as for `wisp serve`).
    #[arg(long, env = "WISP_DATA_DIR", default_value = ".wisp")]
    pub data_dir: PathBuf,
}

/// Where the checkpoint of a migration into `to` is kept.
pub fn checkpoint_path(to: &Path) -> PathBuf {
    let mut path = to.as_os_str().to_owned();
    path.push(".migrate-state.json");
    PathBuf::from(path)
}

pub async fn run(args: MigrateArgs) -> Result<(), CliError> {
    let from = load(&args.from, "--from", &args.data_dir).await?;
    let to = load(&args.to, "--to", &args.data_dir).await?;
    if from.path == to.path {
        return Err(CliError::Usage(format!(
            "--from and --to are the same config ({})",
            from.path.display()
        )));
    }
    if let Some(what) = shared_store(&from.config, &to.config) {
        return Err(CliError::Usage(format!(
            "--from {} and --to {} name the same {what}",
            args.from.display(),
            args.to.display()
        )));
    }
    if let DatastoreConfig::Local(c) = &from.config.spec.datastore {
        let db = c.path_or_default(&args.data_dir);
        if !db.is_file() {
            return Err(CliError::Usage(format!(
                "the source database {} does not exist",
                db.display()
            )));
        }
    }

    let source = wisp_app::stores::open(&from.config, &args.data_dir).await?;
    let destination = wisp_app::stores::open(&to.config, &args.data_dir).await?;

    let checkpoints = FileCheckpoint::new(checkpoint_path(&args.to));
    let mut options = MigrateOptions::new(
        from.path.display().to_string(),
        to.path.display().to_string(),
    );
    options.restart = args.restart;
    copy_and_report(
        Backends {
            datastore: source.datastore.as_ref(),
            filestore: source.filestore.as_ref(),
        },
        Backends {
            datastore: destination.datastore.as_ref(),
            filestore: destination.filestore.as_ref(),
        },
        &options,
        &checkpoints,
        &Wording {
            run: "migration",
            destination: "DESTINATION",
            json: args.json,
            mismatch_hint: "was the source written to meanwhile, or did the destination hold \
                            other data?",
        },
    )
    .await
}

/// How a run of the engine is told: its name, the report's destination column, JSON or
/// a table, and the likely causes of differing counts.
pub(crate) struct Wording {
    pub run: &'static str,
    pub destination: &'static str,
    pub json: bool,
    pub mismatch_hint: &'static str,
}

/// Runs the engine with a progress bar, prints its report, and fails (exit 1) when it
/// stopped or when the counts differ after a run that wrote (`wisp migrate`,
/// `wisp import pipecd`).
pub(crate) async fn copy_and_report(
    from: Backends<'_>,
    to: Backends<'_>,
    options: &MigrateOptions,
    checkpoints: &FileCheckpoint,
    wording: &Wording,
) -> Result<(), CliError> {
    let progress = Bar::new();
    let result = migrate(from, to, options, &progress, checkpoints).await;
    progress.clear();
    let report = result.map_err(|e| match e {
        MigrateError::Store { .. } => CliError::Failure(anyhow::anyhow!(
            "{} stopped: {e}; run the same command again to resume from {}",
            wording.run,
            checkpoints.path().display()
        )),
        MigrateError::Checkpoint { .. } | MigrateError::Options(_) => {
            CliError::Failure(anyhow::anyhow!("{e}"))
        }
    })?;

    if wording.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::Failure(anyhow::anyhow!("encode the report: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", table(&report, options.dry_run, wording.destination));
    }
    if !options.dry_run && !report.counts_match() {
        return Err(CliError::Failure(anyhow::anyhow!(
            "counts differ after the {} ({}); {} Run again to copy what changed",
            wording.run,
            report.mismatches().join("; "),
            wording.mismatch_hint
        )));
    }
    Ok(())
}

/// A config file, read and resolved by the one loader.
struct Loaded {
    /// Canonical path of the file.
    path: PathBuf,
    config: Config,
}

async fn load(path: &Path, flag: &str, data_dir: &Path) -> Result<Loaded, CliError> {
    if !path.is_file() {
        return Err(CliError::Usage(format!(
            "{flag} config {} does not exist",
            path.display()
        )));
    }
    let config = wisp_app::sources::load(&wisp_app::Sources {
        config: wisp_app::ConfigSource::File(path.to_path_buf()),
        key: wisp_app::KeySource::None,
        data_dir: data_dir.to_path_buf(),
        in_process_cache: false,
    })
    .await?
    .config;
    let path = path
        .canonicalize()
        .map_err(|e| CliError::Usage(format!("{flag} config {}: {e}", path.display())))?;
    Ok(Loaded { path, config })
}

/// `Some("datastore")` / `Some("filestore")` when both configs point at the same store,
/// or at stores of which one holds the other (a filestore directory or S3 prefix inside
/// the other's would make the copy list its own output).
fn shared_store(a: &Config, b: &Config) -> Option<&'static str> {
    let same_datastore = match (&a.spec.datastore, &b.spec.datastore) {
        (DatastoreConfig::Local(x), DatastoreConfig::Local(y)) => match (&x.path, &y.path) {
            (Some(x), Some(y)) => normalize(x) == normalize(y),
            _ => false,
        },
        (DatastoreConfig::DynamoDb(x), DatastoreConfig::DynamoDb(y)) => {
            x.table == y.table
                && x.endpoint == y.endpoint
                && (x.region == y.region || x.region.is_none() || y.region.is_none())
        }
        (x, y) => x == y,
    };
    if same_datastore {
        return Some("datastore");
    }
    let same_filestore = match (&a.spec.filestore, &b.spec.filestore) {
        (FilestoreConfig::Local(x), FilestoreConfig::Local(y)) => match (&x.dir, &y.dir) {
            (Some(x), Some(y)) => {
                let (x, y) = (normalize(x), normalize(y));
                x.starts_with(&y) || y.starts_with(&x)
            }
            _ => false,
        },
        (FilestoreConfig::S3(x), FilestoreConfig::S3(y)) => {
            let (px, py) = (
                x.prefix.as_deref().unwrap_or(""),
                y.prefix.as_deref().unwrap_or(""),
            );
            x.bucket == y.bucket
                && x.endpoint == y.endpoint
                && (px.starts_with(py) || py.starts_with(px))
        }
        (x, y) => x == y,
    };
    same_filestore.then_some("filestore")
}

/// An absolute path with symlinks resolved as far as it exists (the destination's files
/// may not exist yet).
fn normalize(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            return rest
                .iter()
                .rev()
                .fold(canonical, |acc: PathBuf, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// The per-kind counts of both sides and what was done; for a dry run, what would be
/// done (and the destination as it is).
fn table(report: &MigrateReport, dry_run: bool, destination: &str) -> String {
    let (copied, updated) = if dry_run {
        ("TO COPY", "TO UPDATE")
    } else {
        ("COPIED", "UPDATED")
    };
    let mut out = format!(
        "{:<18} {:>8} {:>12} {:>8} {:>9} {:>10}\n",
        "KIND", "SOURCE", destination, copied, updated, "UNCHANGED"
    );
    let rows = report
        .kinds
        .iter()
        .map(|k| (k.kind.as_str(), k.source, k.destination, k.tally))
        .chain(std::iter::once((
            "objects",
            report.objects.source,
            report.objects.destination,
            report.objects.tally,
        )));
    for (name, source, destination, tally) in rows {
        let mark = if source == destination || dry_run {
            ""
        } else {
            "  <- differs"
        };
        out.push_str(&format!(
            "{name:<18} {source:>8} {destination:>12} {:>8} {:>9} {:>10}{mark}\n",
            tally.copied, tally.updated, tally.unchanged
        ));
    }
    let records: u64 = report.kinds.iter().map(|k| k.source).sum();
    if dry_run {
        out.push_str(&format!(
            "dry run: {} records and {} objects would be written; nothing was\n",
            report.kinds.iter().map(|k| k.tally.written()).sum::<u64>(),
            report.objects.tally.written()
        ));
    } else if report.counts_match() {
        out.push_str(&format!(
            "counts match: {records} records, {} objects{}\n",
            report.objects.source,
            if report.resumed {
                " (resumed an interrupted run)"
            } else {
                ""
            }
        ));
    }
    out
}

/// The progress display: one bar (or spinner) per stage on stderr, drawn only when
/// stderr is a terminal.
struct Bar {
    visible: bool,
    current: Mutex<Option<ProgressBar>>,
}

impl Bar {
    fn new() -> Self {
        Bar {
            visible: std::io::stderr().is_terminal(),
            current: Mutex::new(None),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&ProgressBar) -> R) -> Option<R> {
        let current = self.current.lock().ok()?;
        current.as_ref().map(f)
    }

    fn clear(&self) {
        if let Ok(mut current) = self.current.lock()
            && let Some(bar) = current.take()
        {
            bar.finish_and_clear();
        }
    }
}

impl MigrateProgress for Bar {
    fn start(&self, stage: Stage, total: Option<u64>, done: u64) {
        let label = match stage {
            Stage::Counting => "counting",
            Stage::Records => "records",
            Stage::Objects => "objects",
            Stage::Verifying => "verifying",
        };
        // Set up hidden, so that the first frame drawn is complete.
        let bar = ProgressBar::hidden().with_prefix(label);
        let template = match total {
            Some(_) => "{prefix:>9} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
            None => "{prefix:>9} {spinner} {pos} {msg}",
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        match total {
            Some(total) => bar.set_length(total),
            None => bar.unset_length(),
        }
        bar.set_position(done);
        if self.visible {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            if total.is_none() {
                bar.enable_steady_tick(Duration::from_millis(120));
            }
        }
        if let Ok(mut current) = self.current.lock()
            && let Some(previous) = current.replace(bar)
        {
            previous.finish_and_clear();
        }
    }

    fn message(&self, text: &str) {
        let text = text.to_string();
        self.with(|bar| bar.set_message(text));
    }

    fn advance(&self, n: u64) {
        self.with(|bar| bar.inc(n));
    }

    fn finish(&self) {
        let Ok(mut current) = self.current.lock() else {
            return;
        };
        if let Some(bar) = current.take() {
            bar.finish_and_clear();
            // Leave one line per copy stage behind.
            if self.visible && bar.length().is_some() {
                eprintln!(
                    "{:>9} {}/{} done in {}",
                    bar.prefix(),
                    bar.position(),
                    bar.length().unwrap_or_default(),
                    indicatif::HumanDuration(bar.elapsed())
                );
            }
        }
    }

    fn note(&self, text: &str) {
        let line = format!("note: {text}");
        if self
            .with(|bar| bar.suspend(|| eprintln!("{line}")))
            .is_none()
        {
            eprintln!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        let mut config = Config::from_yaml_str(yaml, "test").expect("valid config");
        config.fill_local_defaults(Path::new("/data"));
        config
    }

    fn local(db: &str, dir: &str) -> Config {
        config(&format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec:\n  datastore:\n    type: LOCAL\n    config:\n      path: {db}\n  filestore:\n    type: LOCAL\n    config:\n      dir: {dir}\n"
        ))
    }

    #[test]
    fn same_or_nested_stores_are_refused() {
        let a = local("/x/a.db", "/x/files");
        assert_eq!(shared_store(&a, &local("/y/b.db", "/y/files")), None);
        assert_eq!(
            shared_store(&a, &local("/x/a.db", "/y/files")),
            Some("datastore")
        );
        assert_eq!(
            shared_store(&a, &local("/y/b.db", "/x/files")),
            Some("filestore")
        );
        assert_eq!(
            shared_store(&a, &local("/y/b.db", "/x/files/sub")),
            Some("filestore")
        );
        assert_eq!(shared_store(&a, &local("/y/b.db", "/x/files2")), None);
        // Unset paths default under the same data directory.
        let defaults = config("apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\nspec: {}\n");
        assert_eq!(shared_store(&defaults, &defaults), Some("datastore"));
    }

    #[test]
    fn checkpoint_sits_beside_the_destination_config() {
        assert_eq!(
            checkpoint_path(Path::new("/etc/wisp/b.yaml")),
            PathBuf::from("/etc/wisp/b.yaml.migrate-state.json")
        );
    }
}
