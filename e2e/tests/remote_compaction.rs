//! Remote compaction on real processes: a server's compactions run on its workers
//! (`POST /compact`), a worker SIGKILLed mid-job costs one retry on another worker with
//! nothing lost and no object left behind once file GC ran, and a replicated bank workload
//! keeps every acknowledged transfer while compactions go remote throughout.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use e2e::bank::{Bank, StopOnDrop, client, cut_keys, on_pd, open_accounts, spawn_workload};
use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{self, rows};
use e2e::pd_proc::{PdProc, PdSetup};
use e2e::replicated::ReplicatedCluster;
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerProc, ServerSetup};
use e2e::worker_proc::WorkerProc;
use kvengine::Dfs;
use server::config::WorkerEndpoint;
use types::{ReadableDuration, ReadableSize};

const T: SampleTable = SampleTable { id: 11 };
const ROWS: i64 = 12_000;
const TIMEOUT: Duration = Duration::from_secs(60);

fn compact_on(s: &mut ServerSetup, workers: &[&WorkerProc], timeout: ReadableDuration) {
    s.kvengine.remote_coprocessor_workers = workers
        .iter()
        .map(|w| WorkerEndpoint {
            addr: w.coprocessor_url(),
            zone: types::Zone::label("a"),
        })
        .collect();
    // Coprocessor requests stay here; compactions go.
    s.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(1 << 50);
    s.kvengine.remote_coprocessor_num_ranges = 0;
    s.kvengine.remote_compaction = true;
    s.kvengine.remote_compaction_min_input_size = ReadableSize(0);
    s.kvengine.remote_compaction_timeout = timeout;
}

/// Three rounds over the same rows, each flushed: three L0 files (below the L0 trigger, so
/// nothing compacts before the test asks). The last round's values are the answer.
fn load_three_rounds(s: &ServerProc) {
    for round in 0..3 {
        let pairs = (0..ROWS)
            .map(|h| (T.key(h), SampleTable::value(h * 10 + round, 200)))
            .collect();
        s.raw_load(pairs);
        s.flush();
    }
}

fn assert_rows_intact(s: &ServerProc) {
    let region = s.region_of(&T.key(0));
    let req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], s.tso(), &region);
    assert_eq!(
        rows(&s.coprocessor(&req)).unwrap(),
        SampleTable::count_sum_rows((0..ROWS).map(|h| h * 10 + 2))
    );
}

/// Objects in the store that no file list of the server's manifest names.
fn orphans(store_dir: &Path, engine_dir: &Path) -> Result<BTreeSet<u64>, String> {
    let stored: BTreeSet<u64> = kvengine::LocalDfs::open(store_dir)
        .and_then(|d| d.list())
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|f| f.get())
        .collect();
    let lists = kvengine::manifest::Manifest::read_file_lists(&engine_dir.join("manifest"))
        .map_err(|e| e.to_string())?;
    let live: BTreeSet<u64> = lists.iter().flat_map(|l| l.file_ids()).collect();
    Ok(stored.difference(&live).copied().collect())
}

fn wait_for_no_orphans(store_dir: &Path, engine_dir: &Path) {
    let started = Instant::now();
    loop {
        match orphans(store_dir, engine_dir) {
            Ok(o) if o.is_empty() => return,
            Ok(o) if started.elapsed() > TIMEOUT => {
                panic!("objects no file list names: {o:x?}")
            }
            // A manifest read racing its writer: read again.
            Err(e) if started.elapsed() > TIMEOUT => panic!("{e}"),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

#[test]
fn compactions_run_on_a_worker_and_give_the_same_rows() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut setup = cluster.server_config("server");
    compact_on(&mut setup, &[&worker], ReadableDuration::secs(60));
    let server = ServerProc::start(&setup);
    load_three_rounds(&server);
    server.compact();
    assert!(worker.metric("stratus_worker_compaction_jobs_total", &[("result", "ok")]) >= 1.0);
    let status = worker.status();
    assert_eq!(status["compaction"]["running"], 0, "{status}");
    assert_eq!(status["compaction"]["max_jobs"], 2, "{status}");
    assert!(server.metric("stratus_kvengine_remote_compactions_total", &[]) >= 1.0);
    assert_eq!(
        server.metric(
            "stratus_server_compaction_remote_decisions_total",
            &[("reason", "remote")]
        ),
        server.metric(
            "stratus_server_compaction_remote_jobs_total",
            &[("result", "ok")]
        ),
    );
    assert_rows_intact(&server);
}

#[test]
fn a_worker_answers_a_body_that_is_no_job_with_400_and_what_is_wrong() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let url = worker.url(wire::paths::COMPACT);
    let garbage = e2e::http_client::post(&url, vec![0xff, 0xff, 0xff]);
    assert_eq!(garbage.status.as_u16(), 400, "{garbage:?}");
    assert!(String::from_utf8_lossy(&garbage.body).contains("not valid protobuf"));
    // A job naming an input that does not exist: the store has no such file.
    let job = changeset::CompactionJob {
        cfs: vec![changeset::CfInputs {
            cf: 0,
            bottommost: true,
            inputs: vec![changeset::InputFile {
                id: 42,
                ..Default::default()
            }],
        }],
        options: Some(changeset::OutputOptions {
            block_size: 4096,
            target_file_size: 1 << 20,
            ..Default::default()
        }),
        output_ids: vec![43],
        ..Default::default()
    };
    let missing = e2e::http_client::post(&url, job.encode_to_bytes());
    assert_eq!(missing.status.as_u16(), 502, "{missing:?}");
    assert_eq!(
        worker.metric(
            "stratus_worker_compaction_jobs_total",
            &[("result", "bad_request")]
        ),
        1.0
    );
    assert_eq!(
        worker.metric(
            "stratus_worker_compaction_jobs_total",
            &[("result", "store_error")]
        ),
        1.0
    );
}

#[test]
fn a_worker_killed_mid_job_costs_one_retry_loses_nothing_and_leaves_no_orphan() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut workers = [
        WorkerProc::start(&cluster.worker_config("w1")),
        WorkerProc::start(&cluster.worker_config("w2")),
    ];
    let mut setup = cluster.server_config("server");
    compact_on(
        &mut setup,
        &[&workers[0], &workers[1]],
        ReadableDuration::secs(8),
    );
    // Small outputs: the job stores one after another while it runs.
    setup.kvengine.target_file_size = ReadableSize::kib(128);
    let server = ServerProc::start(&setup);
    load_three_rounds(&server);
    let e2e::s3_proc::Store::Local(store_dir) = &cluster.store else {
        panic!("a local store")
    };
    let engine_dir = setup.server.data_dir.join("engine");

    // Objects no file list names before the job: files the load's compactions replaced, which
    // file GC deletes on its own schedule. Only an object beyond these is the job's output.
    let before = orphans(store_dir, &engine_dir).unwrap_or_default();
    let killed = std::thread::scope(|scope| {
        let compaction = scope.spawn(|| server.compact());
        // Kill whichever worker runs the job, once it stored an output (an object no file
        // list names yet).
        let started = Instant::now();
        let killed = loop {
            let running = workers
                .iter()
                .position(|w| w.metric("stratus_worker_compaction_running", &[]) >= 1.0);
            if let Some(i) = running
                && orphans(store_dir, &engine_dir).is_ok_and(|o| !o.is_subset(&before))
            {
                workers[i].kill();
                break i;
            }
            assert!(
                !compaction.is_finished(),
                "the compaction ended before a worker was seen running it"
            );
            assert!(started.elapsed() < TIMEOUT, "no worker ever ran the job");
            std::thread::sleep(Duration::from_millis(2));
        };
        compaction.join().unwrap();
        killed
    });
    let survivor = &workers[1 - killed];
    assert!(
        server.metric(
            "stratus_server_compaction_remote_attempts_total",
            &[("outcome", "connect")]
        ) >= 1.0,
        "the killed worker's attempt was not counted as a connection failure"
    );
    // The retry went to the other worker (or, if it too failed, the server compacted here).
    let retried = server.metric(
        "stratus_server_compaction_remote_jobs_total",
        &[("result", "retried")],
    );
    let fell_back = server.metric(
        "stratus_server_compaction_remote_jobs_total",
        &[("result", "fell_back")],
    );
    assert!(retried + fell_back >= 1.0);
    if retried >= 1.0 {
        assert!(
            survivor.metric("stratus_worker_compaction_jobs_total", &[("result", "ok")]) >= 1.0
        );
    }
    assert_rows_intact(&server);
    // Whatever the killed worker stored is deleted once the job's deadline passed twice, by
    // the doomed-id path (counted after each delete: wait for the count, not only for the
    // objects to go).
    let started = Instant::now();
    while server.metric("stratus_kvengine_doomed_files_deleted_total", &[]) < 1.0 {
        assert!(
            started.elapsed() < TIMEOUT,
            "the killed worker's outputs were never deleted as a failed job's"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_for_no_orphans(store_dir, &engine_dir);
    assert_rows_intact(&server);
}

#[test]
fn a_bank_workload_keeps_every_acknowledged_transfer_while_compactions_go_remote() {
    let cluster = Cluster::new(StoreKind::Local);
    let w1 = WorkerProc::start(&cluster.worker_config("w1"));
    let w2 = WorkerProc::start(&cluster.worker_config("w2"));
    let mut pd_setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
    pd_setup.pd.schedule_interval = ReadableDuration::millis(200);
    let pd = PdProc::start(&pd_setup);
    let pd_url = pd.base_url().to_string();
    let cuts = cut_keys();
    let mut rc =
        ReplicatedCluster::start_configured(cluster, &cuts, Duration::from_millis(50), |_, s| {
            on_pd(s, &pd_url, ReadableDuration::millis(200));
            compact_on(s, &[&w1, &w2], ReadableDuration::secs(30));
            // Tiny memtables: a flush every few transfers, a compaction every few flushes.
            s.kvengine.memtable_size = ReadableSize::kib(4);
        });
    rc.wait_until_every_region_has_a_leader(TIMEOUT);
    let urls = rc.urls();
    open_accounts(&client(&pd_url, &urls));
    let remote_compactions = |rc: &ReplicatedCluster| -> f64 {
        (0..urls.len())
            .map(|i| {
                rc.server(i)
                    .metric("stratus_kvengine_remote_compactions_total", &[])
            })
            .sum()
    };
    let bank = Bank::default();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let _stop_on_exit = StopOnDrop(&stop);
        spawn_workload(scope, &pd_url, &urls, &bank, &stop);
        let started = Instant::now();
        // Until several compactions went remote, and at least a few seconds of transfers.
        while remote_compactions(&rc) < 6.0 || started.elapsed() < Duration::from_secs(5) {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "only {} compactions went remote",
                remote_compactions(&rc)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    bank.verify(&client(&pd_url, &urls), 20, 10);
    let ok: f64 = [&w1, &w2]
        .iter()
        .map(|w| w.metric("stratus_worker_compaction_jobs_total", &[("result", "ok")]))
        .sum();
    assert!(ok >= 6.0, "workers ran {ok} jobs");
}
