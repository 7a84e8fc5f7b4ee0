//! System variables of entry sessions against a real server: GLOBAL values live in the
//! cluster (so another entry node's new sessions start from them, and they survive a server
//! restart), SESSION values stay in their session, and a wrong name or value is refused with
//! an error naming what is allowed, storing nothing.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use client::{Scope, Setting};
use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::EntryClient;
use e2e::server_proc::ServerProc;

const POLICY: &str = "tidb_tiflash_node_selection_policy";
const REMOTE: &str = "stratus_remote_coprocessor";

fn session_value(c: &EntryClient, scope: Scope, name: &str) -> String {
    c.block_on(async {
        let s = c.client.session().await.expect("session");
        s.get(scope, name).await.expect("get")
    })
}

#[test]
fn global_values_are_every_new_sessions_default_and_session_values_stay_put() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = cluster.server_config("server");
    let mut server = ServerProc::start(&cfg);
    let a = EntryClient::new(&[&server], |_| {});
    let b = EntryClient::new(&[&server], |_| {});
    assert_eq!(session_value(&a, Scope::Session, POLICY), "all_nodes");
    assert_eq!(session_value(&a, Scope::Session, REMOTE), "OFF");

    a.block_on(async {
        let mut s = a.client.session().await.unwrap();
        let set = s
            .set(Scope::Global, POLICY, "priority_local_zone_nodes")
            .await
            .unwrap();
        assert_eq!(
            set,
            Setting::parse(POLICY, "priority_local_zone_nodes").unwrap()
        );
        assert_eq!(
            s.get(Scope::Session, POLICY).await.unwrap(),
            "all_nodes",
            "SET GLOBAL leaves the current session as it was"
        );
        assert_eq!(
            s.get(Scope::Global, POLICY).await.unwrap(),
            "priority_local_zone_nodes"
        );
        s.set(Scope::Session, REMOTE, "on").await.unwrap();
        assert_eq!(s.get(Scope::Session, REMOTE).await.unwrap(), "ON");
    });
    // Another entry node's new session starts from the GLOBAL values, not from a's session.
    assert_eq!(
        session_value(&b, Scope::Session, POLICY),
        "priority_local_zone_nodes"
    );
    assert_eq!(session_value(&b, Scope::Session, REMOTE), "OFF");

    // Refused values store nothing.
    let err = b.block_on(async {
        let mut s = b.client.session().await.unwrap();
        s.set(Scope::Global, POLICY, "closest_nodes")
            .await
            .unwrap_err()
    });
    assert!(
        err.to_string()
            .contains("allowed=all_nodes,priority_local_zone_nodes,only_local_zone_nodes"),
        "{err}"
    );
    let err = b.block_on(async {
        let mut s = b.client.session().await.unwrap();
        s.set(Scope::Session, "tidb_no_such_thing", "1")
            .await
            .unwrap_err()
    });
    assert!(err.to_string().contains("unknown system variable"), "{err}");
    assert_eq!(
        session_value(&b, Scope::Global, POLICY),
        "priority_local_zone_nodes"
    );

    // Stored in the cluster: a restarted server still has it.
    server.terminate();
    let server = ServerProc::start(&cfg);
    let c = EntryClient::new(&[&server], |_| {});
    assert_eq!(
        session_value(&c, Scope::Session, POLICY),
        "priority_local_zone_nodes"
    );
}
