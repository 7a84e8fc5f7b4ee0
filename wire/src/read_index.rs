//! The context of a Raft read-index request: what raft-rs carries opaquely from the replica
//! that asks for a read point to its leader and back (the `data` of the one entry of
//! `MsgReadIndex` / `MsgReadIndexResp`; with the `Safe` read option the leader also puts it in
//! the heartbeats that confirm its leadership).
//!
//! **Why more than an id.** A follower read (a replica read) is served from a follower's data
//! once it has applied up to the leader's commit index. Two things the follower cannot see live
//! on the leader only: the *memory locks* of async-commit and 1PC prewrites whose entries are not
//! committed yet, and `max_ts`, from which those prewrites take their `min_commit_ts`. So the
//! request names the reader's `start_ts` and key ranges; before the leader steps the request into
//! raft-rs it raises `max_ts` to `start_ts` and checks its memory locks over the ranges, and it
//! writes the outcome into the context (`checked`, `locked`), which raft-rs hands back to the
//! follower in the answer. This is TiKV's `ReadIndexContext` (its `start_ts`, `key_ranges` and
//! `locked`).
//!
//! A leader that does not check (it has no checker installed yet, or it is an older build that
//! does not know these fields) leaves `checked` false: the follower refuses to serve such a
//! read, so a rolling upgrade never serves one unchecked.
//!
//! Reads a leader serves itself (`start_ts` 0) carry only their id: the server checks its own
//! memory locks after the read point.

use prost::Message as _;

use crate::coprocessor::{KeyRange, LockInfo};

/// Tag-numbered like every message of this crate (never renumbered or reused).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadIndexContext {
    /// Tag 1: the store that asked. With `id` it makes the context unique at the leader, which
    /// keys its pending reads by the context's bytes.
    #[prost(uint64, tag = "1")]
    pub store_id: u64,
    /// Tag 2: the request's number at that store (per region).
    #[prost(uint64, tag = "2")]
    pub id: u64,
    /// Tag 3: the reader's start_ts; 0 = a read the leader serves itself (nothing to check).
    #[prost(uint64, tag = "3")]
    pub start_ts: u64,
    /// Tag 4: the key ranges the reader will read (`[start, end)`, empty end = unbounded).
    #[prost(message, repeated, tag = "4")]
    pub ranges: Vec<KeyRange>,
    /// Tag 5: set by the leader once it raised `max_ts` and checked its memory locks.
    #[prost(bool, tag = "5")]
    pub checked: bool,
    /// Tag 6: set by the leader: a memory lock in the ranges that blocks a read at `start_ts`.
    #[prost(message, optional, tag = "6")]
    pub locked: Option<LockInfo>,
}

impl ReadIndexContext {
    /// The bytes raft-rs carries.
    pub fn encode_to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// Decodes a context a peer's raft-rs carried; `None` when the bytes are not one.
    pub fn decode_from(bytes: &[u8]) -> Option<ReadIndexContext> {
        ReadIndexContext::decode(bytes).ok()
    }

    /// A read that needs the leader's check (a replica read).
    pub fn needs_check(&self) -> bool {
        self.start_ts != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checked_context_round_trips_with_its_lock() {
        let ctx = ReadIndexContext {
            store_id: 3,
            id: 17,
            start_ts: 400,
            ranges: vec![KeyRange {
                start: b"a".to_vec(),
                end: b"m".to_vec(),
            }],
            checked: true,
            locked: Some(LockInfo {
                key: b"c".to_vec(),
                primary_lock: b"c".to_vec(),
                lock_version: 390,
                ..LockInfo::default()
            }),
        };
        let back = ReadIndexContext::decode_from(&ctx.encode_to_bytes()).expect("decodes");
        assert_eq!(back, ctx);
        assert!(back.needs_check());
    }

    #[test]
    fn a_leader_read_needs_no_check_and_garbage_is_not_a_context() {
        let ctx = ReadIndexContext {
            store_id: 1,
            id: 2,
            ..ReadIndexContext::default()
        };
        assert!(!ctx.needs_check());
        // A field with wire type 7 does not exist.
        assert_eq!(ReadIndexContext::decode_from(&[0x0f, 0x01]), None);
    }
}
