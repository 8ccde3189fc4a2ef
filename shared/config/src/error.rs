//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while loading configuration or the encryption key.
///
/// Messages name the source (file name or the name given to
/// [`Config::from_yaml_str`](crate::Config::from_yaml_str)) and never contain secret
/// values.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The YAML is malformed or does not match the schema (unknown field, wrong type, ...).
    /// `detail` already carries the location when one is known.
    #[error("{source_name}: {detail}")]
    Parse {
        source_name: String,
        detail: String,
        /// 1-based line of the offending token, when known.
        line: Option<usize>,
        /// 1-based column of the offending token, when known.
        column: Option<usize>,
    },

    /// `apiVersion` is missing or is not `pipecd.dev/v1beta1`.
    #[error("{source_name}: {}", describe_header("apiVersion", found.as_deref(), crate::API_VERSION))]
    ApiVersion {
        source_name: String,
        found: Option<String>,
    },

    /// `kind` is missing or is not `ControlPlane` (e.g. a piped configuration).
    #[error("{source_name}: {}", describe_header("kind", found.as_deref(), crate::KIND))]
    Kind {
        source_name: String,
        found: Option<String>,
    },

    /// The document parsed but its values are inconsistent (duplicate project ids, ...).
    /// Every problem found is listed.
    #[error("{source_name}: invalid configuration: {}", problems.join("; "))]
    Invalid {
        source_name: String,
        problems: Vec<String>,
    },

    /// The configuration asks for something Wisp does not (or not yet) provide,
    /// e.g. an upstream `MYSQL` datastore.
    #[error("{0}")]
    Unsupported(String),

    /// The encryption key is shorter than the 32 bytes AES-256 needs.
    #[error(
        "encryption key{} is {len} bytes long, at least {min} bytes are required \
         (generate one with `openssl rand 64 | base64`)",
        path.as_ref().map(|p| format!(" file {}", p.display())).unwrap_or_default(),
        min = crate::EncryptionKey::AES_KEY_LEN
    )]
    EncryptionKeyTooShort { path: Option<PathBuf>, len: usize },
}

impl ConfigError {
    /// Builds a [`ConfigError::Parse`] from a YAML error, moving the location next to the
    /// offending token so that messages read
    /// `file.yaml: spec: unknown field `x` at line 4 column 3, expected one of ...`.
    ///
    /// `input` is the text that was parsed, when there is one: the parser places an error
    /// at the end of a text without a final line break on a line after it, which is
    /// moved back to the end of the text's last line.
    pub(crate) fn from_yaml(
        source_name: &str,
        err: &serde_norway::Error,
        input: Option<&str>,
    ) -> Self {
        let mut text = redact_values(&err.to_string());
        let mut location = err.location().map(|l| (l.line(), l.column()));
        if let (Some((line, column)), Some(input)) = (location, input) {
            let within = within_text(input, line, column);
            if within != (line, column) {
                text = text.replace(
                    &format!("at line {line} column {column}"),
                    &format!(
                        "at line {} column {} (the end of the text)",
                        within.0, within.1
                    ),
                );
                location = Some(within);
            }
        }
        let detail = match location {
            Some((line, column)) => place_location(&text, line, column),
            None => text,
        };
        ConfigError::Parse {
            source_name: source_name.to_owned(),
            detail,
            line: location.map(|l| l.0),
            column: location.map(|l| l.1),
        }
    }
}

/// The parser's message without the values it quotes: a value in the wrong place may be
/// a secret (a password pasted under the wrong key), and config errors reach logs.
/// Field names, types and the expected forms stay.
fn redact_values(text: &str) -> String {
    // serde's `Unexpected` forms: `string "…"`, `integer `…``, `floating point `…``,
    // `boolean `…``, `character `…``, and `unknown variant `…``.
    const FORMS: [(&str, char, &str); 6] = [
        ("string \"", '"', "a string"),
        ("integer `", '`', "an integer"),
        ("floating point `", '`', "a number"),
        ("boolean `", '`', "a boolean"),
        ("character `", '`', "a character"),
        ("unknown variant `", '`', "an unknown variant"),
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for (opening, close, replacement) in FORMS {
            if let Some(after) = rest.strip_prefix(opening) {
                let mut escaped = false;
                for (i, c) in after.char_indices() {
                    if c == close && !escaped {
                        out.push_str(replacement);
                        rest = &after[i + c.len_utf8()..];
                        continue 'scan;
                    }
                    escaped = c == '\\' && !escaped;
                }
                // Unterminated: drop the rest rather than risk printing a value.
                out.push_str(replacement);
                return out;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

fn describe_header(field: &str, found: Option<&str>, expected: &str) -> String {
    match found {
        None => format!(
            "`{field}` is missing, expected `{field}: {expected}` (a PipeCD control-plane configuration)"
        ),
        Some(found) => format!(
            "unsupported {field} {found:?}, expected {expected:?} (a PipeCD control-plane configuration)"
        ),
    }
}

/// `(line, column)` if that line is in `input`, else the place just after its last
/// character. Lines break at LF, CRLF and a lone CR, as in YAML.
fn within_text(input: &str, line: usize, column: usize) -> (usize, usize) {
    let lines = input.matches('\n').count() + input.matches('\r').count()
        - input.matches("\r\n").count()
        + 1;
    if line <= lines {
        return (line, column);
    }
    let last = input.rsplit(['\n', '\r']).next().unwrap_or(input);
    (lines, last.chars().count() + 1)
}

fn place_location(text: &str, line: usize, column: usize) -> String {
    let at = format!("at line {line} column {column}");
    let suffix = format!(" {at}");
    let Some(message) = text.strip_suffix(&suffix) else {
        if text.contains(&at) {
            // The YAML scanner already placed it (possibly among other context).
            return text.to_owned();
        }
        return format!("{text} {at}");
    };
    match message.find(", expected") {
        Some(split) => format!("{} {at}{}", &message[..split], &message[split..]),
        None => format!("{message} {at}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{place_location, redact_values};
    use crate::{Config, ConfigError};

    /// The parser puts an error at the end of a text without a final line break on the
    /// line after it; a user is told the last line of what they wrote.
    #[test]
    fn an_error_at_the_end_is_placed_on_the_last_line() {
        for (text, line, column) in [
            ("{", 1, 2),
            ("a: [", 1, 5),
            ("spec:\n  x: {", 2, 7),
            ("spec:\r  x: {", 2, 7),
            ("spec:\r\n  x: {", 2, 7),
            ("spec:\n  x: {\n", 3, 1),
        ] {
            let err = Config::from_yaml_str(text, "f.yaml").unwrap_err();
            let ConfigError::Parse {
                line: Some(l),
                column: Some(c),
                detail,
                ..
            } = &err
            else {
                panic!("{text:?}: {err:?}");
            };
            assert_eq!((*l, *c), (line, column), "{text:?}: {err}");
            assert!(
                detail.contains(&format!("at line {line} column {column}")),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn location_goes_before_expected_list() {
        assert_eq!(
            place_location(
                "spec: unknown field `datastor`, expected one of `a`, `b` at line 4 column 3",
                4,
                3
            ),
            "spec: unknown field `datastor` at line 4 column 3, expected one of `a`, `b`"
        );
        assert_eq!(
            place_location("invalid type: string \"x\" at line 2 column 1", 2, 1),
            "invalid type: string \"x\" at line 2 column 1"
        );
        assert_eq!(place_location("oops", 1, 1), "oops at line 1 column 1");
    }

    #[test]
    fn quoted_values_are_dropped() {
        assert_eq!(
            redact_values(r#"spec.x: invalid type: string "hunter2", expected a boolean"#),
            "spec.x: invalid type: a string, expected a boolean"
        );
        assert_eq!(
            redact_values("invalid value: integer `42`, expected u8 at line 3"),
            "invalid value: an integer, expected u8 at line 3"
        );
        assert_eq!(
            redact_values("unknown variant `MYSQLX`, expected one of `LOCAL`, `MYSQL`"),
            "an unknown variant, expected one of `LOCAL`, `MYSQL`"
        );
        assert_eq!(
            redact_values(r#"invalid type: string "a \"quoted\" secret", expected x"#),
            "invalid type: a string, expected x"
        );
        assert_eq!(redact_values(r#"string "open"#), "a string");
        assert_eq!(redact_values("unknown field `foo`"), "unknown field `foo`");
    }
}
