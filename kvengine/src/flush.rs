//! Building an L0 file from a frozen memtable: one table section per column family.
//!
//! WRITE and EXTRA keep every version (the GC of old versions is compaction's job); LOCK keeps
//! only each key's newest record, tombstone or not (a tombstone must still hide a lock in an
//! older L0 file).

use memtable::{ColumnFamily, Memtable};
use sst::{BuilderOptions, BuiltTable, TableBuilder};

use crate::error::Result;

/// An encoded L0 file and its key bounds.
pub struct BuiltL0 {
    pub data: Vec<u8>,
    pub smallest: Vec<u8>,
    pub biggest: Vec<u8>,
}

/// Returns `None` when the memtable holds nothing.
pub fn build_l0(mem: &Memtable, opts: &BuilderOptions) -> Result<Option<BuiltL0>> {
    let mut sections: [Option<BuiltTable>; ColumnFamily::COUNT] = Default::default();
    let mut smallest: Option<Vec<u8>> = None;
    let mut biggest: Option<Vec<u8>> = None;
    for cf in ColumnFamily::ALL {
        let table = mem.cf(cf);
        if table.is_empty() {
            continue;
        }
        let mut b = TableBuilder::new(opts.clone())?;
        for kv in table.iter_all() {
            for v in kv.versions() {
                b.add(
                    kv.key(),
                    v.version(),
                    v.user_meta(),
                    v.value(),
                    v.is_tombstone(),
                )?;
                if cf == ColumnFamily::Lock {
                    break;
                }
            }
        }
        if b.is_empty() {
            continue;
        }
        let built = b.finish();
        let p = &built.properties;
        if smallest.as_ref().is_none_or(|s| p.smallest < *s) {
            smallest = Some(p.smallest.clone());
        }
        if biggest.as_ref().is_none_or(|s| p.biggest > *s) {
            biggest = Some(p.biggest.clone());
        }
        sections[cf.index()] = Some(built);
    }
    let (Some(smallest), Some(biggest)) = (smallest, biggest) else {
        return Ok(None);
    };
    Ok(Some(BuiltL0 {
        data: sst::build_l0(sections),
        smallest,
        biggest,
    }))
}
