//! Hostile callers against a real `wisp serve` (issue 16; the suite grows with it).

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::Wisp;

/// A client that announces a large request body, sends a little of it and stalls is cut
/// off at `--request-timeout`, instead of holding the server's memory and a connection
/// for as long as it likes.
#[test]
fn a_stalled_upload_is_cut_off_at_the_request_timeout() {
    let wisp = Wisp::start_with_serve_args(&["--request-timeout".into(), "2s".into()]);
    let mut conn = TcpStream::connect(wisp.addr()).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    let head = "POST /grpc.service.pipedservice.PipedService/ReportStat HTTP/1.1\r\n\
                host: wisp\r\n\
                content-type: application/grpc-web+proto\r\n\
                content-length: 1000000\r\n\r\n";
    conn.write_all(head.as_bytes()).expect("headers");
    conn.write_all(&[0u8, 0, 0, 0x0f, 0x42])
        .expect("a few bytes");
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // The server answers (a gRPC error) and/or closes; either way it lets go.
    loop {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                if String::from_utf8_lossy(&answer).contains("grpc-status") {
                    break;
                }
            }
            Err(e) => panic!("no answer after {} s: {e}", started.elapsed().as_secs()),
        }
    }
    let waited = started.elapsed();
    let text = String::from_utf8_lossy(&answer);
    println!(
        "stalled upload let go after {} ms: {text:?}",
        waited.as_millis()
    );
    assert!(
        waited < Duration::from_secs(20),
        "held for {} s",
        waited.as_secs()
    );
    assert!(
        text.is_empty() || !text.contains("grpc-status: 0"),
        "the stalled call did not succeed: {text}"
    );
}

#[test]
fn a_zero_request_timeout_is_refused() {
    let dir = support::empty_data_dir();
    let out = support::run_cli(dir.path(), &["serve", "--request-timeout", "0s"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("--request-timeout"), "{out:?}");
}
