//! Inputs a reader or builder must refuse with a clear error (found in review).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use bytes::Bytes;
use sst::{BuilderOptions, Table, TableBuilder};

/// A footer with a valid checksum whose handles are chosen by the test.
fn footer(old: u64, handles: [(u64, u32); 4]) -> Vec<u8> {
    let mut out = old.to_le_bytes().to_vec();
    for (o, l) in handles {
        out.extend(o.to_le_bytes());
        out.extend(l.to_le_bytes());
    }
    out.extend([0u8, 1]);
    out.extend(1u16.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend(crc.to_le_bytes());
    out.extend(sst::footer::MAGIC.to_le_bytes());
    out
}

#[test]
fn footer_handle_that_wraps_u64_is_corruption_not_a_panic() {
    let mut data = vec![0u8; 32];
    data.extend(footer(0, [(u64::MAX - 3, 9), (5, 9), (14, 9), (23, 9)]));
    let err = Table::open(1, Bytes::from(data)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn zero_filter_bits_are_rejected() {
    let err = TableBuilder::new(BuilderOptions {
        filter_bits_per_key: 0,
        ..Default::default()
    })
    .err()
    .expect("0 bits per key would make every get miss");
    assert!(err.to_string().contains("filter_bits_per_key"), "{err}");
}

#[test]
fn swapped_blocks_are_corruption_not_a_missing_key() {
    let mut b = TableBuilder::new(BuilderOptions {
        block_size: 128,
        ..Default::default()
    })
    .unwrap();
    for i in 0..100u32 {
        b.add(format!("k{i:04}").as_bytes(), 1, b"", b"value", false)
            .unwrap();
    }
    let mut data = b.finish().data;
    let t = Table::open(1, Bytes::from(data.clone())).unwrap();
    let sizes = t.block_sizes();
    let j = (0..sizes.len() - 1)
        .find(|&j| sizes[j] == sizes[j + 1])
        .expect("two neighbouring blocks of equal size");
    let (a, l) = (sizes[..j].iter().sum::<u64>() as usize, sizes[j] as usize);
    let probe = t.block_first_keys()[j + 1].clone();
    let (x, y) = (data[a..a + l].to_vec(), data[a + l..a + 2 * l].to_vec());
    data[a..a + l].copy_from_slice(&y);
    data[a + l..a + 2 * l].copy_from_slice(&x);
    let t = Table::open(1, Bytes::from(data)).unwrap();
    let err = t.get(&probe, u64::MAX).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let mut it = t.iter(u64::MAX);
    assert!(it.seek_for_prev(&probe).is_err());
}

#[test]
fn oversized_entry_is_rejected_before_it_is_written() {
    let mut b = TableBuilder::new(BuilderOptions::default()).unwrap();
    let big = vec![0u8; sst::options::MAX_ENTRY_LEN + 1];
    let err = b.add(b"k", 1, b"", &big, false).unwrap_err();
    assert!(matches!(err, sst::Error::EntryTooLarge { .. }), "{err}");
    assert!(b.is_empty());
}
