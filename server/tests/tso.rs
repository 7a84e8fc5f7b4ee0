//! The TSO: strictly increasing across threads, restarts and a clock that goes backwards; a
//! damaged high-water file is an error; a SIGKILLed process never makes a restarted TSO
//! reissue a timestamp it printed.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use server::tso::{ManualClock, Tso, TsoError, TsoOptions};
use types::Ts;

#[test]
fn timestamps_are_unique_and_increasing_per_thread_across_threads() {
    let dir = tempfile::tempdir().unwrap();
    let tso = Arc::new(Tso::open(dir.path().join("tso")).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let tso = tso.clone();
            std::thread::spawn(move || {
                let mut got = Vec::with_capacity(5000);
                for i in 0..5000 {
                    got.push(if (i + t) % 7 == 0 {
                        tso.get_ts_batch(3).unwrap() + 2
                    } else {
                        tso.get_ts().unwrap()
                    });
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in threads {
        let got = t.join().unwrap();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "not increasing within a thread"
        );
        all.extend(got);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a timestamp was handed out twice");
}

#[test]
fn reopen_after_the_clock_went_backwards_still_increases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tso");
    let clock = Arc::new(ManualClock::new(10_000_000));
    let tso = Tso::open_with(&path, clock.clone(), TsoOptions::default()).unwrap();
    let mut last = 0;
    for _ in 0..100 {
        last = tso.get_ts().unwrap();
    }
    clock.advance(2500);
    last = last.max(tso.get_ts().unwrap());
    drop(tso);

    // The clock jumps back an hour: the reopened TSO starts above the persisted mark.
    clock.set(10_000_000 - 3_600_000);
    let tso = Tso::open_with(&path, clock.clone(), TsoOptions::default()).unwrap();
    let next = tso.get_ts().unwrap();
    assert!(next > last, "reopened ts {next} not above {last}");
    assert!(Ts(next).physical_millis() > Ts(last).physical_millis());
}

#[test]
fn truncated_high_water_file_is_an_error_not_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tso");
    drop(Tso::open(&path).unwrap());
    let data = std::fs::read(&path).unwrap();
    std::fs::write(&path, &data[..data.len() - 3]).unwrap();
    let err = Tso::open(&path).unwrap_err();
    assert!(matches!(err, TsoError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().contains("expected 17 bytes, found 14"),
        "{err}"
    );
    std::fs::write(&path, b"").unwrap();
    assert!(matches!(Tso::open(&path), Err(TsoError::Corrupt { .. })));
}

#[test]
fn corrupt_high_water_file_is_an_error_not_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tso");
    drop(Tso::open(&path).unwrap());
    let mut data = std::fs::read(&path).unwrap();
    data[7] ^= 0x01;
    std::fs::write(&path, &data).unwrap();
    let err = Tso::open(&path).unwrap_err();
    assert!(err.to_string().contains("expected crc32"), "{err}");
}

#[test]
fn sigkill_never_lets_a_restarted_tso_reissue_a_printed_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tso");
    let mut rng = rand::rng();
    let mut max_printed = 0u64;
    for round in 0..8 {
        let mode = if round % 2 == 0 { "batch" } else { "single" };
        let mut child = Command::new(env!("CARGO_BIN_EXE_stratus-tso-crash-client"))
            .arg(&path)
            .arg(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn tso crash client");
        let stdout = child.stdout.take().unwrap();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut max = 0u64;
            let mut lines = 0u64;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("ts ") {
                    max = max.max(n.parse::<u64>().expect("ts number"));
                    lines += 1;
                    if lines == 1 {
                        let _ = started_tx.send(());
                    }
                }
            }
            (max, lines)
        });
        // Kill at a random moment after the client started handing out timestamps.
        started_rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("round {round}: the client printed nothing"));
        std::thread::sleep(Duration::from_millis(rng.random_range(0..150)));
        child.kill().expect("SIGKILL the tso client");
        let status = child.wait().unwrap();
        assert!(!status.success(), "round {round}: client exited on its own");
        let (max, _lines) = reader.join().unwrap();
        max_printed = max_printed.max(max);

        let tso = Tso::open(&path).unwrap_or_else(|e| panic!("round {round}: reopen: {e}"));
        let first = tso.get_ts().unwrap();
        assert!(
            first > max_printed,
            "round {round} ({mode}): reopened ts {first} not above printed {max_printed}"
        );
    }
}
