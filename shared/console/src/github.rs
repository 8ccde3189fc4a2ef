//! GitHub (and GitHub Enterprise) login, as upstream's `pkg/oauth/github`: `POST
//! /auth/login` sends the browser to GitHub's authorize page asking for `read:org`;
//! `GET /auth/callback` trades the code for an access token, reads the user and their
//! teams, and maps each team `org/slug` through the project's user groups.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, header};
use http_body_util::Full;
use serde::Deserialize;
use wisp_proto::model;
use wisp_services::web::rbac::sso_roles;
use wisp_services::web::sso_policy::ProviderPolicy;

use crate::oidc::{SsoError, SsoUser};
use crate::provider::ProviderClient;

/// The scope upstream asks for: enough to list the user's teams.
const SCOPE: &str = "read:org";
const GITHUB_WEB: &str = "https://github.com";
const GITHUB_API: &str = "https://api.github.com/";
/// Teams asked for per page, as upstream.
const TEAMS_PER_PAGE: usize = 100;
/// Team pages followed at most. Deviation: upstream reads only the first page, so a
/// member of more than 100 teams could miss the one that grants a role.
const MAX_TEAM_PAGES: usize = 10;
/// GitHub refuses API calls without a user agent.
const USER_AGENT: &str = concat!("wisp/", env!("CARGO_PKG_VERSION"));

/// Where GitHub's web pages (authorize, token) and its REST API live for `settings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// `scheme://host[:port]`, no trailing slash.
    pub web: String,
    /// The REST API's base, ending in `/`.
    pub api: String,
}

impl Endpoints {
    /// github.com, or the GitHub Enterprise server at `base_url` (its API under
    /// `/api/v3/`, as go-github's enterprise client places it).
    pub fn of(
        settings: &model::project_sso_config::GitHub,
        policy: ProviderPolicy,
    ) -> Result<Endpoints, SsoError> {
        let base = settings.base_url.trim();
        if base.is_empty() {
            return Ok(Endpoints {
                web: GITHUB_WEB.to_string(),
                api: GITHUB_API.to_string(),
            });
        }
        let uri: http::Uri = base.parse().map_err(|_| {
            SsoError::config(format!(
                "the project's GitHub base URL {base:?} is not a URL"
            ))
        })?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(SsoError::config(format!(
                "the project's GitHub base URL {base:?} needs a scheme and a host"
            )));
        };
        if !crate::oidc::provider_url_allowed(base, policy) {
            return Err(SsoError::config(
                "the project's GitHub base URL must be an https:// address to a public host \
                 (unless the operator allows private ones)"
                    .to_string(),
            ));
        }
        let mut api = base.to_string();
        if !api.ends_with('/') {
            api.push('/');
        }
        if !api.ends_with("/api/v3/") {
            api.push_str("api/v3/");
        }
        Ok(Endpoints {
            web: format!("{scheme}://{authority}"),
            api,
        })
    }
}

/// Where to send the browser: GitHub's authorize page. `redirect_uri` is the control
/// plane's callback (`<address>/auth/callback?project=<id>`); without it GitHub uses the
/// OAuth app's registered callback URL.
pub fn authorization_url(
    settings: &model::project_sso_config::GitHub,
    client_id: &str,
    redirect_uri: Option<&str>,
    state: &str,
    policy: ProviderPolicy,
) -> Result<String, SsoError> {
    let endpoints = Endpoints::of(settings, policy)?;
    let mut query = form_urlencoded::Serializer::new(String::new());
    query
        .append_pair("client_id", client_id)
        .append_pair("response_type", "code")
        .append_pair("scope", SCOPE)
        .append_pair("state", state)
        .append_pair("approval_prompt", "force")
        .append_pair("access_type", "online");
    if let Some(uri) = redirect_uri {
        query.append_pair("redirect_uri", uri);
    }
    Ok(format!(
        "{}/login/oauth/authorize?{}",
        endpoints.web,
        query.finish()
    ))
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_description: String,
}

#[derive(Deserialize)]
struct User {
    login: String,
    #[serde(default)]
    avatar_url: String,
}

#[derive(Deserialize)]
struct Team {
    #[serde(default)]
    slug: String,
    #[serde(default)]
    organization: Option<Organization>,
}

#[derive(Deserialize)]
struct Organization {
    #[serde(default)]
    login: String,
}

/// Talks to GitHub for a login.
pub struct GithubClient {
    http: ProviderClient,
    endpoints: Endpoints,
}

impl std::fmt::Debug for GithubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubClient").finish_non_exhaustive()
    }
}

impl GithubClient {
    pub fn new(
        settings: &model::project_sso_config::GitHub,
        policy: ProviderPolicy,
    ) -> Result<Self, SsoError> {
        Ok(GithubClient {
            http: ProviderClient::new(&settings.proxy_url, policy)?,
            endpoints: Endpoints::of(settings, policy)?,
        })
    }

    /// Trades `code` for a token, then reads the user and their teams and decides
    /// their roles in `project`.
    pub async fn user(
        &self,
        client_id: &str,
        client_secret: &str,
        code: &str,
        redirect_uri: Option<&str>,
        project: &model::Project,
    ) -> Result<SsoUser, SsoError> {
        let token = self
            .exchange(client_id, client_secret, code, redirect_uri)
            .await?;
        let auth = [
            (header::AUTHORIZATION, format!("Bearer {token}")),
            (header::USER_AGENT, USER_AGENT.to_string()),
        ];
        let (_, user): (_, User) = self
            .http
            .get_json(&format!("{}user", self.endpoints.api), &auth)
            .await?;
        let mut teams = Vec::new();
        let mut next = Some(format!(
            "{}user/teams?per_page={TEAMS_PER_PAGE}",
            self.endpoints.api
        ));
        for _ in 0..MAX_TEAM_PAGES {
            let Some(url) = next.take() else { break };
            let (headers, page): (_, Vec<Team>) = self.http.get_json(&url, &auth).await?;
            teams.extend(page.into_iter().filter_map(|t| {
                let org = t.organization.map(|o| o.login).unwrap_or_default();
                (!org.is_empty() && !t.slug.is_empty()).then(|| format!("{org}/{}", t.slug))
            }));
            // Only a next page on the same API is followed: the token goes nowhere else.
            next = next_link(&headers).filter(|u| u.starts_with(&self.endpoints.api));
        }
        user_from_teams(&user.login, &user.avatar_url, &teams, project)
    }

    async fn exchange(
        &self,
        client_id: &str,
        client_secret: &str,
        code: &str,
        redirect_uri: Option<&str>,
    ) -> Result<String, SsoError> {
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("client_id", client_id)
                .append_pair("client_secret", client_secret)
                .append_pair("code", code);
            if let Some(uri) = redirect_uri {
                form.append_pair("redirect_uri", uri);
            }
            form.finish()
        };
        let req = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/login/oauth/access_token", self.endpoints.web))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, USER_AGENT)
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| SsoError::config_from("GitHub token URL", e))?;
        let (_, body) = self.http.call(req).await?;
        let answer: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|e| SsoError::provider_from("GitHub's token answer", e))?;
        // GitHub answers a refused code with 200 and an `error`.
        if !answer.error.is_empty() {
            let why = if answer.error_description.is_empty() {
                answer.error
            } else {
                answer.error_description
            };
            return Err(SsoError::token(why));
        }
        if answer.access_token.is_empty() {
            return Err(SsoError::token("GitHub gave no access token"));
        }
        Ok(answer.access_token)
    }
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::LINK)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|part| {
            let (url, params) = part.split_once(';')?;
            params
                .split(';')
                .any(|p| p.trim() == "rel=\"next\"")
                .then(|| {
                    url.trim()
                        .trim_start_matches('<')
                        .trim_end_matches('>')
                        .to_string()
                })
        })
}

/// Upstream's role decision: each team `org/slug` the project maps under its user groups
/// (or names in its older admin/editor/viewer team settings) gives that role; with none,
/// `allow_stray_as_viewer` makes the user a Viewer, otherwise the login is refused.
pub fn user_from_teams(
    login: &str,
    avatar_url: &str,
    teams: &[String],
    project: &model::Project,
) -> Result<SsoUser, SsoError> {
    if login.is_empty() {
        return Err(SsoError::Denied("GitHub gave no user name".into()));
    }
    let Some(roles) = sso_roles(project, teams, false) else {
        return Err(SsoError::Denied(format!(
            "{login} is in none of the {} GitHub teams project {} maps to a role",
            teams.len(),
            project.id
        )));
    };
    Ok(SsoUser {
        username: login.to_string(),
        avatar_url: avatar_url.to_string(),
        roles,
        groups: teams.to_vec(),
        role_names: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(base_url: &str) -> model::project_sso_config::GitHub {
        model::project_sso_config::GitHub {
            base_url: base_url.into(),
            ..Default::default()
        }
    }

    #[test]
    fn endpoints_follow_github_or_the_enterprise_base_url() {
        assert_eq!(
            Endpoints::of(&settings(""), ProviderPolicy::default()).expect("github.com"),
            Endpoints {
                web: "https://github.com".into(),
                api: "https://api.github.com/".into()
            }
        );
        for base in [
            "https://ghe.corp",
            "https://ghe.corp/",
            "https://ghe.corp/api/v3/",
        ] {
            assert_eq!(
                Endpoints::of(&settings(base), ProviderPolicy::default()).expect(base),
                Endpoints {
                    web: "https://ghe.corp".into(),
                    api: "https://ghe.corp/api/v3/".into()
                },
                "{base}"
            );
        }
        assert!(matches!(
            Endpoints::of(&settings("ghe.corp"), ProviderPolicy::default()),
            Err(SsoError::Config { .. })
        ));
    }

    #[test]
    fn the_authorize_url_asks_for_read_org_with_the_state() {
        let url = authorization_url(
            &settings("http://127.0.0.1:9/"),
            "cid",
            Some("https://wisp.example/auth/callback?project=p"),
            "st",
            ProviderPolicy {
                allow_private: true,
            },
        )
        .expect("url");
        assert!(
            url.starts_with("http://127.0.0.1:9/login/oauth/authorize?"),
            "{url}"
        );
        for part in [
            "client_id=cid",
            "scope=read%3Aorg",
            "state=st",
            "redirect_uri=https%3A%2F%2Fwisp.example%2Fauth%2Fcallback%3Fproject%3Dp",
        ] {
            assert!(url.contains(part), "{part} in {url}");
        }
        let url = authorization_url(&settings(""), "cid", None, "st", ProviderPolicy::default())
            .expect("url");
        assert!(!url.contains("redirect_uri"), "{url}");
    }

    #[test]
    fn teams_map_through_user_groups_and_legacy_settings() {
        let project = model::Project {
            id: "p".into(),
            user_groups: vec![model::ProjectUserGroup {
                sso_group: "acme/ops".into(),
                role: "Editor".into(),
            }],
            rbac: Some(model::ProjectRbacConfig {
                admin: "acme/root".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let teams = ["acme/ops".to_string(), "acme/root".into(), "other/x".into()];
        let user = user_from_teams("ann", "a.png", &teams, &project).expect("user");
        assert_eq!(user.roles, vec!["Editor".to_string(), "Admin".to_string()]);

        let refused = user_from_teams("bob", "", &["other/x".to_string()], &project);
        assert!(matches!(refused, Err(SsoError::Denied(m)) if m.contains("bob")));
        let stray = model::Project {
            allow_stray_as_viewer: true,
            ..project
        };
        let user = user_from_teams("bob", "", &[], &stray).expect("viewer");
        assert_eq!(user.roles, vec!["Viewer".to_string()]);
    }

    #[test]
    fn the_next_page_comes_from_the_link_header() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::LINK,
            http::HeaderValue::from_static(
                "<https://api.github.com/user/teams?page=2>; rel=\"next\", <https://api.github.com/user/teams?page=5>; rel=\"last\"",
            ),
        );
        assert_eq!(
            next_link(&headers).as_deref(),
            Some("https://api.github.com/user/teams?page=2")
        );
        assert_eq!(next_link(&HeaderMap::new()), None);
    }
}
