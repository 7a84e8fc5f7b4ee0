//! The SQL endpoint (`stratus sql-server`, MySQL protocol) against a real server, through
//! real MySQL clients: the `mysql` command-line client creates, loads and queries (joins,
//! subqueries, HAVING, DISTINCT, window functions, SELECT without FROM, the catalog
//! statements) and gets MySQL's error codes and SQLSTATEs; Python drivers run a prepared
//! statement (server-side, binary protocol) and keep each connection's variables and warnings
//! apart.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use e2e::sql_endpoint::{EndpointOverServer, error_line, stdout_ok};

/// The server and the endpoint the tests talk to.
type Setup = EndpointOverServer;

fn start() -> Setup {
    EndpointOverServer::start(&[])
}

/// The error line the mysql client prints for a failing statement.
fn mysql_error(s: &Setup, sql: &str) -> String {
    error_line(&s.endpoint.mysql(sql))
}

const LOAD: &str = "CREATE TABLE emp (id BIGINT PRIMARY KEY, dept INT, name VARCHAR(20), pay DOUBLE);\
    CREATE TABLE dept (id INT PRIMARY KEY, title VARCHAR(20));\
    INSERT INTO emp VALUES (1, 10, 'ann', 100.5), (2, 10, 'bob', 80), (3, 20, 'cy', NULL),\
    (4, 30, 'di', 70), (5, 20, 'ed', 90);\
    INSERT INTO dept VALUES (10, 'eng'), (20, 'ops'), (40, 'hr')";

#[test]
fn the_mysql_client_creates_loads_and_queries_with_what_users_type_first() {
    let s = start();
    stdout_ok(&s.endpoint.mysql(LOAD));
    let cases: &[(&str, &str)] = &[
        ("SELECT 1+1", "1+1\n2\n"),
        ("SHOW TABLES", "Tables_in_test\ndept\nemp\n"),
        (
            "DESCRIBE dept",
            "Field\tType\tNull\tKey\tDefault\tExtra\nid\tint\tNO\tPRI\tNULL\t\ntitle\tvarchar(255)\tYES\t\tNULL\t\n",
        ),
        (
            "SELECT e.name, d.title FROM emp e JOIN dept d ON e.dept = d.id ORDER BY e.id",
            "name\ttitle\nann\teng\nbob\teng\ncy\tops\ned\tops\n",
        ),
        (
            "SELECT d.title, COUNT(e.id) AS n FROM dept d LEFT JOIN emp e ON e.dept = d.id GROUP BY d.title ORDER BY d.title",
            "title\tn\neng\t2\nhr\t0\nops\t2\n",
        ),
        (
            "SELECT dept, SUM(pay) FROM emp GROUP BY dept HAVING COUNT(*) > 1 ORDER BY dept",
            "dept\tSUM(pay)\n10\t180.5\n20\t90\n",
        ),
        (
            "SELECT COUNT(DISTINCT dept) FROM emp",
            "COUNT(DISTINCT dept)\n3\n",
        ),
        (
            "SELECT name FROM emp WHERE dept IN (SELECT id FROM dept WHERE title = 'ops') ORDER BY name",
            "name\ncy\ned\n",
        ),
        (
            "SELECT name, CASE WHEN pay IS NULL THEN 'none' WHEN pay > 85 THEN 'high' ELSE 'low' END AS band FROM emp ORDER BY id",
            "name\tband\nann\thigh\nbob\tlow\ncy\tnone\ndi\tlow\ned\thigh\n",
        ),
        (
            "SELECT name, ROW_NUMBER() OVER (PARTITION BY dept ORDER BY id) AS rn FROM emp ORDER BY id",
            "name\trn\nann\t1\nbob\t2\ncy\t1\ndi\t1\ned\t2\n",
        ),
        (
            "SELECT id, name FROM emp WHERE id >= 2 AND name LIKE '%d%' ORDER BY id DESC LIMIT 1",
            "id\tname\n5\ted\n",
        ),
        (
            "SELECT COUNT(*) FROM emp WHERE pay IS NULL",
            "COUNT(*)\n1\n",
        ),
        // TopN in the coprocessor (`topn_pushdown`), NULL the smallest value as in MySQL.
        (
            "SELECT name, pay FROM emp ORDER BY pay LIMIT 2",
            "name\tpay\ncy\tNULL\ndi\t70\n",
        ),
        (
            "SELECT name FROM emp WHERE dept < 30 ORDER BY pay DESC, id LIMIT 2",
            "name\nann\ned\n",
        ),
        // Partial aggregation runs in the coprocessor (`agg_pushdown`): every function.
        (
            "SELECT dept, AVG(pay), MIN(name), MAX(pay), COUNT(pay), SUM(id) FROM emp GROUP BY dept ORDER BY dept",
            "dept\tAVG(pay)\tMIN(name)\tMAX(pay)\tCOUNT(pay)\tSUM(id)\n10\t90.25\tann\t100.5\t2\t3\n20\t90\tcy\t90\t1\t8\n30\t70\tdi\t70\t1\t4\n",
        ),
        (
            "SELECT COUNT(*), SUM(dept), AVG(dept) FROM emp WHERE id > 100",
            "COUNT(*)\tSUM(dept)\tAVG(dept)\n0\tNULL\tNULL\n",
        ),
        (
            "SELECT UPPER(name) FROM emp WHERE id = 1",
            "UPPER(name)\nANN\n",
        ),
        (
            "SELECT @@version_comment LIMIT 1",
            "@@version_comment\nStratus\n",
        ),
    ];
    for (sql, want) in cases {
        assert_eq!(stdout_ok(&s.endpoint.mysql(sql)), *want, "{sql}");
    }
    // EXPLAIN of a join: DataFusion's plan, with each scan's pushed filter and aggregation.
    let plan = stdout_ok(&s.endpoint.mysql(
        "EXPLAIN SELECT d.title, COUNT(*) FROM emp e JOIN dept d ON e.dept = d.id \
         WHERE e.pay > 75 GROUP BY d.title",
    ));
    assert!(
        plan.contains("StratusScanExec: table=emp") && plan.contains("selection=[(`pay` > 75"),
        "{plan}"
    );
    let plan = stdout_ok(
        &s.endpoint
            .mysql("EXPLAIN SELECT dept, SUM(pay) FROM emp GROUP BY dept HAVING SUM(pay) > 1"),
    );
    assert!(
        plan.contains("partial_aggregation=[sum(pay) group_by=[dept]]"),
        "{plan}"
    );
    let plan = stdout_ok(&s.endpoint.mysql(
        "EXPLAIN SELECT name, pay FROM emp WHERE dept < 30 ORDER BY pay DESC LIMIT 2 OFFSET 1",
    ));
    assert!(plan.contains("top_n=[pay desc limit=3]"), "{plan}");
    let create = stdout_ok(&s.endpoint.mysql("SHOW CREATE TABLE dept"));
    assert!(create.contains("PRIMARY KEY (`id`)"), "{create}");
    // Writes through the endpoint, then the catalog statements.
    assert_eq!(
        stdout_ok(&s.endpoint.mysql(
            "UPDATE emp SET pay = pay + 1 WHERE dept = 10; DELETE FROM emp WHERE id = 4; \
             SELECT SUM(pay), COUNT(*) FROM emp"
        )),
        "SUM(pay)\tCOUNT(*)\n272.5\t4\n"
    );
    stdout_ok(&s.endpoint.mysql("TRUNCATE TABLE emp"));
    assert_eq!(
        stdout_ok(&s.endpoint.mysql("SELECT COUNT(*) FROM emp")),
        "COUNT(*)\n0\n"
    );
    stdout_ok(&s.endpoint.mysql("INSERT INTO emp VALUES (9, 10, 'new', 1)"));
    assert_eq!(
        stdout_ok(&s.endpoint.mysql("SELECT name FROM emp")),
        "name\nnew\n"
    );
    stdout_ok(&s.endpoint.mysql("DROP TABLE dept"));
    assert_eq!(
        stdout_ok(&s.endpoint.mysql("SHOW TABLES")),
        "Tables_in_test\nemp\n"
    );
}

#[test]
fn errors_carry_mysql_codes_and_sqlstates() {
    let s = start();
    stdout_ok(&s.endpoint.mysql(LOAD));
    let cases: &[(&str, &str)] = &[
        ("SELECT * FROM nope", "ERROR 1146 (42S02)"),
        ("DROP TABLE nope", "ERROR 1051 (42S02)"),
        ("SELEC 1", "ERROR 1064 (42000)"),
        ("SELECT nope FROM emp", "ERROR 1054 (42S22)"),
        (
            "INSERT INTO emp VALUES (1, 1, 'dup', 1)",
            "ERROR 1062 (23000)",
        ),
        (
            "CREATE TABLE emp (id INT PRIMARY KEY)",
            "ERROR 1050 (42S01)",
        ),
        ("SET nope = 1", "ERROR 1193 (HY000)"),
        ("SET tidb_replica_read = 'sideways'", "ERROR 1231 (42000)"),
        ("USE other", "ERROR 1049 (42000)"),
        ("SAVEPOINT a", "ERROR 1235 (42000)"),
        (
            "SELECT * FROM emp WHERE id = 1 FOR UPDATE",
            "ERROR 1235 (42000)",
        ),
        ("SET autocommit = 2", "ERROR 1231 (42000)"),
    ];
    for (sql, want) in cases {
        let e = mysql_error(&s, sql);
        assert!(e.starts_with(want), "{sql}: expected {want}, found {e}");
    }
    // The failed statements wrote nothing.
    assert_eq!(
        stdout_ok(&s.endpoint.mysql("SELECT COUNT(*), MAX(name) FROM emp")),
        "COUNT(*)\tMAX(name)\n5\ted\n"
    );
}

/// A client may send a command behind one that has no answer (mysql-connector-python sends
/// COM_STMT_CLOSE and the next COM_STMT_PREPARE back to back): both arrive in one read, and the
/// second must get its own answer. The endpoint's protocol library read the second packet's
/// neighbour from a buffer it had just freed, answered a stray OK, and the client took that OK
/// for its prepare (`python_drivers_run_prepared_statements...` failed so, now and then, when
/// the two packets happened to arrive together). Here they always do: one write each round.
#[test]
fn a_command_pipelined_behind_one_without_an_answer_gets_its_own_answer() {
    let s = start();
    stdout_ok(&s.endpoint.mysql(LOAD));
    let script = r#"
import os, pymysql
port = int(os.environ["PORT"])
def packet(payload):
    return len(payload).to_bytes(3, "little") + b"\x00" + payload
query = b"SELECT id FROM emp WHERE dept = ? AND id > ?"
seen = set()
for _ in range(20):
    c = pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
    close = packet(b"\x19" + (7).to_bytes(4, "little"))
    prepare = packet(b"\x16" + query)
    c._sock.sendall(close + prepare)
    c._next_seq_id = 1
    ok = c._read_packet().get_all_data()
    # COM_STMT_PREPARE_OK: 0x00, statement id (4), columns (2), parameters (2).
    seen.add((ok[0], len(ok) >= 12, int.from_bytes(ok[7:9], "little")))
    c.close()
print(sorted(seen))
"#;
    let out = stdout_ok(&s.endpoint.python(script));
    assert_eq!(out.trim(), "[(0, True, 2)]", "{out}");
}

#[test]
fn python_drivers_run_prepared_statements_and_keep_each_connections_session() {
    let s = start();
    stdout_ok(&s.endpoint.mysql(LOAD));
    let script = r#"
import os, mysql.connector, pymysql
port = int(os.environ["PORT"])
# Server-side prepared statements (COM_STMT_PREPARE / EXECUTE, binary result rows).
c = mysql.connector.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
cur = c.cursor(prepared=True)
cur.execute("INSERT INTO emp VALUES (?, ?, ?, ?)", (6, 30, "o'hara", 55.25))
cur.execute("SELECT id, name, pay FROM emp WHERE dept = ? AND id > ? ORDER BY id", (30, 0))
print("prepared", cur.fetchall())
cur.execute("SELECT id, pay FROM emp WHERE name = ?", ("cy",))
print("null", cur.fetchall())
# PyMySQL: two connections, each with its own variables and warnings.
a = pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
b = pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
ca, cb = a.cursor(), b.cursor()
ca.execute("SET stratus_remote_coprocessor = ON")
ca.execute("SELECT @@stratus_remote_coprocessor")
cb.execute("SELECT @@stratus_remote_coprocessor")
print("vars", ca.fetchall(), cb.fetchall())
try:
    ca.execute("SELECT * FROM nope")
except pymysql.err.ProgrammingError as e:
    print("error", e.args[0])
ca.execute("SHOW WARNINGS")
cb.execute("SHOW WARNINGS")
print("warnings", [r[:2] for r in ca.fetchall()], cb.fetchall())
cb.execute("SELECT name FROM emp WHERE id = %s", (6,))
print("escaped", cb.fetchall())
"#;
    let out = stdout_ok(&s.endpoint.python(script));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "prepared [(4, 'di', 70.0), (6, \"o'hara\", 55.25)]",
            "null [(3, None)]",
            "vars (('ON',),) (('OFF',),)",
            "error 1146",
            "warnings [('Error', 1146)] ()",
            "escaped ((\"o'hara\",),)",
        ],
        "{out}"
    );
}

/// Autocommit UPDATEs from several connections at once on one row: each runs as a
/// transaction of its own, and one whose commit meets another's write runs again from a fresh
/// timestamp, so no increment is lost (MySQL would serialize them on the row lock).
#[test]
fn concurrent_autocommit_updates_of_one_row_lose_no_increment() {
    let s = start();
    stdout_ok(&s.endpoint.mysql(
        "CREATE TABLE counter (id BIGINT PRIMARY KEY, n INT, total DECIMAL(10,2)); \
         INSERT INTO counter VALUES (1, 0, 0)",
    ));
    let script = r#"
import os, threading, pymysql
port = int(os.environ["PORT"])
errors = []
def work():
    c = pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
    cur = c.cursor()
    for _ in range(25):
        try:
            cur.execute("UPDATE counter SET n = n + 1, total = total + 0.10 WHERE id = 1")
        except Exception as e:
            errors.append(str(e))
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
c = pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test")
cur = c.cursor()
cur.execute("SELECT n, total FROM counter WHERE id = 1")
print("final", cur.fetchall(), "errors", len(errors), errors[:1])
"#;
    let out = stdout_ok(&s.endpoint.python(script));
    // Every acknowledged UPDATE is counted once; a failed one (conflicts past the retries)
    // must have written nothing.
    let line = out.lines().next().unwrap_or_default().to_string();
    let errors: usize = line
        .split("errors ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no error count in {out}"));
    let done = 75 - errors;
    let total = format!("{}.{:02}", done / 10, (done % 10) * 10);
    assert!(
        line.starts_with(&format!("final (({done}, Decimal('{total}')),)")),
        "{out}"
    );
    assert!(
        errors <= 5,
        "the retries should absorb nearly every conflict: {out}"
    );
}

/// DECIMAL, DATE, DATETIME and BOOLEAN through real drivers: mysql-connector's server-side
/// prepared statements send a `Decimal` as text and dates in the binary protocol's date
/// layout, PyMySQL escapes them client-side; both read DECIMAL columns back as `Decimal`
/// (exact) and DATE / DATETIME columns as `date` / `datetime` (the endpoint announces their
/// MySQL types), in text and binary result rows.
#[test]
fn drivers_write_and_read_back_decimals_dates_and_booleans_exactly() {
    let s = start();
    stdout_ok(&s.endpoint.mysql(
        "CREATE TABLE ledger (id BIGINT PRIMARY KEY, amount DECIMAL(12,2), day DATE, at DATETIME(6), ok BOOLEAN)",
    ));
    let script = r#"
import os, datetime, decimal, mysql.connector, pymysql
port = int(os.environ["PORT"])
D = decimal.Decimal
c = mysql.connector.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
cur = c.cursor(prepared=True)
cur.execute("INSERT INTO ledger VALUES (?, ?, ?, ?, ?)",
            (1, D("10.10"), datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 10, 5, 9, 500), True))
p = pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
pc = p.cursor()
pc.execute("INSERT INTO ledger VALUES (%s, %s, %s, %s, %s)",
           (2, D("0.20"), datetime.date(1999, 12, 31), datetime.datetime(1999, 12, 31, 23, 59, 59), False))
for i in range(3, 13):
    pc.execute("INSERT INTO ledger (id, amount) VALUES (%s, %s)", (i, D("0.1")))
pc.execute("SELECT SUM(amount), MIN(day), MAX(at) FROM ledger")
print("text", pc.fetchall())
cur.execute("SELECT amount, day, at, ok FROM ledger WHERE day >= ? ORDER BY id", (datetime.date(2000, 1, 1),))
print("binary", cur.fetchall())
cur.execute("SELECT id FROM ledger WHERE at < ? AND NOT ok", (datetime.datetime(2000, 1, 1),))
print("older", cur.fetchall())
"#;
    let out = stdout_ok(&s.endpoint.python(script));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "text ((Decimal('11.30'), datetime.date(1999, 12, 31), datetime.datetime(2024, 2, 29, 10, 5, 9, 500)),)",
            "binary [(Decimal('10.10'), datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 10, 5, 9, 500), 1)]",
            "older [(2,)]",
        ],
        "{out}"
    );
}

/// `BEGIN` ... `COMMIT` through the `mysql` client: a transfer between two rows commits as
/// one, reads inside the transaction see its own writes (aggregates too: nothing is pushed
/// past rows the regions do not hold yet), `ROLLBACK` leaves nothing behind, and a failed
/// statement (a duplicate key) leaves the transaction open.
#[test]
fn the_mysql_client_runs_transactions_that_see_their_own_writes() {
    let s = start();
    stdout_ok(&s.endpoint.mysql(
        "CREATE TABLE acct (id BIGINT PRIMARY KEY, owner VARCHAR(10), bal BIGINT);\
         INSERT INTO acct VALUES (1, 'ann', 100), (2, 'bob', 100), (3, 'cy', 0)",
    ));
    let inside = stdout_ok(&s.endpoint.mysql(
        "BEGIN; UPDATE acct SET bal = bal - 30 WHERE id = 1; \
         UPDATE acct SET bal = bal + 30 WHERE owner = 'bob'; \
         INSERT INTO acct VALUES (4, 'di', 5); DELETE FROM acct WHERE bal = 0; \
         SELECT id, bal FROM acct ORDER BY id; SELECT SUM(bal), COUNT(*) FROM acct; \
         SELECT id FROM acct ORDER BY bal DESC LIMIT 1; COMMIT; \
         SELECT SUM(bal), COUNT(*) FROM acct",
    ));
    assert_eq!(
        inside,
        "id\tbal\n1\t70\n2\t130\n4\t5\n\
         SUM(bal)\tCOUNT(*)\n205\t3\n\
         id\n2\n\
         SUM(bal)\tCOUNT(*)\n205\t3\n"
    );
    let rolled_back = stdout_ok(&s.endpoint.mysql(
        "START TRANSACTION; INSERT INTO acct VALUES (9, 'zed', 1); DELETE FROM acct WHERE id = 1; \
         SELECT COUNT(*) FROM acct; ROLLBACK; SELECT COUNT(*), MAX(id) FROM acct",
    ));
    assert_eq!(rolled_back, "COUNT(*)\n3\nCOUNT(*)\tMAX(id)\n3\t4\n");
    // The duplicate fails (the client stops there); a new connection sees nothing of the
    // transaction, which was never committed.
    let out = s
        .endpoint
        .mysql("BEGIN; INSERT INTO acct VALUES (5, 'ed', 1); INSERT INTO acct VALUES (5, 'ed', 2)");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ERROR 1062 (23000)"),
        "{out:?}"
    );
    assert_eq!(
        stdout_ok(&s.endpoint.mysql("SELECT COUNT(*) FROM acct WHERE id = 5")),
        "COUNT(*)\n0\n"
    );
}

/// Two connections (PyMySQL) begin, read a balance and both write it back increased: the
/// second `COMMIT` fails with MySQL's 1213 and the first one's update is the one stored, so no
/// update is lost. Each sees its own write before its commit and not the other's; a statement
/// failing inside a transaction leaves it open. mysql-connector's `autocommit=False` (it sends
/// `SET autocommit = OFF`) makes every statement part of a transaction its `rollback` drops.
#[test]
fn two_connections_cannot_lose_an_update() {
    let s = start();
    let script = r#"
import os, pymysql
port = int(os.environ["PORT"])
import mysql.connector
def connect():
    return pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
a, b = connect(), connect()
ca, cb = a.cursor(), b.cursor()
ca.execute("CREATE TABLE bank (id BIGINT PRIMARY KEY, bal BIGINT)")
ca.execute("INSERT INTO bank VALUES (1, 100), (2, 100)")
def bal(c, id):
    c.execute("SELECT bal FROM bank WHERE id = %s", (id,))
    return c.fetchone()[0]
a.begin()
b.begin()
va, vb = bal(ca, 1), bal(cb, 1)
ca.execute("UPDATE bank SET bal = %s WHERE id = 1", (va + 10,))
cb.execute("UPDATE bank SET bal = %s WHERE id = 1", (vb + 20,))
print("own", bal(ca, 1), bal(cb, 1))
try:
    cb.execute("INSERT INTO bank VALUES (2, 0)")
except pymysql.err.IntegrityError as e:
    print("dup", e.args[0])
a.commit()
try:
    b.commit()
    print("second commit succeeded")
except pymysql.err.OperationalError as e:
    print("conflict", e.args[0], "write conflict" in e.args[1])
c = connect().cursor()
print("stored", bal(c, 1))
# After the conflict b's transaction is over: it runs again and sees a's update.
b.begin()
print("retry", bal(cb, 1))
cb.execute("UPDATE bank SET bal = bal + 20 WHERE id = 1")
b.commit()
print("final", bal(c, 1))
m = mysql.connector.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=False)
cm = m.cursor()
cm.execute("UPDATE bank SET bal = 0 WHERE id = 2")
cm.execute("SELECT bal FROM bank WHERE id = 2")
print("uncommitted", cm.fetchall(), bal(c, 2))
m.rollback()
cm.execute("DELETE FROM bank WHERE id = 1")
m.commit()
print("after", bal(c, 2), c.execute("SELECT * FROM bank WHERE id = 1"))
# Transactions writing different rows of one table both commit: COMMIT checks the table's
# schema, it does not lock it.
a.begin()
b.begin()
ca.execute("UPDATE bank SET bal = bal + 1 WHERE id = 2")
cb.execute("INSERT INTO bank VALUES (3, 7)")
a.commit()
b.commit()
print("disjoint", bal(c, 2), bal(c, 3))
# A table truncated after a transaction began fails its COMMIT: its rows would otherwise be
# written under the old table id.
a.begin()
ca.execute("UPDATE bank SET bal = bal + 1 WHERE id = 2")
cb.execute("TRUNCATE TABLE bank")
try:
    a.commit()
    print("commit after truncate succeeded")
except pymysql.err.OperationalError as e:
    print("truncated", e.args[0])
print("empty", c.execute("SELECT * FROM bank"))
"#;
    let out = stdout_ok(&s.endpoint.python(script));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "own 110 120",
            "dup 1062",
            "conflict 1213 True",
            "stored 110",
            "retry 110",
            "final 130",
            "uncommitted [(0,)] 100",
            "after 100 0",
            "disjoint 101 7",
            "truncated 1213",
            "empty 0",
        ],
        "{out}"
    );
}

/// The `(id, task, detail)` rows of an `EXPLAIN ANALYZE` printed by the mysql client.
fn explain_rows(s: &Setup, sql: &str) -> Vec<(String, String, String)> {
    let out = stdout_ok(&s.endpoint.mysql(sql));
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("id\ttask\tdetail"), "{out}");
    lines
        .map(|l| {
            let mut cols = l.splitn(3, '\t').map(str::to_string);
            let mut next = || cols.next().unwrap_or_default();
            (next(), next(), next())
        })
        .collect()
}

/// The `rows=` of each region row of an `EXPLAIN ANALYZE` of table `big`.
fn region_rows(rows: &[(String, String, String)]) -> Vec<usize> {
    rows.iter()
        .filter(|(id, _, _)| id.starts_with("big region "))
        .map(|(_, _, detail)| {
            detail
                .split_whitespace()
                .find_map(|w| w.strip_prefix("rows="))
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// Pushdown is real: over a table of 1,500 rows in three regions, `EXPLAIN ANALYZE` shows
/// each region returning at most one row per group for an aggregate, only the rows a filter
/// keeps, and at most the limit for a TopN, never its raw rows; the answers are right.
#[test]
fn each_region_returns_partial_aggregates_filtered_rows_and_its_top_n_only() {
    let s = start();
    let values: Vec<String> = (0..1500)
        .map(|i| format!("({i}, {}, {i}, {})", i % 4, i as f64 * 1.5))
        .collect();
    stdout_ok(&s.endpoint.mysql(&format!(
        "CREATE TABLE big (id BIGINT PRIMARY KEY, g INT, v BIGINT, d DOUBLE); \
         INSERT INTO big VALUES {}",
        values.join(",")
    )));
    // The first table of a new cluster has id 1.
    for h in [500, 1000] {
        assert!(s.server.split_at(wire::codec::table::record_key(1, h)));
    }
    let dag_has = |rows: &[(String, String, String)], what: &str| {
        rows.iter()
            .any(|(_, task, d)| task == "dag" && d.starts_with(what))
    };
    let agg = explain_rows(&s, "EXPLAIN ANALYZE SELECT g, SUM(v) FROM big GROUP BY g");
    assert!(dag_has(&agg, "HashAgg group_by=g aggs=sum(v)"), "{agg:?}");
    let per_region = region_rows(&agg);
    assert_eq!(per_region.len(), 3, "{agg:?}");
    assert!(per_region.iter().all(|&n| n <= 4), "{agg:?}");
    assert!(
        agg.last().unwrap().2.starts_with("rows=4 "),
        "four groups answered: {agg:?}"
    );
    let filter = explain_rows(
        &s,
        "EXPLAIN ANALYZE SELECT id FROM big WHERE v < 30 OR v >= 1491",
    );
    assert!(dag_has(&filter, "Selection"), "{filter:?}");
    assert_eq!(region_rows(&filter), [30, 0, 9], "{filter:?}");
    // A DOUBLE against a decimal literal is compared as DOUBLE (MySQL's rule), so it is
    // pushed down too: d = 1.5 × id, and d > 2200.5 keeps ids 1468..1499.
    let double = explain_rows(&s, "EXPLAIN ANALYZE SELECT id FROM big WHERE d > 2200.5");
    assert!(dag_has(&double, "Selection"), "{double:?}");
    assert_eq!(region_rows(&double), [0, 0, 32], "{double:?}");
    let top = explain_rows(
        &s,
        "EXPLAIN ANALYZE SELECT id FROM big ORDER BY v DESC LIMIT 5",
    );
    assert!(dag_has(&top, "TopN order_by=v desc limit=5"), "{top:?}");
    let per_region = region_rows(&top);
    assert_eq!(per_region.len(), 3, "{top:?}");
    assert!(per_region.iter().all(|&n| n <= 5), "{top:?}");
    assert_eq!(
        stdout_ok(&s.endpoint.mysql(
            "SELECT g, SUM(v) FROM big GROUP BY g ORDER BY g; \
             SELECT id FROM big ORDER BY v DESC LIMIT 2"
        )),
        "g\tSUM(v)\n0\t280500\n1\t280875\n2\t281250\n3\t281625\nid\n1499\n1498\n"
    );
}

/// `CREATE INDEX` is online and misses nothing: three PyMySQL connections insert, update
/// (the indexed column too) and delete rows, in autocommit and in transactions, while a
/// fourth creates a non-unique and then a unique index over 3,000 stored rows in three
/// regions. Afterwards
/// every value's rows found through the index are exactly the rows a full scan finds, and
/// `EXPLAIN ANALYZE` shows the lookup reading only the matching rows' handles.
#[test]
fn indexes_created_under_concurrent_writes_find_exactly_the_rows_a_scan_finds() {
    let s = start();
    let rows: Vec<String> = (0..3000)
        .map(|i| format!("({i}, {}, {i})", i % 20))
        .collect();
    stdout_ok(&s.endpoint.mysql(&format!(
        "CREATE TABLE ix (id BIGINT PRIMARY KEY, k INT, v BIGINT); INSERT INTO ix VALUES {}",
        rows.join(",")
    )));
    // Three regions (the first table of a new cluster has id 1): the backfill pages through
    // regions that each hold more rows than one batch.
    for h in [1200, 2100] {
        assert!(s.server.split_at(wire::codec::table::record_key(1, h)));
    }
    let script = r#"
import os, random, threading, time, pymysql
port = int(os.environ["PORT"])
def connect(autocommit=True):
    return pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"],
                           database="test", autocommit=autocommit)
stop = threading.Event()
done = [0, 0, 0]
ok_ops = [0, 0, 0, 0]
err_ops = [0, 0, 0, 0]
failed = []
def work(t):
    rng = random.Random(t)
    c = connect()
    cur = c.cursor()
    n = 0
    while not stop.is_set():
        op = rng.randrange(4)
        try:
            if op == 0:
                n += 1
                i = 100000 * (t + 1) + n
                cur.execute("INSERT INTO ix VALUES (%s, %s, %s)", (i, rng.randrange(20), i))
            elif op == 1:
                cur.execute("UPDATE ix SET k = %s WHERE id = %s", (rng.randrange(20), rng.randrange(3000)))
            elif op == 2:
                cur.execute("DELETE FROM ix WHERE id = %s", (rng.randrange(3000),))
            else:
                cur.execute("BEGIN")
                a = rng.randrange(3000)
                cur.execute("UPDATE ix SET k = MOD(k + 1, 20) WHERE id IN (%s, %s)", (a, a + 1))
                cur.execute("COMMIT")
            done[t] += 1
            ok_ops[op] += 1
        except pymysql.err.MySQLError as e:
            # A write conflict (1213) wrote nothing; anything else is a failure.
            err_ops[op] += 1
            if e.args[0] != 1213:
                failed.append(repr(e))
            # A statement that failed inside BEGIN leaves the transaction open.
            cur.execute("ROLLBACK")
        except Exception as e:
            failed.append(repr(e))
            return
threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
for t in threads: t.start()
time.sleep(0.5)
print("before", sum(done), time.time())
ddl = connect().cursor()
try:
    ddl.execute("CREATE INDEX ix_k ON ix (k)")
    print("after k", sum(done), time.time())
    ddl.execute("CREATE UNIQUE INDEX ix_v ON ix (v)")
    print("after v", sum(done), time.time())
    time.sleep(1.0)
finally:
    # A failed DDL stops the writers too: the script ends and reports it.
    stop.set()
    for t in threads: t.join()
cur = connect().cursor()
cur.execute("SELECT id, k, v FROM ix")
stored = cur.fetchall()
mismatches = 0
for kk in range(20):
    cur.execute("SELECT id FROM ix WHERE k = %s", (kk,))
    got = sorted(r[0] for r in cur.fetchall())
    want = sorted(r[0] for r in stored if r[1] == kk)
    if got != want:
        mismatches += 1
        print("k", kk, "index", len(got), "scan", len(want), sorted(set(got) ^ set(want))[:5])
for (i, k, v) in random.Random(7).sample(stored, 200):
    cur.execute("SELECT id FROM ix WHERE v = %s", (v,))
    if [r[0] for r in cur.fetchall()] != [i]:
        mismatches += 1
        print("v", v, "not found at", i)
print("ok by op", ok_ops, "1213 by op", err_ops)
print("rows", len(stored), "writes", sum(done), "failed", failed[:3], "mismatches", mismatches)
"#;
    let out = stdout_ok(&s.endpoint.python(script));
    println!("{out}");
    let last = out.lines().last().unwrap_or_default();
    assert!(last.ends_with("failed [] mismatches 0"), "{out}");
    let writes: usize = last
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no write count in {out}"));
    assert!(writes >= 30, "the writers ran alongside the DDL: {out}");
    // The lookup: only k = 3's handles are read from the table.
    let explained = explain_rows(&s, "EXPLAIN ANALYZE SELECT id FROM ix WHERE k = 3");
    let lookup = explained
        .iter()
        .find(|(_, task, d)| task == "dag" && d.starts_with("IndexLookUp index=ix_k(k)"))
        .unwrap_or_else(|| panic!("no index lookup: {explained:?}"));
    let handles: usize = lookup
        .2
        .split("handles=")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    let count = stdout_ok(&s.endpoint.mysql("SELECT COUNT(*) FROM ix WHERE k + 0 = 3"));
    assert_eq!(
        count.lines().nth(1),
        Some(handles.to_string().as_str()),
        "{explained:?}"
    );
    assert!(handles < 400, "{explained:?}");
    // A range on the indexed column reads the table, not the index.
    let range = explain_rows(&s, "EXPLAIN ANALYZE SELECT id FROM ix WHERE k > 3");
    assert!(
        !range.iter().any(|(_, _, d)| d.starts_with("IndexLookUp")),
        "{range:?}"
    );
}
