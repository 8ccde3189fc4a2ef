//! The WebService coverage table in tests/README.md is complete and true: every RPC of
//! `proto/webservice/service.proto` has a row, every row names an RPC that exists, and
//! the test a row names is a test function in `tests/e2e/<module>.rs`. A new RPC without
//! a row (and a test) fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The RPC names of `service WebService` in the proto.
fn proto_rpcs() -> BTreeSet<String> {
    let proto = std::fs::read_to_string(root().join("proto/webservice/service.proto"))
        .expect("read the WebService proto");
    let service = proto
        .split_once("service WebService {")
        .map(|(_, rest)| rest)
        .expect("service WebService in the proto");
    // The service's closing brace is the first at the start of a line.
    let service = service.split("\n}").next().unwrap_or_default();
    service
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("rpc "))
        .filter_map(|l| l.split('(').next())
        .map(|n| n.trim().to_string())
        .collect()
}

/// RPC → `module::function` from the table's rows (`| RPC | `module::fn` | ... |`).
fn table_rows(readme: &str) -> Vec<(String, String)> {
    let section = readme
        .split_once("## WebService: one test per RPC")
        .map(|(_, rest)| rest)
        .expect("the WebService section in tests/README.md");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|cells| cells.len() > 3 && !cells[1].is_empty() && cells[1] != "RPC")
        .filter(|cells| !cells[1].starts_with("---"))
        .map(|cells| (cells[1].to_string(), cells[2].trim_matches('`').to_string()))
        .collect()
}

/// Whether `tests/e2e/<module>.rs` has a test function named `name`.
fn test_exists(module: &str, name: &str) -> bool {
    let Ok(source) = std::fs::read_to_string(root().join(format!("tests/e2e/{module}.rs"))) else {
        return false;
    };
    let lines: Vec<&str> = source.lines().collect();
    lines.iter().enumerate().any(|(i, line)| {
        let line = line.trim_start();
        let defines = line.starts_with(&format!("async fn {name}("))
            || line.starts_with(&format!("fn {name}("));
        // The attribute may sit above a doc comment.
        defines
            && lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim_start())
                .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
                .any(|l| l.starts_with("#[tokio::test") || l.starts_with("#[test]"))
    })
}

#[test]
fn every_web_rpc_has_a_row_naming_a_test() {
    let rpcs = proto_rpcs();
    assert_eq!(rpcs.len(), 51, "the proto's WebService RPCs: {rpcs:?}");
    let readme =
        std::fs::read_to_string(root().join("tests/README.md")).expect("read tests/README.md");
    let rows = table_rows(&readme);
    let mut failures = Vec::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (rpc, test) in &rows {
        *seen.entry(rpc.as_str()).or_default() += 1;
        if !rpcs.contains(rpc) {
            failures.push(format!("row {rpc}: no such WebService RPC"));
        }
        match test.split_once("::") {
            Some((module, name)) if test_exists(module, name) => {}
            _ => failures.push(format!(
                "row {rpc}: {test} is not a test function in tests/e2e/"
            )),
        }
    }
    for rpc in &rpcs {
        match seen.get(rpc.as_str()) {
            None => failures.push(format!("{rpc}: no row in tests/README.md")),
            Some(n) if *n > 1 => failures.push(format!("{rpc}: {n} rows")),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The checker itself: a missing row, an unknown test and a stale row are all caught.
#[test]
fn the_coverage_check_catches_missing_rows_and_tests() {
    let table = "## WebService: one test per RPC\n\n| RPC | Test | What |\n|---|---|---|\n\
                 | GetMe | `web_console::static_admin_login_sets_a_session_cookie` | x |\n\
                 | GetPiped | `web_console::no_such_test` | x |\n";
    let rows = table_rows(table);
    assert_eq!(rows.len(), 2);
    assert!(test_exists(
        "web_console",
        "static_admin_login_sets_a_session_cookie"
    ));
    assert!(!test_exists("web_console", "no_such_test"));
    // A helper is not a test.
    assert!(!test_exists("web_console", "register_and_connect"));
    assert!(!test_exists("no_such_module", "anything"));
}
