//! `wisp_store::migrate` between two sets of embedded backends (two temporary
//! directories): everything is copied, re-runs change nothing, an interrupted run resumes,
//! and changes made to the source between runs are carried over.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use tempfile::TempDir;
use wisp_store::collection::now_unix;
use wisp_store::datastore::{Datastore, IndexKey, Kind, Page, Query, Record};
use wisp_store::filestore::{Filestore, ListPage, Object, PutCondition};
use wisp_store::migrate::{
    Backends, Checkpoint, CheckpointStore, FILES_TALLY, FileCheckpoint, MemoryCheckpoint,
    MigrateError, MigrateOptions, MigrateProgress, MigrateReport, NoProgress, Stage, Tally,
    migrate,
};
use wisp_store::{StoreError, error::Result};
use wisp_store_embedded::{LocalFilestore, SqliteDatastore};

/// Live records per kind in the seeded source (plus one expired Event and PipedStat).
const PER_KIND: usize = 7;
/// Small pages, so that every kind and the objects take several.
const PAGE: usize = 3;

/// One set of embedded backends in its own directory.
struct Side {
    ds: Arc<SqliteDatastore>,
    fs: Arc<LocalFilestore>,
    _dir: TempDir,
}

impl Side {
    fn new() -> Side {
        let dir = tempfile::tempdir().expect("tempdir");
        let ds = SqliteDatastore::open(dir.path().join("wisp.db")).expect("datastore");
        let fs = LocalFilestore::open(dir.path().join("filestore")).expect("filestore");
        Side {
            ds: Arc::new(ds),
            fs: Arc::new(fs),
            _dir: dir,
        }
    }

    fn backends(&self) -> Backends<'_> {
        Backends {
            datastore: self.ds.as_ref(),
            filestore: self.fs.as_ref(),
        }
    }

    async fn records(&self, kind: Kind) -> Vec<Record> {
        all_records(self.ds.as_ref(), kind).await
    }

    async fn objects(&self) -> BTreeMap<String, Vec<u8>> {
        all_objects(self.fs.as_ref()).await
    }
}

async fn all_records(ds: &dyn Datastore, kind: Kind) -> Vec<Record> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = ds.scan(kind, cursor.as_deref(), 2).await.expect("scan");
        let last = page.records.last().map(|(_, c)| c.clone());
        out.extend(page.records.into_iter().map(|(r, _)| r));
        match last {
            Some(c) if page.more => cursor = Some(c),
            _ => break,
        }
    }
    out
}

async fn all_objects(fs: &dyn Filestore) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        let page = fs.list("", after.as_deref(), 2).await.expect("list");
        for attrs in &page.objects {
            let object = fs.get(&attrs.path).await.expect("get a listed object");
            out.insert(attrs.path.clone(), object.data);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    out
}

fn record(kind: Kind, i: usize) -> Record {
    let id = format!("{}-{i:02}", kind.as_str().to_lowercase());
    Record {
        project_id: if i.is_multiple_of(2) { "p1" } else { "p2" }.into(),
        version: 1,
        data: format!("{kind} #{i}: payload").into_bytes(),
        indexes: [
            Some(IndexKey::new(
                format!("p{}", i % 2 + 1),
                format!("{:020}", 1000 + i),
            )),
            i.is_multiple_of(3)
                .then(|| IndexKey::new("unhandled", id.clone())),
            None,
        ],
        expires_at: (kind == Kind::PipedStat).then(|| now_unix() + 24 * 3600),
        id,
    }
}

/// The objects of the seeded source: every upstream prefix, nested paths, binary data.
fn seeded_objects() -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "log/dep-1/stage-0/0.txt".into(),
            b"{\"index\":1}\nEOL\n".to_vec(),
        ),
        ("log/dep-1/stage-1/0.txt".into(), b"line".to_vec()),
        ("log/dep-2/stage-0/1.txt".into(), Vec::new()),
        (
            "application-live-state/app-1.json".into(),
            b"{\"x\":1}".to_vec(),
        ),
        ("latest-analysis-result/app-1.json".into(), b"{}".to_vec()),
        (
            "application-shared-objects/app-1/plugin/key".into(),
            (0u8..=255).collect(),
        ),
        ("command-output/cmd-1".into(), b"output".to_vec()),
        (
            "insights/p1/deployments/2024-01.json".into(),
            b"[]".to_vec(),
        ),
    ]
}

/// A source with [`PER_KIND`] live records of every kind (and two expired ones) and
/// [`seeded_objects`].
async fn seeded_source() -> Side {
    let side = Side::new();
    for kind in Kind::ALL {
        for i in 0..PER_KIND {
            side.ds.create(kind, record(kind, i)).await.expect("seed");
        }
    }
    for kind in [Kind::Event, Kind::PipedStat] {
        let mut expired = record(kind, 99);
        expired.expires_at = Some(now_unix() - 10);
        side.ds.create(kind, expired).await.expect("seed expired");
    }
    for (path, data) in seeded_objects() {
        side.fs
            .put(&path, data, PutCondition::Absent)
            .await
            .expect("seed object");
    }
    side
}

fn options() -> MigrateOptions {
    let mut options = MigrateOptions::new("source", "destination");
    options.page_size = PAGE;
    options.object_page_size = PAGE;
    options
}

async fn run(
    from: &Side,
    to: Backends<'_>,
    checkpoints: &dyn CheckpointStore,
) -> std::result::Result<MigrateReport, MigrateError> {
    migrate(from.backends(), to, &options(), &NoProgress, checkpoints).await
}

/// What must hold after a complete migration: the same records (versions aside) and the
/// same objects on both sides, and every count matching.
async fn assert_same(from: &Side, to: &Side, report: &MigrateReport) {
    assert!(report.counts_match, "{report:#?}");
    assert!(report.mismatches().is_empty(), "{report:#?}");
    for kind in Kind::ALL {
        let source = from.records(kind).await;
        let destination = to.records(kind).await;
        let strip = |records: Vec<Record>| -> Vec<Record> {
            records
                .into_iter()
                .map(|r| Record { version: 0, ..r })
                .collect()
        };
        assert_eq!(strip(source.clone()), strip(destination), "{kind}");
        let counted = report
            .kinds
            .iter()
            .find(|k| k.kind == kind)
            .expect("every kind is reported");
        assert_eq!(counted.source, source.len() as u64, "{kind}");
        assert_eq!(counted.destination, source.len() as u64, "{kind}");
    }
    let objects = from.objects().await;
    assert_eq!(objects, to.objects().await);
    assert_eq!(report.objects.source, objects.len() as u64);
    assert_eq!(report.objects.destination, objects.len() as u64);
}

fn tally(report: &MigrateReport, kind: Kind) -> Tally {
    report
        .kinds
        .iter()
        .find(|k| k.kind == kind)
        .map(|k| k.tally)
        .expect("every kind is reported")
}

#[tokio::test]
async fn copies_every_kind_and_object_and_a_rerun_changes_nothing() {
    let from = seeded_source().await;
    let to = Side::new();
    let checkpoints = MemoryCheckpoint::new();

    let first = run(&from, to.backends(), &checkpoints)
        .await
        .expect("migrate");
    assert!(!first.resumed);
    assert_same(&from, &to, &first).await;
    for kind in Kind::ALL {
        let t = tally(&first, kind);
        assert_eq!(t.copied, PER_KIND as u64, "{kind}: {t:?}");
        assert_eq!((t.updated, t.unchanged), (0, 0), "{kind}: {t:?}");
    }
    assert_eq!(first.objects.tally.copied, seeded_objects().len() as u64);
    assert_eq!(first.written(), (PER_KIND * Kind::ALL.len() + 8) as u64);
    // Expired records are neither copied nor counted.
    for kind in [Kind::Event, Kind::PipedStat] {
        let id = format!("{}-99", kind.as_str().to_lowercase());
        assert!(matches!(
            to.ds.get(kind, &id).await,
            Err(StoreError::NotFound(_))
        ));
        assert_eq!(
            first
                .kinds
                .iter()
                .find(|k| k.kind == kind)
                .map(|k| k.source),
            Some(PER_KIND as u64)
        );
    }
    assert_eq!(
        checkpoints.current(),
        None,
        "a completed run clears its checkpoint"
    );

    // Again: nothing to write, same counts; destination versions stay 1.
    let second = run(&from, to.backends(), &checkpoints)
        .await
        .expect("re-run");
    assert!(!second.resumed);
    assert_eq!(second.written(), 0, "{second:#?}");
    for kind in Kind::ALL {
        assert_eq!(tally(&second, kind).unchanged, PER_KIND as u64, "{kind}");
    }
    assert_eq!(
        second.objects.tally.unchanged,
        seeded_objects().len() as u64
    );
    assert_same(&from, &to, &second).await;
    for kind in Kind::ALL {
        assert!(
            to.records(kind).await.iter().all(|r| r.version == 1),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn changes_to_the_source_between_runs_are_carried_over() {
    let from = seeded_source().await;
    let to = Side::new();
    let checkpoints = MemoryCheckpoint::new();
    run(&from, to.backends(), &checkpoints)
        .await
        .expect("migrate");

    // Update one record (data and index), add one, rewrite one object, add one.
    let mut changed = from
        .ds
        .get(Kind::Deployment, "deployment-03")
        .await
        .expect("get");
    let version = changed.version;
    changed.data = b"deployment #3: completed".to_vec();
    changed.indexes[1] = None;
    from.ds
        .put(Kind::Deployment, changed.clone(), version)
        .await
        .expect("update");
    from.ds
        .create(Kind::Command, record(Kind::Command, 50))
        .await
        .expect("add");
    let log = "log/dep-1/stage-1/0.txt";
    let current = from.fs.get(log).await.expect("log");
    from.fs
        .put(
            log,
            b"line\nEOL\n".to_vec(),
            PutCondition::Matches(current.etag),
        )
        .await
        .expect("rewrite");
    from.fs
        .put(
            "command-output/cmd-2",
            b"more".to_vec(),
            PutCondition::Absent,
        )
        .await
        .expect("add object");

    let report = run(&from, to.backends(), &checkpoints)
        .await
        .expect("re-run");
    assert_same(&from, &to, &report).await;
    let deployments = tally(&report, Kind::Deployment);
    assert_eq!(
        (deployments.updated, deployments.copied),
        (1, 0),
        "{deployments:?}"
    );
    let commands = tally(&report, Kind::Command);
    assert_eq!((commands.updated, commands.copied), (0, 1), "{commands:?}");
    assert_eq!(report.written(), 4, "{report:#?}");
    assert_eq!(
        (report.objects.tally.updated, report.objects.tally.copied),
        (1, 1)
    );
    let copied = to
        .ds
        .get(Kind::Deployment, "deployment-03")
        .await
        .expect("get");
    assert_eq!(copied.data, changed.data);
    assert_eq!(copied.indexes[1], None, "the index change came along");
    assert_eq!(copied.version, 2, "the destination counts its own versions");
    assert_eq!(
        to.fs.get(log).await.expect("log").data,
        b"line\nEOL\n".to_vec()
    );
}

/// A datastore whose `create` fails once `creates_left` reaches zero.
struct FailingCreates {
    inner: Arc<SqliteDatastore>,
    creates_left: AtomicI64,
}

#[async_trait]
impl Datastore for FailingCreates {
    async fn get(&self, kind: Kind, id: &str) -> Result<Record> {
        self.inner.get(kind, id).await
    }
    async fn create(&self, kind: Kind, record: Record) -> Result<()> {
        if self.creates_left.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(StoreError::unavailable("connection lost"));
        }
        self.inner.create(kind, record).await
    }
    async fn put(&self, kind: Kind, record: Record, expected_version: u64) -> Result<()> {
        self.inner.put(kind, record, expected_version).await
    }
    async fn delete(&self, kind: Kind, id: &str, expected_version: u64) -> Result<()> {
        self.inner.delete(kind, id, expected_version).await
    }
    async fn query(&self, query: &Query) -> Result<Page> {
        self.inner.query(query).await
    }
    async fn scan(&self, kind: Kind, after: Option<&str>, page_size: usize) -> Result<Page> {
        self.inner.scan(kind, after, page_size).await
    }
}

/// A filestore whose `put` fails once `puts_left` reaches zero.
struct FailingPuts {
    inner: Arc<LocalFilestore>,
    puts_left: AtomicI64,
}

#[async_trait]
impl Filestore for FailingPuts {
    async fn get(&self, path: &str) -> Result<Object> {
        self.inner.get(path).await
    }
    async fn put(&self, path: &str, data: Vec<u8>, condition: PutCondition) -> Result<String> {
        if self.puts_left.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(StoreError::unavailable("connection lost"));
        }
        self.inner.put(path, data, condition).await
    }
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<ListPage> {
        self.inner.list(prefix, after, limit).await
    }
    async fn delete(&self, path: &str) -> Result<()> {
        self.inner.delete(path).await
    }
}

#[tokio::test]
async fn an_interrupted_run_resumes_and_completes_without_duplicates() {
    let from = seeded_source().await;
    let to = Side::new();
    let state = tempfile::tempdir().expect("tempdir");
    let checkpoints = FileCheckpoint::new(state.path().join("b.yaml.migrate-state.json"));

    // Interrupted among the records: 7 Projects, 7 Applications, then 3 Commands.
    let failing = FailingCreates {
        inner: to.ds.clone(),
        creates_left: AtomicI64::new(17),
    };
    let err = run(
        &from,
        Backends {
            datastore: &failing,
            filestore: to.fs.as_ref(),
        },
        &checkpoints,
    )
    .await
    .expect_err("the destination fails");
    assert!(err.to_string().contains("connection lost"), "{err}");
    let saved: Checkpoint = checkpoints
        .load()
        .expect("load")
        .expect("a checkpoint is left behind");
    assert_eq!(saved.kinds_done, vec!["Project", "Application"]);
    assert_eq!(saved.kind.as_deref(), Some("Command"), "{saved:?}");
    assert!(saved.cursor.is_some(), "{saved:?}");
    assert_eq!(saved.last_file, None);
    assert!(checkpoints.path().exists());
    assert_eq!(to.records(Kind::Command).await.len(), 3);
    assert!(to.records(Kind::Deployment).await.is_empty());

    // Interrupted again, among the objects: the records finish, 3 objects go through.
    let failing = FailingPuts {
        inner: to.fs.clone(),
        puts_left: AtomicI64::new(3),
    };
    let err = run(
        &from,
        Backends {
            datastore: to.ds.as_ref(),
            filestore: &failing,
        },
        &checkpoints,
    )
    .await
    .expect_err("the destination's filestore fails");
    assert!(err.to_string().contains("connection lost"), "{err}");
    let saved = checkpoints.load().expect("load").expect("a checkpoint");
    assert_eq!(saved.kinds_done.len(), Kind::ALL.len(), "{saved:?}");
    assert!(saved.last_file.is_some(), "{saved:?}");
    assert_eq!(
        saved.tallies.get(FILES_TALLY).map(|t| t.copied),
        Some(PAGE as u64),
        "one page of objects was completed: {saved:?}"
    );

    // Resumed: completes, and every kind holds exactly the source's records.
    let report = run(&from, to.backends(), &checkpoints)
        .await
        .expect("resume");
    assert!(report.resumed);
    assert_same(&from, &to, &report).await;
    for kind in Kind::ALL {
        let ids: Vec<String> = to.records(kind).await.into_iter().map(|r| r.id).collect();
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(ids.len(), PER_KIND, "{kind}: {ids:?}");
        assert_eq!(ids, unique, "{kind}");
        // Every record was written once over the three runs; none was updated.
        let t = tally(&report, kind);
        assert_eq!(t.updated, 0, "{kind}: {t:?}");
        assert_eq!(t.copied + t.unchanged, PER_KIND as u64, "{kind}: {t:?}");
    }
    assert_eq!(report.objects.tally.updated, 0);
    assert!(
        !checkpoints.path().exists(),
        "a completed run removes the checkpoint"
    );
}

#[tokio::test]
async fn restart_ignores_a_checkpoint_and_a_foreign_checkpoint_is_not_resumed() {
    let from = seeded_source().await;
    let to = Side::new();
    let checkpoints = MemoryCheckpoint::new();
    // A checkpoint claiming every kind is done: resuming it would copy only the objects.
    let mut done = Checkpoint {
        format: wisp_store::migrate::CHECKPOINT_FORMAT,
        source: "source".into(),
        destination: "destination".into(),
        kinds_done: Kind::ALL.iter().map(|k| k.as_str().to_string()).collect(),
        ..Default::default()
    };
    checkpoints.save(&done).expect("save");
    let mut opts = options();
    opts.restart = true;
    let report = migrate(
        from.backends(),
        to.backends(),
        &opts,
        &NoProgress,
        &checkpoints,
    )
    .await
    .expect("restart");
    assert!(!report.resumed);
    assert_same(&from, &to, &report).await;

    // Another source's checkpoint is ignored too.
    let other = Side::new();
    done.source = "elsewhere".into();
    checkpoints.save(&done).expect("save");
    let report = run(&from, other.backends(), &checkpoints)
        .await
        .expect("migrate");
    assert!(!report.resumed);
    assert_same(&from, &other, &report).await;
}

/// A destination holding a record and an object the source does not have.
async fn side_with_its_own_data() -> Side {
    let side = Side::new();
    side.ds
        .create(Kind::Project, record(Kind::Project, 42))
        .await
        .expect("extra");
    side.fs
        .put("insights/extra", b"x".to_vec(), PutCondition::Absent)
        .await
        .expect("extra object");
    side
}

#[tokio::test]
async fn extra_records_in_the_destination_make_the_counts_differ() {
    let from = seeded_source().await;
    let to = side_with_its_own_data().await;
    let report = run(&from, to.backends(), &MemoryCheckpoint::new())
        .await
        .expect("migrate");
    assert!(!report.counts_match);
    assert_eq!(
        report.mismatches(),
        vec![
            format!("Project: source {PER_KIND}, destination {}", PER_KIND + 1),
            format!(
                "objects: source {}, destination {}",
                seeded_objects().len(),
                seeded_objects().len() + 1
            ),
        ]
    );
}

/// Records what the progress display is told.
#[derive(Default)]
struct Recorder {
    events: std::sync::Mutex<Vec<String>>,
}

impl MigrateProgress for Recorder {
    fn start(&self, stage: Stage, total: Option<u64>, done: u64) {
        self.push(format!("start {stage:?} {total:?} {done}"));
    }
    fn advance(&self, n: u64) {
        self.push(format!("advance {n}"));
    }
    fn note(&self, text: &str) {
        self.push(format!("note {text}"));
    }
}

impl Recorder {
    fn push(&self, event: String) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event);
        }
    }
}

#[tokio::test]
async fn progress_knows_the_totals() {
    let from = seeded_source().await;
    let to = Side::new();
    let progress = Recorder::default();
    migrate(
        from.backends(),
        to.backends(),
        &options(),
        &progress,
        &MemoryCheckpoint::new(),
    )
    .await
    .expect("migrate");
    let events = progress.events.lock().expect("lock").clone();
    let starts: Vec<&String> = events.iter().filter(|e| e.starts_with("start")).collect();
    let records = PER_KIND * Kind::ALL.len();
    assert_eq!(
        starts,
        vec![
            "start Counting None 0",
            &format!("start Records Some({records}) 0"),
            &format!("start Objects Some({}) 0", seeded_objects().len()),
            "start Verifying None 0",
        ]
    );
    // The copy stages advance by exactly their totals.
    let mut sums = Vec::new();
    let mut sum = 0;
    for e in &events {
        if e.starts_with("start") {
            sums.push(sum);
            sum = 0;
        } else if let Some(n) = e.strip_prefix("advance ") {
            sum += n.parse::<usize>().expect("a number");
        }
    }
    sums.push(sum);
    assert_eq!(sums[2], records, "{events:?}");
    assert_eq!(sums[3], seeded_objects().len(), "{events:?}");
}

#[tokio::test]
async fn a_dry_run_tallies_what_would_move_and_writes_nothing() {
    let from = seeded_source().await;
    let to = Side::new();
    let checkpoints = MemoryCheckpoint::new();
    let mut dry = options();
    dry.dry_run = true;

    let report = migrate(
        from.backends(),
        to.backends(),
        &dry,
        &NoProgress,
        &checkpoints,
    )
    .await
    .expect("dry run");
    for kind in Kind::ALL {
        assert_eq!(tally(&report, kind).copied, PER_KIND as u64, "{kind}");
        assert!(to.records(kind).await.is_empty(), "{kind} written");
    }
    assert_eq!(report.objects.tally.copied, seeded_objects().len() as u64);
    assert!(to.objects().await.is_empty(), "objects written");
    assert_eq!(
        checkpoints.current(),
        None,
        "a dry run leaves no checkpoint"
    );

    // After the real run, one changed record is what a dry run reports.
    run(&from, to.backends(), &checkpoints)
        .await
        .expect("migrate");
    let mut changed = from
        .ds
        .get(Kind::Deployment, "deployment-03")
        .await
        .expect("get");
    let version = changed.version;
    changed.data = b"deployment #3: completed".to_vec();
    from.ds
        .put(Kind::Deployment, changed, version)
        .await
        .expect("update");
    let report = migrate(
        from.backends(),
        to.backends(),
        &dry,
        &NoProgress,
        &checkpoints,
    )
    .await
    .expect("dry run");
    let t = tally(&report, Kind::Deployment);
    assert_eq!((t.updated, t.unchanged), (1, PER_KIND as u64 - 1), "{t:?}");
    assert_ne!(
        to.ds
            .get(Kind::Deployment, "deployment-03")
            .await
            .expect("get")
            .data,
        b"deployment #3: completed".to_vec(),
        "a dry run wrote the change"
    );
}

#[tokio::test]
async fn verifying_presence_ignores_the_destinations_own_data_but_not_a_missing_record() {
    let from = seeded_source().await;
    let to = side_with_its_own_data().await;
    let mut presence = options();
    presence.verify_presence = true;
    let report = migrate(
        from.backends(),
        to.backends(),
        &presence,
        &NoProgress,
        &MemoryCheckpoint::new(),
    )
    .await
    .expect("migrate");
    assert!(report.counts_match, "{report:#?}");

    // A record the destination lost since is missed by the next verification.
    let lost = to.ds.get(Kind::Piped, "piped-02").await.expect("get");
    to.ds
        .delete(Kind::Piped, "piped-02", lost.version)
        .await
        .expect("delete");
    let mut verify_only = presence.clone();
    verify_only.dry_run = true;
    let report = migrate(
        from.backends(),
        to.backends(),
        &verify_only,
        &NoProgress,
        &MemoryCheckpoint::new(),
    )
    .await
    .expect("dry run");
    assert_eq!(
        report.mismatches(),
        vec![format!(
            "Piped: source {PER_KIND}, destination {}",
            PER_KIND - 1
        )]
    );
}

/// An application whose labels are encoded in the order `keys` gives (a message is its
/// fields concatenated, so the map's entries can be appended one by one).
fn application_data(keys: &[&str]) -> Vec<u8> {
    use prost::Message;
    use wisp_proto::model::Application;
    let mut data = Application {
        id: "application-00".into(),
        project_id: "p1".into(),
        name: "web".into(),
        ..Default::default()
    }
    .encode_to_vec();
    for key in keys {
        let label = Application {
            labels: [(key.to_string(), format!("{key}-value"))].into(),
            ..Default::default()
        };
        data.extend(label.encode_to_vec());
    }
    data
}

/// The same record encoded another way (its labels in another order, as another process
/// encodes a `HashMap`) is the same record: a re-run neither counts nor writes it.
#[tokio::test]
async fn a_record_encoded_in_another_order_is_unchanged() {
    let from = Side::new();
    let to = Side::new();
    let checkpoints = MemoryCheckpoint::new();
    let mut app = record(Kind::Application, 0);
    app.data = application_data(&["env", "team", "tier"]);
    from.ds
        .create(Kind::Application, app.clone())
        .await
        .expect("seed");
    run(&from, to.backends(), &checkpoints)
        .await
        .expect("migrate");

    let reordered = Record {
        data: application_data(&["tier", "env", "team"]),
        ..app.clone()
    };
    assert_ne!(reordered.data, app.data);
    from.ds
        .put(Kind::Application, reordered, 1)
        .await
        .expect("re-encode");

    let mut dry = options();
    dry.dry_run = true;
    let planned = migrate(
        from.backends(),
        to.backends(),
        &dry,
        &NoProgress,
        &checkpoints,
    )
    .await
    .expect("dry run");
    assert_eq!(planned.written(), 0, "{planned:#?}");
    let second = run(&from, to.backends(), &checkpoints)
        .await
        .expect("re-run");
    assert_eq!(second.written(), 0, "{second:#?}");
    assert_eq!(tally(&second, Kind::Application).unchanged, 1);
    let stored = to.records(Kind::Application).await;
    assert_eq!(
        stored.iter().map(|r| r.version).collect::<Vec<_>>(),
        [1],
        "the destination's record was rewritten"
    );

    // A label that really changed is carried over.
    let mut changed = from
        .ds
        .get(Kind::Application, "application-00")
        .await
        .expect("get");
    changed.data = application_data(&["env", "team"]);
    from.ds
        .put(Kind::Application, changed.clone(), 2)
        .await
        .expect("change");
    let third = run(&from, to.backends(), &checkpoints)
        .await
        .expect("re-run");
    assert_eq!(tally(&third, Kind::Application).updated, 1, "{third:#?}");
    let stored = to.records(Kind::Application).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].data, changed.data);
}

/// A checkpoint that cannot be decoded or written keeps the JSON or I/O error as its
/// source (the message, naming the file and the cause, is unchanged).
#[test]
fn checkpoint_failures_keep_their_cause_as_the_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("b.yaml.migrate-state.json");
    std::fs::write(&path, b"{ not json").expect("write");
    let corrupt = FileCheckpoint::new(&path)
        .load()
        .expect_err("a corrupt checkpoint is refused");
    assert!(
        matches!(corrupt, MigrateError::Checkpoint { .. }),
        "{corrupt:?}"
    );
    assert!(
        corrupt.to_string().starts_with(&format!(
            "checkpoint: corrupt checkpoint (remove it or pass --restart) {}: ",
            path.display()
        )),
        "{corrupt}"
    );
    let source = std::error::Error::source(&corrupt).expect("a source");
    assert!(source.is::<serde_json::Error>(), "{source:?}");

    let nowhere = FileCheckpoint::new(dir.path().join("no-such-dir").join("state.json"));
    let unwritable = nowhere
        .save(&Checkpoint::default())
        .expect_err("no directory to write in");
    let source = std::error::Error::source(&unwritable).expect("a source");
    let io = source
        .downcast_ref::<std::io::Error>()
        .unwrap_or_else(|| panic!("not an I/O error: {source:?}"));
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
}
