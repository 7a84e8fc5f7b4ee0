//! Builds one table section from entries in (key asc, version desc) order.
//!
//! The newest version of each key goes into the main data blocks; older versions go into the
//! old-version blocks, written after all main blocks, and the main entry records the index of
//! the old-version block that holds the key's next version. A scan at a recent timestamp
//! therefore reads only main blocks.
//!
//! The section is produced in memory, unless its writer hands the finished main blocks on as
//! it goes ([`TableBuilder::spill`]): a flush streams its L0 file to the object store's local
//! file this way instead of holding a whole memtable's worth of table next to the memtable.
//! Old-version blocks, the indexes and the filter stay in memory until [`TableBuilder::finish`]
//! (they follow every main block in the layout).

use crate::block::BlockBuilder;
use crate::block_frame::FrameWriter;
use crate::error::{Error, OutOfOrder, Result};
use crate::filter;
use crate::footer::{CHECKSUM_CRC32, Footer};
use crate::index::{self, BlockHandle};
use crate::options::{BuilderOptions, Compression, MAX_ENTRY_LEN};
use crate::properties::Properties;

/// A finished table section and its properties.
#[derive(Debug, Clone)]
pub struct BuiltTable {
    /// The section's bytes after the first `spilled`: the whole section when the writer never
    /// spilled.
    pub data: Vec<u8>,
    /// Bytes of the section already handed out by [`TableBuilder::spill`], before `data`.
    pub spilled: u64,
    pub properties: Properties,
}

impl BuiltTable {
    /// Length of the whole section, spilled bytes included.
    pub fn len(&self) -> u64 {
        self.spilled + self.data.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The newest version of the current key, held back until we know whether older ones follow.
#[derive(Default)]
struct Pending {
    key: Vec<u8>,
    version: u64,
    tombstone: bool,
    user_meta: Vec<u8>,
    value: Vec<u8>,
    old_block: Option<u32>,
}

pub struct TableBuilder {
    opts: BuilderOptions,
    frames: FrameWriter,
    out: Vec<u8>,
    old_out: Vec<u8>,
    block: BlockBuilder,
    old_block: BlockBuilder,
    index: Vec<(Vec<u8>, BlockHandle)>,
    old_index: Vec<(Vec<u8>, BlockHandle)>,
    hashes: Vec<u64>,
    props: Properties,
    pending: Pending,
    has_pending: bool,
    /// Version of the last entry added, for the order check.
    last_version: u64,
    scratch: Vec<u8>,
    /// Bytes of `out` already handed to a writer by [`TableBuilder::spill`]: `out` holds the
    /// section from this offset on.
    spilled: u64,
}

impl TableBuilder {
    pub fn new(opts: BuilderOptions) -> Result<Self> {
        opts.validate()?;
        let frames = FrameWriter::new(opts.compression).map_err(|e| Error::InvalidOption {
            what: format!("zstd context: {e}"),
        })?;
        let (compression, compression_level) = match opts.compression {
            Compression::None => (0, 0),
            Compression::Zstd(l) => (1, l),
        };
        let format = opts.format_version;
        Ok(TableBuilder {
            opts,
            frames,
            out: Vec::new(),
            old_out: Vec::new(),
            block: BlockBuilder::new(format),
            old_block: BlockBuilder::new(format),
            index: Vec::new(),
            old_index: Vec::new(),
            hashes: Vec::new(),
            props: Properties {
                compression,
                compression_level,
                ..Properties::default()
            },
            pending: Pending::default(),
            has_pending: false,
            last_version: 0,
            scratch: Vec::new(),
            spilled: 0,
        })
    }

    /// Offset in the section of the next byte written to `out`.
    fn pos(&self) -> u64 {
        self.spilled + self.out.len() as u64
    }

    /// Bytes of finished main blocks not spilled yet.
    pub fn buffered(&self) -> usize {
        self.out.len()
    }

    /// Hands the finished main blocks to `w` (which must receive every spilled byte of the
    /// section in order, then [`BuiltTable::data`]) and forgets them; offsets stay those of the
    /// whole section. Call it between adds once [`TableBuilder::buffered`] is large enough.
    pub fn spill(&mut self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        w.write_all(&self.out)?;
        self.spilled += self.out.len() as u64;
        self.out.clear();
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        !self.has_pending
    }

    /// Bytes written so far plus the blocks in progress: for cutting compaction outputs.
    pub fn estimated_size(&self) -> usize {
        self.pos() as usize
            + self.old_out.len()
            + self.block.estimated_size()
            + self.old_block.estimated_size()
            + self.pending.key.len()
            + self.pending.user_meta.len()
            + self.pending.value.len()
    }

    /// Adds a version of `key`. Keys must ascend; versions of one key must strictly descend.
    pub fn add(
        &mut self,
        key: &[u8],
        version: u64,
        user_meta: &[u8],
        value: &[u8],
        tombstone: bool,
    ) -> Result<()> {
        let len = key.len() + user_meta.len() + value.len();
        if len > MAX_ENTRY_LEN {
            return Err(Error::EntryTooLarge {
                len,
                max: MAX_ENTRY_LEN,
            });
        }
        if self.has_pending {
            let ord = key.cmp(&self.pending.key);
            let last_version = self.last_version;
            if ord == std::cmp::Ordering::Less
                || (ord == std::cmp::Ordering::Equal && version >= last_version)
            {
                return Err(Error::OutOfOrder(Box::new(OutOfOrder {
                    previous: self.pending.key.clone(),
                    key: key.to_vec(),
                    previous_version: last_version,
                    version,
                })));
            }
            if ord == std::cmp::Ordering::Equal {
                let b = self.add_old(key, version, tombstone, user_meta, value);
                self.pending.old_block.get_or_insert(b);
                self.last_version = version;
                self.account(key, version, user_meta, value, tombstone, true);
                return Ok(());
            }
            self.flush_pending();
        }
        let p = &mut self.pending;
        p.key.clear();
        p.key.extend_from_slice(key);
        p.version = version;
        p.tombstone = tombstone;
        p.user_meta.clear();
        p.user_meta.extend_from_slice(user_meta);
        p.value.clear();
        p.value.extend_from_slice(value);
        p.old_block = None;
        self.has_pending = true;
        self.last_version = version;
        if self.props.entries == 0 {
            self.props.smallest = key.to_vec();
        }
        self.props.entries += 1;
        self.hashes.push(filter::hash_key(key));
        self.account(key, version, user_meta, value, tombstone, false);
        Ok(())
    }

    fn account(
        &mut self,
        key: &[u8],
        version: u64,
        meta: &[u8],
        value: &[u8],
        tomb: bool,
        old: bool,
    ) {
        let p = &mut self.props;
        if old {
            p.old_entries += 1;
        }
        if tomb {
            p.tombstones += 1;
        }
        p.max_ts = p.max_ts.max(version);
        p.min_ts = p.min_ts.min(version);
        p.key_bytes += key.len() as u64;
        p.value_bytes += (meta.len() + value.len()) as u64;
    }

    /// Writes the pending newest version into the main block, cutting the block first if full.
    fn flush_pending(&mut self) {
        if self.block.estimated_size() >= self.opts.block_size {
            self.finish_main_block();
        }
        let p = &self.pending;
        self.block.add(
            &p.key,
            p.version,
            p.tombstone,
            p.old_block,
            &p.user_meta,
            &p.value,
        );
        self.props.biggest.clear();
        self.props.biggest.extend_from_slice(&p.key);
        self.has_pending = false;
    }

    /// Adds an old version; returns the index of the old-version block it landed in.
    fn add_old(&mut self, key: &[u8], version: u64, tomb: bool, meta: &[u8], value: &[u8]) -> u32 {
        if self.old_block.estimated_size() >= self.opts.block_size {
            self.finish_old_block();
        }
        self.old_block.add(key, version, tomb, None, meta, value);
        self.old_index.len() as u32
    }

    fn finish_main_block(&mut self) {
        if self.block.is_empty() {
            return;
        }
        let first_key = self.block.first_key().to_vec();
        self.block.finish_into(&mut self.scratch);
        let offset = self.pos();
        let len = self.frames.write(&self.scratch, &mut self.out, true) as u32;
        self.index.push((first_key, BlockHandle { offset, len }));
    }

    fn finish_old_block(&mut self) {
        if self.old_block.is_empty() {
            return;
        }
        let first_key = self.old_block.first_key().to_vec();
        self.old_block.finish_into(&mut self.scratch);
        // Offset relative to the old-version region; shifted in `finish`.
        let offset = self.old_out.len() as u64;
        let len = self.frames.write(&self.scratch, &mut self.old_out, true) as u32;
        self.old_index
            .push((first_key, BlockHandle { offset, len }));
    }

    /// Finishes the section: blocks, indexes, filter, properties, footer.
    pub fn finish(mut self) -> BuiltTable {
        if self.has_pending {
            self.flush_pending();
        }
        self.finish_main_block();
        self.finish_old_block();
        let old_blocks_offset = self.pos();
        self.out.extend_from_slice(&self.old_out);
        for (_, h) in &mut self.old_index {
            h.offset += old_blocks_offset;
        }
        self.props.block_count = self.index.len() as u32;
        self.props.old_block_count = self.old_index.len() as u32;
        let index = self.write_meta(&index::encode(&self.index));
        let old_index = self.write_meta(&index::encode(&self.old_index));
        let filter_bytes = filter::build(&self.hashes, self.opts.filter_bits_per_key);
        let filter = self.write_meta(&filter_bytes);
        let props_bytes = self.props.encode();
        let properties = self.write_meta(&props_bytes);
        let footer = Footer {
            old_blocks_offset,
            index,
            old_index,
            filter,
            properties,
            compression: self.props.compression,
            checksum: CHECKSUM_CRC32,
            format_version: self.opts.format_version,
        };
        self.out.extend_from_slice(&footer.encode());
        BuiltTable {
            data: self.out,
            spilled: self.spilled,
            properties: self.props,
        }
    }

    fn write_meta(&mut self, raw: &[u8]) -> BlockHandle {
        let offset = self.pos();
        let len = self.frames.write(raw, &mut self.out, false) as u32;
        BlockHandle { offset, len }
    }
}
