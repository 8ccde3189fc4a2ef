//! Reading credentials out of request metadata.
//!
//! * `authorization: PIPED-TOKEN <project>,<piped>,<key>` (PipedService),
//! * `authorization: API-KEY <id>.<secret>` (APIService),
//! * `authorization: ID-TOKEN <jwt>` (recognised, as upstream),
//! * `cookie: token=<jwt>; ...` (WebService).
//!
//! Every type that holds a key, a secret or a token prints it as `<redacted>` in `Debug`
//! and has no `Display`.

use std::fmt;
use std::str::FromStr;

use crate::error::{AuthError, PipedTokenPart, Reason};

const REDACTED: &str = "<redacted>";

/// The `<TYPE>` word of an `authorization` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialsType {
    /// `ID-TOKEN`: a web user's JWT.
    IdToken,
    /// `PIPED-TOKEN`: a piped's `<project>,<piped>,<key>`.
    PipedToken,
    /// `API-KEY`: pipectl's `<id>.<secret>`.
    ApiKey,
}

impl CredentialsType {
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialsType::IdToken => "ID-TOKEN",
            CredentialsType::PipedToken => "PIPED-TOKEN",
            CredentialsType::ApiKey => "API-KEY",
        }
    }

    fn from_scheme(scheme: &str) -> Option<Self> {
        match scheme {
            "ID-TOKEN" => Some(CredentialsType::IdToken),
            "PIPED-TOKEN" => Some(CredentialsType::PipedToken),
            "API-KEY" => Some(CredentialsType::ApiKey),
            _ => None,
        }
    }
}

impl fmt::Display for CredentialsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A piped's credentials: `<project>,<piped>,<key>`.
#[derive(Clone, PartialEq, Eq)]
pub struct PipedToken {
    pub project_id: String,
    pub piped_id: String,
    piped_key: String,
}

impl PipedToken {
    pub fn new(
        project_id: impl Into<String>,
        piped_id: impl Into<String>,
        piped_key: impl Into<String>,
    ) -> Self {
        PipedToken {
            project_id: project_id.into(),
            piped_id: piped_id.into(),
            piped_key: piped_key.into(),
        }
    }

    /// The plaintext piped key. Never log it.
    pub fn piped_key(&self) -> &str {
        &self.piped_key
    }

    /// `PIPED-TOKEN <project>,<piped>,<key>`: what a piped sends (for clients and tests).
    pub fn to_authorization_value(&self) -> String {
        format!(
            "{} {}",
            CredentialsType::PipedToken,
            make_piped_token(&self.project_id, &self.piped_id, &self.piped_key)
        )
    }
}

impl fmt::Debug for PipedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipedToken")
            .field("project_id", &self.project_id)
            .field("piped_id", &self.piped_id)
            .field("piped_key", &REDACTED)
            .finish()
    }
}

/// Parses the data part of a piped token, `<project>,<piped>,<key>`. Each part is trimmed
/// and must not be empty.
impl FromStr for PipedToken {
    type Err = AuthError;

    fn from_str(data: &str) -> Result<Self, Self::Err> {
        let malformed = |part| AuthError::Unauthenticated(Reason::MalformedPipedToken(part));
        let mut parts = data.split(',');
        let (Some(project_id), Some(piped_id), Some(piped_key), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed(PipedTokenPart::Shape));
        };
        let (project_id, piped_id, piped_key) =
            (project_id.trim(), piped_id.trim(), piped_key.trim());
        if project_id.is_empty() {
            return Err(malformed(PipedTokenPart::ProjectId));
        }
        if piped_id.is_empty() {
            return Err(malformed(PipedTokenPart::PipedId));
        }
        if piped_key.is_empty() {
            return Err(malformed(PipedTokenPart::PipedKey));
        }
        Ok(PipedToken::new(project_id, piped_id, piped_key))
    }
}

/// `<project>,<piped>,<key>` (upstream `MakePipedToken`).
pub fn make_piped_token(project_id: &str, piped_id: &str, piped_key: &str) -> String {
    format!("{project_id},{piped_id},{piped_key}")
}

/// An API key as presented: `<id>.<secret>`. `key` is the full string (it is what is
/// bcrypt-hashed); `id` is the part before the dot, used for the lookup.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeyCredential {
    pub id: String,
    key: String,
}

impl ApiKeyCredential {
    /// The full `<id>.<secret>` string. Never log it.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// `API-KEY <id>.<secret>`: what pipectl sends (for clients and tests).
    pub fn to_authorization_value(&self) -> String {
        format!("{} {}", CredentialsType::ApiKey, self.key)
    }
}

impl fmt::Debug for ApiKeyCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyCredential")
            .field("id", &self.id)
            .field("key", &REDACTED)
            .finish()
    }
}

/// Parses `<id>.<secret>` (upstream `ExtractAPIKeyID`: exactly one dot, both sides
/// non-empty). Surrounding whitespace is ignored.
impl FromStr for ApiKeyCredential {
    type Err = AuthError;

    fn from_str(data: &str) -> Result<Self, Self::Err> {
        let key = data.trim();
        let malformed = || AuthError::Unauthenticated(Reason::MalformedApiKey);
        let (id, secret) = key.split_once('.').ok_or_else(malformed)?;
        if id.is_empty() || secret.is_empty() || secret.contains('.') {
            return Err(malformed());
        }
        Ok(ApiKeyCredential {
            id: id.to_owned(),
            key: key.to_owned(),
        })
    }
}

/// A web user's JWT, from `ID-TOKEN <jwt>` or the `token` cookie. Not verified here.
#[derive(Clone, PartialEq, Eq)]
pub struct IdToken(String);

impl IdToken {
    pub fn new(token: impl Into<String>) -> Self {
        IdToken(token.into())
    }

    /// The raw JWT. Never log it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for IdToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IdToken").field(&REDACTED).finish()
    }
}

/// Parsed `authorization` credentials, by type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    IdToken(IdToken),
    PipedToken(PipedToken),
    ApiKey(ApiKeyCredential),
}

impl Credentials {
    pub fn credentials_type(&self) -> CredentialsType {
        match self {
            Credentials::IdToken(_) => CredentialsType::IdToken,
            Credentials::PipedToken(_) => CredentialsType::PipedToken,
            Credentials::ApiKey(_) => CredentialsType::ApiKey,
        }
    }
}

/// Splits an `authorization` value into its type and data, as upstream: `<TYPE> <data>`
/// with a non-empty data part and no further spaces. Surrounding whitespace is ignored.
pub fn split_authorization(header: Option<&str>) -> Result<(CredentialsType, &str), AuthError> {
    let raw = header.ok_or(AuthError::MissingCredentials)?.trim();
    let (scheme, data) = raw
        .split_once(|c: char| c.is_ascii_whitespace())
        .ok_or(AuthError::MalformedCredentials)?;
    let data = data.trim();
    if data.is_empty() || data.contains(|c: char| c.is_ascii_whitespace()) {
        return Err(AuthError::MalformedCredentials);
    }
    let kind = CredentialsType::from_scheme(scheme).ok_or(AuthError::UnsupportedCredentialsType)?;
    Ok((kind, data))
}

/// Parses an `authorization` value of any supported type.
pub fn parse_authorization(header: Option<&str>) -> Result<Credentials, AuthError> {
    let (kind, data) = split_authorization(header)?;
    Ok(match kind {
        CredentialsType::IdToken => Credentials::IdToken(IdToken::new(data)),
        CredentialsType::PipedToken => Credentials::PipedToken(data.parse()?),
        CredentialsType::ApiKey => Credentials::ApiKey(data.parse()?),
    })
}

fn expect_type(got: CredentialsType, expected: CredentialsType) -> Result<(), AuthError> {
    if got == expected {
        Ok(())
    } else {
        Err(AuthError::Unauthenticated(Reason::WrongCredentialsType {
            expected,
            got,
        }))
    }
}

/// Parses an `authorization` value that must be `PIPED-TOKEN <project>,<piped>,<key>`.
pub fn parse_piped_token(header: Option<&str>) -> Result<PipedToken, AuthError> {
    let (kind, data) = split_authorization(header)?;
    expect_type(kind, CredentialsType::PipedToken)?;
    data.parse()
}

/// Parses an `authorization` value that must be `API-KEY <id>.<secret>`.
pub fn parse_api_key(header: Option<&str>) -> Result<ApiKeyCredential, AuthError> {
    let (kind, data) = split_authorization(header)?;
    expect_type(kind, CredentialsType::ApiKey)?;
    data.parse()
}

/// Parses an HTTP `Authorization: Bearer <project>,<piped>,<key>` (Envoy ext_authz style).
pub fn parse_bearer_piped_token(header: Option<&str>) -> Result<PipedToken, AuthError> {
    let raw = header.ok_or(AuthError::MissingCredentials)?.trim();
    let data = raw
        .strip_prefix("Bearer ")
        .ok_or(AuthError::UnsupportedCredentialsType)?;
    data.parse()
}

/// The name of the cookie that carries the web session JWT.
pub const TOKEN_COOKIE: &str = "token";

/// The value of cookie `name` in one `cookie` header (`a=b; c=d=e`), if any. Values may
/// contain `=`; entries without `=` are skipped; the first match wins.
pub fn find_cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|entry| {
        let (key, value) = entry.trim().split_once('=')?;
        (key.trim() == name).then(|| value.trim())
    })
}

/// Finds the `token` cookie among the `cookie` values of a request (HTTP/2 clients may
/// split cookies over several values; an `Option<&str>` works too).
///
/// No value at all is [`AuthError::MissingCookie`]; values without a non-empty `token`
/// entry are `Unauthenticated(MissingTokenCookie)`.
pub fn parse_cookie_token<'a, I>(cookie_headers: I) -> Result<IdToken, AuthError>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut seen = false;
    for header in cookie_headers {
        seen = true;
        if let Some(token) = find_cookie(header, TOKEN_COOKIE).filter(|t| !t.is_empty()) {
            return Ok(IdToken::new(token));
        }
    }
    if seen {
        Err(AuthError::Unauthenticated(Reason::MissingTokenCookie))
    } else {
        Err(AuthError::MissingCookie)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn malformed_piped(part: PipedTokenPart) -> AuthError {
        AuthError::Unauthenticated(Reason::MalformedPipedToken(part))
    }

    #[test]
    fn make_piped_token_joins_with_commas() {
        assert_eq!(
            make_piped_token("test-project-id", "test-piped-id", "test-piped-key"),
            "test-project-id,test-piped-id,test-piped-key"
        );
        assert_eq!(
            make_piped_token("", "test-piped-id", "test-piped-key"),
            ",test-piped-id,test-piped-key"
        );
    }

    #[test]
    fn piped_token_data() {
        let ok: PipedToken = "test-project-id,test-piped-id,test-piped-key"
            .parse()
            .expect("valid token");
        assert_eq!(ok.project_id, "test-project-id");
        assert_eq!(ok.piped_id, "test-piped-id");
        assert_eq!(ok.piped_key(), "test-piped-key");

        let cases = [
            ("", PipedTokenPart::Shape),
            ("a,b", PipedTokenPart::Shape),
            ("a,b,c,d", PipedTokenPart::Shape),
            (",test-piped-id,test-piped-key", PipedTokenPart::ProjectId),
            ("test-project-id,,test-piped-key", PipedTokenPart::PipedId),
            ("test-project-id,test-piped-id,", PipedTokenPart::PipedKey),
            ("p, ,k", PipedTokenPart::PipedId),
        ];
        for (data, part) in cases {
            assert_eq!(
                data.parse::<PipedToken>(),
                Err(malformed_piped(part)),
                "{data:?}"
            );
        }
    }

    #[test]
    fn piped_token_parts_are_trimmed() {
        let t: PipedToken = " p , x , k\n".parse().expect("valid token");
        assert_eq!(t, PipedToken::new("p", "x", "k"));
    }

    #[test]
    fn malformed_piped_token_messages_match_upstream() {
        let msg = |data: &str| match data.parse::<PipedToken>() {
            Err(AuthError::Unauthenticated(r)) => r.to_string(),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(msg("x"), "malformed piped token");
        assert_eq!(msg(",b,c"), "malformed piped token: projectID was empty");
        assert_eq!(msg("a,,c"), "malformed piped token: pipedID was empty");
        assert_eq!(msg("a,b,"), "malformed piped token: pipedKey was empty");
    }

    #[test]
    fn authorization_header_cases() {
        // Upstream TestExtractToken, plus a few of ours.
        assert_eq!(
            parse_authorization(None),
            Err(AuthError::MissingCredentials)
        );
        assert_eq!(
            parse_authorization(Some("")),
            Err(AuthError::MalformedCredentials)
        );
        assert_eq!(
            parse_authorization(Some("token")),
            Err(AuthError::MalformedCredentials)
        );
        assert_eq!(
            parse_authorization(Some("ID-TOKEN ")),
            Err(AuthError::MalformedCredentials)
        );
        assert_eq!(
            parse_authorization(Some("ID-TOKEN a b")),
            Err(AuthError::MalformedCredentials)
        );
        assert_eq!(
            parse_authorization(Some("BASIC abc")),
            Err(AuthError::UnsupportedCredentialsType)
        );
        assert_eq!(
            parse_authorization(Some("piped-token p,x,k")),
            Err(AuthError::UnsupportedCredentialsType)
        );
        assert_eq!(
            parse_authorization(Some("ID-TOKEN token")),
            Ok(Credentials::IdToken(IdToken::new("token")))
        );
        assert_eq!(
            parse_authorization(Some("PIPED-TOKEN p,x,k")),
            Ok(Credentials::PipedToken(PipedToken::new("p", "x", "k")))
        );
        // The client trims the token; we trim the value too.
        assert_eq!(
            parse_authorization(Some("  PIPED-TOKEN p,x,k\n")),
            Ok(Credentials::PipedToken(PipedToken::new("p", "x", "k")))
        );
        let api = parse_authorization(Some("API-KEY id.secret")).expect("api key");
        assert_eq!(api.credentials_type(), CredentialsType::ApiKey);
        // Upstream accepts `PIPED-TOKEN key` at the header level and fails at the token.
        assert_eq!(
            parse_authorization(Some("PIPED-TOKEN key")),
            Err(malformed_piped(PipedTokenPart::Shape))
        );
    }

    #[test]
    fn header_level_messages_match_upstream() {
        assert_eq!(
            AuthError::MissingCredentials.to_string(),
            "missing credentials in authorization"
        );
        assert_eq!(
            AuthError::MalformedCredentials.to_string(),
            "credentials is malformed"
        );
        assert_eq!(
            AuthError::UnsupportedCredentialsType.to_string(),
            "unsupported credentials type"
        );
        assert_eq!(AuthError::MissingCookie.to_string(), "missing cookie");
        assert_eq!(
            AuthError::Unauthenticated(Reason::MalformedApiKey).client_message(),
            "Unauthenticated"
        );
    }

    #[test]
    fn typed_parsers_reject_other_types() {
        assert_eq!(
            parse_piped_token(Some("API-KEY id.secret")),
            Err(AuthError::Unauthenticated(Reason::WrongCredentialsType {
                expected: CredentialsType::PipedToken,
                got: CredentialsType::ApiKey,
            }))
        );
        assert_eq!(
            parse_api_key(Some("PIPED-TOKEN p,x,k")),
            Err(AuthError::Unauthenticated(Reason::WrongCredentialsType {
                expected: CredentialsType::ApiKey,
                got: CredentialsType::PipedToken,
            }))
        );
        assert_eq!(
            parse_piped_token(Some("PIPED-TOKEN p,x,k")),
            Ok(PipedToken::new("p", "x", "k"))
        );
        assert_eq!(parse_piped_token(None), Err(AuthError::MissingCredentials));
    }

    #[test]
    fn api_key_cases() {
        let id = "0b7e2f6c-9a35-4c47-8c0f-1d2e3f4a5b6c";
        let full = format!("{id}.abcdefghijklmnopqrstuvwxyz012345");
        let cred = parse_api_key(Some(&format!("API-KEY {full}"))).expect("api key");
        assert_eq!(cred.id, id);
        assert_eq!(cred.key(), full);
        assert_eq!(cred.to_authorization_value(), format!("API-KEY {full}"));

        for bad in ["nodot", ".secret", "id.", "a.b.c", "."] {
            assert_eq!(
                bad.parse::<ApiKeyCredential>(),
                Err(AuthError::Unauthenticated(Reason::MalformedApiKey)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn bearer_piped_token() {
        assert_eq!(
            parse_bearer_piped_token(Some("Bearer p,x,k")),
            Ok(PipedToken::new("p", "x", "k"))
        );
        assert_eq!(
            parse_bearer_piped_token(Some("Basic abc")),
            Err(AuthError::UnsupportedCredentialsType)
        );
        assert_eq!(
            parse_bearer_piped_token(None),
            Err(AuthError::MissingCredentials)
        );
    }

    #[test]
    fn cookie_cases() {
        // Upstream TestExtractCookie.
        assert_eq!(parse_cookie_token(None), Err(AuthError::MissingCookie));
        assert_eq!(
            parse_cookie_token(Vec::<&str>::new()),
            Err(AuthError::MissingCookie)
        );
        assert_eq!(
            find_cookie("token=xxx; another=yyy=zzz", "another"),
            Some("yyy=zzz")
        );
        assert_eq!(
            find_cookie("token=xxx; another=yyy", "another"),
            Some("yyy")
        );
        assert_eq!(
            parse_cookie_token(Some("token=xxx; another=yyy=zzz")),
            Ok(IdToken::new("xxx"))
        );
        // JWTs with padding-like '=' survive; entries without '=' are skipped (upstream
        // panics on them).
        assert_eq!(
            parse_cookie_token(Some("flag; a=b;token=eyJ.x.y==")),
            Ok(IdToken::new("eyJ.x.y=="))
        );
        assert_eq!(
            parse_cookie_token(Some("mytoken=a; tokens=b")),
            Err(AuthError::Unauthenticated(Reason::MissingTokenCookie))
        );
        assert_eq!(
            parse_cookie_token(Some("token=")),
            Err(AuthError::Unauthenticated(Reason::MissingTokenCookie))
        );
        // Several cookie values (HTTP/2 crumbs).
        assert_eq!(
            parse_cookie_token(["a=b", "c=d; token=jwt"]),
            Ok(IdToken::new("jwt"))
        );
    }

    #[test]
    fn debug_never_prints_secrets() {
        let piped = PipedToken::new("proj", "piped", "supersecretpipedkey");
        let api: ApiKeyCredential = "kid.supersecretapikey".parse().expect("api key");
        let id = IdToken::new("supersecretjwt");
        let all = format!(
            "{piped:?} {api:?} {id:?} {:?} {:?}",
            Credentials::PipedToken(piped.clone()),
            Credentials::ApiKey(api.clone())
        );
        assert!(!all.contains("supersecret"), "{all}");
        assert!(all.contains("proj") && all.contains("piped") && all.contains("kid"));
        assert!(all.contains("<redacted>"));
    }

    #[test]
    fn authorization_value_round_trip() {
        let t = PipedToken::new("p", "x", "k");
        assert_eq!(t.to_authorization_value(), "PIPED-TOKEN p,x,k");
        assert_eq!(parse_piped_token(Some(&t.to_authorization_value())), Ok(t));
    }
}
