//! Key filter for point gets: a cache-local Bloom filter (the layout of RocksDB's
//! FastLocalBloom). Each key touches one 64-byte line, so a negative lookup costs one cache miss
//! instead of one per probe.
//!
//! ```text
//! filter := kind:u8 (=1) probes:u8 lines:u32le bits:[u8; lines × 64]
//! ```
//!
//! Hash: xxh3-64 of the key. The upper 32 bits pick the line (multiply-shift range reduction);
//! the lower 32 bits, re-multiplied by the golden ratio before each probe, give 9-bit positions
//! inside the line. An empty filter (no lines) answers "absent" for every key.

use crate::error::Corrupt;

const KIND_LOCAL_BLOOM: u8 = 1;
const LINE_BYTES: usize = 64;
const LINE_BITS: u32 = 512;
const HEADER_LEN: usize = 6;

#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// Builds a filter over key hashes.
pub(crate) fn build(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    let total_bits = hashes.len() as u64 * u64::from(bits_per_key);
    let lines = if hashes.is_empty() || bits_per_key == 0 {
        0
    } else {
        total_bits.div_ceil(u64::from(LINE_BITS)).max(1) as u32
    };
    // About ln(2) × bits per key probes, rounded down (cache-local filters do better with a
    // slightly smaller count), within 1..=12.
    let probes = ((bits_per_key as f64 * 0.69) as u32).clamp(1, 12) as u8;
    let mut out = Vec::with_capacity(HEADER_LEN + lines as usize * LINE_BYTES);
    out.push(KIND_LOCAL_BLOOM);
    out.push(probes);
    out.extend_from_slice(&lines.to_le_bytes());
    out.resize(HEADER_LEN + lines as usize * LINE_BYTES, 0);
    if lines > 0 {
        let bits = &mut out[HEADER_LEN..];
        for &h in hashes {
            let line = line_of(h, lines);
            let line_bits = &mut bits[line * LINE_BYTES..(line + 1) * LINE_BYTES];
            let mut h2 = h as u32;
            for _ in 0..probes {
                h2 = h2.wrapping_mul(0x9e37_79b9);
                let bit = (h2 >> (32 - 9)) as usize;
                line_bits[bit / 8] |= 1 << (bit % 8);
            }
        }
    }
    out
}

#[inline]
fn line_of(h: u64, lines: u32) -> usize {
    (((h >> 32) * u64::from(lines)) >> 32) as usize
}

/// A decoded filter borrowing the table's bytes.
#[derive(Clone, Debug)]
pub struct Filter {
    data: bytes::Bytes,
    probes: u32,
    lines: u32,
}

impl Filter {
    pub fn decode(data: bytes::Bytes) -> Result<Filter, Corrupt> {
        if data.len() < HEADER_LEN {
            return Err(Corrupt("filter shorter than its header"));
        }
        if data[0] != KIND_LOCAL_BLOOM {
            return Err(Corrupt("unknown filter kind"));
        }
        let probes = u32::from(data[1]);
        if !(1..=30).contains(&probes) {
            return Err(Corrupt("filter probe count out of range"));
        }
        let lines = u32::from_le_bytes([data[2], data[3], data[4], data[5]]);
        if (data.len() - HEADER_LEN) as u64 != u64::from(lines) * LINE_BYTES as u64 {
            return Err(Corrupt("filter length does not match its line count"));
        }
        Ok(Filter {
            data,
            probes,
            lines,
        })
    }

    /// False means the key is certainly absent.
    #[inline]
    pub fn may_contain_hash(&self, h: u64) -> bool {
        if self.lines == 0 {
            return false;
        }
        let line = line_of(h, self.lines);
        let start = HEADER_LEN + line * LINE_BYTES;
        let line_bits = &self.data[start..start + LINE_BYTES];
        let mut h2 = h as u32;
        for _ in 0..self.probes {
            h2 = h2.wrapping_mul(0x9e37_79b9);
            let bit = (h2 >> (32 - 9)) as usize;
            if line_bits[bit / 8] & (1 << (bit % 8)) == 0 {
                return false;
            }
        }
        true
    }

    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hash(hash_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_has_no_false_negatives_and_few_false_positives() {
        let keys: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| format!("key{i:08}").into_bytes())
            .collect();
        let hashes: Vec<u64> = keys.iter().map(|k| hash_key(k)).collect();
        let f = Filter::decode(bytes::Bytes::from(build(&hashes, 10))).unwrap();
        assert!(keys.iter().all(|k| f.may_contain(k)));
        let fp = (0..20_000u32)
            .filter(|i| f.may_contain(format!("other{i:08}").as_bytes()))
            .count();
        // 10 bits/key gives about 1%; allow 2.5% for the cache-local layout.
        assert!(fp < 500, "false positives {fp} of 20000");
    }

    #[test]
    fn empty_filter_rejects_everything() {
        let f = Filter::decode(bytes::Bytes::from(build(&[], 10))).unwrap();
        assert!(!f.may_contain(b"a"));
    }
}
