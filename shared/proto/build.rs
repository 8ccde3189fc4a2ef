//! Compiles the wire contract in `proto/` with a vendored protoc, so building needs no
//! system packages.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it was compiled: a target directory reused from
    // another checkout must not compile that checkout's protos.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let mut protos = Vec::new();
    // Each service's RPC names, in the order of its .proto files (`rpcs.rs`).
    let mut rpcs = String::new();
    for dir in ["model", "pipedservice", "apiservice", "webservice"] {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(root.join(dir))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "proto") {
                println!("cargo:rerun-if-changed={}", path.display());
                files.push(path);
            }
        }
        files.sort();
        let mut names = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file)?;
            names.extend(text.lines().filter_map(|line| {
                let rest = line.trim().strip_prefix("rpc ")?;
                Some(rest.split('(').next()?.trim().to_owned())
            }));
        }
        if dir != "model" {
            let constant = dir.trim_end_matches("service").to_uppercase() + "_SERVICE";
            rpcs.push_str(&format!(
                "/// The RPCs of `proto/{dir}`, in the order of its .proto files.\npub const {constant}: &[&str] = &{names:?};\n"
            ));
        }
        protos.extend(files);
    }
    protos.sort();
    std::fs::write(
        PathBuf::from(std::env::var("OUT_DIR")?).join("rpcs.rs"),
        rpcs,
    )?;

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
