//! Network bytes by path and zone, counted at the two places every byte between Stratus nodes
//! passes: the HTTP client ([`crate::HttpClient`]: request bodies sent, response bodies
//! received) and the HTTP server of every node program ([`metered`], a layer on the router:
//! request bodies received, response bodies sent). Servers, workers, placement-driver
//! instances and entry nodes all use both, so each exchange is counted once by each end, under
//! the same [`TrafficPath`] (`wire::traffic` classifies by the HTTP path).
//!
//! **Zones without lookups.** Each end sends its zone label in the
//! [`ZONE_HEADER`](wire::traffic::ZONE_HEADER): the client on every request, the server on
//! every answer. So the caller learns the callee's zone from the answer, and the callee the
//! caller's from the request; a peer without the header (an older build, etcd, a tool) has no
//! zone. How the two zones relate is [`ZoneRelation::of`]: the same zone, different zones
//! (cross), or unknown when either end has no zone label; unknown is never counted as cross.
//!
//! **What is counted.** HTTP body bytes, not headers or TCP/TLS framing: close enough to price
//! traffic (bodies dominate every exchange that matters), and the same number both ends see.
//! A caller counts its request body once the answer's head arrives and the answer's body once
//! read (an exchange that failed before is not counted); the server counts a request body of
//! a declared length on arrival (a streamed one as it is read) and its answer's body as it is
//! sent. The object store's bytes
//! come from the engine (`kvengine::DfsTraffic`), counted with [`Meter::count`].
//!
//! Two metrics, in the default registry (so every program's `GET /metrics` has them):
//!
//! * `stratus_network_bytes_total{path, direction, zone, peer_zone}`: everything. `zone` is
//!   this node's label, `peer_zone` the other end's (`""` for none; `other` once a process
//!   holds 1024 series, so a caller claiming ever new zones cannot grow memory), so the series are bounded
//!   by the zones a cluster is configured with (a peer's header longer than
//!   [`MAX_ZONE_LABEL`] is ignored); a series appears with its first byte;
//! * `stratus_network_cross_zone_bytes_total{path, direction}`: the bytes of exchanges whose
//!   ends are in different zones; a closed label set, every series at 0 from the start.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use hyper::header::{HeaderMap, HeaderValue};
use parking_lot::Mutex;
use prometheus::{IntCounter, IntCounterVec, Opts};
use types::{Zone, ZoneRelation};
use wire::traffic::{Direction, Role, TrafficPath, ZONE_HEADER};

/// The longest zone label a peer's header may carry; a longer one counts as no zone, so a
/// misbehaving peer cannot grow the metric without bound.
pub const MAX_ZONE_LABEL: usize = 64;

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    c
}

const NETWORK_BYTES_NAME: &str = "stratus_network_bytes_total";

/// The most `stratus_network_bytes_total` series a process creates before new peer zones are
/// counted as [`OVERFLOW_ZONE`]: every path × direction for a few dozen zones.
const MAX_SERIES: usize = 1024;

/// The `peer_zone` of bytes from peers past [`MAX_SERIES`].
pub const OVERFLOW_ZONE: &str = "other";
const NETWORK_BYTES_HELP: &str = "HTTP body bytes sent and received, by path, direction, this \
     node's zone and the peer's (\"\" = no zone label).";

/// One series of `stratus_network_bytes_total`: path, direction, this node's zone, the peer's.
type SeriesKey = (TrafficPath, Direction, Option<Zone>, Option<Zone>);

/// The series of `stratus_network_bytes_total` created so far. Not an `IntCounterVec`: its
/// children are found by a hash of the label values written one after the other, so
/// `zone="a", peer_zone=""` and `zone="", peer_zone="a"` would be one series. Each series is
/// its own counter with constant labels, registered once (the registry keeps them apart and
/// gathers them into one family).
static NETWORK_BYTES: LazyLock<Mutex<HashMap<SeriesKey, IntCounter>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The counter of one `stratus_network_bytes_total` series, created and registered on first
/// use.
pub fn network_bytes(
    path: TrafficPath,
    direction: Direction,
    zone: Option<&Zone>,
    peer: Option<&Zone>,
) -> IntCounter {
    let mut key = (path, direction, zone.cloned(), peer.cloned());
    let mut series = NETWORK_BYTES.lock();
    if let Some(c) = series.get(&key) {
        return c.clone();
    }
    // Any caller may send any zone header: past `MAX_SERIES` series, a new peer zone is
    // counted under `peer_zone="other"`, so memory stays bounded whatever peers claim.
    if series.len() >= MAX_SERIES {
        key.3 = Zone::label(OVERFLOW_ZONE);
        if let Some(c) = series.get(&key) {
            return c.clone();
        }
    }
    let peer = key.3.as_ref();
    let opts = Opts::new(NETWORK_BYTES_NAME, NETWORK_BYTES_HELP)
        .const_label("path", path.as_str())
        .const_label("direction", direction.as_str())
        .const_label("zone", types::zone::label(zone))
        .const_label("peer_zone", types::zone::label(peer));
    let c = IntCounter::with_opts(opts).expect("valid metric");
    // The map holds every series registered, so this is the first registration of this one.
    if let Err(e) = prometheus::register(Box::new(c.clone())) {
        tracing::warn!("{NETWORK_BYTES_NAME} series not exported: {e}");
    }
    series.insert(key, c.clone());
    c
}

/// `stratus_network_cross_zone_bytes_total{path, direction}`: every series exists from the
/// start.
pub static CROSS_ZONE_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_network_cross_zone_bytes_total",
        "HTTP body bytes exchanged with nodes (or an object store) of another zone, by path \
         and direction.",
        &["path", "direction"],
    );
    for path in TrafficPath::ALL {
        for dir in Direction::ALL {
            c.with_label_values(&[path.as_str(), dir.as_str()]);
        }
    }
    c
});

/// Registers both metrics (and the cross-zone series at 0), so `/metrics` lists them before
/// the first exchange.
pub fn register_all() {
    LazyLock::force(&CROSS_ZONE_BYTES);
}

/// Who is counting: this node's zone and role. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Meter {
    zone: Option<Zone>,
    role: Role,
    /// `zone` as a header value; `None` when there is no zone, or the label is no valid
    /// header value (the peer then sees no zone).
    header: Option<HeaderValue>,
}

impl Meter {
    pub fn new(zone: Option<Zone>, role: Role) -> Meter {
        let header = zone
            .as_ref()
            .and_then(|z| HeaderValue::from_str(z.as_str()).ok());
        Meter { zone, role, header }
    }

    /// A meter without a zone: what a tool or a test counts with.
    pub fn unlabelled(role: Role) -> Meter {
        Meter::new(None, role)
    }

    pub fn zone(&self) -> Option<&Zone> {
        self.zone.as_ref()
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// The header value naming this node's zone, if it has one.
    pub fn zone_header(&self) -> Option<&HeaderValue> {
        self.header.as_ref()
    }

    /// How a peer in `peer` relates to this node.
    pub fn relation(&self, peer: Option<&Zone>) -> ZoneRelation {
        ZoneRelation::of(self.zone.as_ref(), peer)
    }

    /// The counters bytes of `path` going `direction` to or from a peer in `peer` go to.
    pub fn tally(&self, path: TrafficPath, direction: Direction, peer: Option<&Zone>) -> Tally {
        let all = network_bytes(path, direction, self.zone.as_ref(), peer);
        let cross = (self.relation(peer) == ZoneRelation::Cross)
            .then(|| CROSS_ZONE_BYTES.with_label_values(&[path.as_str(), direction.as_str()]));
        Tally { all, cross }
    }

    /// Two counters of an object store in `store`'s zone: of bytes read from it, and of bytes
    /// written to it (`object_store` traffic; the engine calls them, `kvengine::DfsTraffic`).
    pub fn object_store(
        &self,
        store: Option<Zone>,
    ) -> (
        impl Fn(u64) + Send + Sync + 'static,
        impl Fn(u64) + Send + Sync + 'static,
    ) {
        let path = TrafficPath::ObjectStore;
        let read = self.tally(path, Direction::Received, store.as_ref());
        let written = self.tally(path, Direction::Sent, store.as_ref());
        (
            move |bytes| {
                read.add(bytes);
            },
            move |bytes| {
                written.add(bytes);
            },
        )
    }

    /// Counts `bytes` of `path` going `direction` to or from a peer in `peer`; the bytes that
    /// crossed zones (`bytes` or 0).
    pub fn count(
        &self,
        path: TrafficPath,
        direction: Direction,
        peer: Option<&Zone>,
        bytes: u64,
    ) -> u64 {
        self.tally(path, direction, peer).add(bytes)
    }
}

/// The counters one flow of bytes adds to.
#[derive(Debug, Clone)]
pub struct Tally {
    all: IntCounter,
    /// Set when the peer is in another zone.
    cross: Option<IntCounter>,
}

impl Tally {
    /// Adds `bytes`; the bytes that crossed zones (`bytes` or 0).
    pub fn add(&self, bytes: u64) -> u64 {
        self.all.inc_by(bytes);
        match &self.cross {
            Some(c) => {
                c.inc_by(bytes);
                bytes
            }
            None => 0,
        }
    }
}

/// What one HTTP exchange moved, as its caller counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub path: TrafficPath,
    /// Request body bytes.
    pub sent: u64,
    /// Response body bytes.
    pub received: u64,
    /// The callee's zone relative to the caller's (from the answer's zone header).
    pub relation: ZoneRelation,
}

impl Exchange {
    /// `sent + received` when the ends are in different zones, else 0.
    pub fn cross_zone_bytes(&self) -> u64 {
        if self.relation == ZoneRelation::Cross {
            self.sent + self.received
        } else {
            0
        }
    }
}

/// The zone a peer's [`ZONE_HEADER`] names: `None` without the header, for an empty or
/// non-ASCII value, or one longer than [`MAX_ZONE_LABEL`].
pub fn peer_zone(headers: &HeaderMap) -> Option<Zone> {
    let text = headers.get(ZONE_HEADER)?.to_str().ok()?.trim();
    if text.len() > MAX_ZONE_LABEL {
        return None;
    }
    Zone::label(text)
}

/// `router` with every exchange it serves counted under `meter` (request bodies received,
/// response bodies sent, the peer's zone from the request's header), and every answer carrying
/// this node's zone header. Every node program wraps its router in it.
pub fn metered(router: Router, meter: Meter) -> Router {
    register_all();
    router.layer(axum::middleware::from_fn_with_state(
        Arc::new(meter),
        meter_exchange,
    ))
}

async fn meter_exchange(State(meter): State<Arc<Meter>>, req: Request, next: Next) -> Response {
    let peer = peer_zone(req.headers());
    let path = TrafficPath::of_answer(req.uri().path(), meter.role());
    let received = meter.tally(path, Direction::Received, peer.as_ref());
    let sent = meter.tally(path, Direction::Sent, peer.as_ref());
    // A body of a declared length is counted on arrival, whether the handler reads it or
    // not (a refused body still crossed the network); a streamed one as it is read.
    let req = match hyper::body::Body::size_hint(req.body()).exact() {
        Some(len) => {
            received.add(len);
            req
        }
        None => req.map(|body| {
            Body::new(Counted {
                inner: body,
                tally: received,
            })
        }),
    };
    let mut resp = next.run(req).await;
    if let Some(zone) = meter.zone_header() {
        resp.headers_mut().insert(ZONE_HEADER, zone.clone());
    }
    resp.map(|body| {
        Body::new(Counted {
            inner: body,
            tally: sent,
        })
    })
}

/// A body that adds the bytes of each data frame to a tally as it passes.
struct Counted {
    inner: Body,
    tally: Tally,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            this.tally.add(data.len() as u64);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::routing::post;

    use super::*;
    use crate::HttpClient;

    fn zone(label: &str) -> Option<Zone> {
        Zone::label(label)
    }

    fn bytes_of(path: TrafficPath, dir: Direction, own: &str, peer: &str) -> u64 {
        network_bytes(path, dir, zone(own).as_ref(), zone(peer).as_ref()).get()
    }

    fn cross_of(path: TrafficPath, dir: Direction) -> u64 {
        CROSS_ZONE_BYTES
            .with_label_values(&[path.as_str(), dir.as_str()])
            .get()
    }

    /// Serves `router`, metered as a `role` in `zone`, on an ephemeral port; its base URL.
    async fn serve(router: Router, zone: &str, role: Role) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = metered(router, Meter::new(Zone::label(zone), role));
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_cross_zone_round_trip_counts_exactly_the_body_bytes_at_both_ends() {
        let answer = vec![7u8; 3000];
        let router = Router::new().route(
            wire::paths::COPROCESSOR,
            post(move |body: Bytes| {
                let answer = answer.clone();
                async move {
                    assert_eq!(body.len(), 1000);
                    answer
                }
            }),
        );
        // Zones no other test uses, so these series move only here.
        let base = serve(router, "rt-b", Role::Server).await;
        let client = HttpClient::new(1 << 20).with_meter(Meter::new(zone("rt-a"), Role::Client));
        let path = TrafficPath::ClientServer;
        let (cross_sent, cross_received) = (
            cross_of(path, Direction::Sent),
            cross_of(path, Direction::Received),
        );
        let url = format!("{base}{}", wire::paths::COPROCESSOR);
        let reply = client
            .post(&url, Bytes::from(vec![1u8; 1000]), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply.body.len(), 3000);
        assert_eq!(
            reply.exchange,
            Exchange {
                path,
                sent: 1000,
                received: 3000,
                relation: ZoneRelation::Cross,
            }
        );
        assert_eq!(reply.exchange.cross_zone_bytes(), 4000);
        assert_eq!(reply.peer_zone, zone("rt-b"));
        // The caller's view.
        assert_eq!(bytes_of(path, Direction::Sent, "rt-a", "rt-b"), 1000);
        assert_eq!(bytes_of(path, Direction::Received, "rt-a", "rt-b"), 3000);
        // The callee's view, from the request's zone header.
        assert_eq!(bytes_of(path, Direction::Received, "rt-b", "rt-a"), 1000);
        assert_eq!(bytes_of(path, Direction::Sent, "rt-b", "rt-a"), 3000);
        // Both ends counted in this process: each direction twice.
        assert_eq!(cross_of(path, Direction::Sent) - cross_sent, 4000);
        assert_eq!(cross_of(path, Direction::Received) - cross_received, 4000);
    }

    #[tokio::test]
    async fn a_same_zone_or_unlabelled_exchange_crosses_nothing() {
        let router = Router::new().route(
            wire::paths::RAFT_BATCH,
            post(|body: Bytes| async move { body }),
        );
        let same = serve(router.clone(), "sz-a", Role::Server).await;
        let unlabelled = serve(router, "", Role::Server).await;
        let path = TrafficPath::Raft;
        let cross = cross_of(path, Direction::Sent);
        let client = HttpClient::new(1 << 20).with_meter(Meter::new(zone("sz-a"), Role::Server));
        for base in [&same, &unlabelled] {
            let url = format!("{base}{}", wire::paths::RAFT_BATCH);
            let reply = client
                .post(&url, Bytes::from(vec![0u8; 500]), Duration::from_secs(5))
                .await
                .unwrap();
            assert_eq!(reply.exchange.cross_zone_bytes(), 0);
        }
        assert_eq!(bytes_of(path, Direction::Sent, "sz-a", "sz-a"), 1000);
        assert_eq!(bytes_of(path, Direction::Sent, "sz-a", ""), 500);
        assert_eq!(bytes_of(path, Direction::Received, "", "sz-a"), 500);
        assert_eq!(cross_of(path, Direction::Sent), cross);
    }

    #[tokio::test]
    async fn a_worker_counts_a_servers_coprocessor_request_as_an_offload() {
        let router = Router::new().route(wire::paths::COPROCESSOR, post(|| async { "ok" }));
        let worker = serve(router, "off-b", Role::Worker).await;
        let server = HttpClient::new(1 << 20).with_meter(Meter::new(zone("off-a"), Role::Server));
        let reply = server
            .post(
                &format!("{worker}{}", wire::paths::COPROCESSOR),
                Bytes::from_static(b"body"),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(reply.exchange.path, TrafficPath::Offload);
        assert_eq!(
            bytes_of(TrafficPath::Offload, Direction::Sent, "off-a", "off-b"),
            4
        );
        assert_eq!(
            bytes_of(TrafficPath::Offload, Direction::Received, "off-b", "off-a"),
            4
        );
    }

    #[test]
    fn a_peer_zone_header_must_be_a_short_label() {
        let mut h = HeaderMap::new();
        assert_eq!(peer_zone(&h), None);
        h.insert(ZONE_HEADER, HeaderValue::from_static(""));
        assert_eq!(peer_zone(&h), None);
        h.insert(ZONE_HEADER, HeaderValue::from_static("eu-west-1a"));
        assert_eq!(peer_zone(&h), zone("eu-west-1a"));
        let long = "z".repeat(MAX_ZONE_LABEL + 1);
        h.insert(ZONE_HEADER, HeaderValue::from_str(&long).unwrap());
        assert_eq!(peer_zone(&h), None);
    }

    #[test]
    fn only_bytes_between_two_different_zones_are_cross_zone() {
        let path = TrafficPath::ObjectStore;
        for (own, peer, crossed) in [
            ("tz-a", "tz-b", 10),
            ("tz-a", "tz-a", 0),
            ("", "tz-b", 0),
            ("tz-a", "", 0),
            ("", "", 0),
        ] {
            let meter = Meter::new(zone(own), Role::Worker);
            assert_eq!(
                meter.count(path, Direction::Received, zone(peer).as_ref(), 10),
                crossed,
                "{own:?} reading from {peer:?}"
            );
        }
    }

    #[test]
    fn every_cross_zone_series_exists_from_the_start() {
        register_all();
        use prometheus::core::Collector;
        let n: usize = CROSS_ZONE_BYTES
            .collect()
            .iter()
            .map(|f| f.get_metric().len())
            .sum();
        assert_eq!(n, TrafficPath::ALL.len() * Direction::ALL.len());
    }
}
