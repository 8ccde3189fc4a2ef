//! Key generation and bcrypt hashing, in upstream's formats.
//!
//! * piped key: 50 chars of `[a-z0-9]`; at most [`MAX_PIPED_KEYS`] stored hashes per piped;
//! * API key: `<uuid v4>.<32 chars of [a-z0-9]>`, the hash is of the full string;
//! * keys Wisp generates are stored as [`hash_generated_key`]: SHA-256, compared in
//!   constant time. They carry 258 bits (piped) and 165 bits (API key) of randomness, so
//!   a slow hash would buy nothing against guessing and would cost tens of milliseconds
//!   of CPU on every first check (a fleet's cold start, a flood of made-up keys);
//! * passwords, and keys that came from upstream PipeCD, are bcrypt, cost
//!   [`DEFAULT_COST`] (Go's `bcrypt.DefaultCost`), written as `$2a$` like Go's, so they
//!   move between upstream and Wisp unchanged. [`verify_secret`] takes either.

use rand::RngExt;

use crate::error::HashError;

/// Length of a generated piped key.
pub const PIPED_KEY_LENGTH: usize = 50;
/// Length of the random part of a generated API key.
pub const API_KEY_SECRET_LENGTH: usize = 32;
/// A piped holds at most this many keys (the new one and the one it replaces).
pub const MAX_PIPED_KEYS: usize = 2;
/// bcrypt cost used for every stored hash.
pub const DEFAULT_COST: u32 = 10;
/// The smallest cost bcrypt accepts; for tests only.
pub const MIN_COST: u32 = 4;
/// bcrypt only reads this many bytes of a secret; longer ones are refused when hashing.
pub const MAX_SECRET_BYTES: usize = 72;

const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// `n` characters drawn uniformly from `[a-z0-9]` with the thread-local CSPRNG (ChaCha12,
/// seeded and periodically reseeded from the OS).
pub fn generate_random_string(n: usize) -> String {
    let mut rng = rand::rng();
    (0..n)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// A new piped key (plaintext; store only [`hash_generated_key`] of it).
pub fn generate_piped_key() -> String {
    generate_random_string(PIPED_KEY_LENGTH)
}

/// A new API key: `(id, key)` where `id` is a UUID v4 and `key` is `<id>.<secret>`
/// (plaintext; store only [`hash_generated_key`] of `key`).
pub fn generate_api_key() -> (String, String) {
    let id = uuid::Uuid::new_v4().to_string();
    let key = format!("{id}.{}", generate_random_string(API_KEY_SECRET_LENGTH));
    (id, key)
}

/// How the hashes of generated keys start.
pub const GENERATED_KEY_HASH_PREFIX: &str = "$wisp-sha256$";

/// The stored hash of a key Wisp generated: [`GENERATED_KEY_HASH_PREFIX`] and the hex
/// SHA-256 of the key. Only for high-entropy keys ([`generate_piped_key`],
/// [`generate_api_key`]); passwords use [`hash_secret`].
pub fn hash_generated_key(key: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key.as_bytes());
    let mut out = String::with_capacity(GENERATED_KEY_HASH_PREFIX.len() + 64);
    out.push_str(GENERATED_KEY_HASH_PREFIX);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Whether checking a secret against `hash` costs a bcrypt (tens of milliseconds).
pub fn is_slow_hash(hash: &str) -> bool {
    !hash.starts_with(GENERATED_KEY_HASH_PREFIX)
}

/// bcrypt hash of `secret` at [`DEFAULT_COST`].
pub fn hash_secret(secret: &str) -> Result<String, HashError> {
    hash_secret_with_cost(secret, DEFAULT_COST)
}

/// bcrypt hash of `secret` at `cost` (4..=31). Production code uses [`hash_secret`]; tests
/// use [`MIN_COST`] to stay fast (verification reads the cost from the hash).
pub fn hash_secret_with_cost(secret: &str, cost: u32) -> Result<String, HashError> {
    if secret.len() > MAX_SECRET_BYTES {
        return Err(HashError::new(format!(
            "secret is longer than {MAX_SECRET_BYTES} bytes"
        )));
    }
    let parts = bcrypt::hash_with_result(secret, cost).map_err(HashError::bcrypt)?;
    Ok(parts.format_for_version(bcrypt::Version::TwoA))
}

/// Whether `secret` matches `hash`: a generated key's hash ([`hash_generated_key`]) or
/// bcrypt (`$2a$`, `$2b$`, `$2x$` or `$2y$`, one bcrypt of work). A malformed hash is
/// simply no match. Constant-time in the comparison.
pub fn verify_secret(secret: &str, hash: &str) -> bool {
    use subtle::ConstantTimeEq;
    if hash.starts_with(GENERATED_KEY_HASH_PREFIX) {
        let computed = hash_generated_key(secret);
        return computed.len() == hash.len()
            && bool::from(computed.as_bytes().ct_eq(hash.as_bytes()));
    }
    bcrypt::verify(secret, hash).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_alnum_lower(s: &str) -> bool {
        s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    }

    /// bcrypt's refusal stays bcrypt's error below ours, for the log.
    #[test]
    fn a_hash_failure_keeps_bcrypts_error_as_its_source() {
        let err = hash_secret_with_cost("secret", 99).expect_err("cost 99 is refused");
        let source = std::error::Error::source(&err).expect("a source");
        assert!(
            matches!(
                source.downcast_ref::<bcrypt::BcryptError>(),
                Some(bcrypt::BcryptError::CostNotAllowed(99))
            ),
            "{source:?}"
        );
        assert_eq!(err.to_string(), format!("unable to hash secret: {source}"));
    }

    #[test]
    fn generated_keys_hash_fast_and_verify() {
        let key = generate_piped_key();
        let hash = hash_generated_key(&key);
        assert!(hash.starts_with(GENERATED_KEY_HASH_PREFIX) && !is_slow_hash(&hash));
        assert_eq!(hash.len(), GENERATED_KEY_HASH_PREFIX.len() + 64);
        assert!(verify_secret(&key, &hash));
        assert!(!verify_secret(&generate_piped_key(), &hash));
        assert!(!verify_secret(&key, &hash[..hash.len() - 1]));
        // bcrypt hashes (passwords, keys imported from upstream) still verify.
        let old = hash_secret_with_cost(&key, MIN_COST).unwrap();
        assert!(is_slow_hash(&old) && verify_secret(&key, &old));
    }

    #[test]
    fn piped_key_format() {
        let a = generate_piped_key();
        let b = generate_piped_key();
        assert_eq!(a.len(), PIPED_KEY_LENGTH);
        assert!(is_alnum_lower(&a), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn random_string_uses_whole_alphabet() {
        let s = generate_random_string(5000);
        for c in ALPHABET {
            assert!(s.as_bytes().contains(c), "missing {}", char::from(*c));
        }
    }

    #[test]
    fn api_key_format() {
        let (id, key) = generate_api_key();
        let parsed = uuid::Uuid::parse_str(&id).expect("uuid");
        assert_eq!(parsed.get_version_num(), 4);
        let secret = key
            .strip_prefix(&format!("{id}."))
            .expect("key starts with id");
        assert_eq!(secret.len(), API_KEY_SECRET_LENGTH);
        assert!(is_alnum_lower(secret), "{secret}");
        let cred: crate::ApiKeyCredential = key.parse().expect("parses");
        assert_eq!(cred.id, id);
        assert_eq!(generate_api_key().0.len(), 36);
        assert_ne!(generate_api_key().0, id);
    }

    #[test]
    fn bcrypt_round_trip() {
        let key = generate_piped_key();
        let hash = hash_secret_with_cost(&key, MIN_COST).expect("hash");
        assert!(hash.starts_with("$2a$04$"), "{hash}");
        assert_eq!(hash.len(), 60);
        assert!(verify_secret(&key, &hash));
        assert!(!verify_secret("wrong", &hash));
        assert!(!verify_secret("", &hash));
    }

    #[test]
    fn default_cost_is_go_default() {
        let hash = hash_secret("hello-pipecd").expect("hash");
        assert!(hash.starts_with("$2a$10$"), "{hash}");
        assert!(verify_secret("hello-pipecd", &hash));
    }

    #[test]
    fn verifies_go_generated_hash() {
        // The quickstart static admin hash (Go x/crypto/bcrypt) for "hello-pipecd".
        let go_hash = "$2a$10$ye96mUqUqTnjUqgwQJbJzel/LJibRhUnmzyypACkvrTSnQpVFZ7qK";
        assert!(verify_secret("hello-pipecd", go_hash));
        assert!(!verify_secret("hello-pipecd!", go_hash));
    }

    #[test]
    fn malformed_hash_is_no_match() {
        for bad in [
            "",
            "redacted",
            "$2a$10$",
            "$2a$99$ye96mUqUqTnjUqgwQJbJzel/LJibRhUnmzyypACkvrTSnQpVFZ7qK",
            "$3a$10$ye96mUqUqTnjUqgwQJbJzel/LJibRhUnmzyypACkvrTSnQpVFZ7qK",
            "$2a$xx$ye96mUqUqTnjUqgwQJbJzel/LJibRhUnmzyypACkvrTSnQpVFZ7qK",
            "$2a$10$ye96mUqUqTnjUqgwQJbJzel/LJibRhUnmzyypACkvrTSnQpVFZ7q\u{e9}",
            "$2a$10$!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
        ] {
            assert!(!verify_secret("hello-pipecd", bad), "{bad:?}");
        }
    }

    #[test]
    fn hashing_refuses_bad_input() {
        assert!(hash_secret_with_cost("x", 3).is_err());
        assert!(hash_secret_with_cost("x", 32).is_err());
        assert!(hash_secret_with_cost(&"a".repeat(73), MIN_COST).is_err());
        assert!(hash_secret_with_cost(&"a".repeat(72), MIN_COST).is_ok());
    }
}
