//! The entry point shared by the `manifest` fuzz target and the corpus replay test.

use crate::manifest::file_format::{encode_snapshot_file, replay};

/// Replays `data` as a MANIFEST file. Must return normally for every input; the asserts state
/// what every accepted input satisfies:
///
/// * its valid prefix (without a torn tail) replays to the same shards and ends cleanly;
/// * a rewrite of the replayed shards replays to the same shards, with no record counted
///   since the rewrite.
pub fn fuzz_check(data: &[u8]) {
    let Ok(replayed) = replay(data) else {
        return;
    };
    let valid_len = replayed.valid_len as usize;
    assert!(valid_len <= data.len(), "valid prefix out of bounds");
    let prefix = replay(&data[..valid_len]).expect("the valid prefix replays");
    assert!(prefix.torn.is_none(), "the valid prefix has a torn tail");
    assert!(
        prefix.shards == replayed.shards,
        "the valid prefix replays to other shards"
    );
    let rewritten = encode_snapshot_file(replayed.shards.iter())
        .expect("snapshots of replayed shards fit a record");
    let again = replay(&rewritten).expect("a rewrite replays");
    assert!(again.torn.is_none(), "a rewrite has a torn tail");
    assert!(
        again.shards == replayed.shards,
        "a rewrite replays to other shards"
    );
    assert!(
        again.records_since_rewrite == 0,
        "a rewrite counts records since the rewrite"
    );
}
