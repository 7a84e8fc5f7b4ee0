//! Writes seed inputs for the sst fuzz targets: real encoded blocks, framed blocks, tables, L0
//! files and footers. Run from the workspace root: `cargo run -p sst --example fuzz_seeds`.

use std::path::PathBuf;

use sst::{BuilderOptions, Compression, TableBuilder};

fn table(keys: u32, versions: u64, block_size: usize, compression: Compression) -> sst::BuiltTable {
    let mut b = TableBuilder::new(BuilderOptions {
        block_size,
        compression,
        filter_bits_per_key: 10,
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

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let write = |target: &str, name: &str, data: &[u8]| -> std::io::Result<()> {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(name), data)
    };
    let tables = [
        ("small", table(3, 1, 4096, Compression::None)),
        ("multi_block", table(40, 3, 256, Compression::None)),
        ("zstd", table(40, 2, 256, Compression::Zstd(3))),
        ("one_key", table(1, 4, 64, Compression::None)),
    ];
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
    println!("seeds written under {}", root.display());
    Ok(())
}
