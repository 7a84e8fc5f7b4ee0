//! `HttpTransport` against real HTTP listeners on 127.0.0.1: messages that arrive while a
//! request is in flight leave together in the next one, in order; a batch respects
//! `max_batch_size`; a destination that never answers delays no other, and its queue stays
//! bounded; a refused destination is retried after a backoff and reached once it listens.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use parking_lot::Mutex;
use prost::Message as _;
use raftstore::metrics::{BATCHES_SENT, DropReason, MESSAGES_DROPPED};
use raftstore::{HttpTransport, HttpTransportOptions, RaftConfig, Transport};
use tokio::runtime::Handle;
use tokio::sync::Notify;
use wire::raft::{Message, MessageType, RaftBatch, RaftMessage};

/// A `/raft/batch` endpoint that records every batch; it can hold the first request open.
#[derive(Default)]
struct Receiver {
    batches: Mutex<Vec<RaftBatch>>,
    hold_first: AtomicBool,
    first_arrived: Notify,
    release: Notify,
}

impl Receiver {
    /// The region ids received, per request.
    fn requests(&self) -> Vec<Vec<u64>> {
        self.batches
            .lock()
            .iter()
            .map(|b| b.messages.iter().map(|m| m.region_id).collect())
            .collect()
    }

    fn message_count(&self) -> usize {
        self.batches.lock().iter().map(|b| b.messages.len()).sum()
    }
}

async fn raft_batch(State(rx): State<Arc<Receiver>>, body: Bytes) -> StatusCode {
    let Ok(batch) = RaftBatch::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let first = {
        let mut batches = rx.batches.lock();
        batches.push(batch);
        batches.len() == 1
    };
    if first && rx.hold_first.load(Ordering::SeqCst) {
        rx.first_arrived.notify_one();
        rx.release.notified().await;
    }
    StatusCode::OK
}

/// Serves a receiver on `listener`; its base URL.
fn serve(listener: std::net::TcpListener, rx: Arc<Receiver>) -> String {
    let url = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let router = Router::new()
        .route(wire::paths::RAFT_BATCH, post(raft_batch))
        .with_state(rx);
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

fn listen() -> std::net::TcpListener {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap()
}

/// A heartbeat of region `region_id` for store `to_store`.
fn msg(to_store: u64, region_id: u64) -> RaftMessage {
    RaftMessage {
        region_id,
        from_store: 1,
        to_store,
        message: Some(Message {
            msg_type: MessageType::MsgHeartbeat as i32,
            to: to_store,
            from: 1,
            term: 3,
            ..Message::default()
        }),
        ..RaftMessage::default()
    }
}

fn options() -> HttpTransportOptions {
    HttpTransportOptions::new(1, &RaftConfig::default())
}

/// Polls `done` until it holds; fails after a generous bound (no timing is asserted).
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting until {what}"))
}

fn dropped(reason: DropReason) -> u64 {
    MESSAGES_DROPPED.with_label_values(&[reason.as_str()]).get()
}

/// Sends message 0, holds its request open, sends 1..=n one call each, releases; the ids as
/// the receiver got them, per request.
async fn send_while_held(options: HttpTransportOptions, n: u64) -> Vec<Vec<u64>> {
    let rx = Arc::new(Receiver::default());
    rx.hold_first.store(true, Ordering::SeqCst);
    let url = serve(listen(), Arc::clone(&rx));
    let transport = HttpTransport::start(&Handle::current(), [(2, url)], options);

    transport.send(vec![msg(2, 0)]);
    within("the first request arrives", rx.first_arrived.notified()).await;
    for i in 1..=n {
        transport.send(vec![msg(2, i)]);
    }
    assert_eq!(transport.stats(2).unwrap().queued, n as usize);
    rx.release.notify_one();
    wait_until("every message arrives", || {
        rx.message_count() == n as usize + 1
    })
    .await;
    wait_until("the last request is answered", || {
        transport.stats(2).unwrap().batches_sent == rx.requests().len() as u64
    })
    .await;
    rx.requests()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_while_a_request_is_in_flight_leave_together_in_order() {
    let sent_before = BATCHES_SENT.get();
    let requests = send_while_held(options(), 50).await;
    assert_eq!(requests, [vec![0], (1..=50).collect::<Vec<u64>>()]);
    assert!(BATCHES_SENT.get() >= sent_before + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_carries_at_most_max_batch_size_bytes() {
    let per_message = msg(2, 10).batch_len();
    let options = HttpTransportOptions {
        max_batch_size: 8 * per_message,
        ..options()
    };
    let requests = send_while_held(options, 40).await;
    // 40 equal messages, 8 per request, after the held one.
    assert_eq!(requests.len(), 6, "{requests:?}");
    assert!(requests[1..].iter().all(|r| r.len() == 8), "{requests:?}");
    let ids: Vec<u64> = requests.concat();
    assert_eq!(ids, (0..=40).collect::<Vec<u64>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_that_never_answers_delays_no_other_and_its_queue_stays_bounded() {
    // Store 3 accepts connections (the kernel's backlog) but never answers: its sender waits
    // on its first request for the whole test.
    let black_hole = listen();
    let live = Arc::new(Receiver::default());
    let live_url = serve(listen(), Arc::clone(&live));
    let options = HttpTransportOptions {
        queue_max_messages: 10,
        request_timeout: Duration::from_secs(600),
        ..options()
    };
    let peers = [
        (2, live_url),
        (3, format!("http://{}", black_hole.local_addr().unwrap())),
    ];
    let transport = HttpTransport::start(&Handle::current(), peers, options);
    let queue_full_before = dropped(DropReason::QueueFull);

    transport.send(vec![msg(3, 0)]);
    wait_until("store 3's sender takes its first message", || {
        transport.stats(3).unwrap().queued == 0
    })
    .await;
    // Six rounds of five messages for each store, one call per round, like a store loop's.
    for round in 0..6u64 {
        let ids = round * 5 + 1..=round * 5 + 5;
        transport.send(ids.flat_map(|i| [msg(3, i), msg(2, i)]).collect());
        wait_until("store 2 receives the round", || {
            live.message_count() == (round as usize + 1) * 5
        })
        .await;
    }
    let ids: Vec<u64> = live.requests().concat();
    assert_eq!(ids, (1..=30).collect::<Vec<u64>>());

    let stuck = transport.stats(3).unwrap();
    assert_eq!(stuck.queued, 10);
    assert_eq!(stuck.dropped_queue_full, 20);
    assert_eq!(stuck.batches_sent, 0);
    assert_eq!(transport.stats(2).unwrap().dropped_queue_full, 0);
    assert!(dropped(DropReason::QueueFull) >= queue_full_before + 20);
    drop(black_hole);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_destination_is_retried_after_a_backoff_and_reached_once_it_listens() {
    let reserved = listen();
    let addr = reserved.local_addr().unwrap();
    drop(reserved);
    let options = HttpTransportOptions {
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        ..options()
    };
    let transport =
        HttpTransport::start(&Handle::current(), [(2, format!("http://{addr}"))], options);
    let failed_before = dropped(DropReason::SendFailed);

    transport.send(vec![msg(2, 1)]);
    wait_until("the refused request is counted", || {
        transport.stats(2).unwrap().batches_failed >= 1
    })
    .await;
    assert!(dropped(DropReason::SendFailed) > failed_before);

    let rx = Arc::new(Receiver::default());
    serve(std::net::TcpListener::bind(addr).unwrap(), Arc::clone(&rx));
    transport.send(vec![msg(2, 2)]);
    wait_until("the message after the restart arrives", || {
        rx.requests().concat().contains(&2)
    })
    .await;
    assert!(
        !rx.requests().concat().contains(&1),
        "a failed batch is not resent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_for_a_store_without_an_address_are_dropped_and_counted() {
    let transport = HttpTransport::start(
        &Handle::current(),
        [(1, "http://127.0.0.1:1".to_string())],
        options(),
    );
    let before = dropped(DropReason::UnknownStore);
    transport.send(vec![msg(7, 1), msg(7, 2)]);
    // The server's own address is no destination either.
    assert_eq!(transport.stats(1), None);
    assert_eq!(transport.stats(7), None);
    assert!(dropped(DropReason::UnknownStore) >= before + 2);
}
