//! `Datastore` on one SQLite file.
//!
//! All records live in one table keyed by `(kind, id)`. Each of the [`INDEX_SLOTS`] index
//! slots is a pair of nullable columns `iN_pk`/`iN_sk` with a partial index
//! `(kind, iN_pk, iN_sk, id) WHERE iN_pk IS NOT NULL`, so a query is one indexed range
//! read and a record whose slot is `None` takes no room in that index (sparse index).
//!
//! The file is opened in WAL mode with a busy timeout, so the `wisp` admin CLI can write
//! while `wisp serve` runs: each process opens its own [`SqliteDatastore`], and every
//! write is a short `BEGIN IMMEDIATE` transaction.
//!
//! rusqlite is blocking. Writes go to one writer thread, which owns the write connection
//! and commits them in groups: it takes every write waiting (at most [`MAX_BATCH`]), runs
//! each inside a savepoint of one `BEGIN IMMEDIATE` transaction (a write that fails is
//! rolled back alone; the others do not see it), commits once, and only then answers
//! each caller. Unrelated writers therefore no longer queue one commit (and one thread
//! of the blocking pool, fighting for the connection's lock) behind another: a burst of
//! 100 writes is one commit. Each write still sees every write before it (they run in
//! arrival order on one connection), so the optimistic version checks are unchanged.
//!
//! Durability is SQLite's WAL with `synchronous = NORMAL`, as before the writer thread: a
//! write is answered once its group is committed to the WAL, so a crash of the process
//! loses no answered write; a power cut (or an OS crash) may lose the groups committed
//! since the last checkpoint's `fsync`, never corrupt the file.
//!
//! Checkpoints (copying the WAL back into the database file, with an `fsync` of each)
//! run on a thread of their own ([`CHECKPOINT_EVERY`], `PASSIVE`: they never block the
//! writer or a reader), not on the writer: SQLite's automatic checkpoint runs inside the
//! commit that crosses its threshold, so every write queued behind that commit waited
//! for two `fsync`s (tens of milliseconds each on a busy disk).
//!
//! Reads of a file database go to a small pool of read-only connections, which WAL lets
//! run beside the writer, so a burst of polls does not queue behind one lock. A read runs
//! on the calling thread when a reader is idle (an indexed read takes microseconds and a
//! WAL reader never waits for the writer), else on the blocking thread pool
//! (`spawn_blocking`). Statements are prepared once per connection and cached, and
//! planned once (see `configure`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params_from_iter};
use wisp_store::cursor::{self, QueryCursor, ScanCursor};
use wisp_store::datastore::{Datastore, INDEX_SLOTS, IndexKey, Kind, Page, Query, Record};
use wisp_store::error::{Result, StoreError};

/// How long a writer waits for another connection's write lock before giving up with
/// `Unavailable`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Pages are capped so one query cannot read an unbounded range into memory.
pub const MAX_PAGE_SIZE: usize = 1000;

/// Schema migrations, applied in order; the schema version is the number applied.
/// Never edit a released entry: append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: the records table and one partial index per slot.
    "CREATE TABLE records (
        kind       TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        project_id TEXT    NOT NULL,
        version    INTEGER NOT NULL,
        data       BLOB    NOT NULL,
        i0_pk      TEXT,
        i0_sk      TEXT,
        i1_pk      TEXT,
        i1_sk      TEXT,
        i2_pk      TEXT,
        i2_sk      TEXT,
        expires_at INTEGER,
        PRIMARY KEY (kind, id)
    );
    CREATE INDEX records_i0 ON records (kind, i0_pk, i0_sk, id) WHERE i0_pk IS NOT NULL;
    CREATE INDEX records_i1 ON records (kind, i1_pk, i1_sk, id) WHERE i1_pk IS NOT NULL;
    CREATE INDEX records_i2 ON records (kind, i2_pk, i2_sk, id) WHERE i2_pk IS NOT NULL;
    CREATE INDEX records_expiry ON records (expires_at) WHERE expires_at IS NOT NULL;",
];

/// The columns every record read selects, in the order [`read_row`] expects.
const RECORD_COLUMNS: &str =
    "id, project_id, version, data, i0_pk, i0_sk, i1_pk, i1_sk, i2_pk, i2_sk, expires_at";

/// A record is live while `expires_at` is unset or still in the future.
const LIVE: &str = "(expires_at IS NULL OR expires_at > ?)";

/// A cheaply cloneable handle on one SQLite database file.
#[derive(Clone)]
pub struct SqliteDatastore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The write connection: the writer thread's while it commits a group; reads of an
    /// in-memory database and the schema's set-up use it too.
    conn: Arc<Mutex<Connection>>,
    /// Writes for the writer thread, which stops once this is dropped.
    writes: std::sync::mpsc::Sender<Box<dyn Write>>,
    /// Read-only connections (empty for an in-memory database, whose data no second
    /// connection can see); reads then use `conn`.
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    path: Option<PathBuf>,
    /// The checkpoint thread (file databases) stops once this is dropped.
    _checkpoints: Option<std::sync::mpsc::Sender<()>>,
}

/// Read connections per file database: enough to keep both cores of a small machine
/// busy with reads while a write holds the writer.
const READERS: usize = 4;

/// Prepared statements kept per connection (the record paths use a dozen or so shapes).
const STATEMENT_CACHE: usize = 64;

/// How often the checkpoint thread copies the WAL back into the database file (a
/// checkpoint with nothing new to copy costs nothing).
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Most writes committed in one transaction by the writer thread: a bound on how long
/// the first of them waits for the others (each takes some microseconds).
pub const MAX_BATCH: usize = 256;

/// One write waiting for the writer thread.
trait Write: Send {
    /// Runs the write on the connection, inside the group's transaction. Returns whether it
    /// succeeded, and what answers its caller once the group's fate is known.
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Answer>);
    /// Answers the caller with `error` without running the write.
    fn fail(self: Box<Self>, error: StoreError);
}

/// The answer of a write that ran, sent once its group is committed (or is not).
trait Answer: Send {
    /// `committed` is the group's commit (or rollback) error, if any.
    fn send(self: Box<Self>, committed: Option<&GroupError>);
}

/// Why a group of writes was not committed: a SQLite error, kept as its code and words
/// for each caller's error.
#[derive(Debug, Clone)]
struct GroupError {
    code: Option<ErrorCode>,
    message: String,
}

impl GroupError {
    fn new(context: &str, e: &rusqlite::Error) -> Self {
        GroupError {
            code: e.sqlite_error_code(),
            message: format!("{context}: {e}"),
        }
    }

    fn to_store_error(&self) -> StoreError {
        let source = std::io::Error::other(self.message.clone());
        match self.code {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                StoreError::unavailable_from("sqlite busy", source)
            }
            _ => StoreError::unavailable_from("sqlite write not committed", source),
        }
    }
}

struct PendingWrite<T, F> {
    op: F,
    reply: tokio::sync::oneshot::Sender<Result<T>>,
}

struct PendingAnswer<T> {
    result: Result<T>,
    reply: tokio::sync::oneshot::Sender<Result<T>>,
}

impl<T, F> Write for PendingWrite<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
{
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Answer>) {
        let PendingWrite { op, reply } = *self;
        let result = op(conn);
        (result.is_ok(), Box::new(PendingAnswer { result, reply }))
    }

    fn fail(self: Box<Self>, error: StoreError) {
        // The caller may have gone (its call cancelled): nobody to tell.
        let _ = self.reply.send(Err(error));
    }
}

impl<T: Send> Answer for PendingAnswer<T> {
    fn send(self: Box<Self>, committed: Option<&GroupError>) {
        let result = match committed {
            None => self.result,
            // Its own error first: it wrote nothing anyway.
            Some(_) if self.result.is_err() => self.result,
            Some(e) => Err(e.to_store_error()),
        };
        let _ = self.reply.send(result);
    }
}

/// The writer thread: commits the waiting writes in groups until `writes` is closed.
fn write_groups(conn: Arc<Mutex<Connection>>, writes: std::sync::mpsc::Receiver<Box<dyn Write>>) {
    while let Ok(first) = writes.recv() {
        let mut group = Vec::with_capacity(16);
        group.push(first);
        while group.len() < MAX_BATCH {
            match writes.try_recv() {
                Ok(write) => group.push(write),
                Err(_) => break,
            }
        }
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        commit_group(&conn, group);
    }
}

/// Runs `group` in one transaction, each write in a savepoint of its own, commits, and
/// answers every caller.
fn commit_group(conn: &Connection, group: Vec<Box<dyn Write>>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let error = GroupError::new("beginning a write", &e);
        for write in group {
            write.fail(error.to_store_error());
        }
        return;
    }
    let mut answers: Vec<Box<dyn Answer>> = Vec::with_capacity(group.len());
    let mut aborted: Option<GroupError> = None;
    let mut rest = group.into_iter();
    for write in rest.by_ref() {
        if let Err(e) = savepoint(conn, "SAVEPOINT w") {
            let error = GroupError::new("opening a savepoint", &e);
            write.fail(error.to_store_error());
            aborted = Some(error);
            break;
        }
        // A write that panics is answered (its reply dropped: an internal error) and rolled
        // back alone; the thread goes on with the others.
        let ok = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write.run(conn))) {
            Ok((ok, answer)) => {
                answers.push(answer);
                ok
            }
            Err(_) => false,
        };
        if conn.is_autocommit() {
            // SQLite rolled the whole transaction back (an I/O error, a full disk): the
            // writes of the group so far are gone with it.
            aborted = Some(GroupError {
                code: None,
                message: "the group's transaction was rolled back by sqlite".into(),
            });
            break;
        }
        let ended = if ok {
            savepoint(conn, "RELEASE w")
        } else {
            savepoint(conn, "ROLLBACK TO w").and_then(|()| savepoint(conn, "RELEASE w"))
        };
        if let Err(e) = ended {
            aborted = Some(GroupError::new("closing a savepoint", &e));
            break;
        }
    }
    let committed = match aborted {
        Some(e) => Err(e),
        None => conn
            .execute_batch("COMMIT")
            .map_err(|e| GroupError::new("committing writes", &e)),
    };
    let failed = committed.err();
    if failed.is_some() && !conn.is_autocommit() {
        // Nothing of the group may stay pending on the connection.
        let _ = conn.execute_batch("ROLLBACK");
    }
    for answer in answers {
        answer.send(failed.as_ref());
    }
    let not_run = failed.unwrap_or_else(|| GroupError {
        code: None,
        message: "the group's transaction failed".into(),
    });
    for write in rest {
        write.fail(not_run.to_store_error());
    }
}

/// The checkpoint thread: every [`CHECKPOINT_EVERY`], a `PASSIVE` checkpoint (it copies
/// what no reader still needs and waits for no one), until `stop`'s sender is dropped.
/// A checkpoint that fails (another process's checkpoint holds the lock: `SQLITE_BUSY`)
/// is made at the next turn; the WAL only grows meanwhile.
fn checkpoints(conn: Connection, stop: std::sync::mpsc::Receiver<()>) {
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(CHECKPOINT_EVERY)
    {
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
    }
}

fn savepoint(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

impl std::fmt::Debug for SqliteDatastore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteDatastore")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl SqliteDatastore {
    /// Opens (creating it and its directory if needed) the database at `path` and brings
    /// its schema up to date.
    /// Blocks briefly: call it at startup, not on a request path.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            crate::private_fs::create_dir_all(parent).map_err(|e| {
                StoreError::unavailable_from(format!("creating {}", parent.display()), e)
            })?;
        }
        crate::private_fs::ensure_file(path).map_err(|e| {
            StoreError::unavailable_from(format!("creating sqlite database {}", path.display()), e)
        })?;
        let conn = Connection::open(path).map_err(|e| {
            StoreError::unavailable_from(format!("opening sqlite database {}", path.display()), e)
        })?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(map_err)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(map_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::unavailable(format!(
                "sqlite database {} refused WAL mode (got {mode})",
                path.display()
            )));
        }
        // In WAL mode NORMAL never corrupts the file; a power cut may lose the last commits.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(map_err)?;
        let mut datastore = Self::init(conn, Some(path.to_path_buf()))?;
        // Opened after `init` has migrated the schema.
        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let reader = Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| {
                StoreError::unavailable_from(
                    format!("opening sqlite database {} for reading", path.display()),
                    e,
                )
            })?;
            reader.busy_timeout(BUSY_TIMEOUT).map_err(map_err)?;
            configure(&reader)?;
            readers.push(Mutex::new(reader));
        }
        // The writer's commits no longer checkpoint; the checkpoint thread does, on a
        // connection of its own.
        datastore
            .inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(map_err)?;
        let checkpointer = Connection::open(path).map_err(|e| {
            StoreError::unavailable_from(
                format!("opening sqlite database {} to checkpoint", path.display()),
                e,
            )
        })?;
        checkpointer.busy_timeout(BUSY_TIMEOUT).map_err(map_err)?;
        let (stop, stopped) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || checkpoints(checkpointer, stopped))
            .map_err(|e| {
                StoreError::unavailable_from("starting the sqlite checkpoint thread", e)
            })?;
        match Arc::get_mut(&mut datastore.inner) {
            Some(inner) => {
                inner.readers = readers;
                inner._checkpoints = Some(stop);
            }
            None => {
                return Err(StoreError::internal("sqlite handle shared during open"));
            }
        }
        Ok(datastore)
    }

    /// A private in-memory database, for tests of code built on the datastore.
    pub fn open_in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory().map_err(map_err)?;
        Self::init(conn, None)
    }

    fn init(mut conn: Connection, path: Option<PathBuf>) -> Result<Self> {
        migrate(&mut conn)?;
        configure(&conn)?;
        let conn = Arc::new(Mutex::new(conn));
        let (writes, queued) = std::sync::mpsc::channel();
        let writer_conn = conn.clone();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || write_groups(writer_conn, queued))
            .map_err(|e| StoreError::unavailable_from("starting the sqlite writer thread", e))?;
        Ok(SqliteDatastore {
            inner: Arc::new(Inner {
                conn,
                writes,
                readers: Vec::new(),
                next_reader: AtomicUsize::new(0),
                path,
                _checkpoints: None,
            }),
        })
    }

    /// The database file, `None` for an in-memory database.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Deletes records whose `expires_at` has passed (they are already invisible).
    /// Returns how many were removed. For a periodic batch job.
    pub async fn purge_expired(&self) -> Result<usize> {
        let now = now_unix();
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM records WHERE expires_at IS NOT NULL AND expires_at <= ?1",
                [now],
            )
            .map_err(map_err)
        })
        .await
    }

    /// Runs `f` on the connection on the blocking pool.
    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            // A panic mid-operation rolled its transaction back (Transaction's Drop), so the
            // connection is still usable.
            let mut conn = inner.conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut conn)
        })
        .await
        .map_err(|e| StoreError::internal_from("sqlite task failed", e))?
    }

    /// Runs the write `f` on the writer thread, in the next group it commits; answers once
    /// that group is committed.
    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.inner
            .writes
            .send(Box::new(PendingWrite { op: f, reply }))
            .map_err(|_| StoreError::internal("the sqlite writer thread has stopped"))?;
        answer
            .await
            .map_err(|_| StoreError::internal("the sqlite writer thread dropped a write"))?
    }

    /// Runs the read-only `f` on a read connection (the writer for an in-memory
    /// database) on the blocking pool: the first idle one, else the next in turn.
    async fn run_read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        if self.inner.readers.is_empty() {
            return self.run(move |conn| f(conn)).await;
        }
        // An idle reader runs the read here, on the runtime's thread: an indexed read of a
        // WAL database takes microseconds and never waits for the writer, while handing it
        // to the blocking pool and back cost more than the read itself (two thread wake-ups
        // per poll; see benches/README.md, "Where a poll's time goes").
        for reader in &self.inner.readers {
            if let Ok(conn) = reader.try_lock() {
                return f(&conn);
            }
        }
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let n = inner.readers.len();
            let start = inner.next_reader.fetch_add(1, Ordering::Relaxed);
            for i in 0..n {
                if let Ok(conn) = inner.readers[(start + i) % n].try_lock() {
                    return f(&conn);
                }
            }
            let conn = inner.readers[start % n]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            f(&conn)
        })
        .await
        .map_err(|e| StoreError::internal_from("sqlite task failed", e))?
    }
}

/// Settings of every connection. The query planner's stability guarantee (QPSG): without
/// it, SQLite plans each statement for the values bound to it (checking that `iN_pk = ?`
/// implies the partial index's `iN_pk IS NOT NULL` marks every `?` compared as
/// plan-relevant), so a cached statement was parsed and planned again on every call with
/// another piped's key or another second's `now`: 9 % of the server's CPU on the poll path
/// (benches/README.md, "Where a poll's time goes"). Our statements' plans never depend on
/// the values (no `ANALYZE`), and the partial indexes are still used: the column's own
/// equality implies `IS NOT NULL`.
fn configure(conn: &Connection) -> Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(map_err)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(map_err)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS wisp_schema (
            id      INTEGER PRIMARY KEY CHECK (id = 0),
            version INTEGER NOT NULL
        )",
    )
    .map_err(map_err)?;
    let current: i64 = tx
        .query_row("SELECT version FROM wisp_schema WHERE id = 0", [], |row| {
            row.get(0)
        })
        .optional()
        .map_err(map_err)?
        .unwrap_or(0);
    let latest = MIGRATIONS.len();
    let applied = usize::try_from(current)
        .map_err(|_| StoreError::internal(format!("invalid schema version {current}")))?;
    if applied > latest {
        return Err(StoreError::internal(format!(
            "database schema version {applied} is newer than this build supports ({latest})"
        )));
    }
    if applied == latest {
        return Ok(());
    }
    for migration in &MIGRATIONS[applied..] {
        tx.execute_batch(migration).map_err(map_err)?;
    }
    tx.execute(
        "INSERT INTO wisp_schema (id, version) VALUES (0, ?1)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        [i64::try_from(latest).unwrap_or(i64::MAX)],
    )
    .map_err(map_err)?;
    tx.commit().map_err(map_err)
}

fn map_err(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::unavailable_from("sqlite busy", e)
        }
        Some(ErrorCode::ConstraintViolation) => StoreError::AlreadyExists(e.to_string()),
        _ => StoreError::internal_from("sqlite", e),
    }
}

use wisp_store::collection::now_unix;

/// A record row as read from SQLite, before validation.
struct RawRow {
    id: String,
    project_id: String,
    version: i64,
    data: Vec<u8>,
    keys: [(Option<String>, Option<String>); INDEX_SLOTS],
    expires_at: Option<i64>,
}

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        id: row.get(0)?,
        project_id: row.get(1)?,
        version: row.get(2)?,
        data: row.get(3)?,
        keys: [
            (row.get(4)?, row.get(5)?),
            (row.get(6)?, row.get(7)?),
            (row.get(8)?, row.get(9)?),
        ],
        expires_at: row.get(10)?,
    })
}

impl RawRow {
    fn into_record(self) -> Result<Record> {
        let version = u64::try_from(self.version).map_err(|_| {
            StoreError::internal(format!(
                "record {} has invalid version {}",
                self.id, self.version
            ))
        })?;
        let mut indexes: [Option<IndexKey>; INDEX_SLOTS] = Default::default();
        for (slot, (pk, sk)) in self.keys.into_iter().enumerate() {
            indexes[slot] = match (pk, sk) {
                (Some(pk), Some(sk)) => Some(IndexKey { pk, sk }),
                (None, _) => None,
                (Some(_), None) => {
                    return Err(StoreError::internal(format!(
                        "record {} has index slot {slot} without a sort key",
                        self.id
                    )));
                }
            };
        }
        Ok(Record {
            id: self.id,
            project_id: self.project_id,
            version,
            data: self.data,
            indexes,
            expires_at: self.expires_at,
        })
    }
}

/// Values bound for `project_id, data, i0_pk, i0_sk, ..., expires_at`.
fn record_values(record: Record) -> Vec<Value> {
    let mut values = Vec::with_capacity(3 + 2 * INDEX_SLOTS);
    values.push(Value::Text(record.project_id));
    values.push(Value::Blob(record.data));
    for key in record.indexes {
        match key {
            Some(IndexKey { pk, sk }) => {
                values.push(Value::Text(pk));
                values.push(Value::Text(sk));
            }
            None => {
                values.push(Value::Null);
                values.push(Value::Null);
            }
        }
    }
    values.push(record.expires_at.map_or(Value::Null, Value::Integer));
    values
}

fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(StoreError::InvalidArgument("record id is empty".into()));
    }
    Ok(())
}

/// The live version of `(kind, id)`, if any.
fn live_version(conn: &Connection, kind: Kind, id: &str, now: i64) -> Result<Option<i64>> {
    conn.prepare_cached(&format!(
        "SELECT version FROM records WHERE kind = ? AND id = ? AND {LIVE}"
    ))
    .map_err(map_err)?
    .query_row(rusqlite::params![kind.as_str(), id, now], |row| row.get(0))
    .optional()
    .map_err(map_err)
}

fn check_page_size(page_size: usize) -> Result<usize> {
    if page_size == 0 {
        return Err(StoreError::InvalidArgument(
            "page size must be at least 1".into(),
        ));
    }
    Ok(page_size.min(MAX_PAGE_SIZE))
}

/// SQL and parameters for one query page (`page_size + 1` rows, to tell whether there is
/// more). Only the constraints in use are emitted, so SQLite can turn them all into an
/// index range on `(kind, iN_pk, iN_sk, id)`.
fn query_sql(
    query: &Query,
    after: Option<QueryCursor>,
    now: i64,
    page_size: usize,
) -> (String, Vec<Value>) {
    // The caller checked `slot`: a small integer, so formatting column names is safe.
    let slot = query.slot;
    let (pk_col, sk_col) = (format!("i{slot}_pk"), format!("i{slot}_sk"));
    let mut sql =
        format!("SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND {pk_col} = ? AND {LIVE}");
    let mut values = vec![
        Value::Text(query.kind.as_str().into()),
        Value::Text(query.pk.clone()),
        Value::Integer(now),
    ];
    if let Some(from) = &query.sk_from {
        sql.push_str(&format!(" AND {sk_col} >= ?"));
        values.push(Value::Text(from.clone()));
    }
    if let Some(to) = &query.sk_to {
        sql.push_str(&format!(" AND {sk_col} < ?"));
        values.push(Value::Text(to.clone()));
    }
    let (cmp, dir) = if query.descending {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    if let Some(after) = after {
        sql.push_str(&format!(" AND ({sk_col}, id) {cmp} (?, ?)"));
        values.push(Value::Text(after.s));
        values.push(Value::Text(after.i));
    }
    sql.push_str(&format!(" ORDER BY {sk_col} {dir}, id {dir} LIMIT ?"));
    values.push(Value::Integer(
        i64::try_from(page_size + 1).unwrap_or(i64::MAX),
    ));
    (sql, values)
}

/// SQL and parameters for one scan page, in id order on the primary key.
fn scan_sql(kind: Kind, after: Option<String>, now: i64, page_size: usize) -> (String, Vec<Value>) {
    let mut sql = format!("SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND {LIVE}");
    let mut values = vec![Value::Text(kind.as_str().into()), Value::Integer(now)];
    if let Some(after) = after {
        sql.push_str(" AND id > ?");
        values.push(Value::Text(after));
    }
    sql.push_str(" ORDER BY id ASC LIMIT ?");
    values.push(Value::Integer(
        i64::try_from(page_size + 1).unwrap_or(i64::MAX),
    ));
    (sql, values)
}

#[async_trait]
impl Datastore for SqliteDatastore {
    async fn get(&self, kind: Kind, id: &str) -> Result<Record> {
        let id = id.to_string();
        let now = now_unix();
        self.run_read(move |conn| {
            let raw = conn
                .prepare_cached(&format!(
                    "SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND id = ? AND {LIVE}"
                ))
                .map_err(map_err)?
                .query_row(rusqlite::params![kind.as_str(), id, now], read_row)
                .optional()
                .map_err(map_err)?;
            match raw {
                Some(raw) => raw.into_record(),
                None => Err(StoreError::NotFound(format!("{kind} {id}"))),
            }
        })
        .await
    }

    async fn create(&self, kind: Kind, record: Record) -> Result<()> {
        check_id(&record.id)?;
        let now = now_unix();
        self.write(move |conn| {
            let id = record.id.clone();
            let mut values = vec![Value::Text(kind.as_str().into()), Value::Text(id.clone())];
            values.extend(record_values(record));
            values.push(Value::Integer(now));
            // An expired record is absent: creating over it replaces it.
            let changed = conn
                .prepare_cached(
                    "INSERT INTO records (kind, id, project_id, data, i0_pk, i0_sk, i1_pk, i1_sk,
                                          i2_pk, i2_sk, expires_at, version)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1)
                     ON CONFLICT (kind, id) DO UPDATE SET
                        project_id = excluded.project_id, data = excluded.data,
                        i0_pk = excluded.i0_pk, i0_sk = excluded.i0_sk,
                        i1_pk = excluded.i1_pk, i1_sk = excluded.i1_sk,
                        i2_pk = excluded.i2_pk, i2_sk = excluded.i2_sk,
                        expires_at = excluded.expires_at, version = 1
                     WHERE records.expires_at IS NOT NULL AND records.expires_at <= ?12",
                )
                .map_err(map_err)?
                .execute(params_from_iter(values))
                .map_err(map_err)?;
            if changed == 0 {
                return Err(StoreError::AlreadyExists(format!("{kind} {id}")));
            }
            Ok(())
        })
        .await
    }

    async fn put(&self, kind: Kind, record: Record, expected_version: u64) -> Result<()> {
        check_id(&record.id)?;
        let now = now_unix();
        self.write(move |tx| {
            let id = record.id.clone();
            // A version beyond i64 cannot be stored, so it can only mismatch.
            let changed = match i64::try_from(expected_version) {
                Ok(expected) => {
                    let mut values = record_values(record);
                    values.push(Value::Text(kind.as_str().into()));
                    values.push(Value::Text(id.clone()));
                    values.push(Value::Integer(expected));
                    values.push(Value::Integer(now));
                    tx.prepare_cached(&format!(
                        "UPDATE records SET project_id = ?, data = ?, i0_pk = ?, i0_sk = ?,
                            i1_pk = ?, i1_sk = ?, i2_pk = ?, i2_sk = ?, expires_at = ?,
                            version = version + 1
                         WHERE kind = ? AND id = ? AND version = ? AND {LIVE}"
                    ))
                    .map_err(map_err)?
                    .execute(params_from_iter(values))
                    .map_err(map_err)?
                }
                Err(_) => 0,
            };
            if changed == 0 {
                return Err(match live_version(tx, kind, &id, now)? {
                    None => StoreError::NotFound(format!("{kind} {id}")),
                    Some(found) => StoreError::Conflict(format!(
                        "{kind} {id}: expected version {expected_version}, found {found}"
                    )),
                });
            }
            Ok(())
        })
        .await
    }

    async fn delete(&self, kind: Kind, id: &str, expected_version: u64) -> Result<()> {
        let id = id.to_string();
        let now = now_unix();
        self.write(move |tx| {
            let changed = match i64::try_from(expected_version) {
                Ok(expected) => tx
                    .prepare_cached(&format!(
                        "DELETE FROM records WHERE kind = ? AND id = ? AND version = ? AND {LIVE}"
                    ))
                    .map_err(map_err)?
                    .execute(rusqlite::params![kind.as_str(), id, expected, now])
                    .map_err(map_err)?,
                Err(_) => 0,
            };
            if changed == 0 {
                return Err(match live_version(tx, kind, &id, now)? {
                    None => StoreError::NotFound(format!("{kind} {id}")),
                    Some(found) => StoreError::Conflict(format!(
                        "{kind} {id}: expected version {expected_version}, found {found}"
                    )),
                });
            }
            Ok(())
        })
        .await
    }

    async fn query(&self, query: &Query) -> Result<Page> {
        let slot = query.slot;
        if slot >= INDEX_SLOTS {
            return Err(StoreError::InvalidArgument(format!(
                "index slot {slot} out of range (0..{INDEX_SLOTS})"
            )));
        }
        let page_size = check_page_size(query.page_size)?;
        let after = match &query.after {
            Some(cursor) => Some(cursor::decode::<QueryCursor>(cursor)?),
            None => None,
        };

        let (sql, values) = query_sql(query, after, now_unix(), page_size);
        let rows = self
            .run_read(move |conn| {
                let mut stmt = conn.prepare_cached(&sql).map_err(map_err)?;
                let rows = stmt
                    .query_map(params_from_iter(values), read_row)
                    .map_err(map_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(map_err)?;
                Ok(rows)
            })
            .await?;

        let more = rows.len() > page_size;
        let mut records = Vec::with_capacity(rows.len().min(page_size));
        for raw in rows.into_iter().take(page_size) {
            let record = raw.into_record()?;
            let sk = match &record.indexes[slot] {
                Some(key) => key.sk.clone(),
                None => {
                    return Err(StoreError::internal(format!(
                        "record {} matched slot {slot} without a key",
                        record.id
                    )));
                }
            };
            let cursor = cursor::encode(&QueryCursor {
                s: sk,
                i: record.id.clone(),
            })?;
            records.push((record, cursor));
        }
        Ok(Page { records, more })
    }

    async fn scan(&self, kind: Kind, after: Option<&str>, page_size: usize) -> Result<Page> {
        let page_size = check_page_size(page_size)?;
        let after = match after {
            Some(cursor) => Some(cursor::decode::<ScanCursor>(cursor)?.i),
            None => None,
        };
        let (sql, values) = scan_sql(kind, after, now_unix(), page_size);
        let rows = self
            .run_read(move |conn| {
                let mut stmt = conn.prepare_cached(&sql).map_err(map_err)?;
                let rows = stmt
                    .query_map(params_from_iter(values), read_row)
                    .map_err(map_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(map_err)?;
                Ok(rows)
            })
            .await?;
        let more = rows.len() > page_size;
        let mut records = Vec::with_capacity(rows.len().min(page_size));
        for raw in rows.into_iter().take(page_size) {
            let record = raw.into_record()?;
            let cursor = cursor::encode(&ScanCursor {
                i: record.id.clone(),
            })?;
            records.push((record, cursor));
        }
        Ok(Page { records, more })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(conn: &Connection, sql: &str, values: Vec<Value>) -> String {
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("prepare");
        let rows = stmt
            .query_map(params_from_iter(values), |row| row.get::<_, String>(3))
            .expect("query")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("rows");
        rows.join("\n")
    }

    /// A cached statement is planned once: binding another key or time does not make
    /// SQLite parse and plan it again (it did on every poll before QPSG).
    #[test]
    fn cached_queries_are_not_prepared_again_for_new_values() {
        let mut conn = Connection::open_in_memory().expect("open");
        migrate(&mut conn).expect("migrate");
        configure(&conn).expect("configure");
        let q = Query::new(Kind::Command, 1, "p");
        let (sql, _) = query_sql(&q, None, 0, 10);
        for n in 0..20 {
            let mut q = Query::new(Kind::Command, 1, format!("project/piped-{n}"));
            q.page_size = 10;
            let (_, values) = query_sql(&q, None, n, 10);
            let mut stmt = conn.prepare_cached(&sql).expect("prepare");
            let rows = stmt
                .query_map(params_from_iter(values), read_row)
                .expect("query")
                .count();
            assert_eq!(rows, 0);
            assert_eq!(
                stmt.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "call {n} prepared the statement again"
            );
        }
    }

    /// Every query shape is an index range read, never a table scan or a sort.
    #[test]
    fn queries_use_the_slot_index() {
        let mut conn = Connection::open_in_memory().expect("open");
        migrate(&mut conn).expect("migrate");
        configure(&conn).expect("configure");
        let cursor = || {
            Some(QueryCursor {
                s: "m".into(),
                i: "x".into(),
            })
        };
        for slot in 0..INDEX_SLOTS {
            for descending in [false, true] {
                for (from, to, after) in [
                    (None, None, None),
                    (Some("a"), None, None),
                    (None, Some("z"), cursor()),
                    (Some("a"), Some("z"), cursor()),
                ] {
                    let mut q = Query::new(Kind::Deployment, slot, "p");
                    q.descending = descending;
                    q.sk_from = from.map(String::from);
                    q.sk_to = to.map(String::from);
                    let (sql, values) = query_sql(&q, after, 0, 10);
                    let plan = plan(&conn, &sql, values);
                    assert!(
                        plan.contains(&format!("USING INDEX records_i{slot}")),
                        "slot {slot}: {plan}"
                    );
                    assert!(!plan.contains("TEMP B-TREE"), "slot {slot} sorts: {plan}");
                }
            }
        }
        for after in [None, Some("x".to_string())] {
            let (sql, values) = scan_sql(Kind::Deployment, after, 0, 10);
            let plan = plan(&conn, &sql, values);
            assert!(plan.contains("USING INDEX"), "scan: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "scan sorts: {plan}");
        }
    }

    /// The writer's commits do not checkpoint (SQLite's automatic checkpoint made every
    /// write queued behind the commit crossing its threshold wait for two `fsync`s); the
    /// checkpoint thread does: what is written reaches the database file itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkpoints_run_beside_the_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wisp.db");
        let ds = SqliteDatastore::open(&path).expect("open");
        let autocheckpoint: i64 = ds
            .inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0))
            .expect("pragma");
        assert_eq!(
            autocheckpoint, 0,
            "the writer's commits must not checkpoint"
        );
        const RECORDS: usize = 2000;
        const BYTES: usize = 1000;
        let writes: Vec<_> = (0..RECORDS)
            .map(|i| {
                let ds = ds.clone();
                tokio::spawn(async move {
                    let record = Record {
                        id: format!("r{i:05}"),
                        project_id: "p".into(),
                        version: 0,
                        data: vec![(i % 251) as u8; BYTES],
                        indexes: Default::default(),
                        expires_at: None,
                    };
                    ds.create(Kind::Event, record).await
                })
            })
            .collect();
        for write in writes {
            write.await.expect("task").expect("create");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let size = std::fs::metadata(&path).expect("database file").len();
            if size >= (RECORDS * BYTES) as u64 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the writes never reached the database file ({size} bytes)"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[test]
    fn reopening_keeps_the_schema_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wisp.db");
        drop(SqliteDatastore::open(&path).expect("first open"));
        let ds = SqliteDatastore::open(&path).expect("second open");
        let conn = ds.inner.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let version: i64 = conn
            .query_row("SELECT version FROM wisp_schema WHERE id = 0", [], |row| {
                row.get(0)
            })
            .expect("version");
        assert_eq!(version, MIGRATIONS.len() as i64);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wisp.db");
        drop(SqliteDatastore::open(&path).expect("open"));
        let conn = Connection::open(&path).expect("raw open");
        conn.execute("UPDATE wisp_schema SET version = 999 WHERE id = 0", [])
            .expect("bump");
        drop(conn);
        let err = SqliteDatastore::open(&path).expect_err("newer schema");
        assert!(matches!(err, StoreError::Internal { .. }), "{err:?}");
    }

    /// SQLite's own error stays the source, its code reachable and its words in the
    /// chain the edge logs.
    #[test]
    fn a_sqlite_failure_keeps_the_sqlite_error_as_its_source() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wisp.db");
        std::fs::write(&path, vec![b'x'; 8192]).expect("write");
        let err = SqliteDatastore::open(&path).expect_err("not a database");
        let sqlite = std::error::Error::source(&err)
            .and_then(|e| e.downcast_ref::<rusqlite::Error>())
            .unwrap_or_else(|| panic!("no SQLite error below {err:?}"));
        assert_eq!(
            sqlite.sqlite_error_code(),
            Some(rusqlite::ErrorCode::NotADatabase)
        );
        let logged = wisp_store::error::chain(&err).to_string();
        assert!(logged.contains("file is not a database"), "{logged}");
    }
}
