//! The one server builder (`wisp_app::server`), in process: what `wisp serve`, the
//! benches and [`InProcess`] serve has every layer in its place (the edge, the console,
//! gRPC-web, the gate) and the bounds it is given.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use wisp_app::server::ServerOptions;
use wisp_proto::model;
use wisp_proto::pipedservice::ListUnhandledCommandsRequest;

use crate::support;
use support::in_process::InProcess;
use support::{Via, assert_status, connect, http_post_to, http_request_to};

const PROJECT: &str = "in-process";

/// A project and a piped on the server's stores; the piped's `authorization` value.
async fn register_piped(server: &InProcess) -> String {
    server
        .app
        .stores
        .projects
        .create(model::Project {
            id: PROJECT.into(),
            // A project always has its static admin; no test here logs in as it.
            static_admin: Some(model::ProjectStaticUser {
                username: "admin".into(),
                password_hash: "not-a-bcrypt-hash".into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let (piped, key) = wisp_services::ops::pipeds::register_piped(
        &server.app.stores.pipeds,
        PROJECT,
        "in-process".into(),
        String::new(),
        "test",
    )
    .await
    .unwrap();
    format!("PIPED-TOKEN {PROJECT},{},{key}", piped.id)
}

#[tokio::test]
async fn every_layer_is_in_its_place() {
    let server = InProcess::start().await;
    let authorization = register_piped(&server).await;

    // The edge: /healthz.
    let (status, _) = http_request_to(server.addr, http::Method::GET, "/healthz").await;
    assert_eq!(status, http::StatusCode::OK);

    // The console answers a plain HTTP/1 path (gRPC-web alone would answer 400), with the
    // headers every console response carries.
    let resp = http_post_to(
        server.addr,
        "/auth/login/static",
        &[("content-type", "application/x-www-form-urlencoded")],
        b"project=nope&username=a&password=b".to_vec(),
    )
    .await;
    assert_ne!(resp.status, http::StatusCode::BAD_REQUEST, "{resp:?}");
    assert_eq!(
        resp.headers
            .get("x-content-type-options")
            .map(|v| v.to_str().unwrap()),
        Some("nosniff"),
        "{resp:?}"
    );

    // Native gRPC and gRPC-web on the same port, through the gate.
    for via in [Via::Grpc, Via::GrpcWeb] {
        let mut client = connect(server.addr, via, Some(&authorization)).await;
        client
            .list_unhandled_commands(ListUnhandledCommandsRequest {})
            .await
            .unwrap_or_else(|e| panic!("{via:?}: {e}"));
        let mut stranger = connect(server.addr, via, Some("PIPED-TOKEN a,b,c")).await;
        assert_status(
            stranger
                .list_unhandled_commands(ListUnhandledCommandsRequest {})
                .await,
            Code::Unauthenticated,
            "",
        );
    }

    // Shutdown: the server stops, and the port with it.
    let addr = server.addr;
    server.stop().await.unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// `request_timeout` bounds a call whose client stalls mid-upload.
#[tokio::test]
async fn a_stalled_upload_is_cut_off_at_the_request_timeout() {
    let server = InProcess::start_with(ServerOptions {
        request_timeout: Duration::from_millis(300),
        ..ServerOptions::default()
    })
    .await;
    // A known piped: the gate reads the body only after the credentials are checked.
    let authorization = register_piped(&server).await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    // A gRPC-web call announcing 1000 bytes and sending 5 of them.
    let head = format!(
        "POST /grpc.service.pipedservice.PipedService/ListUnhandledCommands HTTP/1.1\r\n\
         host: wisp\r\ncontent-type: application/grpc-web+proto\r\n\
         authorization: {authorization}\r\ncontent-length: 1000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(b"\0\0\0\x03\xe3").await.unwrap();
    // Generous: only a server without the bound never answers.
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
            if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer to a stalled upload");
    let answer = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(answer.contains("grpc-status:"), "{answer}");
    assert!(answer.contains("timeout"), "{answer}");
}

/// Sends `bytes` one at a time, as a slow or hostile client may; stops where the server
/// closes the connection.
async fn dribble(stream: &mut tokio::net::TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    for b in bytes {
        stream.write_all(&[*b]).await?;
        stream.flush().await?;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// The next frame of `stream`: (type, flags, stream id, payload).
async fn read_frame(stream: &mut tokio::net::TcpStream) -> (u8, u8, u32, Vec<u8>) {
    let mut head = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut head))
        .await
        .expect("no frame from the server")
        .unwrap();
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.unwrap();
    (head[3], head[4], id, payload)
}

/// Every HTTP/2 response is dated, and its `date` (new each second) is sent as a literal
/// HPACK never indexes: a connection's header table does not fill with dates (about
/// 6 KiB of memory per connection otherwise; benches/README.md).
#[tokio::test]
async fn responses_are_dated_without_filling_the_header_table() {
    let server = InProcess::start().await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    // Requests for /healthz, 2 s apart so that the second gets another date. HPACK by
    // hand: GET, http, a literal :path and :authority (RFC 7541 appendix A indexes).
    let mut blocks = Vec::new();
    for stream_id in [1u32, 3] {
        if stream_id > 1 {
            tokio::time::sleep(Duration::from_millis(2100)).await;
        }
        let mut block = vec![0x82, 0x86, 0x04, 8];
        block.extend_from_slice(b"/healthz");
        block.extend_from_slice(&[0x01, 4]);
        block.extend_from_slice(b"wisp");
        let mut frame = (block.len() as u32).to_be_bytes()[1..].to_vec();
        // HEADERS, END_STREAM | END_HEADERS.
        frame.extend_from_slice(&[1, 0x5]);
        frame.extend_from_slice(&stream_id.to_be_bytes());
        frame.extend_from_slice(&block);
        stream.write_all(&frame).await.unwrap();
        loop {
            let (kind, _, id, payload) = read_frame(&mut stream).await;
            if kind == 1 && id == stream_id {
                blocks.push(payload);
                break;
            }
        }
    }
    for block in &blocks {
        let fields = hpack_representations(block);
        // :status 200, from the static table.
        assert_eq!(fields.first(), Some(&(Hpack::Indexed, 8)), "{fields:?}");
        // `date` is the static table's name 33.
        let dates: Vec<_> = fields.iter().filter(|(_, name)| *name == 33).collect();
        assert_eq!(dates, [&(Hpack::NeverIndexed, 33)], "{fields:?}");
    }
}

/// How a field of an HPACK block is sent (RFC 7541 section 6).
#[derive(Debug, PartialEq)]
enum Hpack {
    Indexed,
    Incremental,
    WithoutIndexing,
    NeverIndexed,
    TableSizeUpdate,
}

/// Each field of `block` with its representation and the table index it names (0 for a
/// literal name).
fn hpack_representations(block: &[u8]) -> Vec<(Hpack, usize)> {
    fn integer(block: &[u8], at: &mut usize, prefix_bits: u32) -> usize {
        let mask = (1usize << prefix_bits) - 1;
        let mut value = block[*at] as usize & mask;
        *at += 1;
        if value == mask {
            let mut shift = 0;
            loop {
                let b = block[*at];
                *at += 1;
                value += ((b & 0x7f) as usize) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
        }
        value
    }
    fn skip_string(block: &[u8], at: &mut usize) {
        let len = integer(block, at, 7);
        *at += len;
    }
    let mut fields = Vec::new();
    let mut at = 0;
    while at < block.len() {
        let first = block[at];
        let (kind, prefix_bits) = match first {
            b if b & 0x80 != 0 => (Hpack::Indexed, 7),
            b if b & 0x40 != 0 => (Hpack::Incremental, 6),
            b if b & 0x20 != 0 => (Hpack::TableSizeUpdate, 5),
            b if b & 0x10 != 0 => (Hpack::NeverIndexed, 4),
            _ => (Hpack::WithoutIndexing, 4),
        };
        let index = integer(block, &mut at, prefix_bits);
        match kind {
            Hpack::Indexed | Hpack::TableSizeUpdate => {}
            _ => {
                if index == 0 {
                    skip_string(block, &mut at);
                }
                skip_string(block, &mut at);
            }
        }
        fields.push((kind, index));
    }
    fields
}

/// The server tells HTTP/2 (gRPC) from HTTP/1 (browsers, gRPC-web) by the first bytes,
/// however few arrive at a time, and bounds the calls of an HTTP/2 connection from its
/// first SETTINGS.
#[tokio::test]
async fn the_protocol_is_told_from_first_bytes_however_they_arrive() {
    let server = InProcess::start().await;

    // HTTP/2's preface a byte at a time: the server answers with its SETTINGS.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    dribble(&mut stream, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    // An empty SETTINGS frame of the client's.
    stream
        .write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let (kind, flags, _, payload) = read_frame(&mut stream).await;
    assert_eq!((kind, flags), (4, 0), "not SETTINGS");
    let settings: Vec<(u16, u32)> = payload
        .chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect();
    // SETTINGS_MAX_CONCURRENT_STREAMS (3).
    assert!(
        settings.contains(&(3, wisp_app::server::MAX_STREAMS_PER_CONNECTION)),
        "{settings:?}"
    );

    // HTTP/1 a byte at a time.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    dribble(
        &mut stream,
        b"GET /healthz HTTP/1.1\r\nhost: wisp\r\nconnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("no answer over HTTP/1")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // What is neither: refused as HTTP/1 (400, or closed as soon as it is read).
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let _ = dribble(&mut stream, b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n").await;
    let mut answer = Vec::new();
    // Closed, or reset when the server closed with our bytes unread.
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("a connection of garbage left open");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 4"),
        "{answer}"
    );
}
