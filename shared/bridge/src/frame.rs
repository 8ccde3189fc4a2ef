//! gRPC length-prefixed messages and gRPC-web trailer frames.
//!
//! A gRPC body is a sequence of frames: one flag byte, a 4-byte big-endian length, then
//! that many bytes. Flag bit 0 says the payload is compressed (with the call's
//! `grpc-encoding`); gRPC-web adds bit 7 for the frame that carries the trailers as an
//! HTTP/1-style header block (`grpc-status: 0\r\ngrpc-message: ...\r\n`).
//!
//! Everything here takes bytes from the network: nothing panics on any input.

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};

/// Flag byte (1) + big-endian length (4).
pub const HEADER_LEN: usize = 5;
/// The payload is compressed with the call's `grpc-encoding`.
pub const FLAG_COMPRESSED: u8 = 0x01;
/// gRPC-web: the payload is the trailer block, not a message.
pub const FLAG_TRAILERS: u8 = 0x80;

/// One frame of a gRPC or gRPC-web body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub flags: u8,
    pub payload: Bytes,
}

impl Frame {
    pub fn message(payload: impl Into<Bytes>) -> Frame {
        Frame {
            flags: 0,
            payload: payload.into(),
        }
    }

    pub fn is_compressed(&self) -> bool {
        self.flags & FLAG_COMPRESSED != 0
    }

    pub fn is_trailers(&self) -> bool {
        self.flags & FLAG_TRAILERS != 0
    }
}

/// Why a body is not a valid sequence of frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("the body ends inside a frame header ({0} of 5 bytes)")]
    TruncatedHeader(usize),
    #[error("a frame declares {declared} bytes but only {available} follow")]
    TruncatedPayload { declared: usize, available: usize },
    #[error("a frame has unknown flags {0:#04x}")]
    UnknownFlags(u8),
    #[error("a message frame follows the trailer frame")]
    DataAfterTrailers,
    #[error("a message of {0} bytes does not fit in a gRPC frame")]
    TooLong(usize),
    #[error("the trailer frame is malformed: {0}")]
    BadTrailers(String),
}

/// Splits a whole body into frames (without copying the payloads).
pub fn split_frames(body: &Bytes) -> Result<Vec<Frame>, FrameError> {
    let mut frames = Vec::new();
    let mut at = 0usize;
    while at < body.len() {
        let rest = body.len() - at;
        if rest < HEADER_LEN {
            return Err(FrameError::TruncatedHeader(rest));
        }
        let flags = body[at];
        let len = u32::from_be_bytes([body[at + 1], body[at + 2], body[at + 3], body[at + 4]]);
        let declared = usize::try_from(len).map_err(|_| FrameError::TooLong(usize::MAX))?;
        let start = at + HEADER_LEN;
        let available = body.len() - start;
        if declared > available {
            return Err(FrameError::TruncatedPayload {
                declared,
                available,
            });
        }
        frames.push(Frame {
            flags,
            payload: body.slice(start..start + declared),
        });
        at = start + declared;
    }
    Ok(frames)
}

/// Appends one frame to `out`.
pub fn encode_frame(flags: u8, payload: &[u8], out: &mut BytesMut) -> Result<(), FrameError> {
    let len = u32::try_from(payload.len()).map_err(|_| FrameError::TooLong(payload.len()))?;
    out.reserve(HEADER_LEN + payload.len());
    out.put_u8(flags);
    out.put_u32(len);
    out.put_slice(payload);
    Ok(())
}

/// The frames of a gRPC request body, as a client sends them: messages only.
pub fn request_messages(body: &Bytes) -> Result<Vec<Frame>, FrameError> {
    let frames = split_frames(body)?;
    for frame in &frames {
        if frame.flags & !FLAG_COMPRESSED != 0 {
            return Err(FrameError::UnknownFlags(frame.flags));
        }
    }
    Ok(frames)
}

/// A gRPC-web response body taken apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebBody {
    /// The message frames, in order.
    pub messages: Vec<Frame>,
    /// The trailers, if the body had a trailer frame.
    pub trailers: Option<HeaderMap>,
}

/// Takes apart a gRPC-web response body: message frames, then at most one trailer frame,
/// which must be the last.
pub fn parse_web_body(body: &Bytes) -> Result<WebBody, FrameError> {
    let mut parsed = WebBody::default();
    for frame in split_frames(body)? {
        if parsed.trailers.is_some() {
            return Err(FrameError::DataAfterTrailers);
        }
        match frame.flags {
            0 | FLAG_COMPRESSED => parsed.messages.push(frame),
            FLAG_TRAILERS => parsed.trailers = Some(parse_trailers(&frame.payload)?),
            other => return Err(FrameError::UnknownFlags(other)),
        }
    }
    Ok(parsed)
}

/// Parses a trailer block: `name: value` lines separated by CRLF (a bare LF is accepted
/// too); names are case-insensitive; blank lines are skipped.
pub fn parse_trailers(block: &[u8]) -> Result<HeaderMap, FrameError> {
    let mut map = HeaderMap::new();
    for raw in block.split(|b| *b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            return Err(FrameError::BadTrailers(format!(
                "a line without a colon: {:?}",
                String::from_utf8_lossy(line)
            )));
        };
        let name = line[..colon].trim_ascii().to_ascii_lowercase();
        let value = line[colon + 1..].trim_ascii();
        let name = HeaderName::from_bytes(&name).map_err(|_| {
            FrameError::BadTrailers(format!(
                "invalid name {:?}",
                String::from_utf8_lossy(&line[..colon])
            ))
        })?;
        let value = HeaderValue::from_bytes(value)
            .map_err(|_| FrameError::BadTrailers(format!("invalid value for {name}")))?;
        map.append(name, value);
    }
    Ok(map)
}

/// Serialises trailers as a gRPC-web trailer block (the inverse of [`parse_trailers`]).
pub fn encode_trailers(trailers: &HeaderMap) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in trailers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode_frame(flags, payload, &mut out).expect("fits");
        out.to_vec()
    }

    #[test]
    fn splits_several_message_frames() {
        let mut body = frame(0, b"first");
        body.extend(frame(FLAG_COMPRESSED, b"second"));
        body.extend(frame(0, b""));
        let frames = split_frames(&Bytes::from(body)).expect("valid");
        assert_eq!(
            frames,
            vec![
                Frame::message(&b"first"[..]),
                Frame {
                    flags: FLAG_COMPRESSED,
                    payload: Bytes::from_static(b"second")
                },
                Frame::message(Bytes::new()),
            ]
        );
        assert!(frames[1].is_compressed() && !frames[1].is_trailers());
    }

    #[test]
    fn empty_body_has_no_frames() {
        assert_eq!(split_frames(&Bytes::new()), Ok(vec![]));
        assert_eq!(parse_web_body(&Bytes::new()), Ok(WebBody::default()));
    }

    #[test]
    fn web_body_with_messages_and_trailers() {
        let mut body = frame(0, b"a");
        body.extend(frame(0, b"bc"));
        body.extend(frame(
            FLAG_TRAILERS,
            b"grpc-status: 0\r\nGrpc-Message: all%20good\r\nx-extra: 1\r\nx-extra: 2\r\n",
        ));
        let parsed = parse_web_body(&Bytes::from(body)).expect("valid");
        assert_eq!(parsed.messages.len(), 2);
        assert_eq!(parsed.messages[1].payload, Bytes::from_static(b"bc"));
        let trailers = parsed.trailers.expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
        assert_eq!(trailers["grpc-message"], "all%20good");
        let extra: Vec<_> = trailers.get_all("x-extra").iter().collect();
        assert_eq!(extra, vec!["1", "2"]);
    }

    #[test]
    fn trailer_only_body() {
        let body = frame(FLAG_TRAILERS, b"grpc-status:5\ngrpc-message: not found\n\n");
        let parsed = parse_web_body(&Bytes::from(body)).expect("valid");
        assert!(parsed.messages.is_empty());
        let trailers = parsed.trailers.expect("trailers");
        assert_eq!(trailers["grpc-status"], "5");
        assert_eq!(trailers["grpc-message"], "not found");
    }

    #[test]
    fn trailers_round_trip() {
        let mut map = HeaderMap::new();
        map.insert("grpc-status", HeaderValue::from_static("3"));
        map.insert("grpc-message", HeaderValue::from_static("bad%20thing"));
        map.append("x-a", HeaderValue::from_static("1"));
        map.append("x-a", HeaderValue::from_static("2"));
        assert_eq!(parse_trailers(&encode_trailers(&map)), Ok(map));
    }

    #[test]
    fn message_after_trailers_is_refused() {
        let mut body = frame(FLAG_TRAILERS, b"grpc-status: 0\r\n");
        body.extend(frame(0, b"late"));
        assert_eq!(
            parse_web_body(&Bytes::from(body)),
            Err(FrameError::DataAfterTrailers)
        );
    }

    #[test]
    fn truncated_bodies_are_errors() {
        let whole = frame(0, b"hello");
        for cut in 1..whole.len() {
            let body = Bytes::copy_from_slice(&whole[..cut]);
            let err = split_frames(&body).expect_err("truncated");
            if cut < HEADER_LEN {
                assert_eq!(err, FrameError::TruncatedHeader(cut));
            } else {
                assert_eq!(
                    err,
                    FrameError::TruncatedPayload {
                        declared: 5,
                        available: cut - HEADER_LEN
                    }
                );
            }
        }
    }

    #[test]
    fn huge_declared_length_is_an_error_not_an_allocation() {
        let body = Bytes::from_static(&[0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]);
        assert!(matches!(
            split_frames(&body),
            Err(FrameError::TruncatedPayload { .. })
        ));
    }

    #[test]
    fn unknown_flags_are_refused() {
        let body = Bytes::from(frame(0x02, b"x"));
        assert_eq!(parse_web_body(&body), Err(FrameError::UnknownFlags(0x02)));
        assert_eq!(request_messages(&body), Err(FrameError::UnknownFlags(0x02)));
        // A compressed trailer frame is not something a gRPC-web server sends.
        let body = Bytes::from(frame(FLAG_TRAILERS | FLAG_COMPRESSED, b"x"));
        assert_eq!(parse_web_body(&body), Err(FrameError::UnknownFlags(0x81)));
        // Clients never send trailer frames.
        let body = Bytes::from(frame(FLAG_TRAILERS, b"grpc-status: 0"));
        assert_eq!(request_messages(&body), Err(FrameError::UnknownFlags(0x80)));
    }

    #[test]
    fn malformed_trailer_blocks_are_errors() {
        for block in [
            &b"grpc-status 0\r\n"[..],
            b": no name\r\n",
            b"bad name: 1\r\n",
            b"grpc-message: \x01control\r\n",
            b"\xff\xfe: x\r\n",
        ] {
            assert!(
                matches!(parse_trailers(block), Err(FrameError::BadTrailers(_))),
                "{block:?}"
            );
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic generator: every length up to 64, many seeds.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..64usize {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        // Bias towards small lengths and interesting flags so that the
                        // parser gets past the first header often.
                        match state % 4 {
                            0 => 0,
                            1 => 0x80,
                            _ => (state >> 8) as u8,
                        }
                    })
                    .collect();
                let body = Bytes::from(bytes);
                let _ = split_frames(&body);
                let _ = parse_web_body(&body);
                let _ = request_messages(&body);
                let _ = parse_trailers(&body);
            }
        }
    }
}

/// Bodies and trailer blocks come from the network: any bytes give frames or an error,
/// and what parses re-encodes to the same bytes.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Frames that are nearly valid: real headers around random payloads and flags.
    fn framed() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            (
                any::<u8>(),
                proptest::collection::vec(any::<u8>(), 0..64),
                any::<i8>(),
            ),
            0..6,
        )
        .prop_map(|frames| {
            let mut out = Vec::new();
            for (flags, payload, skew) in frames {
                out.push(flags);
                let len = (payload.len() as i64 + i64::from(skew % 3)).max(0) as u32;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&payload);
            }
            out
        })
    }

    proptest! {
        #[test]
        fn any_body_splits_or_errs(body in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..512),
            framed(),
        ]) {
            let body = Bytes::from(body);
            if let Ok(frames) = split_frames(&body) {
                let mut again = BytesMut::new();
                for f in &frames {
                    encode_frame(f.flags, &f.payload, &mut again).unwrap();
                }
                prop_assert_eq!(again.freeze(), body.clone());
            }
            let _ = request_messages(&body);
            let _ = parse_web_body(&body);
        }

        #[test]
        fn any_trailer_block_parses_or_errs(block in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..256),
            "([a-z-]{0,12}:[ -~]{0,20}\r?\n){0,6}".prop_map(String::into_bytes),
        ]) {
            if let Ok(trailers) = parse_trailers(&block) {
                let _ = encode_trailers(&trailers);
            }
        }

        #[test]
        fn any_gzip_payload_inflates_within_the_limit(data in proptest::collection::vec(any::<u8>(), 0..256), limit in 0usize..4096) {
            if let Ok(out) = crate::compress::gunzip(&data, limit) {
                prop_assert!(out.len() <= limit);
            }
        }
    }
}
