//! [`App`]: the loaded configuration, the open stores and the key, and the one builder
//! of every service over them. `wisp serve`, the admin commands, every Lambda function
//! and the benches start here.

use std::collections::BTreeMap;

use std::time::{Duration, Instant};

use wisp_config::{
    CacheBackend, Config, DatastoreConfig, EncryptionKey, FilestoreConfig, ProjectConfig,
};
use wisp_services::auth_source::StoreKeySource;
use wisp_store::projects::ProjectDirectory;
use wisp_store::{StoreError, Stores};

use crate::error::AppError;
use crate::sources::{self, Sources};

pub const QUICKSTART_PROJECT: &str = "quickstart";
pub const QUICKSTART_USER: &str = "hello-pipecd";
pub const QUICKSTART_PASSWORD: &str = "hello-pipecd";

/// The control plane's parts, ready to serve.
pub struct App {
    pub config: Config,
    /// True when running on the built-in defaults (no configuration given).
    pub defaults: bool,
    pub stores: Stores,
    pub encryption_key: Option<EncryptionKey>,
    config_projects: BTreeMap<String, ProjectConfig>,
    /// The configuration's projects over the datastore's.
    projects: ProjectDirectory,
    #[cfg(feature = "web")]
    web_response_budget: Option<wisp_services::web::ResponseBudget>,
    /// What projects' SSO settings may make the control plane reach.
    #[cfg(feature = "web")]
    sso_policy: wisp_services::web::sso_policy::ProviderPolicy,
    started: Instant,
    load_time: Duration,
    stores_time: Duration,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("stores", &self.describe())
            .finish_non_exhaustive()
    }
}

impl App {
    /// Loads the configuration and the key, opens the stores, and, on the built-in
    /// defaults, makes sure the quickstart project exists (so that every entry point on
    /// a fresh data directory sees it).
    pub async fn open(sources: &Sources) -> Result<App, AppError> {
        let started = Instant::now();
        let loaded = sources::load(sources).await?;
        let load_time = started.elapsed();
        let opening = Instant::now();
        let stores = crate::stores::open(&loaded.config, &sources.data_dir).await?;
        let stores_time = opening.elapsed();
        let app = App::from_parts(
            loaded.config,
            loaded.defaults,
            stores,
            loaded.encryption_key,
        );
        let app = App {
            started,
            load_time,
            stores_time,
            ..app
        };
        app.ensure_quickstart_project().await?;
        Ok(app)
    }

    /// An app over stores opened elsewhere (tests, benches, the simulator).
    pub fn from_parts(
        config: Config,
        defaults: bool,
        stores: Stores,
        encryption_key: Option<EncryptionKey>,
    ) -> App {
        let config_projects: BTreeMap<String, ProjectConfig> = config
            .spec
            .projects
            .iter()
            .map(|p| (p.id.clone(), p.clone()))
            .collect();
        let projects = ProjectDirectory::new(
            stores.projects.clone(),
            config_projects.values().map(|p| {
                wisp_store::projects::config_project(
                    &p.id,
                    &p.desc,
                    &p.static_admin.username,
                    p.static_admin.password_hash.expose(),
                )
            }),
        );
        let mut stores = stores;
        stores.audit = stores.audit.with_retention(config.spec.audit.retention());
        App {
            config,
            defaults,
            stores,
            encryption_key,
            config_projects,
            projects,
            #[cfg(feature = "web")]
            web_response_budget: None,
            #[cfg(feature = "web")]
            sso_policy: Default::default(),
            started: Instant::now(),
            load_time: Duration::ZERO,
            stores_time: Duration::ZERO,
        }
    }

    /// What projects' SSO settings may make the control plane reach (`wisp serve
    /// --sso-allow-private-addresses`; on Lambda `WISP_SSO_ALLOW_PRIVATE_ADDRESSES`;
    /// by default public `https://` addresses only).
    #[cfg(feature = "web")]
    pub fn with_sso_policy(
        mut self,
        policy: wisp_services::web::sso_policy::ProviderPolicy,
    ) -> App {
        self.sso_policy = policy;
        self
    }

    /// Every WebService answer is trimmed to fit `budget` (behind an ALB, whose Lambda
    /// responses are limited).
    #[cfg(feature = "web")]
    pub fn with_web_response_budget(mut self, budget: wisp_services::web::ResponseBudget) -> App {
        self.web_response_budget = Some(budget);
        self
    }

    /// The projects of the configuration file, by id.
    pub fn config_projects(&self) -> &BTreeMap<String, ProjectConfig> {
        &self.config_projects
    }

    /// The configuration's projects as the console sees them: read-only, static admin
    /// only (the password hash stays server-side).
    #[cfg(feature = "web")]
    pub fn config_projects_as_model(&self) -> Vec<wisp_proto::model::Project> {
        self.projects.config_projects().cloned().collect()
    }

    /// The configuration's projects over the datastore's: the one place they are merged.
    pub fn projects(&self) -> &ProjectDirectory {
        &self.projects
    }

    /// Whether project `id` exists, in the configuration or in the datastore.
    pub async fn project_exists(&self, id: &str) -> Result<bool, StoreError> {
        self.projects.exists(id).await
    }

    /// On the built-in defaults, project `quickstart` (static admin hello-pipecd /
    /// hello-pipecd) exists, as in upstream's quickstart.
    async fn ensure_quickstart_project(&self) -> Result<(), AppError> {
        if !self.defaults {
            return Ok(());
        }
        let what = "the quickstart project";
        if self
            .project_exists(QUICKSTART_PROJECT)
            .await
            .map_err(|e| AppError::store(what, e))?
        {
            return Ok(());
        }
        let created = wisp_services::ops::projects::create_project(
            &self.stores.projects,
            wisp_services::ops::projects::NewProject {
                id: QUICKSTART_PROJECT.into(),
                desc: "Quickstart project".into(),
                admin_username: QUICKSTART_USER.into(),
                admin_password: QUICKSTART_PASSWORD.into(),
                shared_sso_name: String::new(),
            },
            false,
        )
        .await;
        match created {
            Ok(_) => {
                tracing::info!("created project quickstart (static admin hello-pipecd)");
                Ok(())
            }
            // Another process created it between our check and our write.
            Err(wisp_services::ServiceError::AlreadyExists(_)) => Ok(()),
            Err(e) => Err(AppError::store(
                what,
                StoreError::internal_from("creating it", e),
            )),
        }
    }

    /// The credential source of the piped and API-key verifiers.
    pub fn key_source(&self) -> StoreKeySource {
        StoreKeySource::new(self.stores.clone(), self.config_projects.keys().cloned())
    }

    /// The console's address (`spec.address`), for links the services hand out.
    pub fn web_base_url(&self) -> String {
        self.config.spec.address.clone().unwrap_or_default()
    }

    /// The key console sessions are signed with; the console refuses to start without.
    pub fn session_signer(&self) -> Result<wisp_auth::SessionSigner, AppError> {
        match &self.encryption_key {
            Some(key) => Ok(wisp_auth::SessionSigner::new(key.bytes())),
            None => Err(AppError::NoEncryptionKey),
        }
    }

    // ---- the services ------------------------------------------------------------

    /// The piped verifier with the production cache policy.
    #[cfg(feature = "piped")]
    pub fn piped_verifier(&self) -> std::sync::Arc<wisp_auth::PipedVerifier<StoreKeySource>> {
        std::sync::Arc::new(wisp_auth::PipedVerifier::new(self.key_source()))
    }

    /// PipedService (what pipeds call), with the production verifier.
    #[cfg(feature = "piped")]
    pub fn piped_grpc(&self) -> wisp_transport::piped::PipedGrpc<StoreKeySource> {
        self.piped_grpc_with(self.piped_verifier())
    }

    /// PipedService with the given verifier (benchmarks measure other cache policies).
    #[cfg(feature = "piped")]
    pub fn piped_grpc_with(
        &self,
        verifier: std::sync::Arc<wisp_auth::PipedVerifier<StoreKeySource>>,
    ) -> wisp_transport::piped::PipedGrpc<StoreKeySource> {
        let api = std::sync::Arc::new(wisp_services::piped::PipedApi::new(
            self.stores.clone(),
            self.web_base_url(),
        ));
        wisp_transport::piped::PipedGrpc::new(api, verifier)
    }

    /// OTLP TraceService for the pipeds' spans, checking their tokens as PipedService
    /// does (a verifier with the production cache policy and revocation check), relaying
    /// to `relay`.
    #[cfg(feature = "trace")]
    pub fn trace_grpc(
        &self,
        relay: wisp_transport::trace::Relay,
    ) -> wisp_transport::trace::TraceServer<StoreKeySource> {
        wisp_transport::trace::TraceGrpc::new(relay).into_server(self.piped_verifier())
    }

    /// APIService (what pipectl calls), with its verifier.
    #[cfg(feature = "api")]
    pub fn api_grpc(&self) -> wisp_transport::api::ApiGrpc<StoreKeySource> {
        let verifier = std::sync::Arc::new(wisp_auth::ApiKeyVerifier::new(self.key_source()));
        let api = std::sync::Arc::new(wisp_services::api::ApiApi::new(
            self.stores.clone(),
            self.web_base_url(),
        ));
        wisp_transport::api::ApiGrpc::new(api, verifier)
    }

    /// WebService (what the console calls) over the stores, with the configuration's
    /// projects, the key that opens stored SSO secrets, and the response budget if one
    /// was set. Share one between [`App::web_grpc`] and [`App::console`].
    #[cfg(feature = "web")]
    pub fn web_api(&self) -> std::sync::Arc<wisp_services::web::WebApi> {
        let mut web =
            wisp_services::web::WebApi::new(self.stores.clone(), self.config_projects_as_model());
        if let Some(budget) = self.web_response_budget {
            web = web.with_response_budget(budget);
        }
        web = web.with_sso_policy(self.sso_policy);
        let releases = &self.config.spec.piped_releases;
        web = web.with_piped_releases(wisp_services::web::PipedReleases {
            versions: releases.versions(),
            deprecated_notes: releases
                .deprecated_notes
                .iter()
                .map(|n| (n.version.clone(), n.notes.clone()))
                .collect(),
        });
        if let Some(key) = &self.encryption_key {
            web = web.with_sso_key(*key.aes_key());
        }
        std::sync::Arc::new(web)
    }

    /// WebService over gRPC-web, authenticated by the session cookie.
    #[cfg(feature = "web")]
    pub fn web_grpc(
        &self,
        web: std::sync::Arc<wisp_services::web::WebApi>,
    ) -> Result<wisp_transport::web::WebGrpc, AppError> {
        Ok(wisp_transport::web::WebGrpc::new(
            web,
            self.session_signer()?,
        ))
    }

    /// The console's login, logout, SSO and static files.
    #[cfg(feature = "console")]
    pub fn console(
        &self,
        web: std::sync::Arc<wisp_services::web::WebApi>,
        options: ConsoleOptions,
    ) -> Result<wisp_console::Console, AppError> {
        let signer = self.session_signer()?;
        let sso_states = match &self.encryption_key {
            Some(key) => wisp_auth::SsoStateSigner::new(key.bytes()),
            None => return Err(AppError::NoEncryptionKey),
        };
        let mut console = wisp_console::Console::new(web, signer, sso_states)
            .insecure_cookie(options.insecure_cookie)
            .with_address(self.config.spec.address.as_deref().unwrap_or_default())
            .with_shared_sso(&self.config.spec.shared_sso_configs)
            .with_no_default_role_claims(&self.config.spec.oidc_no_default_role_claims)
            .with_trusted_proxies(options.trusted_proxies)
            .with_sso_policy(self.sso_policy);
        if let Some(key) = &self.encryption_key {
            console = console.with_sso_key(*key.aes_key());
        }
        if let Some(files) = options.static_files {
            console = console.with_static_files(files);
        }
        Ok(console)
    }

    /// What the scheduled jobs take from the configuration.
    #[cfg(feature = "jobs")]
    pub fn job_settings(&self) -> wisp_jobs::Settings {
        let insight = &self.config.spec.insight_collector;
        wisp_jobs::Settings {
            config_projects: self.config_projects.keys().cloned().collect(),
            insight_applications: insight.application.enabled,
            insight_deployments: insight.deployment.enabled,
            insight_chunk_max_count: match insight.deployment.chunk_max_count {
                0 => wisp_config::DEFAULT_DEPLOYMENT_CHUNK_MAX_COUNT as usize,
                n => n as usize,
            },
            command_timeout_secs: secs(self.config.spec.jobs.command_timeout()),
            output_ttl_secs: secs(self.config.spec.jobs.plan_preview_output_ttl()),
        }
    }

    /// How often `wisp serve` runs each job (`jobs` in the configuration).
    #[cfg(feature = "jobs")]
    pub fn job_schedule(&self) -> wisp_jobs::schedule::Schedule {
        job_schedule(&self.config)
    }

    // ---- reporting -----------------------------------------------------------------

    /// Logs how long loading and opening took; call right before serving.
    pub fn log_ready(&self, what: &str) {
        tracing::info!(
            what,
            init_ms = ms(self.started.elapsed()),
            config_ms = ms(self.load_time),
            stores_ms = ms(self.stores_time),
            stores = %self.describe(),
            "init complete"
        );
    }

    /// The stores in one line, for the log (no credentials).
    pub fn describe(&self) -> String {
        let spec = &self.config.spec;
        let datastore = match &spec.datastore {
            DatastoreConfig::Local(c) => {
                format!("sqlite:{}", c.path.clone().unwrap_or_default().display())
            }
            DatastoreConfig::DynamoDb(c) => match &c.endpoint {
                Some(endpoint) => format!("dynamodb:{}@{endpoint}", c.table),
                None => format!("dynamodb:{}", c.table),
            },
            other => other.store_type().as_str().to_string(),
        };
        let cache = match &spec.cache.backend {
            CacheBackend::Memory(_) => "cache:memory".to_string(),
            CacheBackend::Redis(c) => format!("cache:{}", c.display_address()),
        };
        format!("{datastore} {} {cache}", self.describe_filestore())
    }

    /// The filestore in a few words (no credentials).
    pub fn describe_filestore(&self) -> String {
        match &self.config.spec.filestore {
            FilestoreConfig::Local(c) => {
                format!("dir:{}", c.dir.clone().unwrap_or_default().display())
            }
            FilestoreConfig::S3(c) => {
                let at = c
                    .endpoint
                    .as_deref()
                    .map(|e| format!("@{e}"))
                    .unwrap_or_default();
                format!(
                    "s3://{}/{}{at}",
                    c.bucket,
                    c.prefix.as_deref().unwrap_or_default()
                )
            }
            FilestoreConfig::Minio(c) => format!("minio://{}@{}", c.bucket, c.endpoint),
            other => other.store_type().as_str().to_string(),
        }
    }
}

/// How the console is served.
#[cfg(feature = "console")]
#[derive(Debug, Default)]
pub struct ConsoleOptions {
    /// Send the session cookie without `Secure` (plain HTTP under a name other than
    /// localhost).
    pub insecure_cookie: bool,
    /// The console's built files; without them only `/auth/*` and `/healthz` answer.
    pub static_files: Option<wisp_console::StaticFiles>,
    /// Proxies whose `X-Forwarded-For` names a static login's source (`wisp serve
    /// --trusted-proxy`); the Lambda function, reached only through the ALB, needs none.
    pub trusted_proxies: Vec<wisp_console::login_guard::Cidr>,
}

/// How often `wisp serve` runs each job under `config` (its `jobs` section); needs no
/// store.
#[cfg(feature = "jobs")]
pub fn job_schedule(config: &Config) -> wisp_jobs::schedule::Schedule {
    use wisp_jobs::Job;
    let jobs = &config.spec.jobs;
    wisp_jobs::schedule::Schedule::new(vec![
        (Job::OrphanCommands, jobs.orphan_commands_interval()),
        (Job::PipedStats, jobs.piped_stats_interval()),
        (
            Job::PlanPreviewOutputs,
            jobs.plan_preview_outputs_interval(),
        ),
        (Job::DeploymentChains, jobs.deployment_chains_interval()),
        (Job::Insights, jobs.insights_interval()),
    ])
}

#[cfg(feature = "jobs")]
fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX).max(1)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
