//! Without its configuration the function fails its init, naming what to set (Lambda then
//! reports an init error instead of a function that half works). Building this test also
//! builds the bootstrap that tests/lambda_e2e.rs runs.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn init_fails_clearly_without_a_config() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wisp-api"))
        .env_remove("WISP_CONFIG_SECRET")
        .env_remove("WISP_CONFIG_FILE")
        .env_remove("AWS_LAMBDA_RUNTIME_API")
        .output()
        .expect("run the bootstrap");
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("WISP_CONFIG_SECRET"), "{text}");
}
