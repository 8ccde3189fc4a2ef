//! RBAC: which resource and action each WebService RPC needs, the built-in roles, and
//! the check upstream's generated `service.pb.auth.go` makes.

use wisp_proto::model::project_rbac_policy::Action;
use wisp_proto::model::project_rbac_resource::ResourceType;
use wisp_proto::model::{Project, ProjectRbacPolicy, ProjectRbacResource, ProjectRbacRole};

use super::{Authorized, WebApi, WebCaller};
use crate::error::ServiceError;

/// What an RPC requires of the caller's roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Any signed-in caller (upstream's `ignored = true`).
    Ignored,
    Policy(ResourceType, Action),
}

use Action::{Create, Delete, Get, List, Update};
use ResourceType::{ApiKey, Application, Deployment, DeploymentChain, Event, Insight, Piped};

/// Every WebService RPC and what it requires (upstream's `(model.rbac)` options).
pub const RPC_REQUIREMENTS: &[(&str, Requirement)] = &[
    ("RegisterPiped", Requirement::Policy(Piped, Create)),
    ("UpdatePiped", Requirement::Policy(Piped, Update)),
    ("RecreatePipedKey", Requirement::Policy(Piped, Update)),
    ("DeleteOldPipedKeys", Requirement::Policy(Piped, Update)),
    ("EnablePiped", Requirement::Policy(Piped, Update)),
    ("DisablePiped", Requirement::Policy(Piped, Update)),
    ("ListPipeds", Requirement::Policy(Piped, List)),
    ("GetPiped", Requirement::Policy(Piped, Get)),
    (
        "UpdatePipedDesiredVersion",
        Requirement::Policy(Piped, Update),
    ),
    ("RestartPiped", Requirement::Policy(Piped, Update)),
    ("ListReleasedVersions", Requirement::Policy(Piped, List)),
    ("ListDeprecatedNotes", Requirement::Policy(Piped, List)),
    ("AddApplication", Requirement::Policy(Application, Create)),
    (
        "UpdateApplication",
        Requirement::Policy(Application, Update),
    ),
    (
        "EnableApplication",
        Requirement::Policy(Application, Update),
    ),
    (
        "DisableApplication",
        Requirement::Policy(Application, Update),
    ),
    (
        "DeleteApplication",
        Requirement::Policy(Application, Delete),
    ),
    ("ListApplications", Requirement::Policy(Application, List)),
    ("SyncApplication", Requirement::Policy(Application, Update)),
    ("GetApplication", Requirement::Policy(Application, Get)),
    (
        "GenerateApplicationSealedSecret",
        Requirement::Policy(Application, Update),
    ),
    (
        "ListUnregisteredApplications",
        Requirement::Policy(Application, List),
    ),
    ("ListDeployments", Requirement::Policy(Deployment, List)),
    ("GetDeployment", Requirement::Policy(Deployment, Get)),
    ("GetStageLog", Requirement::Policy(Deployment, Get)),
    ("CancelDeployment", Requirement::Policy(Deployment, Update)),
    ("SkipStage", Requirement::Policy(Deployment, Update)),
    ("ApproveStage", Requirement::Policy(Deployment, Update)),
    (
        "ListDeploymentTraces",
        Requirement::Policy(Deployment, List),
    ),
    (
        "GetApplicationLiveState",
        Requirement::Policy(Application, Get),
    ),
    (
        "GetProject",
        Requirement::Policy(ResourceType::Project, Get),
    ),
    (
        "UpdateProjectStaticAdmin",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    (
        "EnableStaticAdmin",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    (
        "DisableStaticAdmin",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    (
        "UpdateProjectSSOConfig",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    (
        "UpdateProjectRBACConfig",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    ("GetMe", Requirement::Policy(ResourceType::Project, Get)),
    (
        "AddProjectRBACRole",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    (
        "UpdateProjectRBACRole",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    (
        "DeleteProjectRBACRole",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    (
        "AddProjectUserGroup",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    (
        "DeleteProjectUserGroup",
        Requirement::Policy(ResourceType::Project, Update),
    ),
    ("GetCommand", Requirement::Ignored),
    ("GenerateAPIKey", Requirement::Policy(ApiKey, Create)),
    ("DisableAPIKey", Requirement::Policy(ApiKey, Update)),
    ("ListAPIKeys", Requirement::Policy(ApiKey, List)),
    ("GetInsightData", Requirement::Policy(Insight, Get)),
    (
        "GetInsightApplicationCount",
        Requirement::Policy(Insight, Get),
    ),
    // Deviation: upstream gives these two no rbac option, so its generated authorizer
    // denies them to everyone; we require the deployment-chain permission instead.
    (
        "ListDeploymentChains",
        Requirement::Policy(DeploymentChain, List),
    ),
    (
        "GetDeploymentChain",
        Requirement::Policy(DeploymentChain, Get),
    ),
    ("ListEvents", Requirement::Policy(Event, List)),
];

/// The requirement of the RPC named `method`, if it is a WebService RPC.
pub fn requirement(method: &str) -> Option<Requirement> {
    RPC_REQUIREMENTS
        .iter()
        .find(|(name, _)| *name == method)
        .map(|(_, r)| *r)
}

pub const ADMIN: &str = "Admin";
pub const EDITOR: &str = "Editor";
pub const VIEWER: &str = "Viewer";

fn policy(resources: &[ResourceType], actions: &[Action]) -> ProjectRbacPolicy {
    ProjectRbacPolicy {
        resources: resources
            .iter()
            .map(|r| ProjectRbacResource {
                r#type: *r as i32,
                labels: Default::default(),
            })
            .collect(),
        actions: actions.iter().map(|a| *a as i32).collect(),
    }
}

/// Upstream's built-in roles (`pkg/model/project.go`).
pub fn builtin_roles() -> Vec<ProjectRbacRole> {
    let role = |name: &str, policies: Vec<ProjectRbacPolicy>| ProjectRbacRole {
        name: name.to_string(),
        policies,
        is_builtin: true,
    };
    vec![
        role(ADMIN, vec![policy(&[ResourceType::All], &[Action::All])]),
        role(
            EDITOR,
            vec![
                policy(&[Application, Deployment], &[Action::All]),
                policy(&[Piped], &[Get, List]),
                policy(&[ResourceType::Project, Insight], &[Get]),
                policy(&[Event], &[List]),
            ],
        ),
        role(
            VIEWER,
            vec![
                policy(&[Application, Deployment, Piped], &[Get, List]),
                policy(&[ResourceType::Project, Insight], &[Get]),
                policy(&[Event], &[List]),
            ],
        ),
    ]
}

pub fn is_builtin_role(name: &str) -> bool {
    matches!(name, ADMIN | EDITOR | VIEWER)
}

/// True when `role` has a policy covering `resource` and `action` (ALL matches any).
pub fn role_allows(role: &ProjectRbacRole, resource: ResourceType, action: Action) -> bool {
    role.policies.iter().any(|p| {
        let resource_ok = p
            .resources
            .iter()
            .any(|r| r.r#type == ResourceType::All as i32 || r.r#type == resource as i32);
        let action_ok = p
            .actions
            .iter()
            .any(|a| *a == Action::All as i32 || *a == action as i32);
        resource_ok && action_ok
    })
}

impl WebApi {
    /// The caller's project as the console sees it: a config-file project, or the stored
    /// one. NotFound when neither exists.
    pub async fn load_project(&self, project_id: &str) -> Result<Project, ServiceError> {
        match self.projects.find(project_id).await {
            Ok(Some((p, _))) => Ok(p),
            Ok(None) => Err(ServiceError::NotFound(format!(
                "Project {project_id} is not found"
            ))),
            Err(e) => Err(ServiceError::store(e, &format!("get project {project_id}"))),
        }
    }

    /// The roles defined in `project`: the built-ins, plus the stored project's own.
    pub fn project_roles(&self, project: &Project) -> Vec<ProjectRbacRole> {
        let mut roles = builtin_roles();
        if self.config_project(&project.id).is_none() {
            roles.extend(
                project
                    .rbac_roles
                    .iter()
                    .filter(|r| !is_builtin_role(&r.name))
                    .cloned(),
            );
        }
        roles
    }

    /// Ends `caller`'s session on the server: its id is revoked until the token would
    /// have expired (here at once, on other instances within the revocations' refresh).
    /// UNAVAILABLE when that could not be recorded: the session may still work elsewhere,
    /// and logging out again retries.
    pub async fn end_session(&self, caller: &WebCaller) -> Result<(), ServiceError> {
        if caller.session_id.is_empty() {
            return Ok(());
        }
        let until = i64::try_from(caller.expires_at).unwrap_or(i64::MAX);
        crate::ops::revoke(
            &self.stores,
            wisp_store::revocations::Revoked::Session {
                id: &caller.session_id,
            },
            until,
            "Logged out in this browser",
        )
        .await
    }

    /// Records an SSO login's state `id` as used; false if it already was. Shared by the
    /// instances through the cache (Redis when configured); a cache that cannot be read
    /// or written lets the login through, since the state is also bound to the
    /// browser's cookie and expires within `ttl`.
    pub async fn claim_sso_state(&self, id: &str, ttl: std::time::Duration) -> bool {
        let key = super::logins::cache_key("wisp-sso-state-used", &[id]);
        match self.stores.cache.get(&key).await {
            Ok(Some(_)) => return false,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %wisp_store::error::chain(&e), "SSO state: cache unreadable")
            }
        }
        if let Err(e) = self.stores.cache.put(&key, b"1".to_vec(), Some(ttl)).await {
            tracing::warn!(error = %wisp_store::error::chain(&e), "SSO state: cache unwritable");
        }
        true
    }

    /// UNAUTHENTICATED once the session was logged out; UNAVAILABLE while the shared
    /// revocations cannot be read (fails closed: a logout elsewhere cannot be ruled out).
    async fn check_session_open(&self, caller: &WebCaller) -> Result<(), ServiceError> {
        use wisp_store::revocations::{Revoked, Status};
        if caller.session_id.is_empty() {
            return Ok(());
        }
        let what = Revoked::Session {
            id: &caller.session_id,
        };
        match self.stores.revocations.status(what, i64::MIN).await {
            Status::Open => Ok(()),
            Status::Revoked => Err(session_ended()),
            Status::Unknown => Err(ServiceError::Unavailable(
                "console sessions cannot be checked: the list of ended sessions is unreadable; \
                 try again later (the server log says why)"
                    .into(),
            )),
        }
    }

    /// The caller's project, checked against a static admin's session; PERMISSION_DENIED
    /// when it is gone.
    async fn caller_project(&self, caller: &WebCaller) -> Result<Project, ServiceError> {
        let project = self
            .load_project(&caller.project_id)
            .await
            .map_err(|e| match e {
                ServiceError::NotFound(_) => {
                    ServiceError::PermissionDenied("Permission Denied".to_string())
                }
                other => other,
            })?;
        check_static_admin(caller, &project)?;
        Ok(project)
    }

    /// Checks that one of `caller`'s roles allows `method` (the RPC's name, e.g.
    /// "RegisterPiped"); PERMISSION_DENIED otherwise.
    pub async fn authorize(
        &self,
        caller: &WebCaller,
        method: &str,
    ) -> Result<Authorized, ServiceError> {
        let denied = || ServiceError::PermissionDenied("Permission Denied".to_string());
        self.check_session_open(caller).await?;
        let (resource, action) = match requirement(method) {
            None => return Err(denied()),
            Some(Requirement::Ignored) => {
                if caller.static_admin.is_empty() && caller.sso.is_none() {
                    return Ok(Authorized {
                        caller: caller.clone(),
                    });
                }
                let project = self.caller_project(caller).await?;
                return Ok(Authorized {
                    caller: WebCaller {
                        roles: current_roles(caller, &project)?,
                        ..caller.clone()
                    },
                });
            }
            Some(Requirement::Policy(resource, action)) => (resource, action),
        };
        let project = self.caller_project(caller).await?;
        let caller_roles = current_roles(caller, &project)?;
        let roles = self.project_roles(&project);
        let allowed = caller_roles.iter().any(|name| {
            roles
                .iter()
                .any(|r| &r.name == name && role_allows(r, resource, action))
        });
        if allowed {
            Ok(Authorized {
                caller: WebCaller {
                    roles: caller_roles,
                    ..caller.clone()
                },
            })
        } else {
            Err(denied())
        }
    }
}

/// The project roles an SSO user's groups give: each value the project maps under its
/// user groups (or names in its older admin/editor/viewer team settings) gives that role;
/// with `role_names` (OpenID Connect), a value naming one of the project's roles gives
/// it too. With none, `allow_stray_as_viewer` makes the user a Viewer; `None` refuses
/// the user. Used at login and on every call of the session, so a changed mapping
/// applies to open sessions at once.
pub fn sso_roles(project: &Project, groups: &[String], role_names: bool) -> Option<Vec<String>> {
    let mut roles: Vec<String> = Vec::new();
    for value in groups {
        let named = role_names
            && (is_builtin_role(value) || project.rbac_roles.iter().any(|r| &r.name == value));
        let role = if named {
            Some(value.clone())
        } else {
            project
                .user_groups
                .iter()
                .find(|g| &g.sso_group == value)
                .map(|g| g.role.clone())
                .or_else(|| legacy_team_role(project, value))
        };
        if let Some(role) = role.filter(|r| !roles.contains(r)) {
            roles.push(role);
        }
    }
    if roles.is_empty() {
        if !project.allow_stray_as_viewer {
            return None;
        }
        roles.push(VIEWER.to_string());
    }
    Some(roles)
}

/// The caller's roles now: an SSO session's follow the project's current mapping of its
/// groups; others are the token's.
fn current_roles(caller: &WebCaller, project: &Project) -> Result<Vec<String>, ServiceError> {
    match &caller.sso {
        Some(sso) => sso_roles(project, &sso.groups, sso.role_names).ok_or_else(|| {
            ServiceError::Unauthenticated(
                "the session ended: no role in the project any more; log in again".into(),
            )
        }),
        None => Ok(caller.roles.clone()),
    }
}

/// The role an older project's `rbac` team settings give `group`.
fn legacy_team_role(project: &Project, group: &str) -> Option<String> {
    let rbac = project.rbac.as_ref()?;
    [
        (&rbac.admin, ADMIN),
        (&rbac.editor, EDITOR),
        (&rbac.viewer, VIEWER),
    ]
    .into_iter()
    .find(|(team, _)| !team.is_empty() && team.as_str() == group)
    .map(|(_, role)| role.to_string())
}

fn session_ended() -> ServiceError {
    ServiceError::Unauthenticated("the session ended; log in again".into())
}

/// A static admin's session lasts while the project's static admin is enabled, has the
/// same name, and the same password it logged in with (read from the project on every
/// call, so this holds at once on every instance).
fn check_static_admin(caller: &WebCaller, project: &Project) -> Result<(), ServiceError> {
    if caller.static_admin.is_empty() {
        return Ok(());
    }
    let still = !project.static_admin_disabled
        && project.static_admin.as_ref().is_some_and(|admin| {
            admin.username == caller.subject
                && wisp_auth::static_admin_fingerprint(&admin.password_hash) == caller.static_admin
        });
    if still { Ok(()) } else { Err(session_ended()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table must say what `proto/webservice/service.proto`'s `(model.rbac)` options
    /// say, RPC by RPC (except the deliberate deployment-chain deviation).
    #[test]
    fn requirements_match_the_proto_options() {
        let proto = include_str!("../../../../proto/webservice/service.proto");
        let service = &proto[proto.find("service WebService").expect("the service")..];
        let mut seen = 0;
        for chunk in service.split("rpc ").skip(1) {
            let name = chunk.split('(').next().expect("an rpc name").trim();
            let body = chunk.split("\n  rpc").next().unwrap_or(chunk);
            let option = |key: &str| {
                body.split(&format!("(model.rbac).{key} = "))
                    .nth(1)
                    .map(|rest| rest.split(';').next().unwrap_or("").trim().to_string())
            };
            let expected = match (option("resource"), option("action"), option("ignored")) {
                (_, _, Some(v)) if v == "true" => Some(Requirement::Ignored),
                (Some(r), Some(a), _) => Some(Requirement::Policy(
                    ResourceType::from_str_name(&r).expect("a resource"),
                    Action::from_str_name(&a).expect("an action"),
                )),
                _ => None,
            };
            let ours = requirement(name).unwrap_or_else(|| panic!("{name} is not in the table"));
            match expected {
                Some(expected) => assert_eq!(ours, expected, "{name}"),
                // Deviation: upstream gives these no option (always denied).
                None => assert!(
                    matches!(name, "ListDeploymentChains" | "GetDeploymentChain"),
                    "{name} has no rbac option"
                ),
            }
            seen += 1;
        }
        assert_eq!(seen, 51);
        assert_eq!(RPC_REQUIREMENTS.len(), 51);
    }

    fn allows(role: &str, resource: ResourceType, action: Action) -> bool {
        let roles = builtin_roles();
        let role = roles
            .iter()
            .find(|r| r.name == role)
            .expect("a built-in role");
        role_allows(role, resource, action)
    }

    #[test]
    fn built_in_roles_grant_what_upstream_grants() {
        use ResourceType as R;
        let all_resources = [
            R::Application,
            R::Deployment,
            R::Event,
            R::Piped,
            R::DeploymentChain,
            R::Project,
            R::ApiKey,
            R::Insight,
        ];
        let all_actions = [Get, List, Create, Update, Delete];
        for r in all_resources {
            for a in all_actions {
                assert!(allows(ADMIN, r, a), "Admin {r:?} {a:?}");
                let editor = matches!(r, R::Application | R::Deployment)
                    || (r == R::Piped && matches!(a, Get | List))
                    || (matches!(r, R::Project | R::Insight) && a == Get)
                    || (r == R::Event && a == List);
                assert_eq!(allows(EDITOR, r, a), editor, "Editor {r:?} {a:?}");
                let viewer = (matches!(r, R::Application | R::Deployment | R::Piped)
                    && matches!(a, Get | List))
                    || (matches!(r, R::Project | R::Insight) && a == Get)
                    || (r == R::Event && a == List);
                assert_eq!(allows(VIEWER, r, a), viewer, "Viewer {r:?} {a:?}");
            }
        }
    }
}
