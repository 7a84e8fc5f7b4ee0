//! How Raft messages leave a server: the store loop hands every message of a round to one
//! [`Transport::send`] call, and the transport delivers them per destination server, in the
//! order they were produced (Raft tolerates loss and reordering, but in-order delivery keeps
//! appends from being rejected and retransmitted).
//!
//! * [`HttpTransport`]: between processes, `POST /raft/batch` with one sender per destination
//!   ([`http`]);
//! * [`ChannelTransport`]: between stores of one process, for tests, with a network that drops,
//!   partitions and heals ([`channel`]).
//!
//! `send` never blocks on the network: a slow or dead destination costs its own queue, not
//! the store loop's round, nor the messages for other destinations.

pub mod channel;
pub mod http;
mod outbox;

use std::collections::BTreeMap;

use wire::raft::RaftMessage;

pub use channel::{ChannelNetwork, ChannelTransport};
pub use http::{DestinationStats, HttpTransport, HttpTransportOptions};

/// Delivers Raft messages to other stores, grouped by [`RaftMessage::to_store`].
pub trait Transport: Send + Sync {
    /// Queues `msgs` for delivery and returns at once. Messages for one destination leave in
    /// this order; undeliverable ones are dropped and counted (Raft retransmits).
    fn send(&self, msgs: Vec<RaftMessage>);

    /// Where store `store_id` is now (`http://host:port`): a server learns the address of a
    /// store that joined one of its regions from the placement driver. Transports that reach
    /// every store already ignore it.
    fn set_address(&self, _store_id: u64, _base_url: &str) {}
}

/// `msgs` by destination store, each list in the order given.
pub fn group_by_destination(msgs: Vec<RaftMessage>) -> BTreeMap<u64, Vec<RaftMessage>> {
    let mut by_store: BTreeMap<u64, Vec<RaftMessage>> = BTreeMap::new();
    for m in msgs {
        by_store.entry(m.to_store).or_default().push(m);
    }
    by_store
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_keeps_the_order_within_each_destination() {
        let m = |to_store, region_id| RaftMessage {
            to_store,
            region_id,
            ..RaftMessage::default()
        };
        let groups = group_by_destination(vec![m(2, 1), m(3, 2), m(2, 3), m(3, 4), m(2, 5)]);
        let regions: Vec<(u64, Vec<u64>)> = groups
            .into_iter()
            .map(|(store, ms)| (store, ms.iter().map(|m| m.region_id).collect()))
            .collect();
        assert_eq!(regions, [(2, vec![1, 3, 5]), (3, vec![2, 4])]);
    }
}
