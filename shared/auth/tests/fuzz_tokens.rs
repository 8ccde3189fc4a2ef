//! Credentials are the first thing a stranger sends: any `authorization` header, cookie
//! header, session token or SSO state ticket parses or is refused, never panics, and a
//! forged or altered token never verifies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use wisp_auth::{
    SessionSigner, SsoStateSigner, WebCaller, parse_api_key, parse_authorization,
    parse_cookie_token, parse_piped_token,
};

fn header_like() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,120}",
        "(PIPED-TOKEN|API-KEY|ID-TOKEN|Bearer)? ?[ -~]{0,80}",
        "PIPED-TOKEN [a-z0-9,]{0,60}",
        "API-KEY [a-f0-9-]{0,36}\\.?[a-z0-9.]{0,40}",
    ]
}

/// A valid token with one character changed, removed or added.
fn altered(token: String) -> impl Strategy<Value = String> {
    (any::<prop::sample::Index>(), any::<char>(), 0u8..3).prop_map(move |(at, c, op)| {
        let mut chars: Vec<char> = token.chars().collect();
        let i = at
            .index(chars.len().max(1))
            .min(chars.len().saturating_sub(1));
        match op {
            0 if !chars.is_empty() => {
                if chars[i] == c {
                    chars[i] = if c == 'a' { 'b' } else { 'a' };
                } else {
                    chars[i] = c;
                }
            }
            1 => chars.insert(i, c),
            _ if !chars.is_empty() => {
                chars.remove(i);
            }
            _ => chars.push(c),
        }
        chars.into_iter().collect()
    })
}

fn session_token() -> String {
    SessionSigner::new(&[3u8; 32])
        .sign(&WebCaller {
            subject: "admin".into(),
            project_id: "p".into(),
            roles: vec!["Admin".into()],
            ..Default::default()
        })
        .unwrap()
}

proptest! {
    #[test]
    fn any_authorization_header_parses_or_errs(header in header_like()) {
        let _ = parse_authorization(Some(&header));
        let _ = parse_piped_token(Some(&header));
        let _ = parse_api_key(Some(&header));
    }

    #[test]
    fn any_cookie_header_parses_or_errs(cookies in proptest::collection::vec("[ -~]{0,80}", 0..4)) {
        let _ = parse_cookie_token(cookies.iter().map(String::as_str));
    }

    #[test]
    fn any_text_is_no_session(token in ".{0,300}") {
        prop_assert!(SessionSigner::new(&[3u8; 32]).verify(&token).is_err());
        prop_assert!(SsoStateSigner::new(&[3u8; 32]).open(&token, "").is_err());
    }

    #[test]
    fn an_altered_session_never_verifies(token in altered(session_token())) {
        let signer = SessionSigner::new(&[3u8; 32]);
        // JWT segments are base64url without padding: some changes decode to the same
        // bytes (the spare bits of the last character); only those may verify, and then
        // as the same caller.
        if let Ok(caller) = signer.verify(&token) {
            prop_assert_eq!(caller.subject, "admin");
            prop_assert_eq!(caller.project_id, "p");
        }
    }
}
