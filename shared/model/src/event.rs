//! Event keys and label matching, as upstream computes them (keys are stored and compared
//! across implementations, so they must be byte-for-byte upstream's).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// Upstream's `MakeEventKey`: the hex SHA-256 of the event name when there are no labels,
/// else of `name` followed by `/key:value` for every label in byte order of the keys.
pub fn make_event_key(name: &str, labels: &HashMap<String, String>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    let mut keys: Vec<&String> = labels.keys().collect();
    keys.sort();
    for key in keys {
        hasher.update(b"/");
        hasher.update(key.as_bytes());
        hasher.update(b":");
        hasher.update(labels[key].as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Upstream's `ContainLabels`: whether `have` holds every `(key, value)` of `want`.
pub fn contains_labels(have: &HashMap<String, String>, want: &HashMap<String, String>) -> bool {
    want.iter().all(|(k, v)| have.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn event_key_matches_upstream() {
        // Upstream hashes `name` alone without labels, and
        // `name/key1:value1/key2:value2` with them (sha256sum of those strings).
        assert_eq!(
            make_event_key("name", &HashMap::new()),
            "82a3537ff0dbce7eec35d69edc3a189ee6f17d82f353a553f9aa96cb0be3ce89"
        );
        assert_eq!(
            make_event_key("name", &labels(&[("key2", "value2"), ("key1", "value1")])),
            "c267e2b7e99cb3f0634bbbab1fe4c4a47d06f14df5b0d81b36f6e2e80c73bb11"
        );
        assert_eq!(
            make_event_key("", &HashMap::new()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn event_key_is_order_independent() {
        let a = labels(&[("b", "2"), ("a", "1"), ("c", "3")]);
        let b = labels(&[("c", "3"), ("a", "1"), ("b", "2")]);
        assert_eq!(make_event_key("x", &a), make_event_key("x", &b));
        assert_eq!(
            make_event_key("x", &a),
            hex::encode(Sha256::digest(b"x/a:1/b:2/c:3"))
        );
        assert_ne!(make_event_key("x", &a), make_event_key("y", &a));
    }

    #[test]
    fn label_containment() {
        let have = labels(&[("a", "1"), ("b", "2")]);
        assert!(contains_labels(&have, &HashMap::new()));
        assert!(contains_labels(&have, &labels(&[("a", "1")])));
        assert!(!contains_labels(&have, &labels(&[("a", "2")])));
        assert!(!contains_labels(&have, &labels(&[("c", "1")])));
        assert!(!contains_labels(&labels(&[]), &labels(&[("a", "1")])));
    }
}
