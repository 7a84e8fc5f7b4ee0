//! The size the engine compares with its memtable switch threshold.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use memtable::{ColumnFamily, KEY_OVERHEAD, Memtable, VERSION_OVERHEAD};

#[test]
fn first_version_of_a_key_charges_key_and_version() {
    let mt = Memtable::new();
    assert!(mt.put(ColumnFamily::Write, b"key", 1, b"meta", b"value"));
    assert_eq!(mt.size(), KEY_OVERHEAD + 3 + VERSION_OVERHEAD + 4 + 5);
}

#[test]
fn later_version_of_a_key_charges_only_the_version() {
    let mt = Memtable::new();
    mt.put(ColumnFamily::Write, b"key", 1, b"meta", b"value");
    let before = mt.size();
    assert!(mt.put(ColumnFamily::Write, b"key", 2, b"m", b"longer value"));
    assert_eq!(mt.size() - before, VERSION_OVERHEAD + 1 + 12);
}

#[test]
fn tombstone_charges_its_meta_and_the_version_overhead() {
    let mt = Memtable::new();
    mt.put(ColumnFamily::Write, b"key", 1, b"meta", b"value");
    let before = mt.size();
    assert!(mt.delete(ColumnFamily::Write, b"key", 2, b"mm"));
    assert_eq!(mt.size() - before, VERSION_OVERHEAD + 2);
}

#[test]
fn ignored_puts_and_deletes_change_nothing() {
    let mt = Memtable::new();
    mt.put(ColumnFamily::Write, b"key", 5, b"meta", b"value");
    let (size, len) = (mt.size(), mt.cf(ColumnFamily::Write).len());
    assert!(!mt.put(ColumnFamily::Write, b"key", 5, b"meta", b"same version"));
    assert!(!mt.put(ColumnFamily::Write, b"key", 4, b"meta", b"older version"));
    assert!(!mt.delete(ColumnFamily::Write, b"key", 3, b"meta"));
    assert_eq!((mt.size(), mt.cf(ColumnFamily::Write).len()), (size, len));
    assert_eq!(mt.cf(ColumnFamily::Write).versions(b"key").count(), 1);
}

#[test]
fn size_is_the_sum_over_column_families() {
    let mt = Memtable::new();
    mt.put(ColumnFamily::Write, b"a", 1, b"", b"x");
    mt.put(ColumnFamily::Lock, b"a", 1, b"", b"yy");
    mt.delete(ColumnFamily::Extra, b"bb", 1, b"");
    let per_cf: Vec<usize> = ColumnFamily::ALL
        .iter()
        .map(|&cf| mt.cf(cf).size())
        .collect();
    assert_eq!(
        per_cf,
        [
            KEY_OVERHEAD + 1 + VERSION_OVERHEAD + 1,
            KEY_OVERHEAD + 1 + VERSION_OVERHEAD + 2,
            KEY_OVERHEAD + 2 + VERSION_OVERHEAD,
        ]
    );
    assert_eq!(mt.size(), per_cf.iter().sum::<usize>());
}

#[test]
fn empty_memtable_has_zero_size_and_is_empty_until_first_put() {
    let mt = Memtable::new();
    assert_eq!(mt.size(), 0);
    assert!(mt.is_empty());
    mt.delete(ColumnFamily::Lock, b"k", 1, b"");
    assert!(!mt.is_empty());
}

#[test]
fn tiny_versions_still_grow_the_size() {
    // A hot key rewritten with empty values must still fill the memtable, or the switch
    // threshold would never bound its memory.
    let mt = Memtable::new();
    for v in 1..=1000 {
        mt.put(ColumnFamily::Write, b"", v, b"", b"");
    }
    assert_eq!(mt.size(), KEY_OVERHEAD + 1000 * VERSION_OVERHEAD);
}
