//! The piped-facing scenarios again over gRPC-web (HTTP/1.1), the transport the console
//! and `wisp bridge` (and so every piped behind an ALB) use.

use crate::support;

use support::{Via, Wisp, ok, scenarios};
use wisp_proto::pipedservice::{
    ListApplicationsRequest, ListApplicationsResponse, ReportPipedMetaRequest,
};

#[tokio::test]
async fn every_rpc_requires_credentials() {
    scenarios::every_rpc_requires_credentials(Via::GrpcWeb).await;
}

#[tokio::test]
async fn auth_cases() {
    scenarios::auth_cases(Via::GrpcWeb).await;
}

#[tokio::test]
async fn deployment_lifecycle() {
    scenarios::deployment_lifecycle(Via::GrpcWeb).await;
}

#[tokio::test]
async fn large_messages() {
    scenarios::large_messages(Via::GrpcWeb).await;
}

/// Both transports on one port reach the same state.
#[tokio::test]
async fn grpc_and_grpc_web_share_one_port() {
    let wisp = Wisp::start();
    let piped = wisp.add_piped(support::QUICKSTART, "both");
    let app_id = wisp.add_app(&piped, "shared", &[]);
    let mut web = wisp.piped_client(Via::GrpcWeb, &piped).await;
    let mut grpc = wisp.piped_client(Via::Grpc, &piped).await;
    let meta = ok(web
        .report_piped_meta(ReportPipedMetaRequest {
            version: "v0.50.0".into(),
            ..Default::default()
        })
        .await);
    assert_eq!(meta.name, "both");
    let apps = ok(grpc
        .list_applications(ListApplicationsRequest::default())
        .await);
    assert_eq!(scenarios::app_ids(&apps.applications), vec![app_id]);
}

/// One gRPC-web frame: flag byte, big-endian length, payload.
fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits a gRPC-web response body into its message and its trailers block.
fn split_frames(mut body: &[u8]) -> (Vec<Vec<u8>>, String) {
    let mut messages = Vec::new();
    let mut trailers = String::new();
    while body.len() >= 5 {
        let flag = body[0];
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        let payload = &body[5..5 + len];
        if flag & 0x80 != 0 {
            trailers.push_str(&String::from_utf8_lossy(payload));
        } else {
            messages.push(payload.to_vec());
        }
        body = &body[5 + len..];
    }
    assert!(body.is_empty(), "trailing bytes in the body");
    (messages, trailers.to_ascii_lowercase())
}

/// The bytes a browser puts on the wire (no tonic on the client side): binary and text
/// (base64) gRPC-web over HTTP/1.1, answered with a message frame and a trailers frame,
/// or, on error, a trailers-only response.
#[tokio::test]
async fn grpc_web_wire_format() {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use tonic_prost::prost::Message;

    let wisp = Wisp::start();
    let piped = wisp.add_piped(support::QUICKSTART, "browser");
    let app_id = wisp.add_app(&piped, "wire", &[]);
    let auth = piped.authorization();
    let path = "/grpc.service.pipedservice.PipedService/ListApplications";
    let request = frame(0, &ListApplicationsRequest::default().encode_to_vec());

    // Binary.
    let resp = wisp
        .http_post(
            path,
            &[
                ("content-type", "application/grpc-web+proto"),
                ("x-grpc-web", "1"),
                ("authorization", &auth),
            ],
            request.clone(),
        )
        .await;
    assert_eq!(resp.status, http::StatusCode::OK, "{resp:?}");
    assert_eq!(resp.version, http::Version::HTTP_11);
    assert_eq!(resp.headers["content-type"], "application/grpc-web+proto");
    let (messages, trailers) = split_frames(&resp.body);
    assert!(trailers.contains("grpc-status:0"), "{trailers:?}");
    assert_eq!(messages.len(), 1);
    let apps = ListApplicationsResponse::decode(messages[0].as_slice()).expect("a response");
    assert_eq!(scenarios::app_ids(&apps.applications), vec![app_id.clone()]);

    // Text (base64), as grpc-web's `grpcwebtext` mode sends it.
    let resp = wisp
        .http_post(
            path,
            &[
                ("content-type", "application/grpc-web-text"),
                ("accept", "application/grpc-web-text"),
                ("authorization", &auth),
            ],
            STANDARD.encode(&request).into_bytes(),
        )
        .await;
    assert_eq!(resp.status, http::StatusCode::OK, "{resp:?}");
    assert!(
        resp.headers["content-type"]
            .to_str()
            .unwrap_or_default()
            .starts_with("application/grpc-web-text"),
        "{resp:?}"
    );
    // The server may send each frame as its own base64 chunk.
    let mut decoded = Vec::new();
    for chunk in resp.body.split_inclusive(|b| *b == b'=') {
        let chunk: Vec<u8> = chunk
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        if !chunk.is_empty() {
            decoded.extend(STANDARD.decode(&chunk).expect("base64 body"));
        }
    }
    let (messages, trailers) = split_frames(&decoded);
    assert!(trailers.contains("grpc-status:0"), "{trailers:?}");
    let apps = ListApplicationsResponse::decode(messages[0].as_slice()).expect("a response");
    assert_eq!(scenarios::app_ids(&apps.applications), vec![app_id]);

    // An error: trailers-only, the status in the HTTP headers, under the legacy name too.
    for path in [
        "/grpc.service.pipedservice.PipedService/ListApplications",
        "/pipe.api.service.pipedservice.PipedService/ListApplications",
    ] {
        let resp = wisp
            .http_post(
                path,
                &[("content-type", "application/grpc-web+proto")],
                request.clone(),
            )
            .await;
        assert_eq!(resp.status, http::StatusCode::OK, "{resp:?}");
        assert_eq!(resp.headers["grpc-status"], "16", "{resp:?}");
        let (messages, _) = split_frames(&resp.body);
        assert!(messages.is_empty(), "{resp:?}");
    }
}
