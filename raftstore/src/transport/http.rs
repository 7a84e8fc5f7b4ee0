//! Raft messages between processes: `POST /raft/batch` ([`wire::paths::RAFT_BATCH`]) with a
//! [`RaftBatch`] body, through the same HTTP client as every other call between Stratus
//! processes ([`node::HttpClient`]).
//!
//! One sender task per destination server, on the caller's tokio runtime. A task sends one
//! request at a time, so it holds at most one connection, which the client keeps alive
//! between requests. [`Transport::send`] only appends to the destination's [`Outbox`] and wakes
//! its task. While a request is in flight the messages that arrive meanwhile wait, and the
//! next request takes them all (up to `max_batch_size` bytes): the busier the link, the larger
//! the batches and the fewer the requests. This is the batching of design section 3.1 (one
//! request per destination per store-loop round, or fewer).
//!
//! Failures: a request that fails (connection refused or reset, timeout, a non-2xx status)
//! loses its messages, counted as `send_failed`; the task then waits (exponential backoff,
//! reset by the next success) before the next request, and the client opens a new connection.
//! Meanwhile the outbox keeps filling; past its bounds the oldest messages are dropped
//! (`queue_full`). Raft retransmits, so every drop costs latency only. A destination without an
//! address (`unknown_store`) drops at once. No destination ever delays another: each has its
//! own task, queue and connection.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use node::HttpClient;
use parking_lot::{Mutex, RwLock};
use prost::Message as _;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use wire::raft::{RaftBatch, RaftMessage};

use super::outbox::{Outbox, OutboxLimits};
use super::{Transport, group_by_destination};
use crate::config::RaftConfig;
use crate::metrics::{self, DropReason};

/// Settings of an [`HttpTransport`].
#[derive(Debug, Clone)]
pub struct HttpTransportOptions {
    /// This server's store id (`RaftBatch.from_store`).
    pub from_store: u64,
    /// Most bytes of messages in one request (a larger single message goes alone).
    pub max_batch_size: usize,
    /// Messages one destination may queue before the oldest are dropped.
    pub queue_max_messages: usize,
    /// Bytes one destination may queue before the oldest are dropped.
    pub queue_max_bytes: usize,
    /// Time limit of one request. A destination that stops answering (a paused process, a
    /// vanished machine) holds its connection this long before the task reconnects.
    pub request_timeout: Duration,
    /// Wait after the first failed request; doubles per failure up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// This server's zone, for the network byte metrics (`node::traffic`).
    pub zone: Option<types::Zone>,
    /// This server's TLS (`[security]`): with it, peers are called over https only, each
    /// showing a certificate the cluster CA signed.
    pub tls: Option<Arc<node::tls::Tls>>,
}

impl HttpTransportOptions {
    /// The options for store `from_store` under `[raft]`: batches of `max-batch-size`, queues
    /// of 16 batches (or 16,384 messages), requests of at most 2 s, backoff from 50 ms to 1 s.
    pub fn new(from_store: u64, config: &RaftConfig) -> HttpTransportOptions {
        let batch = usize::try_from(config.max_batch_size.bytes()).unwrap_or(usize::MAX);
        HttpTransportOptions {
            from_store,
            max_batch_size: batch,
            queue_max_messages: 16_384,
            queue_max_bytes: batch.saturating_mul(16),
            request_timeout: Duration::from_secs(2),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            zone: None,
            tls: None,
        }
    }
}

/// Responses to `/raft/batch` are empty; anything larger is cut off.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// One destination: its queue, the wake-up of its sender task, and what happened so far.
struct Destination {
    store_id: u64,
    url: String,
    outbox: Mutex<Outbox>,
    wake: Notify,
    batches_sent: AtomicU64,
    batches_failed: AtomicU64,
    dropped_queue_full: AtomicU64,
}

/// What one destination's sender has done (the process-wide metrics, per destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DestinationStats {
    /// Messages waiting (not counting a request in flight).
    pub queued: usize,
    /// Requests answered with success.
    pub batches_sent: u64,
    /// Requests that failed (their messages were dropped as `send_failed`).
    pub batches_failed: u64,
    /// Messages dropped because the queue was full.
    pub dropped_queue_full: u64,
}

/// Sends Raft messages to other servers over HTTP.
pub struct HttpTransport {
    runtime: Handle,
    client: HttpClient,
    options: Arc<HttpTransportOptions>,
    limits: OutboxLimits,
    /// By store id; grows when a server learns another's address (`set_address`).
    destinations: RwLock<HashMap<u64, Sender>>,
}

/// One destination and the task that sends to it.
type Sender = (Arc<Destination>, JoinHandle<()>);

impl HttpTransport {
    /// Starts a sender task on `runtime` for each `(store id, base URL)` in `peers` other than
    /// `options.from_store`. `runtime` may be any runtime handle: [`Transport::send`] is
    /// called from the store loop's thread, outside it.
    pub fn start(
        runtime: &Handle,
        peers: impl IntoIterator<Item = (u64, String)>,
        options: HttpTransportOptions,
    ) -> HttpTransport {
        metrics::register_all();
        let client = HttpClient::with_tls(MAX_RESPONSE_BYTES, options.tls.as_deref()).with_meter(
            node::Meter::new(options.zone.clone(), wire::traffic::Role::Server),
        );
        let limits = OutboxLimits {
            max_messages: options.queue_max_messages,
            max_bytes: options.queue_max_bytes,
        };
        let transport = HttpTransport {
            runtime: runtime.clone(),
            client,
            options: Arc::new(options),
            limits,
            destinations: RwLock::new(HashMap::new()),
        };
        for (store_id, base) in peers {
            transport.set_address(store_id, &base);
        }
        transport
    }

    /// The sender of `store_id` so far; `None` for a store without an address.
    pub fn stats(&self, store_id: u64) -> Option<DestinationStats> {
        let destinations = self.destinations.read();
        let (d, _) = destinations.get(&store_id)?;
        Some(DestinationStats {
            queued: d.outbox.lock().len(),
            batches_sent: d.batches_sent.load(Ordering::Relaxed),
            batches_failed: d.batches_failed.load(Ordering::Relaxed),
            dropped_queue_full: d.dropped_queue_full.load(Ordering::Relaxed),
        })
    }
}

impl Transport for HttpTransport {
    /// Starts a sender for `store_id` at `base` (`http://host:port`), or moves its sender to
    /// `base` when the address changed (what was queued for the old one is dropped: Raft
    /// retransmits). The server's own id is ignored.
    fn set_address(&self, store_id: u64, base: &str) {
        if store_id == self.options.from_store {
            return;
        }
        let url = format!("{}{}", base.trim_end_matches('/'), wire::paths::RAFT_BATCH);
        if self
            .destinations
            .read()
            .get(&store_id)
            .is_some_and(|(d, _)| d.url == url)
        {
            return;
        }
        let dest = Arc::new(Destination {
            store_id,
            url,
            outbox: Mutex::new(Outbox::new(self.limits)),
            wake: Notify::new(),
            batches_sent: AtomicU64::new(0),
            batches_failed: AtomicU64::new(0),
            dropped_queue_full: AtomicU64::new(0),
        });
        let task = self.runtime.spawn(run_sender(
            Arc::clone(&dest),
            self.client.clone(),
            Arc::clone(&self.options),
        ));
        tracing::info!(store_id, url = %dest.url, "raft messages to this store go to a new address");
        if let Some((_, old)) = self.destinations.write().insert(store_id, (dest, task)) {
            old.abort();
        }
    }

    fn send(&self, msgs: Vec<RaftMessage>) {
        let destinations = self.destinations.read();
        for (to_store, msgs) in group_by_destination(msgs) {
            let Some((dest, _)) = destinations.get(&to_store) else {
                metrics::count_dropped(DropReason::UnknownStore, msgs.len());
                continue;
            };
            let dropped: usize = {
                let mut outbox = dest.outbox.lock();
                msgs.into_iter().map(|m| outbox.push(m)).sum()
            };
            metrics::count_dropped(DropReason::QueueFull, dropped);
            dest.dropped_queue_full
                .fetch_add(dropped as u64, Ordering::Relaxed);
            dest.wake.notify_one();
        }
    }
}

impl Drop for HttpTransport {
    /// Stops every sender task (a request in flight is abandoned).
    fn drop(&mut self) {
        for (_, task) in self.destinations.read().values() {
            task.abort();
        }
    }
}

/// The next messages for `dest`, waiting until there are some.
async fn next_batch(dest: &Destination, max_bytes: usize) -> Vec<RaftMessage> {
    loop {
        let batch = dest.outbox.lock().take_batch(max_bytes);
        if !batch.is_empty() {
            return batch;
        }
        // A push between the check and here leaves a permit: this returns at once.
        dest.wake.notified().await;
    }
}

/// Why a request failed, for the log.
fn failure(reply: Result<node::HttpReply, node::ClientError>) -> Option<String> {
    match reply {
        Ok(r) if r.status.is_success() => None,
        Ok(r) => Some(format!(
            "status={} body={:?}",
            r.status,
            String::from_utf8_lossy(&r.body[..r.body.len().min(200)])
        )),
        Err(e) => Some(node::error_chain(&e)),
    }
}

async fn run_sender(
    dest: Arc<Destination>,
    client: HttpClient,
    options: Arc<HttpTransportOptions>,
) {
    let mut backoff = options.backoff_initial;
    let mut failing = false;
    loop {
        let messages = next_batch(&dest, options.max_batch_size).await;
        let count = messages.len();
        let body = RaftBatch {
            from_store: options.from_store,
            messages,
        }
        .encode_to_vec();
        let reply = client
            .post(&dest.url, Bytes::from(body), options.request_timeout)
            .await;
        match failure(reply) {
            None => {
                metrics::BATCHES_SENT.inc();
                dest.batches_sent.fetch_add(1, Ordering::Relaxed);
                if failing {
                    tracing::info!(store_id = dest.store_id, url = %dest.url, "raft messages flow again");
                }
                failing = false;
                backoff = options.backoff_initial;
            }
            Some(reason) => {
                metrics::count_dropped(DropReason::SendFailed, count);
                dest.batches_failed.fetch_add(1, Ordering::Relaxed);
                if failing {
                    tracing::debug!(store_id = dest.store_id, url = %dest.url, %reason, dropped = count, "raft batch failed");
                } else {
                    tracing::warn!(store_id = dest.store_id, url = %dest.url, %reason, dropped = count, "raft batch failed; retrying with backoff");
                }
                failing = true;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(options.backoff_max);
            }
        }
    }
}
