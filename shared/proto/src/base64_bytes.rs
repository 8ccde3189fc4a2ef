//! Serde for `bytes` fields as Go's `encoding/json` writes them: a standard base64
//! string (absent or `null` reads as empty).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&STANDARD.encode(bytes))
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    let text: Option<String> = Option::deserialize(deserializer)?;
    match text {
        None => Ok(Vec::new()),
        Some(text) => STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom),
    }
}
