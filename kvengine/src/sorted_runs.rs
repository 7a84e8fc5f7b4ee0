//! A compaction's inputs grouped into sorted runs, each read as one iterator.
//!
//! The tables of one level hold disjoint key ranges in key order, so a merge needs only one
//! cursor for the whole level: a key is in at most one of its tables. Merging every input
//! table as its own cursor made each key cost a comparison per table (a full compaction whose
//! top is a whole level of hundreds of files), and kept every input's pages touched at once.
//!
//! [`group`] cuts the inputs, in the order given, into runs of consecutive tables whose key
//! ranges (their properties' smallest and biggest keys) follow each other strictly: a level's
//! tables become one run, each L0 section its own. Runs keep the inputs' order, so the versions
//! of a key are gathered from the newer inputs first, as from the tables one by one.
//! [`RunIter`] walks one run, moving to the next table when one is exhausted, and drops the
//! finished table's pages from the process' resident set behind it, and the pages of the table
//! it is on when dropped (`Table::release_pages`:
//! the merge reads each input once, and a mapped input would otherwise stay resident until
//! the inputs are retired).

use sst::table_iter::TableIter;
use sst::{Table, Version};

use crate::error::Result;

/// Cuts `inputs` into runs of consecutive tables whose key ranges follow each other (module
/// docs), in the inputs' order.
pub(crate) fn group(inputs: &[Table]) -> Vec<Vec<Table>> {
    let mut runs: Vec<Vec<Table>> = Vec::new();
    for t in inputs {
        let follows = runs
            .last()
            .and_then(|run| run.last())
            .is_some_and(|prev| prev.properties().biggest < t.properties().smallest);
        match runs.last_mut() {
            Some(run) if follows => run.push(t.clone()),
            _ => runs.push(vec![t.clone()]),
        }
    }
    runs
}

/// A cursor over one sorted run, from a start key on.
pub(crate) struct RunIter {
    tables: Vec<Table>,
    /// The table `it` reads.
    at: usize,
    it: Option<TableIter>,
    start: Vec<u8>,
}

impl RunIter {
    /// A cursor over `tables` (one run of [`group`]) at the first key at or after `start`.
    pub(crate) fn new(tables: Vec<Table>, start: &[u8]) -> Result<RunIter> {
        let mut r = RunIter {
            tables,
            at: 0,
            it: None,
            start: start.to_vec(),
        };
        // Tables wholly below `start` are skipped without being read.
        r.at = r
            .tables
            .partition_point(|t| t.properties().biggest.as_slice() < start);
        r.open_from_here()?;
        Ok(r)
    }

    /// Positions on the first key at or after `start` in table `at` or the ones after it.
    fn open_from_here(&mut self) -> Result<()> {
        self.it = None;
        while let Some(t) = self.tables.get(self.at) {
            let mut it = t.iter(u64::MAX);
            it.seek(&self.start)?;
            if it.valid() {
                self.it = Some(it);
                return Ok(());
            }
            t.release_pages();
            self.at += 1;
        }
        Ok(())
    }

    pub(crate) fn valid(&self) -> bool {
        self.it.as_ref().is_some_and(TableIter::valid)
    }

    /// The current key; empty when not valid.
    pub(crate) fn key(&self) -> &[u8] {
        match &self.it {
            Some(it) if it.valid() => it.key(),
            _ => &[],
        }
    }

    /// Every version of the current key in its table.
    pub(crate) fn all_versions(&self) -> Result<Vec<Version>> {
        match &self.it {
            Some(it) => Ok(it.all_versions()?),
            None => Ok(Vec::new()),
        }
    }

    /// Moves to the next key of the run, into the next table when this one is done.
    pub(crate) fn next(&mut self) -> Result<()> {
        let Some(it) = &mut self.it else {
            return Ok(());
        };
        it.next()?;
        if !it.valid() {
            if let Some(t) = self.tables.get(self.at) {
                t.release_pages();
            }
            self.at += 1;
            self.open_from_here()?;
        }
        Ok(())
    }
}

/// A run left before its end (the merge's range ended inside a table, or the merge failed)
/// drops the pages it read of the table it was on, as it does for each table it finishes.
impl Drop for RunIter {
    fn drop(&mut self) {
        if let Some(t) = self.tables.get(self.at) {
            t.release_pages();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sst::{BuilderOptions, TableBuilder};

    /// A table of `keys`, each with one version.
    fn table(id: u64, keys: &[&str]) -> Table {
        let mut b = TableBuilder::new(BuilderOptions::default()).unwrap();
        for k in keys {
            b.add(k.as_bytes(), 5, b"", b"v", false).unwrap();
        }
        Table::open(id, bytes::Bytes::from(b.finish().data)).unwrap()
    }

    fn walk(run: Vec<Table>, start: &str) -> Vec<String> {
        let mut it = RunIter::new(run, start.as_bytes()).unwrap();
        let mut out = Vec::new();
        while it.valid() {
            out.push(String::from_utf8(it.key().to_vec()).unwrap());
            it.next().unwrap();
        }
        out
    }

    #[test]
    fn a_level_is_one_run_and_overlapping_tables_start_new_ones() {
        let level = [
            table(1, &["a", "b"]),
            table(2, &["c", "d"]),
            table(3, &["e"]),
        ];
        assert_eq!(group(&level).len(), 1);
        // L0 sections overlap each other and the level: one run each, in the inputs' order.
        let mut inputs = vec![table(4, &["b", "x"]), table(5, &["a", "c"])];
        inputs.extend(level.iter().cloned());
        let runs = group(&inputs);
        let ids: Vec<Vec<u64>> = runs
            .iter()
            .map(|r| r.iter().map(Table::file_id).collect())
            .collect();
        assert_eq!(ids, vec![vec![4], vec![5], vec![1, 2, 3]]);
        // A table whose range touches the previous one's last key is not in its run.
        let touching = [table(6, &["a", "c"]), table(7, &["c", "d"])];
        assert_eq!(group(&touching).len(), 2);
    }

    #[test]
    fn a_run_walks_its_tables_in_order_from_the_start_key() {
        let run = vec![
            table(1, &["a", "b"]),
            table(2, &["d", "e"]),
            table(3, &["g"]),
        ];
        assert_eq!(walk(run.clone(), ""), ["a", "b", "d", "e", "g"]);
        assert_eq!(walk(run.clone(), "b"), ["b", "d", "e", "g"]);
        assert_eq!(walk(run.clone(), "c"), ["d", "e", "g"]);
        assert_eq!(walk(run.clone(), "f"), ["g"]);
        assert!(walk(run, "h").is_empty());
    }
}
