//! Readiness, for a bridge run as a service (Kubernetes, a load balancer's health check):
//! `GET /readyz` answers 200 only while the control plane answers its own `/healthz`
//! through this bridge's connection pool, and 503 once the bridge is shutting down, so
//! that no new client is sent to a replica that cannot forward its calls. `/healthz`
//! (liveness) stays 200 either way: restarting the bridge would not bring the control
//! plane back.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;

use crate::{Bridge, GrpcBody, HEALTH_PATH, chain};

/// The readiness path.
pub const READY_PATH: &str = "/readyz";
/// How long `/readyz` waits for the control plane's `/healthz`. Keep a probe's
/// `timeoutSeconds` above it.
pub const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

impl Bridge {
    /// Marks the bridge as shutting down: `/readyz` fails from now on, so that load
    /// balancers and Kubernetes stop sending it new clients while calls in flight finish.
    pub fn start_draining(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::SeqCst)
    }

    /// Whether the control plane answers `GET <upstream>/healthz` with 200 now; the
    /// reason when it does not.
    pub async fn upstream_ready(&self) -> Result<(), String> {
        let uri = self
            .inner
            .config
            .upstream
            .uri_for(HEALTH_PATH)
            .map_err(|e| format!("cannot build the health URL: {e}"))?;
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.method_mut() = Method::GET;
        *request.uri_mut() = uri;
        let sent = tokio::time::timeout(READY_CHECK_TIMEOUT, self.inner.client.request(request));
        match sent.await {
            Err(_) => Err(format!(
                "the control plane at {} did not answer {HEALTH_PATH} within {} s",
                self.inner.upstream_display,
                READY_CHECK_TIMEOUT.as_secs()
            )),
            Ok(Err(err)) => Err(format!(
                "cannot reach the control plane at {}: {}",
                self.inner.upstream_display,
                chain(&err)
            )),
            Ok(Ok(response)) if response.status() == StatusCode::OK => Ok(()),
            Ok(Ok(response)) => Err(format!(
                "the control plane at {} answered {HEALTH_PATH} with HTTP {}",
                self.inner.upstream_display,
                response.status()
            )),
        }
    }
}

/// The answer to `GET /readyz`.
pub(crate) async fn answer(bridge: &Bridge) -> Response<GrpcBody> {
    if bridge.is_draining() {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shutting down".into(),
        );
    }
    match bridge.upstream_ready().await {
        Ok(()) => text(StatusCode::OK, "ready".into()),
        Err(why) => {
            tracing::warn!(reason = %why, "not ready");
            text(StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}"))
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<GrpcBody> {
    let mut response = Response::new(GrpcBody::new(Bytes::from(body), None));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
