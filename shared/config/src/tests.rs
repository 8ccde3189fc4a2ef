//! Whole-document tests against the samples in `testdata/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

fn load(name: &str) -> Config {
    match Config::from_file(testdata(name)) {
        Ok(c) => c,
        Err(e) => panic!("{name}: {e}"),
    }
}

fn parse(yaml: &str) -> Result<Config, ConfigError> {
    Config::from_yaml_str(yaml, "control-plane-config.yaml")
}

fn parse_err(yaml: &str) -> ConfigError {
    match parse(yaml) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e,
    }
}

const ENVELOPE: &str = "apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\n";

#[test]
fn sample_covers_every_section() {
    let c = load("control-plane-config.yaml");
    assert!(c.source.ends_with("control-plane-config.yaml"));
    let s = &c.spec;
    assert_eq!(s.address.as_deref(), Some("https://pipecd.example.com"));
    assert_eq!(s.state_key.expose(), "3f1c9a0e5b7d4c2a");

    assert_eq!(
        s.datastore,
        DatastoreConfig::Firestore(FirestoreConfig {
            namespace: "wisp-test".into(),
            environment: "unit".into(),
            collection_name_prefix: Some("t_".into()),
            project: "example-gcp-project".into(),
            credentials_file: Some("/etc/wisp/firestore.json".into()),
        })
    );
    assert_eq!(
        s.filestore,
        FilestoreConfig::Gcs(GcsConfig {
            bucket: "wisp-test-bucket".into(),
            credentials_file: Some("/etc/wisp/gcs.json".into()),
        })
    );
    assert_eq!(s.cache.ttl.as_std(), Duration::from_secs(600));

    // Given values win, the rest take upstream's defaults.
    let app = &s.insight_collector.application;
    assert!(!app.enabled);
    assert_eq!(app.schedule, "0 * * * *");
    let dep = &s.insight_collector.deployment;
    assert!(dep.enabled);
    assert_eq!(dep.schedule, "15 */2 * * *");
    assert_eq!(dep.chunk_max_count, 500);

    assert_eq!(s.projects.len(), 2);
    let demo = s.find_project("demo").expect("demo project");
    assert_eq!(demo.desc, "Project for trying things out");
    assert_eq!(demo.static_admin.username, "demo-admin");
    assert!(
        demo.static_admin
            .password_hash
            .expose()
            .starts_with("$2a$10$")
    );
    assert_eq!(s.find_project("second").map(|p| p.desc.as_str()), Some(""));
    assert!(s.find_project("nope").is_none());

    assert_eq!(s.shared_sso_configs.len(), 2);
    let gh = s.shared_sso_config("corp-github").expect("github sso");
    assert_eq!(gh.provider, SsoProvider::Github);
    assert_eq!(gh.session_ttl, Some(12));
    assert_eq!(gh.session_ttl(), Duration::from_secs(12 * 3600));
    let g = gh.github.as_ref().expect("github section");
    assert_eq!(g.client_id, "gh-client-id");
    assert_eq!(g.client_secret.expose(), "gh-client-secret");
    assert_eq!(g.base_url.as_deref(), Some("https://github.example.com/"));
    assert_eq!(
        g.upload_url.as_deref(),
        Some("https://github.example.com/api/uploads/")
    );
    assert_eq!(
        g.proxy_url.as_deref(),
        Some("http://proxy.example.com:3128")
    );

    let oidc = s.shared_sso_config("corp-oidc").expect("oidc sso");
    assert_eq!(oidc.provider, SsoProvider::Oidc);
    assert_eq!(oidc.session_ttl(), DEFAULT_SSO_SESSION_TTL);
    let o = oidc.oidc.as_ref().expect("oidc section");
    assert_eq!(
        (
            o.client_id.as_str(),
            o.client_secret.expose(),
            o.issuer.as_str()
        ),
        (
            "oidc-client-id",
            "oidc-client-secret",
            "https://id.example.com"
        )
    );
    assert_eq!(
        o.redirect_uri.as_deref(),
        Some("https://pipecd.example.com/auth/callback")
    );
    assert_eq!(
        o.authorization_endpoint.as_deref(),
        Some("https://id.example.com/authorize")
    );
    assert_eq!(
        o.token_endpoint.as_deref(),
        Some("https://id.example.com/token")
    );
    assert_eq!(
        o.user_info_endpoint.as_deref(),
        Some("https://id.example.com/userinfo")
    );
    assert_eq!(
        o.proxy_url.as_deref(),
        Some("http://proxy.example.com:3128")
    );
    assert_eq!(o.scopes, ["openid", "profile", "email"]);
    assert_eq!(o.roles_claim_key.as_deref(), Some("groups"));
    assert_eq!(o.username_claim_key.as_deref(), Some("preferred_username"));
    assert_eq!(o.avatar_url_claim_key.as_deref(), Some("picture"));

    // Upstream backends load but Wisp refuses to serve them.
    let err = c.ensure_supported().unwrap_err();
    assert!(matches!(err, ConfigError::Unsupported(_)));
    let msg = err.to_string();
    assert!(msg.contains("datastore type FIRESTORE"), "{msg}");
    assert!(msg.contains("filestore type GCS"), "{msg}");
    assert!(msg.contains("does not support"), "{msg}");
    assert!(msg.contains("type: LOCAL"), "{msg}");
}

#[test]
fn upstream_sample_shape_parses() {
    // The layout of upstream's pkg/config/testdata sample (fields in its order,
    // `cache.ttl` as a Go duration, only `insightCollector.deployment` given).
    let c = parse(&format!(
        "{ENVELOPE}spec:
  projects:
    - id: abc
      staticAdmin:
        username: test-user
        passwordHash: test-password
  sharedSSOConfigs:
    - name: github
      provider: GITHUB
      github:
        clientId: client-id
        clientSecret: client-secret
        baseUrl: base-url
        uploadUrl: upload-url
  datastore:
    type: FIRESTORE
    config:
      namespace: pipecd-test
      environment: unit-test
      project: project
      credentialsFile: \"datastore-credentials-file.json\"
  filestore:
    type: GCS
    config:
      bucket: bucket
      credentialsFile: \"filestore-credentials-file.json\"
  cache:
    ttl: 5m
  insightCollector:
    deployment:
      enabled: true
      schedule: \"0 10 * * *\"
"
    ))
    .expect("upstream-shaped sample");
    assert_eq!(c.spec.datastore.store_type(), DatastoreType::Firestore);
    assert_eq!(c.spec.filestore.store_type(), FilestoreType::Gcs);
    assert_eq!(c.spec.cache.ttl.as_std(), Duration::from_secs(300));
    assert_eq!(c.spec.insight_collector.deployment.schedule, "0 10 * * *");
    assert_eq!(c.spec.insight_collector.deployment.chunk_max_count, 1000);
    assert!(c.spec.insight_collector.application.enabled);
    assert_eq!(c.spec.projects[0].id, "abc");
}

#[test]
fn quickstart_shape_parses_but_its_mysql_is_unsupported() {
    let c = load("quickstart.yaml");
    let DatastoreConfig::MySql(mysql) = &c.spec.datastore else {
        panic!("not MySQL: {:?}", c.spec.datastore)
    };
    assert_eq!(mysql.url, "root:test@tcp(controlplane-mysql:3306)");
    assert_eq!(mysql.database.as_deref(), Some("quickstart"));
    let FilestoreConfig::Minio(minio) = &c.spec.filestore else {
        panic!("not MinIO: {:?}", c.spec.filestore)
    };
    assert!(minio.auto_create_bucket);
    assert_eq!(
        minio.secret_key_file.as_deref(),
        Some(Path::new("/etc/pipecd-secret/minio-secret-key"))
    );
    assert_eq!(c.spec.projects[0].static_admin.username, "hello-pipecd");

    let msg = c.ensure_supported().unwrap_err().to_string();
    assert!(msg.contains("quickstart.yaml"), "{msg}");
    assert!(msg.contains("datastore type MYSQL"), "{msg}");
    // MinIO is a filestore Wisp runs (through the S3 API).
    assert!(!msg.contains("MINIO"), "{msg}");
}

#[test]
fn embedded_types_and_path_resolution() {
    let mut c = load("embedded.yaml");
    c.ensure_supported().expect("LOCAL stores are supported");
    assert_eq!(c.spec.cache.ttl.as_std(), Duration::from_secs(5400));
    assert_eq!(
        c.spec.datastore,
        DatastoreConfig::Local(LocalDatastoreConfig {
            path: Some("state/wisp.db".into())
        })
    );

    c.resolve_relative_paths(Path::new("/etc/wisp"));
    c.fill_local_defaults(Path::new("/var/lib/wisp"));
    let DatastoreConfig::Local(ds) = &c.spec.datastore else {
        panic!("not LOCAL")
    };
    assert_eq!(
        ds.path.as_deref(),
        Some(Path::new("/etc/wisp/state/wisp.db"))
    );
    let FilestoreConfig::Local(fs) = &c.spec.filestore else {
        panic!("not LOCAL")
    };
    // Already absolute: untouched.
    assert_eq!(fs.dir.as_deref(), Some(Path::new("/srv/wisp/files")));

    // Unset paths get data-dir defaults; resolution leaves them alone when unset.
    let mut c = parse(&format!(
        "{ENVELOPE}spec:\n  datastore: {{type: LOCAL}}\n  filestore: {{type: EMBEDDED}}\n"
    ))
    .expect("bare LOCAL");
    c.resolve_relative_paths(Path::new("/etc/wisp"));
    assert_eq!(c.spec.datastore, DatastoreConfig::default());
    c.fill_local_defaults(Path::new("/data"));
    assert_eq!(c, {
        let mut d = Config::default_embedded("/data");
        d.source = c.source.clone();
        d
    });
}

#[test]
fn aws_types_are_supported() {
    let mut c = load("aws.yaml");
    c.ensure_supported()
        .expect("DYNAMODB, S3 and REDIS are supported");
    assert_eq!(
        c.spec.datastore,
        DatastoreConfig::DynamoDb(DynamoDbConfig {
            table: "wisp".into(),
            region: Some("eu-west-1".into()),
            endpoint: None,
        })
    );
    let FilestoreConfig::S3(s3) = &c.spec.filestore else {
        panic!("not S3: {:?}", c.spec.filestore)
    };
    assert_eq!(
        (s3.bucket.as_str(), s3.prefix.as_deref()),
        ("wisp-files", Some("prod/"))
    );
    assert_eq!(c.spec.cache.cache_type(), CacheType::Redis);
    assert_eq!(c.spec.cache.ttl.as_std(), Duration::from_secs(300));
    let redis = c.spec.cache.redis().expect("redis");
    assert_eq!(
        redis.url(),
        "rediss://wisp.abc123.euw1.cache.amazonaws.com:6379"
    );

    // The token file is relative to the configuration file; nothing else moves.
    c.resolve_relative_paths(Path::new("/etc/wisp"));
    c.fill_local_defaults(Path::new("/var/lib/wisp"));
    let redis = c.spec.cache.redis().expect("redis");
    assert_eq!(
        redis.auth_token_file.as_deref(),
        Some(Path::new("/etc/wisp/secrets/redis-token"))
    );
    assert!(matches!(c.spec.datastore, DatastoreConfig::DynamoDb(_)));

    // Any mix of embedded and AWS stores is fine.
    let mixed = parse(&format!(
        "{ENVELOPE}spec:
  datastore: {{type: LOCAL}}
  filestore: {{type: S3, config: {{bucket: b, endpoint: 'http://127.0.0.1:5000'}}}}
  cache: {{type: REDIS, config: {{address: 'redis://127.0.0.1:6379'}}}}
"
    ))
    .expect("mixed");
    mixed.ensure_supported().expect("mixing is supported");

    // Required and conflicting fields.
    let err = parse_err(&format!(
        "{ENVELOPE}spec:
  datastore: {{type: DYNAMODB, config: {{region: eu-west-1}}}}
  cache: {{type: REDIS, config: {{tls: true, authToken: t, authTokenFile: f}}}}
"
    ));
    let ConfigError::Invalid { problems, .. } = &err else {
        panic!("not a validation error: {err:?}")
    };
    assert_eq!(
        problems,
        &[
            "datastore.config.table is required for type DYNAMODB",
            "cache.config.address or cacheId is required for type REDIS",
            "cache.config: set authToken or authTokenFile, not both",
        ],
        "{err}"
    );
    // The AUTH token never shows in Debug output.
    let c = parse(&format!(
        "{ENVELOPE}spec:\n  cache: {{type: REDIS, config: {{address: h, authToken: tok-4242}}}}\n"
    ))
    .expect("inline token");
    assert!(!format!("{c:?}").contains("tok-4242"));
}

#[test]
fn default_embedded_config() {
    let c = Config::default_embedded("/var/lib/wisp");
    assert_eq!(
        c.spec.datastore,
        DatastoreConfig::Local(LocalDatastoreConfig {
            path: Some("/var/lib/wisp/wisp.db".into())
        })
    );
    assert_eq!(
        c.spec.filestore,
        FilestoreConfig::Local(LocalFilestoreConfig {
            dir: Some("/var/lib/wisp/filestore".into())
        })
    );
    assert_eq!(c.spec.cache.ttl.as_std(), DEFAULT_CACHE_TTL);
    assert!(c.spec.projects.is_empty());
    assert!(c.spec.shared_sso_configs.is_empty());
    c.validate().expect("valid");
    c.ensure_supported().expect("supported");
}

#[test]
fn defaults_applied_to_minimal_and_zero_values() {
    for yaml in [
        ENVELOPE.to_owned(),
        format!("{ENVELOPE}spec:\n"),
        format!("{ENVELOPE}spec: {{}}\n"),
        format!("{ENVELOPE}spec:\n  cache:\n  insightCollector:\n  projects:\n"),
        format!(
            "{ENVELOPE}spec:
  address: ''
  cache: {{ttl: 0s}}
  insightCollector:
    application: {{schedule: ''}}
    deployment: {{schedule: '', chunkMaxCount: 0}}
"
        ),
    ] {
        let c = parse(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        let s = &c.spec;
        assert_eq!(s.address, None, "{yaml}");
        assert_eq!(s.cache.ttl.as_std(), Duration::from_secs(300), "{yaml}");
        assert_eq!(
            s.insight_collector,
            InsightCollectorConfig::default(),
            "{yaml}"
        );
        assert!(s.insight_collector.application.enabled);
        assert_eq!(s.insight_collector.application.schedule, "0 * * * *");
        assert!(s.insight_collector.deployment.enabled);
        assert_eq!(s.insight_collector.deployment.schedule, "30 * * * *");
        assert_eq!(s.insight_collector.deployment.chunk_max_count, 1000);
        assert_eq!(s.datastore, DatastoreConfig::default(), "{yaml}");
        assert_eq!(s.filestore, FilestoreConfig::default(), "{yaml}");
    }
}

#[test]
fn unknown_field_names_field_and_line() {
    let err = parse_err(&format!("{ENVELOPE}spec:\n  datastor:\n    type: LOCAL\n"));
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "control-plane-config.yaml: spec: unknown field `datastor` at line 4 column 3, expected one of"
        ),
        "{msg}"
    );
    assert!(msg.contains("`datastore`"), "{msg}");
    assert!(
        matches!(
            err,
            ConfigError::Parse {
                line: Some(4),
                column: Some(3),
                ..
            }
        ),
        "{err:?}"
    );

    // Deeper down, each time with the field and its position.
    let cases = [
        ("metadata: {}\nspec: {}\n", "metadata", 3, 1),
        (
            "spec:\n  projects:\n    - id: a\n      staticAdmin: {username: u, passwordHash: h}\n      role: admin\n",
            "role",
            7,
            7,
        ),
        (
            "spec:\n  projects:\n    - id: a\n      staticAdmin:\n        username: u\n        password: h\n",
            "password",
            8,
            9,
        ),
        (
            "spec:\n  datastore:\n    type: LOCAL\n    config:\n      file: x.db\n",
            "file",
            7,
            7,
        ),
        (
            "spec:\n  filestore:\n    type: S3\n    config:\n      bucket: b\n      roleArm: x\n",
            "roleArm",
            8,
            7,
        ),
        ("spec:\n  cache:\n    tll: 5m\n", "tll", 5, 5),
        (
            "spec:\n  cache:\n    type: REDIS\n    config:\n      address: h\n      authtoken: x\n",
            "authtoken",
            8,
            7,
        ),
        (
            "spec:\n  datastore:\n    type: DYNAMODB\n    config:\n      table: t\n      tableName: x\n",
            "tableName",
            8,
            7,
        ),
        (
            "spec:\n  insightCollector:\n    deployment:\n      chunkMaxCnt: 3\n",
            "chunkMaxCnt",
            6,
            7,
        ),
        (
            "spec:\n  sharedSSOConfigs:\n    - name: x\n      provider: OIDC\n      oidc:\n        clientId: a\n        clientSecret: b\n        issuer: c\n        scope: [openid]\n",
            "scope",
            11,
            9,
        ),
    ];
    for (body, field, line, column) in cases {
        let err = parse_err(&format!("{ENVELOPE}{body}"));
        let msg = err.to_string();
        assert!(
            msg.contains(&format!(
                "unknown field `{field}` at line {line} column {column}"
            )),
            "{field}: {msg}"
        );
        assert!(msg.starts_with("control-plane-config.yaml: "), "{msg}");
    }
}

#[test]
fn type_errors_carry_a_location() {
    let err = parse_err(&format!("{ENVELOPE}spec:\n  cache:\n    ttl: 5 minutes\n"));
    let msg = err.to_string();
    // The location and the reason, never the value (it could be a misplaced secret).
    assert!(msg.contains("spec.cache.ttl: invalid duration"), "{msg}");
    assert!(!msg.contains("5 minutes"), "{msg}");
    assert!(msg.contains("line 5"), "{msg}");

    let err = parse_err(&format!(
        "{ENVELOPE}spec:\n  datastore:\n    type: POSTGRES\n"
    ));
    let msg = err.to_string();
    assert!(msg.contains("an unknown variant"), "{msg}");
    assert!(!msg.contains("POSTGRES"), "{msg}");
    assert!(msg.contains("line 5 column 11"), "{msg}");

    let err = parse_err(&format!(
        "{ENVELOPE}spec:\n  sharedSSOConfigs:\n    - name: x\n      provider: GITLAB\n"
    ));
    assert!(
        err.to_string().contains("an unknown variant") && !err.to_string().contains("GITLAB"),
        "{err}"
    );

    let err = parse_err(&format!(
        "{ENVELOPE}spec:\n  insightCollector:\n    deployment: {{chunkMaxCount: -1}}\n"
    ));
    assert!(err.to_string().contains("line 5"), "{err}");

    let err = parse_err(&format!("{ENVELOPE}spec:\n  projects: [\n"));
    assert!(
        matches!(err, ConfigError::Parse { line: Some(_), .. }),
        "{err:?}"
    );
}

#[test]
fn wrong_kind_or_api_version() {
    let err = parse_err("apiVersion: pipecd.dev/v1beta1\nkind: Piped\nspec:\n  pipedID: x\n");
    assert!(matches!(err, ConfigError::Kind { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("unsupported kind \"Piped\", expected \"ControlPlane\""),
        "{msg}"
    );

    let err = parse_err("apiVersion: pipecd.dev/v1\nkind: ControlPlane\n");
    assert!(matches!(err, ConfigError::ApiVersion { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("unsupported apiVersion \"pipecd.dev/v1\", expected \"pipecd.dev/v1beta1\""),
        "{msg}"
    );

    let err = parse_err("kind: ControlPlane\nspec: {}\n");
    assert!(err.to_string().contains("`apiVersion` is missing"), "{err}");
    let err = parse_err("apiVersion: pipecd.dev/v1beta1\nspec: {}\n");
    assert!(err.to_string().contains("`kind` is missing"), "{err}");

    for empty in ["", "# only a comment\n", "---\n"] {
        let err = parse_err(empty);
        assert!(
            err.to_string().contains("document is empty"),
            "{empty:?}: {err}"
        );
    }
    let err = parse_err("- a list\n");
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("expected a control-plane configuration mapping"),
        "{err}"
    );
}

#[test]
fn validation_reports_every_problem() {
    let err = parse_err(&format!(
        "{ENVELOPE}spec:
  projects:
    - id: a
      staticAdmin: {{username: u, passwordHash: h}}
    - id: a
      staticAdmin: {{username: u, passwordHash: h}}
    - id: ''
      staticAdmin: {{username: u, passwordHash: h}}
    - id: b
  sharedSSOConfigs:
    - name: s
      provider: GITHUB
    - name: s
      provider: OIDC
      oidc: {{clientId: c, clientSecret: d}}
"
    ));
    let ConfigError::Invalid { problems, .. } = &err else {
        panic!("not a validation error: {err:?}")
    };
    let expected = [
        "projects[1]: duplicate project id \"a\"",
        "projects[2]: id must not be empty",
        "projects[3]: staticAdmin.username is required",
        "projects[3]: staticAdmin.passwordHash is required",
        "sharedSSOConfigs[0]: provider GITHUB requires a `github` section",
        "sharedSSOConfigs[1]: duplicate shared SSO config name \"s\"",
        "sharedSSOConfigs[1]: oidc.issuer is required",
    ];
    assert_eq!(problems, &expected, "{err}");
    assert!(
        err.to_string()
            .starts_with("control-plane-config.yaml: invalid configuration: projects[1]"),
        "{err}"
    );

    let err = parse_err(&format!(
        "{ENVELOPE}spec:\n  filestore:\n    type: S3\n    config: {{region: eu-west-1}}\n"
    ));
    assert!(
        err.to_string().contains("bucket is required for type S3"),
        "{err}"
    );
}

#[test]
fn shared_sso_upstream_variants() {
    let c = parse(&format!(
        "{ENVELOPE}spec:
  sharedSSOConfigs:
    - name: snake
      provider: GITHUB
      session_ttl: \"48\"
      github:
        client_id: a
        client_secret: b
        base_url: https://ghe.example.com
    - name: google
      provider: GOOGLE
      sessionTtl: 0
      google: {{clientId: g, clientSecret: h}}
"
    ))
    .expect("protobuf JSON spellings");
    let snake = c.spec.shared_sso_config("snake").expect("snake");
    assert_eq!(snake.session_ttl(), Duration::from_secs(48 * 3600));
    let gh = snake.github.as_ref().expect("github");
    assert_eq!(gh.client_id, "a");
    assert_eq!(gh.base_url.as_deref(), Some("https://ghe.example.com"));
    let google = c.spec.shared_sso_config("google").expect("google");
    assert_eq!(google.provider, SsoProvider::Google);
    assert_eq!(google.session_ttl(), DEFAULT_SSO_SESSION_TTL);

    let err = parse_err(&format!(
        "{ENVELOPE}spec:\n  sharedSSOConfigs:\n    - provider: GITHUB\n      github: {{clientId: a, clientSecret: b}}\n"
    ));
    assert!(err.to_string().contains("missing field `name`"), "{err}");
    let err = parse_err(&format!(
        "{ENVELOPE}spec:\n  sharedSSOConfigs:\n    - name: x\n      provider: GITHUB\n      sessionTtl: -1\n"
    ));
    assert!(err.to_string().contains("must not be negative"), "{err}");
}

#[test]
fn from_file_errors_name_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("control-plane-config.yaml");
    std::fs::write(&path, format!("{ENVELOPE}spec:\n  datastor: {{}}\n")).expect("write");
    let msg = Config::from_file(&path).unwrap_err().to_string();
    assert!(
        msg.starts_with(&format!(
            "{}: spec: unknown field `datastor` at line 4 column 3",
            path.display()
        )),
        "{msg}"
    );

    let missing = dir.path().join("absent.yaml");
    let err = Config::from_file(&missing).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("absent.yaml"), "{err}");
}

#[test]
fn debug_redacts_secrets() {
    let c = load("control-plane-config.yaml");
    let shown = format!("{c:?}");
    for secret in [
        "3f1c9a0e5b7d4c2a",
        "gh-client-secret",
        "oidc-client-secret",
        "$2a$10$",
    ] {
        assert!(!shown.contains(secret), "{secret} leaked in Debug output");
    }
    // Non-secret values are still visible.
    assert!(shown.contains("gh-client-id"));
}

#[test]
fn yaml_round_trip() {
    for name in [
        "control-plane-config.yaml",
        "quickstart.yaml",
        "embedded.yaml",
        "aws.yaml",
    ] {
        let c = load(name);
        let text = c.to_yaml_string().expect("serialize");
        assert!(text.starts_with("apiVersion: pipecd.dev/v1beta1\nkind: ControlPlane\n"));
        let again =
            Config::from_yaml_str(&text, &c.source).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(again, c, "{text}");
    }
    let text = Config::default_embedded("/d")
        .to_yaml_string()
        .expect("serialize");
    assert!(
        text.contains("type: LOCAL") && text.contains("path: /d/wisp.db"),
        "{text}"
    );
    assert!(text.contains("ttl: 5m0s"), "{text}");
}

#[test]
fn jobs_default_to_the_lambda_schedules_and_can_be_set() {
    let c = parse(&format!("{ENVELOPE}spec: {{}}\n")).expect("parse");
    let jobs = &c.spec.jobs;
    assert_eq!(
        jobs.orphan_commands_interval(),
        Duration::from_secs(6 * 3600)
    );
    assert_eq!(jobs.deployment_chains_interval(), Duration::from_secs(60));
    assert_eq!(jobs.insights_interval(), Duration::from_secs(3600));
    assert_eq!(jobs.command_timeout(), Duration::from_secs(24 * 3600));
    assert_eq!(
        jobs.plan_preview_output_ttl(),
        Duration::from_secs(48 * 3600)
    );

    let c = parse(&format!(
        "{ENVELOPE}spec:\n  jobs:\n    orphanCommands: {{interval: 2s, commandTimeout: 90s}}\n    deploymentChains: {{interval: 500ms}}\n"
    ))
    .expect("parse");
    let jobs = &c.spec.jobs;
    assert_eq!(jobs.orphan_commands_interval(), Duration::from_secs(2));
    assert_eq!(jobs.command_timeout(), Duration::from_secs(90));
    assert_eq!(
        jobs.deployment_chains_interval(),
        Duration::from_millis(500)
    );
    assert_eq!(jobs.piped_stats_interval(), Duration::from_secs(24 * 3600));

    let err = parse_err(&format!(
        "{ENVELOPE}spec:\n  jobs:\n    orphanCommand: {{interval: 2s}}\n"
    ));
    assert!(err.to_string().contains("orphanCommand"), "{err}");
}

#[test]
fn errors_never_echo_a_value() {
    for body in [
        "spec:\n  insightCollector:\n    application: {enabled: \"hunter2\"}\n",
        "spec:\n  cache:\n    ttl: hunter2\n",
        "spec:\n  datastore:\n    type: hunter2\n",
        "spec:\n  insightCollector:\n    deployment: {chunkMaxCount: hunter2}\n",
    ] {
        let msg = parse_err(&format!("{ENVELOPE}{body}")).to_string();
        assert!(!msg.contains("hunter2"), "{msg}");
        assert!(msg.contains("line "), "still says where: {msg}");
    }
}

#[test]
fn stage_log_cap_defaults_and_can_be_set() {
    let c = parse(&format!("{ENVELOPE}spec: {{}}\n")).expect("parse");
    assert_eq!(c.spec.stage_logs.max_bytes_per_stage(), 4 * 1024 * 1024);
    let c = parse(&format!(
        "{ENVELOPE}spec:\n  stageLogs:\n    maxBytesPerStage: 65536\n"
    ))
    .expect("parse");
    assert_eq!(c.spec.stage_logs.max_bytes_per_stage(), 65536);
    let err = parse(&format!(
        "{ENVELOPE}spec:\n  stageLogs:\n    maxBytesPerStage: 10\n"
    ))
    .and_then(|c| c.validate().map(|()| c))
    .unwrap_err()
    .to_string();
    assert!(err.contains("stageLogs.maxBytesPerStage"), "{err}");
}

#[test]
fn audit_retention_defaults_to_90_days_and_can_be_set() {
    let c = parse(&format!("{ENVELOPE}spec: {{}}\n")).expect("parse");
    assert_eq!(
        c.spec.audit.retention(),
        Duration::from_secs(90 * 24 * 3600)
    );
    let c = parse(&format!("{ENVELOPE}spec:\n  audit:\n    retention: 720h\n")).expect("parse");
    assert_eq!(
        c.spec.audit.retention(),
        Duration::from_secs(30 * 24 * 3600)
    );
    let again = parse(&c.to_yaml_string().expect("yaml")).expect("reparse");
    assert_eq!(again.spec, c.spec);
}

#[test]
fn piped_releases_default_to_the_checked_upstream_release_and_can_be_set() {
    let c = parse(&format!("{ENVELOPE}spec: {{}}\n")).expect("parse");
    assert_eq!(
        c.spec.piped_releases.versions(),
        vec![UPSTREAM_RELEASE.to_owned()]
    );
    assert!(c.spec.piped_releases.deprecated_notes.is_empty());

    let c = parse(&format!(
        "{ENVELOPE}spec:\n  pipedReleases:\n    versions: [v0.58.0, v0.57.1]\n    deprecatedNotes:\n      - {{version: v0.58.0, notes: \"- foo is gone\"}}\n"
    ))
    .expect("parse");
    assert_eq!(c.spec.piped_releases.versions(), vec!["v0.58.0", "v0.57.1"]);
    assert_eq!(
        c.spec.piped_releases.deprecated_notes,
        vec![DeprecatedNote {
            version: "v0.58.0".into(),
            notes: "- foo is gone".into()
        }]
    );
    // Written back, it loads to the same.
    let again = parse(&c.to_yaml_string().expect("yaml")).expect("reparse");
    assert_eq!(again.spec, c.spec);

    // An explicit empty list offers none.
    let c = parse(&format!(
        "{ENVELOPE}spec:\n  pipedReleases:\n    versions: []\n"
    ))
    .expect("parse");
    assert!(c.spec.piped_releases.versions().is_empty());

    let err = parse_err(&format!(
        "{ENVELOPE}spec:\n  pipedReleases:\n    versions: [0.58.0, v1]\n    deprecatedNotes: [{{version: latest, notes: x}}]\n"
    ))
    .to_string();
    assert!(err.contains("pipedReleases.versions[0]"), "{err}");
    assert!(err.contains("pipedReleases.versions[1]"), "{err}");
    assert!(
        err.contains("pipedReleases.deprecatedNotes[0].version"),
        "{err}"
    );
}

/// Configs come from files and secrets an operator may mistype: any text, and the
/// samples with bytes changed, load (and then write back to the same configuration) or
/// are refused with an error of the right kind that says where, and an error never
/// repeats the values it was given. The first target prints how many inputs reach each
/// assertion (`--nocapture`).
mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;
    use wisp_reach::Reach;

    fn samples() -> Vec<String> {
        [
            "aws.yaml",
            "control-plane-config.yaml",
            "embedded.yaml",
            "quickstart.yaml",
        ]
        .iter()
        .map(|n| std::fs::read_to_string(testdata(n)).unwrap_or_default())
        .collect()
    }

    /// A sample with a few bytes overwritten, inserted or cut.
    fn mutated() -> impl Strategy<Value = String> {
        (
            proptest::sample::select(samples()),
            proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
        )
            .prop_map(|(sample, edits)| {
                let mut bytes = sample.into_bytes();
                for (at, byte, op) in edits {
                    if bytes.is_empty() {
                        break;
                    }
                    let i = at.index(bytes.len());
                    match op {
                        0 => bytes[i] = byte,
                        1 => bytes.insert(i, byte),
                        _ => {
                            bytes.remove(i);
                        }
                    }
                }
                String::from_utf8_lossy(&bytes).into_owned()
            })
    }

    /// A configuration that loads writes back (`to_yaml_string`) to YAML that loads as
    /// the same configuration; one that does not load is refused with a parse, header or
    /// validation error, and a parse error's line is within the text.
    #[test]
    fn any_text_loads_and_round_trips_or_is_refused_saying_where() {
        let inputs = prop_oneof![
            1 => ".{0,300}",
            1 => proptest::sample::select(samples()),
            4 => mutated(),
        ];
        Reach::new("config: texts and changed samples", file!())
            .at_least("loaded: written back and loaded the same", 0.1)
            .at_least("refused: a parse error saying where", 0.1)
            .in_all_at_least(1.0)
            .run(inputs, |text| {
                Ok(Some(match parse(&text) {
                    Ok(config) => {
                        let _ = config.ensure_supported();
                        let yaml = config.to_yaml_string().unwrap();
                        prop_assert_eq!(parse(&yaml).ok(), Some(config), "{}", yaml);
                        "loaded: written back and loaded the same"
                    }
                    Err(ConfigError::Parse {
                        line: Some(line), ..
                    }) => {
                        // YAML breaks lines at a lone CR too (`str::lines` does not), so
                        // a text with one has more lines than `lines()` counts.
                        let breaks = text.matches('\n').count() + text.matches('\r').count()
                            - text.matches("\r\n").count();
                        prop_assert!(line >= 1 && line <= breaks + 1, "line {}", line);
                        "refused: a parse error saying where"
                    }
                    Err(ConfigError::Parse { line: None, .. }) => "refused: a parse error",
                    Err(ConfigError::ApiVersion { .. } | ConfigError::Kind { .. }) => {
                        "refused: not a control-plane document"
                    }
                    Err(ConfigError::Invalid { problems, .. }) => {
                        prop_assert!(!problems.is_empty());
                        "refused: invalid values, listed"
                    }
                    Err(other) => {
                        return Err(TestCaseError::fail(format!("unexpected error {other:?}")));
                    }
                }))
            });
    }

    proptest! {
        #[test]
        fn a_mistyped_secret_is_not_echoed(secret in "[A-Za-z0-9]{24}") {
            let yaml = format!("{ENVELOPE}spec:\n  stateKey: [{secret}\n");
            let e = parse(&yaml).unwrap_err();
            prop_assert!(!e.to_string().contains(&secret), "{e}");
        }
    }
}
