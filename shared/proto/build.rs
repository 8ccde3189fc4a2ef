//! Compiles the wire contract in `proto/` with a vendored protoc, so building needs no
//! system packages.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let mut protos = Vec::new();
    for dir in ["model", "pipedservice", "apiservice", "webservice"] {
        for entry in std::fs::read_dir(root.join(dir))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "proto") {
                println!("cargo:rerun-if-changed={}", path.display());
                protos.push(path);
            }
        }
    }
    protos.sort();

    // proto/ leaves out upstream's `deprecated = true` options: they change no byte on the
    // wire, and prost would turn them into `#[deprecated]` on fields (kind, cloud_provider,
    // ...) that the control plane must keep reading and writing for v0 pipeds.
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    // Model types double as the JSON documents upstream keeps in its filestore
    // (snake_case keys, enums as numbers), so they derive serde.
    config.type_attribute(".model", "#[derive(serde::Serialize, serde::Deserialize)]");
    config.message_attribute(".model", "#[serde(default)]");
    // Go's encoding/json writes `bytes` as standard base64 strings (plan-preview results
    // stored as command outputs are such documents).
    for field in [
        ".model.ApplicationPlanPreviewResult.plan_summary",
        ".model.ApplicationPlanPreviewResult.plan_details",
        ".model.PluginPlanPreviewResult.plan_summary",
        ".model.PluginPlanPreviewResult.plan_details",
        ".model.PipedStat.metrics",
    ] {
        config.field_attribute(field, "#[serde(with = \"crate::base64_bytes\")]");
    }
    // Go's encoding/json keeps the proto's own spelling of this one camelCase field.
    config.field_attribute(
        ".model.DeploymentMetadata.KeyValues.keyValues",
        "#[serde(rename = \"keyValues\", alias = \"key_values\")]",
    );
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_with_config(
            config,
            &protos,
            &[root, protoc_bin_vendored::include_path()?],
        )?;
    Ok(())
}
