//! The SQL front (DataFusion over the coprocessor, `sqlfront`) in process against a real
//! server: CREATE TABLE stores the schema in the cluster, INSERT writes a few hundred rows
//! (NULLs included) over three regions, and SELECTs with every clause return what a reference
//! evaluation over the inserted rows computes.
//! UPDATE and DELETE change exactly the rows a model of the table says (every later SELECT is
//! checked against the model), on the server path and on the delegate path; SET, SHOW
//! VARIABLES, `SELECT @@var` and SHOW WARNINGS act on the engine's session; a write whose read
//! is older than a row's last commit is a write conflict.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod front_client;

use std::cmp::Ordering;

use client::sql::{
    self, CommitMode, CommitOptions, InsertPlan, Plan, QueryResult, RowWrite, SqlError,
    TableSchema, insert,
};
use e2e::cluster::{Cluster, StoreKind};
use e2e::server_proc::ServerProc;
use e2e::transactions::{abandoned_prewrite, delete};
use front_client::FrontClient;
use sqlfront::{FrontError, FrontSession};
use wire::codec::table::record_key;
use wire::datum::Datum;

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

/// Runs `sql` in a session of its own.
fn run(c: &FrontClient, sql: &str) -> QueryResult {
    c.exec(&mut c.session(), sql)
}

fn fails(c: &FrontClient, sql: &str) -> FrontError {
    exec_err(c, &mut c.session(), sql)
}

/// The statement error inside a front error.
fn sql_error(e: FrontError) -> SqlError {
    match e {
        FrontError::Sql(e) => e,
        other => panic!("expected a statement error, found {other}"),
    }
}

/// The stored schema of `name`.
fn schema_of(c: &FrontClient, name: &str) -> TableSchema {
    c.block_on(sql::catalog::load(c.client, name))
        .unwrap()
        .expect("the schema is stored in the cluster")
}

/// Whether `got` holds the rows of `want`: cells equal, or numbers within 5e-5 (an AVG of
/// integers is a DECIMAL rounded to 4 places, as in MySQL, where the reference computes a
/// double; an exact SUM may come back as its decimal text).
fn same_rows(got: &[Vec<Datum>], want: &[Vec<Datum>]) -> bool {
    let num = |d: &Datum| match d {
        Datum::Int(v) => Some(*v as f64),
        Datum::Real(v) => Some(*v),
        Datum::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    };
    got.len() == want.len()
        && got.iter().zip(want).all(|(g, w)| {
            g.len() == w.len()
                && g.iter().zip(w).all(|(a, b)| {
                    a == b
                        || matches!((num(a), num(b)), (Some(x), Some(y))
                            if !matches!(b, Datum::Bytes(_)) && (x - y).abs() <= 5e-5)
                })
        })
}

#[track_caller]
fn assert_rows(got: &QueryResult, want: &[Vec<Datum>], what: &str) {
    assert!(
        same_rows(&got.rows, want),
        "{what}:\n got {:?}\nwant {want:?}",
        got.rows
    );
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
    let c = FrontClient::new(&[&server], |_| {});

    let created = run(
        &c,
        "CREATE TABLE items (id BIGINT PRIMARY KEY, g INT, v DOUBLE, s VARCHAR(16))",
    );
    assert_eq!(created, QueryResult::default());
    let schema = schema_of(&c, "ITEMS");
    assert_eq!(schema.columns.len(), 4);
    assert_eq!(schema.id, 1, "table ids are sequential from 1");
    assert!(matches!(
        sql_error(fails(&c, "create table items (id int primary key)")),
        SqlError::TableExists { .. }
    ));
    // The table spans three regions.
    assert!(server.split_at(record_key(schema.id, 100)));
    assert!(server.split_at(record_key(schema.id, 250)));
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
    assert_rows(&r, &[reference_aggregates(&want)], "aggregates");

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
    assert_rows(&r, &want, "GROUP BY ... ORDER BY n DESC, g LIMIT 4");

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

    // A subquery (DataFusion's: the front has no planner of its own).
    let r = run(
        &c,
        "SELECT COUNT(*) FROM items WHERE g IN (SELECT g FROM items WHERE id < 10)",
    );
    let firsts: Vec<i64> = rows[..10].iter().filter_map(|r| r.g).collect();
    let n = rows
        .iter()
        .filter(|r| r.g.is_some_and(|g| firsts.contains(&g)))
        .count();
    assert_eq!(r.rows, vec![vec![Datum::Int(n as i64)]]);

    // Errors name what is wrong, and nothing is written.
    assert!(matches!(
        sql_error(fails(&c, "SELECT * FROM nope")),
        SqlError::UnknownTable { .. }
    ));
    assert!(matches!(
        sql_error(fails(&c, "INSERT INTO items (id, g) VALUES (1, 'x')")),
        SqlError::Type { .. }
    ));
    let e = sql_error(fails(
        &c,
        "INSERT INTO items (id, g) VALUES (100000, 1), (17, 1)",
    ));
    assert!(
        matches!(e, SqlError::DuplicateKey { key: 17, .. }),
        "an existing primary key is refused: {e}"
    );
    let r = run(&c, "SELECT COUNT(*), SUM(g) FROM items");
    let sum_g: i64 = rows.iter().filter_map(|r| r.g).sum();
    let want = [vec![Datum::Int(ROWS), Datum::Int(sum_g)]];
    assert_rows(&r, &want, "nothing written");

    // Another entry node finds the table in the cluster's catalog.
    let other = FrontClient::new(&[&server], |_| {});
    let r = run(&other, "SELECT COUNT(*), SUM(g) FROM items");
    assert_rows(&r, &want, "another entry node");
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
    let c = FrontClient::new(&[&server], |_| {});
    run(
        &c,
        "CREATE TABLE items (id BIGINT PRIMARY KEY, g INT, v DOUBLE, s VARCHAR(16))",
    );
    let schema = schema_of(&c, "items");
    assert!(server.split_at(record_key(schema.id, 50)));
    assert!(server.split_at(record_key(schema.id, 70)));

    let one = c
        .block_on(insert::write(
            c.client,
            &insert_plan(&schema, 0..50),
            CommitOptions::default(),
        ))
        .unwrap();
    assert_eq!(
        one.mode,
        CommitMode::OnePc,
        "rows of one region commit in one phase"
    );
    let two = c
        .block_on(insert::write(
            c.client,
            &insert_plan(&schema, 50..90),
            CommitOptions::default(),
        ))
        .unwrap();
    assert_eq!(
        two.mode,
        CommitMode::TwoPc,
        "rows of two regions commit in two phases"
    );
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

/// Async-commit prewrites the server answered, as it counts them.
const ASYNC_PREWRITES: &str = "stratus_server_txn_async_commit_prewrites_total";

#[test]
fn a_session_with_async_commit_on_commits_statements_over_several_regions_with_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    let c = FrontClient::new(&[&server], |_| {});
    let mut e = c.session();
    exec(
        &c,
        &mut e,
        "CREATE TABLE acct (id BIGINT PRIMARY KEY, v BIGINT)",
    );
    let schema = schema_of(&c, "acct");
    assert!(server.split_at(record_key(schema.id, 10)));
    let async_prewrites = || server.metric(ASYNC_PREWRITES, &[]);

    let r = exec(&c, &mut e, "SHOW VARIABLES LIKE 'tidb_enable_async_commit'");
    assert_eq!(
        r.rows,
        vec![vec![text("tidb_enable_async_commit"), text("OFF")]],
        "off by default"
    );
    let err = exec_err(&c, &mut e, "SET tidb_enable_async_commit = 2");
    assert!(err.to_string().contains("allowed=ON,OFF"), "{err}");
    exec(&c, &mut e, "INSERT INTO acct VALUES (1, 0), (11, 0)");
    assert_eq!(async_prewrites(), 0.0, "OFF: 2PC across regions");

    exec(&c, &mut e, "SET tidb_enable_async_commit = ON");
    let r = exec(&c, &mut e, "SELECT @@tidb_enable_async_commit");
    assert_eq!(r.rows, vec![vec![text("ON")]]);
    let r = exec(&c, &mut e, "INSERT INTO acct VALUES (2, 5), (12, 7)");
    assert_eq!(r.affected_rows, 2);
    assert_eq!(async_prewrites(), 2.0, "one async prewrite per region");
    let r = exec(
        &c,
        &mut e,
        "UPDATE acct SET v = v + 1 WHERE id IN (1, 2, 11, 12)",
    );
    assert_eq!(r.affected_rows, 4);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(async_prewrites(), 4.0);
    exec(&c, &mut e, "UPDATE acct SET v = v + 1 WHERE id IN (1, 2)");
    assert_eq!(
        async_prewrites(),
        4.0,
        "one region: 1PC, even with async commit ON"
    );

    // Acknowledged means visible, to this session and to any later reader, with no lock left.
    let r = exec(&c, &mut e, "SELECT id, v FROM acct ORDER BY id");
    let int = |v| Datum::Int(v);
    assert_eq!(
        r.rows,
        vec![
            vec![int(1), int(2)],
            vec![int(2), int(7)],
            vec![int(11), int(1)],
            vec![int(12), int(8)],
        ]
    );
    let ts = server.tso();
    for id in [1, 2, 11, 12] {
        let got = server.get(&record_key(schema.id, id), ts);
        assert!(got.error.is_none(), "id={id}: {:?}", got.error);
    }
    // A new session starts from GLOBAL (OFF): 2PC again.
    let mut fresh = c.session();
    exec(
        &c,
        &mut fresh,
        "UPDATE acct SET v = v + 1 WHERE id IN (1, 11)",
    );
    assert_eq!(async_prewrites(), 4.0);
}

fn text(s: &str) -> Datum {
    Datum::Bytes(s.as_bytes().to_vec())
}

/// Runs `sql` on `engine` (one session: its variables and warnings carry over).
fn exec(c: &FrontClient, engine: &mut FrontSession, sql: &str) -> QueryResult {
    c.exec(engine, sql)
}

fn exec_err(c: &FrontClient, engine: &mut FrontSession, sql: &str) -> FrontError {
    match c.try_exec(engine, sql) {
        Ok(r) => panic!("{sql}: expected an error, got {r:?}"),
        Err(e) => e,
    }
}

fn sum_real(xs: impl Iterator<Item = f64>) -> Datum {
    let xs: Vec<f64> = xs.collect();
    if xs.is_empty() {
        Datum::Null
    } else {
        Datum::Real(xs.iter().sum())
    }
}

/// Every SELECT of the battery against the reference evaluation over `model` (the rows the
/// table must hold, by id).
fn check_selects(c: &FrontClient, engine: &mut FrontSession, model: &[Row], when: &str) {
    let r = exec(c, engine, "SELECT * FROM items ORDER BY id");
    let want: Vec<Vec<Datum>> = model.iter().map(Row::datums).collect();
    assert_eq!(r.rows, want, "{when}: every row");

    let r = exec(
        c,
        engine,
        "SELECT g, COUNT(*) AS n, SUM(v), MIN(id), MAX(s) FROM items WHERE id <> 7 \
         GROUP BY g ORDER BY g",
    );
    let mut groups: Vec<Option<i64>> = model.iter().map(|r| r.g).collect();
    groups.sort();
    groups.dedup();
    let want: Vec<Vec<Datum>> = groups
        .iter()
        .filter_map(|&g| {
            let m: Vec<&Row> = model.iter().filter(|r| r.g == g && r.id != 7).collect();
            (!m.is_empty()).then(|| {
                vec![
                    int(g),
                    Datum::Int(m.len() as i64),
                    sum_real(m.iter().filter_map(|r| r.v)),
                    Datum::Int(m.iter().map(|r| r.id).min().unwrap()),
                    bytes(&m.iter().filter_map(|r| r.s.clone()).max()),
                ]
            })
        })
        .collect();
    assert_rows(&r, &want, &format!("{when}: GROUP BY"));

    let r = exec(
        c,
        engine,
        "SELECT COUNT(*), COUNT(v), SUM(g), MIN(s), MAX(v), AVG(g) FROM items WHERE id < 200",
    );
    let want: Vec<&Row> = model.iter().filter(|r| r.id < 200).collect();
    assert_rows(
        &r,
        &[reference_aggregates(&want)],
        &format!("{when}: aggregates"),
    );

    let r = exec(
        c,
        engine,
        "SELECT id, v FROM items WHERE g > 2 AND v IS NOT NULL ORDER BY v DESC, id LIMIT 7",
    );
    let mut want: Vec<&Row> = model
        .iter()
        .filter(|r| r.g.is_some_and(|g| g > 2) && r.v.is_some())
        .collect();
    want.sort_by(|a, b| b.v.partial_cmp(&a.v).unwrap().then(a.id.cmp(&b.id)));
    want.truncate(7);
    assert_eq!(
        r.rows,
        want.iter()
            .map(|r| vec![Datum::Int(r.id), real(r.v)])
            .collect::<Vec<_>>(),
        "{when}: TopN"
    );

    // Bounds on the primary key narrow the key ranges read (across the region boundaries at
    // 100 and 250); the rows must be exactly those of a full-table filter.
    for (cond, keep) in [
        (
            "id BETWEEN 90 AND 260 AND id <> 100",
            &(|id: i64| (90..=260).contains(&id) && id != 100) as &dyn Fn(i64) -> bool,
        ),
        ("id IN (3, 99, 100, 251, 9999) OR id = 5", &|id| {
            [3, 99, 100, 251, 9999, 5].contains(&id)
        }),
        ("id >= 240 AND 260 > id AND g IS NOT NULL", &|id| {
            (240..260).contains(&id) && model.iter().any(|r| r.id == id && r.g.is_some())
        }),
        ("id < -5", &|id| id < -5),
    ] {
        let r = exec(
            c,
            engine,
            &format!("SELECT id FROM items WHERE {cond} ORDER BY id"),
        );
        let want: Vec<Vec<Datum>> = model
            .iter()
            .filter(|r| keep(r.id))
            .map(|r| vec![Datum::Int(r.id)])
            .collect();
        assert_eq!(r.rows, want, "{when}: {cond}");
    }
}

#[test]
fn update_and_delete_change_exactly_the_matching_rows_and_session_statements_steer_reads() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    let worker = e2e::worker_proc::WorkerProc::start(&cluster.worker_config("worker"));
    // No zone label: a zone policy on the delegate path is ignored, with a warning.
    let c = FrontClient::new(&[&server], |cfg| {
        cfg.workers = vec![worker.base_url().to_string()];
    });
    let mut engine = c.session();
    let e = &mut engine;
    exec(
        &c,
        e,
        "CREATE TABLE items (id BIGINT PRIMARY KEY, g INT, v DOUBLE, s VARCHAR(16))",
    );
    let schema = schema_of(&c, "items");
    assert!(server.split_at(record_key(schema.id, 100)));
    assert!(server.split_at(record_key(schema.id, 200)));
    let mut model: Vec<Row> = (0..300).map(Row::of).collect();
    let values: Vec<String> = model.iter().map(Row::sql_values).collect();
    let r = exec(
        &c,
        e,
        &format!("INSERT INTO items VALUES {}", values.join(", ")),
    );
    assert_eq!(r.affected_rows, 300);
    server.flush();
    check_selects(&c, e, &model, "after the insert");

    // UPDATE over every region: arithmetic on two columns, NULL arithmetic stays NULL.
    let r = exec(
        &c,
        e,
        "UPDATE items SET v = v + 1, g = g * 2 WHERE g >= 4 AND s <> 'k3'",
    );
    let mut changed = 0;
    for row in &mut model {
        if row.g.is_some_and(|g| g >= 4) && row.s.as_deref().is_some_and(|s| s != "k3") {
            row.v = row.v.map(|v| v + 1.0);
            row.g = row.g.map(|g| g * 2);
            changed += 1;
        }
    }
    assert!(changed > 50, "{changed}");
    assert_eq!(r.affected_rows, changed);
    check_selects(&c, e, &model, "after the arithmetic UPDATE");

    // A literal assignment; rows whose value does not change are not counted.
    let r = exec(
        &c,
        e,
        "UPDATE items SET s = 'k1' WHERE id IN (1, 11, 21, 150, 151, 299) OR id = 298",
    );
    let ids = [1, 11, 21, 150, 151, 299, 298];
    let want = model
        .iter()
        .filter(|r| ids.contains(&r.id) && r.s.as_deref() != Some("k1"))
        .count() as u64;
    for row in model.iter_mut().filter(|r| ids.contains(&r.id)) {
        row.s = Some("k1".into());
    }
    assert_eq!(r.affected_rows, want);
    assert!(want < ids.len() as u64, "some rows already held k1");
    assert_eq!(
        exec(&c, e, "UPDATE items SET s = s WHERE id < 50").affected_rows,
        0
    );
    check_selects(&c, e, &model, "after the literal UPDATE");

    // Refused updates write nothing.
    let err = exec_err(&c, e, "UPDATE items SET id = id + 1000 WHERE id = 5");
    assert!(
        matches!(err, FrontError::Unsupported { .. }) && err.to_string().contains("primary key"),
        "{err}"
    );
    let err = sql_error(exec_err(&c, e, "UPDATE items SET g = 'x'"));
    assert!(
        matches!(&err, SqlError::BadValue { column, .. } if column == "g"),
        "{err}"
    );
    let err = exec_err(
        &c,
        e,
        "UPDATE items SET g = g * 1000000000 WHERE g IS NOT NULL",
    );
    assert!(err.to_string().contains("out of INT range"), "{err}");
    check_selects(&c, e, &model, "after refused updates");

    // DELETE with a WHERE spanning regions, then through the delegate path.
    let r = exec(&c, e, "DELETE FROM items WHERE v IS NULL OR id >= 280");
    let before = model.len();
    model.retain(|r| !(r.v.is_none() || r.id >= 280));
    assert_eq!(r.affected_rows, (before - model.len()) as u64);
    check_selects(&c, e, &model, "after the DELETE");

    // Session variables: defaults from the client config, SESSION changes, bad values named.
    let r = exec(&c, e, "SHOW VARIABLES LIKE 'stratus\\_paging%'");
    assert_eq!(r.columns, vec!["Variable_name", "Value"]);
    assert_eq!(
        r.rows,
        vec![
            vec![text("stratus_paging_initial_size"), text("128")],
            vec![text("stratus_paging_max_size"), text("50000")],
        ]
    );
    exec(&c, e, "SET SESSION stratus_paging_initial_size = 4");
    exec(&c, e, "SET @@stratus_paging_max_size = 16");
    exec(&c, e, "SET @@session.stratus_cop_cache = 'off'");
    let err = exec_err(&c, e, "SET stratus_paging_initial_size = 100");
    assert!(
        err.to_string().contains("stratus_paging_initial_size")
            && err.to_string().contains("stratus_paging_max_size (16)"),
        "{err}"
    );
    let r = exec(&c, e, "SHOW WARNINGS");
    assert_eq!(r.columns, vec!["Level", "Code", "Message"]);
    assert_eq!(
        r.rows,
        vec![vec![
            text("Error"),
            // MySQL's ER_WRONG_VALUE_FOR_VAR.
            Datum::Int(1231),
            text(&err.to_string())
        ]]
    );
    let r = exec(&c, e, "SHOW SESSION VARIABLES LIKE 'STRATUS%'");
    assert_eq!(
        r.rows,
        vec![
            vec![text("stratus_cop_cache"), text("OFF")],
            vec![text("stratus_paging_initial_size"), text("4")],
            vec![text("stratus_paging_max_size"), text("16")],
            vec![text("stratus_remote_coprocessor"), text("OFF")],
        ]
    );
    let r = exec(
        &c,
        e,
        "SELECT @@stratus_paging_max_size, @@global.stratus_cop_cache",
    );
    assert_eq!(r.rows, vec![vec![text("16"), text("ON")]]);
    // Small pages and no cache: same answers, and the cache is neither read nor filled.
    let cache_before = c.client.cop_cache().stats();
    check_selects(&c, e, &model, "with small pages and the cache off");
    let cache_after = c.client.cop_cache().stats();
    assert_eq!(
        (cache_after.hits, cache_after.misses, cache_after.stored),
        (cache_before.hits, cache_before.misses, cache_before.stored),
        "stratus_cop_cache=OFF"
    );

    // GLOBAL: stored for new sessions, this one unchanged.
    exec(&c, e, "SET GLOBAL stratus_paging_max_size = 1000");
    let r = exec(
        &c,
        e,
        "SHOW GLOBAL VARIABLES LIKE 'stratus_paging_max_size'",
    );
    assert_eq!(
        r.rows,
        vec![vec![text("stratus_paging_max_size"), text("1000")]]
    );
    let r = exec(&c, e, "SELECT @@stratus_paging_max_size");
    assert_eq!(r.rows, vec![vec![text("16")]]);
    let mut fresh = c.session();
    let r = exec(&c, &mut fresh, "SELECT @@session.stratus_paging_max_size");
    assert_eq!(r.rows, vec![vec![text("1000")]]);

    // The delegate path with a zone policy the entry node can't apply: reads and writes work,
    // and SHOW WARNINGS lists the node selection's warning until the next statement.
    exec(&c, e, "SET stratus_remote_coprocessor = ON");
    exec(
        &c,
        e,
        "SET tidb_tiflash_node_selection_policy = only_local_zone_nodes",
    );
    const IGNORED: &str = "The variable tidb_tiflash_node_selection_policy is ignored.";
    let r = exec(
        &c,
        e,
        "UPDATE items SET g = g + 1 WHERE id >= 100 AND id <= 120",
    );
    assert_eq!(r.warnings, [IGNORED]);
    let mut changed = 0;
    for row in model.iter_mut().filter(|r| (100..=120).contains(&r.id)) {
        if let Some(g) = row.g.as_mut() {
            *g += 1;
            changed += 1;
        }
    }
    assert_eq!(r.affected_rows, changed);
    let want = vec![vec![text("Warning"), Datum::Int(1105), text(IGNORED)]];
    assert_eq!(exec(&c, e, "SHOW WARNINGS").rows, want);
    assert_eq!(
        exec(&c, e, "SHOW WARNINGS").rows,
        want,
        "SHOW WARNINGS keeps the list"
    );
    let r = exec(&c, e, "DELETE FROM items WHERE s = 'k1'");
    let before = model.len();
    model.retain(|r| r.s.as_deref() != Some("k1"));
    assert_eq!(r.affected_rows, (before - model.len()) as u64);
    check_selects(&c, e, &model, "through the delegate path");
    exec(&c, e, "SET stratus_remote_coprocessor = OFF");
    assert!(
        exec(&c, e, "SHOW WARNINGS").rows.is_empty(),
        "SET replaced the list"
    );
    check_selects(&c, e, &model, "back on the server path");
}

#[test]
fn a_write_at_a_start_ts_older_than_a_rows_last_commit_is_a_write_conflict_and_writes_nothing() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    let c = FrontClient::new(&[&server], |_| {});
    let mut engine = c.session();
    let e = &mut engine;
    exec(
        &c,
        e,
        "CREATE TABLE items (id BIGINT PRIMARY KEY, g INT, v DOUBLE, s VARCHAR(16))",
    );
    exec(
        &c,
        e,
        "INSERT INTO items VALUES (1, 1, 1.0, 'a'), (2, 2, 2.0, 'b')",
    );
    let schema = schema_of(&c, "items");

    // A statement read the rows at `stale`; another one commits a change to row 2 after it.
    let stale = server.tso();
    assert_eq!(
        exec(&c, e, "UPDATE items SET g = 20 WHERE id = 2").affected_rows,
        1
    );
    let writes = [
        RowWrite::Delete {
            key: record_key(schema.id, 1),
        },
        RowWrite::Delete {
            key: record_key(schema.id, 2),
        },
    ];
    let err = c
        .block_on(sql::txn_write::write(
            c.client,
            &writes,
            stale,
            "delete",
            CommitOptions::default(),
        ))
        .unwrap_err();
    assert!(
        matches!(
            err,
            SqlError::WriteConflict {
                statement: "delete",
                start_ts,
                conflict_commit_ts,
            } if start_ts == stale && conflict_commit_ts > stale
        ),
        "{err}"
    );
    assert_eq!(err.kind(), client::ErrorKind::Locked, "retry the statement");
    assert!(err.to_string().contains("retry the statement"), "{err}");
    // Nothing was written, and no lock is left behind: both rows read back, row 2 updated.
    let r = exec(&c, e, "SELECT id, g FROM items ORDER BY id");
    assert_eq!(
        r.rows,
        vec![
            vec![Datum::Int(1), Datum::Int(1)],
            vec![Datum::Int(2), Datum::Int(20)]
        ]
    );
}

#[test]
fn a_write_statement_waits_out_an_abandoned_lock_and_gives_up_on_a_live_one() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    let c = FrontClient::new(&[&server], |_| {});
    let mut engine = c.session();
    let e = &mut engine;
    exec(&c, e, "CREATE TABLE items (id BIGINT PRIMARY KEY, g INT)");
    exec(&c, e, "INSERT INTO items VALUES (1, 1), (2, 2)");
    let schema = schema_of(&c, "items");

    // A client died between prewrite and commit: its lock expires after 200 ms; the UPDATE
    // meets it, rolls it back once expired (its primary is the key itself), and goes on.
    let dead = vec![delete(&record_key(schema.id, 1))];
    abandoned_prewrite(&server, dead, server.tso(), 200);
    let r = exec(&c, e, "UPDATE items SET g = g + 10 WHERE id = 1");
    assert_eq!(r.affected_rows, 1);
    assert_eq!(
        exec(&c, e, "SELECT id, g FROM items ORDER BY id").rows,
        vec![
            vec![Datum::Int(1), Datum::Int(11)],
            vec![Datum::Int(2), Datum::Int(2)]
        ],
        "the dead transaction's delete never happened; the update did"
    );

    // A live lock the statement's reads do not see (its transaction started after every
    // attempt's read timestamp: 20 s ahead) but every prewrite runs into: each attempt
    // resolves it, finds it alive, reruns; the last one fails with a retryable error naming
    // the lock, and nothing is written.
    let ahead = server.tso() + (20_000 << 18);
    abandoned_prewrite(
        &server,
        vec![delete(&record_key(schema.id, 2))],
        ahead,
        60_000,
    );
    let err = sql_error(exec_err(&c, e, "UPDATE items SET g = 0 WHERE id = 2"));
    assert!(
        matches!(&err, SqlError::TxnAborted { reason, .. }
            if reason.contains(&format!("lock_ts={ahead}"))
                && reason.contains("resolution=alive")),
        "{err}"
    );
    assert_eq!(err.kind(), client::ErrorKind::Locked);
    let r = exec(&c, e, "SELECT g FROM items WHERE id = 2");
    assert_eq!(r.rows, vec![vec![Datum::Int(2)]], "nothing written");
}
