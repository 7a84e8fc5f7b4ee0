//! Which shard of the engine owns a key: a sorted copy of the engine's shard ranges, refreshed
//! from `Engine::shard_ids` / `shard_info` when a key falls outside every known range (a split
//! or a new shard since the last refresh).

use kvengine::Engine;
use parking_lot::RwLock;

use super::error::{Result, TxnError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRange {
    pub id: u64,
    pub start: Vec<u8>,
    /// Exclusive; empty = unbounded.
    pub end: Vec<u8>,
}

impl ShardRange {
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && (self.end.is_empty() || key < self.end.as_slice())
    }

    /// Whether `[start, end)` (empty end = unbounded) overlaps this shard.
    pub fn overlaps(&self, start: &[u8], end: &[u8]) -> bool {
        (end.is_empty() || self.start.as_slice() < end)
            && (self.end.is_empty() || start < self.end.as_slice())
    }
}

#[derive(Debug, Default)]
pub struct ShardMap {
    /// Sorted by start; ranges do not overlap.
    ranges: RwLock<Vec<ShardRange>>,
}

impl ShardMap {
    /// Reloads the ranges from the engine.
    pub fn refresh(&self, engine: &Engine) -> Result<()> {
        let mut ranges = Vec::new();
        for id in engine.shard_ids() {
            match engine.shard_info(id) {
                Ok(info) => ranges.push(ShardRange {
                    id,
                    start: info.start.to_vec(),
                    end: info.end.to_vec(),
                }),
                // Retired by a split between the two calls: its children are listed.
                Err(kvengine::Error::ShardNotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        ranges.sort_by(|a, b| a.start.cmp(&b.start));
        *self.ranges.write() = ranges;
        Ok(())
    }

    fn lookup(&self, key: &[u8]) -> Option<u64> {
        let ranges = self.ranges.read();
        let i = ranges.partition_point(|r| r.start.as_slice() <= key);
        let r = ranges.get(i.checked_sub(1)?)?;
        r.contains(key).then_some(r.id)
    }

    /// The shard owning `key`, refreshing once on a miss.
    pub fn route(&self, engine: &Engine, key: &[u8]) -> Result<u64> {
        if let Some(id) = self.lookup(key) {
            return Ok(id);
        }
        self.refresh(engine)?;
        self.lookup(key)
            .ok_or_else(|| TxnError::KeyOutsideShards { key: key.to_vec() })
    }

    /// Refreshes if the engine's shard ids differ from the known ones (a shard created or
    /// split since the last refresh): range operations must not miss a shard.
    pub fn refresh_if_changed(&self, engine: &Engine) -> Result<()> {
        let ids = engine.shard_ids();
        let known: Vec<u64> = {
            let mut v: Vec<u64> = self.ranges.read().iter().map(|r| r.id).collect();
            v.sort_unstable();
            v
        };
        if ids != known {
            self.refresh(engine)?;
        }
        Ok(())
    }

    /// The shards overlapping `[start, end)` (empty end = unbounded), in key order.
    pub fn overlapping(&self, start: &[u8], end: &[u8]) -> Vec<ShardRange> {
        self.ranges
            .read()
            .iter()
            .filter(|r| r.overlaps(start, end))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_overlap_treats_empty_end_as_unbounded() {
        let r = ShardRange {
            id: 1,
            start: b"m".to_vec(),
            end: Vec::new(),
        };
        assert!(r.contains(b"zzz"));
        assert!(!r.contains(b"a"));
        assert!(r.overlaps(b"a", b""));
        assert!(r.overlaps(b"a", b"n"));
        assert!(!r.overlaps(b"a", b"m"));
    }
}
