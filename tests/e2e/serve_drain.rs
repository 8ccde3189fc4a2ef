//! `wisp serve` drains on SIGTERM, as an ECS task (or any orchestrator) stopping it
//! needs: a call in flight when the signal arrives is answered, the listening socket
//! closes at once (new connections are refused, so the load balancer's next attempt goes
//! to another task), the client's HTTP/2 connection ends with GOAWAY (a piped reconnects,
//! elsewhere), and the process exits 0. A second server on the same data then serves the
//! same piped.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::SinkExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use prost::Message;
use wisp_proto::pipedservice::ReportStatRequest;

use crate::support::{QUICKSTART, Via, Wisp, ok};

/// Generous bound of every wait on a condition here (never a pass/fail timing).
const DEADLINE: Duration = Duration::from_secs(60);

/// Waits until `cond` holds, checking every 20 ms, for at most [`DEADLINE`].
async fn wait_until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = tokio::time::Instant::now() + DEADLINE;
    while !cond().await {
        assert!(tokio::time::Instant::now() < until, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn sigterm_finishes_the_call_in_flight_and_refuses_new_connections() {
    let mut wisp = Wisp::start();
    let piped = wisp.add_piped(QUICKSTART, "draining");
    let addr = wisp.addr();
    let log = wisp.data_dir().join("serve.log");

    // A native gRPC call (h2c, as a piped without the bridge) whose request is half sent:
    // the call is in flight on the server until the rest arrives.
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("HTTP/2 handshake");
    let conn = tokio::spawn(conn);
    let mut message = Vec::new();
    ReportStatRequest {
        piped_stats: b"drain".repeat(64),
    }
    .encode(&mut message)
    .expect("encode");
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    framed.extend_from_slice(&message);
    let (first, rest) = framed.split_at(framed.len() / 2);
    let (mut body_tx, body_rx) =
        futures::channel::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
    let request = http::Request::post(format!(
        "http://{addr}/pipe.api.service.pipedservice.PipedService/ReportStat"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .header("authorization", piped.authorization())
    .body(StreamBody::new(body_rx))
    .expect("request");
    body_tx
        .send(Ok(Frame::data(Bytes::copy_from_slice(first))))
        .await
        .expect("send the first half");
    let response = tokio::spawn(sender.send_request(request));

    // SIGTERM while the call waits for the rest of its request.
    let mut stopping = Box::pin(wisp.terminate(DEADLINE));
    let log_for_wait = log.clone();
    let drained = async move {
        wait_until("the server logs that it drains", || {
            let log = log_for_wait.clone();
            async move {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .contains("shutting down: finishing in-flight calls")
            }
        })
        .await;
        // New connections are refused while the call is still in flight.
        wait_until("a new connection is refused", || async {
            tokio::net::TcpStream::connect(addr).await.is_err()
        })
        .await;
        assert!(
            !response.is_finished(),
            "answered before its request was whole"
        );

        // The rest of the request: the call completes, answered OK.
        body_tx
            .send(Ok(Frame::data(Bytes::copy_from_slice(rest))))
            .await
            .expect("send the rest");
        drop(body_tx);
        let answer = tokio::time::timeout(DEADLINE, response)
            .await
            .expect("answered")
            .expect("join")
            .expect("an HTTP/2 response to the call in flight");
        assert_eq!(answer.status(), http::StatusCode::OK);
        let collected = answer
            .into_body()
            .collect()
            .await
            .expect("the whole answer");
        let status = collected
            .trailers()
            .and_then(|t| t.get("grpc-status"))
            .map(|v| v.to_str().unwrap_or("?").to_string());
        assert_eq!(
            status.as_deref(),
            Some("0"),
            "grpc-status of the call in flight"
        );

        // The connection ends (GOAWAY, then closed): the piped must reconnect.
        let closed = tokio::time::timeout(DEADLINE, conn)
            .await
            .expect("connection ends");
        assert!(closed.is_ok(), "the connection task panicked");
    };
    let ((status, server_log), ()) = tokio::join!(&mut stopping, drained);
    let status =
        status.unwrap_or_else(|| panic!("still running after SIGTERM; log:\n{server_log}"));
    assert!(status.success(), "{status:?}; log:\n{server_log}");
    drop(stopping);

    // Another process on the same data serves the same piped: where it reconnects.
    wisp.restart();
    let mut c = wisp.piped_client(Via::Grpc, &piped).await;
    ok(c.report_stat(ReportStatRequest::default()).await);
}
