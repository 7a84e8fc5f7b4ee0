//! Checks run by the cargo-fuzz targets in `fuzz/` and by the corpus replay test. Each takes
//! arbitrary bytes and must never panic or allocate more than the input justifies; it exercises
//! every read path of the decoder it names.

use bytes::Bytes;

use crate::block::Block;
use crate::footer::{Footer, FormatVersion};
use crate::table::Table;
use crate::{L0Table, block_frame};

/// A logical block and a framed block, in the layout of every format version.
pub fn block(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    for format in FormatVersion::ALL {
        if let Ok(b) = Block::decode(bytes.clone(), format) {
            let mut key = Vec::new();
            for i in 0..b.len() {
                if let Ok(e) = b.entry(i) {
                    b.key_into(&e, &mut key);
                    let _ = b.version_of(&e);
                    let _ = b.lower_bound(&key);
                }
            }
            let mut rows = crate::block_rows::BlockRows::default();
            let _ = rows.decode(&b);
        }
    }
    if let Ok(raw) = block_frame::decode(&bytes) {
        for format in FormatVersion::ALL {
            let _ = Block::decode(raw.clone(), format);
        }
    }
}

/// The footer decoder on its own.
pub fn footer(data: &[u8]) {
    let _ = Footer::decode(data);
}

/// A whole table (and the same bytes as an L0 file): open, scan both ways at two timestamps,
/// point reads of every key seen, range estimates.
pub fn table(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    if let Ok(t) = Table::open(1, bytes.clone()) {
        exercise(&t);
    }
    if let Ok(l0) = L0Table::open(2, bytes) {
        for cf in types::ColumnFamily::ALL {
            if let Some(t) = l0.cf(cf) {
                exercise(t);
            }
        }
    }
}

fn exercise(t: &Table) {
    let mut keys = Vec::new();
    for ts in [u64::MAX, t.properties().max_ts / 2] {
        let mut it = t.iter(ts);
        let mut r = it.seek_to_first();
        while r.is_ok() && it.valid() && keys.len() < 10_000 {
            keys.push(it.key().to_vec());
            let _ = it.all_versions();
            r = it.next();
        }
        let mut r = it.seek_to_last();
        let mut n = 0;
        while r.is_ok() && it.valid() && n < 10_000 {
            n += 1;
            r = it.prev();
        }
    }
    for k in keys.iter().take(100) {
        let _ = t.get(k, u64::MAX);
        let _ = t.get(k, 1);
        let _ = t.versions(k);
        let mut it = t.iter(u64::MAX);
        let _ = it.seek(k);
        let _ = it.seek_for_prev(k);
    }
    let _ = t.estimate_blocks_size(&[(b"".as_slice(), b"".as_slice())]);
}
