//! `wisp console fetch`: upstream's built console from its release image into the data
//! directory (`console/<version>/`; src/cli/console_fetch.rs does the fetching).
//!
//! `wisp console upload DIR|--version VERSION`: puts a built PipeCD console (upstream's `web` build output,
//! `pipecd/.artifacts/web-static`) where the AWS deployment reads it: under a prefix
//! (`console/` by default, the `http` function's `WISP_WEB_PREFIX`) of the filestore the
//! config names, the S3 bucket, each file with the `Content-Type` (text as UTF-8) and
//! `Cache-Control` the browser must get. Hashed bundles already there with the same size are left
//! alone (their names change with their content); `index.html` goes last, so a browser
//! never gets a page naming a file that is not there yet. Files of earlier builds stay,
//! for browsers still running them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::json;
use wisp_store::filestore::validate_path;
use wisp_store::{Filestore, PutCondition};

use super::UPSTREAM_PIPECD_VERSION;
use super::console_fetch::{self, DEFAULT_REPOSITORY, FetchError, FetchLimits, ImageRef};
use super::console_layers::UnpackLimits;
use super::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum ConsoleCommand {
    /// Download upstream PipeCD's built web console from its release image
    /// (ghcr.io/pipe-cd/controlplane, anonymous pull; needs the internet) into the data
    /// directory, where `wisp serve` finds it.
    Fetch(FetchArgs),
    /// Upload a built console to the filestore, where the AWS deployment's `http`
    /// function serves it from.
    Upload(UploadArgs),
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The PipeCD release whose console to fetch (the image's tag) [default: the release
    /// Wisp is checked against, which `wisp --version` names]
    #[arg(long)]
    pub version: Option<String>,
    /// Fetch from this image instead (`REGISTRY/REPOSITORY[:TAG|@DIGEST]`), which holds the
    /// console under web/static/ as upstream's does; stored under --version, else its tag.
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,
    /// Put the console in this directory (replaced) instead of the data directory's
    /// console/VERSION.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Directory of the embedded stores: the console goes to console/VERSION in it.
    #[arg(long, env = "WISP_DATA_DIR", default_value = ".wisp")]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub limits: FetchLimitArgs,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The bounds of a fetch. Only the timeout is for users; the others exist so that tests
/// can reach them with small images.
#[derive(Debug, Clone, Args)]
pub struct FetchLimitArgs {
    /// Longest wait for the registry when fetching the console: to connect, for an
    /// answer, and between two pieces of a download.
    #[arg(long, default_value = "30s", value_parser = super::flags::parse_duration)]
    pub registry_timeout: Duration,
    /// Longest the whole fetch may take (a registry trickling bytes never trips the
    /// timeout above).
    #[arg(long, default_value = "30m", value_parser = super::flags::parse_duration)]
    pub fetch_deadline: Duration,
    #[arg(long, hide = true, default_value_t = 1 << 30)]
    pub max_layer_bytes: u64,
    #[arg(long, hide = true, default_value_t = 4 << 20)]
    pub max_manifest_bytes: u64,
    #[arg(long, hide = true, default_value_t = 4 << 30)]
    pub max_unpacked_bytes: u64,
    #[arg(long, hide = true, default_value_t = 20_000)]
    pub max_files: u64,
    #[arg(long, hide = true, default_value_t = 512 << 20)]
    pub max_console_bytes: u64,
    #[arg(long, hide = true, default_value_t = 1_000_000)]
    pub max_entries: u64,
}

impl FetchLimitArgs {
    fn limits(&self) -> FetchLimits {
        FetchLimits {
            unpack: UnpackLimits {
                max_files: self.max_files,
                max_console_bytes: self.max_console_bytes,
                max_unpacked_bytes: self.max_unpacked_bytes,
                max_entries: self.max_entries,
            },
            max_manifest_bytes: self.max_manifest_bytes,
            max_layer_bytes: self.max_layer_bytes,
            timeout: self.registry_timeout,
            deadline: self.fetch_deadline,
        }
    }
}

#[derive(Debug, Args)]
pub struct UploadArgs {
    /// The console's build output (holds index.html and assets/).
    #[arg(required_unless_present = "version", conflicts_with = "version")]
    pub dir: Option<PathBuf>,
    /// Upload the console of this PipeCD release from the data directory (fetched into
    /// it first when it is not there).
    #[arg(long)]
    pub version: Option<String>,
    #[command(flatten)]
    pub limits: FetchLimitArgs,
    /// The filestore prefix to upload under: the `http` function's WISP_WEB_PREFIX
    /// (the Terraform module's and SAM template's `web_prefix`).
    #[arg(long, default_value = "console/")]
    pub prefix: String,
    #[command(flatten)]
    pub stores: StoreArgs,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(cmd: ConsoleCommand) -> Result<(), CliError> {
    match cmd {
        ConsoleCommand::Fetch(args) => fetch(&args).await,
        ConsoleCommand::Upload(args) => upload(&args).await,
    }
}

/// Where `version`'s console lives in the data directory.
pub fn version_dir(data_dir: &Path, version: &str) -> Result<PathBuf, CliError> {
    let ok = version.len() <= 128
        && version.starts_with(|c: char| c.is_ascii_alphanumeric())
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        return Err(CliError::Usage(format!(
            "{version:?} is not a console version (e.g. {UPSTREAM_PIPECD_VERSION}): letters, \
             digits, `.`, `_` and `-`"
        )));
    }
    Ok(data_dir.join("console").join(version))
}

/// `version`'s console in the data directory, fetched from upstream's release image
/// first when it is not there.
pub async fn ensure_version(
    data_dir: &Path,
    version: &str,
    limits: &FetchLimitArgs,
) -> Result<PathBuf, CliError> {
    let dir = version_dir(data_dir, version)?;
    if dir.join(INDEX).is_file() {
        return Ok(dir);
    }
    let image = ImageRef::parse(&format!("{DEFAULT_REPOSITORY}:{version}")).map_err(fetch_error)?;
    eprintln!(
        "Fetching the PipeCD {version} console from {image} into {}",
        dir.display()
    );
    let fetched = console_fetch::fetch(&image, &dir, limits.limits())
        .await
        .map_err(fetch_error)?;
    eprintln!("Fetched {} file(s), {} bytes", fetched.files, fetched.bytes);
    Ok(dir)
}

fn fetch_error(err: FetchError) -> CliError {
    match err {
        FetchError::Usage(m) => CliError::Usage(m),
        other => CliError::Failure(anyhow::Error::new(other).context("cannot fetch the console")),
    }
}

async fn fetch(args: &FetchArgs) -> Result<(), CliError> {
    let (image, version) = match (&args.image, &args.version) {
        (Some(text), version) => {
            let image = ImageRef::parse(text).map_err(fetch_error)?;
            // --version names it; else the image's tag does.
            let version = match version {
                Some(v) => v.clone(),
                None => image.tag().map(str::to_string).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--image {text}: give --version to name this console"
                    ))
                })?,
            };
            (image, version)
        }
        (None, version) => {
            let version = version
                .clone()
                .unwrap_or_else(|| UPSTREAM_PIPECD_VERSION.to_string());
            let image =
                ImageRef::parse(&format!("{DEFAULT_REPOSITORY}:{version}")).map_err(fetch_error)?;
            (image, version)
        }
    };
    let dest = match &args.dir {
        Some(dir) => dir.clone(),
        None => version_dir(&args.data_dir, &version)?,
    };
    let fetched = console_fetch::fetch(&image, &dest, args.limits.limits())
        .await
        .map_err(fetch_error)?;
    if args.json {
        println!(
            "{}",
            json!({
                "version": version,
                "image": image.to_string(),
                "digest": fetched.digest,
                "dir": dest.display().to_string(),
                "layers": fetched.layers,
                "files": fetched.files,
                "bytes": fetched.bytes,
            })
        );
    } else {
        let serve = if args.dir.is_some() {
            format!("wisp serve --console {}", dest.display())
        } else if version == UPSTREAM_PIPECD_VERSION {
            "wisp serve".to_string()
        } else {
            format!("wisp serve --console {version}")
        };
        println!(
            "Fetched the console {version} from {image} ({} file(s), {} bytes) into {}. \
             Serve it: {serve}",
            fetched.files,
            fetched.bytes,
            dest.display()
        );
    }
    Ok(())
}

const INDEX: &str = "index.html";

async fn upload(args: &UploadArgs) -> Result<(), CliError> {
    let prefix = normalized_prefix(&args.prefix)?;
    let dir = match (&args.dir, &args.version) {
        (Some(dir), _) => dir.clone(),
        (None, Some(version)) => {
            ensure_version(&args.stores.data_dir, version, &args.limits).await?
        }
        (None, None) => {
            return Err(CliError::Usage(
                "give the console's DIR or --version".into(),
            ));
        }
    };
    let files = console_files(&dir)?;
    let opened = args.stores.open().await?;
    let store = opened.stores.filestore.clone();
    let existing = existing_sizes(&*store, &prefix).await?;

    let (mut uploaded, mut unchanged, mut bytes) = (0usize, 0usize, 0u64);
    // index.html last: it names the bundles, which must be in place before it is.
    for (relative, path) in files
        .iter()
        .filter(|(r, _)| r != INDEX)
        .chain(files.iter().filter(|(r, _)| r == INDEX))
    {
        let key = format!("{prefix}{relative}");
        let data = std::fs::read(path).map_err(|e| {
            CliError::Failure(anyhow::anyhow!("cannot read {}: {e}", path.display()))
        })?;
        let same_size = existing.get(&key) == Some(&(data.len() as u64));
        if relative != INDEX && same_size && is_hashed(relative) {
            unchanged += 1;
            continue;
        }
        bytes += data.len() as u64;
        // S3 answers presigned downloads with what the object was stored with.
        let meta = wisp_console::object_meta(Path::new(relative));
        store
            .put_with_meta(&key, data, PutCondition::Any, &meta)
            .await
            .map_err(|e| CliError::Failure(anyhow::anyhow!("cannot upload {key}: {e}")))?;
        uploaded += 1;
    }
    let place = opened.describe_filestore();
    if args.json {
        println!(
            "{}",
            json!({"prefix": prefix, "filestore": place, "uploaded": uploaded, "unchanged": unchanged, "bytes": bytes})
        );
    } else {
        println!(
            "Console uploaded to {place} under {prefix}: {uploaded} file(s), {bytes} bytes \
             ({unchanged} unchanged)"
        );
    }
    Ok(())
}

/// `console` or `console/` as `console/`; the empty prefix stays empty.
fn normalized_prefix(prefix: &str) -> Result<String, CliError> {
    let trimmed = prefix.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    validate_path(trimmed).map_err(|e| CliError::Usage(format!("--prefix {prefix:?}: {e}")))?;
    Ok(format!("{trimmed}/"))
}

/// Every file under `dir` as (path relative to it with `/` separators, full path), in
/// path order. The directory must be a console build: it must hold index.html.
fn console_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, CliError> {
    if !dir.join(INDEX).is_file() {
        return Err(CliError::Usage(format!(
            "{} has no {INDEX}: give the console's build output (after `yarn build` in \
             pipecd/web: pipecd/.artifacts/web-static), or --version {UPSTREAM_PIPECD_VERSION}",
            dir.display()
        )));
    }
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current).map_err(|e| {
            CliError::Failure(anyhow::anyhow!("cannot list {}: {e}", current.display()))
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| {
                CliError::Failure(anyhow::anyhow!("cannot list {}: {e}", current.display()))
            })?;
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(dir)
                .ok()
                .and_then(|r| r.to_str())
                .map(|r| r.replace(std::path::MAIN_SEPARATOR, "/"))
                .ok_or_else(|| {
                    CliError::Usage(format!("{}: not a UTF-8 file name", path.display()))
                })?;
            validate_path(&relative)
                .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
            out.push((relative, path));
        }
    }
    out.sort();
    Ok(out)
}

/// Sizes of the objects under `prefix` now, by path.
async fn existing_sizes(
    store: &dyn Filestore,
    prefix: &str,
) -> Result<std::collections::HashMap<String, u64>, CliError> {
    let mut sizes = std::collections::HashMap::new();
    let mut after: Option<String> = None;
    loop {
        let page = store
            .list(prefix, after.as_deref(), 1000)
            .await
            .map_err(|e| CliError::Failure(anyhow::anyhow!("cannot list {prefix}: {e}")))?;
        for object in &page.objects {
            sizes.insert(object.path.clone(), object.size);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(sizes),
        }
    }
}

/// `assets/index.3f2a9c1b7.js`-style names, whose content never changes.
fn is_hashed(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    name.split('.')
        .any(|part| part.len() >= 8 && part.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_normalised_and_checked() {
        assert_eq!(normalized_prefix("console").unwrap(), "console/");
        assert_eq!(normalized_prefix("console/").unwrap(), "console/");
        assert_eq!(normalized_prefix("a/b/").unwrap(), "a/b/");
        assert_eq!(normalized_prefix("").unwrap(), "");
        assert!(normalized_prefix("../up/").is_err());
        assert!(normalized_prefix("/abs/").is_err());
    }

    #[test]
    fn hashed_names() {
        assert!(is_hashed("assets/index.3f2a9c1b7.js"));
        assert!(is_hashed("assets/27.0123abcd9.chunk.js"));
        assert!(!is_hashed("index.html"));
        assert!(!is_hashed("favicon.ico"));
    }
}
