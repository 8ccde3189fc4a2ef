//! `wisp console upload DIR`: puts a built PipeCD console (upstream's `web` build output,
//! `pipecd/.artifacts/web-static`) where the AWS deployment reads it: under a prefix
//! (`console/` by default, the `http` function's `WISP_WEB_PREFIX`) of the filestore the
//! config names, the S3 bucket, each file with the `Content-Type` (text as UTF-8) and
//! `Cache-Control` the browser must get. Hashed bundles already there with the same size are left
//! alone (their names change with their content); `index.html` goes last, so a browser
//! never gets a page naming a file that is not there yet. Files of earlier builds stay,
//! for browsers still running them.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::json;
use wisp_store::filestore::validate_path;
use wisp_store::{Filestore, PutCondition};

use super::stores::StoreArgs;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum ConsoleCommand {
    /// Upload a built console to the filestore, where the AWS deployment's `http`
    /// function serves it from.
    Upload(UploadArgs),
}

#[derive(Debug, Args)]
pub struct UploadArgs {
    /// The console's build output (holds index.html and assets/).
    pub dir: PathBuf,
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
        ConsoleCommand::Upload(args) => upload(&args).await,
    }
}

const INDEX: &str = "index.html";

async fn upload(args: &UploadArgs) -> Result<(), CliError> {
    let prefix = normalized_prefix(&args.prefix)?;
    let files = console_files(&args.dir)?;
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
             pipecd/web: pipecd/.artifacts/web-static)",
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
