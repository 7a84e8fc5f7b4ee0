//! Which server owns which key: the regions every server reports at `GET /regions`, cached by
//! start key, each with its server's address and zone.
//!
//! Servers own disjoint parts of the key space (a region never moves between servers; a split
//! replaces one region by two on the same server). So on a region error (epoch changed, region
//! split, key not in region) the client reloads the regions of the server that answered it and
//! replaces everything that server held: the children of a split arrive together. Where two
//! servers report overlapping regions, the last loaded wins.

use std::collections::BTreeMap;

use parking_lot::RwLock;
use types::{RegionId, Zone};
use wire::coprocessor::KeyRange;
use wire::paths;
use wire::region::{Region, RegionsResponse};

use crate::error::{Error, Result};
use crate::transport::Transport;

/// A region and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedRegion {
    pub region: Region,
    /// The owning server's base URL (`http://host:port`).
    pub server: String,
    /// The owning server's zone, if it has one.
    pub zone: Option<Zone>,
}

impl CachedRegion {
    pub fn id(&self) -> RegionId {
        self.region.region_id()
    }

    fn contains(&self, key: &[u8]) -> bool {
        self.region.start.as_slice() <= key
            && (self.region.end.is_empty() || key < self.region.end.as_slice())
    }
}

/// The ranges of a request that fall in one region, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRanges {
    pub region: CachedRegion,
    pub ranges: Vec<KeyRange>,
}

/// Regions by start key.
#[derive(Debug, Default)]
pub struct RegionCache {
    servers: Vec<String>,
    by_start: RwLock<BTreeMap<Vec<u8>, CachedRegion>>,
}

impl RegionCache {
    /// An empty cache for `servers` (base URLs); [`RegionCache::load_all`] fills it.
    pub fn new(servers: Vec<String>) -> RegionCache {
        RegionCache {
            servers,
            by_start: RwLock::new(BTreeMap::new()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_start.read().is_empty()
    }

    /// Every cached region, by start key.
    pub fn regions(&self) -> Vec<CachedRegion> {
        self.by_start.read().values().cloned().collect()
    }

    /// Loads the regions of every server.
    pub async fn load_all(&self, transport: &Transport) -> Result<()> {
        for server in self.servers.clone() {
            self.reload_server(transport, &server).await?;
        }
        Ok(())
    }

    /// Replaces the regions of `server` with what it reports now.
    pub async fn reload_server(&self, transport: &Transport, server: &str) -> Result<()> {
        let resp: RegionsResponse = transport
            .get(server, paths::REGIONS, "regions response")
            .await?;
        self.replace_server(server, resp.zone(), resp.regions);
        Ok(())
    }

    /// Drops every region of `server`, then inserts `regions` (replacing overlapping ones).
    pub fn replace_server(&self, server: &str, zone: Option<Zone>, regions: Vec<Region>) {
        let mut map = self.by_start.write();
        map.retain(|_, r| r.server != server);
        for region in regions {
            let overlapping: Vec<Vec<u8>> = map
                .values()
                .filter(|r| overlaps(&r.region, &region))
                .map(|r| r.region.start.clone())
                .collect();
            for start in overlapping {
                map.remove(&start);
            }
            map.insert(
                region.start.clone(),
                CachedRegion {
                    region,
                    server: server.to_string(),
                    zone: zone.clone(),
                },
            );
        }
    }

    /// Forgets region `id` (its server is reloaded by the caller).
    pub fn invalidate(&self, id: RegionId) {
        self.by_start.write().retain(|_, r| r.id() != id);
    }

    /// The region holding `key`.
    pub fn lookup(&self, key: &[u8]) -> Option<CachedRegion> {
        let map = self.by_start.read();
        map.range(..=key.to_vec())
            .next_back()
            .map(|(_, r)| r)
            .filter(|r| r.contains(key))
            .cloned()
    }

    /// `ranges` (ascending, non-overlapping) cut at region boundaries, grouped by region in
    /// key order.
    pub fn split_ranges(&self, ranges: &[KeyRange]) -> Result<Vec<RegionRanges>> {
        split_by_regions(&self.by_start.read(), ranges)
    }
}

fn overlaps(a: &Region, b: &Region) -> bool {
    let a_before_b_ends = b.end.is_empty() || a.start < b.end;
    let b_before_a_ends = a.end.is_empty() || b.start < a.end;
    a_before_b_ends && b_before_a_ends
}

/// See [`RegionCache::split_ranges`].
pub fn split_by_regions(
    map: &BTreeMap<Vec<u8>, CachedRegion>,
    ranges: &[KeyRange],
) -> Result<Vec<RegionRanges>> {
    let mut out: Vec<RegionRanges> = Vec::new();
    for range in ranges {
        let mut start = range.start.clone();
        loop {
            let region = map
                .range(..=start.clone())
                .next_back()
                .map(|(_, r)| r)
                .filter(|r| r.contains(&start))
                .ok_or_else(|| Error::NoRegion { key: start.clone() })?;
            let region_end = &region.region.end;
            // The piece ends at the range's end or the region's, whichever comes first.
            let range_ends_inside = !range.end.is_empty()
                && (region_end.is_empty() || range.end.as_slice() <= region_end.as_slice());
            let end = if range_ends_inside {
                range.end.clone()
            } else {
                region_end.clone()
            };
            let piece = KeyRange::new(start.clone(), end.clone());
            match out.last_mut() {
                Some(last) if last.region.region.id == region.region.id => last.ranges.push(piece),
                _ => out.push(RegionRanges {
                    region: region.clone(),
                    ranges: vec![piece],
                }),
            }
            if range_ends_inside || end.is_empty() {
                break;
            }
            start = end;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(id: u64, start: &str, end: &str) -> Region {
        Region {
            id,
            ver: 1,
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            ..Region::default()
        }
    }

    fn cache() -> RegionCache {
        let c = RegionCache::new(vec!["http://s1".into(), "http://s2".into()]);
        c.replace_server(
            "http://s1",
            Zone::label("a"),
            vec![region(1, "", "c"), region(2, "c", "f")],
        );
        c.replace_server("http://s2", None, vec![region(3, "f", "")]);
        c
    }

    fn r(s: &str, e: &str) -> KeyRange {
        KeyRange::new(s.as_bytes(), e.as_bytes())
    }

    #[test]
    fn lookup_finds_the_region_holding_a_key() {
        let c = cache();
        assert_eq!(c.lookup(b"").unwrap().id(), RegionId(1));
        assert_eq!(c.lookup(b"c").unwrap().id(), RegionId(2));
        assert_eq!(c.lookup(b"ez").unwrap().id(), RegionId(2));
        let last = c.lookup(b"zzz").unwrap();
        assert_eq!(
            (last.id(), last.server.as_str()),
            (RegionId(3), "http://s2")
        );
        assert_eq!(c.lookup(b"a").unwrap().zone, Zone::label("a"));
    }

    #[test]
    fn ranges_are_cut_at_region_boundaries() {
        let c = cache();
        let split = c
            .split_ranges(&[r("a", "b"), r("bb", "g"), r("h", "")])
            .unwrap();
        let got: Vec<(u64, Vec<KeyRange>)> = split
            .into_iter()
            .map(|s| (s.region.id().get(), s.ranges))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, vec![r("a", "b"), r("bb", "c")]),
                (2, vec![r("c", "f")]),
                (3, vec![r("f", "g"), r("h", "")]),
            ]
        );
    }

    #[test]
    fn reloading_a_server_replaces_its_regions_only() {
        let c = cache();
        c.replace_server(
            "http://s1",
            Zone::label("a"),
            vec![region(1, "", "b"), region(4, "b", "c"), region(2, "c", "f")],
        );
        let ids: Vec<u64> = c.regions().iter().map(|r| r.id().get()).collect();
        assert_eq!(ids, vec![1, 4, 2, 3]);
        c.invalidate(RegionId(4));
        assert!(c.lookup(b"bb").is_none());
        assert!(matches!(
            c.split_ranges(&[r("a", "d")]),
            Err(Error::NoRegion { key }) if key == b"b"
        ));
    }
}
