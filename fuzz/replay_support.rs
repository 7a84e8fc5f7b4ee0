//! Shared by the test suites that replay the committed fuzz corpora under `cargo test`
//! (included with `#[path]` from each crate's `tests/`): where the corpora live, reading one,
//! and the byte mutations a fuzzer would try on a seed.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;

/// The corpus directory of fuzz target `name`.
pub fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(name)
}

/// Every file of a corpus, sorted by path; a missing or empty corpus fails the test.
pub fn corpus_files(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = corpus(name);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
}

/// Checks that the committed seed `file` of corpus `target` equals `bytes`, its generator's
/// output; with `STRATUS_BLESS=1` it (re)writes the file instead. A missing seed is a failure.
pub fn check_or_bless_seed(target: &str, file: &str, bytes: &[u8]) {
    let path = corpus(target).join(file);
    if std::env::var("STRATUS_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(corpus(target)).unwrap();
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "seed {} is missing ({e}); write it with STRATUS_BLESS=1",
            path.display()
        )
    });
    assert_eq!(
        committed,
        bytes,
        "{} differs from its generator",
        path.display()
    );
}

/// A mutation a fuzzer would try on a seed.
#[derive(Clone, Debug)]
pub enum Mutation {
    Flip { at: prop::sample::Index, mask: u8 },
    Insert { at: prop::sample::Index, byte: u8 },
    Remove { at: prop::sample::Index },
    Truncate { at: prop::sample::Index },
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), 1..=255u8)
            .prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        (any::<prop::sample::Index>(), any::<u8>())
            .prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        any::<prop::sample::Index>().prop_map(|at| Mutation::Remove { at }),
        any::<prop::sample::Index>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

pub fn mutate(mut data: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        if data.is_empty() {
            data.push(0);
        }
        match mutation {
            Mutation::Flip { at, mask } => {
                let i = at.index(data.len());
                data[i] ^= mask;
            }
            Mutation::Insert { at, byte } => data.insert(at.index(data.len() + 1), *byte),
            Mutation::Remove { at } => {
                data.remove(at.index(data.len()));
            }
            Mutation::Truncate { at } => data.truncate(at.index(data.len())),
        }
    }
    data
}
