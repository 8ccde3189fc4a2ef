//! The workspace root's end-to-end tests, in one test binary (one link of the support
//! code and the workspace, instead of one per file): each module drives the real `wisp`
//! binary, or the real Lambda bootstraps behind the ALB emulator, as a user would.
//! `cargo test --test e2e <module>::` runs one module, e.g. `aws_backends::`.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod admin_cli;
mod api_service;
mod audit;
mod aws_backends;
mod bridge;
mod bridge_service;
mod ci_recipe;
mod console_browser;
mod console_fetch;
mod console_sso;
mod deploy_k8s;
mod doctor;
mod domain_ops;
mod grpc_web;
mod hostile;
mod hostile_tenants;
mod iam_enforced;
mod image;
mod import_pipecd;
mod in_process;
mod infra_routes;
mod instances;
mod lambda_e2e;
mod metrics;
mod migrate_cli;
mod otlp;
mod piped_service;
mod revocation;
mod serve_drain;
mod serve_jobs;
mod serve_tls;
mod simulate;
mod web_console;
mod web_coverage;
mod web_populated;
mod web_rbac_matrix;
