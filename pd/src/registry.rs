//! Who is in the cluster and where the regions are: servers and workers registered under
//! leases (a heartbeat renews the lease; a node silent longer than `node-lease-ttl` vanishes
//! from the store by itself), and the routing table refreshed from the regions' leaders.
//!
//! The routing table is a reflection, as in PD: Raft decides leadership and ranges, servers
//! report what they lead, and an entry is replaced only by a report of a newer epoch, or of the
//! same epoch and a higher term. Each replacement is a transaction comparing the entry's
//! revision as read, so two leaders reporting at once (an old one that has not noticed yet and
//! a new one) cannot overwrite each other out of order.
//!
//! Values are protobuf: `stores/<id>` a `wire::pd::StoreInfo`, `workers/<id>` a
//! `wire::pd::WorkerInfo`, `regions/<id>` a `wire::region::Region` (ids zero-padded to 20
//! digits so the keys sort by id).

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use prost::Message;
use wire::pd::{
    ClusterView, PlacementRule, StoreHeartbeat, StoreInfo, StoreState, WorkerHeartbeat, WorkerInfo,
};
use wire::region::Region;

use crate::election::Fence;
use crate::error::PdError;
use crate::id_alloc::IdAllocator;
use crate::keys::{Keys, parse_u64};
use crate::meta::{Compare, KeyValue, MetaStore, Op, Txn};
use crate::tso::now_ms;

/// The registry of one placement-driver instance (its caches are only hints: the store is the
/// truth, and a new leader starts with empty caches).
#[derive(Debug)]
pub struct Registry {
    keys: Keys,
    node_lease_ttl: Duration,
    /// The last region value written per region id, to skip unchanged reports.
    written: Mutex<HashMap<u64, Vec<u8>>>,
}

/// Whether `new` is a newer view of a region than `old`: a higher epoch (`ver`, then
/// `conf_ver`), or the same epoch and a higher term, or the same epoch and term with other
/// contents (size, data version, a replica's catch-up state).
pub fn is_newer(new: &Region, old: &Region) -> bool {
    let key = |r: &Region| (r.ver, r.conf_ver, r.leader_term);
    key(new) > key(old) || (key(new) == key(old) && new != old)
}

impl Registry {
    pub fn new(keys: Keys, node_lease_ttl: Duration) -> Registry {
        Registry {
            keys,
            node_lease_ttl,
            written: Mutex::new(HashMap::new()),
        }
    }

    /// Forgets the caches (a new leadership).
    pub fn reset(&self) {
        self.written.lock().clear();
    }

    /// Writes `value` at `key` under the lease the key already has (renewed), or a new one.
    async fn put_registered<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        key: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<(), PdError> {
        let current = store.get(&key).await?;
        let lease = match current.as_ref().map(|kv| kv.lease).filter(|l| *l != 0) {
            Some(l) if store.keep_alive(l).await?.is_some() => l,
            _ => store.grant_lease(self.node_lease_ttl).await?.id,
        };
        let unchanged =
            Compare::mod_revision_is(key.clone(), current.map_or(0, |kv| kv.mod_revision));
        let done = store
            .txn(
                Txn::when(vec![fence.compare(), unchanged])
                    .then(vec![Op::put_leased(key, value, lease)]),
            )
            .await?;
        if !done {
            // Either the fence broke or another heartbeat of the same node won the race: the
            // next heartbeat writes again.
            return Err(PdError::LeadershipLost {
                what: "a registration",
            });
        }
        Ok(())
    }

    /// Takes a server's heartbeat: registers it and reflects the regions it leads.
    pub async fn store_heartbeat<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        hb: StoreHeartbeat,
    ) -> Result<(), PdError> {
        let led = hb.led_regions.clone();
        let info = StoreInfo {
            heartbeat: Some(StoreHeartbeat {
                led_regions: Vec::new(),
                held_regions: Vec::new(),
                ..hb.clone()
            }),
            last_heartbeat_ms: now_ms(),
            state: 0,
        };
        self.put_registered(
            store,
            fence,
            self.keys.store(hb.store_id),
            info.encode_to_vec(),
        )
        .await?;
        for region in led {
            self.reflect_region(store, fence, region).await?;
        }
        Ok(())
    }

    /// Replaces the routing-table entry of `region` when the report is newer.
    async fn reflect_region<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        region: Region,
    ) -> Result<(), PdError> {
        let bytes = region.encode_to_vec();
        if self.written.lock().get(&region.id) == Some(&bytes) {
            return Ok(());
        }
        let key = self.keys.region(region.id);
        let current = store.get(&key).await?;
        if let Some(kv) = &current {
            let old: Region = decode_one(kv)?;
            if !is_newer(&region, &old) {
                return Ok(());
            }
        }
        let unchanged =
            Compare::mod_revision_is(key.clone(), current.map_or(0, |kv| kv.mod_revision));
        let done = store
            .txn(
                Txn::when(vec![fence.compare(), unchanged]).then(vec![Op::put(key, bytes.clone())]),
            )
            .await?;
        if done {
            self.written.lock().insert(region.id, bytes);
        }
        // Not done: another report replaced it meanwhile; the next heartbeat compares again.
        Ok(())
    }

    /// Takes a worker's heartbeat; its id (a new one for a URL never seen).
    pub async fn worker_heartbeat<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        ids: &IdAllocator,
        hb: WorkerHeartbeat,
    ) -> Result<u64, PdError> {
        let id = self.worker_id(store, fence, ids, &hb.url).await?;
        let info = WorkerInfo {
            id,
            url: hb.url,
            labels: hb.labels,
            last_heartbeat_ms: now_ms(),
        };
        self.put_registered(store, fence, self.keys.worker(id), info.encode_to_vec())
            .await?;
        Ok(id)
    }

    /// The id of the worker at `url`: the one it got at its first heartbeat (kept for ever,
    /// unleased, so a worker back after a lapse keeps it), or a new one.
    async fn worker_id<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        ids: &IdAllocator,
        url: &str,
    ) -> Result<u64, PdError> {
        let key = self.keys.worker_id_of(url);
        if let Some(kv) = store.get(&key).await? {
            return parse_u64(&key, &kv.value).map_err(PdError::Corrupt);
        }
        let id = ids.alloc(store, fence, 1).await?;
        let created = store
            .txn(
                Txn::when(vec![fence.compare(), Compare::absent(key.clone())])
                    .then(vec![Op::put(key.clone(), id.to_string())]),
            )
            .await?;
        if created {
            return Ok(id);
        }
        // A concurrent heartbeat of the same worker created it first: take that one.
        match store.get(&key).await? {
            Some(kv) => parse_u64(&key, &kv.value).map_err(PdError::Corrupt),
            None => Err(PdError::LeadershipLost {
                what: "a worker id",
            }),
        }
    }

    /// Sets server `id`'s scheduling state (`stratus ctl server drain`), fenced.
    pub async fn set_store_state<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        id: u64,
        state: StoreState,
    ) -> Result<(), PdError> {
        let key = self.keys.store_state(id);
        let op = match state {
            StoreState::Up => Op::Delete { key },
            StoreState::Draining => Op::put(key, (state as i32).to_string()),
        };
        if !store
            .txn(Txn::when(vec![fence.compare()]).then(vec![op]))
            .await?
        {
            return Err(PdError::LeadershipLost {
                what: "a server's state",
            });
        }
        Ok(())
    }

    /// The registered servers and workers and the routing table (readable on any instance:
    /// the store is linearizable).
    pub async fn view<S: MetaStore>(&self, store: &S) -> Result<ClusterView, PdError> {
        let (states, _) = store.scan_prefix(&self.keys.store_states()).await?;
        let mut draining = std::collections::HashSet::new();
        for kv in &states {
            let id = parse_u64(&kv.key, kv.key.rsplit(|b| *b == b'/').next().unwrap_or(&[]))
                .map_err(PdError::Corrupt)?;
            let state = parse_u64(&kv.key, &kv.value).map_err(PdError::Corrupt)?;
            if state == StoreState::Draining as u64 {
                draining.insert(id);
            }
        }
        let (stores, _) = store.scan_prefix(&self.keys.stores()).await?;
        let (workers, _) = store.scan_prefix(&self.keys.workers()).await?;
        let (rules, _) = store.scan_prefix(&self.keys.rules()).await?;
        let (regions, revision) = store.scan_prefix(&self.keys.regions()).await?;
        let mut regions: Vec<Region> = decode_all(&regions)?;
        regions.sort_by(|a, b| a.start.cmp(&b.start).then(a.id.cmp(&b.id)));
        let mut stores: Vec<StoreInfo> = decode_all(&stores)?;
        for s in &mut stores {
            let id = s.heartbeat.as_ref().map_or(0, |h| h.store_id);
            if draining.contains(&id) {
                s.set_state(StoreState::Draining);
            }
        }
        Ok(ClusterView {
            stores,
            workers: decode_all(&workers)?,
            regions,
            revision,
            rules: decode_all(&rules)?,
            ..ClusterView::default()
        })
    }

    /// The placement rules, by id.
    pub async fn rules<S: MetaStore>(&self, store: &S) -> Result<Vec<PlacementRule>, PdError> {
        let (rules, _) = store.scan_prefix(&self.keys.rules()).await?;
        decode_all(&rules)
    }

    /// Sets `rule` (replacing the one with its id), fenced; refused when it does not
    /// validate.
    pub async fn put_rule<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        rule: &PlacementRule,
    ) -> Result<(), PdError> {
        rule.validate().map_err(PdError::Invalid)?;
        let op = Op::put(self.keys.rule(&rule.id), rule.encode_to_vec());
        if !store
            .txn(Txn::when(vec![fence.compare()]).then(vec![op]))
            .await?
        {
            return Err(PdError::LeadershipLost {
                what: "a placement rule",
            });
        }
        Ok(())
    }

    /// Deletes the rule `id`, fenced; refused when there is none.
    pub async fn delete_rule<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        id: &str,
    ) -> Result<(), PdError> {
        let key = self.keys.rule(id);
        if store.get(&key).await?.is_none() {
            return Err(PdError::Invalid(format!(
                "expected an existing rule id, found {id:?}"
            )));
        }
        if !store
            .txn(Txn::when(vec![fence.compare()]).then(vec![Op::Delete { key }]))
            .await?
        {
            return Err(PdError::LeadershipLost {
                what: "a placement rule",
            });
        }
        Ok(())
    }

    /// The registered workers only (what node selection and the offload pool read often).
    pub async fn workers_view<S: MetaStore>(&self, store: &S) -> Result<ClusterView, PdError> {
        let (workers, revision) = store.scan_prefix(&self.keys.workers()).await?;
        Ok(ClusterView {
            workers: decode_all(&workers)?,
            revision,
            ..ClusterView::default()
        })
    }
}

/// One value as the protobuf message `M`; bytes that do not decode name the key.
fn decode_one<M: Message + Default>(kv: &KeyValue) -> Result<M, PdError> {
    M::decode(kv.value.as_slice()).map_err(|e| {
        PdError::Corrupt(format!(
            "expected a {} at {}, found bytes that do not decode: {e}",
            std::any::type_name::<M>()
                .rsplit("::")
                .next()
                .unwrap_or("message"),
            String::from_utf8_lossy(&kv.key)
        ))
    })
}

fn decode_all<M: Message + Default>(kvs: &[KeyValue]) -> Result<Vec<M>, PdError> {
    kvs.iter().map(decode_one).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::embedded::EmbeddedStore;
    use crate::test_support::{block, fence_for};

    fn region(id: u64, ver: u64, term: u64) -> Region {
        Region {
            id,
            ver,
            leader_term: term,
            leader_store_id: term,
            ..Region::default()
        }
    }

    #[test]
    fn only_a_newer_epoch_or_term_replaces_an_entry() {
        assert!(is_newer(&region(1, 2, 1), &region(1, 1, 5)));
        assert!(is_newer(&region(1, 1, 6), &region(1, 1, 5)));
        assert!(!is_newer(&region(1, 1, 4), &region(1, 1, 5)));
        assert!(!is_newer(&region(1, 1, 5), &region(1, 1, 5)));
        let mut grown = region(1, 1, 5);
        grown.approximate_size = 10;
        assert!(is_newer(&grown, &region(1, 1, 5)));
    }

    #[test]
    fn heartbeats_register_nodes_and_a_stale_leader_cannot_roll_the_table_back() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        block(async {
            let reg = Registry::new(Keys::new("t"), Duration::from_millis(200));
            let ids = IdAllocator::new(b"ids".to_vec(), 10);
            ids.start();
            let hb = |store_id: u64, led: Vec<Region>| StoreHeartbeat {
                store_id,
                url: format!("http://s{store_id}"),
                led_regions: led,
                ..StoreHeartbeat::default()
            };
            reg.store_heartbeat(&store, &fence, hb(1, vec![region(7, 1, 3)]))
                .await
                .unwrap();
            // A new leader (term 4) reports, then the old one (term 3) reports late.
            reg.store_heartbeat(&store, &fence, hb(2, vec![region(7, 1, 4)]))
                .await
                .unwrap();
            reg.store_heartbeat(&store, &fence, hb(1, vec![region(7, 1, 3)]))
                .await
                .unwrap();
            let w = reg
                .worker_heartbeat(
                    &store,
                    &fence,
                    &ids,
                    WorkerHeartbeat {
                        url: "http://w".into(),
                        labels: Vec::new(),
                    },
                )
                .await
                .unwrap();
            let again = reg
                .worker_heartbeat(
                    &store,
                    &fence,
                    &ids,
                    WorkerHeartbeat {
                        url: "http://w".into(),
                        labels: Vec::new(),
                    },
                )
                .await
                .unwrap();
            assert_eq!(w, again, "a worker keeps its id");
            let view = reg.view(&store).await.unwrap();
            assert_eq!(view.stores.len(), 2);
            assert_eq!(view.workers.len(), 1);
            assert_eq!(view.regions, vec![region(7, 1, 4)]);
            // Silent nodes vanish when their lease ends; the routing table stays.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let view = reg.view(&store).await.unwrap();
            assert!(
                view.stores.is_empty() && view.workers.is_empty(),
                "{view:?}"
            );
            assert_eq!(view.regions.len(), 1);
            // A worker back after its lease lapsed keeps its id.
            let back = reg
                .worker_heartbeat(
                    &store,
                    &fence,
                    &ids,
                    WorkerHeartbeat {
                        url: "http://w".into(),
                        labels: Vec::new(),
                    },
                )
                .await
                .unwrap();
            assert_eq!(back, w);
        });
    }

    #[test]
    fn placement_rules_are_kept_replaced_by_id_deleted_and_refused_when_invalid() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        block(async {
            let reg = Registry::new(Keys::new("t"), Duration::from_millis(200));
            let rule = |id: &str, zones: &[&str]| PlacementRule {
                id: id.into(),
                zones: zones.iter().map(|z| z.to_string()).collect(),
                ..PlacementRule::default()
            };
            reg.put_rule(&store, &fence, &rule("whole", &["a", "b"]))
                .await
                .unwrap();
            reg.put_rule(&store, &fence, &rule("whole", &["a", "b", "c"]))
                .await
                .unwrap();
            assert_eq!(
                reg.rules(&store).await.unwrap(),
                vec![rule("whole", &["a", "b", "c"])]
            );
            assert_eq!(reg.view(&store).await.unwrap().rules.len(), 1);
            let e = reg
                .put_rule(&store, &fence, &rule("bad", &["a", "a"]))
                .await
                .unwrap_err();
            assert!(matches!(e, PdError::Invalid(_)), "{e}");
            let e = reg.delete_rule(&store, &fence, "nope").await.unwrap_err();
            assert!(e.to_string().contains("\"nope\""), "{e}");
            reg.delete_rule(&store, &fence, "whole").await.unwrap();
            assert!(reg.rules(&store).await.unwrap().is_empty());
        });
    }
}
