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

/// Bodies every endpoint of a request target must survive: empty, one zero byte, an over-long
/// varint, a short string field, a nested message, and bytes that are no protobuf at all.
pub const ARBITRARY_BODIES: [&[u8]; 6] = [
    b"",
    b"\x00",
    b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    b"\x0a\x05hello",
    b"\x12\x02\x08\x01",
    &[0xff; 64],
];

/// A cheap stand-in for the fuzzer in ordinary test runs: `check` on 512 inputs, each a
/// corpus file (of `files`) with one to three mutations.
pub fn check_mutated_corpus(files: &[(PathBuf, Vec<u8>)], check: impl Fn(&[u8])) {
    use proptest::test_runner::{Config, TestRunner};
    assert!(!files.is_empty(), "an empty corpus");
    let config = Config {
        cases: 512,
        source_file: Some(file!()),
        ..Config::default()
    };
    let strategy = (
        any::<prop::sample::Index>(),
        prop::collection::vec(mutation(), 1..4),
    );
    let result = TestRunner::new(config).run(&strategy, |(seed, mutations)| {
        let (_, data) = &files[seed.index(files.len())];
        check(&mutate(data.clone(), &mutations));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
