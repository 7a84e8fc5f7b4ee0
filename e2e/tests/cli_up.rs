//! `stratus up` as a process: it writes the cluster file to the state dir, `stratus load` and
//! `stratus sql` find the cluster there without `--cluster`, the answer matches the sample
//! table's formula, and SIGINT stops every node, removes the cluster file and exits 0. A node
//! killed with SIGKILL is restarted by `up` on the same URL, saying so. Without any cluster,
//! `stratus sql` says how to get one. With `--tls` the same paths run over mutual TLS, and each
//! internal path refuses a certificate from another CA, the admin's, and plain HTTP.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use e2e::binaries::{self, STRATUS};
use e2e::http_client::{get, post};
use e2e::process::stdout_of_success;
use e2e::s3_proc::{BUCKET, S3Faults, S3Proc, s3_env};

/// The workers `stratus up` starts, two per zone.
const WORKERS: [&str; 6] = [
    "worker-a1",
    "worker-a2",
    "worker-b1",
    "worker-b2",
    "worker-c1",
    "worker-c2",
];

/// How long `stratus up` may take to start six nodes (a cold debug build is slow to start).
const UP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `stratus up` may take to stop them.
const STOP_TIMEOUT: Duration = Duration::from_secs(90);

/// `stratus` with `home` as its state dir and no cluster from the environment.
fn stratus(home: &Path) -> Command {
    let mut cmd = Command::new(binaries::binary(STRATUS));
    cmd.env("STRATUS_HOME", home)
        .env_remove("STRATUS_CLUSTER")
        .stdin(Stdio::null());
    cmd
}

fn output(mut cmd: Command) -> Output {
    cmd.output().expect("run stratus")
}

/// The running `stratus up` and the node processes it started; every one is SIGKILLed on drop
/// (a failing test leaves nothing behind).
struct Up {
    child: Child,
    nodes: Vec<u32>,
    log: PathBuf,
}

impl Up {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for pid in &self.nodes {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        if std::thread::panicking() {
            eprintln!("--- stratus up output ---\n{}", self.log());
        }
    }
}

/// The parent pid of `pid` (`None` once it is gone).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The live children of `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| parent_of(pid) == Some(parent))
        .collect()
}

/// Whether `pid` still exists (a zombie counts: nobody reaped it).
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The command line of `pid`, arguments separated by spaces ("" once it is gone).
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// The live child of `up` that runs the node `name` (its command line names `<name>.toml`).
fn pid_of_node(up: &Up, name: &str) -> Option<u32> {
    let config = format!("{name}.toml");
    children_of(up.child.id())
        .into_iter()
        .find(|&pid| cmdline(pid).contains(&config))
}

/// The URL `up` printed for the node `name` in its table of nodes (`NAME ZONE URL LOG`).
fn printed_url(up: &Up, name: &str) -> String {
    let log = up.log();
    log.lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            (fields.next() == Some(name))
                .then(|| fields.nth(1))
                .flatten()
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no row for {name} in:\n{log}"))
}

/// SIGKILLs the node `name` of `up` and waits until `up` has restarted it on the URL it printed
/// at start: the restart line is in `up`'s output, a new process runs the node, and the URL
/// answers `GET /status`. The new pid (added to those `up`'s drop kills).
fn kill_and_see_restarted(up: &mut Up, name: &str) -> u32 {
    let url = printed_url(up, name);
    let old = pid_of_node(up, name).unwrap_or_else(|| panic!("no process runs {name}"));
    let killed = Command::new("kill")
        .args(["-KILL", &old.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let said = format!("{name} exited (signal: 9); restarted on {url} after 0.5 s");
    let deadline = Instant::now() + UP_TIMEOUT;
    while !up.log().contains(&said) {
        if let Some(status) = up.child.try_wait().expect("wait") {
            panic!("stratus up exited instead of restarting {name}: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "no {said:?} within {UP_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let new =
        pid_of_node(up, name).unwrap_or_else(|| panic!("no process runs {name} after the restart"));
    up.nodes.push(new);
    assert_ne!(new, old, "{name} still runs in the killed process");
    assert!(!alive(old), "the killed {name} was not reaped");
    let reply = get(&format!("{url}{}", wire::paths::STATUS));
    assert_eq!(reply.status, 200, "GET {url}/status after the restart");
    new
}

#[test]
fn up_restarts_a_killed_worker_on_its_port() {
    let home = tempfile::Builder::new()
        .prefix("stratus-up-restart-")
        .tempdir()
        .expect("tempdir");
    let mut up = start_up(home.path(), &[], |_| {});
    kill_and_see_restarted(&mut up, "worker-a1");
    stop_with_sigint(up, home.path());
}

#[test]
fn up_restarts_a_killed_server_which_keeps_its_acknowledged_rows() {
    let home = tempfile::Builder::new()
        .prefix("stratus-up-restart-")
        .tempdir()
        .expect("tempdir");
    let mut up = start_up(home.path(), &[], |_| {});
    load_and_check_sum(home.path(), 3000);
    // server-b is not the TSO, and leads the regions of non-negative handles: the other two
    // replicas elect new leaders, and the restarted server catches up.
    kill_and_see_restarted(&mut up, "server-b");
    check_sum(home.path(), 3000);
    stop_with_sigint(up, home.path());
}

#[test]
fn up_gives_up_and_exits_1_when_a_node_dies_six_times_within_a_minute() {
    let home = tempfile::Builder::new()
        .prefix("stratus-up-give-up-")
        .tempdir()
        .expect("tempdir");
    let mut up = start_up(home.path(), &[], |_| {});
    let url = printed_url(&up, "worker-a1");
    let restarted = format!("worker-a1 exited (signal: 9); restarted on {url} after ");
    let deadline = Instant::now() + UP_TIMEOUT;
    let mut killed = Vec::new();
    let status = loop {
        if let Some(status) = up.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "stratus up still running after {} kills",
            killed.len()
        );
        // The next kill once the last one's restart is done (a kill during a start would be
        // a failed restart, not a death of a running node).
        let restarts = up.log().matches(&restarted).count();
        if restarts == killed.len()
            && let Some(pid) = pid_of_node(&up, "worker-a1")
        {
            up.nodes.push(pid);
            let sent = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status()
                .expect("run kill");
            assert!(sent.success());
            killed.push(pid);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = up.log();
    assert_eq!(status.code(), Some(1), "{status}\n{log}");
    assert_eq!(killed.len(), 6, "{log}");
    let delays: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix(restarted.as_str()))
        .collect();
    assert_eq!(
        delays,
        ["0.5 s", "1.0 s", "2.0 s", "4.0 s", "8.0 s"],
        "{log}"
    );
    assert!(
        log.contains("Error: gave up restarting worker-a1: restarts=5 window=60s"),
        "{log}"
    );
    let left: Vec<u32> = up.nodes.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        left.is_empty(),
        "nodes still running after up gave up: {left:?}"
    );
    assert!(
        !home.path().join("cluster.toml").exists(),
        "the cluster file outlived the cluster"
    );
}

/// The last line of CSV output as numbers.
fn last_csv_row(stdout: &str) -> Vec<f64> {
    let line = stdout.lines().last().expect("a result row");
    line.split(',')
        .map(|f| {
            f.parse()
                .unwrap_or_else(|_| panic!("not a number: {f:?} in {stdout:?}"))
        })
        .collect()
}

/// Starts `stratus up --base-port 0 --data-dir <home>/data [extra]` with `home` as its state
/// dir, waits for the cluster file, and checks that it started six nodes and printed them.
fn start_up(home: &Path, extra: &[&str], env: impl FnOnce(&mut Command)) -> Up {
    let data = home.join("data");
    let log = home.join("up.log");
    let out = File::create(&log).expect("up log");
    let mut cmd = stratus(home);
    cmd.args(["up", "--base-port", "0", "--data-dir"])
        .arg(&data)
        .args(extra)
        .stdout(out.try_clone().expect("clone log"))
        .stderr(out);
    env(&mut cmd);
    let child = cmd.spawn().expect("spawn stratus up");
    let mut up = Up {
        child,
        nodes: Vec::new(),
        log,
    };
    let cluster_file = home.join("cluster.toml");
    let deadline = Instant::now() + UP_TIMEOUT;
    while !cluster_file.exists() {
        if let Some(status) = up.child.try_wait().expect("wait") {
            panic!("stratus up exited before writing the cluster file: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "no cluster file within {UP_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    up.nodes = children_of(up.child.id());
    assert_eq!(
        up.nodes.len(),
        10,
        "a placement driver, three servers and six workers: {:?}",
        up.nodes
    );
    let printed = up.log();
    for node in ["pd", "server-a", "server-b", "server-c"]
        .into_iter()
        .chain(WORKERS)
    {
        assert!(printed.contains(node), "{node} missing from:\n{printed}");
    }
    up
}

/// Loads `rows` sample rows with `stratus load` and checks them with [`check_sum`], both
/// finding the cluster through the state dir.
fn load_and_check_sum(home: &Path, rows: u64) {
    let mut load = stratus(home);
    load.args(["load", "--table", "t", "--rows", &rows.to_string()]);
    let loaded = stdout_of_success(output(load));
    assert!(
        loaded.contains(&format!("loaded {rows} rows into t in ")),
        "{loaded}"
    );
    check_sum(home, rows);
}

/// SIGINTs `up` and checks that it exits 0, leaves no node running and removes the cluster
/// file.
fn stop_with_sigint(mut up: Up, home: &Path) {
    let sent = Command::new("kill")
        .args(["-INT", &up.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let deadline = Instant::now() + STOP_TIMEOUT;
    let status = loop {
        if let Some(status) = up.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "stratus up still running {STOP_TIMEOUT:?} after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "stratus up: {status}\n{}", up.log());
    let left: Vec<u32> = up.nodes.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        left.is_empty(),
        "nodes still running after up stopped: {left:?}"
    );
    assert!(
        !home.join("cluster.toml").exists(),
        "the cluster file outlived the cluster"
    );
}

/// Waits for `up` to print its SQL endpoint; the endpoint's `host:port` and the root password
/// printed before it, if one was.
fn sql_endpoint_of(up: &Up) -> (String, Option<String>) {
    let deadline = Instant::now() + UP_TIMEOUT;
    loop {
        let log = up.log();
        if let Some(rest) = log.split("sql endpoint (MySQL protocol): ").nth(1) {
            let addr = rest.split_whitespace().next().unwrap().to_string();
            let password = log
                .split("its password (shown once): ")
                .nth(1)
                .map(|r| r.lines().next().unwrap().trim().to_string());
            return (addr, password);
        }
        assert!(Instant::now() < deadline, "no SQL endpoint printed:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `mysql -e sql` against `addr` as root with `password`.
fn mysql_root(addr: &str, password: &str, sql: &str) -> Output {
    let (host, port) = addr.rsplit_once(':').unwrap();
    Command::new("mysql")
        .args(["-h", host, "-P", port, "-u", "root"])
        .arg(format!("--password={password}"))
        .args(["--batch", "--raw", "-e", sql])
        .stdin(Stdio::null())
        .output()
        .expect("run mysql (the Debian package mariadb-client; scripts/test installs it)")
}

#[test]
fn up_serves_load_and_sql_found_through_the_state_dir_and_stops_cleanly_on_sigint() {
    let home = tempfile::Builder::new()
        .prefix("stratus-up-")
        .tempdir()
        .expect("tempdir");
    let up = start_up(home.path(), &[], |_| {});
    load_and_check_sum(home.path(), 3000);
    // A fresh cluster's root gets a random password, printed once; the endpoint takes it and
    // refuses another.
    let (addr, password) = sql_endpoint_of(&up);
    let password = password.unwrap_or_else(|| panic!("no root password printed:\n{}", up.log()));
    assert_eq!(password.len(), 20, "{password}");
    let rows = stdout_of_success(mysql_root(&addr, &password, "SELECT COUNT(*) FROM t"));
    assert_eq!(rows, "COUNT(*)\n3000\n");
    let wrong = mysql_root(&addr, "not-it", "SELECT 1");
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("ERROR 1045"),
        "{wrong:?}"
    );
    stop_with_sigint(up, home.path());
    // Started again on the same data: root exists, so no password is printed, and the first
    // one still logs in.
    let up = start_up(home.path(), &[], |_| {});
    let (addr, again) = sql_endpoint_of(&up);
    assert_eq!(again, None, "a second password printed:\n{}", up.log());
    let rows = stdout_of_success(mysql_root(&addr, &password, "SELECT COUNT(*) FROM t"));
    assert_eq!(rows, "COUNT(*)\n3000\n");
    stop_with_sigint(up, home.path());
}

#[test]
fn up_with_etcd_keeps_the_placement_drivers_metadata_in_etcd() {
    let home = tempfile::Builder::new()
        .prefix("stratus-up-")
        .tempdir()
        .expect("tempdir");
    let etcd = harness::etcd::EtcdCluster::start(&home.path().join("etcd"), 1)
        .unwrap_or_else(|e| panic!("{e}"));
    let endpoint = etcd.endpoints()[0].clone();
    let up = start_up(home.path(), &["--etcd", &endpoint], |_| {});
    load_and_check_sum(home.path(), 1000);
    // `stratus ctl` finds the placement driver through the cluster file: it runs on etcd,
    // and the servers registered there with the regions they lead.
    let mut members = stratus(home.path());
    members.args(["ctl", "members", "--format", "json"]);
    let text = e2e::process::stdout_of_success(output(members));
    assert!(text.contains(&format!("etcd {endpoint}")), "{text}");
    let mut servers = stratus(home.path());
    servers.args(["ctl", "servers"]);
    let text = e2e::process::stdout_of_success(output(servers));
    assert!(text.contains("(3 rows)"), "{text}");
    stop_with_sigint(up, home.path());
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn up_with_s3_keeps_the_sst_files_in_the_bucket() {
    let home = tempfile::Builder::new()
        .prefix("stratus-up-s3-")
        .tempdir()
        .expect("tempdir");
    let s3 = S3Proc::start(&home.path().join("s3"), S3Faults::default());
    let up = start_up(
        home.path(),
        &["--s3", s3.endpoint(), "--s3-bucket", BUCKET],
        s3_env,
    );
    load_and_check_sum(home.path(), 3000);
    // Flush every server: the rows become SST files, which must land in the bucket.
    let cluster: toml::Table = std::fs::read_to_string(home.path().join("cluster.toml"))
        .expect("cluster file")
        .parse()
        .expect("cluster file is TOML");
    let servers = cluster["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 3);
    for s in servers {
        let url = s.as_str().expect("server url").trim_end_matches('/');
        let reply = post(&format!("{url}{}", wire::paths::ADMIN_FLUSH), Vec::new());
        assert_eq!(reply.status, 200, "flush {url}");
    }
    let ssts: Vec<PathBuf> = files_under(&s3.dir().join(BUCKET))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    assert!(!ssts.is_empty(), "no SST object in the bucket");
    assert!(
        !home.path().join("data").join("objects").exists(),
        "with --s3 there is no local-directory store"
    );
    check_sum(home.path(), 3000);
    stop_with_sigint(up, home.path());
}

/// `count(*), sum(k)` of the sample table `t` of `rows` rows, through `stratus sql`.
fn check_sum(home: &Path, rows: u64) {
    let mut sql = stratus(home);
    sql.args([
        "sql",
        "--format",
        "csv",
        "-e",
        "select count(*), sum(k) from t",
    ]);
    let answer = last_csv_row(&stdout_of_success(output(sql)));
    let want_sum: u64 = (0..rows).map(|i| i % 1000).sum();
    assert_eq!(answer, vec![rows as f64, want_sum as f64]);
}

#[test]
fn sql_without_any_cluster_exits_non_zero_saying_how_to_get_one() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut sql = stratus(home.path());
    sql.args(["sql", "-e", "select 1"]);
    let out = output(sql);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no cluster: start one with `stratus up` or pass --cluster FILE"),
        "{stderr}"
    );
    let looked_for = home.path().join("cluster.toml");
    assert!(
        stderr.contains(&looked_for.display().to_string()),
        "{stderr}"
    );
}

/// The `[security]` of the certificate `up --tls` wrote for `cn` under `<data>/tls`.
fn cluster_certificate(home: &Path, cn: &str) -> node::tls::SecurityConfig {
    let dir = home.join("data").join("tls");
    node::tls::SecurityConfig {
        ca_path: dir.join("ca.pem"),
        cert_path: dir.join(format!("{cn}.pem")),
        key_path: dir.join(format!("{cn}-key.pem")),
        ..node::tls::SecurityConfig::default()
    }
}

/// POSTs an empty body to `url` as the holder of `security` (none: a plain client); the status,
/// or the transport error when the connection was refused.
fn post_as(security: Option<&node::tls::SecurityConfig>, url: &str) -> Result<u16, String> {
    let tls = security.map(|s| s.load().unwrap().expect("TLS paths"));
    let client = node::HttpClient::with_tls(1 << 20, tls.as_deref());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(client.post(url, bytes::Bytes::new(), Duration::from_secs(10)))
        .map(|r| r.status.as_u16())
        .map_err(|e| e.to_string())
}

/// The sum over `up`'s workers of `stratus_worker_coprocessor_requests_total` (every result).
fn offloads_served(up: &Up) -> f64 {
    WORKERS
        .iter()
        .map(|w| {
            let url = format!("{}{}", printed_url(up, w), wire::paths::METRICS);
            e2e::http_client::get_text(&url)
                .lines()
                .filter(|l| l.starts_with("stratus_worker_coprocessor_requests_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        })
        .sum()
}

#[test]
fn up_with_tls_runs_load_queries_offload_and_failover_and_refuses_other_callers() {
    let home = tempfile::Builder::new()
        .prefix("stratus-up-tls-")
        .tempdir()
        .expect("tempdir");
    let mut up = start_up(home.path(), &["--tls"], |_| {});
    // This process calls the nodes (status, metrics) as the cluster's admin.
    let admin = cluster_certificate(home.path(), "stratus-admin");
    harness::http::use_identity(&admin).unwrap();
    let url = |name: &str| printed_url(&up, name);
    for name in ["pd", "server-a", "worker-a1"] {
        assert!(url(name).starts_with("https://"), "{name}: {}", url(name));
    }

    // The main paths over mutual TLS: a bulk load (admin), SQL through the cluster file,
    // coprocessor requests the servers offload to workers.
    let offloaded_before = offloads_served(&up);
    // Enough rows that the servers offload the scans (`load_aware_force_blocks_size`).
    load_and_check_sum(home.path(), 30_000);
    assert!(
        offloads_served(&up) > offloaded_before,
        "no worker answered an offload over TLS"
    );

    // Each internal path refuses a certificate from another CA (the connection fails) and
    // the admin's certificate, signed by the cluster's CA but not a node's (403, the handler
    // never runs).
    let other_ca =
        harness::certs::ThrowawayCa::create(&home.path().join("other-ca"), "other").unwrap();
    let impostor = other_ca.issue("stratus-server").unwrap();
    let internal = [
        (
            "raft",
            format!("{}{}", url("server-b"), wire::paths::RAFT_BATCH),
        ),
        (
            "offload",
            format!("{}{}", url("worker-a1"), wire::paths::COPROCESSOR),
        ),
        (
            "delegate",
            format!("{}{}", url("server-a"), wire::paths::DELEGATE),
        ),
        (
            "placement",
            format!("{}{}", url("pd"), wire::paths::PD_STORE_HEARTBEAT),
        ),
    ];
    for (path, target) in &internal {
        let e = post_as(Some(&impostor), target).expect_err(path);
        assert!(e.contains("request to"), "{path}: {e}");
        assert_eq!(
            post_as(Some(&admin), target),
            Ok(403),
            "{path} as the admin"
        );
    }
    // A plain-HTTP client cannot write through a TLS server.
    let plain = url("server-a").replacen("https://", "http://", 1);
    let e = post_as(None, &format!("{plain}{}", wire::paths::RAW_LOAD)).expect_err("plain");
    assert!(e.contains("request to"), "{e}");
    // The effective config a node serves names its key file, never what is in it.
    let config = e2e::http_client::get_text(&format!("{}{}", url("server-a"), wire::paths::CONFIG));
    assert!(config.contains("stratus-server-key.pem"), "{config}");
    assert!(!config.contains("PRIVATE KEY"), "{config}");
    // Nothing the refused calls sent changed the rows.
    check_sum(home.path(), 30_000);

    // Failover over TLS: a server SIGKILLed mid-life comes back and the rows are all there.
    kill_and_see_restarted(&mut up, "server-a");
    check_sum(home.path(), 30_000);
    stop_with_sigint(up, home.path());
}
