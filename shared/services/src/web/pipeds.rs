//! WebService: pipeds (register, keys, enable/disable, list with status, restart, the
//! desired version).

use wisp_proto::model::{self, command, piped::ConnectionStatus};
use wisp_proto::webservice::*;
use wisp_store::pipedstat::PipedStatStore;

use super::{Authorized, WebApi, required};
use crate::error::ServiceError;
use crate::ops::pipeds as ops;
use crate::support::{new_id, now_unix, update_checked};

impl WebApi {
    /// Creates a piped with a fresh key; the key is returned this once, only its bcrypt
    /// hash is kept.
    pub async fn register_piped(
        &self,
        caller: &Authorized,
        req: RegisterPipedRequest,
    ) -> Result<RegisterPipedResponse, ServiceError> {
        let (piped, key) = ops::register_piped(
            &self.stores.pipeds,
            caller.project_id(),
            req.name,
            req.desc,
            caller.subject(),
        )
        .await?;
        Ok(RegisterPipedResponse { id: piped.id, key })
    }

    pub async fn update_piped(
        &self,
        caller: &Authorized,
        req: UpdatePipedRequest,
    ) -> Result<UpdatePipedResponse, ServiceError> {
        required("piped_id", &req.piped_id)?;
        self.owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        ops::update_piped(
            &self.stores.pipeds,
            caller.project_id(),
            &req.piped_id,
            &req.name,
            &req.desc,
        )
        .await?;
        Ok(UpdatePipedResponse {})
    }

    /// Adds a new key in front of the existing ones (the piped keeps working with the
    /// old one until it is deleted).
    ///
    /// Deviation: a piped that already has the most keys gets FAILED_PRECONDITION saying
    /// what to do, where upstream answers INTERNAL.
    pub async fn recreate_piped_key(
        &self,
        caller: &Authorized,
        req: RecreatePipedKeyRequest,
    ) -> Result<RecreatePipedKeyResponse, ServiceError> {
        required("id", &req.id)?;
        self.owned(&self.stores.pipeds, &req.id, caller, "piped")
            .await?;
        let key = ops::add_piped_key(
            &self.stores.pipeds,
            caller.project_id(),
            &req.id,
            caller.subject(),
        )
        .await?;
        Ok(RecreatePipedKeyResponse { key })
    }

    /// Keeps only the newest key.
    pub async fn delete_old_piped_keys(
        &self,
        caller: &Authorized,
        req: DeleteOldPipedKeysRequest,
    ) -> Result<DeleteOldPipedKeysResponse, ServiceError> {
        required("piped_id", &req.piped_id)?;
        self.owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        ops::delete_old_piped_keys(&self.stores, caller.project_id(), &req.piped_id).await?;
        Ok(DeleteOldPipedKeysResponse {})
    }

    pub async fn enable_piped(
        &self,
        caller: &Authorized,
        req: EnablePipedRequest,
    ) -> Result<EnablePipedResponse, ServiceError> {
        required("piped_id", &req.piped_id)?;
        self.owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        ops::set_piped_disabled(&self.stores, caller.project_id(), &req.piped_id, false).await?;
        Ok(EnablePipedResponse {})
    }

    pub async fn disable_piped(
        &self,
        caller: &Authorized,
        req: DisablePipedRequest,
    ) -> Result<DisablePipedResponse, ServiceError> {
        required("piped_id", &req.piped_id)?;
        self.owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        ops::set_piped_disabled(&self.stores, caller.project_id(), &req.piped_id, true).await?;
        Ok(DisablePipedResponse {})
    }

    /// The project's pipeds, keys redacted; with `with_status`, ONLINE when the piped
    /// reported its stat within the last 2 minutes, OFFLINE when it never did or longer
    /// ago, UNKNOWN when the stat could not be read.
    pub async fn list_pipeds(
        &self,
        caller: &Authorized,
        req: ListPipedsRequest,
    ) -> Result<ListPipedsResponse, ServiceError> {
        let enabled = req.options.and_then(|o| o.enabled);
        let listed = ops::list_pipeds(&self.stores.pipeds, caller.project_id(), enabled).await?;
        let now = now_unix();
        let mut pipeds = Vec::with_capacity(listed.len());
        for mut piped in listed {
            if req.with_status {
                piped.status = match self.stores.piped_stats.get(&piped.id).await {
                    Ok(Some(stat)) if PipedStatStore::is_online(&stat, now) => {
                        ConnectionStatus::Online
                    }
                    Ok(_) => ConnectionStatus::Offline,
                    Err(e) => {
                        tracing::warn!(piped = %piped.id, error = %wisp_store::error::chain(&e), "piped stat unreadable");
                        ConnectionStatus::Unknown
                    }
                } as i32;
            }
            pipeds.push(piped);
        }
        Ok(ListPipedsResponse { pipeds })
    }

    pub async fn get_piped(
        &self,
        caller: &Authorized,
        req: GetPipedRequest,
    ) -> Result<GetPipedResponse, ServiceError> {
        required("piped_id", &req.piped_id)?;
        let mut piped = self
            .owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        ops::redact_piped(&mut piped);
        Ok(GetPipedResponse { piped: Some(piped) })
    }

    /// Sets the version the pipeds should upgrade themselves to (`v` + semver). Every id
    /// is checked before any piped changes.
    pub async fn update_piped_desired_version(
        &self,
        caller: &Authorized,
        req: UpdatePipedDesiredVersionRequest,
    ) -> Result<UpdatePipedDesiredVersionResponse, ServiceError> {
        if !req.version.starts_with('v') || req.version.len() < 2 {
            return Err(ServiceError::InvalidArgument(format!(
                "invalid request: version {:?} must start with \"v\" (e.g. v0.50.0)",
                req.version
            )));
        }
        for id in &req.piped_ids {
            self.owned(&self.stores.pipeds, id, caller, "piped").await?;
        }
        for id in &req.piped_ids {
            self.change_piped(caller, id, |p| {
                p.desired_version = req.version.clone();
                Ok(())
            })
            .await?;
        }
        Ok(UpdatePipedDesiredVersionResponse {})
    }

    /// Asks the piped to restart (a RESTART_PIPED command it picks up when it polls).
    pub async fn restart_piped(
        &self,
        caller: &Authorized,
        req: RestartPipedRequest,
    ) -> Result<RestartPipedResponse, ServiceError> {
        required("piped_id", &req.piped_id)?;
        let piped = self
            .owned(&self.stores.pipeds, &req.piped_id, caller, "piped")
            .await?;
        let cmd = model::Command {
            id: new_id(),
            piped_id: piped.id.clone(),
            project_id: piped.project_id.clone(),
            commander: caller.subject().to_string(),
            r#type: command::Type::RestartPiped as i32,
            restart_piped: Some(command::RestartPiped { piped_id: piped.id }),
            ..Default::default()
        };
        let cmd = self.add_command(cmd).await?;
        Ok(RestartPipedResponse { command_id: cmd.id })
    }

    /// Deviation: upstream asks GitHub for piped releases; a control plane without
    /// internet access answers with the configuration's list (`pipedReleases.versions`,
    /// by default the upstream release Wisp was checked against).
    pub async fn list_released_versions(
        &self,
        _caller: &Authorized,
        _req: ListReleasedVersionsRequest,
    ) -> Result<ListReleasedVersionsResponse, ServiceError> {
        Ok(ListReleasedVersionsResponse {
            versions: self.releases.versions.clone(),
        })
    }

    /// As upstream: the notes of every release at or after the oldest version among
    /// the caller's project's enabled pipeds, as `## <version>\n<notes>\n` blocks in the
    /// configured order; empty when no piped reports a valid version.
    ///
    /// Deviation: as [`WebApi::list_released_versions`], the notes come from the
    /// configuration (`pipedReleases.deprecatedNotes`), not GitHub.
    pub async fn list_deprecated_notes(
        &self,
        caller: &Authorized,
        _req: ListDeprecatedNotesRequest,
    ) -> Result<ListDeprecatedNotesResponse, ServiceError> {
        if self.releases.deprecated_notes.is_empty() {
            return Ok(ListDeprecatedNotesResponse::default());
        }
        let pipeds = ops::list_pipeds(&self.stores.pipeds, caller.project_id(), Some(true)).await?;
        let oldest = pipeds
            .iter()
            .filter_map(|p| parse_version(&p.version))
            .min();
        let Some(oldest) = oldest else {
            return Ok(ListDeprecatedNotesResponse::default());
        };
        let mut notes = String::new();
        for (version, text) in &self.releases.deprecated_notes {
            if parse_version(version).is_some_and(|v| v >= oldest) {
                notes.push_str(&format!("## {version}\n{text}\n"));
            }
        }
        Ok(ListDeprecatedNotesResponse { notes })
    }

    /// Read-modify-write of one of the caller's pipeds.
    async fn change_piped<F>(
        &self,
        caller: &Authorized,
        piped_id: &str,
        mutate: F,
    ) -> Result<model::Piped, ServiceError>
    where
        F: FnMut(&mut model::Piped) -> Result<(), ServiceError> + Send,
    {
        self.owned(&self.stores.pipeds, piped_id, caller, "piped")
            .await?;
        update_checked(
            &self.stores.pipeds,
            caller.project_id(),
            piped_id,
            &format!("update piped {piped_id}"),
            mutate,
        )
        .await
    }

    /// Stores a new command (NOT_HANDLED_YET); its piped sees it on its next poll.
    pub(super) async fn add_command(
        &self,
        cmd: model::Command,
    ) -> Result<model::Command, ServiceError> {
        crate::ops::commands::add_command(&self.stores.commands, cmd).await
    }
}

/// `vMAJOR[.MINOR[.PATCH]][-pre][+build]` (Go's `semver.IsValid`), ordered as semver:
/// a pre-release sorts before its release (pre-release identifiers compared as text).
fn parse_version(v: &str) -> Option<(u64, u64, u64, bool, String)> {
    let rest = v.strip_prefix('v')?;
    let rest = rest.split_once('+').map_or(rest, |(r, _)| r);
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) if !pre.is_empty() => (core, Some(pre)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut nums = core.split('.');
    let mut next = |required: bool| -> Option<u64> {
        match nums.next() {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => n.parse().ok(),
            Some(_) => None,
            None if required => None,
            None => Some(0),
        }
    };
    let (major, minor, patch) = (next(true)?, next(false)?, next(false)?);
    if nums.next().is_some() {
        return None;
    }
    Some((
        major,
        minor,
        patch,
        pre.is_none(),
        pre.unwrap_or_default().to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn versions_order_as_semver() {
        let v = |s| parse_version(s).unwrap_or_else(|| panic!("{s} is valid"));
        assert!(v("v0.57.1") > v("v0.57.0"));
        assert!(v("v0.57.0") > v("v0.57.0-rc1"));
        assert!(v("v0.10.0") > v("v0.9.9"));
        assert_eq!(v("v1"), v("v1.0.0"));
        for bad in ["", "0.57.1", "v", "v1.x", "v1.2.3.4", "vfoo", "v1.2.3-"] {
            assert!(parse_version(bad).is_none(), "{bad}");
        }
    }
}
