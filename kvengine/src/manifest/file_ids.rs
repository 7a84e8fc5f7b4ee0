//! The persistent file-id allocator: ids that are unique across the cluster and never reused
//! on this node, even across crashes.
//!
//! An id is `node_id << 48 | counter`. The counter's high-water mark is persisted *ahead* of
//! use, in batches: before handing out counter `c`, the file `NEXT_FILE_ID` durably says that
//! every counter below some `limit > c` may be in use. After a restart (clean or not) counting
//! resumes at the persisted limit, so ids are strictly increasing and never repeat; a crash
//! wastes at most one batch of counters.
//!
//! # Layout of `NEXT_FILE_ID` (format version 1)
//!
//! ```text
//! magic "SFID"  format_version:u16le (= 1)  reserved:u16le (= 0)  limit:u64le  crc32:u32le
//! ```
//!
//! 20 bytes; `crc32` covers the 16 bytes before it. Written with
//! [`crate::durable_file::write_atomically`], so never torn; a bad checksum is corruption.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use types::FileId;

use crate::durable_file::write_atomically;
use crate::error::{Error, Result};

/// The allocator's file name in its directory.
pub const NEXT_FILE_ID_FILE_NAME: &str = "NEXT_FILE_ID";

/// Counters reserved by one write of the file.
pub const ID_BATCH: u64 = 1024;

/// Bits of an id that hold the counter; the node id sits above them.
pub const COUNTER_BITS: u32 = 48;

const MAGIC: [u8; 4] = *b"SFID";
const FORMAT_VERSION: u16 = 1;
const FILE_LEN: usize = 20;

/// First counter value handed out on a fresh node: id 0 is never used.
const FIRST_COUNTER: u64 = 1;

#[derive(Debug)]
struct Counter {
    /// The next counter to hand out.
    next: u64,
    /// Every counter below this may have been handed out (it is persisted).
    limit: u64,
}

/// Hands out file ids `node_id << 48 | counter`, strictly increasing, never reused.
#[derive(Debug)]
pub struct IdAllocator {
    path: PathBuf,
    node_id: u16,
    counter: Mutex<Counter>,
}

impl IdAllocator {
    /// Opens (or creates) `dir/NEXT_FILE_ID`. Nothing is written until the first id is needed.
    pub fn open(dir: &Path, node_id: u16) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(Error::io("create dir", dir))?;
        let path = dir.join(NEXT_FILE_ID_FILE_NAME);
        let limit = match std::fs::read(&path) {
            Ok(data) => decode(&data).map_err(|detail| Error::Corruption {
                what: "file id allocator",
                detail,
                path: path.clone(),
                offset: 0,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FIRST_COUNTER,
            Err(source) => {
                return Err(Error::Io {
                    op: "read",
                    path,
                    source,
                });
            }
        };
        Ok(Self {
            path,
            node_id,
            counter: Mutex::new(Counter { next: limit, limit }),
        })
    }

    /// The next id. Writes the file (durably) once per [`ID_BATCH`] ids.
    pub fn next(&self) -> Result<FileId> {
        let mut counter = self.counter.lock();
        if counter.next >= counter.limit {
            let limit = counter
                .limit
                .saturating_add(ID_BATCH)
                .min(1 << COUNTER_BITS);
            if counter.next >= limit {
                return Err(Error::Config {
                    what: format!(
                        "file id counter exhausted node_id={} counter={}",
                        self.node_id, counter.next
                    ),
                });
            }
            write_atomically(&self.path, &encode(limit))?;
            counter.limit = limit;
        }
        let id = (u64::from(self.node_id) << COUNTER_BITS) | counter.next;
        counter.next += 1;
        Ok(FileId(id))
    }

    /// The node id in the ids' high bits.
    pub fn node_id(&self) -> u16 {
        self.node_id
    }
}

fn encode(limit: u64) -> [u8; FILE_LEN] {
    let mut data = [0; FILE_LEN];
    data[0..4].copy_from_slice(&MAGIC);
    data[4..6].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    data[8..16].copy_from_slice(&limit.to_le_bytes());
    let crc = crc32fast::hash(&data[..16]);
    data[16..20].copy_from_slice(&crc.to_le_bytes());
    data
}

fn decode(data: &[u8]) -> Result<u64, String> {
    if data.len() != FILE_LEN {
        return Err(format!(
            "wrong length len={} expected={FILE_LEN}",
            data.len()
        ));
    }
    let stored = u32::from_le_bytes(data[16..20].try_into().expect("4 bytes"));
    let computed = crc32fast::hash(&data[..16]);
    if stored != computed {
        return Err(format!(
            "checksum mismatch stored={stored:#010x} computed={computed:#010x}"
        ));
    }
    if data[0..4] != MAGIC {
        return Err(format!("bad magic found={:02x?}", &data[0..4]));
    }
    let version = u16::from_le_bytes([data[4], data[5]]);
    if version != FORMAT_VERSION {
        return Err(format!(
            "unsupported format version found={version} supported={FORMAT_VERSION}"
        ));
    }
    Ok(u64::from_le_bytes(data[8..16].try_into().expect("8 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_and_a_flipped_bit_is_caught() {
        let data = encode(4096);
        assert_eq!(decode(&data), Ok(4096));
        for at in 0..FILE_LEN {
            let mut damaged = data;
            damaged[at] ^= 1;
            assert!(decode(&damaged).is_err(), "at={at}");
        }
    }
}
