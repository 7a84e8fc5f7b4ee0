//! File ids are strictly increasing and never reused, across clean restarts and crashes.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use kvengine::FileId;
use std::fs;

use kvengine::ErrorKind;
use kvengine::manifest::{COUNTER_BITS, ID_BATCH, IdAllocator, NEXT_FILE_ID_FILE_NAME};

#[test]
fn ids_strictly_increase_across_reopens_and_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut last = 0;
    for round in 0..4 {
        let ids = IdAllocator::open(dir.path(), 3).unwrap();
        // Cross a batch boundary in some rounds, stop mid-batch in others.
        let count = if round % 2 == 0 { ID_BATCH + 5 } else { 7 };
        for _ in 0..count {
            let id = ids.next().unwrap();
            assert!(id > FileId(last), "round={round} id={id} last={last}");
            last = id.get();
        }
        // Dropped without any shutdown step, as in a crash.
    }
}

#[test]
fn ids_carry_the_node_id_in_the_high_bits() {
    let dir = tempfile::tempdir().unwrap();
    let ids = IdAllocator::open(dir.path(), 0xabc).unwrap();
    let id = ids.next().unwrap().get();
    assert_eq!(id >> COUNTER_BITS, 0xabc);
    assert_ne!(
        id & ((1 << COUNTER_BITS) - 1),
        0,
        "counter 0 is never handed out"
    );
}

#[test]
fn the_high_water_mark_is_persisted_before_an_id_is_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    let ids = IdAllocator::open(dir.path(), 1).unwrap();
    assert!(!dir.path().join(NEXT_FILE_ID_FILE_NAME).exists());
    let first = ids.next().unwrap();
    // A "crash" right after the first id: the reopened allocator must not repeat it, even
    // though the original would still have had ids left in its batch.
    let reopened = IdAllocator::open(dir.path(), 1).unwrap();
    let next = reopened.next().unwrap();
    assert!(next > first);
    assert!(
        ids.next().unwrap() < next,
        "ids skip at most the unused rest of a batch"
    );
}

#[test]
fn a_damaged_allocator_file_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    IdAllocator::open(dir.path(), 1).unwrap().next().unwrap();
    let path = dir.path().join(NEXT_FILE_ID_FILE_NAME);
    let mut bytes = fs::read(&path).unwrap();
    bytes[9] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let err = IdAllocator::open(dir.path(), 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.to_string().contains(NEXT_FILE_ID_FILE_NAME), "{err}");
}

#[test]
fn concurrent_callers_get_distinct_ids() {
    let dir = tempfile::tempdir().unwrap();
    let ids = std::sync::Arc::new(IdAllocator::open(dir.path(), 2).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let ids = ids.clone();
            std::thread::spawn(move || (0..600).map(|_| ids.next().unwrap()).collect::<Vec<_>>())
        })
        .collect();
    let mut all: Vec<kvengine::FileId> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), count);
}
