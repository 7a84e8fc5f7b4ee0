//! The SQL endpoint's bounds on real sockets: a client that connects and never answers the
//! greeting is cut off at `connect-timeout`, one that trickles its handshake a byte at a time too,
//! and at `max-connections` the next client is not greeted until a slot frees.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::{Duration, Instant};

use client::ClientConfig;
use client::paging::Client;
use sqlfront::mysql::MysqlLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An endpoint with `limits` over a client of a cluster that is never called (the handshake
/// needs none); its address.
async fn endpoint(limits: MysqlLimits) -> std::net::SocketAddr {
    let client = Client::new(ClientConfig {
        servers: vec!["http://127.0.0.1:9".into()],
        ..ClientConfig::default()
    })
    .unwrap();
    let client: &'static Client = Box::leak(Box::new(client));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(sqlfront::mysql::serve(listener, client, limits, None));
    addr
}

/// Reads the server's greeting packet (its 4-byte header and payload) within `within`.
async fn greeting(conn: &mut TcpStream, within: Duration) -> Result<Vec<u8>, String> {
    let read = async {
        let mut head = [0u8; 4];
        conn.read_exact(&mut head)
            .await
            .map_err(|e| e.to_string())?;
        let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
        let mut body = vec![0u8; len];
        conn.read_exact(&mut body)
            .await
            .map_err(|e| e.to_string())?;
        Ok(body)
    };
    tokio::time::timeout(within, read)
        .await
        .map_err(|_| format!("no greeting within {within:?}"))?
}

/// Waits for the server to close `conn`; how long that took.
async fn closed_after(conn: &mut TcpStream, at_most: Duration) -> Duration {
    let t = Instant::now();
    let mut buf = [0u8; 64];
    loop {
        match tokio::time::timeout(at_most, conn.read(&mut buf)).await {
            Err(_) => panic!("still open after {at_most:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return t.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

fn limits(max_connections: usize, connect_timeout_ms: u64) -> MysqlLimits {
    MysqlLimits {
        max_connections,
        connect_timeout: Duration::from_millis(connect_timeout_ms),
        ..MysqlLimits::default()
    }
}

#[tokio::test]
async fn a_client_that_never_logs_in_is_cut_off_at_connect_timeout() {
    let addr = endpoint(limits(8, 300)).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let hello = greeting(&mut silent, Duration::from_secs(5)).await.unwrap();
    assert!(
        String::from_utf8_lossy(&hello).contains("Stratus"),
        "the greeting names the server"
    );
    let took = closed_after(&mut silent, Duration::from_secs(5)).await;
    assert!(took < Duration::from_secs(3), "closed after {took:?}");

    // A slowloris: a byte of a handshake response every 50 ms, never a whole one. The login
    // deadline counts from the connection's start, not from the last byte: cut off all the same.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    greeting(&mut slow, Duration::from_secs(5)).await.unwrap();
    let t = Instant::now();
    let (mut r, mut w) = slow.into_split();
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            if w.write_all(&[0x20]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), r.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "expected the connection closed, found {read:?}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "closed after {:?}",
        t.elapsed()
    );
    trickle.abort();
}

#[tokio::test]
async fn at_max_connections_the_next_client_waits_for_a_slot() {
    let addr = endpoint(limits(2, 1500)).await;
    let mut a = TcpStream::connect(addr).await.unwrap();
    greeting(&mut a, Duration::from_secs(5)).await.unwrap();
    let mut b = TcpStream::connect(addr).await.unwrap();
    greeting(&mut b, Duration::from_secs(5)).await.unwrap();
    // The third connects (the kernel's queue) but is not greeted while both slots are held.
    let mut c = TcpStream::connect(addr).await.unwrap();
    let waited = greeting(&mut c, Duration::from_millis(500)).await;
    assert!(waited.is_err(), "greeted beyond the cap: {waited:?}");
    // One closes: the third is greeted.
    drop(a);
    greeting(&mut c, Duration::from_secs(5)).await.unwrap();
}
