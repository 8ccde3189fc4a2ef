//! Copying everything from one set of backends to another (`wisp migrate`): every record
//! of every [`Kind`] and every object of the filestore, whatever the backends are.
//!
//! How it works:
//!
//! 1. **Count** the source (a scan per kind, one listing of the filestore), so that the
//!    progress display knows its totals.
//! 2. **Records**, kind by kind in [`Kind::ALL`] order, page by page in id order
//!    ([`Datastore::scan`]). Each record is `create`d on the destination; when the id is
//!    taken, the destination's record is read and, if it differs from the source's (data
//!    by meaning, not by encoding: [`crate::content`]; project, index keys or expiry),
//!    replaced with a `put` on the version just read.
//!    Records that have already expired are skipped. The destination's `version` of a
//!    record is its own (1 on create, +1 per put) and so usually differs from the
//!    source's: versions only guard concurrent writers of one store, nothing compares
//!    them across stores.
//! 3. **Objects**, every path of the filestore (listing prefix `""`: stage logs, live
//!    states, analysis results, shared objects, command outputs, insights, ...), in path
//!    order. An object is written when the destination lacks it or holds other content;
//!    equal etags (same kind of backend) or equal bytes mean it is left alone.
//! 4. **Verify**: count the records of each kind and the objects on both sides, again by
//!    scanning both. [`MigrateReport::counts_match`] says whether they agree.
//!
//! Re-running converges and is idempotent: a second run over unchanged data writes
//! nothing (every record and object is "unchanged"), and changes made in the source
//! between runs (new or updated records and objects) are carried over. Deletions are
//! not: a record or object removed from the source stays in the destination, and then
//! the counts differ. The cache is not copied (it is never the only copy of anything).
//!
//! Resuming: after every page the position — the kinds completed, the kind in progress
//! and the scan cursor after its last completed page, then the path of the last object
//! of the last completed listing page — is saved through a [`CheckpointStore`]. A run
//! that finds a checkpoint for the same source and destination continues from there (a
//! page interrupted half-way is simply done again, which is harmless); a run that gets
//! through the objects clears it. [`MigrateOptions::restart`] ignores a checkpoint.
//!
//! Stop the control plane on the source while migrating, or writes made during the run
//! may be missed (a record created behind the scan cursor); the final counts would then
//! show it, and another run picks it up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use futures::{StreamExt, TryStreamExt, stream};
use serde::{Deserialize, Serialize};

use crate::collection::now_unix;
use crate::content::same_record;
use crate::datastore::{Datastore, Kind, Record};
use crate::error::StoreError;
use crate::filestore::{Filestore, ObjectAttrs, PutCondition};
use crate::optimistic::{Attempt, optimistic_write};

/// The version of the checkpoint format written by this code.
pub const CHECKPOINT_FORMAT: u32 = 1;

/// Key of the objects' tally in [`Checkpoint::tallies`] (kinds use [`Kind::as_str`]).
pub const FILES_TALLY: &str = "files";

/// Records that expire within this many seconds of the verification are left out of
/// both counts: a backend hides a record once it has expired, and one that expires
/// between the two scans would otherwise make the counts differ.
pub const VERIFY_EXPIRY_MARGIN_SECS: i64 = 300;

/// One side of a migration: a datastore and a filestore.
#[derive(Clone, Copy)]
pub struct Backends<'a> {
    pub datastore: &'a dyn Datastore,
    pub filestore: &'a dyn Filestore,
}

impl<'a> std::fmt::Debug for Backends<'a> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends").finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub struct MigrateOptions {
    /// Names the source in the checkpoint (e.g. its config path); a checkpoint written for
    /// another source or destination is not resumed.
    pub source_name: String,
    pub destination_name: String,
    /// Records per scan page and objects per listing page; a checkpoint is saved after
    /// each page.
    pub page_size: usize,
    /// Objects per listing page. Larger than a records page: a directory filestore reads
    /// and sorts a whole directory for each page (a directory of 100,000 stage logs made
    /// 100-object pages cost minutes), and S3 lists up to 1,000 keys per request anyway.
    pub object_page_size: usize,
    /// Records or objects copied at once within a page.
    pub concurrency: usize,
    /// Ignore (and replace) any checkpoint: copy from the beginning.
    pub restart: bool,
    /// Compare only: tally what would be copied or updated, write nothing (no record, no
    /// object, no checkpoint).
    pub dry_run: bool,
    /// Verify by looking up each source record and object in the destination instead of
    /// counting the destination whole: a destination that holds data of its own (an
    /// import into a running Wisp) still verifies. The report's `destination` is then
    /// how many of the source's are there.
    pub verify_presence: bool,
}

impl MigrateOptions {
    pub fn new(source_name: impl Into<String>, destination_name: impl Into<String>) -> Self {
        MigrateOptions {
            source_name: source_name.into(),
            destination_name: destination_name.into(),
            page_size: 100,
            object_page_size: 1000,
            concurrency: 8,
            restart: false,
            dry_run: false,
            verify_presence: false,
        }
    }
}

/// What happened to the records of one kind, or to the objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tally {
    /// Absent from the destination, created there.
    pub copied: u64,
    /// Present in the destination with other content, overwritten.
    pub updated: u64,
    /// Present in the destination with the same content.
    pub unchanged: u64,
    /// Expired in the source; not copied.
    pub skipped_expired: u64,
}

impl Tally {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Copied => self.copied += 1,
            Outcome::Updated => self.updated += 1,
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Expired => self.skipped_expired += 1,
        }
    }

    /// Records or objects written to the destination.
    pub fn written(&self) -> u64 {
        self.copied + self.updated
    }

    pub fn processed(&self) -> u64 {
        self.copied + self.updated + self.unchanged + self.skipped_expired
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Copied,
    Updated,
    Unchanged,
    Expired,
}

/// Where an interrupted migration stopped. Saved after every page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Checkpoint {
    pub format: u32,
    pub source: String,
    pub destination: String,
    /// Kinds ([`Kind::as_str`]) whose every record was copied.
    pub kinds_done: Vec<String>,
    /// The kind being copied, and the scan cursor after its last completed page.
    pub kind: Option<String>,
    pub cursor: Option<String>,
    /// Path of the last object of the last completed listing page.
    pub last_file: Option<String>,
    /// What was done so far, per kind and under [`FILES_TALLY`].
    pub tallies: BTreeMap<String, Tally>,
}

impl Checkpoint {
    fn new(options: &MigrateOptions) -> Self {
        Checkpoint {
            format: CHECKPOINT_FORMAT,
            source: options.source_name.clone(),
            destination: options.destination_name.clone(),
            ..Default::default()
        }
    }

    fn processed(&self) -> u64 {
        self.tallies
            .iter()
            .filter(|(k, _)| k.as_str() != FILES_TALLY)
            .map(|(_, t)| t.processed())
            .sum()
    }

    fn files_processed(&self) -> u64 {
        self.tallies.get(FILES_TALLY).map_or(0, Tally::processed)
    }
}

/// Where checkpoints are kept between runs.
pub trait CheckpointStore: Send + Sync {
    /// The saved checkpoint, if any.
    fn load(&self) -> Result<Option<Checkpoint>, MigrateError>;
    fn save(&self, checkpoint: &Checkpoint) -> Result<(), MigrateError>;
    /// Forgets the checkpoint (absent is fine).
    fn clear(&self) -> Result<(), MigrateError>;
}

/// Keeps nothing: a dry run neither resumes nor leaves a position behind.
struct NoCheckpoint;

impl CheckpointStore for NoCheckpoint {
    fn load(&self) -> Result<Option<Checkpoint>, MigrateError> {
        Ok(None)
    }

    fn save(&self, _checkpoint: &Checkpoint) -> Result<(), MigrateError> {
        Ok(())
    }

    fn clear(&self) -> Result<(), MigrateError> {
        Ok(())
    }
}

/// A checkpoint as a small JSON file, replaced atomically (write beside, then rename).
#[derive(Debug, Clone)]
pub struct FileCheckpoint {
    path: PathBuf,
}

impl FileCheckpoint {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileCheckpoint { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, what: &str, e: impl std::error::Error + Send + Sync + 'static) -> MigrateError {
        MigrateError::Checkpoint {
            message: format!("{what} {}: {e}", self.path.display()),
            source: Some(Box::new(e)),
        }
    }
}

impl CheckpointStore for FileCheckpoint {
    fn load(&self) -> Result<Option<Checkpoint>, MigrateError> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.err("cannot read", e)),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| self.err("corrupt checkpoint (remove it or pass --restart)", e))
    }

    fn save(&self, checkpoint: &Checkpoint) -> Result<(), MigrateError> {
        let text = serde_json::to_vec_pretty(checkpoint).map_err(|e| self.err("encoding", e))?;
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, text).map_err(|e| self.err("cannot write", e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| self.err("cannot replace", e))
    }

    fn clear(&self) -> Result<(), MigrateError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err("cannot remove", e)),
        }
    }
}

/// A checkpoint kept in memory (tests, or callers that do not want to resume).
#[derive(Debug, Default)]
pub struct MemoryCheckpoint {
    saved: Mutex<Option<Checkpoint>>,
}

impl MemoryCheckpoint {
    pub fn new() -> Self {
        Self::default()
    }

    /// The checkpoint as last saved.
    pub fn current(&self) -> Option<Checkpoint> {
        self.saved.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

impl CheckpointStore for MemoryCheckpoint {
    fn load(&self) -> Result<Option<Checkpoint>, MigrateError> {
        Ok(self.current())
    }

    fn save(&self, checkpoint: &Checkpoint) -> Result<(), MigrateError> {
        let mut saved = self
            .saved
            .lock()
            .map_err(|_| MigrateError::checkpoint_lock_poisoned())?;
        *saved = Some(checkpoint.clone());
        Ok(())
    }

    fn clear(&self) -> Result<(), MigrateError> {
        let mut saved = self
            .saved
            .lock()
            .map_err(|_| MigrateError::checkpoint_lock_poisoned())?;
        *saved = None;
        Ok(())
    }
}

/// The stages of a migration, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Counting the source (total unknown).
    Counting,
    /// Copying records (total: the source's records).
    Records,
    /// Copying objects (total: the source's objects).
    Objects,
    /// Counting both sides (total unknown).
    Verifying,
}

/// Receives progress; every method has a no-op default.
pub trait MigrateProgress: Send + Sync {
    /// A stage starts: `total` items when known, `done` of them already done by an
    /// earlier, interrupted run.
    fn start(&self, _stage: Stage, _total: Option<u64>, _done: u64) {}
    /// What is being worked on (a kind, "objects").
    fn message(&self, _text: &str) {}
    /// `n` more items done.
    fn advance(&self, _n: u64) {}
    /// The current stage is over.
    fn finish(&self) {}
    /// Something worth telling the user (resuming, a checkpoint ignored).
    fn note(&self, _text: &str) {}
}

/// Progress that goes nowhere.
#[derive(Debug)]
pub struct NoProgress;

impl MigrateProgress for NoProgress {}

/// The records of one kind after a migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindReport {
    #[serde(serialize_with = "serialize_kind")]
    pub kind: Kind,
    /// What this migration did (including the interrupted runs it resumed).
    #[serde(flatten)]
    pub tally: Tally,
    /// Live records counted on each side at the end (see [`VERIFY_EXPIRY_MARGIN_SECS`]).
    pub source: u64,
    pub destination: u64,
}

/// The objects after a migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectReport {
    #[serde(flatten)]
    pub tally: Tally,
    pub source: u64,
    pub destination: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrateReport {
    /// This run continued an interrupted one.
    pub resumed: bool,
    pub kinds: Vec<KindReport>,
    pub objects: ObjectReport,
    /// Whether every count matches.
    pub counts_match: bool,
}

impl MigrateReport {
    pub fn counts_match(&self) -> bool {
        self.kinds.iter().all(|k| k.source == k.destination)
            && self.objects.source == self.objects.destination
    }

    /// "Deployment: source 3, destination 2" for every count that differs.
    pub fn mismatches(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .kinds
            .iter()
            .filter(|k| k.source != k.destination)
            .map(|k| {
                format!(
                    "{}: source {}, destination {}",
                    k.kind, k.source, k.destination
                )
            })
            .collect();
        if self.objects.source != self.objects.destination {
            out.push(format!(
                "objects: source {}, destination {}",
                self.objects.source, self.objects.destination
            ));
        }
        out
    }

    /// Records and objects written to the destination.
    pub fn written(&self) -> u64 {
        self.kinds.iter().map(|k| k.tally.written()).sum::<u64>() + self.objects.tally.written()
    }
}

fn serialize_kind<S: serde::Serializer>(kind: &Kind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.as_str())
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("{context}: {source}")]
    Store {
        context: String,
        #[source]
        source: StoreError,
    },
    /// The checkpoint could not be read, decoded or written; the message names the file
    /// and repeats the cause, which is kept as the source (the I/O or JSON error).
    #[error("checkpoint: {message}")]
    Checkpoint {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("invalid options: {0}")]
    Options(String),
}

impl MigrateError {
    fn checkpoint_lock_poisoned() -> Self {
        MigrateError::Checkpoint {
            message: "checkpoint lock poisoned".into(),
            source: None,
        }
    }
}

fn store_err(context: impl Into<String>) -> impl FnOnce(StoreError) -> MigrateError {
    let context = context.into();
    move |source| MigrateError::Store { context, source }
}

/// Copies every record and object of `from` into `to`; see the module docs.
pub async fn migrate(
    from: Backends<'_>,
    to: Backends<'_>,
    options: &MigrateOptions,
    progress: &dyn MigrateProgress,
    checkpoints: &dyn CheckpointStore,
) -> Result<MigrateReport, MigrateError> {
    if options.page_size == 0 || options.object_page_size == 0 || options.concurrency == 0 {
        return Err(MigrateError::Options(
            "page sizes and concurrency must be at least 1".into(),
        ));
    }
    let checkpoints: &dyn CheckpointStore = if options.dry_run {
        &NoCheckpoint
    } else {
        checkpoints
    };
    let mut checkpoint = start_checkpoint(options, progress, checkpoints)?;
    let resumed = checkpoint.processed() > 0
        || !checkpoint.kinds_done.is_empty()
        || checkpoint.last_file.is_some();

    // 1. Count the source, for the totals.
    progress.start(Stage::Counting, None, 0);
    let mut total_records = 0;
    for kind in Kind::ALL {
        progress.message(kind.as_str());
        total_records += count_records(from.datastore, kind, None, options.page_size, progress)
            .await
            .map_err(store_err(format!("count the source's {kind} records")))?;
    }
    progress.message("objects");
    let total_objects = count_objects(from.filestore, options.object_page_size, progress)
        .await
        .map_err(store_err("count the source's objects"))?;
    progress.finish();

    // 2. Records.
    progress.start(
        Stage::Records,
        Some(total_records.max(checkpoint.processed())),
        checkpoint.processed(),
    );
    for kind in Kind::ALL {
        if checkpoint.kinds_done.iter().any(|k| k == kind.as_str()) {
            continue;
        }
        progress.message(kind.as_str());
        copy_kind(
            from,
            to,
            kind,
            options,
            progress,
            checkpoints,
            &mut checkpoint,
        )
        .await?;
    }
    progress.finish();

    // 3. Objects.
    progress.start(
        Stage::Objects,
        Some(total_objects.max(checkpoint.files_processed())),
        checkpoint.files_processed(),
    );
    progress.message("objects");
    copy_objects(from, to, options, progress, checkpoints, &mut checkpoint).await?;
    progress.finish();
    // Everything is copied; only the (read-only) verification is left.
    checkpoints.clear()?;

    // 4. Verify.
    progress.start(Stage::Verifying, None, 0);
    let cutoff = now_unix().saturating_add(VERIFY_EXPIRY_MARGIN_SECS);
    let mut kinds = Vec::with_capacity(Kind::ALL.len());
    for kind in Kind::ALL {
        progress.message(kind.as_str());
        let source = count_records(
            from.datastore,
            kind,
            Some(cutoff),
            options.page_size,
            progress,
        )
        .await
        .map_err(store_err(format!("count the source's {kind} records")))?;
        let destination = if options.verify_presence {
            count_present_records(
                from.datastore,
                to.datastore,
                kind,
                cutoff,
                options,
                progress,
            )
            .await
        } else {
            count_records(
                to.datastore,
                kind,
                Some(cutoff),
                options.page_size,
                progress,
            )
            .await
        }
        .map_err(store_err(format!("count the destination's {kind} records")))?;
        kinds.push(KindReport {
            kind,
            tally: checkpoint
                .tallies
                .get(kind.as_str())
                .copied()
                .unwrap_or_default(),
            source,
            destination,
        });
    }
    progress.message("objects");
    let source = count_objects(from.filestore, options.object_page_size, progress)
        .await
        .map_err(store_err("count the source's objects"))?;
    let destination = if options.verify_presence {
        count_present_objects(from.filestore, to.filestore, options, progress).await
    } else {
        count_objects(to.filestore, options.object_page_size, progress).await
    }
    .map_err(store_err("count the destination's objects"))?;
    progress.finish();

    let mut report = MigrateReport {
        resumed,
        kinds,
        objects: ObjectReport {
            tally: checkpoint
                .tallies
                .get(FILES_TALLY)
                .copied()
                .unwrap_or_default(),
            source,
            destination,
        },
        counts_match: false,
    };
    report.counts_match = report.counts_match();
    Ok(report)
}

/// The checkpoint to continue from: the saved one when it is for this source and
/// destination (and `restart` is off), else a fresh one.
fn start_checkpoint(
    options: &MigrateOptions,
    progress: &dyn MigrateProgress,
    checkpoints: &dyn CheckpointStore,
) -> Result<Checkpoint, MigrateError> {
    if options.restart {
        checkpoints.clear()?;
        return Ok(Checkpoint::new(options));
    }
    let Some(saved) = checkpoints.load()? else {
        return Ok(Checkpoint::new(options));
    };
    if saved.format != CHECKPOINT_FORMAT
        || saved.source != options.source_name
        || saved.destination != options.destination_name
    {
        progress.note(&format!(
            "ignoring a checkpoint of another migration ({} -> {}, format {}); starting over",
            saved.source, saved.destination, saved.format
        ));
        return Ok(Checkpoint::new(options));
    }
    let position = match (&saved.kind, saved.kinds_done.len()) {
        _ if saved.kinds_done.len() >= Kind::ALL.len() => match &saved.last_file {
            Some(path) => format!("objects after {path}"),
            None => "objects".to_string(),
        },
        (Some(kind), _) => format!("{kind} records"),
        (None, done) => format!("records ({done} kinds done)"),
    };
    progress.note(&format!(
        "resuming an interrupted migration at {position}; {} records and {} objects already done",
        saved.processed(),
        saved.files_processed()
    ));
    Ok(saved)
}

/// Copies the records of one kind, from the checkpoint's cursor if it is on this kind.
async fn copy_kind(
    from: Backends<'_>,
    to: Backends<'_>,
    kind: Kind,
    options: &MigrateOptions,
    progress: &dyn MigrateProgress,
    checkpoints: &dyn CheckpointStore,
    checkpoint: &mut Checkpoint,
) -> Result<(), MigrateError> {
    let mut cursor = if checkpoint.kind.as_deref() == Some(kind.as_str()) {
        checkpoint.cursor.clone()
    } else {
        None
    };
    loop {
        let page = from
            .datastore
            .scan(kind, cursor.as_deref(), options.page_size)
            .await
            .map_err(store_err(format!("scan the source's {kind} records")))?;
        let Some(last) = page.records.last().map(|(_, c)| c.clone()) else {
            if page.more {
                return Err(MigrateError::Store {
                    context: format!("scan the source's {kind} records"),
                    source: StoreError::internal("an empty page that claims more records"),
                });
            }
            break;
        };
        let now = now_unix();
        let outcomes: Vec<Outcome> = stream::iter(page.records.into_iter().map(|(r, _)| r))
            .map(|record| copy_record(to.datastore, kind, record, now, options.dry_run))
            .buffer_unordered(options.concurrency)
            .try_collect()
            .await?;
        let tally = checkpoint
            .tallies
            .entry(kind.as_str().to_string())
            .or_default();
        for outcome in &outcomes {
            tally.add(*outcome);
        }
        cursor = Some(last);
        checkpoint.kind = Some(kind.as_str().to_string());
        checkpoint.cursor = cursor.clone();
        checkpoints.save(checkpoint)?;
        progress.advance(outcomes.len() as u64);
        if !page.more {
            break;
        }
    }
    checkpoint.kinds_done.push(kind.as_str().to_string());
    checkpoint.kind = None;
    checkpoint.cursor = None;
    checkpoints.save(checkpoint)
}

async fn copy_record(
    to: &dyn Datastore,
    kind: Kind,
    record: Record,
    now: i64,
    dry_run: bool,
) -> Result<Outcome, MigrateError> {
    if record.expires_at.is_some_and(|t| t <= now) {
        return Ok(Outcome::Expired);
    }
    let what = || format!("copy {kind} {}", record.id);
    if dry_run {
        return match to.get(kind, &record.id).await {
            Ok(current) if same_record(kind, &current, &record) => Ok(Outcome::Unchanged),
            Ok(_) => Ok(Outcome::Updated),
            Err(StoreError::NotFound(_)) => Ok(Outcome::Copied),
            Err(e) => Err(store_err(what())(e)),
        };
    }
    // Created first: on a fresh destination that is the only call.
    let record = &record;
    optimistic_write(|| async move {
        match to.create(kind, record.clone()).await {
            Ok(()) => return Ok(Attempt::Written(Ok(Outcome::Copied))),
            Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(e),
        }
        let current = match to.get(kind, &record.id).await {
            Ok(current) => current,
            // Deleted (or expired) since: a lost race, to create it again.
            Err(e @ StoreError::NotFound(_)) => return Ok(Attempt::Written(Err(e))),
            Err(e) => return Err(e),
        };
        if same_record(kind, &current, record) {
            return Ok(Attempt::Done(Outcome::Unchanged));
        }
        let written = to.put(kind, record.clone(), current.version).await;
        Ok(Attempt::Written(written.map(|()| Outcome::Updated)))
    })
    .await
    .map_err(store_err(what()))
}

/// Copies every object, after the checkpoint's last file if any.
async fn copy_objects(
    from: Backends<'_>,
    to: Backends<'_>,
    options: &MigrateOptions,
    progress: &dyn MigrateProgress,
    checkpoints: &dyn CheckpointStore,
    checkpoint: &mut Checkpoint,
) -> Result<(), MigrateError> {
    let mut after = checkpoint.last_file.clone();
    loop {
        let page = from
            .filestore
            .list("", after.as_deref(), options.object_page_size)
            .await
            .map_err(store_err("list the source's objects"))?;
        let Some(last) = page.objects.last().map(|o| o.path.clone()) else {
            if page.next.is_some() {
                return Err(MigrateError::Store {
                    context: "list the source's objects".into(),
                    source: StoreError::internal("an empty page with a resume token"),
                });
            }
            break;
        };
        let outcomes: Vec<Outcome> = stream::iter(page.objects)
            .map(|attrs| copy_object(from.filestore, to.filestore, attrs, options.dry_run))
            .buffer_unordered(options.concurrency)
            .try_collect()
            .await?;
        let tally = checkpoint
            .tallies
            .entry(FILES_TALLY.to_string())
            .or_default();
        for outcome in &outcomes {
            tally.add(*outcome);
        }
        // Both backends resume a listing after a path; prefer the backend's own token.
        after = Some(page.next.clone().unwrap_or(last));
        checkpoint.last_file = after.clone();
        checkpoints.save(checkpoint)?;
        progress.advance(outcomes.len() as u64);
        if page.next.is_none() {
            break;
        }
    }
    Ok(())
}

async fn copy_object(
    from: &dyn Filestore,
    to: &dyn Filestore,
    attrs: ObjectAttrs,
    dry_run: bool,
) -> Result<Outcome, MigrateError> {
    let path = attrs.path;
    let what = || format!("copy object {path}");
    // Read from the source once, by the first attempt that needs it (behind a lock only so
    // that each attempt's future can use it; attempts never overlap).
    let source_data: Mutex<Option<Vec<u8>>> = Mutex::new(None);
    let (path, etag, source_data) = (&path, &attrs.etag, &source_data);
    // An attempt's answer is itself a result: a failed read of the source is an error
    // of its own, not the destination's.
    let copied = optimistic_write(|| async move {
        let current = match to.get(path).await {
            Ok(current) => Some(current),
            Err(StoreError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        // Same etag from the same kind of backend: same content, no need to read it.
        if let Some(current) = &current
            && !etag.is_empty()
            && current.etag == *etag
        {
            return Ok(Attempt::Done(Ok(Outcome::Unchanged)));
        }
        let known = source_data
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let data = match known {
            Some(data) => data,
            None => match from.get(path).await {
                Ok(object) => {
                    *source_data.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(object.data.clone());
                    object.data
                }
                // Deleted from the source since it was listed: nothing to copy.
                Err(StoreError::NotFound(_)) => return Ok(Attempt::Done(Ok(Outcome::Unchanged))),
                Err(e) => {
                    let read = store_err(format!("read object {path}"))(e);
                    return Ok(Attempt::Done(Err(read)));
                }
            },
        };
        let (condition, outcome) = match current {
            None => (PutCondition::Absent, Outcome::Copied),
            Some(current) if current.data == data => {
                return Ok(Attempt::Done(Ok(Outcome::Unchanged)));
            }
            Some(current) => (PutCondition::Matches(current.etag), Outcome::Updated),
        };
        if dry_run {
            return Ok(Attempt::Done(Ok(outcome)));
        }
        let written = to.put(path, data, condition).await;
        Ok(Attempt::Written(written.map(|_| Ok(outcome))))
    })
    .await;
    copied.map_err(store_err(what()))?
}

/// Live records of `kind`; with `cutoff`, only those that outlive it.
async fn count_records(
    datastore: &dyn Datastore,
    kind: Kind,
    cutoff: Option<i64>,
    page_size: usize,
    progress: &dyn MigrateProgress,
) -> Result<u64, StoreError> {
    let cutoff = cutoff.unwrap_or_else(now_unix);
    let mut count = 0;
    let mut cursor: Option<String> = None;
    loop {
        let page = datastore.scan(kind, cursor.as_deref(), page_size).await?;
        let n = page
            .records
            .iter()
            .filter(|(r, _)| r.expires_at.is_none_or(|t| t > cutoff))
            .count() as u64;
        count += n;
        progress.advance(page.records.len() as u64);
        match page.records.last() {
            Some((_, c)) if page.more => cursor = Some(c.clone()),
            _ => break,
        }
    }
    Ok(count)
}

/// How many of the source's live records of `kind` the destination holds.
async fn count_present_records(
    from: &dyn Datastore,
    to: &dyn Datastore,
    kind: Kind,
    cutoff: i64,
    options: &MigrateOptions,
    progress: &dyn MigrateProgress,
) -> Result<u64, StoreError> {
    let mut count = 0;
    let mut cursor: Option<String> = None;
    loop {
        let page = from
            .scan(kind, cursor.as_deref(), options.page_size)
            .await?;
        let found: Vec<bool> = stream::iter(
            page.records
                .iter()
                .filter(|(r, _)| r.expires_at.is_none_or(|t| t > cutoff)),
        )
        .map(|(r, _)| async move {
            match to.get(kind, &r.id).await {
                Ok(_) => Ok(true),
                Err(StoreError::NotFound(_)) => Ok(false),
                Err(e) => Err(e),
            }
        })
        .buffer_unordered(options.concurrency)
        .try_collect()
        .await?;
        count += found.iter().filter(|f| **f).count() as u64;
        progress.advance(page.records.len() as u64);
        match page.records.last() {
            Some((_, c)) if page.more => cursor = Some(c.clone()),
            _ => break,
        }
    }
    Ok(count)
}

/// How many of the source's objects the destination holds (a listing of each path: an
/// existing path is the first key under itself).
async fn count_present_objects(
    from: &dyn Filestore,
    to: &dyn Filestore,
    options: &MigrateOptions,
    progress: &dyn MigrateProgress,
) -> Result<u64, StoreError> {
    let mut count = 0;
    let mut after: Option<String> = None;
    loop {
        let page = from
            .list("", after.as_deref(), options.object_page_size)
            .await?;
        let found: Vec<bool> = stream::iter(page.objects.iter())
            .map(|o| async move {
                let listed = to.list(&o.path, None, 1).await?;
                Ok::<_, StoreError>(listed.objects.first().is_some_and(|d| d.path == o.path))
            })
            .buffer_unordered(options.concurrency)
            .try_collect()
            .await?;
        count += found.iter().filter(|f| **f).count() as u64;
        progress.advance(page.objects.len() as u64);
        match page.next {
            Some(next) if !page.objects.is_empty() => after = Some(next),
            _ => break,
        }
    }
    Ok(count)
}

async fn count_objects(
    filestore: &dyn Filestore,
    page_size: usize,
    progress: &dyn MigrateProgress,
) -> Result<u64, StoreError> {
    let mut count = 0;
    let mut after: Option<String> = None;
    loop {
        let page = filestore.list("", after.as_deref(), page_size).await?;
        count += page.objects.len() as u64;
        progress.advance(page.objects.len() as u64);
        match page.next {
            Some(next) if !page.objects.is_empty() => after = Some(next),
            _ => break,
        }
    }
    Ok(count)
}
