//! Writes seed inputs for the sst fuzz targets: real encoded blocks, framed blocks, tables, L0
//! files and footers. Run from the workspace root: `cargo run -p sst --example sst_fuzz_seeds`.

use std::path::PathBuf;

use sst::{BuilderOptions, Compression, FormatVersion, TableBuilder};

fn table(
    keys: u32,
    versions: u64,
    block_size: usize,
    compression: Compression,
    format_version: FormatVersion,
) -> sst::BuiltTable {
    let mut b = TableBuilder::new(BuilderOptions {
        block_size,
        compression,
        filter_bits_per_key: 10,
        format_version,
    })
    .expect("valid options");
    for i in 0..keys {
        let key = format!("t1_r{i:04}");
        for v in (1..=versions).rev() {
            b.add(
                key.as_bytes(),
                v * 10,
                &[v as u8],
                format!("val{i}.{v}").as_bytes(),
                i % 5 == 0 && v == 1,
            )
            .expect("ordered");
        }
    }
    b.finish()
}

/// Footers that each stop at a different check of `Footer::decode` (with a valid checksum where
/// the check comes after it), so the fuzzer starts past the magic and the CRC.
fn footer_variants() -> Vec<(&'static str, Vec<u8>)> {
    use sst::footer::{CHECKSUM_CRC32, FOOTER_LEN, Footer};
    use sst::index::BlockHandle;
    let handle = |offset, len| BlockHandle { offset, len };
    let good = Footer {
        old_blocks_offset: 4096,
        index: handle(4096, 64),
        old_index: handle(4160, 16),
        filter: handle(4176, 128),
        properties: handle(4304, 200),
        compression: 0,
        checksum: CHECKSUM_CRC32,
        format_version: FormatVersion::V1,
    };
    // Re-seals the CRC after an edit of the bytes it covers.
    let seal = |mut f: [u8; FOOTER_LEN]| {
        let crc = crc32fast::hash(&f[..FOOTER_LEN - 12]);
        f[FOOTER_LEN - 12..FOOTER_LEN - 8].copy_from_slice(&crc.to_le_bytes());
        f.to_vec()
    };
    let mut bad_magic = good.encode();
    bad_magic[FOOTER_LEN - 1] ^= 0xff;
    let mut bad_crc = good.encode();
    bad_crc[3] ^= 1;
    let mut reserved = good.encode();
    reserved[60] = 1;
    // A format version this build does not know (the u16 after compression and checksum).
    let mut version_unknown = good.encode();
    version_unknown[58..60].copy_from_slice(&99u16.to_le_bytes());
    let mut prefixed = vec![0xab; 37];
    prefixed.extend_from_slice(&good.encode());
    vec![
        ("crafted_valid", good.encode().to_vec()),
        (
            "crafted_zstd",
            Footer {
                compression: 1,
                ..good
            }
            .encode()
            .to_vec(),
        ),
        ("crafted_bad_magic", bad_magic.to_vec()),
        ("crafted_bad_crc", bad_crc.to_vec()),
        ("crafted_reserved_not_zero", seal(reserved)),
        (
            "crafted_version_2",
            Footer {
                format_version: FormatVersion::V2,
                ..good
            }
            .encode()
            .to_vec(),
        ),
        ("crafted_version_unknown", seal(version_unknown)),
        (
            "crafted_unknown_checksum",
            Footer {
                checksum: 7,
                ..good
            }
            .encode()
            .to_vec(),
        ),
        ("crafted_short", good.encode()[..FOOTER_LEN - 1].to_vec()),
        ("crafted_behind_data", prefixed),
        (
            "crafted_handles_past_u32",
            Footer {
                old_blocks_offset: u64::MAX,
                index: handle(u64::MAX - 3, u32::MAX),
                ..good
            }
            .encode()
            .to_vec(),
        ),
    ]
}

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let write = |target: &str, name: &str, data: &[u8]| -> std::io::Result<()> {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(name), data)
    };
    // Format version 1 under the names these seeds always had, version 2 with a prefix.
    let tables_in = |format| {
        [
            ("small", table(3, 1, 4096, Compression::None, format)),
            ("multi_block", table(40, 3, 256, Compression::None, format)),
            ("zstd", table(40, 2, 256, Compression::Zstd(3), format)),
            ("one_key", table(1, 4, 64, Compression::None, format)),
        ]
    };
    for (name, t) in tables_in(FormatVersion::V2) {
        let name = format!("v2_{name}");
        write("sst_table", &format!("{name}.sst"), &t.data)?;
        let opened = sst::Table::open(1, bytes::Bytes::from(t.data.clone())).expect("fresh table");
        let first_len = opened.block_sizes()[0] as usize;
        let frame = bytes::Bytes::copy_from_slice(&t.data[..first_len]);
        let raw = sst::block_frame::decode(&frame).expect("fresh frame");
        write("sst_block", &format!("{name}.block"), &raw)?;
    }
    let tables = tables_in(FormatVersion::V1);
    for (name, t) in &tables {
        write("sst_table", &format!("{name}.sst"), &t.data)?;
        write(
            "sst_footer",
            &format!("{name}.footer"),
            &t.data[t.data.len() - sst::footer::FOOTER_LEN..],
        )?;
        // The first framed block and its logical contents.
        let opened = sst::Table::open(1, bytes::Bytes::from(t.data.clone())).expect("fresh table");
        let first_len = opened.block_sizes()[0] as usize;
        let frame = bytes::Bytes::copy_from_slice(&t.data[..first_len]);
        write("sst_block", &format!("{name}.frame"), &frame)?;
        let raw = sst::block_frame::decode(&frame).expect("fresh frame");
        write("sst_block", &format!("{name}.block"), &raw)?;
    }
    let [(_, a), (_, b), _, (_, d)] = tables;
    write(
        "sst_table",
        "l0.sst",
        &sst::build_l0([Some(a), Some(b), Some(d)]),
    )?;
    for (name, data) in footer_variants() {
        write("sst_footer", &format!("{name}.footer"), &data)?;
    }
    println!("seeds written under {}", root.display());
    Ok(())
}
