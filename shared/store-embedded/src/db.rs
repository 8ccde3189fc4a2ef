//! One SQLite database file as Wisp's embedded stores use it: WAL, one writer thread that
//! commits in groups, a few read connections, and a checkpoint thread. The datastore
//! ([`crate::sqlite`]) and the local filestore ([`crate::filestore`]) each open their own.
//!
//! The file is opened in WAL mode with a busy timeout, so the `wisp` admin CLI can write
//! while `wisp serve` runs: each process opens its own handle, and every write is a short
//! `BEGIN IMMEDIATE` transaction.
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

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior};
use wisp_store::error::{Result, StoreError};

/// How long a writer waits for another connection's write lock before giving up with
/// `Unavailable`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A cheaply cloneable handle on one database (a file, or in memory for tests).
#[derive(Clone)]
pub(crate) struct Db {
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

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl Db {
    /// Opens (creating it and its directory if needed) the database at `path` and brings
    /// its schema up to date with `migrations` (applied in order; the schema version is the
    /// number applied).
    /// Blocks briefly: call it at startup, not on a request path.
    pub(crate) fn open(path: impl AsRef<Path>, migrations: &[&str]) -> Result<Self> {
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
        let mut db = Self::init(conn, Some(path.to_path_buf()), migrations)?;
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
        db.inner
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
        match Arc::get_mut(&mut db.inner) {
            Some(inner) => {
                inner.readers = readers;
                inner._checkpoints = Some(stop);
            }
            None => {
                return Err(StoreError::internal("sqlite handle shared during open"));
            }
        }
        Ok(db)
    }

    /// A private in-memory database.
    pub(crate) fn open_in_memory(migrations: &[&str]) -> Result<Self> {
        let conn = Connection::open_in_memory().map_err(map_err)?;
        Self::init(conn, None, migrations)
    }

    fn init(mut conn: Connection, path: Option<PathBuf>, migrations: &[&str]) -> Result<Self> {
        migrate(&mut conn, migrations)?;
        configure(&conn)?;
        let conn = Arc::new(Mutex::new(conn));
        let (writes, queued) = std::sync::mpsc::channel();
        let writer_conn = conn.clone();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || write_groups(writer_conn, queued))
            .map_err(|e| StoreError::unavailable_from("starting the sqlite writer thread", e))?;
        Ok(Db {
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
    pub(crate) fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Runs `f` on the connection on the blocking pool.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T>
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
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T>
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
    pub(crate) async fn run_read<T, F>(&self, f: F) -> Result<T>
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
pub(crate) fn configure(conn: &Connection) -> Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(map_err)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

pub(crate) fn migrate(conn: &mut Connection, migrations: &[&str]) -> Result<()> {
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
    let latest = migrations.len();
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
    for migration in &migrations[applied..] {
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

pub(crate) fn map_err(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::unavailable_from("sqlite busy", e)
        }
        Some(ErrorCode::ConstraintViolation) => StoreError::AlreadyExists(e.to_string()),
        _ => StoreError::internal_from("sqlite", e),
    }
}

impl Db {
    /// Runs `f` in a transaction of its own on the write connection, on this thread: for
    /// work done while the store is opened, before anything else writes.
    pub(crate) fn write_blocking<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self
            .inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        conn.execute_batch("BEGIN IMMEDIATE").map_err(map_err)?;
        match f(&conn) {
            Ok(value) => {
                if let Err(e) = conn.execute_batch("COMMIT") {
                    let _ = conn.execute_batch("ROLLBACK");
                    return Err(map_err(e));
                }
                Ok(value)
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Caps each connection's page cache at `kib` (SQLite's default is 2,000 KiB), for a
    /// database whose pages are mostly written or read once.
    pub(crate) fn limit_page_cache(&self, kib: u32) -> Result<()> {
        let size = -i64::from(kib);
        let set = |conn: &Connection| {
            conn.pragma_update(None, "cache_size", size)
                .map_err(map_err)
        };
        set(&self
            .inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner))?;
        for reader in &self.inner.readers {
            set(&reader.lock().unwrap_or_else(PoisonError::into_inner))?;
        }
        Ok(())
    }

    /// The write connection, for tests that look at its settings.
    #[cfg(test)]
    pub(crate) fn write_connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
