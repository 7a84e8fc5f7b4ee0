//! Writes realistic seed inputs for the fuzz targets:
//! `fuzz/corpus/changeset_decode/` (one encoded ChangeSet of each kind) and
//! `fuzz/corpus/memtable_data_decode/` (memtable-data blobs).
//!
//! Run with `cargo run -p changeset --example changeset_fuzz_seeds`. Existing files of the same name are
//! overwritten; other corpus files are left alone.

use std::path::Path;

use changeset::encode_changeset;
use changeset::fuzzing::{changeset_seeds, memtable_data_seeds};

fn main() -> std::io::Result<()> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");

    let dir = corpus.join("changeset_decode");
    std::fs::create_dir_all(&dir)?;
    let changesets = changeset_seeds();
    for (name, changeset) in &changesets {
        std::fs::write(dir.join(format!("{name}.bin")), encode_changeset(changeset))?;
    }
    println!("wrote {} seeds to {}", changesets.len(), dir.display());

    let dir = corpus.join("memtable_data_decode");
    std::fs::create_dir_all(&dir)?;
    let blobs = memtable_data_seeds();
    for (name, blob) in &blobs {
        std::fs::write(dir.join(format!("{name}.bin")), blob)?;
    }
    println!("wrote {} seeds to {}", blobs.len(), dir.display());
    Ok(())
}
