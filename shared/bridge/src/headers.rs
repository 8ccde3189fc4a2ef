//! Which headers cross the bridge, and the few gRPC headers it reads.

use std::time::Duration;

use http::{HeaderMap, HeaderName, header};

/// Connection-level headers (RFC 9110 §7.6.1) and the ones the bridge sets itself: never
/// copied from one side to the other.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "http2-settings"
            | "host"
            | "content-length"
            | "content-type"
            | "content-encoding"
            | "accept-encoding"
            | "accept"
            | "grpc-encoding"
            | "grpc-accept-encoding"
    )
}

/// Headers the `Connection` header names as connection-specific.
fn named_by_connection(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

/// The client's headers that go on to the control plane: credentials (`authorization`,
/// `cookie`), `grpc-timeout`, `user-agent` and every custom metadata entry (`-bin`
/// included, already base64), unchanged. HTTP/2 pseudo-headers never appear in a
/// `HeaderMap`.
pub fn forwarded_request_headers(client: &HeaderMap) -> HeaderMap {
    copy_end_to_end(client)
}

/// The control plane's response headers that go back to the client as gRPC metadata
/// (including `grpc-status`/`grpc-message` of a trailers-only response).
pub fn forwarded_response_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut out = copy_end_to_end(upstream);
    // Leftovers of the HTTP/1.1 + CORS hop that mean nothing to a gRPC client.
    let noise: Vec<HeaderName> = out
        .keys()
        .filter(|name| {
            let name = name.as_str();
            name.starts_with("access-control-") || matches!(name, "vary" | "date" | "server")
        })
        .cloned()
        .collect();
    for name in noise {
        out.remove(name);
    }
    out
}

fn copy_end_to_end(from: &HeaderMap) -> HeaderMap {
    let listed = named_by_connection(from);
    let mut out = HeaderMap::with_capacity(from.len());
    for (name, value) in from {
        if is_hop_by_hop(name) || listed.iter().any(|l| l == name.as_str()) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The call's deadline from `grpc-timeout` (`<up to 8 digits><H|M|S|m|u|n>`); `None` if
/// absent or malformed.
pub fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Whether a comma-separated `grpc-accept-encoding` (or similar) list names `encoding`.
pub fn lists_encoding(headers: &HeaderMap, name: &str, encoding: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| e.trim().eq_ignore_ascii_case(encoding))
}

/// The call's `grpc-encoding`, lower-cased; `None` for absent or `identity`.
pub fn grpc_encoding(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("grpc-encoding")?.to_str().ok()?.trim();
    if value.is_empty() || value.eq_ignore_ascii_case("identity") {
        return None;
    }
    Some(value.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn credentials_and_metadata_pass_hop_by_hop_does_not() {
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("authorization", "PIPED-TOKEN p,i,k"),
            ("cookie", "token=abc"),
            ("grpc-timeout", "5S"),
            ("user-agent", "grpc-go/1.70"),
            ("x-custom", "1"),
            ("x-trace-bin", "AAEC"),
            ("te", "trailers"),
            ("connection", "keep-alive, x-conn-only"),
            ("x-conn-only", "secret-to-this-hop"),
            ("content-type", "application/grpc"),
            ("content-length", "10"),
            ("grpc-encoding", "gzip"),
            ("grpc-accept-encoding", "gzip"),
            ("host", "localhost"),
        ] {
            h.append(name, HeaderValue::from_static(value));
        }
        let out = forwarded_request_headers(&h);
        let mut names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            vec![
                "authorization",
                "cookie",
                "grpc-timeout",
                "user-agent",
                "x-custom",
                "x-trace-bin"
            ]
        );
        assert_eq!(out["authorization"], "PIPED-TOKEN p,i,k");
    }

    #[test]
    fn response_noise_is_dropped() {
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("grpc-status", "5"),
            ("grpc-message", "not%20found"),
            ("x-meta", "m"),
            ("access-control-expose-headers", "grpc-status"),
            ("vary", "origin"),
            ("date", "today"),
            ("server", "awselb/2.0"),
            ("content-type", "application/grpc-web+proto"),
        ] {
            h.append(name, HeaderValue::from_static(value));
        }
        let out = forwarded_response_headers(&h);
        let mut names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, vec!["grpc-message", "grpc-status", "x-meta"]);
    }

    #[test]
    fn timeouts() {
        let parse = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", HeaderValue::from_static(v));
            grpc_timeout(&h)
        };
        assert_eq!(parse("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse("99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parse("10n"), Some(Duration::from_nanos(10)));
        for bad in ["", "S", "5", "5s", "123456789S", "-5S", "+5S", "5 S", "ünS"] {
            assert_eq!(parse_dyn(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }

    fn parse_dyn(v: &str) -> Option<Duration> {
        let mut h = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(v) {
            h.insert("grpc-timeout", value);
        }
        grpc_timeout(&h)
    }

    #[test]
    fn encodings() {
        let mut h = HeaderMap::new();
        h.insert(
            "grpc-accept-encoding",
            HeaderValue::from_static("identity, deflate,GZIP"),
        );
        assert!(lists_encoding(&h, "grpc-accept-encoding", "gzip"));
        assert!(!lists_encoding(&h, "grpc-accept-encoding", "zstd"));
        assert_eq!(grpc_encoding(&h), None);
        h.insert("grpc-encoding", HeaderValue::from_static("identity"));
        assert_eq!(grpc_encoding(&h), None);
        h.insert("grpc-encoding", HeaderValue::from_static("Gzip"));
        assert_eq!(grpc_encoding(&h).as_deref(), Some("gzip"));
    }
}
