//! Unpacking the console out of an image's layers (untrusted input): only `web/static/**`
//! is kept, layer over layer, with the OCI whiteouts (`.wh.NAME`, `.wh..wh..opq`)
//! honoured. Every write lands inside one directory this code made and holds no link:
//! files are written as regular files, a link inside the console becomes a copy of its
//! target, and anything that leaves the tree (`../`, an absolute path, a link out of
//! `web/static`), a device file, or too many files or bytes is refused with the entry's
//! name. The caller unpacks into a temporary directory and renames it into place only
//! when every layer went through.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{Read, Write as _};
use std::path::{Component, Path, PathBuf};

/// Where the console lives in upstream's controlplane image (`cmd/controlplane/Dockerfile`).
const PREFIX: [&str; 2] = ["web", "static"];
const WHITEOUT: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";

/// What one fetch may unpack.
#[derive(Debug, Clone, Copy)]
pub struct UnpackLimits {
    /// Files written into the console, all layers together.
    pub max_files: u64,
    /// Bytes of the files written into the console, all layers together.
    pub max_console_bytes: u64,
    /// Bytes of one layer's tar stream once decompressed (a gzip bomb stops here).
    pub max_unpacked_bytes: u64,
    /// Entries (any path) in one layer.
    pub max_entries: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("layer {layer}: entry {entry:?} {what}")]
    Hostile {
        layer: String,
        entry: String,
        what: String,
    },
    #[error("layer {layer}: {what}")]
    Bounds { layer: String, what: String },
    #[error("layer {layer}: not a readable tar stream")]
    Tar {
        layer: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The console being assembled in `root` (the contents of `web/static`).
#[derive(Debug)]
pub struct Unpacker {
    root: PathBuf,
    limits: UnpackLimits,
    files: u64,
    bytes: u64,
}

impl Unpacker {
    pub fn new(root: PathBuf, limits: UnpackLimits) -> Self {
        Unpacker {
            root,
            limits,
            files: 0,
            bytes: 0,
        }
    }

    /// Files and bytes written so far.
    pub fn written(&self) -> (u64, u64) {
        (self.files, self.bytes)
    }

    /// Applies one layer (an uncompressed tar stream) over the ones before it.
    pub fn apply(&mut self, tar: impl Read, layer: &str) -> Result<(), LayerError> {
        let bounded = Bounded {
            inner: tar,
            left: self.limits.max_unpacked_bytes,
            exceeded: false,
        };
        let mut archive = tar::Archive::new(bounded);
        let mut written_here: HashSet<Vec<OsString>> = HashSet::new();
        let tar_error = |source: std::io::Error| LayerError::Tar {
            layer: layer.to_string(),
            source,
        };
        let entries = archive.entries().map_err(tar_error)?;
        let mut count = 0u64;
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(source) => return Err(self.stream_error(layer, source)),
            };
            count += 1;
            if count > self.limits.max_entries {
                return Err(LayerError::Bounds {
                    layer: layer.to_string(),
                    what: format!("more than {} entries", self.limits.max_entries),
                });
            }
            self.entry(entry, layer, &mut written_here)?;
        }
        Ok(())
    }

    /// A read failure: the unpacked-size bound when that is what stopped it.
    fn stream_error(&self, layer: &str, source: std::io::Error) -> LayerError {
        if source.kind() == std::io::ErrorKind::FileTooLarge {
            LayerError::Bounds {
                layer: layer.to_string(),
                what: format!(
                    "more than {} bytes once decompressed",
                    self.limits.max_unpacked_bytes
                ),
            }
        } else {
            LayerError::Tar {
                layer: layer.to_string(),
                source,
            }
        }
    }

    fn entry<R: Read>(
        &mut self,
        mut entry: tar::Entry<'_, R>,
        layer: &str,
        written_here: &mut HashSet<Vec<OsString>>,
    ) -> Result<(), LayerError> {
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let hostile = |what: String| LayerError::Hostile {
            layer: layer.to_string(),
            entry: raw.clone(),
            what,
        };
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader | tar::EntryType::GNULongName
        ) {
            return Ok(());
        }
        let path = entry
            .path()
            .map_err(|source| LayerError::Tar {
                layer: layer.to_string(),
                source,
            })?
            .into_owned();
        let comps = components(&path).map_err(&hostile)?;
        let Some(name) = comps.last().cloned() else {
            return Ok(()); // `./`: the layer's root.
        };
        let dir = &comps[..comps.len() - 1];
        let name_str = name.to_string_lossy();
        if name_str == OPAQUE {
            // The directory's contents from the layers below are hidden.
            match relation(dir) {
                Relation::Inside(rel) => self.clear(&rel, written_here)?,
                Relation::Above => self.clear(&[], written_here)?,
                Relation::Elsewhere => {}
            }
            return Ok(());
        }
        if let Some(hidden) = name_str.strip_prefix(WHITEOUT) {
            if hidden.is_empty() || hidden == "." || hidden == ".." {
                return Err(hostile("is a whiteout of no name".into()));
            }
            let mut target = dir.to_vec();
            target.push(OsString::from(hidden));
            match relation(&target) {
                Relation::Inside(rel) if rel.is_empty() => self.clear(&[], written_here)?,
                Relation::Inside(rel) => remove(&self.root.join(join(&rel)))?,
                Relation::Above => self.clear(&[], written_here)?,
                Relation::Elsewhere => {}
            }
            return Ok(());
        }
        let rel = match relation(&comps) {
            Relation::Elsewhere => return Ok(()),
            Relation::Above if kind.is_dir() => return Ok(()),
            Relation::Inside(rel) if kind.is_dir() => {
                self.ensure_dir(&rel)?;
                return Ok(());
            }
            Relation::Above => {
                return Err(hostile(format!(
                    "replaces a directory on the way to web/static with a {}",
                    describe(kind)
                )));
            }
            Relation::Inside(rel) if rel.is_empty() => {
                return Err(hostile(format!(
                    "makes web/static a {}, not a directory",
                    describe(kind)
                )));
            }
            Relation::Inside(rel) => rel,
        };
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().map_err(|source| LayerError::Tar {
                    layer: layer.to_string(),
                    source,
                })?;
                self.count(layer, size)?;
                let dest = self.prepare_file(&rel)?;
                let mut file =
                    std::fs::File::create(&dest).map_err(|source| LayerError::Write {
                        path: dest.clone(),
                        source,
                    })?;
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = entry
                        .read(&mut buf)
                        .map_err(|source| self.stream_error(layer, source))?;
                    if n == 0 {
                        break;
                    }
                    file.write_all(&buf[..n])
                        .map_err(|source| LayerError::Write {
                            path: dest.clone(),
                            source,
                        })?;
                }
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(|source| LayerError::Tar {
                        layer: layer.to_string(),
                        source,
                    })?
                    .ok_or_else(|| hostile("is a link without a target".into()))?
                    .into_owned();
                let what = if kind == tar::EntryType::Symlink {
                    "symbolic link"
                } else {
                    "hard link"
                };
                // A symbolic link is relative to its directory; a hard link names a path
                // of the image.
                let resolved = if kind == tar::EntryType::Symlink {
                    resolve_symlink(dir, &link)
                } else {
                    components(&link).ok()
                };
                let source = match resolved.as_deref().map(relation) {
                    Some(Relation::Inside(source)) if !source.is_empty() => source,
                    _ => {
                        return Err(hostile(format!(
                            "is a {what} to {} outside web/static",
                            link.display()
                        )));
                    }
                };
                let from = self.root.join(join(&source));
                let size = match std::fs::symlink_metadata(&from) {
                    Ok(m) if m.is_file() => m.len(),
                    _ => {
                        return Err(hostile(format!(
                            "is a {what} to {}, which is not a file of the console",
                            link.display()
                        )));
                    }
                };
                self.count(layer, size)?;
                let dest = self.prepare_file(&rel)?;
                // A copy: the console holds no link to follow later.
                std::fs::copy(&from, &dest).map_err(|source| LayerError::Write {
                    path: dest.clone(),
                    source,
                })?;
            }
            other => {
                return Err(hostile(format!(
                    "is a {} (a console holds files and directories only)",
                    describe(other)
                )));
            }
        }
        written_here.insert(rel);
        Ok(())
    }

    fn count(&mut self, layer: &str, size: u64) -> Result<(), LayerError> {
        self.files += 1;
        self.bytes = self.bytes.saturating_add(size);
        if self.files > self.limits.max_files {
            return Err(LayerError::Bounds {
                layer: layer.to_string(),
                what: format!("more than {} files in web/static", self.limits.max_files),
            });
        }
        if self.bytes > self.limits.max_console_bytes {
            return Err(LayerError::Bounds {
                layer: layer.to_string(),
                what: format!(
                    "more than {} bytes of files in web/static",
                    self.limits.max_console_bytes
                ),
            });
        }
        Ok(())
    }

    /// Makes `rel` a directory, replacing a file on the way (a layer may do that).
    fn ensure_dir(&self, rel: &[OsString]) -> Result<(), LayerError> {
        let mut path = self.root.clone();
        for part in rel {
            path.push(part);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => continue,
                Ok(_) => remove(&path)?,
                Err(_) => {}
            }
            std::fs::create_dir(&path).map_err(|source| LayerError::Write {
                path: path.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// The path to write `rel` to: its directory made, a directory there removed.
    fn prepare_file(&self, rel: &[OsString]) -> Result<PathBuf, LayerError> {
        self.ensure_dir(&rel[..rel.len() - 1])?;
        let dest = self.root.join(join(rel));
        if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.is_dir()) {
            remove(&dest)?;
        }
        Ok(dest)
    }

    /// Removes what the layers below put in `rel` (the console's root when empty),
    /// keeping what this layer wrote.
    fn clear(
        &mut self,
        rel: &[OsString],
        written_here: &HashSet<Vec<OsString>>,
    ) -> Result<(), LayerError> {
        let dir = self.root.join(join(rel));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let mut child = rel.to_vec();
            child.push(entry.file_name());
            if written_here.iter().any(|w| w.starts_with(&child)) {
                continue;
            }
            remove(&entry.path())?;
        }
        Ok(())
    }
}

fn remove(path: &Path) -> Result<(), LayerError> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => return Ok(()),
    };
    result.map_err(|source| LayerError::Write {
        path: path.to_path_buf(),
        source,
    })
}

enum Relation {
    /// Under `web/static`: the path below it (empty for `web/static` itself).
    Inside(Vec<OsString>),
    /// `web`, or the image's root: removing it removes the console.
    Above,
    Elsewhere,
}

fn relation(comps: &[OsString]) -> Relation {
    let is_prefix = |n: usize| comps.iter().take(n).zip(PREFIX).all(|(c, p)| c == p);
    if comps.len() >= PREFIX.len() && is_prefix(PREFIX.len()) {
        Relation::Inside(comps[PREFIX.len()..].to_vec())
    } else if is_prefix(comps.len()) {
        Relation::Above
    } else {
        Relation::Elsewhere
    }
}

/// The path's parts; an absolute path or a `..` is refused (a layer names paths below
/// the image's root, and nothing else).
fn components(path: &Path) -> Result<Vec<OsString>, String> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part.to_os_string()),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err("is an absolute path".into());
            }
            Component::ParentDir => return Err("climbs out with `..`".into()),
        }
    }
    Ok(out)
}

/// Where a symbolic link in `dir` to `target` points, as image path parts; `None` when
/// it is absolute or climbs above the image's root.
fn resolve_symlink(dir: &[OsString], target: &Path) -> Option<Vec<OsString>> {
    let mut out = dir.to_vec();
    for c in target.components() {
        match c {
            Component::Normal(part) => out.push(part.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn join(parts: &[OsString]) -> PathBuf {
    parts.iter().collect()
}

fn describe(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Regular | tar::EntryType::Continuous => "file",
        tar::EntryType::Directory => "directory",
        tar::EntryType::Symlink => "symbolic link",
        tar::EntryType::Link => "hard link",
        tar::EntryType::Char => "character device",
        tar::EntryType::Block => "block device",
        tar::EntryType::Fifo => "named pipe",
        _ => "special entry",
    }
}

/// A reader that fails once more than `left` bytes went through.
struct Bounded<R> {
    inner: R,
    left: u64,
    exceeded: bool,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.exceeded {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        let n = self.inner.read(buf)?;
        match self.left.checked_sub(n as u64) {
            Some(left) => self.left = left,
            None => {
                self.exceeded = true;
                return Err(std::io::ErrorKind::FileTooLarge.into());
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_placed_relative_to_web_static() {
        let parts = |s: &str| components(Path::new(s)).unwrap();
        assert!(matches!(relation(&parts("web/static/a.js")), Relation::Inside(r) if r.len() == 1));
        assert!(matches!(relation(&parts("./web/static")), Relation::Inside(r) if r.is_empty()));
        assert!(matches!(relation(&parts("web")), Relation::Above));
        assert!(matches!(relation(&parts("")), Relation::Above));
        assert!(matches!(relation(&parts("usr/bin")), Relation::Elsewhere));
        assert!(matches!(
            relation(&parts("web/staticx")),
            Relation::Elsewhere
        ));
        assert!(components(Path::new("/web/static/a")).is_err());
        assert!(components(Path::new("web/static/../../etc")).is_err());
    }

    #[test]
    fn symlinks_resolve_within_the_image() {
        let dir = components(Path::new("web/static/assets")).unwrap();
        let to = resolve_symlink(&dir, Path::new("../index.html")).unwrap();
        assert!(
            matches!(relation(&to), Relation::Inside(r) if r == [OsString::from("index.html")])
        );
        let out = resolve_symlink(&dir, Path::new("../../../etc/passwd")).unwrap();
        assert!(matches!(relation(&out), Relation::Elsewhere));
        assert!(resolve_symlink(&dir, Path::new("/etc/passwd")).is_none());
        assert!(resolve_symlink(&dir, Path::new("../../../../../x")).is_none());
    }
}
