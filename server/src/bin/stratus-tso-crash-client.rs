//! Test helper for `tests/tso_crash.rs`: opens the TSO at PATH and hands out timestamps
//! forever, printing `ts N` after each one. The test kills it with SIGKILL at random moments
//! and checks that a reopened TSO starts above every printed timestamp. Not meant for anything
//! else.
//!
//! `stratus-tso-crash-client PATH single|batch`: `batch` takes half a millisecond of logical
//! timestamps per call, so the physical part runs ahead of the clock and the high-water mark
//! is pushed many times per second.

use std::io::Write;

use server::tso::{LOGICAL_PER_MS, Tso};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(mode)) = (args.next(), args.next()) else {
        eprintln!("usage: stratus-tso-crash-client PATH single|batch");
        std::process::exit(2);
    };
    let batch = match mode.as_str() {
        "single" => 1,
        "batch" => (LOGICAL_PER_MS / 2) as u32,
        other => {
            eprintln!("unknown mode {other:?}: expected single or batch");
            std::process::exit(2);
        }
    };
    let tso = match Tso::open(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("tso crash client: open failed: {e}");
            std::process::exit(1);
        }
    };
    let stdout = std::io::stdout();
    loop {
        let first = match tso.get_ts_batch(batch) {
            Ok(ts) => ts,
            Err(e) => {
                eprintln!("tso crash client: get_ts failed: {e}");
                std::process::exit(1);
            }
        };
        let last = first + u64::from(batch) - 1;
        let mut out = stdout.lock();
        let _ = writeln!(out, "ts {last}");
        let _ = out.flush();
    }
}
