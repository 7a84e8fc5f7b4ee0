//! Paging: how a response that stopped early says what it covered, and how the client asks for
//! the rest. Both halves of that contract are pure functions of key ranges, here on the wire
//! where both ends use them: the coprocessor reports [`scanned_range`], a client continues
//! with [`remaining_ranges`].
//!
//! A page ends once the rows returned reach the request's `paging_size` (an aggregation: once
//! its groups do; see `cop::executors::hash_agg`), or once the encoded rows reach the
//! handler's byte limit, and only where the chain is resumable (the rows returned are exactly
//! the result of the keys scanned). The response's `range` is then the **scanned range**, the
//! span of keys this page covered:
//!
//! * ascending: `[start of the first range, last scanned key + 0x00)`;
//! * descending: `[last scanned key, end of the last range)` (an empty end = unbounded).
//!
//! The client continues with the request's ranges minus that span ([`remaining_ranges`]):
//! ascending, what lies at or after `range.end`; descending, what lies before `range.start`.
//! A response without `range` covered everything that was left: the region is done.

use crate::coprocessor::KeyRange;

/// The span covered by a scan whose first range (in scan order) is `first` and whose last
/// scanned key is `last_key`.
pub fn scanned_range(first: &KeyRange, last_key: &[u8], desc: bool) -> KeyRange {
    if desc {
        KeyRange::new(last_key, first.end.clone())
    } else {
        let mut end = Vec::with_capacity(last_key.len() + 1);
        end.extend_from_slice(last_key);
        end.push(0);
        KeyRange::new(first.start.clone(), end)
    }
}

/// The ranges the next page asks for: `original` (ascending, non-overlapping) minus the
/// `scanned` span a page reported. Ranges that end up empty are dropped; an empty result means
/// nothing is left.
pub fn remaining_ranges(original: &[KeyRange], scanned: &KeyRange, desc: bool) -> Vec<KeyRange> {
    let mut out = Vec::new();
    for r in original {
        if desc {
            // Keep the keys below scanned.start.
            let cut = scanned.start.as_slice();
            if r.start.as_slice() >= cut {
                continue;
            }
            let end = if r.end.is_empty() || r.end.as_slice() > cut {
                cut.to_vec()
            } else {
                r.end.clone()
            };
            out.push(KeyRange::new(r.start.clone(), end));
        } else {
            // Keep the keys at or after scanned.end (never empty when ascending).
            let cut = scanned.end.as_slice();
            if !r.end.is_empty() && r.end.as_slice() <= cut {
                continue;
            }
            let start = if r.start.as_slice() < cut {
                cut.to_vec()
            } else {
                r.start.clone()
            };
            out.push(KeyRange::new(start, r.end.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str, e: &str) -> KeyRange {
        KeyRange::new(s.as_bytes(), e.as_bytes())
    }

    #[test]
    fn ascending_remaining_starts_right_after_the_last_scanned_key() {
        let original = [r("a", "c"), r("d", "f"), r("g", "")];
        let scanned = scanned_range(&original[0], b"db", false);
        assert_eq!(scanned, KeyRange::new("a", b"db\0".to_vec()));
        assert_eq!(
            remaining_ranges(&original, &scanned, false),
            vec![KeyRange::new(b"db\0".to_vec(), "f"), r("g", "")]
        );
    }

    #[test]
    fn descending_remaining_ends_at_the_last_scanned_key() {
        let original = [r("a", "c"), r("d", "f"), r("g", "")];
        // Descending scans start with the last range.
        let scanned = scanned_range(&original[2], b"e", true);
        assert_eq!(scanned, r("e", ""));
        assert_eq!(
            remaining_ranges(&original, &scanned, true),
            vec![r("a", "c"), r("d", "e")]
        );
    }

    #[test]
    fn a_scan_that_covered_everything_leaves_nothing() {
        let original = [r("a", "c")];
        let asc = scanned_range(&original[0], b"bz", false);
        assert_eq!(
            remaining_ranges(&original, &asc, false),
            vec![KeyRange::new(b"bz\0".to_vec(), "c")]
        );
        let desc = scanned_range(&original[0], b"a", true);
        assert!(remaining_ranges(&original, &desc, true).is_empty());
    }
}
