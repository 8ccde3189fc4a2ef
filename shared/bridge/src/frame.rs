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

/// Bodies and trailer blocks come from the network. Structured inputs (valid frame
/// sequences with message, compressed and trailer frames; the same cut short; valid
/// trailer blocks; valid and corrupted gzip streams) must come back exactly as sent or be
/// refused with the error that names what is wrong; random bytes must parse to something
/// that re-encodes to the same bytes, or be refused.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use wisp_reach::Reach;

    /// Trailers as a server sends them: lowercase names, visible-ASCII values.
    fn trailers() -> impl Strategy<Value = HeaderMap> {
        proptest::collection::vec(
            (
                prop_oneof![
                    Just("grpc-status".to_string()),
                    Just("grpc-message".to_string()),
                    "x-[a-z0-9-]{1,12}",
                ],
                "[!-~]([ -~]{0,30}[!-~])?",
            ),
            0..5,
        )
        .prop_map(|pairs| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(&value).unwrap(),
                );
            }
            map
        })
    }

    /// A frame: a message, a compressed message, a trailer block, or one with any flags.
    fn frame_strategy() -> impl Strategy<Value = Frame> {
        let payload = proptest::collection::vec(any::<u8>(), 0..64);
        prop_oneof![
            3 => payload.clone().prop_map(|p| Frame { flags: 0, payload: p.into() }),
            2 => payload.clone().prop_map(|p| Frame { flags: FLAG_COMPRESSED, payload: p.into() }),
            2 => trailers().prop_map(|t| Frame { flags: FLAG_TRAILERS, payload: encode_trailers(&t).into() }),
            1 => (any::<u8>(), payload).prop_map(|(flags, p)| Frame { flags, payload: p.into() }),
        ]
    }

    fn encode(frames: &[Frame]) -> Bytes {
        let mut out = BytesMut::new();
        for f in frames {
            encode_frame(f.flags, &f.payload, &mut out).unwrap();
        }
        out.freeze()
    }

    /// What `parse_web_body` must make of `frames`, by the rules its doc states.
    fn expected_web_body(frames: &[Frame]) -> Result<WebBody, FrameError> {
        let mut parsed = WebBody::default();
        for frame in frames {
            if parsed.trailers.is_some() {
                return Err(FrameError::DataAfterTrailers);
            }
            match frame.flags {
                0 | FLAG_COMPRESSED => parsed.messages.push(frame.clone()),
                FLAG_TRAILERS => parsed.trailers = Some(parse_trailers(&frame.payload)?),
                other => return Err(FrameError::UnknownFlags(other)),
            }
        }
        Ok(parsed)
    }

    /// The error a body cut after `cut` bytes must give.
    fn truncation_error(frames: &[Frame], cut: usize) -> FrameError {
        let mut at = 0;
        for f in frames {
            let end = at + HEADER_LEN + f.payload.len();
            if cut < end {
                return if cut - at < HEADER_LEN {
                    FrameError::TruncatedHeader(cut - at)
                } else {
                    FrameError::TruncatedPayload {
                        declared: f.payload.len(),
                        available: cut - at - HEADER_LEN,
                    }
                };
            }
            at = end;
        }
        unreachable!("the cut is inside the body")
    }

    #[test]
    fn bodies_split_as_sent_or_are_refused_with_the_right_error() {
        let inputs = prop_oneof![
            3 => (proptest::collection::vec(frame_strategy(), 0..6), any::<prop::sample::Index>(), any::<bool>())
                .prop_map(|(frames, cut, truncate)| (Some((frames, cut, truncate)), Vec::new())),
            1 => proptest::collection::vec(any::<u8>(), 0..512).prop_map(|b| (None, b)),
        ];
        Reach::new("bridge frames: bodies", file!())
            .at_least("cut short: the right truncation error", 0.1)
            .at_least("web body: messages and trailers as sent", 0.04)
            .at_least("web body: refused with the right error", 0.06)
            .run(inputs, |(structured, random)| {
                let Some((frames, cut, truncate)) = structured else {
                    let body = Bytes::from(random);
                    let _ = request_messages(&body);
                    let _ = parse_web_body(&body);
                    return Ok(match split_frames(&body) {
                        Ok(frames) => {
                            prop_assert_eq!(encode(&frames), body);
                            Some("random bytes: what splits re-encodes the same")
                        }
                        Err(_) => None,
                    });
                };
                let body = encode(&frames);
                if truncate && !body.is_empty() {
                    let cut = cut.index(body.len());
                    let short = body.slice(..cut);
                    let err = split_frames(&short).map(|_| ());
                    if cut == 0 {
                        prop_assert_eq!(err, Ok(()));
                        return Ok(None);
                    }
                    // A cut on a frame boundary leaves whole frames.
                    let boundary = {
                        let mut at = 0;
                        let mut ends = vec![0];
                        for f in &frames {
                            at += HEADER_LEN + f.payload.len();
                            ends.push(at);
                        }
                        ends.contains(&cut)
                    };
                    if boundary {
                        prop_assert_eq!(err, Ok(()));
                        return Ok(None);
                    }
                    prop_assert_eq!(err, Err(truncation_error(&frames, cut)));
                    return Ok(Some("cut short: the right truncation error"));
                }
                prop_assert_eq!(&split_frames(&body).unwrap(), &frames);
                let bad_flags = frames.iter().find(|f| f.flags & !FLAG_COMPRESSED != 0);
                match bad_flags {
                    Some(f) => prop_assert_eq!(
                        request_messages(&body),
                        Err(FrameError::UnknownFlags(f.flags))
                    ),
                    None => prop_assert_eq!(&request_messages(&body).unwrap(), &frames),
                }
                let expected = expected_web_body(&frames);
                prop_assert_eq!(parse_web_body(&body), expected.clone());
                Ok(Some(match expected {
                    Ok(web) if web.trailers.is_some() || !web.messages.is_empty() => {
                        "web body: messages and trailers as sent"
                    }
                    Ok(_) => "empty body: no frames",
                    Err(_) => "web body: refused with the right error",
                }))
            });
    }

    #[test]
    fn trailer_blocks_round_trip_and_changed_ones_parse_consistently_or_are_refused() {
        let inputs = prop_oneof![
            2 => trailers().prop_map(|t| (Some(t), Vec::new())),
            1 => (trailers(), proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4))
                .prop_map(|(t, edits)| {
                    let mut block = encode_trailers(&t);
                    for (at, byte) in edits {
                        if block.is_empty() {
                            block.push(byte);
                        } else {
                            let i = at.index(block.len());
                            block[i] = byte;
                        }
                    }
                    (None, block)
                }),
            1 => "([a-zA-Z-]{0,12}:[ -~]{0,20}\r?\n){0,6}".prop_map(|b| (None, b.into_bytes())),
        ];
        Reach::new("bridge frames: trailer blocks", file!())
            .at_least("trailers round trip", 0.3)
            .at_least("changed block: parses the same again", 0.05)
            .at_least("changed block: BadTrailers", 0.05)
            .in_all_at_least(1.0)
            .run(inputs, |(map, block)| {
                if let Some(map) = map {
                    prop_assert_eq!(parse_trailers(&encode_trailers(&map)), Ok(map));
                    return Ok(Some("trailers round trip"));
                }
                Ok(Some(match parse_trailers(&block) {
                    Ok(parsed) => {
                        prop_assert_eq!(parse_trailers(&encode_trailers(&parsed)), Ok(parsed));
                        "changed block: parses the same again"
                    }
                    Err(e) => {
                        prop_assert!(matches!(e, FrameError::BadTrailers(_)), "{:?}", e);
                        "changed block: BadTrailers"
                    }
                }))
            });
    }

    #[test]
    fn gzip_payloads_inflate_to_what_was_sent_within_the_limit() {
        use crate::compress::{GunzipError, gunzip, gzip};
        let data = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..1024),
            (any::<u8>(), 0usize..8192).prop_map(|(b, n)| vec![b; n]),
        ];
        let edits = proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3);
        Reach::new("bridge frames: gzip payloads", file!())
            .at_least("inflated as sent", 0.06)
            .at_least("over the limit: TooLarge", 0.08)
            .at_least("corrupt: Invalid", 0.2)
            .in_all_at_least(1.0)
            .run((data, edits, 0usize..4096), |(data, edits, limit)| {
                let mut packed = gzip(&data).unwrap();
                for (at, byte) in &edits {
                    let i = at.index(packed.len());
                    packed[i] = if packed[i] == *byte { !byte } else { *byte };
                }
                Ok(Some(match gunzip(&packed, limit) {
                    // A changed header time or OS byte leaves the data intact.
                    Ok(out) => {
                        prop_assert_eq!(&out, &data);
                        prop_assert!(out.len() <= limit);
                        "inflated as sent"
                    }
                    Err(GunzipError::TooLarge(n)) => {
                        prop_assert_eq!(n, limit);
                        // Only past the limit (a corrupt stream may inflate to more).
                        prop_assert!(data.len() > limit || !edits.is_empty());
                        "over the limit: TooLarge"
                    }
                    Err(GunzipError::Invalid(_)) => {
                        prop_assert!(!edits.is_empty(), "valid gzip refused");
                        "corrupt: Invalid"
                    }
                }))
            });
    }
}
