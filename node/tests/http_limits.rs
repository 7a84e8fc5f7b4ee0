//! The bounds `[http]` puts on a listener, proven on a real socket with raw clients: a client
//! that sends nothing or dribbles its headers is cut off while others are served, an oversized
//! request head is refused, connections past the limit wait for a slot, and a shutdown lets
//! the request in flight finish.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use node::http::{HttpLimits, serve_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use types::{ReadableDuration, ReadableSize};

/// A listener on a free port serving `/` (200 "ok") and `/slow` (200 after 400 ms) within
/// `limits`; the sender stops it.
async fn start(limits: HttpLimits) -> (String, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let router = Router::new().route("/", get(|| async { "ok" })).route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            "slow ok"
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        serve_until(
            listener,
            router,
            shutdown,
            Duration::from_secs(5),
            &limits,
            None,
        )
        .await
        .unwrap();
    });
    (addr, stop, served)
}

fn limits(max_connections: usize, header_read_timeout_ms: u64) -> HttpLimits {
    HttpLimits {
        max_connections,
        header_read_timeout: ReadableDuration::millis(header_read_timeout_ms),
        max_header_size: ReadableSize::kib(2),
    }
}

/// Sends one GET of `path` on a new connection and returns the whole answer (the request asks
/// the server to close the connection after it).
async fn get_once(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    request_on(&mut s, path).await
}

async fn request_on(s: &mut TcpStream, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits until the server closes `s` (a read returns end of file or an error), or `within`
/// passes; returns how long it took, or `None` if the connection stayed open.
async fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let mut buf = [0u8; 256];
    loop {
        let left = within.checked_sub(t0.elapsed())?;
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(t0.elapsed()),
            Ok(Ok(_)) => {} // an error answer before the close (408): keep reading
        }
    }
}

fn header_timeouts() -> u64 {
    prometheus::gather()
        .iter()
        .find(|f| f.name() == "stratus_http_connection_errors_total")
        .and_then(|f| {
            f.get_metric()
                .iter()
                .find(|m| m.get_label().iter().any(|l| l.value() == "header_timeout"))
                .map(|m| m.get_counter().get_value() as u64)
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_silent_or_dribbling_client_is_cut_off_while_others_are_served() {
    let (addr, stop, served) = start(limits(16, 300)).await;
    let before = header_timeouts();

    // Connects and sends nothing.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    // Sends a request head one byte every 50 ms: always sending, never done (slowloris).
    let dribbler_addr = addr.clone();
    let dribbler = tokio::spawn(async move {
        let mut s = TcpStream::connect(&dribbler_addr).await.unwrap();
        let t0 = Instant::now();
        for b in b"GET / HTTP/1.1\r\nx-pad: "
            .iter()
            .chain(std::iter::repeat(&b'a'))
        {
            if s.write_all(&[*b]).await.is_err() {
                return t0.elapsed(); // the server closed it
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return t0.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        unreachable!("the padding never ends")
    });

    // Meanwhile other clients are answered at once.
    for _ in 0..3 {
        let answer = get_once(&addr, "/").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("ok"), "{answer}");
    }

    let silent_closed = closed_within(&mut silent, Duration::from_secs(5)).await;
    assert!(
        silent_closed.is_some_and(|t| t >= Duration::from_millis(200)),
        "a silent connection is closed after header-read-timeout (300 ms), not before: {silent_closed:?}"
    );
    let dribbled = dribbler.await.unwrap();
    assert!(
        dribbled < Duration::from_secs(3),
        "a dribbling client is cut off near header-read-timeout although it keeps sending; it \
         kept sending for {dribbled:?}"
    );
    assert!(
        header_timeouts() >= before + 2,
        "both cut-offs are counted as header_timeout ({before} before, {} after)",
        header_timeouts()
    );
    stop.send(()).unwrap();
    served.await.unwrap();
}

#[tokio::test]
async fn an_oversized_request_head_is_refused_with_431() {
    let (addr, stop, served) = start(limits(16, 5_000)).await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let big = "a".repeat(4096);
    let req = format!("GET / HTTP/1.1\r\nhost: t\r\nx-big: {big}\r\n\r\n");
    // The server may close before reading all of it: a failed write is part of the refusal.
    let _ = s.write_all(req.as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    let answer = String::from_utf8_lossy(&out);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    // A head within the limit is still served.
    let answer = get_once(&addr, "/").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    stop.send(()).unwrap();
    served.await.unwrap();
}

#[tokio::test]
async fn connections_past_the_limit_wait_for_a_slot() {
    let (addr, stop, served) = start(limits(2, 10_000)).await;
    // Two idle connections take both slots (the long header timeout keeps them).
    let first = TcpStream::connect(&addr).await.unwrap();
    let _second = TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The third connects (the kernel queues it) but is not served while both are held.
    let waiting_addr = addr.clone();
    let mut third = tokio::spawn(async move { get_once(&waiting_addr, "/").await });
    let early = tokio::time::timeout(Duration::from_millis(500), &mut third).await;
    assert!(early.is_err(), "served past the limit: {early:?}");

    // Closing one held connection frees a slot: the third is answered.
    drop(first);
    let answer = tokio::time::timeout(Duration::from_secs(5), third)
        .await
        .expect("served once a slot freed")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    stop.send(()).unwrap();
    served.await.unwrap();
}

#[tokio::test]
async fn a_shutdown_lets_the_request_in_flight_finish_and_accepts_no_more() {
    let (addr, stop, served) = start(limits(16, 5_000)).await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let in_flight = tokio::spawn(async move { request_on(&mut s, "/slow").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(()).unwrap();
    let answer = in_flight.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("slow ok"), "{answer}");
    tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .expect("serving ends once the request finished")
        .unwrap();
    // The listener is gone: nothing answers any more.
    let refused = TcpStream::connect(&addr).await;
    assert!(refused.is_err(), "still accepting after the shutdown");
}
