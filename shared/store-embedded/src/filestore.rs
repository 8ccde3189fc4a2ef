//! `Filestore` over a local directory: object `a/b/c.txt` is the file `<root>/a/b/c.txt`.
//!
//! Writes go to a temporary file in the object's directory and are renamed into place,
//! so readers see the old content or the new one, never a torn write. The etag is the
//! hex SHA-256 of the content.
//!
//! Puts and deletes hold a per-path lock from the condition check to the rename, which
//! makes conditional puts (`Absent`, `Matches`) atomic with respect to every other writer,
//! in this process and in others on the same directory (`wisp serve` twice, the admin
//! CLI, `wisp import`): paths hash onto a fixed set of shards, each a mutex in the process
//! and an exclusive `flock` on the shard's lock file (`<root>/.wisp-tmp.locks/<n>`, a
//! reserved name no object can take) across processes. Readers take no lock: the rename
//! makes every read see a whole object.

use std::collections::BinaryHeap;
use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, OwnedMutexGuard};
use wisp_store::error::{Result, StoreError};
/// The path rules are shared by every backend; re-exported here for existing callers.
pub use wisp_store::filestore::validate_path;
use wisp_store::filestore::{
    Filestore, ListPage, Object, ObjectAttrs, PutCondition, RESERVED_SEGMENT_PREFIX,
    validate_prefix,
};

/// Temporary files start with this; object paths may not have a segment that does.
const TMP_PREFIX: &str = RESERVED_SEGMENT_PREFIX;

/// Number of lock shards: paths hash onto them, so unrelated paths rarely wait.
const LOCK_SHARDS: usize = 64;

/// The directory of the shards' lock files, under the root (a reserved name: never an
/// object, never listed).
const LOCK_DIR: &str = ".wisp-tmp.locks";

/// How often a put retries when a concurrent delete pruned the directory it just made.
const MAX_DIR_ATTEMPTS: usize = 8;

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

#[derive(Clone)]
pub struct LocalFilestore {
    root: Arc<PathBuf>,
    locks: Arc<[Arc<Mutex<()>>]>,
}

impl std::fmt::Debug for LocalFilestore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFilestore")
            .field("root", &self.root)
            .finish()
    }
}

impl LocalFilestore {
    /// Uses `root` (created if missing) as the store. Blocks briefly: call at startup.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        crate::private_fs::create_dir_all(&root).map_err(|e| {
            StoreError::unavailable_from(format!("creating filestore root {}", root.display()), e)
        })?;
        let locks = (0..LOCK_SHARDS).map(|_| Arc::new(Mutex::new(()))).collect();
        Ok(LocalFilestore {
            root: Arc::new(root),
            locks,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The in-process half of `path`'s lock, and its shard (whose lock file [`Self::run`]
    /// locks across processes).
    async fn lock(&self, path: &str) -> (OwnedMutexGuard<()>, usize) {
        let mut hasher = DefaultHasher::new();
        path.hash(&mut hasher);
        let shard = (hasher.finish() % LOCK_SHARDS as u64) as usize;
        (self.locks[shard].clone().lock_owned().await, shard)
    }

    /// Runs `f` on the blocking pool. With `guard` (a shard's in-process lock), `f` runs
    /// holding the shard's lock file too; both are held until `f` has finished, even if the
    /// calling future is dropped meanwhile.
    async fn run<T, F>(&self, guard: Option<(OwnedMutexGuard<()>, usize)>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Path) -> Result<T> + Send + 'static,
    {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || {
            let result = match &guard {
                Some((_, shard)) => lock_file(&root, *shard).and_then(|file| {
                    let result = f(&root);
                    // Closing the file releases the lock; unlocking first says so.
                    let _ = file.unlock();
                    result
                }),
                None => f(&root),
            };
            drop(guard);
            result
        })
        .await
        .map_err(|e| StoreError::internal_from("filestore task failed", e))?
    }
}

/// Opens shard `shard`'s lock file (made if missing) and takes its exclusive lock,
/// waiting for another process that holds it.
fn lock_file(root: &Path, shard: usize) -> Result<fs::File> {
    let failed = |e: io::Error| StoreError::internal_from(format!("filestore lock {shard}"), e);
    let dir = root.join(LOCK_DIR);
    let mut options = fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let path = dir.join(shard.to_string());
    let file = match options.open(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            crate::private_fs::create_dir_all(&dir).map_err(failed)?;
            options.open(&path)
        }
        other => other,
    }
    .map_err(failed)?;
    file.lock().map_err(failed)?;
    Ok(file)
}

pub fn etag_of(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn io_err(path: &str, e: io::Error) -> StoreError {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::IsADirectory | io::ErrorKind::NotADirectory => {
            StoreError::NotFound(format!("object {path}"))
        }
        _ => StoreError::internal_from(format!("object {path}"), e),
    }
}

/// Content of the object at `full`, `None` if there is none.
fn read_object(path: &str, full: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(full) {
        Ok(data) => Ok(Some(data)),
        Err(e) => match io_err(path, e) {
            StoreError::NotFound(_) => Ok(None),
            other => Err(other),
        },
    }
}

/// Writes `data` to a temporary file beside `full` and renames it into place.
fn write_atomic(path: &str, full: &Path, data: &[u8]) -> Result<()> {
    let dir = full
        .parent()
        .ok_or_else(|| StoreError::InvalidArgument(format!("object path {path:?}: no parent")))?;
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        attempt += 1;
        crate::private_fs::create_dir_all(dir).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => {
                StoreError::InvalidArgument(format!("object path {path:?}: a parent is an object"))
            }
            _ => StoreError::internal_from(format!("object {path}: creating directory"), e),
        })?;
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!("{TMP_PREFIX}{}.{n}", std::process::id()));
        match crate::private_fs::new_file().open(&tmp) {
            Ok(file) => break (tmp, file),
            // A concurrent delete pruned the directory between the two calls: again.
            Err(e) if e.kind() == io::ErrorKind::NotFound && attempt < MAX_DIR_ATTEMPTS => {}
            Err(e) => {
                return Err(StoreError::internal_from(
                    format!("object {path}: temp file"),
                    e,
                ));
            }
        }
    };
    let written = file.write_all(data).and_then(|()| file.sync_all());
    drop(file);
    let renamed = written.and_then(|()| fs::rename(&tmp, full));
    if let Err(e) = renamed {
        let _ = fs::remove_file(&tmp);
        return Err(match e.kind() {
            io::ErrorKind::IsADirectory | io::ErrorKind::DirectoryNotEmpty => {
                StoreError::InvalidArgument(format!(
                    "object path {path:?}: is a prefix of other objects"
                ))
            }
            _ => StoreError::internal_from(format!("object {path}: writing"), e),
        });
    }
    Ok(())
}

/// Removes now-empty directories from `full`'s parent up to (not including) `root`.
fn prune_empty_dirs(root: &Path, full: &Path) {
    let mut dir = full.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

fn attrs(path: String, full: &Path) -> Result<Option<ObjectAttrs>> {
    let Some(data) = read_object(&path, full)? else {
        return Ok(None);
    };
    let updated_at = fs::metadata(full)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Ok(Some(ObjectAttrs {
        path,
        size: data.len() as u64,
        etag: etag_of(&data),
        updated_at,
    }))
}

struct Walk<'a> {
    root: &'a Path,
    prefix: &'a str,
    after: Option<&'a str>,
    limit: usize,
    out: Vec<ObjectAttrs>,
    more: bool,
}

/// Part of a directory, for a listing page.
struct Candidates {
    /// Keys in order (a directory's ending in `/`), each with whether it is a directory.
    keys: Vec<(String, bool)>,
    /// Whether entries past these were left out.
    truncated: bool,
}

impl Walk<'_> {
    /// Depth-first over `rel_dir` (`""` or ending in `/`). Entries are visited in order of
    /// `name` for files and `name/` for directories, which is exactly the order of the
    /// full paths, so objects come out sorted and the walk can stop after `limit`.
    ///
    /// Only the smallest entries a page can still use are held, not the whole directory
    /// (one of 100,000 deployments' logs would be megabytes of names per page); a
    /// directory is read again, past the last entry handled, in the rare case those ran
    /// out early (directories holding fewer objects than entries).
    fn dir(&mut self, rel_dir: &str) -> Result<()> {
        let mut handled: Option<String> = None;
        loop {
            // One more than the objects still wanted, so that `more` can be told.
            let budget = (self.limit - self.out.len()).saturating_add(1);
            let Some(Candidates { keys, truncated }) =
                self.smallest_entries(rel_dir, handled.as_deref(), budget)?
            else {
                return Ok(());
            };
            for (key, is_dir) in keys {
                if self.more {
                    return Ok(());
                }
                if is_dir {
                    self.dir(&key)?;
                } else {
                    if self.out.len() == self.limit {
                        self.more = true;
                        return Ok(());
                    }
                    let full = self.root.join(&key);
                    // Gone since read_dir: a concurrent delete.
                    if let Some(attrs) = attrs(key.clone(), &full)? {
                        self.out.push(attrs);
                    }
                }
                handled = Some(key);
            }
            if !truncated || self.more {
                return Ok(());
            }
        }
    }

    /// The `budget` smallest keys of `rel_dir` after `handled` that can hold or be a match
    /// (sorted), and whether any were left out; `None` if the directory is gone.
    fn smallest_entries(
        &self,
        rel_dir: &str,
        handled: Option<&str>,
        budget: usize,
    ) -> Result<Option<Candidates>> {
        let full_dir = self.root.join(rel_dir);
        let entries = match fs::read_dir(&full_dir) {
            Ok(entries) => entries,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(StoreError::internal_from(format!("listing {rel_dir:?}"), e)),
        };
        // A max-heap of the smallest keys seen: the largest is dropped past the budget.
        let mut keep: BinaryHeap<(String, bool)> = BinaryHeap::new();
        let mut truncated = false;
        for entry in entries {
            let entry =
                entry.map_err(|e| StoreError::internal_from(format!("listing {rel_dir:?}"), e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not UTF-8: not written by us
            };
            if name.starts_with(TMP_PREFIX) {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let key = if kind.is_dir() {
                format!("{rel_dir}{name}/")
            } else if kind.is_file() {
                format!("{rel_dir}{name}")
            } else {
                continue;
            };
            if handled.is_some_and(|h| key.as_str() <= h) || !self.wanted(&key, kind.is_dir()) {
                continue;
            }
            if keep.len() == budget {
                match keep.peek() {
                    Some((largest, _)) if key < *largest => {
                        keep.pop();
                    }
                    _ => {
                        truncated = true;
                        continue;
                    }
                }
                truncated = true;
            }
            keep.push((key, kind.is_dir()));
        }
        Ok(Some(Candidates {
            keys: keep.into_sorted_vec(),
            truncated,
        }))
    }

    /// Whether a file is a match, or a directory can hold one, given the prefix and the
    /// position to list after.
    fn wanted(&self, key: &str, is_dir: bool) -> bool {
        if is_dir {
            (key.starts_with(self.prefix) || self.prefix.starts_with(key))
                && !self.after.is_some_and(|a| key < a && !a.starts_with(key))
        } else {
            key.starts_with(self.prefix) && self.after.is_none_or(|a| key > a)
        }
    }
}

#[async_trait]
impl Filestore for LocalFilestore {
    async fn get(&self, path: &str) -> Result<Object> {
        validate_path(path)?;
        let path = path.to_string();
        self.run(None, move |root| {
            match read_object(&path, &root.join(&path))? {
                Some(data) => Ok(Object {
                    etag: etag_of(&data),
                    data,
                }),
                None => Err(StoreError::NotFound(format!("object {path}"))),
            }
        })
        .await
    }

    async fn put(&self, path: &str, data: Vec<u8>, condition: PutCondition) -> Result<String> {
        validate_path(path)?;
        let guard = self.lock(path).await;
        let path = path.to_string();
        self.run(Some(guard), move |root| {
            let full = root.join(&path);
            match condition {
                PutCondition::Any => {}
                PutCondition::Absent => {
                    if read_object(&path, &full)?.is_some() {
                        return Err(StoreError::AlreadyExists(format!("object {path}")));
                    }
                }
                PutCondition::Matches(expected) => match read_object(&path, &full)? {
                    None => return Err(StoreError::NotFound(format!("object {path}"))),
                    Some(current) if etag_of(&current) != expected => {
                        return Err(StoreError::Conflict(format!("object {path}: etag changed")));
                    }
                    Some(_) => {}
                },
            }
            write_atomic(&path, &full, &data)?;
            Ok(etag_of(&data))
        })
        .await
    }

    /// `limit == 0` means no limit.
    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<ListPage> {
        validate_prefix(prefix)?;
        let prefix = prefix.to_string();
        let after = after.map(str::to_string);
        self.run(None, move |root| {
            let mut walk = Walk {
                root,
                prefix: &prefix,
                after: after.as_deref(),
                limit: if limit == 0 { usize::MAX } else { limit },
                out: Vec::new(),
                more: false,
            };
            // Start at the deepest directory the prefix names.
            let start = match prefix.rfind('/') {
                Some(i) => &prefix[..=i],
                None => "",
            };
            walk.dir(start)?;
            let next = if walk.more {
                walk.out.last().map(|o| o.path.clone())
            } else {
                None
            };
            Ok(ListPage {
                objects: walk.out,
                next,
            })
        })
        .await
    }

    async fn delete(&self, path: &str) -> Result<()> {
        validate_path(path)?;
        let guard = self.lock(path).await;
        let path = path.to_string();
        self.run(Some(guard), move |root| {
            let full = root.join(&path);
            match fs::remove_file(&full) {
                Ok(()) => {
                    prune_empty_dirs(root, &full);
                    Ok(())
                }
                Err(e) => match io_err(&path, e) {
                    StoreError::NotFound(_) => Ok(()),
                    other => Err(other),
                },
            }
        })
        .await
    }
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

    /// Two handles on one directory (as two processes would have: their own in-process
    /// locks) increment one counter with read-modify-write conditional puts: none is lost.
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
                    let (n, condition) = match fs.get("counter").await {
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
                        .put("counter", (n + 1).to_string().into_bytes(), condition)
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
        let total = handles[0].get("counter").await.expect("counter").data;
        assert_eq!(
            String::from_utf8(total).expect("utf8"),
            (4 * EACH).to_string()
        );
        // The lock files are no objects.
        let all = handles[1].list("", None, 0).await.expect("list");
        assert_eq!(all.objects.len(), 1);
    }

    #[tokio::test]
    async fn a_delete_prunes_empty_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = LocalFilestore::open(dir.path()).expect("open");
        fs.put("a/b/c/1.txt", b"x".to_vec(), PutCondition::Any)
            .await
            .expect("put");
        fs.put("a/2.txt", b"y".to_vec(), PutCondition::Any)
            .await
            .expect("put");
        fs.delete("a/b/c/1.txt").await.expect("delete");
        assert!(!dir.path().join("a/b").exists());
        assert!(dir.path().join("a/2.txt").exists());
    }

    #[tokio::test]
    async fn file_and_directory_clash_is_invalid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = LocalFilestore::open(dir.path()).expect("open");
        fs.put("a/b", b"x".to_vec(), PutCondition::Any)
            .await
            .expect("put");
        let err = fs
            .put("a/b/c", b"y".to_vec(), PutCondition::Any)
            .await
            .expect_err("clash");
        assert!(matches!(err, StoreError::InvalidArgument(_)), "{err:?}");
        let err = fs
            .put("a", b"y".to_vec(), PutCondition::Any)
            .await
            .expect_err("clash");
        assert!(matches!(err, StoreError::InvalidArgument(_)), "{err:?}");
        assert!(matches!(fs.get("a").await, Err(StoreError::NotFound(_))));
        assert!(matches!(
            fs.get("a/b/c").await,
            Err(StoreError::NotFound(_))
        ));
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("a"))
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("b")]);
    }

    /// Pages hold only the entries they can use; directories without objects (left by
    /// another process, or by hand) make the walk read a directory again past them.
    #[tokio::test]
    async fn pages_come_out_in_order_past_empty_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = LocalFilestore::open(dir.path()).expect("open");
        let mut expected = Vec::new();
        for d in 0..30 {
            if d % 3 == 0 {
                std::fs::create_dir_all(dir.path().join(format!("log/{d:02}/empty")))
                    .expect("mkdir");
                continue;
            }
            for f in 0..(d % 4) {
                let path = format!("log/{d:02}/s/{f}.txt");
                fs.put(&path, b"x".to_vec(), PutCondition::Any)
                    .await
                    .expect("put");
                expected.push(path);
            }
        }
        fs.put("log0", b"x".to_vec(), PutCondition::Any)
            .await
            .expect("put");
        for limit in [1, 2, 3, 7, 100] {
            let mut listed = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let page = fs
                    .list("log/", after.as_deref(), limit)
                    .await
                    .expect("list");
                assert!(page.objects.len() <= limit);
                listed.extend(page.objects.into_iter().map(|o| o.path));
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            assert_eq!(listed, expected, "limit {limit}");
        }
        let all = fs.list("", None, 0).await.expect("list all");
        assert_eq!(all.objects.len(), expected.len() + 1);
        assert_eq!(all.next, None);
    }
}
