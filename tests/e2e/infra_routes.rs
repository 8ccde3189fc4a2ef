//! The load balancer routes of the Terraform module (`infra/terraform`) and of the SAM
//! template (`template.yaml`) must be exactly the paths the code serves: each routed
//! function's gRPC service under its current name (the generated server's
//! `NamedService::NAME`) and under the legacy `/pipe.api.service.` alias that the edge
//! rewrites, and everything else to the http function. A renamed service, a missed
//! legacy prefix or a rule pointing at the wrong function fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_norway::Value;
use tonic::server::NamedService;
use wisp_proto::apiservice::api_service_server::ApiServiceServer;
use wisp_proto::pipedservice::piped_service_server::PipedServiceServer;
use wisp_proto::webservice::web_service_server::WebServiceServer;
use wisp_transport::edge::rewrite_legacy_path;

/// A function behind a listener rule: its key (`functions/<key>`), its binary, the
/// transport type its `main` serves, the `wisp_app::App` method that builds it, and that
/// service's gRPC name.
struct Routed {
    key: &'static str,
    binary: &'static str,
    transport: &'static str,
    builder: &'static str,
    service: &'static str,
    /// Services it serves besides, without a legacy alias (the pipeds' OTLP spans): their
    /// gRPC name and the `App` method that builds them.
    extra: &'static [(&'static str, &'static str)],
    /// Plain HTTP paths it serves besides, matched exactly (OTLP/HTTP's `/v1/traces`).
    http_paths: &'static [&'static str],
}

/// OTLP's TraceService (the pipeds' spans), served beside PipedService.
fn trace_service() -> &'static str {
    <opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer<
        (),
    > as NamedService>::NAME
}

fn routed() -> Vec<Routed> {
    vec![
        Routed {
            key: "piped-api",
            binary: "wisp-piped-api",
            transport: "PipedGrpc",
            builder: "piped_grpc",
            service: <PipedServiceServer<()> as NamedService>::NAME,
            extra: &[(
                "opentelemetry.proto.collector.trace.v1.TraceService",
                "trace_grpc",
            )],
            http_paths: &[wisp_transport::otlp_http::PATH],
        },
        Routed {
            key: "api",
            binary: "wisp-api",
            transport: "ApiGrpc",
            builder: "api_grpc",
            service: <ApiServiceServer<()> as NamedService>::NAME,
            extra: &[],
            http_paths: &[],
        },
        Routed {
            key: "web-api",
            binary: "wisp-web-api",
            transport: "WebGrpc",
            builder: "web_grpc",
            service: <WebServiceServer<()> as NamedService>::NAME,
            extra: &[],
            http_paths: &[],
        },
    ]
}

/// The function every other path goes to (the listener's default action).
const DEFAULT_BINARY: &str = "wisp-http";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The ALB path patterns of `service`: current name and legacy alias, each checked
/// against the edge's rewrite so the alias is one the code actually serves.
fn expected_patterns(service: &str) -> BTreeSet<String> {
    let rest = service
        .strip_prefix("grpc.service.")
        .unwrap_or_else(|| panic!("service {service} is not under grpc.service."));
    let legacy = format!("pipe.api.service.{rest}");
    let uri: http::Uri = format!("/{legacy}/AnyMethod")
        .parse()
        .expect("legacy path is a URI");
    assert_eq!(
        rewrite_legacy_path(&uri).as_deref(),
        Some(format!("/{service}/AnyMethod").as_str()),
        "the edge must rewrite /{legacy}/ to /{service}/"
    );
    BTreeSet::from([format!("/{service}/*"), format!("/{legacy}/*")])
}

fn expected() -> BTreeMap<String, BTreeSet<String>> {
    routed()
        .iter()
        .map(|r| {
            let mut patterns = expected_patterns(r.service);
            patterns.extend(r.extra.iter().map(|(service, _)| format!("/{service}/*")));
            patterns.extend(r.http_paths.iter().map(|path| (*path).to_string()));
            (r.binary.to_string(), patterns)
        })
        .collect()
}

#[test]
fn the_extra_services_are_named_as_their_servers_name_them() {
    assert_eq!(routed()[0].extra[0].0, trace_service());
}

#[test]
fn each_routed_function_serves_its_service() {
    for r in routed() {
        let dir = repo().join("functions").join(r.key);
        let manifest = read(&dir.join("Cargo.toml"));
        assert!(
            manifest.contains(&format!("name = \"{}\"", r.binary)),
            "functions/{}/Cargo.toml must build the binary {}",
            r.key,
            r.binary
        );
        let main = read(&dir.join("src/main.rs"));
        assert!(
            main.contains(&format!(".{}(", r.builder)) && main.contains(".into_server()"),
            "functions/{}/src/main.rs must serve App::{} ({})",
            r.key,
            r.builder,
            r.service
        );
        for (service, builder) in r.extra {
            assert!(
                main.contains(&format!(".{builder}(")),
                "functions/{}/src/main.rs must serve App::{builder} ({service})",
                r.key
            );
        }
        // The builder returns that transport.
        let app = read(&repo().join("shared/app/src/app.rs"));
        let signature = app
            .split(&format!("pub fn {}(", r.builder))
            .nth(1)
            .and_then(|rest| rest.split('{').next())
            .unwrap_or_else(|| panic!("shared/app/src/app.rs has no App::{}", r.builder));
        assert!(
            signature.contains(r.transport),
            "App::{} must return {} ({signature})",
            r.builder,
            r.transport
        );
    }
}

// ---------------------------------------------------------------------------------------
// Terraform: a small HCL reader, enough for the literal maps in `locals`.

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Str(String),
    Word(String),
    Punct(char),
}

/// Tokens of HCL text: strings (with escapes), bare words, punctuation; comments dropped.
fn tokenize(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(n) = chars.next() {
                                s.push(n);
                            }
                        }
                        '"' => break,
                        _ => s.push(c),
                    }
                }
                out.push(Token::Str(s));
            }
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            c if c.is_alphanumeric() || c == '_' || c == '-' || c == '.' => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_alphanumeric() || n == '_' || n == '-' || n == '.' {
                        w.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Token::Word(w));
            }
            c if c.is_whitespace() => {}
            c => out.push(Token::Punct(c)),
        }
    }
    out
}

/// The key of a map entry: a quoted string or a bare word.
fn key_of(token: &Token) -> Option<String> {
    match token {
        Token::Str(s) | Token::Word(s) => Some(s.clone()),
        Token::Punct(_) => None,
    }
}

/// The literal map `name = { key = value ... }` inside a `locals` block of `tokens`, its
/// values as lists of strings (a string value is a one-element list).
fn local_map(tokens: &[Token], name: &str) -> BTreeMap<String, Vec<String>> {
    let mut found = None;
    let mut depth = 0usize;
    let mut locals_depth = None;
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if locals_depth.is_some_and(|d| depth < d) {
                    locals_depth = None;
                }
            }
            Token::Word(w) if w == "locals" && tokens.get(i + 1) == Some(&Token::Punct('{')) => {
                locals_depth = Some(depth + 1);
            }
            Token::Word(w)
                if w == name
                    && locals_depth == Some(depth)
                    && tokens.get(i + 1) == Some(&Token::Punct('='))
                    && tokens.get(i + 2) == Some(&Token::Punct('{')) =>
            {
                assert!(found.is_none(), "local.{name} is defined twice");
                found = Some(i + 3);
            }
            _ => {}
        }
    }
    let start = found.unwrap_or_else(|| panic!("no `{name} = {{ ... }}` in a locals block"));
    let mut map = BTreeMap::new();
    let mut i = start;
    loop {
        match tokens.get(i) {
            Some(Token::Punct('}')) => return map,
            Some(Token::Punct(',')) => i += 1,
            Some(t) => {
                let key = key_of(t).unwrap_or_else(|| panic!("local.{name}: bad key {t:?}"));
                assert_eq!(
                    tokens.get(i + 1),
                    Some(&Token::Punct('=')),
                    "local.{name}.{key}"
                );
                i += 2;
                let values = match tokens.get(i) {
                    Some(Token::Str(s)) => {
                        i += 1;
                        vec![s.clone()]
                    }
                    Some(Token::Punct('[')) => {
                        i += 1;
                        let mut values = Vec::new();
                        loop {
                            match tokens.get(i) {
                                Some(Token::Str(s)) => values.push(s.clone()),
                                Some(Token::Punct(',')) => {}
                                Some(Token::Punct(']')) => break,
                                other => panic!("local.{name}.{key}: unexpected {other:?}"),
                            }
                            i += 1;
                        }
                        i += 1;
                        values
                    }
                    other => {
                        panic!("local.{name}.{key}: expected a string or a list, got {other:?}")
                    }
                };
                assert!(
                    map.insert(key.clone(), values).is_none(),
                    "local.{name}.{key} twice"
                );
            }
            None => panic!("local.{name} is not closed"),
        }
    }
}

/// The text of the block that starts with `header` (e.g. `resource "aws_lb_listener_rule"`).
fn block<'a>(text: &'a str, header: &str) -> &'a str {
    let start = text
        .find(header)
        .unwrap_or_else(|| panic!("no {header} block"));
    let mut depth = 0usize;
    for (i, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[start..=start + i];
                }
            }
            _ => {}
        }
    }
    panic!("{header} block is not closed")
}

fn terraform_sources() -> String {
    let dir = repo().join("infra/terraform");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tf"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .tf files in {}", dir.display());
    files.iter().map(|f| read(f) + "\n").collect()
}

#[test]
fn terraform_routes_match_the_services() {
    let text = terraform_sources();
    let tokens = tokenize(&text);
    // Every function the module knows (main.tf); `local.functions` is those deployed,
    // which with compute = "fargate" is the jobs function alone.
    let binaries: BTreeMap<String, String> = local_map(&tokens, "all_functions")
        .into_iter()
        .map(|(key, mut v)| {
            assert_eq!(v.len(), 1, "local.all_functions.{key} is one binary");
            (key, v.remove(0))
        })
        .collect();
    let routes = local_map(&tokens, "routes");

    let mut actual = BTreeMap::new();
    for (key, patterns) in routes {
        let binary = binaries.get(&key).unwrap_or_else(|| {
            panic!("local.routes.{key} names no function in local.all_functions")
        });
        let set: BTreeSet<String> = patterns.iter().cloned().collect();
        assert_eq!(
            set.len(),
            patterns.len(),
            "local.routes.{key} repeats a pattern"
        );
        actual.insert(binary.clone(), set);
    }
    assert_eq!(actual, expected(), "Terraform local.routes");

    // The lists are what the listener rules use, and the rest goes to the http function.
    let rule = block(&text, "resource \"aws_lb_listener_rule\"");
    assert!(rule.contains("for_each") && rule.contains("local.routes"));
    assert!(rule.contains("values = each.value"));
    assert!(rule.contains("aws_lb_target_group.function[each.key]"));
    let https = block(&text, "resource \"aws_lb_listener\" \"https\"");
    assert!(https.contains("aws_lb_target_group.function[\"http\"]"));
    assert_eq!(
        binaries.get("http").map(String::as_str),
        Some(DEFAULT_BINARY)
    );
}

// ---------------------------------------------------------------------------------------
// SAM: template.yaml, read as YAML with CloudFormation's short-form tags.

/// `value` without its `!Tag`, and the tag's name.
fn untag(value: &Value) -> (Option<String>, &Value) {
    match value {
        Value::Tagged(t) => (
            Some(t.tag.to_string().trim_start_matches('!').to_string()),
            &t.value,
        ),
        v => (None, v),
    }
}

fn str_of(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// The logical id a `!Ref X` / `{Ref: X}` names.
fn ref_target(value: &Value) -> Option<String> {
    match untag(value) {
        (Some(tag), v) if tag == "Ref" => str_of(v).map(str::to_string),
        (None, Value::Mapping(m)) => m.get("Ref").and_then(str_of).map(str::to_string),
        _ => None,
    }
}

/// The function whose live alias a `!Ref X.Alias` names (SAM's `AutoPublishAlias`).
fn alias_target(value: &Value) -> Option<String> {
    ref_target(value)?
        .strip_suffix(".Alias")
        .map(str::to_string)
}

struct Template {
    resources: serde_norway::Mapping,
}

impl Template {
    fn load() -> Template {
        let text = read(&repo().join("template.yaml"));
        let doc: Value = serde_norway::from_str(&text).expect("template.yaml is YAML");
        let resources = doc
            .get("Resources")
            .and_then(Value::as_mapping)
            .expect("template.yaml has Resources")
            .clone();
        Template { resources }
    }

    fn resource(&self, id: &str) -> &Value {
        self.resources
            .get(id)
            .unwrap_or_else(|| panic!("template.yaml: no resource {id}"))
    }

    fn of_type(&self, ty: &str) -> Vec<(String, &Value)> {
        self.resources
            .iter()
            .filter(|(_, r)| r.get("Type").and_then(str_of) == Some(ty))
            .filter_map(|(id, r)| str_of(id).map(|id| (id.to_string(), r)))
            .collect()
    }

    /// The cargo binary of the function a Lambda target group invokes, through the
    /// function's live alias (a rollback moves the alias, not the target).
    fn target_group_binary(&self, target_group: &str) -> String {
        let tg = self.resource(target_group);
        let props = tg.get("Properties").expect("target group properties");
        assert_eq!(
            props.get("TargetType").and_then(str_of),
            Some("lambda"),
            "{target_group} must be a Lambda target group"
        );
        let targets = props
            .get("Targets")
            .and_then(Value::as_sequence)
            .unwrap_or_else(|| panic!("{target_group}: no Targets"));
        assert_eq!(targets.len(), 1, "{target_group}: one function");
        let function = targets[0]
            .get("Id")
            .and_then(alias_target)
            .unwrap_or_else(|| panic!("{target_group}: target is not !Ref <Function>.Alias"));
        self.function_binary(&function)
    }

    /// The cargo binary `sam build` puts in a function: the Makefile's
    /// `build-<Function>: BINARY = <binary>`, which one of functions/*/Cargo.toml builds.
    fn function_binary(&self, function: &str) -> String {
        let f = self.resource(function);
        assert_eq!(
            f.get("Type").and_then(str_of),
            Some("AWS::Serverless::Function")
        );
        let meta = f.get("Metadata").expect("function Metadata");
        assert_eq!(
            meta.get("BuildMethod").and_then(str_of),
            Some("makefile"),
            "{function}"
        );
        assert_eq!(
            f.get("Properties")
                .and_then(|p| p.get("CodeUri"))
                .and_then(str_of),
            Some("."),
            "{function}: the Makefile at the workspace root builds it"
        );
        let makefile = read(&repo().join("Makefile"));
        let prefix = format!("build-{function}: BINARY = ");
        let binary = makefile
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("Makefile: no `{prefix}<binary>`"))
            .trim()
            .to_string();
        let built = std::fs::read_dir(repo().join("functions"))
            .expect("functions/")
            .filter_map(|e| e.ok())
            .any(|e| read(&e.path().join("Cargo.toml")).contains(&format!("name = \"{binary}\"")));
        assert!(
            built,
            "{function}: no functions/*/Cargo.toml builds {binary}"
        );
        binary
    }
}

fn forward_target(actions: &Value) -> String {
    let actions = actions.as_sequence().expect("actions are a list");
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].get("Type").and_then(str_of), Some("forward"));
    actions[0]
        .get("TargetGroupArn")
        .and_then(ref_target)
        .expect("forward to !Ref <TargetGroup>")
}

#[test]
fn sam_routes_match_the_services() {
    let t = Template::load();
    let mut actual: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (id, rule) in t.of_type("AWS::ElasticLoadBalancingV2::ListenerRule") {
        let props = rule.get("Properties").expect("rule properties");
        let binary =
            t.target_group_binary(&forward_target(props.get("Actions").expect("rule Actions")));
        let conditions = props
            .get("Conditions")
            .and_then(Value::as_sequence)
            .expect("rule Conditions");
        let mut patterns = Vec::new();
        for c in conditions {
            assert_eq!(
                c.get("Field").and_then(str_of),
                Some("path-pattern"),
                "{id}: only path patterns select a function"
            );
            let values = c
                .get("PathPatternConfig")
                .and_then(|p| p.get("Values"))
                .or_else(|| c.get("Values"))
                .and_then(Value::as_sequence)
                .unwrap_or_else(|| panic!("{id}: no path-pattern values"));
            patterns.extend(values.iter().map(|v| {
                str_of(v)
                    .unwrap_or_else(|| panic!("{id}: a pattern is not a plain string"))
                    .to_string()
            }));
        }
        let set = actual.entry(binary.clone()).or_default();
        for p in patterns {
            assert!(set.insert(p.clone()), "{binary}: pattern {p} twice");
        }
    }
    assert_eq!(actual, expected(), "template.yaml listener rules");

    let listeners = t.of_type("AWS::ElasticLoadBalancingV2::Listener");
    let https: Vec<_> = listeners
        .iter()
        .filter(|(_, l)| {
            l.get("Properties")
                .and_then(|p| p.get("Protocol"))
                .and_then(str_of)
                == Some("HTTPS")
        })
        .collect();
    assert_eq!(https.len(), 1, "one HTTPS listener");
    let default = https[0]
        .1
        .get("Properties")
        .and_then(|p| p.get("DefaultActions"))
        .expect("HTTPS listener DefaultActions");
    assert_eq!(
        t.target_group_binary(&forward_target(default)),
        DEFAULT_BINARY
    );
}

#[test]
fn the_hcl_reader_reads_what_the_module_writes() {
    // Guards the reader itself: comments, escapes and both value forms.
    let text = r#"
        locals {
          # a comment with "quotes" = [
          routes = {
            "a-b" = ["/x/*", "/y\"z/*"] // trailing
            c     = [
              "/w/*",
            ]
          }
        }
        resource "x" "y" { routes = { "no" = ["/not/*"] } }
    "#;
    let map = local_map(&tokenize(text), "routes");
    assert_eq!(map.len(), 2);
    assert_eq!(map["a-b"], vec!["/x/*".to_string(), "/y\"z/*".to_string()]);
    assert_eq!(map["c"], vec!["/w/*".to_string()]);
}
