//! Which imported projects' SSO logins behave differently on Wisp than on upstream, so
//! that `wisp import pipecd` can say so before anyone is locked out.
//!
//! Wisp's OpenID Connect logins follow upstream's (UserInfo claims merged, upstream's
//! default role claims without `rolesClaimKey`, the advertised algorithms, Basic client
//! authentication), with these differences, each a project can hit:
//! - a project in Wisp's `oidcNoDefaultRoleClaims` without a `rolesClaimKey` reads no
//!   role claim: its SSO users cannot log in (Viewers when it allows strays);
//! - a user whose role claims name none of the project's roles or mapped groups cannot
//!   log in (upstream lets them in with no role), unless the project allows strays;
//! - a project naming a shared SSO configuration Wisp's config lacks cannot log in.

use wisp_config::{ControlPlaneSpec, SsoProvider};
use wisp_proto::model;

/// The OIDC settings a project's logins use on Wisp: its own, or the shared
/// configuration it names in Wisp's config. `Err` when it names one Wisp lacks.
fn oidc_settings(
    project: &model::Project,
    wisp: &ControlPlaneSpec,
) -> Result<Option<String>, String> {
    if !project.shared_sso_name.is_empty() {
        let Some(shared) = wisp.shared_sso_config(&project.shared_sso_name) else {
            return Err(format!(
                "it names the shared SSO configuration {:?}, which Wisp's config does not \
                 have (sharedSSOConfigs): every SSO login fails",
                project.shared_sso_name
            ));
        };
        if shared.provider != SsoProvider::Oidc {
            return Ok(None);
        }
        return Ok(Some(
            shared
                .oidc
                .as_ref()
                .and_then(|o| o.roles_claim_key.clone())
                .unwrap_or_default(),
        ));
    }
    let Some(sso) = &project.sso else {
        return Ok(None);
    };
    if sso.provider != model::project_sso_config::Provider::Oidc as i32 {
        return Ok(None);
    }
    Ok(Some(
        sso.oidc
            .as_ref()
            .map(|o| o.roles_claim_key.clone())
            .unwrap_or_default(),
    ))
}

/// What changes for `project`'s SSO users on Wisp (configured by `wisp`), or `None`.
pub fn change(project: &model::Project, wisp: &ControlPlaneSpec) -> Option<String> {
    let roles_claim_key = match oidc_settings(project, wisp) {
        Err(why) => return Some(why),
        Ok(None) => return None,
        Ok(Some(key)) => key,
    };
    let mut changes = Vec::new();
    if roles_claim_key.trim().is_empty() && !wisp.oidc_default_role_claims(&project.id) {
        changes.push(if project.allow_stray_as_viewer {
            "it sets no rolesClaimKey and Wisp's config opts it out of the default role \
             claims (oidcNoDefaultRoleClaims): every SSO user is a Viewer"
        } else {
            "it sets no rolesClaimKey and Wisp's config opts it out of the default role \
             claims (oidcNoDefaultRoleClaims): no SSO user can log in"
        });
    }
    if !project.allow_stray_as_viewer {
        changes.push(
            "a user whose role claims name none of its roles or mapped groups cannot log in \
             (upstream let them in with no role); allow strays as Viewers to keep them",
        );
    }
    (!changes.is_empty()).then(|| changes.join("; "))
}

/// `(project id, what changes)` for each of `projects` whose SSO logins change.
pub fn changes(projects: &[model::Project], wisp: &ControlPlaneSpec) -> Vec<(String, String)> {
    projects
        .iter()
        .filter_map(|p| change(p, wisp).map(|why| (p.id.clone(), why)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oidc_project(id: &str, roles_claim_key: &str, stray: bool) -> model::Project {
        model::Project {
            id: id.into(),
            allow_stray_as_viewer: stray,
            sso: Some(model::ProjectSsoConfig {
                provider: model::project_sso_config::Provider::Oidc as i32,
                oidc: Some(model::project_sso_config::Oidc {
                    roles_claim_key: roles_claim_key.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn projects_whose_oidc_logins_change_are_named_with_why() {
        let spec = ControlPlaneSpec {
            oidc_no_default_role_claims: vec!["strict".into()],
            ..Default::default()
        };
        let projects = vec![
            oidc_project("same", "groups", true),
            oidc_project("strict", "", false),
            oidc_project("strict-with-key", "groups", true),
            oidc_project("strays-refused", "", false),
            model::Project {
                id: "static-only".into(),
                ..Default::default()
            },
            model::Project {
                id: "shared".into(),
                shared_sso_name: "corp".into(),
                allow_stray_as_viewer: true,
                ..Default::default()
            },
        ];
        let found = changes(&projects, &spec);
        let ids: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["strict", "strays-refused", "shared"]);
        assert!(found[0].1.contains("no SSO user can log in"), "{found:?}");
        assert!(!found[1].1.contains("oidcNoDefaultRoleClaims"), "{found:?}");
        assert!(found[1].1.contains("no role"), "{found:?}");
        assert!(found[2].1.contains("\"corp\""), "{found:?}");
    }
}
