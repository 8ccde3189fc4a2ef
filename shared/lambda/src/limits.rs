//! The ALB → Lambda size limits, and how big a response is once lambda_http has turned
//! it into the ALB's JSON.
//!
//! AWS: "The maximum size of the request body that you can send to a Lambda function is
//! 1 MB" and "The maximum size of the response JSON that the Lambda function can send is
//! 1 MB". It does not say whether a MB is 10^6 or 2^20 bytes; we take the smaller. The
//! response limit applies to the whole JSON document — status, both header maps
//! (lambda_http fills `headers` and `multiValueHeaders`, so that either target-group
//! setting works) and the body, which for binary content (gRPC-web) is base64: 4 bytes
//! per 3, so a binary body of about 745 KB is the most that fits.

use std::io;

use http::HeaderMap;
use lambda_http::Body;
use lambda_http::aws_lambda_events::alb::AlbTargetGroupResponse;

// ALB_MAX_REQUEST_BODY and ALB_MAX_RESPONSE_JSON, shared with the tests' ALB emulator.
include!("alb_limits.rs");

/// The most a WebService answer may weigh once gzip-compressed: what fits the response
/// JSON in base64 (749,250 bytes for 999,000 of JSON), less room for the gRPC-web frame
/// and trailers, the gzip header and the ALB response's headers.
pub const WEB_RESPONSE_BUDGET: usize = 740_000;

/// Length of the standard base64 encoding (with padding) of `n` bytes.
pub fn base64_len(n: usize) -> usize {
    n.div_ceil(3).saturating_mul(4)
}

/// The exact size of the JSON document lambda_http sends back for this response (it
/// serialises the same `AlbTargetGroupResponse`). `body` is lent and given back.
pub fn response_json_len(status: http::StatusCode, headers: &HeaderMap, body: &mut Body) -> usize {
    let mut response = AlbTargetGroupResponse::default();
    response.status_code = i64::from(status.as_u16());
    response.status_description = Some(format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default()
    ));
    response.headers = headers.clone();
    response.multi_value_headers = headers.clone();
    response.is_base64_encoded = matches!(body, Body::Binary(_));
    response.body = match std::mem::take(body) {
        Body::Empty => None,
        other => Some(other),
    };
    let mut counter = Counter(0);
    let len = match serde_json::to_writer(&mut counter, &response) {
        Ok(()) => counter.0,
        // Not valid UTF-8 in a text body: lambda_http would fail the same way; count the
        // worst case so that the caller refuses it.
        Err(_) => usize::MAX,
    };
    if let Some(taken) = response.body.take() {
        *body = taken;
    }
    len
}

/// An `io::Write` that only counts.
struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len(0), 0);
        assert_eq!(base64_len(1), 4);
        assert_eq!(base64_len(3), 4);
        assert_eq!(base64_len(4), 8);
        assert_eq!(base64_len(750_000), 1_000_000);
        assert!(base64_len(WEB_RESPONSE_BUDGET + 2_000) + 4_000 < ALB_MAX_RESPONSE_JSON);
    }

    #[test]
    fn json_length_is_exact_and_the_body_comes_back() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "content-type",
            "application/grpc-web+proto".parse().unwrap(),
        );
        let mut body = Body::Binary(vec![7u8; 1000]);
        let len = response_json_len(http::StatusCode::OK, &headers, &mut body);
        let mut response = AlbTargetGroupResponse::default();
        response.status_code = 200;
        response.status_description = Some("200 OK".into());
        response.headers = headers.clone();
        response.multi_value_headers = headers;
        response.is_base64_encoded = true;
        response.body = Some(Body::Binary(vec![7u8; 1000]));
        let json = serde_json::to_string(&response).unwrap();
        assert_eq!(len, json.len());
        assert!(json.len() > base64_len(1000));
        assert!(matches!(body, Body::Binary(ref b) if b.len() == 1000));
    }
}
