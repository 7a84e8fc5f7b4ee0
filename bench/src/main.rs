//! `stratus-bench`: the benchmark suite. Every result is printed beside a baseline measured in
//! the same run, as a ratio, in Markdown ready for BENCHMARKS.md.
//!
//! ```text
//! cargo run --release -p bench -- [sst|memtable|engine|vs-fjall|txn|raft-write|txn-snapshot|replication|failover|idle|cop|offload|mixed|cop-cache|node-selection|pd|rebalance|learners|sql|tls|compaction|all] [--entries N] [--timers default|fast]
//! ```

mod compaction_bench;
mod cop_bench;
mod cop_cache_bench;
mod engine_bench;
mod failover_bench;
mod fjall_bench;
mod idle_bench;
mod memtable_bench;
mod mixed_bench;
mod node_selection_bench;
mod offload_bench;
mod pd_bench;
mod raft_write_bench;
mod rebalance_bench;
mod replication_bench;
mod report;
mod sql_bench;
mod sst_bench;
mod tls_bench;
mod txn_bench;
mod txn_snapshot_bench;
mod workload;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut suite = "all".to_string();
    let mut entries = 2_000_000usize;
    // `sql` loads its rows through the SQL endpoint: its own, smaller default.
    let mut entries_given = false;
    let mut child: Option<String> = None;
    let mut timers: Option<String> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            // The rebalance suite's timer settings to run (default: both).
            "--timers" => {
                let v = args.next().unwrap_or_default();
                if v != "default" && v != "fast" {
                    eprintln!("--timers expects default or fast, found={v:?}");
                    std::process::exit(2);
                }
                timers = Some(v);
            }
            "--entries" => {
                let v = args.next().unwrap_or_default();
                entries = v.parse().unwrap_or_else(|_| {
                    eprintln!("--entries expects a positive integer, found={v:?}");
                    std::process::exit(2)
                });
                entries_given = true;
            }
            "sst" | "memtable" | "engine" | "vs-fjall" | "txn" | "raft-write" | "txn-snapshot"
            | "replication" | "failover" | "idle" | "cop" | "offload" | "mixed" | "cop-cache"
            | "node-selection" | "pd" | "rebalance" | "learners" | "sql" | "tls" | "compaction"
            | "all" => suite = a,
            // Hidden: one engine's half of `vs-fjall`, run in a child process.
            "__vs-fjall-child" => child = Some(args.next().unwrap_or_default()),
            other => {
                eprintln!(
                    "unknown argument {other:?}; usage: stratus-bench [sst|memtable|engine|vs-fjall|txn|raft-write|txn-snapshot|replication|failover|idle|cop|offload|mixed|cop-cache|node-selection|pd|rebalance|learners|sql|tls|compaction|all] [--entries N] [--timers default|fast]"
                );
                std::process::exit(2);
            }
        }
    }
    if let Some(engine) = child {
        fjall_bench::child(&engine, entries);
        return;
    }
    let sql_rows = if entries_given {
        entries
    } else {
        sql_bench::DEFAULT_ROWS
    };
    report::header(if suite == "sql" { sql_rows } else { entries });
    if suite == "sst" || suite == "all" {
        sst_bench::run(entries);
    }
    if suite == "memtable" || suite == "all" {
        memtable_bench::run(entries);
    }
    if suite == "engine" || suite == "all" {
        engine_bench::run(entries);
    }
    if suite == "vs-fjall" || suite == "all" {
        fjall_bench::run(entries);
    }
    if suite == "txn" || suite == "all" {
        txn_bench::run(entries);
    }
    if suite == "raft-write" || suite == "all" {
        raft_write_bench::run(entries);
    }
    if suite == "failover" || suite == "all" {
        failover_bench::run();
    }
    if suite == "idle" || suite == "all" {
        idle_bench::run();
    }
    if suite == "replication" || suite == "all" {
        replication_bench::run(entries);
    }
    if suite == "txn-snapshot" || suite == "all" {
        txn_snapshot_bench::run(entries);
    }
    if suite == "cop" || suite == "all" {
        cop_bench::run(entries);
    }
    if suite == "offload" || suite == "all" {
        offload_bench::run(entries);
    }
    if suite == "tls" || suite == "all" {
        tls_bench::run();
    }
    if suite == "compaction" || suite == "all" {
        // `--entries` is the MiB written per side here (default 400).
        compaction_bench::run(if entries_given { entries as u64 } else { 400 });
    }
    if suite == "mixed" || suite == "all" {
        mixed_bench::run();
    }
    if suite == "cop-cache" || suite == "all" {
        cop_cache_bench::run();
    }
    if suite == "node-selection" || suite == "all" {
        node_selection_bench::run();
    }
    if suite == "pd" || suite == "all" {
        pd_bench::run();
    }
    if suite == "learners" || suite == "all" {
        replication_bench::run_learners();
    }
    if suite == "rebalance" || suite == "all" {
        rebalance_bench::run(timers.as_deref());
    }
    if suite == "sql" || suite == "all" {
        sql_bench::run(sql_rows);
    }
    report::memory_footer(&suite);
}
