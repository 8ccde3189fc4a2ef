//! The gate in front of each gRPC service: the caller is authenticated from the headers
//! before a byte of the body is read, its call rate checked ([`crate::rate`]), and the
//! body is then read, decompressed and checked within the bound of its RPC before tonic
//! decodes it.
//!
//! Why not tonic's own limits: they are per service (one bound for a 64-byte `GetPiped` and
//! a multi-megabyte live state), they apply after the handler is called, which is where
//! credentials used to be checked, and a protobuf message can decode to far more memory
//! than its encoded size (an empty element of a repeated field is 2 bytes on the wire and
//! a few hundred in memory). So the gate also estimates what a body decodes to, and all
//! requests being decoded at once share one memory budget: past it, a caller gets a fast
//! `RESOURCE_EXHAUSTED` (which pipeds retry) instead of the process growing.

use std::io::Read;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use tokio::sync::Semaphore;
use tonic::Status;
use tonic::body::Body;
use tonic::server::NamedService;
use tower::Service;

use crate::limits::Limits;
use crate::load::Shares;

/// Memory charged per message on top of the encoded bytes: three times the in-memory
/// size of the biggest message types that come in repeated fields (a test measures
/// them), since the `Vec` holding them doubles as it grows and the old and new blocks
/// both exist while it moves (up to three elements' room per element).
pub const MESSAGE_COST: usize = 960;
/// Memory charged per length-delimited value that is not a message (a string or bytes,
/// an element of a repeated one included): three times its `String` or `Vec` (24 bytes)
/// for the same growth of the `Vec` holding it, and the smallest heap block the
/// allocator gives its contents (32 bytes). A one-byte element is 3 bytes on the wire
/// and about 100 in memory; a test decodes the worst shapes and checks them.
pub const VALUE_COST: usize = 112;
/// The same for the first occurrence of a field in a message (a singular field, or the
/// first element of a repeated one): a message's own size, a string's heap block.
pub const SINGULAR_MESSAGE_COST: usize = MESSAGE_COST / 3;
pub const SINGULAR_VALUE_COST: usize = 32;
/// Estimated memory of all requests being decoded at once, per process (`wisp serve`).
pub const DECODE_BUDGET_BYTES: usize = 96 * 1024 * 1024;
/// On Lambda, the budget is this fraction of the function's memory
/// (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`): an instance serves one request at a time, and the
/// rest of its memory is the runtime's, the event's and the response's.
pub const LAMBDA_BUDGET_DIVISOR: usize = 4;
/// Of the budget, one principal (a piped, an API key, a console user) may hold at most
/// half (room for one request at its RPC's bound), and one project three quarters: one
/// caller's bombs, slow or stalled uploads cannot keep the others from decoding.
pub const PRINCIPAL_SHARE: (usize, usize) = (1, 2);
pub const PROJECT_SHARE: (usize, usize) = (3, 4);
/// How long a request waits for room in the decode budget before it is refused.
pub const DECODE_BUDGET_WAIT: Duration = Duration::from_secs(2);
/// Nesting depth the estimate follows; deeper fields are counted as bytes.
const MAX_DEPTH: usize = 32;
/// gRPC's message prefix: a compressed flag and a big-endian length.
const FRAME_HEADER: usize = 5;
/// Budget units are KiB so that the semaphore's permit count stays small.
const UNIT: usize = 1024;
/// Bytes inflated between two charges to the budget.
const INFLATE_CHUNK: usize = 64 * 1024;

/// Who a call is charged to: its project and, within it, the credential or user.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub project: String,
    pub id: String,
}

/// Who may call a service, decided from the request's headers alone.
#[async_trait]
pub trait Admit: Send + Sync + 'static {
    /// What the handler gets: the authenticated (and, for the console, authorized) caller.
    type Caller: Clone + Send + Sync + 'static;
    /// `method` is the RPC's name as in the path (`ReportStat`); `source` the client's
    /// address when known (failed key checks are counted per id and source).
    async fn admit(
        &self,
        method: &str,
        headers: &HeaderMap,
        source: Option<IpAddr>,
    ) -> Result<Self::Caller, Status>;
    /// Whom the caller's work is charged to, for the per-principal and per-project shares
    /// of the decode budget and of the calls in flight.
    fn principal(caller: &Self::Caller) -> Principal;
}

/// The client's address, put in a request's extensions by what knows it: the TCP peer on
/// `wisp serve`, the load balancer's `X-Forwarded-For` on Lambda.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// Put in a request's extensions by the connection it came on: called with the caller's
/// principal once the gate has admitted it, so that the connection counts as
/// authenticated, and as that principal's (connections past its share of the cap are
/// closed first when the cap is reached).
#[derive(Clone)]
pub struct OnAdmitted(pub Arc<dyn Fn(&Principal) + Send + Sync>);

impl std::fmt::Debug for OnAdmitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnAdmitted")
    }
}

/// The caller the gate admitted for `request`. Every service is served behind its gate
/// (`into_server`), so a request that carries none was not admitted and is refused.
pub fn admitted<C: Clone + Send + Sync + 'static, T>(
    request: &tonic::Request<T>,
) -> Result<C, Status> {
    request
        .extensions()
        .get::<C>()
        .cloned()
        .ok_or_else(|| Status::internal("the call did not pass the service's gate"))
}

/// The decode budget shared by the services of one process: every byte a request holds
/// while it is read, decompressed and decoded is charged to it first, and to its
/// principal's and project's shares of it.
#[derive(Debug, Clone)]
pub struct DecodeBudget {
    units: Arc<Semaphore>,
    total_units: usize,
    shares: Arc<Shares>,
}

impl Default for DecodeBudget {
    fn default() -> Self {
        Self::new(DECODE_BUDGET_BYTES)
    }
}

impl DecodeBudget {
    /// The budget of this process, shared by every service in it: a fraction of the
    /// function's memory on Lambda, [`DECODE_BUDGET_BYTES`] elsewhere.
    pub fn process() -> Self {
        static PROCESS: std::sync::OnceLock<DecodeBudget> = std::sync::OnceLock::new();
        PROCESS
            .get_or_init(|| {
                let lambda_mb = std::env::var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE").ok();
                Self::for_lambda_memory(lambda_mb.as_deref()).unwrap_or_default()
            })
            .clone()
    }

    /// The budget of a Lambda function with `memory_mb` MB (the environment's
    /// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`); `None` when not on Lambda. One request at a
    /// time per instance: no shares.
    pub fn for_lambda_memory(memory_mb: Option<&str>) -> Option<Self> {
        let mb: usize = memory_mb?.trim().parse().ok().filter(|mb| *mb > 0)?;
        let bytes = mb.saturating_mul(1024 * 1024) / LAMBDA_BUDGET_DIVISOR;
        Some(Self::with_shares(bytes, bytes, bytes))
    }

    /// `bytes` in all, [`PRINCIPAL_SHARE`] of it per principal and [`PROJECT_SHARE`] per
    /// project.
    pub fn new(bytes: usize) -> Self {
        let share = |(num, den): (usize, usize)| bytes / den * num;
        Self::with_shares(bytes, share(PRINCIPAL_SHARE), share(PROJECT_SHARE))
    }

    pub fn with_shares(bytes: usize, per_principal: usize, per_project: usize) -> Self {
        let total_units = bytes.div_ceil(UNIT).max(1);
        DecodeBudget {
            units: Arc::new(Semaphore::new(total_units)),
            total_units,
            shares: Arc::new(Shares::new(
                per_principal.div_ceil(UNIT).clamp(1, total_units),
                per_project.div_ceil(UNIT).clamp(1, total_units),
            )),
        }
    }

    /// The whole budget in bytes.
    pub fn bytes(&self) -> usize {
        self.total_units * UNIT
    }

    /// A charge of nothing yet to `owner`, which may wait for room until
    /// [`DECODE_BUDGET_WAIT`] from now.
    fn start(&self, owner: Principal) -> Charge {
        Charge {
            budget: self.clone(),
            owner,
            permit: None,
            charged_units: 0,
            deadline: tokio::time::Instant::now() + DECODE_BUDGET_WAIT,
        }
    }

    fn reserve(&self, owner: &Principal, units: usize) -> bool {
        self.shares.take(owner, units)
    }

    fn unreserve(&self, owner: &Principal, units: usize) {
        self.shares.give_back(owner, units);
    }
}

/// What one request holds of the budget; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: DecodeBudget,
    owner: Principal,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    charged_units: usize,
    deadline: tokio::time::Instant,
}

impl Charge {
    /// Makes the charge at least `bytes` in all.
    async fn to(&mut self, bytes: usize) -> Result<(), Status> {
        let busy = || Status::resource_exhausted("server busy: too much request data in flight");
        let units = bytes.div_ceil(UNIT);
        if units <= self.charged_units {
            return Ok(());
        }
        if units > self.budget.total_units {
            return Err(busy());
        }
        let more_units = units - self.charged_units;
        let more = u32::try_from(more_units).map_err(|_| busy())?;
        // The caller's shares first, without waiting: past them it is this caller that is
        // too busy, and waiting would only hold what it has longer.
        if !self.budget.reserve(&self.owner, more_units) {
            return Err(Status::resource_exhausted(
                "server busy: this caller has too much request data in flight",
            ));
        }
        let acquire = self.budget.units.clone().acquire_many_owned(more);
        let permit = match tokio::time::timeout_at(self.deadline, acquire).await {
            Ok(Ok(permit)) => permit,
            _ => {
                self.budget.unreserve(&self.owner, more_units);
                return Err(busy());
            }
        };
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        self.charged_units = units;
        Ok(())
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.charged_units > 0 {
            self.budget.unreserve(&self.owner, self.charged_units);
        }
    }
}

/// A tonic service behind its gate.
pub struct Gate<A, S> {
    admit: Arc<A>,
    limits: &'static Limits,
    budget: DecodeBudget,
    inner: S,
    /// Where the calls [`crate::audit::audited`] names are recorded.
    audit: Option<wisp_store::audit::AuditStore>,
}

/// Put in an admitted request's extensions when its call is audited: the ids it names.
#[derive(Debug, Clone)]
struct AuditTargets(Vec<String>);

impl<A, S: Clone> Clone for Gate<A, S> {
    fn clone(&self) -> Self {
        Gate {
            admit: self.admit.clone(),
            limits: self.limits,
            budget: self.budget.clone(),
            inner: self.inner.clone(),
            audit: self.audit.clone(),
        }
    }
}

impl<A, S> std::fmt::Debug for Gate<A, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").finish_non_exhaustive()
    }
}

impl<A, S> Gate<A, S> {
    pub fn new(admit: Arc<A>, limits: &'static Limits, budget: DecodeBudget, inner: S) -> Self {
        Gate {
            admit,
            limits,
            budget,
            inner,
            audit: None,
        }
    }

    /// Records the audited calls (see [`crate::audit`]) in `audit`, once answered.
    pub fn with_audit(mut self, audit: wisp_store::audit::AuditStore) -> Self {
        self.audit = Some(audit);
        self
    }
}

impl<A, S: NamedService> NamedService for Gate<A, S> {
    const NAME: &'static str = S::NAME;
}

impl<A, S> Service<Request<Body>> for Gate<A, S>
where
    A: Admit,
    S: Service<Request<Body>, Response = Response<Body>, Error = std::convert::Infallible>
        + NamedService
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response<Body>, Self::Error>> + Send>,
    >;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let admit = self.admit.clone();
        let limits = self.limits;
        let budget = self.budget.clone();
        // The clone is ready (tonic's generated servers always are); keep `self.inner`
        // for the next call.
        let mut inner = self.inner.clone();
        let label = limits
            .method(method_of(&req))
            .map_or("unknown", |(name, _)| name);
        let service = service_label(S::NAME);
        let audit = self
            .audit
            .clone()
            .and_then(|store| crate::audit::audited(service, label).map(|paths| (store, paths)));
        let source = req
            .extensions()
            .get::<ClientAddr>()
            .map_or_else(|| "unknown".to_string(), |c| c.0.to_string());
        // Every log line of the call carries its service and method; the span ends with
        // its code and time (a subscriber that exports spans, as OpenTelemetry does, sees
        // them whole).
        let span = tracing::info_span!(
            "rpc",
            service,
            method = label,
            code = tracing::field::Empty,
            ms = tracing::field::Empty,
            // Set by a handler whose request names a deployment (PipedService's).
            deployment_id = tracing::field::Empty
        );
        // A caller that sends W3C trace context (gRPC metadata, or the HTTP headers of
        // gRPC-web and OTLP/HTTP) gets this call's span under its own.
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
        wisp_telemetry::continue_trace(&span, header("traceparent"), header("tracestate"));
        let call = async move {
            let started = std::time::Instant::now();
            // Who, and what the request named, when the call is audited and admitted.
            let mut audited: Option<(Principal, Vec<String>)> = None;
            let response = match pass(
                &*admit,
                limits,
                &budget,
                req,
                audit.as_ref().map(|(_, p)| *p),
            )
            .await
            {
                Ok((mut req, charge)) => {
                    if let Some(AuditTargets(targets)) =
                        req.extensions_mut().remove::<AuditTargets>()
                    {
                        audited = Some((charge.owner.clone(), targets));
                    }
                    // The turn among the calls in flight is taken once the body is in:
                    // a caller that stalls its upload holds none.
                    match crate::load::take_turn(&charge.owner).await {
                        Ok(turn) => {
                            let response = inner.call(req).await;
                            // Held until the handler is done with the decoded message.
                            drop((charge, turn));
                            response.map(invalid_argument_for_undecodable)
                        }
                        Err(status) => Ok(status.into_http()),
                    }
                }
                Err(status) => Ok(status.into_http()),
            };
            if let Ok(response) = &response {
                // A unary call that failed answers with its status in the headers; one
                // that succeeded has none there (its OK comes in the trailers).
                let code = grpc_status_of(response).unwrap_or(0);
                let took = started.elapsed();
                let span = tracing::Span::current();
                span.record("code", wisp_telemetry::grpc_code_name(code));
                span.record("ms", took.as_secs_f64() * 1000.0);
                tracing::debug!("answered");
                wisp_telemetry::record_grpc_call(service, label, code, took);
                if let (Some((store, _)), Some((who, targets))) = (audit, audited) {
                    let entry = wisp_store::audit::AuditEntry::now(
                        who.project,
                        who.id,
                        format!("{service}/{label}"),
                        targets,
                        source,
                        wisp_telemetry::grpc_code_name(code),
                    );
                    store.record_or_log(&entry).await;
                }
            }
            response
        };
        Box::pin(tracing::Instrument::instrument(call, span))
    }
}

fn grpc_status_of(response: &Response<Body>) -> Option<i32> {
    response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// tonic answers a request its message type cannot decode with `INTERNAL`.
/// Deviation: upstream's servers (grpc-go) do the same, but the request is the caller's
/// mistake, not the server's: Wisp answers `INVALID_ARGUMENT`, so that dashboards and
/// alarms counting server errors do not fire for a caller's malformed bytes.
fn invalid_argument_for_undecodable(response: Response<Body>) -> Response<Body> {
    // grpc-message is percent-encoded; tonic reads it back.
    let undecodable = grpc_status_of(&response) == Some(tonic::Code::Internal as i32)
        && Status::from_header_map(response.headers())
            .is_some_and(|s| s.message().starts_with("failed to decode Protobuf message"));
    if undecodable {
        Status::invalid_argument("the request is not a valid protobuf message of its type")
            .into_http()
    } else {
        response
    }
}

/// `PipedService` for `grpc.service.pipedservice.PipedService`.
fn service_label(name: &'static str) -> &'static str {
    name.rsplit('.').next().unwrap_or(name)
}

/// The RPC's name as in the path (`ReportStat`).
fn method_of<B>(req: &Request<B>) -> &str {
    req.uri().path().rsplit('/').next().unwrap_or_default()
}

/// Grows `buf` to hold `more` bytes beyond its length, charging the allocation first:
/// what `others` holds, the buffer as it is and the one it moves to (both exist while
/// it moves). Doubles, within `cap`.
async fn grow(
    buf: &mut BytesMut,
    more: usize,
    cap: usize,
    others: usize,
    charge: &mut Charge,
) -> Result<(), Status> {
    let need = buf.len() + more;
    if need <= buf.capacity() {
        return Ok(());
    }
    let target = need
        .max(buf.capacity().saturating_mul(2))
        .min(cap.max(need));
    charge.to(others + buf.capacity() + target).await?;
    buf.reserve(target - buf.len());
    Ok(())
}

/// Admits the caller and replaces the body with one uncompressed, checked message.
async fn pass<A: Admit>(
    admit: &A,
    limits: &Limits,
    budget: &DecodeBudget,
    req: Request<Body>,
    audit_paths: Option<&'static [&'static [u32]]>,
) -> Result<(Request<Body>, Charge), Status> {
    let method = method_of(&req).to_owned();
    let method = method.as_str();
    let Some(limit) = limits.for_method(method) else {
        return Err(Status::unimplemented(format!("unknown method {method}")));
    };
    let source = req.extensions().get::<ClientAddr>().map(|c| c.0);
    let caller = admit.admit(method, req.headers(), source).await?;
    let principal = A::principal(&caller);
    if let Some(OnAdmitted(admitted)) = req.extensions().get::<OnAdmitted>() {
        admitted(&principal);
    }
    // How fast this caller opens calls, before any work for this one (issue 33: the
    // shares bound what a caller holds, not how fast it comes back when refused).
    crate::rate::check(&principal).await?;
    let encoding = match req.headers().get("grpc-encoding").map(|v| v.as_bytes()) {
        None | Some(b"identity") => Encoding::Identity,
        Some(b"gzip") => Encoding::Gzip,
        Some(_) => {
            return Err(Status::unimplemented(
                "unsupported grpc-encoding (gzip and identity are accepted)",
            ));
        }
    };
    let (mut parts, mut body) = req.into_parts();
    let mut charge = budget.start(principal);
    // A compressed body of a bounded message is at most slightly bigger than the message.
    let wire_limit = limit + FRAME_HEADER + limit / 64 + 1024;
    let mut wire = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Status::cancelled("the request body was not received"))?;
        if let Ok(data) = frame.into_data() {
            if wire.len() + data.len() > wire_limit {
                return Err(too_large(method, limit));
            }
            grow(&mut wire, data.len(), wire_limit, 0, &mut charge).await?;
            wire.extend_from_slice(&data);
        }
    }
    // The framed message tonic reads: the body itself when it came uncompressed, else a
    // new frame the inflated bytes are written into.
    let inflated = match unframe(&wire, encoding, limit) {
        Ok(Unframed::Plain(_)) => None,
        Ok(Unframed::Gzip(compressed)) => {
            Some(inflate(compressed, wire.capacity(), method, limit, &mut charge).await?)
        }
        Err(FrameError::TooLarge) => return Err(too_large(method, limit)),
        Err(FrameError::Malformed(why)) => return Err(Status::invalid_argument(why)),
    };
    let framed = match inflated {
        Some(framed) => framed,
        None if wire.is_empty() => Bytes::from_static(&[0, 0, 0, 0, 0]),
        None => wire.split().freeze(),
    };
    // What decoding adds to what is held: the estimate less the encoded bytes, which it
    // counts and which are already charged.
    let message = &framed[FRAME_HEADER..];
    let decoded = decoded_size_estimate(message).saturating_sub(message.len());
    charge
        .to(wire
            .capacity()
            .saturating_add(framed.len())
            .saturating_add(decoded))
        .await?;
    drop(wire);
    parts.headers.remove("grpc-encoding");
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.extensions.insert(caller);
    if let Some(paths) = audit_paths {
        parts
            .extensions
            .insert(AuditTargets(crate::audit::targets(message, paths)));
    }
    Ok((
        Request::from_parts(parts, Body::new(Full::new(framed))),
        charge,
    ))
}

/// `compressed` inflated into a new uncompressed frame, within `limit` and charged as it
/// grows (`wire_held` bytes of the body are held beside it).
async fn inflate(
    compressed: &[u8],
    wire_held: usize,
    method: &str,
    limit: usize,
    charge: &mut Charge,
) -> Result<Bytes, Status> {
    // gzip ends with the inflated size (mod 2^32, of its last member): room for that at
    // once, within the limit, instead of doubling towards it (the old and new buffers
    // both exist while it moves). Only a hint: a liar's buffer grows as it must.
    let size_hint = compressed
        .last_chunk::<4>()
        .map_or(0, |n| u32::from_le_bytes(*n) as usize)
        .min(limit);
    let mut out = BytesMut::new();
    grow(
        &mut out,
        FRAME_HEADER + size_hint,
        FRAME_HEADER + limit,
        wire_held,
        charge,
    )
    .await?;
    out.extend_from_slice(&[0; FRAME_HEADER]);
    let mut decoder = flate2::read::GzDecoder::new(compressed);
    let mut chunk = vec![0u8; INFLATE_CHUNK];
    loop {
        let n = decoder
            .read(&mut chunk)
            .map_err(|_| Status::invalid_argument("the gzip-compressed message is corrupt"))?;
        if n == 0 {
            break;
        }
        if out.len() - FRAME_HEADER + n > limit {
            return Err(too_large(method, limit));
        }
        grow(&mut out, n, FRAME_HEADER + limit, wire_held, charge).await?;
        out.extend_from_slice(&chunk[..n]);
    }
    let len = u32::try_from(out.len() - FRAME_HEADER).map_err(|_| too_large(method, limit))?;
    out[1..FRAME_HEADER].copy_from_slice(&len.to_be_bytes());
    Ok(out.freeze())
}

/// How a refusal for a request's size begins (OTLP/HTTP answers it 413, not 429).
pub(crate) const TOO_LARGE: &str = "request too large: ";

fn too_large(method: &str, limit: usize) -> Status {
    Status::resource_exhausted(format!("{TOO_LARGE}{method} accepts at most {limit} bytes"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    TooLarge,
    Malformed(&'static str),
}

/// The one message of a unary request body.
#[derive(Debug, PartialEq, Eq)]
pub enum Unframed<'a> {
    /// Uncompressed, at most the limit.
    Plain(&'a [u8]),
    /// gzip-compressed; the caller inflates it within the limit.
    Gzip(&'a [u8]),
}

/// The one message of a unary request body (checked against `limit` when uncompressed).
pub fn unframe(body: &[u8], encoding: Encoding, limit: usize) -> Result<Unframed<'_>, FrameError> {
    if body.is_empty() {
        // Some clients send an empty body for an empty message.
        return Ok(Unframed::Plain(&[]));
    }
    let (header, rest) = body
        .split_first_chunk::<FRAME_HEADER>()
        .ok_or(FrameError::Malformed("truncated gRPC message header"))?;
    let [flag, len @ ..] = *header;
    let len = usize::try_from(u32::from_be_bytes(len))
        .map_err(|_| FrameError::Malformed("bad gRPC message length"))?;
    if rest.len() != len {
        return Err(FrameError::Malformed(
            "the body must hold exactly one gRPC message",
        ));
    }
    match (flag, encoding) {
        (0, _) if len > limit => Err(FrameError::TooLarge),
        (0, _) => Ok(Unframed::Plain(rest)),
        (1, Encoding::Gzip) => Ok(Unframed::Gzip(rest)),
        (1, Encoding::Identity) => Err(FrameError::Malformed(
            "compressed message without a grpc-encoding header",
        )),
        _ => Err(FrameError::Malformed("bad gRPC compressed flag")),
    }
}

/// An estimate of the memory `message` decodes to, its own bytes included, without its
/// schema: the bytes themselves; [`MESSAGE_COST`] per message in it (counting every
/// length-delimited value that parses as a message, an empty one included: that is the
/// element of a repeated field that costs 2 bytes on the wire); per other
/// length-delimited value (a string or bytes) its length and [`VALUE_COST`] (a one-byte
/// element of a repeated string is 3 bytes on the wire and its `String` and its place in
/// the `Vec` far more); and the length of the longest such value once more, since
/// decoding copies each value through a buffer of its own. A string that happens to
/// parse is over-counted, which only makes the estimate safer.
///
/// Scalars are not charged: a repeated number or enum decodes to at most a few times its
/// wire size, and the request types have such fields only in filters of a few bytes
/// (`ListApplications`' kinds), bounded by their RPC's small limit.
pub fn decoded_size_estimate(message: &[u8]) -> usize {
    let mut cost = Cost::default();
    if nested_cost(message, 0, &mut cost).is_none() {
        // Not a message at all: decoding fails after holding a value at most this long.
        cost = Cost {
            total: 0,
            longest: message.len(),
        };
    }
    message
        .len()
        .saturating_add(MESSAGE_COST)
        .saturating_add(cost.total)
        .saturating_add(cost.longest)
}

#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    /// What the values nested in a message cost in all.
    total: usize,
    /// The longest value that is not a message.
    longest: usize,
}

/// Adds the cost of the values nested in `buf` (not counting `buf` itself) to `cost`;
/// `None` (and `cost` unchanged) when `buf` is not a message.
fn nested_cost(buf: &[u8], depth: usize, cost: &mut Cost) -> Option<()> {
    let mut mine = *cost;
    let mut rest = buf;
    // Field numbers seen in this message: a field that comes again is repeated, and its
    // elements cost their place in a `Vec`; the first occurrence costs what a singular
    // field does (its struct's room is in the parent's MESSAGE_COST).
    let mut seen_low = 0u64;
    let mut seen_high: Vec<u64> = Vec::new();
    while !rest.is_empty() {
        let (key, after) = varint(rest)?;
        if key >> 3 == 0 {
            return None;
        }
        let number = key >> 3;
        let repeated = if number < 64 {
            let bit = 1u64 << number;
            let again = seen_low & bit != 0;
            seen_low |= bit;
            again
        } else if seen_high.contains(&number) {
            true
        } else {
            seen_high.push(number);
            false
        };
        rest = match key & 7 {
            0 => varint(after)?.1,
            1 => after.get(8..)?,
            5 => after.get(4..)?,
            2 => {
                let (len, after) = varint(after)?;
                let len = usize::try_from(len).ok().filter(|l| *l <= after.len())?;
                let (value, after) = after.split_at(len);
                // Decoded as a message or as a string or bytes: whichever costs more.
                let mut inner = Cost::default();
                let (message_cost, value_cost) = if repeated {
                    (MESSAGE_COST, VALUE_COST)
                } else {
                    (SINGULAR_MESSAGE_COST, SINGULAR_VALUE_COST)
                };
                let as_message = (depth < MAX_DEPTH
                    && nested_cost(value, depth + 1, &mut inner).is_some())
                .then_some(inner.total.saturating_add(message_cost));
                let as_value = value_cost.saturating_add(len);
                mine.total = mine
                    .total
                    .saturating_add(as_message.map_or(as_value, |m| m.max(as_value)));
                mine.longest = mine.longest.max(inner.longest).max(len);
                after
            }
            // Groups (3, 4) are not used by these protos; anything else is not protobuf.
            _ => return None,
        };
    }
    *cost = mine;
    Some(())
}

fn varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, byte) in buf.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, &buf[i + 1..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[tokio::test]
    async fn a_gzip_bomb_stops_at_the_limit() {
        struct Anyone;
        #[async_trait]
        impl Admit for Anyone {
            type Caller = ();
            async fn admit(&self, _: &str, _: &HeaderMap, _: Option<IpAddr>) -> Result<(), Status> {
                Ok(())
            }
            fn principal(_: &()) -> Principal {
                Principal {
                    project: "p".into(),
                    id: "anyone".into(),
                }
            }
        }
        static ONE: Limits = Limits {
            service: "test",
            methods: &[("Call", 1024 * 1024, "")],
        };
        let budget = DecodeBudget::new(8 * 1024 * 1024);
        let request = |body: Vec<u8>| {
            Request::builder()
                .uri("/test.Service/Call")
                .header("grpc-encoding", "gzip")
                .body(Body::new(Full::new(Bytes::from(body))))
                .unwrap()
        };
        let bomb = gzip(&vec![0u8; 64 * 1024 * 1024]);
        assert!(bomb.len() < 128 * 1024, "{}", bomb.len());
        let err = pass(&Anyone, &ONE, &budget, request(frame(1, &bomb)), None)
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
        assert!(err.message().contains("at most 1048576 bytes"), "{err:?}");
        // The bomb gave its charge back.
        assert_eq!(budget.units.available_permits(), budget.total_units);
        let err = pass(&Anyone, &ONE, &budget, request(frame(1, b"not gzip")), None)
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");

        let (req, charge) = pass(
            &Anyone,
            &ONE,
            &budget,
            request(frame(1, &gzip(b"\x0a\x03abc"))),
            None,
        )
        .await
        .unwrap();
        assert!(charge.charged_units >= 1);
        let body = req.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.as_ref(), &frame(0, b"\x0a\x03abc")[..]);
    }

    fn owner(project: &str, id: &str) -> Principal {
        Principal {
            project: project.into(),
            id: id.into(),
        }
    }

    #[tokio::test]
    async fn one_caller_holds_at_most_its_share_of_the_budget() {
        // 64 KiB: 32 KiB per principal, 48 KiB per project.
        let budget = DecodeBudget::new(64 * 1024);
        let mut first = budget.start(owner("a", "piped-1"));
        first.to(32 * 1024).await.unwrap();
        let mut more = budget.start(owner("a", "piped-1"));
        let err = more.to(1).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        assert!(err.message().contains("this caller"), "{err:?}");
        // Another principal of the project gets the rest of the project's share.
        let mut second = budget.start(owner("a", "piped-2"));
        second.to(16 * 1024).await.unwrap();
        let mut third = budget.start(owner("a", "piped-3"));
        assert!(third.to(1).await.is_err());
        // Another project is not held up by project a.
        let mut other = budget.start(owner("b", "key"));
        other.to(16 * 1024).await.unwrap();
        // Everything is given back.
        drop((first, more, second, third, other));
        assert_eq!(budget.units.available_permits(), budget.total_units);
        assert!(budget.shares.is_empty());
        let mut again = budget.start(owner("a", "piped-1"));
        again.to(32 * 1024).await.unwrap();
    }

    #[tokio::test]
    async fn on_lambda_the_budget_is_a_fraction_of_the_memory() {
        let budget = DecodeBudget::for_lambda_memory(Some("128")).unwrap();
        assert_eq!(budget.bytes(), 32 * 1024 * 1024);
        // One request at a time: it may use the whole budget.
        let mut charge = budget.start(owner("p", "piped"));
        charge.to(32 * 1024 * 1024).await.unwrap();
        assert!(DecodeBudget::for_lambda_memory(None).is_none());
        assert!(DecodeBudget::for_lambda_memory(Some("lots")).is_none());
    }

    #[test]
    fn frames_are_checked() {
        assert_eq!(
            unframe(&frame(0, &[1; 10]), Encoding::Identity, 9),
            Err(FrameError::TooLarge)
        );
        assert!(matches!(
            unframe(&[0, 0, 0], Encoding::Identity, 9),
            Err(FrameError::Malformed(_))
        ));
        let mut two = frame(0, b"ab");
        two.extend(frame(0, b"cd"));
        assert!(matches!(
            unframe(&two, Encoding::Identity, 9),
            Err(FrameError::Malformed(_))
        ));
        assert!(matches!(
            unframe(&frame(1, b"xx"), Encoding::Identity, 9),
            Err(FrameError::Malformed(_))
        ));
        assert_eq!(
            unframe(&[], Encoding::Identity, 0).unwrap(),
            Unframed::Plain(&[])
        );
    }

    #[test]
    fn empty_repeated_elements_are_charged_per_message() {
        // Field 1 (length-delimited) holding an empty message, a million times: 2 MB on
        // the wire, hundreds of megabytes once decoded.
        let bomb: Vec<u8> = std::iter::repeat_n([0x0a, 0x00], 1_000_000)
            .flatten()
            .collect();
        assert!(decoded_size_estimate(&bomb) >= 1_000_000 * MESSAGE_COST);
        // Nested: one field holding the million.
        let mut outer = vec![0x0a];
        let mut len = bomb.len();
        while len >= 0x80 {
            outer.push(u8::try_from(len & 0x7f).unwrap() | 0x80);
            len >>= 7;
        }
        outer.push(u8::try_from(len).unwrap());
        outer.extend_from_slice(&bomb);
        assert!(decoded_size_estimate(&outer) >= 1_000_000 * MESSAGE_COST);
        // Bytes that are not protobuf count as one message and their length, twice.
        assert_eq!(decoded_size_estimate(b"\xff\xff"), 2 + MESSAGE_COST + 2);
        // Strings that do not parse as messages cost their bytes only.
        let strings = b"\x0a\x05hello\x12\x05world";
        assert_eq!(
            decoded_size_estimate(strings),
            strings.len() + MESSAGE_COST + 2 * SINGULAR_VALUE_COST + 10 + 5
        );
        // One-byte elements of a repeated string (issue 33: charged 3 bytes, decoded to
        // about 60).
        let owner_ids: Vec<u8> = std::iter::repeat_n([0x0a, 0x01, b'a'], 1_000_000)
            .flatten()
            .collect();
        assert!(decoded_size_estimate(&owner_ids) >= 1_000_000 * VALUE_COST);
    }
}

#[cfg(test)]
mod message_sizes {
    use wisp_proto::model;

    /// The types that come many to a request (repeated fields of what pipeds, pipectl
    /// and the console send). The estimate charges each message `MESSAGE_COST`; a type
    /// far bigger would let a request decode to more than it was charged.
    #[test]
    fn repeated_request_types_fit_the_message_cost() {
        let sizes = [
            ("PipelineStage", size_of::<model::PipelineStage>()),
            ("LogBlock", size_of::<model::LogBlock>()),
            ("ResourceState", size_of::<model::ResourceState>()),
            (
                "KubernetesResourceState",
                size_of::<model::KubernetesResourceState>(),
            ),
            ("EcsResourceState", size_of::<model::EcsResourceState>()),
            (
                "CloudRunResourceState",
                size_of::<model::CloudRunResourceState>(),
            ),
            (
                "LambdaResourceState",
                size_of::<model::LambdaResourceState>(),
            ),
            (
                "KubernetesResourceStateEvent",
                size_of::<model::KubernetesResourceStateEvent>(),
            ),
            ("ArtifactVersion", size_of::<model::ArtifactVersion>()),
            ("ApplicationInfo", size_of::<model::ApplicationInfo>()),
            ("EventStatus", size_of::<model::EventStatus>()),
            ("ProjectRbacPolicy", size_of::<model::ProjectRbacPolicy>()),
        ];
        for (name, size) in sizes {
            assert!(
                3 * size <= super::MESSAGE_COST,
                "{name} is {size} bytes in memory: raise MESSAGE_COST"
            );
        }
    }
}

/// Request bodies are the network's. Structured bodies (valid frames around plain or
/// gzip-compressed messages, gzip streams with bytes changed, frames with a wrong length,
/// a bad flag or a missing `grpc-encoding`) go through `pass` and must come out as the
/// very message sent, or be refused with the right code; every charge is given back.
/// The estimate is checked against the documented cost of protobuf-shaped messages.
#[cfg(test)]
mod fuzz {
    use std::io::Write;

    use super::*;
    use proptest::prelude::*;
    use wisp_reach::Reach;

    struct Anyone;

    #[async_trait]
    impl Admit for Anyone {
        type Caller = ();
        async fn admit(&self, _: &str, _: &HeaderMap, _: Option<IpAddr>) -> Result<(), Status> {
            Ok(())
        }
        /// A caller per input: thousands of inputs (`PROPTEST_CASES`) from one caller
        /// would be refused for its call rate, which is not what this test checks.
        fn principal(_: &()) -> Principal {
            static CALLERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = CALLERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Principal {
                project: "p".into(),
                id: format!("anyone-{n}"),
            }
        }
    }

    fn frame(flag: u8, declared: usize, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&u32::try_from(declared).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    /// How a request carries its message.
    #[derive(Debug, Clone)]
    enum Shape {
        /// An uncompressed frame (with or without `grpc-encoding: gzip`).
        Plain { gzip_header: bool },
        /// A valid gzip stream in a compressed frame.
        Gzip,
        /// A gzip stream with bytes overwritten, inserted or cut.
        CorruptGzip(Vec<(prop::sample::Index, u8, u8)>),
        /// A compressed frame without `grpc-encoding`.
        GzipWithoutHeader,
        /// A frame whose declared length is off by `skew` (not 0).
        WrongLength(i8),
        /// The first 1 to 4 bytes of a frame header only.
        TruncatedHeader(u8),
        /// Two frames in one unary body.
        TwoFrames,
        /// A flag other than 0 and 1.
        BadFlag(u8),
        /// An encoding this server does not take.
        UnsupportedEncoding,
    }

    fn shape() -> impl Strategy<Value = Shape> {
        prop_oneof![
            3 => any::<bool>().prop_map(|gzip_header| Shape::Plain { gzip_header }),
            3 => Just(Shape::Gzip),
            3 => proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4)
                .prop_map(Shape::CorruptGzip),
            1 => Just(Shape::GzipWithoutHeader),
            1 => any::<i8>().prop_filter("not 0", |s| *s != 0).prop_map(Shape::WrongLength),
            1 => (1u8..5).prop_map(Shape::TruncatedHeader),
            1 => Just(Shape::TwoFrames),
            1 => (2u8..=255).prop_map(Shape::BadFlag),
            1 => Just(Shape::UnsupportedEncoding),
        ]
    }

    fn message() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..1200),
            // Compressible: long runs, as protobuf with repeated fields has.
            (any::<u8>(), 0usize..3000).prop_map(|(b, n)| vec![b; n]),
        ]
    }

    fn corrupt(mut bytes: Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) -> Vec<u8> {
        for (at, byte, op) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = if bytes[i] == *byte { !byte } else { *byte },
                1 => bytes.insert(i, *byte),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        bytes
    }

    #[test]
    fn structured_bodies_pass_intact_or_are_refused_with_the_right_code() {
        static LIMITS: Limits = Limits {
            service: "test",
            methods: &[("Small", 512, ""), ("Large", 2048, "")],
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let budget = DecodeBudget::new(8 * 1024 * 1024);
        let inputs = (message(), shape(), any::<bool>());
        Reach::new("gate: structured request bodies", file!())
            .at_least("plain message passed", 0.05)
            .at_least("gzip message inflated", 0.05)
            .at_least("too large: RESOURCE_EXHAUSTED", 0.05)
            .at_least("corrupt gzip: INVALID_ARGUMENT", 0.05)
            .at_least("bad frame: INVALID_ARGUMENT", 0.05)
            .in_all_at_least(1.0)
            .run(inputs, |(message, shape, large)| {
                let (method, limit) = if large {
                    ("Large", 2048)
                } else {
                    ("Small", 512)
                };
                let mut encoding = None;
                let body = match &shape {
                    Shape::Plain { gzip_header } => {
                        encoding = gzip_header.then_some("gzip");
                        frame(0, message.len(), &message)
                    }
                    Shape::Gzip => {
                        encoding = Some("gzip");
                        let packed = gzip(&message);
                        frame(1, packed.len(), &packed)
                    }
                    Shape::CorruptGzip(edits) => {
                        encoding = Some("gzip");
                        let packed = corrupt(gzip(&message), edits);
                        frame(1, packed.len(), &packed)
                    }
                    Shape::GzipWithoutHeader => {
                        let packed = gzip(&message);
                        frame(1, packed.len(), &packed)
                    }
                    Shape::WrongLength(skew) => {
                        let declared = (message.len() as i64 + i64::from(*skew)).max(0) as usize;
                        let declared = if declared == message.len() {
                            declared + 1
                        } else {
                            declared
                        };
                        frame(0, declared, &message)
                    }
                    Shape::TruncatedHeader(n) => {
                        frame(0, message.len(), &message)[..usize::from(*n)].to_vec()
                    }
                    Shape::TwoFrames => {
                        let mut two = frame(0, message.len(), &message);
                        two.extend(frame(0, 1, b"x"));
                        two
                    }
                    Shape::BadFlag(flag) => frame(*flag, message.len(), &message),
                    Shape::UnsupportedEncoding => {
                        encoding = Some("deflate");
                        frame(0, message.len(), &message)
                    }
                };
                // What the gate reads of a body at most before it refuses it unread.
                let over_the_wire_limit = body.len() > limit + FRAME_HEADER + limit / 64 + 1024;
                let mut request = Request::builder().uri(format!("/test.Service/{method}"));
                if let Some(encoding) = encoding {
                    request = request.header("grpc-encoding", encoding);
                }
                let request = request
                    .body(Body::new(Full::new(Bytes::from(body))))
                    .unwrap();
                let outcome = rt.block_on(async {
                    match pass(&Anyone, &LIMITS, &budget, request, None).await {
                        Ok((req, charge)) => {
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            drop(charge);
                            Ok(body)
                        }
                        Err(status) => Err(status),
                    }
                });
                // Whatever happened, every charge was given back.
                prop_assert_eq!(budget.units.available_permits(), budget.total_units);
                let sent = frame(0, message.len(), &message);
                let too_large = message.len() > limit;
                let code = outcome.as_ref().err().map(Status::code);
                let reached = match (&shape, &outcome) {
                    (Shape::UnsupportedEncoding, _) => {
                        prop_assert_eq!(code, Some(tonic::Code::Unimplemented));
                        "unsupported encoding: UNIMPLEMENTED"
                    }
                    (_, _) if over_the_wire_limit => {
                        prop_assert_eq!(
                            code,
                            Some(tonic::Code::ResourceExhausted),
                            "{:?}",
                            outcome
                        );
                        "too large: RESOURCE_EXHAUSTED"
                    }
                    (Shape::Plain { .. } | Shape::Gzip, _) if too_large => {
                        prop_assert_eq!(
                            code,
                            Some(tonic::Code::ResourceExhausted),
                            "{:?}",
                            outcome
                        );
                        "too large: RESOURCE_EXHAUSTED"
                    }
                    (Shape::Plain { .. }, _) => {
                        prop_assert_eq!(outcome.as_deref().ok(), Some(&sent[..]));
                        "plain message passed"
                    }
                    (Shape::Gzip, _) => {
                        prop_assert_eq!(outcome.as_deref().ok(), Some(&sent[..]));
                        "gzip message inflated"
                    }
                    // A change in the gzip header's time or OS byte, or after the stream,
                    // leaves the message intact: then it must be the message sent.
                    (Shape::CorruptGzip(_), Ok(body)) => {
                        prop_assert!(!too_large);
                        prop_assert_eq!(&body[..], &sent[..]);
                        "corrupt gzip: intact message passed"
                    }
                    (Shape::CorruptGzip(_), Err(_))
                        if code == Some(tonic::Code::ResourceExhausted) =>
                    {
                        "too large: RESOURCE_EXHAUSTED"
                    }
                    (Shape::CorruptGzip(_), Err(_)) => {
                        prop_assert_eq!(code, Some(tonic::Code::InvalidArgument), "{:?}", outcome);
                        "corrupt gzip: INVALID_ARGUMENT"
                    }
                    (_, _) => {
                        // A bad frame is refused as such, whatever it declares.
                        prop_assert_eq!(code, Some(tonic::Code::InvalidArgument), "{:?}", outcome);
                        "bad frame: INVALID_ARGUMENT"
                    }
                };
                Ok(Some(reached))
            });
    }

    /// A protobuf-shaped value: what the estimate walks.
    #[derive(Debug, Clone)]
    enum Node {
        Varint(u64),
        Fixed64,
        Bytes(Vec<u8>),
        Message(Vec<(u8, Node)>),
    }

    fn node() -> impl Strategy<Value = Node> {
        let leaf = prop_oneof![
            any::<u64>().prop_map(Node::Varint),
            Just(Node::Fixed64),
            // Bytes may happen to parse as a message: the estimate takes the dearer
            // reading, the bound the value's.
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Node::Bytes),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            proptest::collection::vec((1u8..6, inner), 0..8).prop_map(Node::Message)
        })
    }

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn encode_fields(fields: &[(u8, Node)], out: &mut Vec<u8>) {
        for (number, node) in fields {
            match node {
                Node::Varint(v) => {
                    put_varint(out, u64::from(*number) << 3);
                    put_varint(out, *v);
                }
                Node::Fixed64 => {
                    put_varint(out, (u64::from(*number) << 3) | 1);
                    out.extend_from_slice(&[7; 8]);
                }
                Node::Bytes(b) => {
                    put_varint(out, (u64::from(*number) << 3) | 2);
                    put_varint(out, b.len() as u64);
                    out.extend_from_slice(b);
                }
                Node::Message(inner) => {
                    let mut body = Vec::new();
                    encode_fields(inner, &mut body);
                    put_varint(out, (u64::from(*number) << 3) | 2);
                    put_varint(out, body.len() as u64);
                    out.extend_from_slice(&body);
                }
            }
        }
    }

    /// What the documented rule charges at least for the values in `fields`: per
    /// length-delimited value its length and a value's cost, or, for a nested message,
    /// a message's cost and its own values' when that is more; repeated fields (a
    /// number seen before in the same message) at the repeated costs.
    fn lower_bound(fields: &[(u8, Node)]) -> usize {
        let mut seen = std::collections::HashSet::new();
        let mut total = 0usize;
        for (number, node) in fields {
            let repeated = !seen.insert(*number);
            let (message_cost, value_cost) = if repeated {
                (MESSAGE_COST, VALUE_COST)
            } else {
                (SINGULAR_MESSAGE_COST, SINGULAR_VALUE_COST)
            };
            total += match node {
                Node::Varint(_) | Node::Fixed64 => 0,
                Node::Bytes(b) => value_cost + b.len(),
                Node::Message(inner) => {
                    let mut body = Vec::new();
                    encode_fields(inner, &mut body);
                    (lower_bound(inner) + message_cost).max(value_cost + body.len())
                }
            };
        }
        total
    }

    #[test]
    fn the_estimate_charges_at_least_the_documented_cost() {
        let messages = prop_oneof![
            3 => proptest::collection::vec((1u8..6, node()), 0..12).prop_map(Some),
            // Not protobuf at all: field number 0.
            1 => Just(None),
        ];
        let inputs = (messages, proptest::collection::vec(any::<u8>(), 0..200));
        Reach::new("gate: the decoded-size estimate", file!())
            .at_least("protobuf: at least the documented cost", 0.5)
            .at_least("not protobuf: its bytes twice", 0.1)
            .in_all_at_least(1.0)
            .run(inputs, |(fields, junk)| {
                Ok(Some(match fields {
                    Some(fields) => {
                        let mut message = Vec::new();
                        encode_fields(&fields, &mut message);
                        let estimate = decoded_size_estimate(&message);
                        prop_assert!(
                            estimate >= message.len() + MESSAGE_COST + lower_bound(&fields),
                            "estimate {} for {:?}",
                            estimate,
                            fields
                        );
                        "protobuf: at least the documented cost"
                    }
                    None => {
                        let mut message = vec![0x00];
                        message.extend_from_slice(&junk);
                        prop_assert_eq!(
                            decoded_size_estimate(&message),
                            2 * message.len() + MESSAGE_COST
                        );
                        "not protobuf: its bytes twice"
                    }
                }))
            });
    }
}
