//! Which calls the gate records in the audit log (`wisp_store::audit`), and where their
//! target ids are in the request. Recording itself is done once, by the gate, after the
//! call is answered: the caller it admitted (`user:…`, `api-key:…`, `piped:…`), the
//! client's address, the method, these targets and the answer's code.
//!
//! Audited: every WebService and APIService call that changes a record (not the `Get…`,
//! `List…` reads, nor `Encrypt` / `GenerateApplicationSealedSecret`, which change
//! nothing), and of PipedService the calls that create or finish something a person
//! cares about (a deployment made or completed, a command handled, application
//! configurations or a deployment chain written), not the pipeds' heartbeats and state
//! reports (stats, metadata, sync and live states, logs, stage statuses), which would be
//! most of the log and say nothing about who changed what. Calls the gate refuses before
//! admitting a caller (bad credentials) are not recorded: there is no one to name.
//!
//! Targets are read from the request's fields by number (a path for a nested one), only
//! ids and names: never a password, key or message body.

/// A field path: field numbers from the request message down to a string field.
type Path = &'static [u32];

/// `(method, target field paths)` per service; a method not listed is not audited.
const WEB: &[(&str, &[Path])] = &[
    ("RegisterPiped", &[&[1]]),
    ("UpdatePiped", &[&[1], &[2]]),
    ("RecreatePipedKey", &[&[1]]),
    ("DeleteOldPipedKeys", &[&[1]]),
    ("EnablePiped", &[&[1]]),
    ("DisablePiped", &[&[1]]),
    ("UpdatePipedDesiredVersion", &[&[2]]),
    ("RestartPiped", &[&[1]]),
    ("AddApplication", &[&[1], &[3]]),
    ("UpdateApplication", &[&[1], &[2], &[4]]),
    ("EnableApplication", &[&[1]]),
    ("DisableApplication", &[&[1]]),
    ("DeleteApplication", &[&[1]]),
    ("SyncApplication", &[&[1]]),
    ("CancelDeployment", &[&[1]]),
    ("SkipStage", &[&[1], &[2]]),
    ("ApproveStage", &[&[1], &[2]]),
    ("UpdateProjectStaticAdmin", &[]),
    ("EnableStaticAdmin", &[]),
    ("DisableStaticAdmin", &[]),
    ("UpdateProjectSSOConfig", &[]),
    ("UpdateProjectRBACConfig", &[]),
    ("AddProjectRBACRole", &[&[1]]),
    ("UpdateProjectRBACRole", &[&[1]]),
    ("DeleteProjectRBACRole", &[&[1]]),
    ("AddProjectUserGroup", &[&[1], &[2]]),
    ("DeleteProjectUserGroup", &[&[1]]),
    ("GenerateAPIKey", &[&[1]]),
    ("DisableAPIKey", &[&[1]]),
];

const API: &[(&str, &[Path])] = &[
    ("AddApplication", &[&[1], &[3]]),
    ("SyncApplication", &[&[1]]),
    ("UpdateApplication", &[&[1], &[2]]),
    ("DeleteApplication", &[&[1]]),
    ("EnableApplication", &[&[1]]),
    ("DisableApplication", &[&[1]]),
    ("RenameApplicationConfigFile", &[&[1]]),
    ("UpdateApplicationDeployTargets", &[&[1]]),
    ("RegisterPiped", &[&[1]]),
    ("UpdatePiped", &[&[1], &[2]]),
    ("EnablePiped", &[&[1]]),
    ("DisablePiped", &[&[1]]),
    ("RegisterEvent", &[&[1]]),
    ("RequestPlanPreview", &[]),
];

const PIPED: &[(&str, &[Path])] = &[
    // deployment.id, deployment.application_id
    ("CreateDeployment", &[&[1, 1], &[1, 2]]),
    ("ReportDeploymentCompleted", &[&[1]]),
    ("ReportCommandHandled", &[&[1]]),
    ("UpdateApplicationConfigurations", &[]),
    // name, first_deployment.id
    ("CreateDeploymentChain", &[&[1], &[3, 1]]),
];

/// The target paths of `method` of `service` (`WebService`, `APIService`,
/// `PipedService`), or `None` when the call is not audited.
pub fn audited(service: &str, method: &str) -> Option<&'static [Path]> {
    let table = match service {
        "WebService" => WEB,
        "APIService" => API,
        "PipedService" => PIPED,
        _ => return None,
    };
    table
        .iter()
        .find(|(name, _)| *name == method)
        .map(|(_, paths)| *paths)
}

/// The non-empty strings at `paths` in the protobuf `message` (repeated fields give
/// each of their values), each cut to 256 bytes; at most 16 in all.
pub fn targets(message: &[u8], paths: &[Path]) -> Vec<String> {
    let mut out = Vec::new();
    for path in paths {
        collect(message, path, &mut out);
    }
    out
}

const MAX_TARGETS: usize = 16;
const MAX_TARGET_BYTES: usize = 256;

fn collect(message: &[u8], path: &[u32], out: &mut Vec<String>) {
    let Some((&field, rest)) = path.split_first() else {
        return;
    };
    let mut buf = message;
    while !buf.is_empty() && out.len() < MAX_TARGETS {
        let Some((key, after)) = varint(buf) else {
            return;
        };
        buf = after;
        let number = key >> 3;
        let value = match key & 7 {
            0 => match varint(buf) {
                Some((_, after)) => {
                    buf = after;
                    continue;
                }
                None => return,
            },
            1 => {
                let Some(after) = buf.get(8..) else { return };
                buf = after;
                continue;
            }
            5 => {
                let Some(after) = buf.get(4..) else { return };
                buf = after;
                continue;
            }
            2 => {
                let Some((len, after)) = varint(buf) else {
                    return;
                };
                let Ok(len) = usize::try_from(len) else {
                    return;
                };
                let (Some(value), Some(after)) = (after.get(..len), after.get(len..)) else {
                    return;
                };
                buf = after;
                value
            }
            _ => return,
        };
        if number != u64::from(field) {
            continue;
        }
        if rest.is_empty() {
            if let Ok(text) = std::str::from_utf8(value)
                && !text.is_empty()
            {
                let mut end = text.len().min(MAX_TARGET_BYTES);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                out.push(text[..end].to_string());
            }
        } else {
            collect(value, rest, out);
        }
    }
}

fn varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, byte) in buf.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return buf.get(i + 1..).map(|rest| (value, rest));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use wisp_proto::{model, pipedservice as ps, webservice as web};

    #[test]
    fn targets_are_the_ids_the_request_names() {
        let req = web::ApproveStageRequest {
            deployment_id: "dep-1".into(),
            stage_id: "stage-2".into(),
        };
        let paths = audited("WebService", "ApproveStage").expect("audited");
        assert_eq!(
            targets(&req.encode_to_vec(), paths),
            vec!["dep-1", "stage-2"]
        );

        let req = web::UpdatePipedDesiredVersionRequest {
            version: "v0.57.1".into(),
            piped_ids: vec!["p1".into(), "p2".into()],
        };
        let paths = audited("WebService", "UpdatePipedDesiredVersion").expect("audited");
        assert_eq!(targets(&req.encode_to_vec(), paths), vec!["p1", "p2"]);

        let req = ps::CreateDeploymentRequest {
            deployment: Some(model::Deployment {
                id: "dep-9".into(),
                application_id: "app-3".into(),
                piped_id: "p1".into(),
                ..Default::default()
            }),
        };
        let paths = audited("PipedService", "CreateDeployment").expect("audited");
        assert_eq!(targets(&req.encode_to_vec(), paths), vec!["dep-9", "app-3"]);
    }

    #[test]
    fn secrets_and_reads_are_not_recorded() {
        let req = web::UpdateProjectStaticAdminRequest {
            username: "admin".into(),
            password: "hunter2".into(),
        };
        let paths = audited("WebService", "UpdateProjectStaticAdmin").expect("audited");
        assert!(targets(&req.encode_to_vec(), paths).is_empty());
        for (service, method) in [
            ("WebService", "ListPipeds"),
            ("WebService", "GetMe"),
            ("APIService", "Encrypt"),
            ("PipedService", "ReportStat"),
            ("PipedService", "ReportApplicationLiveState"),
        ] {
            assert!(audited(service, method).is_none(), "{service}/{method}");
        }
    }

    #[test]
    fn every_audited_method_exists() {
        for (service, table, limits) in [
            ("WebService", WEB, &crate::limits::WEB),
            ("APIService", API, &crate::limits::API),
            ("PipedService", PIPED, &crate::limits::PIPED),
        ] {
            for (method, _) in table {
                assert!(
                    limits.for_method(method).is_some(),
                    "{service}/{method} is no RPC"
                );
            }
        }
    }

    #[test]
    fn truncated_messages_give_what_was_read() {
        let req = web::DisablePipedRequest {
            piped_id: "p1".into(),
        };
        let bytes = req.encode_to_vec();
        let paths = audited("WebService", "DisablePiped").expect("audited");
        assert!(targets(&bytes[..bytes.len() - 1], paths).is_empty());
        assert!(targets(&[0xff; 12], paths).is_empty());
    }
}
