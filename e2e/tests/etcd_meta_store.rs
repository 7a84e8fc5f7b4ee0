//! The two metadata stores behind `pd::meta::MetaStore` agree: the same random sequence of
//! transactions, reads, scans and lease operations runs against a real etcd (through the JSON
//! gateway client) and against the embedded store, and every answer must match. The embedded
//! store has its own model test; this one proves the etcd client means the same thing.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::pd_proc::block_on;
use harness::etcd::EtcdCluster;
use pd::meta::embedded::EmbeddedStore;
use pd::meta::etcd::EtcdStore;
use pd::meta::{Compare, KeyValue, LeaseId, MetaStore, Op, Txn};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A key's value as both stores can be compared: revisions differ in absolute terms (etcd
/// counts its own writes), so only the value and whether the key exists are compared, and
/// revisions through compares against each store's own current revision.
fn view(kv: &Option<KeyValue>) -> Option<Vec<u8>> {
    kv.as_ref().map(|kv| kv.value.clone())
}

struct Pair {
    etcd: EtcdStore,
    embedded: EmbeddedStore,
    prefix: Vec<u8>,
    /// Each store's lease for the same logical lease.
    leases: Vec<(LeaseId, LeaseId)>,
}

impl Pair {
    fn key(&self, k: u8) -> Vec<u8> {
        let mut key = self.prefix.clone();
        key.push(b'0' + k);
        key
    }

    async fn both_txn(&self, make: impl Fn(&dyn Fn(u8) -> Vec<u8>, bool) -> Txn) -> (bool, bool) {
        let key = |k: u8| self.key(k);
        let a = self.etcd.txn(make(&key, true)).await.unwrap();
        let b = self.embedded.txn(make(&key, false)).await.unwrap();
        (a, b)
    }
}

#[test]
fn etcd_and_the_embedded_store_answer_a_random_history_alike() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = EtcdCluster::start(&dir.path().join("etcd"), 1).unwrap();
    block_on(async {
        let mut pair = Pair {
            etcd: EtcdStore::new(etcd.endpoints(), Duration::from_secs(5)),
            embedded: EmbeddedStore::open(&dir.path().join("meta")).unwrap(),
            prefix: b"/t/".to_vec(),
            leases: Vec::new(),
        };
        let mut rng = StdRng::seed_from_u64(17);
        for step in 0..400 {
            let k: u8 = rng.random_range(0..5);
            let v: u8 = rng.random_range(0..3);
            let choice = rng.random_range(0..9);
            let what = match choice {
                0 => {
                    let (a, b) = pair
                        .both_txn(|key, _| Txn::default().then(vec![Op::put(key(k), vec![v])]))
                        .await;
                    assert_eq!(a, b, "step {step}: put {k}");
                    format!("put {k}={v}: {a} {b}")
                }
                1 => {
                    let (a, b) = pair
                        .both_txn(|key, _| Txn::default().then(vec![Op::Delete { key: key(k) }]))
                        .await;
                    assert_eq!(a, b, "step {step}: delete {k}");
                    format!("delete {k}: {a} {b}")
                }
                2 => {
                    let (a, b) = pair
                        .both_txn(|key, _| {
                            Txn::when(vec![Compare::absent(key(k))])
                                .then(vec![Op::put(key(k), vec![v])])
                        })
                        .await;
                    assert_eq!(a, b, "step {step}: create-if-absent {k}");
                    format!("create {k}: {a}")
                }
                3 => {
                    let (a, b) = pair
                        .both_txn(|key, _| {
                            Txn::when(vec![Compare::value_is(key(k), vec![v])]).then(vec![
                                Op::put(key(k), vec![v + 10]),
                                Op::Delete {
                                    key: key((k + 1) % 5),
                                },
                            ])
                        })
                        .await;
                    assert_eq!(a, b, "step {step}: value compare {k}={v}");
                    format!("if {k}={v}: {a}")
                }
                4 => {
                    // A compare against each store's own current revision of the key, right or
                    // off by one.
                    let off = u64::from(rng.random_range(0..2u8));
                    let ra = pair
                        .etcd
                        .get(&pair.key(k))
                        .await
                        .unwrap()
                        .map_or(0, |kv| kv.mod_revision);
                    let rb = pair
                        .embedded
                        .get(&pair.key(k))
                        .await
                        .unwrap()
                        .map_or(0, |kv| kv.mod_revision);
                    let (a, b) = pair
                        .both_txn(|key, is_etcd| {
                            let r = if is_etcd { ra } else { rb } + off;
                            Txn::when(vec![Compare::mod_revision_is(key(k), r)])
                                .then(vec![Op::put(key(k), vec![v])])
                        })
                        .await;
                    assert_eq!(a, b, "step {step}: revision compare {k} off={off}");
                    format!("if rev {k}+{off}: {a}")
                }
                5 => {
                    let ttl = Duration::from_secs(60);
                    let a = pair.etcd.grant_lease(ttl).await.unwrap();
                    let b = pair.embedded.grant_lease(ttl).await.unwrap();
                    pair.leases.push((a.id, b.id));
                    let (ia, ib) = (a.id, b.id);
                    let (x, y) = pair
                        .both_txn(|key, is_etcd| {
                            Txn::default().then(vec![Op::put_leased(
                                key(k),
                                vec![v],
                                if is_etcd { ia } else { ib },
                            )])
                        })
                        .await;
                    assert_eq!(x, y, "step {step}: leased put {k}");
                    format!("leased put {k}: {x} {y}")
                }
                6 if !pair.leases.is_empty() => {
                    let i = rng.random_range(0..pair.leases.len());
                    let (a, b) = pair.leases.remove(i);
                    pair.etcd.revoke(a).await.unwrap();
                    pair.embedded.revoke(b).await.unwrap();
                    format!("revoke lease #{i}")
                }
                7 if !pair.leases.is_empty() => {
                    let (a, b) = pair.leases[0];
                    let x = pair.etcd.keep_alive(a).await.unwrap();
                    let y = pair.embedded.keep_alive(b).await.unwrap();
                    assert_eq!(x.is_some(), y.is_some(), "step {step}: keepalive");
                    "keepalive".to_string()
                }
                _ => {
                    let a = pair.etcd.get(&pair.key(k)).await.unwrap();
                    let b = pair.embedded.get(&pair.key(k)).await.unwrap();
                    assert_eq!(view(&a), view(&b), "step {step}: get {k}");
                    "get".to_string()
                }
            };
            let (a, _) = pair.etcd.scan_prefix(&pair.prefix).await.unwrap();
            let (b, _) = pair.embedded.scan_prefix(&pair.prefix).await.unwrap();
            let strip = |kvs: Vec<KeyValue>| -> Vec<(Vec<u8>, Vec<u8>, bool)> {
                kvs.into_iter()
                    .map(|kv| (kv.key, kv.value, kv.lease != 0))
                    .collect()
            };
            assert_eq!(strip(a), strip(b), "step {step} after {what}");
        }
    });
}

#[test]
fn an_expired_etcd_lease_takes_its_keys_and_cannot_be_renewed() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = EtcdCluster::start(&dir.path().join("etcd"), 1).unwrap();
    block_on(async {
        let store = EtcdStore::new(etcd.endpoints(), Duration::from_secs(5));
        let lease = store.grant_lease(Duration::from_secs(1)).await.unwrap();
        assert!(lease.ttl >= Duration::from_secs(1));
        assert!(
            store
                .txn(Txn::default().then(vec![Op::put_leased("/l", "x", lease.id)]))
                .await
                .unwrap()
        );
        assert!(store.keep_alive(lease.id).await.unwrap().is_some());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.get(b"/l").await.unwrap().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "the lease never expired"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(store.keep_alive(lease.id).await.unwrap(), None);
        let e = store
            .txn(Txn::default().then(vec![Op::put_leased("/l", "x", lease.id)]))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("lease"), "{e}");
        // Unreachable etcd: a clear, retryable error naming the endpoints.
        drop(etcd);
        let e = store.get(b"/l").await.unwrap_err();
        assert!(
            e.is_retryable() && e.to_string().contains("127.0.0.1"),
            "{e}"
        );
    });
}

/// With TLS, etcd is another node of the cluster: the placement driver's store speaks https to
/// an etcd that demands client certificates, presenting its own certificate and trusting only
/// the cluster CA; a certificate from another CA, or none, gets nothing read or written.
#[test]
fn etcd_over_tls_takes_the_cluster_certificate_and_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    let ca = harness::certs::ThrowawayCa::create(&dir.path().join("ca"), "cluster-ca").unwrap();
    let etcd_cert = ca.issue("etcd").unwrap();
    let pd_tls = ca.issue("stratus-pd").unwrap().load().unwrap().unwrap();
    let other_ca =
        harness::certs::ThrowawayCa::create(&dir.path().join("other"), "other-ca").unwrap();
    let other_tls = other_ca
        .issue("stratus-pd")
        .unwrap()
        .load()
        .unwrap()
        .unwrap();
    let etcd = EtcdCluster::start_with(&dir.path().join("etcd"), 1, Some(etcd_cert)).unwrap();
    assert!(etcd.endpoints()[0].starts_with("https://"));
    block_on(async {
        let store = EtcdStore::with_tls(etcd.endpoints(), Duration::from_secs(5), Some(&pd_tls));
        assert!(
            store
                .txn(Txn::default().then(vec![Op::put("/tls", "yes")]))
                .await
                .unwrap()
        );
        assert_eq!(
            store.get(b"/tls").await.unwrap().map(|kv| kv.value),
            Some(b"yes".to_vec())
        );
        let stranger =
            EtcdStore::with_tls(etcd.endpoints(), Duration::from_secs(2), Some(&other_tls));
        let e = stranger
            .txn(Txn::default().then(vec![Op::put("/tls", "no")]))
            .await
            .unwrap_err();
        let anonymous = EtcdStore::new(etcd.endpoints(), Duration::from_secs(2));
        let e2 = anonymous.get(b"/tls").await.unwrap_err();
        assert_eq!(
            store.get(b"/tls").await.unwrap().map(|kv| kv.value),
            Some(b"yes".to_vec()),
            "the refused writer changed nothing ({e}; {e2})"
        );
    });
}
