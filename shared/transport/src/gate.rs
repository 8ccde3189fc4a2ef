//! The gate in front of each gRPC service: the caller is authenticated from the headers
//! before a byte of the body is read, and the body is then read, decompressed and checked
//! within the bound of its RPC before tonic decodes it.
//!
//! Why not tonic's own limits: they are per service (one bound for a 64-byte `GetPiped` and
//! a multi-megabyte live state), they apply after the handler is called, which is where
//! credentials used to be checked, and a protobuf message can decode to far more memory
//! than its encoded size (an empty element of a repeated field is 2 bytes on the wire and
//! a few hundred in memory). So the gate also estimates what a body decodes to, and all
//! requests being decoded at once share one memory budget: past it, a caller gets a fast
//! `RESOURCE_EXHAUSTED` (which pipeds retry) instead of the process growing.

use std::io::Read;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use tokio::sync::Semaphore;
use tonic::Status;
use tonic::body::Body;
use tonic::server::NamedService;
use tower::Service;

use crate::limits::Limits;

/// Memory charged per message on top of the encoded bytes: about the in-memory size of
/// the biggest message types that come in repeated fields (a test measures them).
pub const MESSAGE_COST: usize = 320;
/// Estimated memory of all requests being decoded at once, per process.
pub const DECODE_BUDGET_BYTES: usize = 128 * 1024 * 1024;
/// How long a request waits for room in the decode budget before it is refused.
pub const DECODE_BUDGET_WAIT: Duration = Duration::from_secs(2);
/// Nesting depth the estimate follows; deeper fields are counted as bytes.
const MAX_DEPTH: usize = 32;
/// gRPC's message prefix: a compressed flag and a big-endian length.
const FRAME_HEADER: usize = 5;
/// Budget units are KiB so that the semaphore's permit count stays small.
const UNIT: usize = 1024;
/// Bytes inflated between two charges to the budget.
const INFLATE_CHUNK: usize = 256 * 1024;

/// Who may call a service, decided from the request's headers alone.
#[async_trait]
pub trait Admit: Send + Sync + 'static {
    /// What the handler gets: the authenticated (and, for the console, authorized) caller.
    type Caller: Clone + Send + Sync + 'static;
    /// `method` is the RPC's name as in the path (`ReportStat`).
    async fn admit(&self, method: &str, headers: &HeaderMap) -> Result<Self::Caller, Status>;
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
/// while it is read, decompressed and decoded is charged to it first.
#[derive(Debug, Clone)]
pub struct DecodeBudget {
    units: Arc<Semaphore>,
    total_units: usize,
}

impl Default for DecodeBudget {
    fn default() -> Self {
        Self::new(DECODE_BUDGET_BYTES)
    }
}

impl DecodeBudget {
    /// The budget of this process, shared by every service in it.
    pub fn process() -> Self {
        static PROCESS: std::sync::OnceLock<DecodeBudget> = std::sync::OnceLock::new();
        PROCESS.get_or_init(DecodeBudget::default).clone()
    }

    pub fn new(bytes: usize) -> Self {
        let total_units = bytes.div_ceil(UNIT).max(1);
        DecodeBudget {
            units: Arc::new(Semaphore::new(total_units)),
            total_units,
        }
    }

    /// A charge of nothing yet, which may wait for room until [`DECODE_BUDGET_WAIT`] from
    /// now.
    fn start(&self) -> Charge {
        Charge {
            budget: self.clone(),
            permit: None,
            charged_units: 0,
            deadline: tokio::time::Instant::now() + DECODE_BUDGET_WAIT,
        }
    }
}

/// What one request holds of the budget; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: DecodeBudget,
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
        let more = u32::try_from(units - self.charged_units).map_err(|_| busy())?;
        let acquire = self.budget.units.clone().acquire_many_owned(more);
        let permit = match tokio::time::timeout_at(self.deadline, acquire).await {
            Ok(Ok(permit)) => permit,
            _ => return Err(busy()),
        };
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        self.charged_units = units;
        Ok(())
    }
}

/// A tonic service behind its gate.
pub struct Gate<A, S> {
    admit: Arc<A>,
    limits: &'static Limits,
    budget: DecodeBudget,
    inner: S,
}

impl<A, S: Clone> Clone for Gate<A, S> {
    fn clone(&self) -> Self {
        Gate {
            admit: self.admit.clone(),
            limits: self.limits,
            budget: self.budget.clone(),
            inner: self.inner.clone(),
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
        }
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
        // Every log line of the call carries its service and method; the span ends with
        // its code and time (a subscriber that exports spans, as OpenTelemetry does, sees
        // them whole).
        let span = tracing::info_span!(
            "rpc",
            service,
            method = label,
            code = tracing::field::Empty,
            ms = tracing::field::Empty
        );
        let call = async move {
            let started = std::time::Instant::now();
            let response = match pass(&*admit, limits, &budget, req).await {
                Ok((req, charge)) => {
                    let response = inner.call(req).await;
                    // Held until the handler is done with the decoded message.
                    drop(charge);
                    response
                }
                Err(status) => Ok(status.into_http()),
            };
            if let Ok(response) = &response {
                // A unary call that failed answers with its status in the headers; one
                // that succeeded has none there (its OK comes in the trailers).
                let code = response
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let took = started.elapsed();
                let span = tracing::Span::current();
                span.record("code", wisp_telemetry::grpc_code_name(code));
                span.record("ms", took.as_secs_f64() * 1000.0);
                tracing::debug!("answered");
                wisp_telemetry::record_grpc_call(service, label, code, took);
            }
            response
        };
        Box::pin(tracing::Instrument::instrument(call, span))
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

/// Admits the caller and replaces the body with one uncompressed, checked message.
async fn pass<A: Admit>(
    admit: &A,
    limits: &Limits,
    budget: &DecodeBudget,
    req: Request<Body>,
) -> Result<(Request<Body>, Charge), Status> {
    let method = method_of(&req).to_owned();
    let method = method.as_str();
    let Some(limit) = limits.for_method(method) else {
        return Err(Status::unimplemented(format!("unknown method {method}")));
    };
    let caller = admit.admit(method, req.headers()).await?;
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
    let mut charge = budget.start();
    // A compressed body of a bounded message is at most slightly bigger than the message.
    let wire_limit = limit + FRAME_HEADER + limit / 64 + 1024;
    let mut wire = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Status::cancelled("the request body was not received"))?;
        if let Ok(data) = frame.into_data() {
            if wire.len() + data.len() > wire_limit {
                return Err(too_large(method, limit));
            }
            charge.to(wire.len() + data.len()).await?;
            wire.extend_from_slice(&data);
        }
    }
    let message = match unframe(&wire, encoding, limit) {
        Ok(Unframed::Plain(message)) => message,
        Ok(Unframed::Gzip(compressed)) => {
            let mut out = BytesMut::new();
            let mut decoder = flate2::read::GzDecoder::new(compressed);
            let mut chunk = vec![0u8; INFLATE_CHUNK];
            loop {
                let n = decoder.read(&mut chunk).map_err(|_| {
                    Status::invalid_argument("the gzip-compressed message is corrupt")
                })?;
                if n == 0 {
                    break;
                }
                if out.len() + n > limit {
                    return Err(too_large(method, limit));
                }
                charge.to(wire.len() + out.len() + n).await?;
                out.extend_from_slice(&chunk[..n]);
            }
            out.freeze()
        }
        Err(FrameError::TooLarge) => return Err(too_large(method, limit)),
        Err(FrameError::Malformed(why)) => return Err(Status::invalid_argument(why)),
    };
    charge
        .to(wire.len().saturating_add(decoded_size_estimate(&message)))
        .await?;
    let mut framed = BytesMut::with_capacity(FRAME_HEADER + message.len());
    framed.put_u8(0);
    framed.put_u32(u32::try_from(message.len()).map_err(|_| too_large(method, limit))?);
    framed.extend_from_slice(&message);
    parts.headers.remove("grpc-encoding");
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.extensions.insert(caller);
    Ok((
        Request::from_parts(parts, Body::new(Full::new(framed.freeze()))),
        charge,
    ))
}

fn too_large(method: &str, limit: usize) -> Status {
    Status::resource_exhausted(format!(
        "request too large: {method} accepts at most {limit} bytes"
    ))
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
    Plain(Bytes),
    /// gzip-compressed; the caller inflates it within the limit.
    Gzip(&'a [u8]),
}

/// The one message of a unary request body (checked against `limit` when uncompressed).
pub fn unframe(body: &[u8], encoding: Encoding, limit: usize) -> Result<Unframed<'_>, FrameError> {
    if body.is_empty() {
        // Some clients send an empty body for an empty message.
        return Ok(Unframed::Plain(Bytes::new()));
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
        (0, _) => Ok(Unframed::Plain(Bytes::copy_from_slice(rest))),
        (1, Encoding::Gzip) => Ok(Unframed::Gzip(rest)),
        (1, Encoding::Identity) => Err(FrameError::Malformed(
            "compressed message without a grpc-encoding header",
        )),
        _ => Err(FrameError::Malformed("bad gRPC compressed flag")),
    }
}

/// An estimate of the memory `message` decodes to, without its schema: the bytes
/// themselves plus [`MESSAGE_COST`] per message in it, counting every length-delimited
/// value that parses as a message (an empty one included: that is the element of a
/// repeated field that costs 2 bytes on the wire). A string that happens to parse is
/// over-counted, which only makes the estimate safer.
pub fn decoded_size_estimate(message: &[u8]) -> usize {
    let messages = count_messages(message, 0).unwrap_or(0).saturating_add(1);
    message
        .len()
        .saturating_add(messages.saturating_mul(MESSAGE_COST))
}

/// Messages nested in `buf` (not counting `buf`); `None` when `buf` is not a message.
fn count_messages(buf: &[u8], depth: usize) -> Option<usize> {
    let mut nested = 0usize;
    let mut rest = buf;
    while !rest.is_empty() {
        let (key, after) = varint(rest)?;
        if key >> 3 == 0 {
            return None;
        }
        rest = match key & 7 {
            0 => varint(after)?.1,
            1 => after.get(8..)?,
            5 => after.get(4..)?,
            2 => {
                let (len, after) = varint(after)?;
                let len = usize::try_from(len).ok().filter(|l| *l <= after.len())?;
                let (value, after) = after.split_at(len);
                if depth < MAX_DEPTH
                    && let Some(inner) = count_messages(value, depth + 1)
                {
                    nested = nested.saturating_add(inner).saturating_add(1);
                }
                after
            }
            // Groups (3, 4) are not used by these protos; anything else is not protobuf.
            _ => return None,
        };
    }
    Some(nested)
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
            async fn admit(&self, _: &str, _: &HeaderMap) -> Result<(), Status> {
                Ok(())
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
        let err = pass(&Anyone, &ONE, &budget, request(frame(1, &bomb)))
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
        assert!(err.message().contains("at most 1048576 bytes"), "{err:?}");
        // The bomb gave its charge back.
        assert_eq!(budget.units.available_permits(), budget.total_units);
        let err = pass(&Anyone, &ONE, &budget, request(frame(1, b"not gzip")))
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");

        let (req, charge) = pass(
            &Anyone,
            &ONE,
            &budget,
            request(frame(1, &gzip(b"\x0a\x03abc"))),
        )
        .await
        .unwrap();
        assert!(charge.charged_units >= 1);
        let body = req.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.as_ref(), &frame(0, b"\x0a\x03abc")[..]);
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
            Unframed::Plain(Bytes::new())
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
        // Bytes that are not protobuf count as one message and their length.
        assert_eq!(decoded_size_estimate(b"\xff\xff"), 2 + MESSAGE_COST);
        // Strings that do not parse as messages cost their bytes only.
        let strings = b"\x0a\x05hello\x12\x05world";
        assert_eq!(decoded_size_estimate(strings), strings.len() + MESSAGE_COST);
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
                size <= super::MESSAGE_COST,
                "{name} is {size} bytes in memory: raise MESSAGE_COST"
            );
        }
    }
}

/// Request bodies are the network's: any bytes give a message within the bound or an
/// error, and the estimate never panics and never counts less than the bytes.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_body_unframes_within_the_limit(
            body in proptest::collection::vec(any::<u8>(), 0..1024),
            gzip in any::<bool>(),
            limit in 0usize..2048,
        ) {
            let encoding = if gzip { Encoding::Gzip } else { Encoding::Identity };
            if let Ok(Unframed::Plain(message)) = unframe(&body, encoding, limit) {
                prop_assert!(message.len() <= limit);
            }
        }

        #[test]
        fn any_message_has_an_estimate(message in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..2048),
            // Nested length-delimited fields, the shape the estimate follows.
            proptest::collection::vec((1u8..16, proptest::collection::vec(any::<u8>(), 0..32)), 0..64)
                .prop_map(|fields| fields.into_iter().flat_map(|(n, v)| {
                    let mut f = vec![(n << 3) | 2, v.len() as u8];
                    f.extend(v);
                    f
                }).collect()),
        ]) {
            prop_assert!(decoded_size_estimate(&message) >= message.len());
        }
    }
}
