//! Links to a repository's web pages, built from its remote as upstream's `pkg/git` does
//! (the console shows them; the API stores one in `ApplicationGitPath.url`).

/// A remote split into what the links need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitUrl {
    pub scheme: String,
    pub host: String,
    pub path: String,
}

const KNOWN_SCHEMES: [&str; 7] = ["ssh", "git", "git+ssh", "http", "https", "rsync", "file"];

/// Parses `scheme://[user@]host/path` for a known git transport, else the scp-like
/// `[user@]host:path` (scheme `ssh`).
pub fn parse_git_url(raw: &str) -> Result<GitUrl, String> {
    if let Some((scheme, rest)) = raw.split_once("://")
        && KNOWN_SCHEMES.contains(&scheme)
    {
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        return Ok(GitUrl {
            scheme: scheme.to_string(),
            host: host.to_string(),
            path: path.to_string(),
        });
    }
    parse_scp(raw).ok_or_else(|| format!("no git url found in {raw:?}"))
}

/// `^([a-zA-Z0-9_]+@)?([a-zA-Z0-9._-]+):(.*)$`
fn parse_scp(raw: &str) -> Option<GitUrl> {
    let (before, path) = raw.split_once(':')?;
    let host = match before.split_once('@') {
        Some((user, host)) => {
            if user.is_empty() || !user.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return None;
            }
            host
        }
        None => before,
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !host_ok || path.contains('\n') {
        return None;
    }
    Some(GitUrl {
        scheme: "ssh".into(),
        host: host.to_string(),
        path: path.to_string(),
    })
}

/// Upstream's `MakeDirURL`: the web page of directory `dir` on `branch`.
pub fn make_dir_url(repo_url: &str, dir: &str, branch: &str) -> Result<String, String> {
    if branch.is_empty() {
        return Err("no branch given".into());
    }
    let u = parse_git_url(repo_url)?;
    let scheme = if u.scheme == "ssh" {
        "https"
    } else {
        &u.scheme
    };
    let repo_path = u.path.trim_matches('/');
    let repo_path = repo_path.strip_suffix(".git").unwrap_or(repo_path);
    let sub_path = if u.host == "bitbucket.org" {
        "src"
    } else {
        "tree"
    };
    let dir = dir.trim_matches('/');
    Ok(format!(
        "{scheme}://{}/{repo_path}/{sub_path}/{branch}/{dir}",
        u.host
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_urls_match_upstream() {
        let cases = [
            (
                "git@github.com:org/repo.git",
                "https://github.com/org/repo/tree/abc/path/to",
            ),
            (
                "git@gitlab.com:org/repo.git",
                "https://gitlab.com/org/repo/tree/abc/path/to",
            ),
            (
                "git@bitbucket.org:org/repo.git",
                "https://bitbucket.org/org/repo/src/abc/path/to",
            ),
            (
                "git@foo.com:org/repo.git",
                "https://foo.com/org/repo/tree/abc/path/to",
            ),
            (
                "git@github.com:org/repo",
                "https://github.com/org/repo/tree/abc/path/to",
            ),
            (
                "git@github.com:org/repo/",
                "https://github.com/org/repo/tree/abc/path/to",
            ),
            (
                "http://github.com/org/repo",
                "http://github.com/org/repo/tree/abc/path/to",
            ),
            (
                "https://user@github.com/org/repo.git",
                "https://github.com/org/repo/tree/abc/path/to",
            ),
            (
                "ssh://git@github.com/org/repo.git",
                "https://github.com/org/repo/tree/abc/path/to",
            ),
        ];
        for (remote, want) in cases {
            assert_eq!(
                make_dir_url(remote, "/path/to/", "abc").as_deref(),
                Ok(want),
                "{remote}"
            );
        }
    }

    #[test]
    fn dir_url_errors() {
        assert!(make_dir_url("git@github.com:org/repo.git", "path", "").is_err());
        assert!(make_dir_url("not a url", "path", "main").is_err());
        assert!(make_dir_url("", "path", "main").is_err());
    }
}
