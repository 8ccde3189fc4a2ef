//! The response body the bridge hands to its gRPC client: the messages in one data
//! frame, then the trailers (HTTP/2 trailers, which gRPC-web could not carry).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Frame, SizeHint};

/// Data (if any), then trailers (if any). An empty body ends the stream with the headers,
/// which makes a response with `grpc-status` in its headers a trailers-only response.
#[derive(Debug, Default)]
pub struct GrpcBody {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl GrpcBody {
    pub fn empty() -> GrpcBody {
        GrpcBody::default()
    }

    pub fn new(data: Bytes, trailers: Option<HeaderMap>) -> GrpcBody {
        GrpcBody {
            data: (!data.is_empty()).then_some(data),
            trailers,
        }
    }

    /// A trailer of the response, before the body is sent.
    pub fn trailer(&self, name: &str) -> Option<&http::HeaderValue> {
        self.trailers.as_ref().and_then(|t| t.get(name))
    }
}

impl http_body::Body for GrpcBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(data) = this.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if let Some(trailers) = this.trailers.take() {
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let len = self.data.as_ref().map_or(0, |d| d.len() as u64);
        SizeHint::with_exact(len)
    }
}

#[cfg(test)]
mod tests {
    use http_body::Body;
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn data_then_trailers() {
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let body = GrpcBody::new(Bytes::from_static(b"abc"), Some(trailers.clone()));
        assert!(!body.is_end_stream());
        let collected = body.collect().await.expect("infallible");
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(collected.to_bytes(), Bytes::from_static(b"abc"));
        assert!(GrpcBody::empty().is_end_stream());
        assert!(GrpcBody::new(Bytes::new(), None).is_end_stream());
    }
}
