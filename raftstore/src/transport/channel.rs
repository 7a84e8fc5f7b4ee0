//! Stores of one process talking over channels: the network of the in-process cluster tests.
//!
//! A [`ChannelNetwork`] maps store ids to the sending half of each store's inbox; each store
//! sends through its own [`ChannelTransport`]. A store receives what [`super::HttpTransport`]
//! would have POSTed to it: one [`RaftBatch`] per destination per `send` call. Tests break
//! the network on purpose: [`ChannelNetwork::partition`] cuts it into groups,
//! [`ChannelNetwork::drop_if`] drops chosen messages, [`ChannelNetwork::heal`] undoes both.
//! What is dropped is counted ([`ChannelNetwork::dropped`]), not reported to the process
//! metrics (a test network is no production path).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use wire::raft::{RaftBatch, RaftMessage};

use super::{Transport, group_by_destination};

/// A predicate over messages: `true` drops the message.
pub type Filter = Box<dyn Fn(&RaftMessage) -> bool + Send + Sync>;

#[derive(Default)]
struct NetworkState {
    inboxes: HashMap<u64, Sender<RaftBatch>>,
    /// Store -> group while partitioned; stores in different groups cannot talk. Empty: whole.
    groups: HashMap<u64, usize>,
    filters: Vec<Filter>,
}

impl NetworkState {
    fn delivers(&self, from_store: u64, m: &RaftMessage) -> bool {
        let group = |store| self.groups.get(&store).copied().unwrap_or(usize::MAX);
        (self.groups.is_empty() || group(from_store) == group(m.to_store))
            && !self.filters.iter().any(|f| f(m))
    }
}

/// The in-process network.
#[derive(Default)]
pub struct ChannelNetwork {
    state: Mutex<NetworkState>,
    dropped: AtomicU64,
}

impl ChannelNetwork {
    pub fn new() -> Arc<ChannelNetwork> {
        Arc::new(ChannelNetwork::default())
    }

    /// Connects `store_id` and returns its inbox. Registering again (a restarted store)
    /// replaces the previous inbox.
    pub fn register(&self, store_id: u64) -> Receiver<RaftBatch> {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.state.lock().inboxes.insert(store_id, tx);
        rx
    }

    /// Disconnects `store_id` (a stopped store): messages to it are dropped.
    pub fn unregister(&self, store_id: u64) {
        self.state.lock().inboxes.remove(&store_id);
    }

    /// The transport `store_id` sends with.
    pub fn transport(self: &Arc<Self>, store_id: u64) -> ChannelTransport {
        ChannelTransport {
            store_id,
            network: Arc::clone(self),
        }
    }

    /// Cuts the network: each of `groups` becomes one side, and every store listed in none of
    /// them forms one more. Messages between sides are dropped until [`ChannelNetwork::heal`].
    /// `partition(&[&[1]])` isolates store 1.
    pub fn partition(&self, groups: &[&[u64]]) {
        let mut state = self.state.lock();
        state.groups = groups
            .iter()
            .enumerate()
            .flat_map(|(i, stores)| stores.iter().map(move |s| (*s, i)))
            .collect();
    }

    /// Drops every message for which `filter` returns `true`, until [`ChannelNetwork::heal`].
    pub fn drop_if(&self, filter: impl Fn(&RaftMessage) -> bool + Send + Sync + 'static) {
        self.state.lock().filters.push(Box::new(filter));
    }

    /// Removes the partition and every filter.
    pub fn heal(&self) {
        let mut state = self.state.lock();
        state.groups.clear();
        state.filters.clear();
    }

    /// Messages dropped so far (partitions, filters, unknown or stopped stores).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn deliver(&self, from_store: u64, msgs: Vec<RaftMessage>) {
        let mut dropped = 0;
        let mut out: BTreeMap<u64, (Sender<RaftBatch>, Vec<RaftMessage>)> = BTreeMap::new();
        {
            let state = self.state.lock();
            for (to_store, msgs) in group_by_destination(msgs) {
                let Some(inbox) = state.inboxes.get(&to_store) else {
                    dropped += msgs.len();
                    continue;
                };
                let before = msgs.len();
                let kept: Vec<RaftMessage> = msgs
                    .into_iter()
                    .filter(|m| state.delivers(from_store, m))
                    .collect();
                dropped += before - kept.len();
                if !kept.is_empty() {
                    out.insert(to_store, (inbox.clone(), kept));
                }
            }
        }
        for (inbox, messages) in out.into_values() {
            let n = messages.len();
            let batch = RaftBatch {
                from_store,
                messages,
            };
            if inbox.send(batch).is_err() {
                // The store dropped its inbox (it stopped) without unregistering.
                dropped += n;
            }
        }
        self.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
    }
}

/// One store's sending end of a [`ChannelNetwork`].
#[derive(Clone)]
pub struct ChannelTransport {
    store_id: u64,
    network: Arc<ChannelNetwork>,
}

impl ChannelTransport {
    pub fn store_id(&self) -> u64 {
        self.store_id
    }
}

impl Transport for ChannelTransport {
    fn send(&self, msgs: Vec<RaftMessage>) {
        self.network.deliver(self.store_id, msgs);
    }
}

#[cfg(test)]
mod tests {
    use wire::raft::{Message, MessageType};

    use super::*;

    fn msg(from_store: u64, to_store: u64, region_id: u64, t: MessageType) -> RaftMessage {
        RaftMessage {
            region_id,
            from_store,
            to_store,
            message: Some(Message {
                msg_type: t as i32,
                ..Message::default()
            }),
            ..RaftMessage::default()
        }
    }

    fn heartbeat(from: u64, to: u64, region: u64) -> RaftMessage {
        msg(from, to, region, MessageType::MsgHeartbeat)
    }

    /// Every region id waiting in `inbox`, per batch.
    fn drain(inbox: &Receiver<RaftBatch>) -> Vec<Vec<u64>> {
        inbox
            .try_iter()
            .map(|b| b.messages.iter().map(|m| m.region_id).collect())
            .collect()
    }

    /// Three connected stores.
    fn three() -> (Arc<ChannelNetwork>, Vec<Receiver<RaftBatch>>) {
        let net = ChannelNetwork::new();
        let inboxes = (1..=3).map(|s| net.register(s)).collect();
        (net, inboxes)
    }

    #[test]
    fn one_send_arrives_as_one_batch_per_destination_in_order() {
        let (net, inboxes) = three();
        net.transport(1).send(vec![
            heartbeat(1, 2, 10),
            heartbeat(1, 3, 11),
            heartbeat(1, 2, 12),
            heartbeat(1, 3, 13),
        ]);
        assert_eq!(drain(&inboxes[1]), [vec![10, 12]]);
        assert_eq!(drain(&inboxes[2]), [vec![11, 13]]);
        assert!(drain(&inboxes[0]).is_empty());
        let batch_from = |inbox: &Receiver<RaftBatch>| inbox.try_recv().map(|b| b.from_store);
        net.transport(3).send(vec![heartbeat(3, 1, 1)]);
        assert_eq!(batch_from(&inboxes[0]), Ok(3));
        assert_eq!(net.dropped(), 0);
    }

    #[test]
    fn a_partition_drops_messages_across_it_until_healed() {
        let (net, inboxes) = three();
        net.partition(&[&[1]]);
        net.transport(1)
            .send(vec![heartbeat(1, 2, 1), heartbeat(1, 3, 2)]);
        net.transport(2)
            .send(vec![heartbeat(2, 3, 3), heartbeat(2, 1, 4)]);
        assert!(drain(&inboxes[0]).is_empty());
        assert!(drain(&inboxes[1]).is_empty());
        assert_eq!(drain(&inboxes[2]), [vec![3]]);
        assert_eq!(net.dropped(), 3);

        net.heal();
        net.transport(1).send(vec![heartbeat(1, 2, 5)]);
        assert_eq!(drain(&inboxes[1]), [vec![5]]);
    }

    #[test]
    fn listed_groups_are_cut_from_each_other_and_from_the_unlisted() {
        let net = ChannelNetwork::new();
        let inboxes: Vec<_> = (1..=5).map(|s| net.register(s)).collect();
        net.partition(&[&[1, 2], &[3]]);
        let t1 = net.transport(1);
        t1.send(vec![
            heartbeat(1, 2, 1),
            heartbeat(1, 3, 2),
            heartbeat(1, 4, 3),
        ]);
        net.transport(4)
            .send(vec![heartbeat(4, 5, 4), heartbeat(4, 3, 5)]);
        assert_eq!(drain(&inboxes[1]), [vec![1]]);
        assert!(drain(&inboxes[2]).is_empty());
        assert!(drain(&inboxes[3]).is_empty());
        assert_eq!(drain(&inboxes[4]), [vec![4]]);
        assert_eq!(net.dropped(), 3);
    }

    #[test]
    fn a_filter_drops_only_what_it_matches() {
        let (net, inboxes) = three();
        net.drop_if(|m| m.to_store == 3 && m.msg_type() == Some(MessageType::MsgAppend));
        net.transport(1).send(vec![
            msg(1, 3, 1, MessageType::MsgAppend),
            msg(1, 3, 2, MessageType::MsgHeartbeat),
            msg(1, 2, 3, MessageType::MsgAppend),
        ]);
        assert_eq!(drain(&inboxes[2]), [vec![2]]);
        assert_eq!(drain(&inboxes[1]), [vec![3]]);
        assert_eq!(net.dropped(), 1);
        net.heal();
        net.transport(1)
            .send(vec![msg(1, 3, 4, MessageType::MsgAppend)]);
        assert_eq!(drain(&inboxes[2]), [vec![4]]);
    }

    #[test]
    fn messages_to_stopped_or_unknown_stores_are_dropped_and_a_restart_reconnects() {
        let (net, inboxes) = three();
        net.unregister(2);
        net.transport(1)
            .send(vec![heartbeat(1, 2, 1), heartbeat(1, 9, 2)]);
        assert!(drain(&inboxes[1]).is_empty());
        assert_eq!(net.dropped(), 2);
        let restarted = net.register(2);
        net.transport(1).send(vec![heartbeat(1, 2, 3)]);
        assert_eq!(drain(&restarted), [vec![3]]);
    }
}
