//! `stratus ctl`: the operator's view of a cluster, read from the placement driver (like
//! pd-ctl): the registered servers (zone, regions, leaders, size; a server is listed while its
//! registration lives), the workers, the regions (range,
//! replicas, leader, epoch), the operators in flight, the placement-driver members and their
//! leader, a fresh timestamp and the GC safe point. `--format json` prints the same rows as JSON for scripts.
//! `stratus ctl server drain ID` moves every replica off a server so it can be stopped
//! (`server up ID` takes it back).

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
    /// The GC safe point: no read below it (`pd::gc`).
    GcSafePoint,
    /// The scheduling operators in flight (replica and leader moves).
    Operators,
    /// `server drain ID` / `server up ID`: a server's scheduling state.
    Server,
}

/// What `stratus ctl server` does to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAction {
    Drain,
    Up,
}

/// `stratus ctl server <drain|up> ID` from its trailing words.
pub fn parse_server_action(words: &[String]) -> Result<(ServerAction, u64), CtlError> {
    let usage = |found: String| CtlError::Usage {
        expected: "server drain ID or server up ID".into(),
        found,
    };
    let [action, id] = words else {
        return Err(usage(words.join(" ")));
    };
    let action = match action.as_str() {
        "drain" => ServerAction::Drain,
        "up" => ServerAction::Up,
        other => return Err(usage(format!("server {other}"))),
    };
    let id = id
        .parse::<u64>()
        .map_err(|_| usage(format!("a server id {id:?}")))?;
    Ok((action, id))
}

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("no placement-driver endpoint: pass --pd URL or a cluster file with pd-endpoints")]
    NoEndpoints,
    #[error(transparent)]
    Pd(#[from] node::PdClientError),
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("expected {expected}, found {found:?}")]
    Usage { expected: String, found: String },
    #[error("the placement driver refused: {0}")]
    Refused(String),
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
                        text(format!("{:?}", s.state()).to_lowercase()),
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
                    "state",
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
                            let mut s = p.store_id.to_string();
                            if !p.zone.is_empty() {
                                s = format!("{s}({})", p.zone);
                            }
                            if p.is_learner() {
                                s.push_str("[learner]");
                            }
                            if p.pending {
                                s.push_str("[pending]");
                            }
                            s
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
        CtlTarget::GcSafePoint => {
            let t = types::Ts(view.gc_safe_point);
            (
                names(&["gc_safe_point", "physical_ms", "logical"]),
                vec![vec![
                    int(view.gc_safe_point),
                    int(t.physical_millis()),
                    int(t.logical()),
                ]],
            )
        }
        CtlTarget::Members | CtlTarget::Tso | CtlTarget::Operators | CtlTarget::Server => {
            (Vec::new(), Vec::new())
        }
    }
}

fn render(columns: &[String], rows: &[Vec<Datum>], format: Format) -> String {
    match format {
        Format::Table => crate::table_format::render(columns, rows),
        Format::Csv => crate::csv_format::render(columns, rows),
        Format::Json => crate::json_format::render(columns, rows),
    }
}

/// Runs `stratus ctl <target> [words]` against `endpoints`; the text to print.
pub fn run(
    endpoints: &[String],
    target: CtlTarget,
    words: &[String],
    format: Format,
) -> Result<String, CtlError> {
    if endpoints.is_empty() {
        return Err(CtlError::NoEndpoints);
    }
    let action = match target {
        CtlTarget::Server => Some(parse_server_action(words)?),
        _ if !words.is_empty() => {
            return Err(CtlError::Usage {
                expected: "no further arguments".into(),
                found: words.join(" "),
            });
        }
        _ => None,
    };
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
            CtlTarget::Operators => {
                let ops = client.operators().await?;
                let rows: Vec<Vec<Datum>> = ops
                    .operators
                    .iter()
                    .map(|o| {
                        vec![
                            int(o.region_id),
                            text(format!("{:?}", o.reason())),
                            int(o.from_store),
                            int(o.to_store),
                            text(format!("{:?}", o.step())),
                            int(o.age_ms),
                        ]
                    })
                    .collect();
                let columns =
                    ["region", "reason", "from", "to", "step", "age_ms"].map(String::from);
                Ok(render(&columns, &rows, format))
            }
            CtlTarget::Server => {
                let Some((action, id)) = action else {
                    return Err(CtlError::Usage {
                        expected: "server drain ID or server up ID".into(),
                        found: String::new(),
                    });
                };
                let state = match action {
                    ServerAction::Drain => wire::pd::StoreState::Draining,
                    ServerAction::Up => wire::pd::StoreState::Up,
                };
                client.set_store_state(id, state).await?;
                let rows = vec![vec![int(id), text(format!("{state:?}").to_lowercase())]];
                Ok(render(&["id", "state"].map(String::from), &rows, format))
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
        let safe_point = ClusterView {
            gc_safe_point: types::Ts::compose(1_000, 5).get(),
            ..ClusterView::default()
        };
        let (cols, gc) = rows(CtlTarget::GcSafePoint, &safe_point);
        let json = render(&cols, &gc, Format::Json);
        assert!(
            json.contains(&format!("\"gc_safe_point\":{}", (1_000 << 18) | 5))
                && json.contains("\"physical_ms\":1000")
                && json.contains("\"logical\":5"),
            "{json}"
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
        let e = run(&[], CtlTarget::Servers, &[], Format::Table).unwrap_err();
        assert!(e.to_string().contains("--pd"), "{e}");
    }

    #[test]
    fn a_server_action_needs_drain_or_up_and_a_numeric_id() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_server_action(&words(&["drain", "4"])).unwrap(),
            (ServerAction::Drain, 4)
        );
        assert_eq!(
            parse_server_action(&words(&["up", "12"])).unwrap(),
            (ServerAction::Up, 12)
        );
        for bad in [&["drain"][..], &["remove", "4"], &["drain", "four"], &[]] {
            let e = parse_server_action(&words(bad)).unwrap_err();
            assert!(
                e.to_string()
                    .contains("expected server drain ID or server up ID"),
                "{bad:?}: {e}"
            );
        }
        let e = run(
            &["http://127.0.0.1:1".into()],
            CtlTarget::Servers,
            &words(&["extra"]),
            Format::Table,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no further arguments"), "{e}");
    }
}
