//! gRPC status codes, `grpc-message` encoding, and what a plain HTTP failure from the
//! load balancer means as a gRPC status.

use std::fmt;

use http::StatusCode;

/// The gRPC status codes (their numbers are part of the protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

impl Code {
    pub fn as_i32(self) -> i32 {
        self as i32
    }

    /// The code with number `n`; numbers outside the protocol are UNKNOWN, as gRPC
    /// treats them.
    pub fn from_i32(n: i32) -> Code {
        const ALL: [Code; 17] = [
            Code::Ok,
            Code::Cancelled,
            Code::Unknown,
            Code::InvalidArgument,
            Code::DeadlineExceeded,
            Code::NotFound,
            Code::AlreadyExists,
            Code::PermissionDenied,
            Code::ResourceExhausted,
            Code::FailedPrecondition,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unimplemented,
            Code::Internal,
            Code::Unavailable,
            Code::DataLoss,
            Code::Unauthenticated,
        ];
        usize::try_from(n)
            .ok()
            .and_then(|i| ALL.get(i).copied())
            .unwrap_or(Code::Unknown)
    }

    /// The canonical name, as logs and other gRPC tools print it.
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `grpc-message` is percent-encoded: every byte outside printable ASCII, and `%`.
pub fn encode_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for byte in message.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Decodes a `grpc-message` value (lossily: invalid escapes stay as they are).
pub fn decode_message(value: &[u8]) -> String {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'%'
            && let Some(hex) = value.get(i + 1..i + 3)
            && let Ok(hex) = std::str::from_utf8(hex)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(value[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The most an Application Load Balancer passes to a Lambda function (its request body).
pub const ALB_REQUEST_LIMIT: usize = 1_000_000;

/// What the client of the bridge gets when the control plane answered with plain HTTP
/// instead of gRPC-web (typically the load balancer itself: its HTML error pages).
///
/// `upstream` is the control plane's address, `path` the gRPC method path,
/// `request_bytes` what the bridge sent, and `detail` a short text from the body, if any.
pub fn from_http_status(
    status: StatusCode,
    upstream: &str,
    path: &str,
    request_bytes: usize,
    detail: Option<&str>,
) -> (Code, String) {
    let http = match status.canonical_reason() {
        Some(reason) => format!("HTTP {} {reason}", status.as_u16()),
        None => format!("HTTP {}", status.as_u16()),
    };
    let (code, what) = match status.as_u16() {
        401 => (
            Code::Unauthenticated,
            "the load balancer refused the credentials before they reached the control plane"
                .to_string(),
        ),
        403 => (
            Code::PermissionDenied,
            "the load balancer (or a firewall in front of it) refused the call; check its \
             listener rules and any WAF or IP allow-list"
                .to_string(),
        ),
        404 => (
            Code::Unimplemented,
            format!(
                "the control plane at {upstream} does not serve {path}; check --upstream and \
                 the load balancer's listener rules for this path"
            ),
        ),
        408 => (
            Code::Unavailable,
            "the load balancer timed out receiving the request; retry".to_string(),
        ),
        // Only a request over the load balancer's limit can have been refused by it; a
        // smaller one was refused behind it (issue 32: a 16 KiB form bound answered a
        // path the control plane did not serve, and the ALB was blamed).
        413 if request_bytes > ALB_REQUEST_LIMIT => (
            Code::ResourceExhausted,
            format!(
                "request too large for the load balancer (1 MB): {request_bytes} bytes were \
                 sent (already gzip-compressed where that helps); send less per call"
            ),
        ),
        413 => (
            Code::ResourceExhausted,
            format!(
                "the control plane refused {request_bytes} bytes as too large (under the load \
                 balancer's 1 MB, so the bound is the control plane's; its answer may name it)"
            ),
        ),
        429 => (
            Code::Unavailable,
            "the control plane is rate-limiting calls; retry later".to_string(),
        ),
        500 => (
            Code::Internal,
            "the control plane failed without a gRPC status; check its logs".to_string(),
        ),
        502 => (
            Code::Unavailable,
            "the load balancer got no valid answer from the function behind it (it crashed, \
             timed out, or its response was over 1 MB); check the function's logs"
                .to_string(),
        ),
        503 => (
            Code::Unavailable,
            "no healthy target behind the load balancer for this path (or it is \
             throttled); check the target group and the function's concurrency"
                .to_string(),
        ),
        504 => (
            Code::Unavailable,
            "the function behind the load balancer did not answer in time; check its \
             timeout and logs"
                .to_string(),
        ),
        400 => (
            Code::Internal,
            "the load balancer rejected the request as malformed".to_string(),
        ),
        _ if status.is_success() => (
            Code::Unknown,
            "the answer was not gRPC-web; is --upstream the control plane's address?".to_string(),
        ),
        _ => (Code::Unknown, "not a gRPC answer".to_string()),
    };
    let mut message = format!("{upstream} answered {http} for {path}: {what}");
    if let Some(detail) = detail.filter(|d| !d.is_empty()) {
        message.push_str(&format!(" (response: {detail})"));
    }
    (code, message)
}

/// A short, single-line, tag-free excerpt of an error page or JSON error body, for the
/// status message: at most `max` characters.
pub fn body_excerpt(body: &[u8], max: usize) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let mut plain = String::with_capacity(text.len().min(4 * max));
    let mut in_tag = false;
    for ch in text.chars() {
        match ch {
            '<' => {
                in_tag = true;
                plain.push(' ');
            }
            '>' if in_tag => in_tag = false,
            _ if in_tag => {}
            c if c.is_control() || c.is_whitespace() => plain.push(' '),
            c => plain.push(c),
        }
        if plain.len() > 8 * max {
            break;
        }
    }
    let words: Vec<&str> = plain.split_whitespace().collect();
    // The same title often appears twice (in <title> and <h1>): keep it once.
    let excerpt = dedup_repeat(&words);
    if excerpt.is_empty() {
        return None;
    }
    if excerpt.chars().count() > max {
        let cut: String = excerpt.chars().take(max).collect();
        return Some(format!("{cut}…"));
    }
    Some(excerpt)
}

/// `"502 Bad Gateway 502 Bad Gateway server"` → `"502 Bad Gateway server"`: an HTML error
/// page repeats its title as its heading.
fn dedup_repeat(words: &[&str]) -> String {
    let n = words.len();
    for half in (1..=n / 2).rev() {
        if words[..half] == words[half..2 * half] {
            let mut kept: Vec<&str> = words[..half].to_vec();
            kept.extend_from_slice(&words[2 * half..]);
            return kept.join(" ");
        }
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_percent_encoded_and_decoded() {
        let message = "50% done: naïve\nnext line";
        let encoded = encode_message(message);
        assert_eq!(encoded, "50%25 done: na%C3%AFve%0Anext line");
        assert!(encoded.bytes().all(|b| (0x20..=0x7e).contains(&b)));
        assert_eq!(decode_message(encoded.as_bytes()), message);
        // Invalid escapes are kept, not a panic.
        assert_eq!(decode_message(b"100%"), "100%");
        assert_eq!(decode_message(b"%zz%4"), "%zz%4");
        assert_eq!(decode_message(b"%E2%82"), "\u{fffd}");
    }

    #[test]
    fn http_statuses_map_to_grpc_codes() {
        let cases = [
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (413, Code::ResourceExhausted),
            (429, Code::Unavailable),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (500, Code::Internal),
            (418, Code::Unknown),
            (200, Code::Unknown),
        ];
        for (status, code) in cases {
            let status = StatusCode::from_u16(status).expect("valid");
            let (got, message) = from_http_status(status, "https://cp", "/a.B/C", 10, None);
            assert_eq!(got, code, "{status}: {message}");
            assert!(message.contains("https://cp"), "{message}");
            assert!(message.contains("/a.B/C"), "{message}");
            assert!(message.contains(&status.as_u16().to_string()), "{message}");
        }
        let (_, message) = from_http_status(
            StatusCode::PAYLOAD_TOO_LARGE,
            "https://cp",
            "/a.B/C",
            1_500_000,
            Some("413 Request Entity Too Large"),
        );
        assert!(message.contains("request too large for the load balancer (1 MB)"));
        assert!(message.contains("1500000 bytes"));
        assert!(message.contains("(response: 413 Request Entity Too Large)"));
        // Under the load balancer's limit, the load balancer is not blamed.
        let (code, message) = from_http_status(
            StatusCode::PAYLOAD_TOO_LARGE,
            "https://cp",
            "/a.B/C",
            20_000,
            Some("request body too large"),
        );
        assert_eq!(code, Code::ResourceExhausted);
        assert!(!message.contains("for the load balancer"), "{message}");
        assert!(
            message.contains("the control plane refused 20000 bytes"),
            "{message}"
        );
        assert!(
            message.contains("(response: request body too large)"),
            "{message}"
        );
        let (_, message) = from_http_status(StatusCode::NOT_FOUND, "https://cp", "/a.B/C", 0, None);
        assert!(message.contains("the control plane at https://cp does not serve /a.B/C"));
    }

    #[test]
    fn excerpts_of_error_pages() {
        let alb = b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n\
                    <center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n";
        assert_eq!(body_excerpt(alb, 100).as_deref(), Some("502 Bad Gateway"));
        assert_eq!(
            body_excerpt(br#"{"message":"Forbidden"}"#, 100).as_deref(),
            Some(r#"{"message":"Forbidden"}"#)
        );
        assert_eq!(body_excerpt(b"", 100), None);
        assert_eq!(body_excerpt(b"<html></html>", 100), None);
        assert_eq!(body_excerpt(b"\xff\xfe binary", 100), None);
        let long = "word ".repeat(100);
        let excerpt = body_excerpt(long.as_bytes(), 20).expect("text");
        assert_eq!(excerpt.chars().count(), 21, "{excerpt}");
        assert!(excerpt.ends_with('…'));
    }
}
