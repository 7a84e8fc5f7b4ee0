//! Replays the committed cargo-fuzz corpora through the same checks the fuzz targets run, so
//! every input that ever found a bug (or was a seed) is re-checked by `cargo test` on stable.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::path::PathBuf;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        check(&std::fs::read(&path).unwrap());
        n += 1;
    }
    n
}

#[test]
fn block_corpus_replays_without_panic() {
    assert!(
        replay("sst_block", sst::fuzzing::block) > 0,
        "corpus is empty"
    );
}

#[test]
fn table_corpus_replays_without_panic() {
    assert!(
        replay("sst_table", sst::fuzzing::table) > 0,
        "corpus is empty"
    );
}

#[test]
fn footer_corpus_replays_without_panic() {
    assert!(
        replay("sst_footer", sst::fuzzing::footer) > 0,
        "corpus is empty"
    );
}
