//! `Filestore` in a local directory: every object is a row of one SQLite database,
//! `<root>/objects.db`, keyed by its path. The etag is the hex SHA-256 of the content.
//!
//! Objects used to be one file each. At 10,000 pipeds that was 100,000 small files made
//! in the fleet's first minute (their first live-state snapshots), each a new file, an
//! `fsync` and a rename on a thread of the blocking pool: a fifth of the server's CPU
//! and hundreds of threads (benches/README.md, "The embedded filestore in SQLite"). As
//! rows, puts go to the database's writer thread and are committed in groups (`db.rs`):
//! a burst of puts is one commit, and readers never see a torn object.
//!
//! Durability is the datastore's: an answered put survives a crash of the process; a
//! power cut may lose the puts committed since the last checkpoint (a quarter of a second),
//! never tear one. (Each file used to be `fsync`ed before its rename.)
//!
//! Conditional puts (`Absent`, `Matches`) are one statement each on the writer, so they
//! are atomic with respect to every other writer, in this process and in others on the
//! same directory (`wisp serve` twice, the admin CLI, `wisp import`): SQLite's write lock
//! orders them.
//!
//! A directory written by an earlier Wisp (one file per object) is imported when it is
//! opened: see [`LocalFilestore::open`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};
use wisp_store::collection::now_unix;
use wisp_store::error::{Result, StoreError};
/// The path rules are shared by every backend; re-exported here for existing callers.
pub use wisp_store::filestore::validate_path;
use wisp_store::filestore::{
    Filestore, ListPage, Object, ObjectAttrs, PutCondition, RESERVED_SEGMENT_PREFIX,
    validate_prefix,
};

use crate::db::Db;

/// The database's file name in the root. Objects are rows, never files, so an object may
/// have any name, this one included.
pub const DATABASE_FILE: &str = "objects.db";

/// Schema migrations of `objects.db`, applied in order. Never edit a released entry.
const MIGRATIONS: &[&str] = &[
    // 1: one row per object. `size` is kept so that a listing never reads the content.
    "CREATE TABLE objects (
        path       TEXT    NOT NULL PRIMARY KEY,
        size       INTEGER NOT NULL,
        etag       TEXT    NOT NULL,
        updated_at INTEGER NOT NULL,
        data       BLOB    NOT NULL
    );",
];

/// Content at least this large is hashed on the blocking pool, not on the caller's
/// runtime thread (a 4 MiB stage log takes milliseconds).
const HASH_INLINE_MAX: usize = 64 * 1024;

/// Each connection's page cache. Objects are mostly written, or read once (a live-state
/// snapshot to patch, a log to append to): SQLite's default 2 MiB per connection would
/// hold about 10 MiB of pages no read comes back for.
const PAGE_CACHE_KIB: u32 = 256;

/// Files an earlier Wisp left (objects as files) are imported in transactions of about
/// this many bytes.
const IMPORT_BATCH_BYTES: usize = 32 * 1024 * 1024;

/// A cheaply cloneable handle on one directory's objects.
#[derive(Clone)]
pub struct LocalFilestore {
    root: PathBuf,
    db: Db,
    imported: usize,
}

impl std::fmt::Debug for LocalFilestore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFilestore")
            .field("root", &self.root)
            .finish()
    }
}

impl LocalFilestore {
    /// Uses `root` (created if missing) as the store: its objects are in
    /// `<root>/objects.db`.
    ///
    /// Objects an earlier Wisp kept as files under `root` (`<root>/log/d/s/0.txt`) are
    /// moved into the database first, each keeping its time of last write: a file is
    /// removed once its row is committed, and a row already there (a move cut short) is
    /// kept. SQLite databases and their journals in `root` (a datastore sharing the
    /// directory) are left alone; the earlier Wisp's temporary and lock files are removed.
    /// Blocks while it runs: call at startup, off the async runtime.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        crate::private_fs::create_dir_all(&root).map_err(|e| {
            StoreError::unavailable_from(format!("creating filestore root {}", root.display()), e)
        })?;
        let db = Db::open(root.join(DATABASE_FILE), MIGRATIONS)?;
        db.limit_page_cache(PAGE_CACHE_KIB)?;
        let imported = import_files(&root, &db)?;
        Ok(LocalFilestore { root, db, imported })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How many objects [`Self::open`] moved from files into the database.
    pub fn imported_files(&self) -> usize {
        self.imported
    }
}

/// A SQLite error of the filestore's statements, as the datastore maps it, except that a
/// constraint error is the store failing, never `AlreadyExists`: a put's conditions are
/// checked by what it changed, not by a constraint.
fn map_err(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => StoreError::internal_from("sqlite", e),
        _ => crate::db::map_err(e),
    }
}

pub fn etag_of(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// `data`'s etag, computed off the runtime's threads when it is large.
async fn etag_off_thread(data: Vec<u8>) -> Result<(Vec<u8>, String)> {
    if data.len() < HASH_INLINE_MAX {
        let etag = etag_of(&data);
        return Ok((data, etag));
    }
    tokio::task::spawn_blocking(move || {
        let etag = etag_of(&data);
        (data, etag)
    })
    .await
    .map_err(|e| StoreError::internal_from("hashing an object", e))
}

fn unix_seconds(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The smallest string greater than every string that starts with `prefix` (`None`: no
/// such bound, for the empty prefix or one of only U+10FFFF). SQLite compares text as
/// UTF-8 bytes, which is code point order, so the last code point that can grow grows.
fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = last as u32 + 1;
        if (0xD800..=0xDFFF).contains(&next) {
            next = 0xE000;
        }
        if let Some(c) = char::from_u32(next) {
            chars.push(c);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[async_trait]
impl Filestore for LocalFilestore {
    async fn get(&self, path: &str) -> Result<Object> {
        validate_path(path)?;
        let path = path.to_string();
        self.db
            .run_read(move |conn| {
                conn.prepare_cached("SELECT data, etag FROM objects WHERE path = ?1")
                    .map_err(map_err)?
                    .query_row([&path], |row| {
                        Ok(Object {
                            data: row.get(0)?,
                            etag: row.get(1)?,
                        })
                    })
                    .optional()
                    .map_err(map_err)?
                    .ok_or_else(|| StoreError::NotFound(format!("object {path}")))
            })
            .await
    }

    async fn put(&self, path: &str, data: Vec<u8>, condition: PutCondition) -> Result<String> {
        validate_path(path)?;
        let path = path.to_string();
        let (data, etag) = etag_off_thread(data).await?;
        let size = i64::try_from(data.len())
            .map_err(|_| StoreError::InvalidArgument(format!("object {path}: too large")))?;
        self.db
            .write(move |conn| {
                let now = now_unix();
                let changed = match &condition {
                    PutCondition::Any => conn
                        .prepare_cached(
                            "INSERT INTO objects (path, size, etag, updated_at, data)
                             VALUES (?1, ?2, ?3, ?4, ?5)
                             ON CONFLICT (path) DO UPDATE SET size = excluded.size,
                               etag = excluded.etag, updated_at = excluded.updated_at,
                               data = excluded.data",
                        )
                        .and_then(|mut s| s.execute(params![path, size, etag, now, data])),
                    PutCondition::Absent => conn
                        .prepare_cached(
                            "INSERT INTO objects (path, size, etag, updated_at, data)
                             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (path) DO NOTHING",
                        )
                        .and_then(|mut s| s.execute(params![path, size, etag, now, data])),
                    PutCondition::Matches(expected) => {
                        conn.prepare_cached(
                            "UPDATE objects SET size = ?2, etag = ?3, updated_at = ?4,
                               data = ?5
                             WHERE path = ?1 AND etag = ?6",
                        )
                        .and_then(|mut s| s.execute(params![path, size, etag, now, data, expected]))
                    }
                }
                .map_err(map_err)?;
                if changed == 1 {
                    return Ok(etag);
                }
                Err(match condition {
                    PutCondition::Absent => StoreError::AlreadyExists(format!("object {path}")),
                    _ if exists(conn, &path)? => {
                        StoreError::Conflict(format!("object {path}: etag changed"))
                    }
                    _ => StoreError::NotFound(format!("object {path}")),
                })
            })
            .await
    }

    /// `limit == 0` means no limit.
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<ListPage> {
        validate_prefix(prefix)?;
        let prefix = prefix.to_string();
        let end = prefix_end(&prefix);
        let after = after.map(str::to_string);
        // One more than asked for, to tell whether there is another page.
        let fetch = if limit == 0 {
            -1
        } else {
            i64::try_from(limit).map_or(i64::MAX, |l| l.saturating_add(1))
        };
        self.db
            .run_read(move |conn| {
                let mut statement = conn
                    .prepare_cached(
                        "SELECT path, size, etag, updated_at FROM objects
                         WHERE path >= ?1 AND (?2 IS NULL OR path < ?2)
                           AND (?3 IS NULL OR path > ?3)
                         ORDER BY path LIMIT ?4",
                    )
                    .map_err(map_err)?;
                let mut objects = statement
                    .query_map(params![prefix, end, after, fetch], |row| {
                        Ok(ObjectAttrs {
                            path: row.get(0)?,
                            size: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                            etag: row.get(2)?,
                            updated_at: row.get(3)?,
                        })
                    })
                    .map_err(map_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(map_err)?;
                let next = if limit != 0 && objects.len() > limit {
                    objects.truncate(limit);
                    objects.last().map(|o| o.path.clone())
                } else {
                    None
                };
                Ok(ListPage { objects, next })
            })
            .await
    }

    async fn delete(&self, path: &str) -> Result<()> {
        validate_path(path)?;
        let path = path.to_string();
        self.db
            .write(move |conn| {
                conn.prepare_cached("DELETE FROM objects WHERE path = ?1")
                    .and_then(|mut s| s.execute([&path]))
                    .map(|_| ())
                    .map_err(map_err)
            })
            .await
    }
}

fn exists(conn: &rusqlite::Connection, path: &str) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM objects WHERE path = ?1")
        .map_err(map_err)?
        .query_row([path], |_| Ok(()))
        .optional()
        .map(|found| found.is_some())
        .map_err(map_err)
}

/// Whether a file in the root is a database (ours, or a datastore whose directory the
/// filestore shares) or one of its journals, never an object to move.
fn is_database_file(name: &str, full: &Path) -> bool {
    const SQLITE_HEADER: &[u8] = b"SQLite format 3\0";
    if name.starts_with(DATABASE_FILE)
        || JOURNAL_SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
    {
        return true;
    }
    let mut header = [0u8; 16];
    fs::File::open(full)
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut header))
        .is_ok_and(|()| header == SQLITE_HEADER)
}

/// SQLite's files beside a database.
const JOURNAL_SUFFIXES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// A file an earlier Wisp kept an object in.
struct LegacyFile {
    path: String,
    full: PathBuf,
}

/// Moves the objects an earlier Wisp kept as files under `root` into `db`; returns how
/// many. See [`LocalFilestore::open`].
fn import_files(root: &Path, db: &Db) -> Result<usize> {
    let failed = |what: String, e: io::Error| StoreError::unavailable_from(what, e);
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for (name, is_dir) in
        read_dir(root).map_err(|e| failed(format!("listing {}", root.display()), e))?
    {
        let full = root.join(&name);
        if name.starts_with(RESERVED_SEGMENT_PREFIX) {
            continue;
        }
        if is_dir {
            dirs.push((name, full));
        } else if !is_database_file(&name, &full) && validate_path(&name).is_ok() {
            files.push(LegacyFile { path: name, full });
        }
    }
    // Depth first; the files of each directory, then its directories.
    while let Some((rel, dir)) = dirs.pop() {
        for (name, is_dir) in
            read_dir(&dir).map_err(|e| failed(format!("listing {}", dir.display()), e))?
        {
            let path = format!("{rel}/{name}");
            let full = dir.join(&name);
            if is_dir {
                dirs.push((path, full));
            } else if validate_path(&path).is_ok() {
                files.push(LegacyFile { path, full });
            } else if name.starts_with(RESERVED_SEGMENT_PREFIX) {
                // An earlier Wisp's temporary file, never renamed into place.
                let _ = fs::remove_file(&full);
            }
        }
    }
    let mut imported = 0;
    let mut batch: Vec<(LegacyFile, Vec<u8>, i64)> = Vec::new();
    let mut batch_bytes = 0;
    for file in files {
        let data = match fs::read(&file.full) {
            Ok(data) => data,
            // Moved by another process opening the same directory meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(failed(format!("reading {}", file.full.display()), e)),
        };
        let modified = fs::metadata(&file.full)
            .and_then(|m| m.modified())
            .map_or_else(|_| now_unix(), unix_seconds);
        batch_bytes += data.len();
        batch.push((file, data, modified));
        if batch_bytes >= IMPORT_BATCH_BYTES {
            imported += import_batch(db, std::mem::take(&mut batch))?;
            batch_bytes = 0;
        }
    }
    imported += import_batch(db, batch)?;
    if imported > 0 || root.join(LEGACY_LOCK_DIR).exists() {
        prune_legacy_dirs(root);
    }
    Ok(imported)
}

/// The lock files' directory of an earlier Wisp's filestore.
const LEGACY_LOCK_DIR: &str = ".wisp-tmp.locks";

/// Inserts `batch` in one transaction (a row already there wins: it is this file's, moved
/// by a run cut short, or newer), then removes the files.
fn import_batch(db: &Db, batch: Vec<(LegacyFile, Vec<u8>, i64)>) -> Result<usize> {
    if batch.is_empty() {
        return Ok(0);
    }
    let count = batch.len();
    db.write_blocking(|conn| {
        let mut insert = conn
            .prepare_cached(
                "INSERT INTO objects (path, size, etag, updated_at, data)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (path) DO NOTHING",
            )
            .map_err(map_err)?;
        for (file, data, modified) in &batch {
            let size = i64::try_from(data.len()).unwrap_or(i64::MAX);
            insert
                .execute(params![file.path, size, etag_of(data), modified, data])
                .map_err(map_err)?;
        }
        Ok(())
    })?;
    for (file, _, _) in batch {
        let _ = fs::remove_file(&file.full);
    }
    Ok(count)
}

/// Removes the empty directories and the lock directory an earlier Wisp left under
/// `root` (what is not empty stays: it was not ours).
fn prune_legacy_dirs(root: &Path) {
    let _ = fs::remove_dir_all(root.join(LEGACY_LOCK_DIR));
    fn prune(dir: &Path) -> bool {
        let Ok(entries) = fs::read_dir(dir) else {
            return false;
        };
        let mut empty = true;
        for entry in entries.flatten() {
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if !(is_dir && prune(&path) && fs::remove_dir(&path).is_ok()) {
                empty = false;
            }
        }
        empty
    }
    if let Ok(entries) = fs::read_dir(root) {
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) && prune(&path) {
                let _ = fs::remove_dir(&path);
            }
        }
    }
}

/// The UTF-8 names in `dir` (others were never written by Wisp), each with whether it is
/// a directory; symbolic links and other special files are left out.
fn read_dir(dir: &Path) -> io::Result<Vec<(String, bool)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let kind = entry.file_type()?;
        if kind.is_dir() || kind.is_file() {
            out.push((name, kind.is_dir()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        for ok in ["a", "log/d/s/0.txt", "a/.hidden", "a..b/c"] {
            assert!(validate_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/../b",
            "..",
            "a\\b",
            "a//b",
            "a/",
            "./a",
            "a/.wisp-tmp.1",
        ] {
            assert!(
                matches!(validate_path(bad), Err(StoreError::InvalidArgument(_))),
                "{bad}"
            );
        }
        for ok in ["", "a", "a/", "a/b", "a/."] {
            assert!(validate_prefix(ok).is_ok(), "{ok}");
        }
        for bad in ["/", "../", "a/../", "a\\", "a//"] {
            assert!(
                matches!(validate_prefix(bad), Err(StoreError::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_prefix_ends_before_the_first_path_without_it() {
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("log/").as_deref(), Some("log0"));
        assert_eq!(prefix_end("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{10FFFF}"), None);
        for path in [
            "log/",
            "log/a",
            "log/\u{10FFFF}x",
            "log/\u{10FFFF}\u{10FFFF}",
        ] {
            assert!(path < "log0", "{path}");
        }
    }

    /// Two handles on one directory (as two processes would have) increment one counter
    /// with read-modify-write conditional puts: none is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn conditional_puts_are_atomic_across_handles() {
        const EACH: usize = 100;
        let dir = tempfile::tempdir().expect("tempdir");
        let handles = [
            LocalFilestore::open(dir.path()).expect("open"),
            LocalFilestore::open(dir.path()).expect("open"),
        ];
        let mut tasks = Vec::new();
        for i in 0..4 {
            let fs = handles[i % 2].clone();
            tasks.push(tokio::spawn(async move {
                let mut done = 0;
                while done < EACH {
                    let (n, condition) = match fs.get("c/counter").await {
                        Ok(o) => (
                            String::from_utf8(o.data)
                                .expect("utf8")
                                .parse::<usize>()
                                .expect("number"),
                            PutCondition::Matches(o.etag),
                        ),
                        Err(StoreError::NotFound(_)) => (0, PutCondition::Absent),
                        Err(e) => panic!("get: {e}"),
                    };
                    match fs
                        .put("c/counter", (n + 1).to_string().into_bytes(), condition)
                        .await
                    {
                        Ok(_) => done += 1,
                        Err(StoreError::Conflict(_) | StoreError::AlreadyExists(_)) => {}
                        Err(e) => panic!("put: {e}"),
                    }
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let total = handles[0].get("c/counter").await.expect("counter").data;
        assert_eq!(
            String::from_utf8(total).expect("utf8"),
            (4 * EACH).to_string()
        );
        let all = handles[1].list("", None, 0).await.expect("list");
        assert_eq!(all.objects.len(), 1);
    }

    /// An object and another under its path (`a/b`, `a/b/c`) can both be kept, as in S3:
    /// any object can move between backends.
    #[tokio::test]
    async fn an_object_may_be_a_prefix_of_another() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = LocalFilestore::open(dir.path()).expect("open");
        fs.put("a/b", b"x".to_vec(), PutCondition::Any)
            .await
            .expect("put");
        fs.put("a/b/c", b"y".to_vec(), PutCondition::Any)
            .await
            .expect("put");
        assert_eq!(fs.get("a/b").await.expect("a/b").data, b"x");
        assert_eq!(fs.get("a/b/c").await.expect("a/b/c").data, b"y");
        let listed: Vec<_> = fs
            .list("a/", None, 0)
            .await
            .expect("list")
            .objects
            .into_iter()
            .map(|o| o.path)
            .collect();
        assert_eq!(listed, ["a/b", "a/b/c"]);
    }

    /// A directory an earlier Wisp wrote (one file per object, its temporary and lock
    /// files) is moved into the database when opened: every object is there with its
    /// content, etag and time, the files and their directories are gone, what was never
    /// an object stays, and opening again (or a second handle) changes nothing.
    #[tokio::test]
    async fn an_earlier_wisps_files_are_moved_into_the_database() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let objects = [
            ("log/d1/s1/0.txt", b"first log".to_vec()),
            ("log/d1/s2/0.txt", b"second".to_vec()),
            ("application-live-state/app-1.json", b"{}".to_vec()),
            (
                "insights/p/applications/applications.json",
                vec![7u8; 300_000],
            ),
            ("revocations.json", b"[]".to_vec()),
        ];
        for (path, data) in &objects {
            let full = root.join(path);
            fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            fs::write(&full, data).expect("write");
        }
        let old = SystemTime::now() - std::time::Duration::from_secs(86_400);
        fs::File::options()
            .write(true)
            .open(root.join(objects[0].0))
            .expect("open")
            .set_modified(old)
            .expect("mtime");
        fs::create_dir_all(root.join(".wisp-tmp.locks")).expect("mkdir");
        fs::write(root.join(".wisp-tmp.locks/3"), b"").expect("lock file");
        fs::write(root.join("log/d1/s1/.wisp-tmp.77.1"), b"torn").expect("tmp file");
        // A datastore sharing the directory: never an object.
        let datastore = b"SQLite format 3\0 and the rest".to_vec();
        fs::write(root.join("wisp.db"), &datastore).expect("a database");
        fs::write(root.join("wisp.db-wal"), b"wal").expect("its journal");
        fs::create_dir_all(root.join("empty/dir")).expect("mkdir");

        let store = LocalFilestore::open(root).expect("open");
        assert_eq!(store.imported_files(), objects.len());
        for (path, data) in &objects {
            let object = store.get(path).await.expect(path);
            assert_eq!(&object.data, data, "{path}");
            assert_eq!(object.etag, etag_of(data), "{path}");
            assert!(!root.join(path).exists(), "{path} is still a file");
        }
        let listed = store.list("", None, 0).await.expect("list").objects;
        assert_eq!(listed.len(), objects.len());
        let first = listed
            .iter()
            .find(|o| o.path == objects[0].0)
            .expect("first");
        assert_eq!(first.updated_at, unix_seconds(old));
        assert_eq!(first.size, objects[0].1.len() as u64);
        for gone in ["log", ".wisp-tmp.locks", "empty", "application-live-state"] {
            assert!(!root.join(gone).exists(), "{gone} is left");
        }
        assert_eq!(fs::read(root.join("wisp.db")).expect("database"), datastore);
        assert_eq!(fs::read(root.join("wisp.db-wal")).expect("journal"), b"wal");

        // A newer row is kept over a file that comes back (a move cut short).
        store
            .put(objects[1].0, b"newer".to_vec(), PutCondition::Any)
            .await
            .expect("put");
        let full = root.join(objects[1].0);
        fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        fs::write(&full, b"second").expect("write");
        let again = LocalFilestore::open(root).expect("reopen");
        assert_eq!(again.imported_files(), 1);
        assert_eq!(again.get(objects[1].0).await.expect("get").data, b"newer");
        assert!(!full.exists());
    }
}
