//! Files and directories only their owner can read: the database and the objects hold
//! key hashes, sealed secrets and logs. Directories are made 0700 and files 0600 when
//! Wisp creates them; what exists already is left as it is (it may be a directory the
//! operator chose, such as the working directory).

use std::fs;
use std::io;
use std::path::Path;

/// Creates `path` and its missing parents, owner-only.
pub(crate) fn create_dir_all(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(path)
}

/// Options that create a new file owner-only.
pub(crate) fn new_file() -> fs::OpenOptions {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Creates `path` empty and owner-only unless it exists (SQLite then opens it as a new
/// database, and gives its WAL and shared-memory files the same mode).
pub(crate) fn ensure_file(path: &Path) -> io::Result<()> {
    match new_file().open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("metadata").permissions().mode() & 0o777
    }

    #[test]
    fn new_directories_and_files_are_owner_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let nested = dir.path().join("a/b");
        create_dir_all(&nested).expect("create");
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        let file = nested.join("f");
        ensure_file(&file).expect("create");
        assert_eq!(mode(&file), 0o600);
        ensure_file(&file).expect("exists already");
    }
}
