//! The SQL front against a real server: CREATE TABLE stores the schema in the cluster, INSERT
//! writes a few hundred rows (NULLs included) over three regions, and SELECTs with every
//! supported clause return what a reference evaluation over the inserted rows computes.

use std::cmp::Ordering;

use client::sql::{self, Engine, InsertPlan, Plan, QueryResult, SqlError, TableSchema, insert};
use cop::codec::table::record_key;
use cop::datum::Datum;
use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::EntryClient;
use e2e::http_client::post_proto;
use e2e::server_proc::ServerProc;
use kvproto::paths;
use kvproto::region::{SplitRequest, SplitResponse};

const ROWS: i64 = 400;

/// One inserted row, as the reference evaluation sees it.
#[derive(Debug, Clone)]
struct Row {
    id: i64,
    g: Option<i64>,
    v: Option<f64>,
    s: Option<String>,
}

impl Row {
    fn of(id: i64) -> Row {
        Row {
            id,
            g: (id % 17 != 0).then_some(id % 7),
            // Multiples of 0.25: sums are exact in f64, whatever order they are added in.
            v: (id % 11 != 0).then_some(id as f64 * 0.5 + (id % 3) as f64 * 0.25),
            s: (id % 13 != 0).then(|| format!("k{}", id % 10)),
        }
    }

    fn sql_values(&self) -> String {
        let g = self.g.map_or("NULL".into(), |g| g.to_string());
        let v = self.v.map_or("NULL".into(), |v| format!("{v:?}"));
        let s = self.s.as_ref().map_or("NULL".into(), |s| format!("'{s}'"));
        format!("({}, {g}, {v}, {s})", self.id)
    }

    fn datums(&self) -> Vec<Datum> {
        vec![
            Datum::Int(self.id),
            int(self.g),
            real(self.v),
            bytes(&self.s),
        ]
    }
}

fn int(x: Option<i64>) -> Datum {
    x.map_or(Datum::Null, Datum::Int)
}
fn real(x: Option<f64>) -> Datum {
    x.map_or(Datum::Null, Datum::Real)
}
fn bytes(x: &Option<String>) -> Datum {
    x.as_ref()
        .map_or(Datum::Null, |s| Datum::Bytes(s.clone().into_bytes()))
}

fn split_at(server: &ServerProc, key: Vec<u8>) {
    let region = server.region_of(&key);
    let resp: SplitResponse = post_proto(
        &server.url(paths::SPLIT),
        &SplitRequest {
            region_id: region.id,
            split_key: key,
        },
    );
    assert!(
        resp.error.is_empty() && resp.region_error.is_none(),
        "{resp:?}"
    );
}

fn run(c: &EntryClient, sql: &str) -> QueryResult {
    c.block_on(Engine::new(&c.client).execute(sql))
        .unwrap_or_else(|e| panic!("{sql}: {}", service::error_chain(&e)))
}

fn fails(c: &EntryClient, sql: &str) -> SqlError {
    match c.block_on(Engine::new(&c.client).execute(sql)) {
        Ok(r) => panic!("{sql}: expected an error, got {r:?}"),
        Err(e) => e,
    }
}

/// Aggregates of `rows` in the order `COUNT(*), COUNT(v), SUM(g), MIN(s), MAX(v), AVG(g)`.
fn reference_aggregates(rows: &[&Row]) -> Vec<Datum> {
    let gs: Vec<i64> = rows.iter().filter_map(|r| r.g).collect();
    let vs: Vec<f64> = rows.iter().filter_map(|r| r.v).collect();
    let min_s = rows.iter().filter_map(|r| r.s.clone()).min();
    vec![
        Datum::Int(rows.len() as i64),
        Datum::Int(vs.len() as i64),
        if gs.is_empty() {
            Datum::Null
        } else {
            Datum::Int(gs.iter().sum())
        },
        bytes(&min_s),
        real(vs.iter().copied().reduce(f64::max)),
        if gs.is_empty() {
            Datum::Null
        } else {
            Datum::Real(gs.iter().sum::<i64>() as f64 / gs.len() as f64)
        },
    ]
}

fn sql_order(a: &Datum, b: &Datum) -> Ordering {
    a.sql_cmp(b)
}

#[test]
fn create_insert_and_select_with_every_clause_match_a_reference_evaluation() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    let c = EntryClient::new(&[&server], |_| {});

    let created = run(
        &c,
        "CREATE TABLE items (id BIGINT PRIMARY KEY, g INT, v DOUBLE, s VARCHAR(16))",
    );
    assert_eq!(created, QueryResult::default());
    let schema = c
        .block_on(Engine::new(&c.client).table("ITEMS"))
        .unwrap()
        .expect("the schema is stored in the cluster");
    assert_eq!(schema.columns.len(), 4);
    assert!(matches!(
        fails(&c, "create table items (id int primary key)"),
        SqlError::TableExists { .. }
    ));
    // The table spans three regions.
    split_at(&server, record_key(schema.id, 100));
    split_at(&server, record_key(schema.id, 250));
    assert_eq!(server.regions().regions.len(), 3);

    let rows: Vec<Row> = (0..ROWS).map(Row::of).collect();
    let first: Vec<String> = rows[..200].iter().map(Row::sql_values).collect();
    let r = run(
        &c,
        &format!("INSERT INTO items VALUES {}", first.join(", ")),
    );
    assert_eq!(r.affected_rows, 200);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    server.flush();
    // The rest with a column list in another order.
    let rest: Vec<String> = rows[200..]
        .iter()
        .map(|r| {
            let s = r.s.as_ref().map_or("NULL".into(), |s| format!("'{s}'"));
            let v = r.v.map_or("NULL".into(), |v| format!("{v:?}"));
            let g = r.g.map_or("NULL".into(), |g| g.to_string());
            format!("({s}, {v}, {}, {g})", r.id)
        })
        .collect();
    let r = run(
        &c,
        &format!("INSERT INTO items (s, v, id, g) VALUES {}", rest.join(", ")),
    );
    assert_eq!(r.affected_rows, 200);

    // Every row, ordered in the client.
    let r = run(&c, "SELECT * FROM items ORDER BY id");
    assert_eq!(r.columns, vec!["id", "g", "v", "s"]);
    assert_eq!(r.rows, rows.iter().map(Row::datums).collect::<Vec<_>>());

    // WHERE with AND / OR / <> / IS NOT NULL, ORDER BY ... DESC + LIMIT (a TopN).
    let r = run(
        &c,
        "SELECT s, id FROM items WHERE g >= 3 AND (v < 50.5 OR s = 'k3') \
         AND g <> 5 AND s IS NOT NULL ORDER BY id DESC LIMIT 25",
    );
    let mut want: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.g.is_some_and(|g| g >= 3 && g != 5)
                && (r.v.is_some_and(|v| v < 50.5) || r.s.as_deref() == Some("k3"))
                && r.s.is_some()
        })
        .collect();
    want.sort_by_key(|r| std::cmp::Reverse(r.id));
    want.truncate(25);
    assert_eq!(
        r.rows,
        want.iter()
            .map(|r| vec![bytes(&r.s), Datum::Int(r.id)])
            .collect::<Vec<_>>()
    );
    assert_eq!(r.columns, vec!["s", "id"]);

    // LIMIT alone: any 10 qualifying rows, each once.
    let r = run(
        &c,
        "SELECT id, g FROM items WHERE g = 2 OR g IS NULL LIMIT 10",
    );
    assert_eq!(r.rows.len(), 10);
    let mut seen = std::collections::BTreeSet::new();
    for row in &r.rows {
        let Datum::Int(id) = row[0] else {
            panic!("{row:?}")
        };
        assert!(seen.insert(id));
        let g = Row::of(id).g;
        assert!(g == Some(2) || g.is_none(), "{row:?}");
        assert_eq!(row[1], int(g));
    }

    // Aggregates without GROUP BY, over rows in every region.
    let r = run(
        &c,
        "SELECT COUNT(*), COUNT(v), SUM(g), MIN(s), MAX(v), AVG(g) FROM items WHERE id < 300",
    );
    let want: Vec<&Row> = rows.iter().filter(|r| r.id < 300).collect();
    assert_eq!(r.rows, vec![reference_aggregates(&want)]);

    // Over no rows: one row, COUNT 0 and NULLs.
    let r = run(
        &c,
        "SELECT COUNT(*), SUM(v), AVG(v) FROM items WHERE id > 100000",
    );
    assert_eq!(r.rows, vec![vec![Datum::Int(0), Datum::Null, Datum::Null]]);

    // GROUP BY with ORDER BY an aggregate alias, DESC, a tie-breaker, and LIMIT.
    let r = run(
        &c,
        "SELECT g, COUNT(*) AS n, SUM(v), AVG(v), MIN(id), MAX(s) FROM items \
         GROUP BY g ORDER BY n DESC, g LIMIT 4",
    );
    assert_eq!(
        r.columns,
        vec!["g", "n", "SUM(v)", "AVG(v)", "MIN(id)", "MAX(s)"]
    );
    let mut groups: Vec<Option<i64>> = rows.iter().map(|r| r.g).collect();
    groups.sort();
    groups.dedup();
    let mut want: Vec<Vec<Datum>> = groups
        .iter()
        .map(|&g| {
            let members: Vec<&Row> = rows.iter().filter(|r| r.g == g).collect();
            let vs: Vec<f64> = members.iter().filter_map(|r| r.v).collect();
            let sum = vs.iter().sum::<f64>();
            vec![
                int(g),
                Datum::Int(members.len() as i64),
                if vs.is_empty() {
                    Datum::Null
                } else {
                    Datum::Real(sum)
                },
                if vs.is_empty() {
                    Datum::Null
                } else {
                    Datum::Real(sum / vs.len() as f64)
                },
                Datum::Int(members.iter().map(|r| r.id).min().unwrap()),
                bytes(&members.iter().filter_map(|r| r.s.clone()).max()),
            ]
        })
        .collect();
    want.sort_by(|a, b| sql_order(&b[1], &a[1]).then(sql_order(&a[0], &b[0])));
    want.truncate(4);
    assert_eq!(r.rows, want);

    // GROUP BY ordered by an output position and an aggregate not in the select list.
    let r = run(
        &c,
        "SELECT g, MAX(v) FROM items WHERE s IS NOT NULL AND g IS NOT NULL \
         GROUP BY g ORDER BY 2 DESC, MIN(id)",
    );
    let mut want: Vec<(Datum, Datum, i64)> = (0..7)
        .map(|g| {
            let m: Vec<&Row> = rows
                .iter()
                .filter(|r| r.s.is_some() && r.g == Some(g))
                .collect();
            (
                Datum::Int(g),
                real(m.iter().filter_map(|r| r.v).reduce(f64::max)),
                m.iter().map(|r| r.id).min().unwrap(),
            )
        })
        .collect();
    want.sort_by(|a, b| sql_order(&b.1, &a.1).then(a.2.cmp(&b.2)));
    assert_eq!(
        r.rows,
        want.into_iter()
            .map(|(g, m, _)| vec![g, m])
            .collect::<Vec<_>>()
    );

    // A string comparison and ORDER BY a VARCHAR column without LIMIT (sorted in the client).
    let r = run(
        &c,
        "SELECT id, s FROM items WHERE s >= 'k7' AND id <= 60 ORDER BY s DESC, id",
    );
    let mut want: Vec<&Row> = rows
        .iter()
        .filter(|r| r.s.as_deref().is_some_and(|s| s >= "k7") && r.id <= 60)
        .collect();
    want.sort_by(|a, b| b.s.cmp(&a.s).then(a.id.cmp(&b.id)));
    assert_eq!(
        r.rows,
        want.iter()
            .map(|r| vec![Datum::Int(r.id), bytes(&r.s)])
            .collect::<Vec<_>>()
    );

    // IN lists and LIKE, negated too.
    let r = run(
        &c,
        "SELECT id FROM items WHERE g NOT IN (1, 3, 5) AND s LIKE 'k_' AND s NOT LIKE '%2' \
         AND id IN (5, 6, 7, 8, 9, 10, 120, 121, 122, 123, 260, 261, 262, 263, 264) ORDER BY id",
    );
    let ids = [
        5, 6, 7, 8, 9, 10, 120, 121, 122, 123, 260, 261, 262, 263, 264,
    ];
    let want: Vec<Vec<Datum>> = rows
        .iter()
        .filter(|r| {
            r.g.is_some_and(|g| ![1, 3, 5].contains(&g))
                && r.s
                    .as_deref()
                    .is_some_and(|s| s.len() == 2 && !s.ends_with('2'))
                && ids.contains(&r.id)
        })
        .map(|r| vec![Datum::Int(r.id)])
        .collect();
    assert!(!want.is_empty());
    assert_eq!(r.rows, want);

    // Errors name what is wrong, and nothing is written.
    let e = fails(&c, "SELECT * FROM items WHERE g IN (SELECT g FROM items)");
    assert!(matches!(e, SqlError::Unsupported { .. }), "{e}");
    assert!(matches!(
        fails(&c, "SELECT * FROM nope"),
        SqlError::UnknownTable { .. }
    ));
    assert!(matches!(
        fails(&c, "INSERT INTO items (id, g) VALUES (1, 'x')"),
        SqlError::Type { .. }
    ));
    let e = fails(&c, "INSERT INTO items (id, g) VALUES (100000, 1), (17, 1)");
    assert!(
        matches!(e, SqlError::DuplicateKey { key: 17, .. }),
        "an existing primary key is refused: {e}"
    );
    let r = run(&c, "SELECT COUNT(*), SUM(g) FROM items");
    let sum_g: i64 = rows.iter().filter_map(|r| r.g).sum();
    assert_eq!(r.rows, vec![vec![Datum::Int(ROWS), Datum::Int(sum_g)]]);

    // Another entry node finds the table in the cluster's catalog.
    let other = EntryClient::new(&[&server], |_| {});
    let r = run(&other, "SELECT COUNT(*), SUM(g) FROM items");
    assert_eq!(r.rows, vec![vec![Datum::Int(ROWS), Datum::Int(sum_g)]]);
}

/// Plans an INSERT of rows `ids` of [`Row::of`] into `items`.
fn insert_plan(schema: &TableSchema, ids: std::ops::Range<i64>) -> InsertPlan {
    let values: Vec<String> = ids.map(|id| Row::of(id).sql_values()).collect();
    let stmt = sql::parse(&format!("INSERT INTO items VALUES {}", values.join(", "))).unwrap();
    match sql::plan(&stmt, &|_| Some(schema.clone())).unwrap() {
        Plan::Insert(p) => p,
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_insert_commits_in_one_phase_in_one_region_and_in_two_across_regions() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    let c = EntryClient::new(&[&server], |_| {});
    run(
        &c,
        "CREATE TABLE items (id BIGINT PRIMARY KEY, g INT, v DOUBLE, s VARCHAR(16))",
    );
    let schema = c
        .block_on(Engine::new(&c.client).table("items"))
        .unwrap()
        .unwrap();
    split_at(&server, record_key(schema.id, 50));
    split_at(&server, record_key(schema.id, 70));

    let one = c
        .block_on(insert::write(&c.client, &insert_plan(&schema, 0..50)))
        .unwrap();
    assert!(one.one_pc, "rows of one region commit in one phase");
    let two = c
        .block_on(insert::write(&c.client, &insert_plan(&schema, 50..90)))
        .unwrap();
    assert!(!two.one_pc, "rows of two regions commit in two phases");
    assert_eq!(two.rows, 40);
    assert!(two.warnings.is_empty(), "{:?}", two.warnings);

    // Every key is committed: a read at a fresh timestamp meets no lock.
    let ts = server.tso();
    for id in 0..90 {
        let got = server.get(&record_key(schema.id, id), ts);
        assert!(got.error.is_none(), "id={id}: {:?}", got.error);
        assert!(got.found, "id={id}");
    }
    let r = run(&c, "SELECT COUNT(*), MIN(id), MAX(id) FROM items");
    assert_eq!(
        r.rows,
        vec![vec![Datum::Int(90), Datum::Int(0), Datum::Int(89)]]
    );
}
