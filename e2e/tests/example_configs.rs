//! The example configs in `examples/` are what the README tells people to copy, so they must
//! stay true: each loads through the loader its program uses and validates; its keys are
//! exactly the keys of the effective config that program prints at start (`render`), so a key
//! added to a config struct without being documented in its example fails here; every key is
//! preceded by a comment that states its default; values are the defaults except where the
//! example needs its own (addresses, zones); and the commented S3 variant of `[dfs]` parses.
//!
//! Pure file and parsing checks: no process is started.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use client::ClientConfig;
use server::config::ServerConfig;
use worker::WorkerConfig;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

fn read(name: &str) -> String {
    let path = example(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every key path of a TOML document with its value: `section.key`, tables included (their
/// value is the table), entries of arrays of tables as `key[].field`.
fn key_paths(text: &str, origin: &str) -> BTreeMap<String, toml::Value> {
    fn walk(prefix: &str, table: &toml::Table, out: &mut BTreeMap<String, toml::Value>) {
        for (key, value) in table {
            let path = format!("{prefix}{key}");
            out.insert(path.clone(), value.clone());
            match value {
                toml::Value::Table(t) => walk(&format!("{path}."), t, out),
                toml::Value::Array(items) => {
                    for item in items {
                        if let toml::Value::Table(t) = item {
                            walk(&format!("{path}[]."), t, out);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let table: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("{origin}: {e}"));
    let mut out = BTreeMap::new();
    walk("", &table, &mut out);
    out
}

/// Checks that the example's keys are the effective config's keys, and that the defaults'
/// keys are among them too.
fn assert_same_keys(name: &str, example_text: &str, effective: &str, defaults: &str) {
    let example: BTreeSet<String> = key_paths(example_text, name).into_keys().collect();
    let effective: BTreeSet<String> = key_paths(effective, "effective config")
        .into_keys()
        .collect();
    let missing: Vec<_> = effective.difference(&example).collect();
    assert!(
        missing.is_empty(),
        "{name}: keys of the effective config not written (and documented) in the example: {missing:?}"
    );
    let unknown: Vec<_> = example.difference(&effective).collect();
    assert!(
        unknown.is_empty(),
        "{name}: keys of the example the program does not know: {unknown:?}"
    );
    let defaults: BTreeSet<String> = key_paths(defaults, "default config").into_keys().collect();
    let missing: Vec<_> = defaults.difference(&example).collect();
    assert!(
        missing.is_empty(),
        "{name}: keys of the default config not written in the example: {missing:?}"
    );
}

/// Checks that every leaf value of the effective config equals the default, except under the
/// `allowed` path prefixes (what the example has to set for itself).
fn assert_defaults_except(name: &str, effective: &str, defaults: &str, allowed: &[&str]) {
    let effective = key_paths(effective, "effective config");
    let defaults = key_paths(defaults, "default config");
    let is_allowed = |path: &str| allowed.iter().any(|a| path.starts_with(a));
    for (path, value) in &effective {
        if value.is_table() || is_allowed(path) {
            continue;
        }
        assert_eq!(
            Some(value),
            defaults.get(path),
            "{name}: {path} differs from its default; set the default or explain why not"
        );
    }
}

/// Checks that every key line (`name = value`) follows a comment block that says its default.
fn assert_every_key_is_documented(name: &str, text: &str) {
    let mut comment = String::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(c) = line.strip_prefix('#') {
            comment.push_str(c);
            comment.push(' ');
            continue;
        }
        if line.is_empty() || line.starts_with('[') {
            comment.clear();
            continue;
        }
        let key = line.split('=').next().unwrap_or(line).trim();
        assert!(
            !comment.is_empty(),
            "{name}:{}: key {key} has no comment above it",
            i + 1
        );
        assert!(
            comment.contains("Default"),
            "{name}:{}: the comment above {key} does not state its default: {comment}",
            i + 1
        );
        comment.clear();
    }
}

/// The commented-out S3 variant of `[dfs]`: the `# [dfs]` line after the
/// `# --- S3 variant of [dfs] ---` marker and every `# ` line after it, uncommented.
fn s3_variant(name: &str, text: &str) -> String {
    let after = text
        .split_once("# --- S3 variant of [dfs] ---")
        .unwrap_or_else(|| panic!("{name}: no S3 variant marker"))
        .1;
    let start = after
        .find("# [dfs]\n")
        .unwrap_or_else(|| panic!("{name}: the S3 variant has no `# [dfs]` line"));
    after[start..]
        .lines()
        .map_while(|l| l.strip_prefix("# "))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn the_server_example_loads_validates_and_documents_every_key() {
    let path = example("server.toml");
    let config: ServerConfig = node::config::load(Some(&path)).unwrap();
    config.validate().unwrap();
    assert_eq!(config.zone(), types::Zone::label("a"));
    assert_eq!(config.offload_workers().len(), 1);
    let text = read("server.toml");
    let effective = node::config::render(&config);
    let defaults = node::config::render(&ServerConfig::default());
    assert_same_keys("server.toml", &text, &effective, &defaults);
    assert_defaults_except(
        "server.toml",
        &effective,
        &defaults,
        &["server.labels", "kvengine.remote-coprocessor-workers"],
    );
    assert_every_key_is_documented("server.toml", &text);
}

#[test]
fn the_worker_example_loads_validates_and_documents_every_key() {
    let path = example("worker.toml");
    let config = WorkerConfig::load(Some(&path)).unwrap();
    assert_eq!(config.zone(), types::Zone::label("a"));
    let text = read("worker.toml");
    let effective = config.render();
    let defaults = WorkerConfig::default().render();
    assert_same_keys("worker.toml", &text, &effective, &defaults);
    assert_defaults_except("worker.toml", &effective, &defaults, &["worker.labels"]);
    assert_every_key_is_documented("worker.toml", &text);
}

#[test]
fn the_server_and_the_worker_examples_share_one_object_store() {
    let server: ServerConfig = node::config::load(Some(&example("server.toml"))).unwrap();
    let worker = WorkerConfig::load(Some(&example("worker.toml"))).unwrap();
    assert_eq!(server.dfs, worker.dfs);
    let offload = server.offload_workers();
    assert_eq!(
        offload[0].addr,
        format!("http://{}/coprocessor", worker.worker.addr)
    );
    assert_eq!(offload[0].zone, worker.zone());
}

#[test]
fn the_cluster_example_loads_like_a_cluster_file_and_documents_every_key() {
    // What `cli::cluster_file::parse` does: TOML into a ClientConfig (unknown keys refused),
    // servers required, then validate.
    let text = read("cluster.toml");
    let config: ClientConfig = toml::from_str(&text).unwrap();
    assert!(!config.servers.is_empty());
    config.validate().unwrap();
    assert_eq!(config.zone(), types::Zone::label("a"));
    let server: ServerConfig = node::config::load(Some(&example("server.toml"))).unwrap();
    assert_eq!(config.servers, [format!("http://{}", server.server.addr)]);
    let effective = node::config::render(&config);
    let defaults = node::config::render(&ClientConfig::default());
    assert_same_keys("cluster.toml", &text, &effective, &defaults);
    assert_defaults_except(
        "cluster.toml",
        &effective,
        &defaults,
        &["servers", "workers", "labels"],
    );
    assert_every_key_is_documented("cluster.toml", &text);
}

#[test]
fn the_commented_s3_variants_select_s3_and_validate() {
    let server_text = s3_variant("server.toml", &read("server.toml"));
    let server: ServerConfig = node::config::parse(&server_text, "server.toml S3").unwrap();
    server.validate().unwrap();
    assert_eq!(server.dfs.s3_bucket, "stratus");
    let worker_text = s3_variant("worker.toml", &read("worker.toml"));
    let worker = WorkerConfig::parse(&worker_text, "worker.toml S3").unwrap();
    assert_eq!(worker.dfs.s3_bucket, server.dfs.s3_bucket);
    assert_eq!(worker.dfs.s3_endpoint, server.dfs.s3_endpoint);
    assert_eq!(worker.dfs.s3_prefix, server.dfs.s3_prefix);
}

#[test]
fn key_paths_see_sections_inline_tables_and_arrays_of_tables_alike() {
    let inline = key_paths(
        "labels = { zone = \"a\" }\nranges = [{ start = \"\", end = \"\" }]\n",
        "inline",
    );
    let sections = key_paths(
        "[labels]\nzone = \"a\"\n\n[[ranges]]\nstart = \"\"\nend = \"\"\n",
        "sections",
    );
    let names = |m: &BTreeMap<String, toml::Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&inline), names(&sections));
    assert_eq!(
        names(&inline),
        [
            "labels",
            "labels.zone",
            "ranges",
            "ranges[].end",
            "ranges[].start"
        ]
    );
}

#[test]
fn an_undocumented_or_default_less_key_is_caught() {
    let caught = |text: &str| {
        std::panic::catch_unwind(|| assert_every_key_is_documented("t.toml", text)).is_err()
    };
    assert!(caught("a = 1\n"));
    assert!(caught("# what a does.\na = 1\n"));
    assert!(caught("# what a does. Default 1.\n\n[s]\nb = 2\n"));
    assert!(!caught(
        "# what a does. Default 1.\na = 1\n[s]\n# b. Default 2.\nb = 2\n"
    ));
}

/// `examples/cluster-3/`: three machines, each running a placement-driver instance, a server
/// and a worker, over a three-member etcd and one S3 bucket. Each file loads and validates
/// through its program's loader, every key it writes says its default, and the files agree
/// with each other: the same etcd and placement-driver lists everywhere, the same Raft peers
/// on every server (each naming itself at its own address and zone), distinct node ids and
/// zones, one object store, and a cluster file naming all of them.
#[test]
fn the_three_machine_examples_load_document_their_keys_and_agree() {
    let name = |f: &str| format!("cluster-3/{f}");
    let mut pd_urls = Vec::new();
    let mut etcd = None;
    let mut peers = None;
    let mut dfs = None;
    let mut zones = BTreeSet::new();
    let mut servers = Vec::new();
    let mut workers = Vec::new();
    for m in 1..=3 {
        let pd_file = name(&format!("pd-{m}.toml"));
        let pd = pd::PdConfig::load(Some(&example(&pd_file))).unwrap();
        assert_every_key_is_documented(&pd_file, &read(&pd_file));
        assert_eq!(
            etcd.get_or_insert_with(|| pd.pd.etcd_endpoints.clone()),
            &pd.pd.etcd_endpoints
        );
        assert_eq!(
            pd.pd.etcd_endpoints.len(),
            3,
            "{pd_file}: a three-member etcd"
        );
        pd_urls.push(format!("http://{}", pd.pd.addr));

        let server_file = name(&format!("server-{m}.toml"));
        let server: ServerConfig = node::config::load(Some(&example(&server_file))).unwrap();
        server.validate().unwrap();
        assert_every_key_is_documented(&server_file, &read(&server_file));
        assert_eq!(u64::from(server.server.node_id), m);
        server.raft.check_member(m).unwrap();
        let me = server.raft.peer(m).unwrap();
        assert_eq!(
            me.addr,
            format!("http://{}", server.server.addr),
            "{server_file}"
        );
        assert_eq!(me.zone, server.zone(), "{server_file}");
        assert!(zones.insert(server.zone()), "{server_file}: a zone twice");
        assert_eq!(
            peers.get_or_insert_with(|| server.raft.peers.clone()),
            &server.raft.peers
        );
        assert!(!server.server.tso && !server.server.pd_endpoints.is_empty());
        assert!(
            server.dfs.s3_bucket.len() >= 3,
            "{server_file}: machines share S3"
        );
        assert_eq!(dfs.get_or_insert_with(|| server.dfs.clone()), &server.dfs);
        servers.push(format!("http://{}", server.server.addr));

        let worker_file = name(&format!("worker-{m}.toml"));
        let worker = WorkerConfig::load(Some(&example(&worker_file))).unwrap();
        assert_every_key_is_documented(&worker_file, &read(&worker_file));
        assert_eq!(
            worker.zone(),
            server.zone(),
            "{worker_file}: the server's zone"
        );
        assert_eq!(
            Some(&worker.dfs),
            dfs.as_ref(),
            "{worker_file}: the servers' store"
        );
        workers.push(format!("http://{}", worker.worker.addr));
        // Placement-driver lists are checked once all three instances are known.
        assert_eq!(worker.worker.pd_endpoints, server.server.pd_endpoints);
    }
    for m in 1..=3 {
        let server: ServerConfig =
            node::config::load(Some(&example(&name(&format!("server-{m}.toml"))))).unwrap();
        assert_eq!(server.server.pd_endpoints, pd_urls, "server-{m}.toml");
    }
    let cluster_file = name("cluster.toml");
    let text = read(&cluster_file);
    let client: ClientConfig = toml::from_str(&text).unwrap();
    client.validate().unwrap();
    assert_every_key_is_documented(&cluster_file, &text);
    assert_eq!(client.servers, servers);
    assert_eq!(client.workers, workers);
    assert_eq!(client.pd_endpoints, pd_urls);
}
