//! The entry points shared by the `lock_record` and `write_meta` fuzz targets and their corpus
//! replay test (`tests/mvcc_record_fuzz_corpus_replay.rs`).

use super::records::{Lock, WriteMeta};

/// Decodes `data` as a LOCK-CF value. Must return normally for every input; an accepted input
/// has exactly one encoding: re-encoding the decoded lock gives back the input, so a lock read
/// from disk and written again (resolve, rewrite) is byte-identical.
pub fn lock_record_check(data: &[u8]) {
    let Ok(lock) = Lock::decode(data) else {
        return;
    };
    assert!(
        lock.encode() == data,
        "re-encoding a decoded lock changed the bytes"
    );
    // What a reader reports must be derivable from any accepted lock.
    let info = lock.info(b"key");
    assert_eq!(info.use_async_commit, lock.secondaries.is_some());
}

/// Decodes `data` as WRITE-CF user meta. Must return normally for every input; an accepted
/// input re-encodes to itself, and the one-byte kind peek a scan makes per row agrees with the
/// full decoder (accepts exactly what it accepts, with the same kind).
pub fn write_meta_check(data: &[u8]) {
    let decoded = WriteMeta::decode(data);
    let peeked = WriteMeta::peek_kind(data);
    assert!(
        decoded.as_ref().ok().map(|m| m.kind) == peeked.as_ref().ok().copied(),
        "peek_kind and decode disagree"
    );
    if let Ok(meta) = decoded {
        assert!(
            meta.encode() == data,
            "re-encoding a decoded write meta changed the bytes"
        );
    }
}
