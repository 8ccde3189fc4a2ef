//! Whether two records hold the same thing: the one rule every "changed or not?" decision
//! on stored records uses (`wisp migrate`, `wisp import pipecd`, the import's project
//! check).
//!
//! Records are compared by meaning, not by encoding. The same message can encode to
//! different bytes: prost's map fields (`labels`, `metadata`, ...) are `HashMap`s, whose
//! order differs between maps and between processes, so an entity decoded from upstream's
//! JSON twice encodes differently twice. Comparing bytes made a second import over an
//! unchanged dump rewrite some applications, deployments and events each run (each write
//! costs on DynamoDB). So the data of a record is decoded as its kind's message and the
//! messages compared (`HashMap` equality ignores order).
//!
//! Decoding drops what this version of Wisp does not know (fields added by a later
//! version); two records differing only there would compare equal. So a decoded
//! comparison is trusted only when each message re-encodes to as many bytes as it was
//! read from, i.e. nothing was dropped; otherwise the bytes decide (which can only
//! cause a write that was not needed, never skip one that was).

use prost::Message;
use wisp_proto::model;

use crate::datastore::{Kind, Record};
use crate::unregistered::UnregisteredApps;

/// Whether `a` and `b` hold the same thing: same id, project, index entries, expiry, and
/// data of the same meaning (see the module doc). The version is each store's own and is
/// not compared.
pub fn same_record(kind: Kind, a: &Record, b: &Record) -> bool {
    a.id == b.id
        && a.project_id == b.project_id
        && a.indexes == b.indexes
        && a.expires_at == b.expires_at
        && same_data(kind, &a.data, &b.data)
}

/// Whether `a` and `b`, two encodings of a record of `kind`, hold the same message.
pub fn same_data(kind: Kind, a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    match kind {
        Kind::Project => same_message::<model::Project>(a, b),
        Kind::Application => same_message::<model::Application>(a, b),
        Kind::Command => same_message::<model::Command>(a, b),
        Kind::Deployment => same_message::<model::Deployment>(a, b),
        Kind::Piped => same_message::<model::Piped>(a, b),
        Kind::ApiKey => same_message::<model::ApiKey>(a, b),
        Kind::Event => same_message::<model::Event>(a, b),
        Kind::DeploymentChain => same_message::<model::DeploymentChain>(a, b),
        Kind::DeploymentTrace => same_message::<model::DeploymentTrace>(a, b),
        Kind::PipedStat => same_message::<model::PipedStat>(a, b),
        Kind::UnregisteredApps => same_message::<UnregisteredApps>(a, b),
        // JSON written once and never rewritten: the bytes are the content.
        Kind::AuditEvent => a == b,
    }
}

/// Whether `a` and `b` decode to equal `M`s with nothing dropped by either decoding.
pub fn same_message<M: Message + Default + PartialEq>(a: &[u8], b: &[u8]) -> bool {
    // Equal messages encode to equal lengths whatever the map order: a cheap first test.
    if a.len() != b.len() {
        return false;
    }
    let decode = |bytes: &[u8]| {
        M::decode(bytes)
            .ok()
            .filter(|m| m.encoded_len() == bytes.len())
    };
    match (decode(a), decode(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashMap;

    /// Two encodings of one application whose labels come in opposite orders: a message
    /// is its fields concatenated, so the labels are appended one entry at a time.
    fn two_orders() -> (Vec<u8>, Vec<u8>) {
        let base = model::Application {
            id: "app-1".into(),
            project_id: "p".into(),
            name: "web".into(),
            ..Default::default()
        }
        .encode_to_vec();
        let label = |k: &str, v: &str| {
            model::Application {
                labels: HashMap::from([(k.to_string(), v.to_string())]),
                ..Default::default()
            }
            .encode_to_vec()
        };
        let (env, team) = (label("env", "prod"), label("team", "web"));
        (
            [base.as_slice(), &env, &team].concat(),
            [base.as_slice(), &team, &env].concat(),
        )
    }

    #[test]
    fn map_order_does_not_make_a_difference() {
        let (a, b) = two_orders();
        assert_ne!(a, b);
        assert!(same_data(Kind::Application, &a, &b));
    }

    #[test]
    fn a_different_value_does() {
        let (a, _) = two_orders();
        let mut app = model::Application::decode(a.as_slice()).unwrap();
        app.labels.insert("env".into(), "dev".into());
        assert!(!same_data(Kind::Application, &a, &app.encode_to_vec()));
    }

    #[test]
    fn fields_this_version_does_not_know_are_compared_as_bytes() {
        let (a, _) = two_orders();
        // Field 999 (a string) is in no Application this version knows.
        let unknown = |v: u8| [a.as_slice(), &[0xBA, 0x3E, 1, v]].concat();
        assert!(same_data(Kind::Application, &unknown(b'x'), &unknown(b'x')));
        assert!(!same_data(
            Kind::Application,
            &unknown(b'x'),
            &unknown(b'y')
        ));
    }

    #[test]
    fn data_that_is_no_message_is_compared_as_bytes() {
        assert!(same_data(Kind::Event, b"\xff\xff", b"\xff\xff"));
        assert!(!same_data(Kind::Event, b"\xff\xff", b"\xff\xfe"));
    }
}
