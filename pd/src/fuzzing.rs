//! Entry point of the `pd_request` fuzz target (`fuzz/fuzz_targets/pd_request.rs`), kept in the
//! library so that the committed corpus replays as an ordinary test
//! (`pd/tests/request_fuzz_replay.rs`) through the very same code.
//!
//! [`Fixture::check`] POSTs a body to one of the placement driver's endpoints ([`ENDPOINTS`])
//! through its own router ([`crate::service::router`]), in process, without a socket, on a
//! real [`Pd`] that leads over an embedded metadata store held in memory. What must hold
//! whatever the body is `node::fuzzing`'s check: no handler fails, an undecodable body is
//! refused (400), a decodable one is answered 200 with a response that decodes (refusals such
//! as a bad server state travel inside the answer); only `/pd/rules` judges a request's
//! content (a rule without an id, an empty key range, the delete of a rule that does not
//! exist) and may refuse a decodable body with 400 and its reason.
//!
//! `POST /pd/watch` is left out: a request may hold its answer for up to 30 s by design (a
//! long poll, capped by `watch::MAX_WAIT`), which would stall the fuzzer, not find a bug.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{Method, StatusCode};
use node::fuzzing::{Endpoint, decodes};
use prost::Message;
use tokio::sync::watch;
use wire::paths;
use wire::pd::{
    AllocIdRequest, AllocIdResponse, HeartbeatResponse, PlacementRule, RulesRequest, RulesResponse,
    StoreHeartbeat, StoreStateRequest, WorkerHeartbeat,
};
use wire::region::{Label, Peer, Region, TsoRequest, TsoResponse};

use crate::meta::embedded::EmbeddedStore;
use crate::scheduler::SchedulerConfig;
use crate::service::{Pd, PdOptions, router};

/// Every endpoint that takes a body (but the watch, see the module docs), in the order of the
/// target's selector byte.
pub const ENDPOINTS: [Endpoint; 6] = [
    Endpoint::new(paths::TSO, decodes::<TsoRequest>, decodes::<TsoResponse>),
    Endpoint::new(
        paths::PD_ALLOC_ID,
        decodes::<AllocIdRequest>,
        decodes::<AllocIdResponse>,
    ),
    Endpoint::new(
        paths::PD_STORE_HEARTBEAT,
        decodes::<StoreHeartbeat>,
        decodes::<HeartbeatResponse>,
    ),
    Endpoint::new(
        paths::PD_WORKER_HEARTBEAT,
        decodes::<WorkerHeartbeat>,
        decodes::<HeartbeatResponse>,
    ),
    Endpoint::new(
        paths::PD_STORE_STATE,
        decodes::<StoreStateRequest>,
        decodes::<HeartbeatResponse>,
    ),
    Endpoint::new(
        paths::PD_RULES,
        decodes::<RulesRequest>,
        decodes::<RulesResponse>,
    )
    .judging_content(),
];

/// The target's input: a selector byte choosing the endpoint ([`ENDPOINTS`], modulo their
/// number), then the body. `None` for the empty input.
pub fn selected(data: &[u8]) -> Option<(&'static str, &[u8])> {
    node::fuzzing::selected(&ENDPOINTS, data).map(|(e, body)| (e.path, body))
}

/// The selector byte of `path`, for seeds.
pub fn selector(path: &str) -> u8 {
    node::fuzzing::selector(&ENDPOINTS, path)
}

/// The `pd_request` target: `body` POSTed to `path` on the process's fixture.
pub fn request(path: &str, body: &[u8]) {
    static SHARED: OnceLock<Fixture> = OnceLock::new();
    SHARED
        .get_or_init(|| Fixture::new().expect("the fuzz fixture starts"))
        .check(path, body);
}

/// Why the fixture could not start.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("cannot start the fixture's runtime")]
    Io(#[from] std::io::Error),
    #[error("the placement driver did not become leader within {0:?}")]
    NoLeader(Duration),
}

/// A placement driver leading over an in-memory embedded store, and the runtime its handlers
/// run on.
pub struct Fixture {
    runtime: tokio::runtime::Runtime,
    router: Router,
    stop: watch::Sender<bool>,
}

/// How long the fixture waits for its instance to win the (uncontested) election.
const LEAD_WITHIN: Duration = Duration::from_secs(10);

impl Fixture {
    pub fn new() -> Result<Fixture, FixtureError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let store = EmbeddedStore::in_memory();
        let options = PdOptions {
            name: "pd-fuzz".into(),
            url: "http://127.0.0.1:9".into(),
            cluster_name: "fuzz".into(),
            // Long enough that the uncontested lease never lapses under a slow fuzzer.
            lease_ttl: Duration::from_secs(60),
            tso_window: Duration::from_secs(3),
            id_batch: 100,
            node_lease_ttl: Duration::from_secs(600),
            config_text: String::new(),
            scheduler: SchedulerConfig::default(),
            // No scheduling round moves state behind the inputs' backs.
            schedule_interval: Duration::from_secs(3600),
            gc_life_time: Duration::from_secs(600),
            admin_token: None,
        };
        let pd = Arc::new(Pd::new(store, options));
        let (stop, stopped) = watch::channel(false);
        runtime.spawn(pd.clone().run_election(stopped));
        let t0 = Instant::now();
        while !pd.leadership().is_leader() {
            if t0.elapsed() > LEAD_WITHIN {
                return Err(FixtureError::NoLeader(LEAD_WITHIN));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(Fixture {
            runtime,
            router: router(pd),
            stop,
        })
    }

    /// POSTs `body` to `path` and checks what must hold for any body (see the module docs).
    pub fn check(&self, path: &str, body: &[u8]) {
        let endpoint = node::fuzzing::endpoint(&ENDPOINTS, path);
        let (status, answer) = self.post(path, body);
        endpoint.check_answer(body, status, &answer);
    }

    /// One POST through the router: the status and the answer's bytes.
    pub fn post(&self, path: &str, body: &[u8]) -> (StatusCode, Vec<u8>) {
        node::fuzzing::call(&self.runtime, &self.router, Method::POST, path, body)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Real requests, one or more per endpoint, plus one body that does not decode: the corpus'
/// seeds, as `(name, selector byte + body)`.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let label = |k: &str, v: &str| Label {
        key: k.into(),
        value: v.into(),
    };
    let region = Region {
        id: 7,
        ver: 2,
        start: b"t\x80".to_vec(),
        end: b"t\x81".to_vec(),
        data_version: 11,
        approximate_size: 64 << 20,
        conf_ver: 3,
        peers: vec![Peer {
            store_id: 1,
            addr: "http://127.0.0.1:20160".into(),
            zone: "a".into(),
            ..Peer::default()
        }],
        leader_store_id: 1,
        ..Region::default()
    };
    let seed = |name: &str, path: &str, body: Vec<u8>| {
        let mut data = vec![selector(path)];
        data.extend(body);
        (name.to_string(), data)
    };
    vec![
        seed("tso", paths::TSO, TsoRequest { count: 3 }.encode_to_vec()),
        seed(
            "alloc_id",
            paths::PD_ALLOC_ID,
            AllocIdRequest { count: 5 }.encode_to_vec(),
        ),
        seed(
            "store_heartbeat",
            paths::PD_STORE_HEARTBEAT,
            StoreHeartbeat {
                store_id: 1,
                url: "http://127.0.0.1:20160".into(),
                labels: vec![label("zone", "a")],
                region_count: 1,
                leader_count: 1,
                used_size: 64 << 20,
                led_regions: vec![region],
                held_regions: vec![7],
                oldest_lock_ts: 0,
            }
            .encode_to_vec(),
        ),
        seed(
            "worker_heartbeat",
            paths::PD_WORKER_HEARTBEAT,
            WorkerHeartbeat {
                url: "http://127.0.0.1:19000".into(),
                labels: vec![label("zone", "b")],
            }
            .encode_to_vec(),
        ),
        seed(
            "store_state_draining",
            paths::PD_STORE_STATE,
            StoreStateRequest {
                store_id: 1,
                state: 1,
            }
            .encode_to_vec(),
        ),
        seed(
            "rules_put",
            paths::PD_RULES,
            RulesRequest {
                put: Some(PlacementRule {
                    id: "orders-in-a".into(),
                    start: b"t\x80".to_vec(),
                    end: b"t\x81".to_vec(),
                    zones: vec!["a".into()],
                }),
                ..RulesRequest::default()
            }
            .encode_to_vec(),
        ),
        // A varint field whose value never ends: refused with a 400.
        seed("alloc_id_truncated", paths::PD_ALLOC_ID, vec![0x08, 0xff]),
    ]
}
