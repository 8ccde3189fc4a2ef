//! Credentials are the first thing a stranger sends: well-formed credentials parse back
//! to their parts, any `authorization` header, cookie header, session token or SSO state
//! ticket parses or is refused as an authentication failure, and a forged or altered
//! token never verifies. Each target prints how many inputs reach each assertion
//! (`--nocapture`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use wisp_auth::{
    AuthError, Credentials, PipedToken, Reason, SessionSigner, SsoStateSigner, WebCaller,
    parse_api_key, parse_authorization, parse_cookie_token, parse_piped_token,
};
use wisp_reach::Reach;

fn header_like() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,120}",
        "(PIPED-TOKEN|API-KEY|ID-TOKEN|Bearer)? ?[ -~]{0,80}",
        "PIPED-TOKEN [a-z0-9,]{0,60}",
        "API-KEY [a-f0-9-]{0,36}\\.?[a-z0-9.]{0,40}",
        // Nearly well-formed: odd spacing, odd characters in the parts.
        "[ \t]?PIPED-TOKEN[ \t]{1,2}[!-+\\--~]{1,8},[!-+\\--~]{1,8},[!-+\\--~]{1,8}[ \t]?",
        "[ \t]?API-KEY[ \t]{1,2}[!--/-~]{1,12}\\.[!--/-~]{1,12}[ \t]?",
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

/// A parse error is an authentication failure, never `Unavailable` (which tells a piped
/// to retry the same bad credentials).
fn is_refusal(e: &AuthError) -> bool {
    !matches!(e, AuthError::Unavailable(_))
}

/// Parts of a credential as clients make them: no commas, dots or whitespace.
fn part() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_-]{1,24}"
}

#[derive(Debug, Clone)]
enum Header {
    Piped(String, String, String),
    ApiKey(String, String),
    Hostile(String),
}

#[test]
fn authorization_headers_round_trip_or_are_refused() {
    let inputs = prop_oneof![
        2 => (part(), part(), part()).prop_map(|(p, i, k)| Header::Piped(p, i, k)),
        2 => (part(), part()).prop_map(|(i, s)| Header::ApiKey(i, s)),
        3 => header_like().prop_map(Header::Hostile),
    ];
    Reach::new("auth: authorization headers", file!())
        .at_least("piped token: parts back, refused as an API key", 0.2)
        .at_least("API key: id and key back, refused as a piped token", 0.2)
        .at_least("hostile: refused", 0.1)
        .at_least(
            "hostile: parsed, and its own rendering parses the same",
            0.02,
        )
        .in_all_at_least(1.0)
        .run(inputs, |header| {
            Ok(Some(match header {
                Header::Piped(project, piped, key) => {
                    let value = format!(" PIPED-TOKEN  {project},{piped},{key} ");
                    let token = parse_piped_token(Some(&value)).unwrap();
                    prop_assert_eq!(&token, &PipedToken::new(project, piped, key));
                    prop_assert_eq!(
                        parse_authorization(Some(&value)).unwrap(),
                        Credentials::PipedToken(token)
                    );
                    let err = parse_api_key(Some(&value)).unwrap_err();
                    prop_assert!(
                        matches!(
                            err,
                            AuthError::Unauthenticated(Reason::WrongCredentialsType { .. })
                        ),
                        "{:?}",
                        err
                    );
                    "piped token: parts back, refused as an API key"
                }
                Header::ApiKey(id, secret) => {
                    let value = format!("API-KEY {id}.{secret}");
                    let key = parse_api_key(Some(&value)).unwrap();
                    prop_assert_eq!(&key.id, &id);
                    prop_assert_eq!(key.key(), format!("{id}.{secret}"));
                    prop_assert_eq!(key.to_authorization_value(), value.clone());
                    let err = parse_piped_token(Some(&value)).unwrap_err();
                    prop_assert!(
                        matches!(
                            err,
                            AuthError::Unauthenticated(Reason::WrongCredentialsType { .. })
                        ),
                        "{:?}",
                        err
                    );
                    "API key: id and key back, refused as a piped token"
                }
                Header::Hostile(value) => {
                    let mut parsed = false;
                    match parse_piped_token(Some(&value)) {
                        Ok(token) => {
                            parsed = true;
                            let again = parse_piped_token(Some(&token.to_authorization_value()));
                            prop_assert_eq!(again.as_ref(), Ok(&token));
                        }
                        Err(e) => prop_assert!(is_refusal(&e), "{:?}", e),
                    }
                    match parse_api_key(Some(&value)) {
                        Ok(key) => {
                            parsed = true;
                            let again = parse_api_key(Some(&key.to_authorization_value()));
                            prop_assert_eq!(again.as_ref(), Ok(&key));
                            let prefix = format!("{}.", key.id);
                            prop_assert!(key.key().starts_with(&prefix));
                        }
                        Err(e) => prop_assert!(is_refusal(&e), "{:?}", e),
                    }
                    if let Err(e) = parse_authorization(Some(&value)) {
                        prop_assert!(is_refusal(&e), "{:?}", e);
                    }
                    if parsed {
                        "hostile: parsed, and its own rendering parses the same"
                    } else {
                        "hostile: refused"
                    }
                }
            }))
        });
}

#[test]
fn the_token_cookie_is_found_among_others_or_refused() {
    let other = "[a-su-z][a-z]{0,6}=[!-:<-~]{0,12}";
    let inputs = prop_oneof![
        2 => (
            proptest::collection::vec(other, 0..4),
            "[A-Za-z0-9._-]{1,40}",
            any::<prop::sample::Index>(),
            any::<bool>(),
        )
            .prop_map(|(mut cookies, token, at, split)| {
                let i = at.index(cookies.len() + 1);
                cookies.insert(i, format!("token={token}"));
                let headers = if split {
                    cookies
                } else {
                    vec![cookies.join("; ")]
                };
                (headers, Some(token))
            }),
        1 => proptest::collection::vec("[ -~]{0,80}", 0..4).prop_map(|h| (h, None)),
    ];
    Reach::new("auth: cookie headers", file!())
        .at_least("token found among other cookies", 0.3)
        .at_least("hostile: refused with the right error", 0.1)
        .in_all_at_least(1.0)
        .run(inputs, |(headers, token)| {
            let result = parse_cookie_token(headers.iter().map(String::as_str));
            Ok(Some(match (token, result) {
                (Some(token), result) => {
                    prop_assert_eq!(result.map(|t| t.as_str().to_owned()), Ok(token));
                    "token found among other cookies"
                }
                (None, Ok(found)) => {
                    let found = found.as_str();
                    prop_assert!(!found.is_empty() && !found.contains(';'));
                    prop_assert_eq!(found.trim(), found);
                    prop_assert!(headers.iter().any(|h| h.contains(found)));
                    "hostile: a token found in them"
                }
                (None, Err(e)) => {
                    if headers.is_empty() {
                        prop_assert_eq!(e, AuthError::MissingCookie);
                    } else {
                        prop_assert_eq!(e, AuthError::Unauthenticated(Reason::MissingTokenCookie));
                    }
                    "hostile: refused with the right error"
                }
            }))
        });
}

proptest! {
    #[test]
    fn any_text_is_no_session(token in ".{0,300}") {
        prop_assert!(SessionSigner::new(&[3u8; 32]).verify(&token).is_err());
        prop_assert!(SsoStateSigner::new(&[3u8; 32]).open(&token, "").is_err());
    }
}

#[test]
fn an_altered_session_never_verifies() {
    let signer = SessionSigner::new(&[3u8; 32]);
    Reach::new("auth: altered session tokens", file!())
        .at_least("refused as unauthenticated", 0.9)
        .in_all_at_least(1.0)
        .run(altered(session_token()), |token| {
            Ok(Some(match signer.verify(&token) {
                // JWT segments are base64url without padding: some changes decode to the
                // same bytes (the spare bits of the last character); only those may
                // verify, and then as the same caller.
                Ok(caller) => {
                    prop_assert_eq!(caller.subject, "admin");
                    prop_assert_eq!(caller.project_id, "p");
                    "the same bytes: the same caller"
                }
                Err(e) => {
                    prop_assert!(matches!(e, AuthError::Unauthenticated(_)), "{:?}", e);
                    "refused as unauthenticated"
                }
            }))
        });
}
