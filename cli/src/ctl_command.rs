//! `stratus ctl`: the operator's view of a cluster, read from the placement driver (like
//! pd-ctl): the registered servers (zone, regions, leaders, size; a server is listed while its
//! registration lives), the workers, the regions (range,
//! replicas, leader, epoch), the placement-driver members and their leader, and a fresh
//! timestamp. `--format json` prints the same rows as JSON for scripts.

use std::time::Duration;

use node::PdClient;
use wire::datum::Datum;
use wire::pd::ClusterView;

use crate::output_format::Format;

/// What `stratus ctl` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CtlTarget {
    /// Registered storage servers.
    Servers,
    /// Registered workers.
    Workers,
    /// The routing table.
    Regions,
    /// The placement-driver instances and the one leading.
    Members,
    /// A fresh timestamp from the TSO.
    Tso,
}

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("no placement-driver endpoint: pass --pd URL or a cluster file with pd-endpoints")]
    NoEndpoints,
    #[error(transparent)]
    Pd(#[from] node::PdClientError),
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

fn text(s: impl Into<String>) -> Datum {
    Datum::Bytes(s.into().into_bytes())
}

fn int(n: u64) -> Datum {
    Datum::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// A key as `stratus` prints keys: printable ASCII as is, other bytes `\xNN`; empty as `-∞`/`+∞`.
fn key(k: &[u8], end: bool) -> Datum {
    if k.is_empty() {
        return text(if end { "+inf" } else { "-inf" });
    }
    text(node::config::escape_key(k))
}

/// The column names and rows of `target` in `view`.
pub fn rows(target: CtlTarget, view: &ClusterView) -> (Vec<String>, Vec<Vec<Datum>>) {
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match target {
        CtlTarget::Servers => {
            let rows = view
                .stores
                .iter()
                .filter_map(|s| s.heartbeat.as_ref().map(|hb| (s, hb)))
                .map(|(s, hb)| {
                    vec![
                        int(hb.store_id),
                        text(types::zone::label(hb.zone().as_ref())),
                        int(hb.region_count),
                        int(hb.leader_count),
                        int(hb.used_size),
                        text(hb.url.clone()),
                        int(s.last_heartbeat_ms),
                    ]
                })
                .collect();
            (
                names(&[
                    "id",
                    "zone",
                    "regions",
                    "leaders",
                    "size",
                    "url",
                    "last_heartbeat_ms",
                ]),
                rows,
            )
        }
        CtlTarget::Workers => {
            let rows = view
                .workers
                .iter()
                .map(|w| {
                    vec![
                        int(w.id),
                        text(types::zone::label(w.zone().as_ref())),
                        text(w.url.clone()),
                        int(w.last_heartbeat_ms),
                    ]
                })
                .collect();
            (names(&["id", "zone", "url", "last_heartbeat_ms"]), rows)
        }
        CtlTarget::Regions => {
            let rows = view
                .regions
                .iter()
                .map(|r| {
                    let replicas = r
                        .peers
                        .iter()
                        .map(|p| {
                            if p.zone.is_empty() {
                                p.store_id.to_string()
                            } else {
                                format!("{}({})", p.store_id, p.zone)
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(",");
                    vec![
                        int(r.id),
                        key(&r.start, false),
                        key(&r.end, true),
                        text(replicas),
                        int(r.leader_store_id),
                        int(r.ver),
                        int(r.leader_term),
                        int(r.approximate_size),
                    ]
                })
                .collect();
            (
                names(&[
                    "id", "start", "end", "replicas", "leader", "epoch", "term", "size",
                ]),
                rows,
            )
        }
        CtlTarget::Members | CtlTarget::Tso => (Vec::new(), Vec::new()),
    }
}

fn render(columns: &[String], rows: &[Vec<Datum>], format: Format) -> String {
    match format {
        Format::Table => crate::table_format::render(columns, rows),
        Format::Csv => crate::csv_format::render(columns, rows),
        Format::Json => crate::json_format::render(columns, rows),
    }
}

/// Runs `stratus ctl <target>` against `endpoints`; the text to print.
pub fn run(endpoints: &[String], target: CtlTarget, format: Format) -> Result<String, CtlError> {
    if endpoints.is_empty() {
        return Err(CtlError::NoEndpoints);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CtlError::Runtime)?;
    let client = PdClient::new(endpoints, Duration::from_secs(10));
    rt.block_on(async {
        match target {
            CtlTarget::Members => {
                let members = client.members().await;
                let rows: Vec<Vec<Datum>> = members
                    .iter()
                    .map(|m| {
                        vec![
                            text(m.name.clone()),
                            text(m.url.clone()),
                            text(if m.leader == m.url {
                                "leader"
                            } else {
                                "follower"
                            }),
                            text(m.leader.clone()),
                            int(m.cluster_id),
                            text(m.store.clone()),
                        ]
                    })
                    .collect();
                let columns =
                    ["name", "url", "role", "leader", "cluster_id", "store"].map(String::from);
                Ok(render(&columns, &rows, format))
            }
            CtlTarget::Tso => {
                let ts = client.get_ts().await?;
                let t = types::Ts(ts);
                let rows = vec![vec![int(ts), int(t.physical_millis()), int(t.logical())]];
                let columns = ["ts", "physical_ms", "logical"].map(String::from);
                Ok(render(&columns, &rows, format))
            }
            target => {
                let view = client.cluster().await?;
                let (columns, rows) = rows(target, &view);
                Ok(render(&columns, &rows, format))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::pd::{StoreHeartbeat, StoreInfo};
    use wire::region::Label;
    use wire::region::{Peer, Region};

    #[test]
    fn servers_and_regions_print_one_row_each_with_zone_and_replicas() {
        let view = ClusterView {
            stores: vec![StoreInfo {
                heartbeat: Some(StoreHeartbeat {
                    store_id: 2,
                    url: "http://s2".into(),
                    labels: vec![Label {
                        key: "zone".into(),
                        value: "b".into(),
                    }],
                    region_count: 3,
                    leader_count: 1,
                    ..StoreHeartbeat::default()
                }),
                last_heartbeat_ms: 5,
                ..StoreInfo::default()
            }],
            regions: vec![Region {
                id: 101,
                ver: 2,
                start: b"k".to_vec(),
                peers: vec![
                    Peer {
                        store_id: 1,
                        addr: String::new(),
                        zone: "a".into(),
                        ..Peer::default()
                    },
                    Peer {
                        store_id: 2,
                        addr: String::new(),
                        zone: "b".into(),
                        ..Peer::default()
                    },
                ],
                leader_store_id: 2,
                ..Region::default()
            }],
            ..ClusterView::default()
        };
        let (cols, servers) = rows(CtlTarget::Servers, &view);
        let table = render(&cols, &servers, Format::Table);
        assert!(
            table.contains("| b ") && table.contains("http://s2"),
            "{table}"
        );
        let (cols, regions) = rows(CtlTarget::Regions, &view);
        let json = render(&cols, &regions, Format::Json);
        assert!(json.contains("\"replicas\":\"1(a),2(b)\""), "{json}");
        assert!(
            json.contains("\"end\":\"+inf\"") && json.contains("\"id\":101"),
            "{json}"
        );
    }

    #[test]
    fn no_endpoint_is_a_clear_error() {
        let e = run(&[], CtlTarget::Servers, Format::Table).unwrap_err();
        assert!(e.to_string().contains("--pd"), "{e}");
    }
}
