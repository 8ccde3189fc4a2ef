//! One upstream `Data` document to the record Wisp stores for it.
//!
//! The model types read Go's `encoding/json` form directly (wisp-proto derives serde for
//! them with the proto's field names and enums as numbers); upstream's `_extra` column
//! source and any field this version of Wisp does not know are ignored. Timestamps and
//! key hashes are kept as they are: a piped's and an API key's bcrypt hashes go on
//! working, and move to Wisp's fast hash the first time they match.

use serde::de::DeserializeOwned;
use wisp_proto::model;
use wisp_store::collection::{Entity, record_of};
use wisp_store::datastore::{Kind, Record};

/// The record for `data`, an upstream document of `kind`. The error says what is wrong
/// and where, never the values (documents hold key hashes and sealed secrets).
pub fn record(kind: Kind, data: &[u8]) -> Result<Record, String> {
    match kind {
        Kind::Project => build::<model::Project>(data),
        Kind::Application => build::<model::Application>(data),
        Kind::Command => build::<model::Command>(data),
        Kind::Deployment => build::<model::Deployment>(data),
        Kind::Piped => build::<model::Piped>(data),
        Kind::ApiKey => build::<model::ApiKey>(data),
        Kind::Event => build::<model::Event>(data),
        Kind::DeploymentChain => build::<model::DeploymentChain>(data),
        Kind::DeploymentTrace => build::<model::DeploymentTrace>(data),
        Kind::PipedStat | Kind::UnregisteredApps | Kind::AuditEvent => {
            Err(format!("{kind} is not kept in upstream's datastore"))
        }
    }
}

fn build<E: Entity + DeserializeOwned>(data: &[u8]) -> Result<Record, String> {
    let entity: E = serde_json::from_slice(data).map_err(|e| {
        format!(
            "Data is not a {} document ({:?} error at line {} column {})",
            E::KIND,
            e.classify(),
            e.line(),
            e.column()
        )
    })?;
    if entity.id().is_empty() {
        return Err(format!("Data has no id for its {}", E::KIND));
    }
    Ok(record_of(&entity, 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_document_as_go_writes_it_becomes_the_record_wisp_stores() {
        // encoding/json of upstream's model.Piped inside its MySQL wrapper: snake_case,
        // enum numbers, empty fields left out, `_extra` beside them.
        let data = br#"{"id":"7b5d0c4e-5b4a-4c8e-9a4f-0d1c2b3a4f5e","name":"dev","project_id":"acme","keys":[{"hash":"$2a$10$abcdefghijklmnopqrstuu5Vd9m2bW9kM8u2pQ6pJ2r3o8i4d6a0W","creator":"admin","created_at":1700000000}],"platform_providers":[{"name":"k8s","type":"KUBERNETES"}],"status":1,"created_at":1700000000,"updated_at":1700000100,"_extra":"dev"}"#;
        let record = record(Kind::Piped, data).unwrap();
        assert_eq!(record.id, "7b5d0c4e-5b4a-4c8e-9a4f-0d1c2b3a4f5e");
        assert_eq!(record.project_id, "acme");
        let piped = model::Piped::decode(record.data.as_slice()).unwrap();
        assert_eq!(piped.keys.len(), 1);
        assert!(piped.keys[0].hash.starts_with("$2a$10$"));
        assert_eq!(piped.updated_at, 1_700_000_100);
        // Wisp's own index entry: the project's pipeds by creation time.
        assert!(record.indexes[0].is_some());
    }

    #[test]
    fn a_broken_document_is_named_without_its_values() {
        let err = record(Kind::ApiKey, br#"{"id":"k1","key_hash":12345678901}"#).unwrap_err();
        assert!(err.contains("APIKey") && err.contains("line 1"), "{err}");
        assert!(!err.contains("12345678901"), "{err}");
        let err = record(Kind::Deployment, br#"{"application_id":"a"}"#).unwrap_err();
        assert!(err.contains("no id"), "{err}");
    }
}
