//! The messages waiting for one destination: a FIFO bounded in messages and in bytes. When a
//! push would exceed a bound, the oldest messages go first: a newer heartbeat or append
//! supersedes an older one, and Raft retransmits whatever is lost.

use std::collections::VecDeque;

use wire::raft::RaftMessage;

/// How much one destination may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxLimits {
    pub max_messages: usize,
    pub max_bytes: usize,
}

#[derive(Debug)]
pub struct Outbox {
    /// Each message with its [`RaftMessage::batch_len`].
    queue: VecDeque<(RaftMessage, usize)>,
    bytes: usize,
    limits: OutboxLimits,
}

impl Outbox {
    pub fn new(limits: OutboxLimits) -> Outbox {
        Outbox {
            queue: VecDeque::new(),
            bytes: 0,
            limits,
        }
    }

    /// Appends `m`; returns how many older messages were dropped to make room. The newest
    /// message always stays, even one larger than `max_bytes` on its own.
    pub fn push(&mut self, m: RaftMessage) -> usize {
        let len = m.batch_len();
        let mut dropped = 0;
        while !self.queue.is_empty()
            && (self.queue.len() + 1 > self.limits.max_messages
                || self.bytes + len > self.limits.max_bytes)
        {
            if let Some((_, old)) = self.queue.pop_front() {
                self.bytes -= old;
                dropped += 1;
            }
        }
        self.queue.push_back((m, len));
        self.bytes += len;
        dropped
    }

    /// The oldest messages whose batch lengths sum to at most `max_bytes`, and at least one
    /// (a message larger than the limit leaves alone). Empty when nothing waits.
    pub fn take_batch(&mut self, max_bytes: usize) -> Vec<RaftMessage> {
        let mut out = Vec::new();
        let mut size = 0;
        while let Some((_, len)) = self.queue.front() {
            if !out.is_empty() && size + len > max_bytes {
                break;
            }
            let Some((m, len)) = self.queue.pop_front() else {
                break;
            };
            size += len;
            self.bytes -= len;
            out.push(m);
        }
        out
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Sum of the waiting messages' batch lengths.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use wire::raft::{Entry, Message};

    use super::*;

    /// A message for region `id` with `payload` entry bytes.
    fn msg(id: u64, payload: usize) -> RaftMessage {
        RaftMessage {
            region_id: id,
            to_store: 2,
            message: Some(Message {
                entries: vec![Entry {
                    data: Bytes::from(vec![0u8; payload]),
                    ..Entry::default()
                }],
                ..Message::default()
            }),
            ..RaftMessage::default()
        }
    }

    fn ids(ms: &[RaftMessage]) -> Vec<u64> {
        ms.iter().map(|m| m.region_id).collect()
    }

    fn limits(max_messages: usize, max_bytes: usize) -> OutboxLimits {
        OutboxLimits {
            max_messages,
            max_bytes,
        }
    }

    #[test]
    fn overflowing_the_message_bound_drops_the_oldest() {
        let mut o = Outbox::new(limits(3, usize::MAX));
        let dropped: Vec<usize> = (1..=5).map(|i| o.push(msg(i, 10))).collect();
        assert_eq!(dropped, [0, 0, 0, 1, 1]);
        assert_eq!(ids(&o.take_batch(usize::MAX)), [3, 4, 5]);
        assert!(o.is_empty());
        assert_eq!(o.bytes(), 0);
    }

    #[test]
    fn overflowing_the_byte_bound_drops_the_oldest_until_the_newest_fits() {
        let len = msg(1, 100).batch_len();
        let mut o = Outbox::new(limits(100, 3 * len));
        for i in 1..=3 {
            assert_eq!(o.push(msg(i, 100)), 0);
        }
        assert_eq!(o.bytes(), 3 * len);
        // Between one and two of the others in size: two must go.
        let big = msg(4, 100 + len - 8);
        assert!(big.batch_len() > len && big.batch_len() <= 2 * len);
        assert_eq!(o.push(big), 2);
        assert_eq!(ids(&o.take_batch(usize::MAX)), [3, 4]);
    }

    #[test]
    fn a_message_larger_than_the_byte_bound_stays_alone() {
        let mut o = Outbox::new(limits(100, 50));
        o.push(msg(1, 10));
        assert_eq!(o.push(msg(2, 500)), 1);
        assert_eq!(o.len(), 1);
        assert_eq!(ids(&o.take_batch(10)), [2]);
    }

    #[test]
    fn batches_take_the_oldest_within_the_size_and_at_least_one() {
        let len = msg(1, 40).batch_len();
        let mut o = Outbox::new(limits(100, usize::MAX));
        for i in 1..=5 {
            o.push(msg(i, 40));
        }
        assert_eq!(ids(&o.take_batch(2 * len + 1)), [1, 2]);
        assert_eq!(ids(&o.take_batch(1)), [3]);
        assert_eq!(ids(&o.take_batch(usize::MAX)), [4, 5]);
        assert!(o.take_batch(usize::MAX).is_empty());
    }
}
