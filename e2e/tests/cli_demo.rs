//! `stratus demo` and `stratus bench` as processes, with few rows: each starts its own local
//! cluster, exits 0, and prints what it promises — the demo a region offloaded because the
//! server was busy, one kept local because it was idle, a cache hit, the three node selection
//! policies (no warning: every region has a replica in the client's zone), the decision
//! counts and a failover that loses nothing; the benchmark a table of 5 queries × 4 configurations.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::process::{Command, Output, Stdio};

use e2e::binaries::{self, STRATUS};
use e2e::process::stdout_of_success;

fn stratus(args: &[&str]) -> Output {
    Command::new(binaries::binary(STRATUS))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run stratus")
}

/// The table rows (`| ...` lines, rule excluded) under the header line starting with `header`.
fn markdown_rows<'a>(text: &'a str, header: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .collect()
}

#[test]
fn demo_shows_offload_reasons_cache_hits_policies_and_decision_counts() {
    let stdout = stdout_of_success(stratus(&["demo", "--rows", "20000"]));
    let has_line = |f: &dyn Fn(&str) -> bool| stdout.lines().any(f);
    assert!(
        has_line(&|l| l.contains(" remote ") && l.contains("reason=cpu_busy")),
        "no region offloaded with cpu_busy:\n{stdout}"
    );
    assert!(
        has_line(&|l| l.contains(" local") && l.contains("reason=cpu_idle")),
        "no region kept local with cpu_idle:\n{stdout}"
    );
    assert!(stdout.contains("cache_hit=true"), "no cache hit:\n{stdout}");
    for policy in [
        "all_nodes",
        "priority_local_zone_nodes",
        "only_local_zone_nodes",
    ] {
        assert!(
            has_line(&|l| l.starts_with(&format!("{policy} ("))),
            "policy {policy} not shown:\n{stdout}"
        );
    }
    // Every region has a replica in zone a (three replicas in zones a, b, c): no policy warns,
    // and the local-zone policies read everything in zone a, moving no byte across zones.
    let section = |from: &str, to: &str| -> String {
        let start = stdout
            .find(from)
            .unwrap_or_else(|| panic!("no {from:?}:\n{stdout}"));
        let end = stdout[start..].find(to).map_or(stdout.len(), |e| start + e);
        stdout[start..end].to_string()
    };
    let selection = section("== 5.", "== 6.");
    assert!(
        !selection.contains("can not be accessed by TiFlash"),
        "a node selection warning:\n{selection}"
    );
    assert_eq!(
        selection
            .lines()
            .filter(|l| l.contains("bytes moved across zones: 0"))
            .count(),
        3,
        "cross-zone bytes of each policy:\n{selection}"
    );
    // The zone step: from zone c, the table's replicas there taken away (a warning naming
    // zone c, bytes across zones), then back (no warning, no byte across zones).
    let zone = section("== 6. a zone without its replica", "== 7.");
    assert!(
        zone.contains("Total") && zone.contains("can not be accessed by TiFlash in the zone [c]"),
        "no warning once zone c lost its replicas:\n{zone}"
    );
    assert!(
        zone.contains("→ every region read in zone c again, no warning"),
        "zone c's replicas not restored:\n{zone}"
    );
    for policy in ["priority_local_zone_nodes", "only_local_zone_nodes"] {
        assert!(
            has_line(&|l| l.starts_with(&format!("→ {policy}: "))
                && (l.contains("no warning") || l.contains("there is none"))),
            "policy {policy} not explained:\n{stdout}"
        );
    }
    assert!(
        has_line(&|l| l.starts_with(" pd ") && l.contains("| pd ")),
        "the placement driver not in the node table:\n{stdout}"
    );
    // The failover step: server-b killed and restarted; nothing failed, nothing lost.
    for server in ["server-a", "server-b", "server-c"] {
        assert!(
            has_line(&|l| l.starts_with(&format!(" {server} ")) && l.contains("| server |")),
            "{server} not in the node table:\n{stdout}"
        );
    }
    assert!(
        has_line(&|l| l.starts_with("supervisor: server-b exited (signal: 9); restarted on ")),
        "no restart of server-b:\n{stdout}"
    );
    assert!(
        has_line(&|l| l.starts_with("queries: ") && l.contains(" answered, 0 failed, 0 different")),
        "queries failed during the failover:\n{stdout}"
    );
    assert!(
        has_line(&|l| l.starts_with("writes: ") && l.contains(" after the kill), 0 failed")),
        "writes failed during the failover:\n{stdout}"
    );
    assert!(
        has_line(&|l| l.starts_with("server-b caught up ")),
        "server-b did not catch up:\n{stdout}"
    );
    assert!(
        has_line(&|l| l.starts_with("all ") && l.contains(" acknowledged rows are in t_small")),
        "acknowledged rows missing:\n{stdout}"
    );
    // The decision table: a header, then at least one remote/cpu_busy and one local/cpu_idle
    // count on some server.
    assert!(
        has_line(&|l| l.split('|').map(str::trim).collect::<Vec<_>>()
            == ["server", "result", "reason", "count"]),
        "no decision table:\n{stdout}"
    );
    let counted = |result: &str, reason: &str| {
        has_line(&|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            cells.len() == 4
                && cells[0].starts_with("server-")
                && cells[1] == result
                && cells[2] == reason
                && cells[3].parse::<u64>().is_ok_and(|n| n > 0)
        })
    };
    assert!(counted("remote", "cpu_busy"), "no remote count:\n{stdout}");
    assert!(counted("local", "cpu_idle"), "no local count:\n{stdout}");
    let last = stdout.lines().last().unwrap_or("");
    assert!(
        last.starts_with("demo finished in ") && last.ends_with(" s"),
        "last line: {last:?}"
    );
}

#[test]
fn bench_prints_a_row_per_query_and_configuration_and_writes_the_report_file() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("bench.md");
    let stdout = stdout_of_success(stratus(&[
        "bench",
        "--rows",
        "20000",
        "--runs",
        "2",
        "--output",
        report.to_str().unwrap(),
    ]));
    let rows = markdown_rows(&stdout, "| query | offload | cache |");
    assert_eq!(rows.len(), 20, "{stdout}");
    for offload in ["off", "on"] {
        for cache in ["off", "on"] {
            let n = rows
                .iter()
                .filter(|r| {
                    r.starts_with("| ") && r.contains(&format!(" | {offload} | {cache} | "))
                })
                .count();
            assert_eq!(n, 5, "offload={offload} cache={cache}:\n{stdout}");
        }
    }
    assert!(
        stdout.contains("| on | off | remote/cpu_busy="),
        "offload on made no remote decision:\n{stdout}"
    );
    assert_eq!(std::fs::read_to_string(&report).unwrap(), stdout);
}
