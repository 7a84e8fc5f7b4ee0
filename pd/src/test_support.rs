//! What the unit tests of this crate share: a runtime to block on and a leader fence over a
//! store.

use std::future::Future;

use crate::election::Fence;
use crate::meta::embedded::EmbeddedStore;
use crate::meta::{MetaStore, Op, Txn};

/// Runs `f` to completion on a fresh current-thread runtime (with timers).
pub fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a test runtime")
        .block_on(f)
}

/// Writes the key `leader` and returns the fence of that write (a new one on every call).
pub fn fence_for(store: &EmbeddedStore) -> Fence {
    block(async {
        store
            .txn(Txn::default().then(vec![Op::put("leader", "me")]))
            .await
            .expect("write the leader key");
        Fence {
            key: b"leader".to_vec(),
            mod_revision: store
                .get(b"leader")
                .await
                .expect("read the leader key")
                .expect("the leader key")
                .mod_revision,
        }
    })
}
