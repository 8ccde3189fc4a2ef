//! Where upstream's MySQL datastore is: its `datastore.config` (`url`, `database`,
//! `usernameFile`, `passwordFile`) in the Go driver's DSN form, as upstream builds it:
//! `user:password@tcp(host:3306)` plus the database, or the address alone with the
//! credentials in files. A `mysql://user:password@host:3306/db` URL is accepted too.

use std::path::Path;

use mysql_async::{Opts, OptsBuilder, SslOpts};
use wisp_config::MySqlConfig;

use crate::ImportError;

/// The connection options `config` describes. Errors name the part that is wrong and
/// never repeat a password.
pub fn options(config: &MySqlConfig) -> Result<Opts, ImportError> {
    let bad = |why: &str| ImportError::Config(format!("datastore.config.url: {why}"));
    let url = config.url.trim();
    if url.is_empty() {
        return Err(bad("empty"));
    }
    if url.starts_with("mysql://") {
        let mut builder = OptsBuilder::from_opts(
            Opts::from_url(url).map_err(|_| bad("not a valid mysql:// URL"))?,
        );
        if let Some(db) = config.database.as_deref().filter(|d| !d.is_empty()) {
            builder = builder.db_name(Some(db));
        }
        return Ok(builder.into());
    }

    let (credentials, rest) = match url.rsplit_once('@') {
        Some((credentials, rest)) => (Some(credentials), rest),
        None => (None, url),
    };
    let (address, path) = match rest.split_once('/') {
        Some((address, path)) => (address, Some(path)),
        None => (rest, None),
    };
    let (database_in_url, params) = match path {
        Some(path) => match path.split_once('?') {
            Some((db, params)) => (db, params),
            None => (path, ""),
        },
        None => ("", ""),
    };
    let database = config
        .database
        .as_deref()
        .filter(|d| !d.is_empty())
        .unwrap_or(database_in_url);
    if database.is_empty() {
        return Err(ImportError::Config(
            "datastore.config: no database (set `database`, or end the url with /<database>)"
                .into(),
        ));
    }

    let mut builder = OptsBuilder::default().db_name(Some(database));
    builder = match (
        address
            .strip_prefix("tcp(")
            .or(address.strip_prefix("unix(")),
        address,
    ) {
        (Some(inner), _) => {
            let inner = inner
                .strip_suffix(')')
                .ok_or_else(|| bad("unclosed parenthesis"))?;
            if address.starts_with("unix(") {
                builder.socket(Some(inner))
            } else {
                host_port(builder, inner).ok_or_else(|| bad("the address is not host:port"))?
            }
        }
        // Upstream's form with credential files: the bare address.
        (None, "") => builder.ip_or_hostname("127.0.0.1").tcp_port(3306),
        (None, bare) => {
            host_port(builder, bare).ok_or_else(|| bad("the address is not host:port"))?
        }
    };

    match (&config.username_file, &config.password_file) {
        (Some(user_file), Some(password_file)) => {
            builder = builder
                .user(Some(read_secret(user_file, "usernameFile")?))
                .pass(Some(read_secret(password_file, "passwordFile")?));
        }
        _ => {
            if let Some(credentials) = credentials {
                let (user, password) = match credentials.split_once(':') {
                    Some((user, password)) => (user, Some(password)),
                    None => (credentials, None),
                };
                builder = builder.user(Some(user)).pass(password);
            }
        }
    }

    for param in params.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        if key == "tls" {
            builder = match value {
                "true" => builder.ssl_opts(Some(SslOpts::default())),
                // The Go driver's own word for "encrypt, but do not check the server".
                "skip-verify" => builder.ssl_opts(Some(
                    SslOpts::default().with_danger_accept_invalid_certs(true),
                )),
                "false" | "" => builder,
                _ => {
                    return Err(bad(
                        "tls must be true, skip-verify or false (a registered TLS config cannot be read from here)",
                    ));
                }
            };
        }
    }
    Ok(builder.into())
}

fn host_port(builder: OptsBuilder, address: &str) -> Option<OptsBuilder> {
    let (host, port) = match address.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().ok()?),
        None => (address, 3306),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some(builder.ip_or_hostname(host).tcp_port(port))
}

/// A credential file's content; a trailing newline (as editors and `echo` leave) is not
/// part of it.
fn read_secret(path: &Path, field: &str) -> Result<String, ImportError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ImportError::Config(format!(
            "datastore.config.{field}: cannot read {}: {e}",
            path.display()
        ))
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, database: Option<&str>) -> MySqlConfig {
        MySqlConfig {
            url: url.into(),
            database: database.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn upstream_forms_are_read() {
        let opts = options(&config(
            "root:s3cr:et@tcp(db.internal:3307)",
            Some("pipecd"),
        ))
        .unwrap();
        assert_eq!(opts.ip_or_hostname(), "db.internal");
        assert_eq!(opts.tcp_port(), 3307);
        assert_eq!(opts.user(), Some("root"));
        assert_eq!(opts.pass(), Some("s3cr:et"));
        assert_eq!(opts.db_name(), Some("pipecd"));

        let opts = options(&config("u:p@tcp(10.0.0.5)/quickstart?tls=true", None)).unwrap();
        assert_eq!(opts.tcp_port(), 3306);
        assert_eq!(opts.db_name(), Some("quickstart"));
        assert!(opts.ssl_opts().is_some());

        let opts = options(&config("mysql://a:b@127.0.0.1:3310/x", None)).unwrap();
        assert_eq!((opts.tcp_port(), opts.db_name()), (3310, Some("x")));
    }

    #[test]
    fn credentials_come_from_files_when_given() {
        let dir = std::env::temp_dir().join(format!("wisp-dsn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("user"), "pipecd\n").unwrap();
        std::fs::write(dir.join("password"), "hunter2\n").unwrap();
        let mut c = config("mysql.internal:3306", Some("pipecd"));
        c.username_file = Some(dir.join("user"));
        c.password_file = Some(dir.join("password"));
        let opts = options(&c).unwrap();
        assert_eq!(
            (opts.user(), opts.pass()),
            (Some("pipecd"), Some("hunter2"))
        );
        assert_eq!(opts.ip_or_hostname(), "mysql.internal");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn mistakes_are_named_without_the_password() {
        for (url, database) in [
            ("root:hunter2@tcp(db:3306", Some("x")),
            ("root:hunter2@tcp(db:3306)", None),
            ("root:hunter2@tcp(db:3306)/x?tls=custom", None),
            ("", Some("x")),
        ] {
            let err = options(&config(url, database)).unwrap_err().to_string();
            assert!(!err.contains("hunter2"), "{err}");
            assert!(err.contains("datastore.config"), "{err}");
        }
    }
}
