//! The admin address of `wisp serve` and `wisp bridge` (upstream calls it the admin
//! server): `GET /metrics` (Prometheus text format), `GET /version` and `GET /healthz`, on
//! a listener of its own. `wisp serve`'s defaults to loopback so that nothing here is
//! public by accident (the bridge's is off unless given); a Prometheus on another host
//! needs `--admin-addr 0.0.0.0:9085` (upstream's admin port) and a network that keeps
//! strangers off it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use wisp_jobs::fleet::FleetMetrics;
use wisp_store::stores::Stores;
use wisp_telemetry::prometheus::PrometheusHandle;

/// Connections the admin listener serves at once: scrapers and people, not fleets.
const MAX_CONNECTIONS: usize = 64;
/// A client must send its request's headers within this.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a scrape waits for the fleet's measurement (one store read or two per
/// piped) before it answers with the previous one; the measurement goes on, and the
/// next scrape has it. Below Prometheus's default scrape timeout (10 s).
const FLEET_WAIT: Duration = Duration::from_secs(5);

/// What `/version` answers.
pub fn version_json() -> serde_json::Value {
    serde_json::json!({
        "name": "wisp",
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// What `/metrics` renders: the recorder's handle, and the stores the fleet's gauges are
/// measured from (at most once a minute, when scraped).
pub struct MetricsSource {
    pub handle: PrometheusHandle,
    pub stores: Stores,
    pub config_projects: Vec<String>,
    pub fleet: Arc<FleetMetrics>,
}

/// What renders `/metrics`.
pub trait Render: Send + Sync + 'static {
    fn render(&self) -> impl std::future::Future<Output = String> + Send;
}

/// `wisp bridge`: the recorder's metrics alone.
impl Render for PrometheusHandle {
    async fn render(&self) -> String {
        let mut text = PrometheusHandle::render(self);
        text.push_str(&wisp_telemetry::process::render());
        text
    }
}

impl Render for MetricsSource {
    async fn render(&self) -> String {
        // Measured on a task of its own, so that a large fleet on slow stores does not
        // hold the scrape past FLEET_WAIT (nor is the measurement cut short when it does).
        let (fleet, stores, projects) = (
            self.fleet.clone(),
            self.stores.clone(),
            self.config_projects.clone(),
        );
        let measuring = tokio::spawn(async move { fleet.record(&stores, &projects).await });
        if tokio::time::timeout(FLEET_WAIT, measuring).await.is_err() {
            tracing::info!(
                wait_secs = FLEET_WAIT.as_secs(),
                "fleet gauges: the measurement goes on; this scrape has the previous one"
            );
        }
        let mut text = self.handle.render();
        // The process's CPU, memory, files and threads, and the pipeds' own metrics
        // labelled with the project and piped they came from (their `process_*` in the
        // same families as Wisp's).
        let own = wisp_telemetry::process::ProcessStats::read().samples();
        let (pipeds, skipped) =
            wisp_telemetry::reexport::render_with(&own, &self.fleet.piped_metrics());
        if skipped != Default::default() {
            tracing::debug!(?skipped, "pipeds' metrics left out of /metrics");
        }
        text.push_str(&pipeds);
        text
    }
}

/// Serves the admin endpoints on `listener` until the process ends.
pub async fn serve<M: Render>(listener: TcpListener, metrics: M) {
    let metrics = Arc::new(metrics);
    let places = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    loop {
        let Ok(place) = places.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                tracing::warn!(error = %err, "admin: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let metrics = metrics.clone();
            async move { Ok::<_, Infallible>(answer(&req, &*metrics).await) }
        });
        let conn = http.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            let _place = place;
            if let Err(err) = conn.await {
                tracing::debug!(error = %err, "admin: connection ended");
            }
        });
    }
}

async fn answer<B, M: Render>(req: &Request<B>, metrics: &M) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match req.uri().path() {
        "/metrics" => {
            let mut response = Response::new(Full::new(Bytes::from(metrics.render().await)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        "/version" => {
            let mut response = Response::new(Full::new(Bytes::from(version_json().to_string())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok"),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found (the admin address serves /metrics, /version and /healthz)\n",
        ),
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
