//! L0 files: one table section per column family (WRITE, LOCK, EXTRA) back to back, so a
//! memtable flush produces a single object-store PUT.
//!
//! Format version 1:
//!
//! ```text
//! l0_file   := section{3} l0_footer
//! l0_footer := (offset:u64le len:u64le){3} cf_count:u32le (=3) format_version:u16le
//!              reserved:u16le crc32:u32le magic:u64le          (68 bytes)
//! ```
//!
//! A column family with no entries has `len = 0` and no section. Each section is a complete
//! table (see [`crate::footer`]); the crc covers every footer byte before it.

use std::sync::Arc;

use bytes::Bytes;

use crate::block_cache::BlockCache;
use crate::builder::BuiltTable;
use crate::error::{Corrupt, Error, Result};
use crate::table::Table;
use crate::varint;
use types::ColumnFamily;

pub const L0_MAGIC: u64 = 0x304c_5355_5441_5254; // "TRATUSL0" little-endian
pub const L0_FORMAT_VERSION: u16 = 1;
pub const L0_FOOTER_LEN: usize = 16 * ColumnFamily::COUNT + 4 + 2 + 2 + 4 + 8;

/// Concatenates per-CF sections into an L0 file. `None` (or an empty table) means the CF has
/// no entries.
///
/// The first non-empty section's buffer becomes the file's and the others are appended to it:
/// a flush's file is nearly all WRITE section, and copying it into a fresh buffer held two
/// copies of the table in memory, next to the frozen memtable, at every flush.
pub fn build_l0(sections: [Option<BuiltTable>; ColumnFamily::COUNT]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut handles = [(0u64, 0u64); ColumnFamily::COUNT];
    for (cf, section) in sections.into_iter().enumerate() {
        if let Some(t) = section
            && t.properties.entries > 0
        {
            debug_assert_eq!(t.spilled, 0, "a spilled section is written by its writer");
            handles[cf] = (out.len() as u64, t.data.len() as u64);
            if out.is_empty() {
                out = t.data;
            } else {
                out.extend_from_slice(&t.data);
            }
        }
    }
    out.extend_from_slice(&l0_footer(&handles));
    out
}

/// The footer of an L0 file whose sections sit at `handles` (offset, length; length 0 for a
/// column family without a section): what a writer streaming the sections appends after them.
pub fn l0_footer(handles: &[(u64, u64); ColumnFamily::COUNT]) -> Vec<u8> {
    let mut out = Vec::with_capacity(L0_FOOTER_LEN);
    for (off, len) in handles {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(&(ColumnFamily::COUNT as u32).to_le_bytes());
    out.extend_from_slice(&L0_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&L0_MAGIC.to_le_bytes());
    out
}

/// A readable L0 file: one optional table per column family.
#[derive(Clone, Debug)]
pub struct L0Table {
    file_id: u64,
    size: u64,
    sections: [Option<Table>; ColumnFamily::COUNT],
}

impl L0Table {
    pub fn open(file_id: u64, data: Bytes) -> Result<L0Table> {
        Self::open_with(file_id, data, None)
    }

    pub fn open_file(file_id: u64, path: &std::path::Path) -> Result<L0Table> {
        Self::open(file_id, crate::table::map_file(file_id, path)?)
    }

    pub fn open_with(
        file_id: u64,
        data: Bytes,
        cache: Option<Arc<dyn BlockCache>>,
    ) -> Result<L0Table> {
        let len = data.len();
        let footer_at = len.saturating_sub(L0_FOOTER_LEN);
        let corrupt = |what| Corrupt(what).at(file_id, footer_at as u64);
        if len < L0_FOOTER_LEN {
            return Err(corrupt("l0 file shorter than its footer"));
        }
        let f = &data[footer_at..];
        let mut pos = L0_FOOTER_LEN - 8;
        if varint::get_fixed_u64(f, &mut pos) != Some(L0_MAGIC) {
            return Err(corrupt("bad l0 magic"));
        }
        let mut pos = L0_FOOTER_LEN - 12;
        let crc = varint::get_fixed_u32(f, &mut pos)
            .ok_or(Corrupt("l0 crc"))
            .map_err(|c| c.at(file_id, footer_at as u64))?;
        if crc32fast::hash(&f[..L0_FOOTER_LEN - 12]) != crc {
            return Err(corrupt("l0 footer checksum mismatch"));
        }
        let mut pos = 0;
        let mut handles = [(0u64, 0u64); ColumnFamily::COUNT];
        for h in &mut handles {
            h.0 = varint::get_fixed_u64(f, &mut pos)
                .ok_or(Corrupt("l0 footer"))
                .map_err(|c| c.at(file_id, footer_at as u64))?;
            h.1 = varint::get_fixed_u64(f, &mut pos)
                .ok_or(Corrupt("l0 footer"))
                .map_err(|c| c.at(file_id, footer_at as u64))?;
        }
        let cf_count = varint::get_fixed_u32(f, &mut pos).unwrap_or(0);
        let version = u16::from_le_bytes([f[pos], f[pos + 1]]);
        if f[pos + 2] != 0 || f[pos + 3] != 0 {
            return Err(corrupt("l0 footer reserved bytes are not zero"));
        }
        if version != L0_FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                file_id,
                expected: L0_FORMAT_VERSION,
                found: version,
            });
        }
        if cf_count as usize != ColumnFamily::COUNT {
            return Err(corrupt("l0 column family count"));
        }
        // Sections are back to back, in CF order, ending at the footer.
        let mut next = 0u64;
        let mut sections: [Option<Table>; ColumnFamily::COUNT] = Default::default();
        for (cf, (off, slen)) in handles.into_iter().enumerate() {
            if slen == 0 {
                continue;
            }
            if off != next || off.checked_add(slen).is_none_or(|e| e > footer_at as u64) {
                return Err(corrupt("l0 section out of place"));
            }
            let section = data.slice(off as usize..(off + slen) as usize);
            sections[cf] = Some(Table::open_section(file_id, off, section, cache.clone())?);
            next = off + slen;
        }
        if next != footer_at as u64 {
            return Err(corrupt("l0 sections do not end at the footer"));
        }
        Ok(L0Table {
            file_id,
            size: len as u64,
            sections,
        })
    }

    pub fn file_id(&self) -> u64 {
        self.file_id
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The memory the open file holds of its own: its sections' ([`Table::memory_size`];
    /// each counts its own slice of a downloaded file, so together they count it once).
    pub fn memory_size(&self) -> u64 {
        self.sections().map(Table::memory_size).sum()
    }

    /// The column families' sections the file has, in column family order.
    pub fn sections(&self) -> impl Iterator<Item = &Table> {
        self.sections.iter().flatten()
    }

    /// Handles alive on this file (the most of any section; see [`Table::handle_count`]).
    pub fn handle_count(&self) -> usize {
        self.sections
            .iter()
            .flatten()
            .map(Table::handle_count)
            .max()
            .unwrap_or(1)
    }

    /// The table of column family `cf`, if it has entries.
    pub fn cf(&self, cf: ColumnFamily) -> Option<&Table> {
        self.sections[cf.index()].as_ref()
    }
}
