//! The pagination cursor codec, one for every backend and for the typed collections: a
//! resume position as compact JSON in unpadded URL-safe base64, opaque to clients.
//!
//! Cursors come back from clients, so decoding trusts nothing: a forged, truncated or
//! foreign cursor is [`StoreError::InvalidCursor`] (an INVALID_ARGUMENT at the edge),
//! never a panic.
//!
//! The encoding is the one both backends used before it was written once, and it must
//! stay so: `wisp migrate` keeps a scan cursor in its checkpoint file and the jobs keep
//! collection cursors in their markers, so a changed format would restart a resumed
//! migration or job from scratch (the jobs do; a migration refuses the cursor).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};

/// Resume position in an index query: the `(sk, id)` of the last record handed out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryCursor {
    /// The index sort key.
    pub s: String,
    /// The record id.
    pub i: String,
}

/// Resume position in a scan of one kind: the id of the last record handed out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScanCursor {
    /// The record id.
    pub i: String,
}

/// The cursor for `position`.
pub fn encode<T: Serialize>(position: &T) -> Result<String> {
    let json = serde_json::to_vec(position)
        .map_err(|e| StoreError::internal_from("encoding cursor", e))?;
    Ok(URL_SAFE_NO_PAD.encode(json))
}

/// The position in `cursor`; [`StoreError::InvalidCursor`] unless it is one that
/// [`encode`] made of a `T`.
pub fn decode<T: DeserializeOwned>(cursor: &str) -> Result<T> {
    let json = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| StoreError::InvalidCursor)?;
    serde_json::from_slice(&json).map_err(|_| StoreError::InvalidCursor)
}

/// A collection's cursor: the backend's cursor wrapped, so that neither is interpreted by
/// the other.
pub(crate) fn wrap(backend: &str) -> String {
    URL_SAFE_NO_PAD.encode(backend.as_bytes())
}

/// The backend's cursor inside a collection's cursor.
pub(crate) fn unwrap(cursor: &str) -> Result<String> {
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| StoreError::InvalidCursor)?;
    String::from_utf8(bytes).map_err(|_| StoreError::InvalidCursor)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn invalid<T: DeserializeOwned + std::fmt::Debug>(cursor: &str) -> bool {
        matches!(decode::<T>(cursor), Err(StoreError::InvalidCursor))
    }

    #[test]
    fn the_format_is_the_one_persisted_in_checkpoints_and_markers() {
        let query = QueryCursor {
            s: "00000000000000000042".into(),
            i: "id-1".into(),
        };
        // base64url(`{"s":"00000000000000000042","i":"id-1"}`), no padding.
        assert_eq!(
            encode(&query).ok().as_deref(),
            Some("eyJzIjoiMDAwMDAwMDAwMDAwMDAwMDAwNDIiLCJpIjoiaWQtMSJ9")
        );
        assert_eq!(
            encode(&ScanCursor { i: "a".into() }).ok().as_deref(),
            Some("eyJpIjoiYSJ9")
        );
        assert_eq!(wrap("abc"), "YWJj");
    }

    #[test]
    fn forged_cursors_are_invalid() {
        for forged in [
            "",
            "!",
            "not base64 at all",
            "eyJpIjoiYSJ9=",            // padded
            "eyJpIjoiYSJ9eyJpIjoiYSJ9", // two cursors
            &URL_SAFE_NO_PAD.encode("null"),
            &URL_SAFE_NO_PAD.encode("[]"),
            &URL_SAFE_NO_PAD.encode(r#"{"i":1}"#),
            &URL_SAFE_NO_PAD.encode(r#"{"i":"a","x":"b"}"#), // a field too many
            &URL_SAFE_NO_PAD.encode(r#"{"s":"a"}"#),         // a field too few
            &URL_SAFE_NO_PAD.encode([0xff, 0xfe, 0x00]),
        ] {
            assert!(invalid::<QueryCursor>(forged), "{forged:?}");
        }
        assert!(invalid::<ScanCursor>(
            &encode(&QueryCursor {
                s: "s".into(),
                i: "i".into()
            })
            .unwrap_or_default()
        ));
        assert!(matches!(unwrap("!"), Err(StoreError::InvalidCursor)));
        assert!(matches!(
            unwrap(&URL_SAFE_NO_PAD.encode([0xff, 0xfe])),
            Err(StoreError::InvalidCursor)
        ));
    }

    proptest! {
        #[test]
        fn positions_round_trip(s in ".{0,64}", i in ".{0,64}") {
            let query = QueryCursor { s, i };
            prop_assert_eq!(decode::<QueryCursor>(&encode(&query)?)?, query.clone());
            let scan = ScanCursor { i: query.i };
            prop_assert_eq!(decode::<ScanCursor>(&encode(&scan)?)?, scan);
        }

        #[test]
        fn collection_cursors_round_trip(backend in ".{0,128}") {
            prop_assert_eq!(unwrap(&wrap(&backend))?, backend);
        }

        #[test]
        fn truncated_cursors_are_invalid(s in ".{0,32}", i in ".{0,32}") {
            let cursor = encode(&QueryCursor { s, i })?;
            for end in (0..cursor.len()).filter(|&end| cursor.is_char_boundary(end)) {
                prop_assert!(invalid::<QueryCursor>(&cursor[..end]), "{}", &cursor[..end]);
            }
        }

        #[test]
        fn any_text_decodes_or_is_invalid(cursor in ".{0,200}") {
            // Whatever comes back, nothing panics; what is refused is InvalidCursor.
            for result in [decode::<QueryCursor>(&cursor).map(|_| ()), decode::<ScanCursor>(&cursor).map(|_| ()), unwrap(&cursor).map(|_| ())] {
                prop_assert!(matches!(result, Ok(()) | Err(StoreError::InvalidCursor)));
            }
        }

        #[test]
        fn any_json_decodes_or_is_invalid(json in ".{0,200}") {
            let cursor = URL_SAFE_NO_PAD.encode(json.as_bytes());
            prop_assert!(matches!(decode::<QueryCursor>(&cursor), Ok(_) | Err(StoreError::InvalidCursor)));
        }
    }
}
