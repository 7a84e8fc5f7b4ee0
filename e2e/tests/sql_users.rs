//! SQL users through the endpoint (`stratus sql-server`) of a real server, with real MySQL
//! clients: logins checked with `mysql_native_password` (a wrong password or an unknown user
//! gets MySQL's 1045), privileges checked per statement (a user without `INSERT` gets 1142
//! and nothing is written), grants and revokes applying to the next statement of a connection
//! already open, account statements refused to a user without `CREATE USER` (1227), and an
//! address blocked (1129) after too many failed logins.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use e2e::sql_endpoint::{EndpointOverServer, ROOT_PASSWORD, error_line, stdout_ok};

/// The server and the endpoint the tests talk to.
type Setup = EndpointOverServer;

fn start() -> Setup {
    EndpointOverServer::start(&[])
}

fn count(s: &Setup) -> String {
    stdout_ok(&s.endpoint.mysql("SELECT COUNT(*) FROM t"))
}

#[test]
fn users_log_in_with_their_password_and_run_only_what_they_were_granted() {
    let s = start();
    stdout_ok(&s.endpoint.mysql(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 10), (2, 20)",
    ));

    // Logins: root's password works, a wrong one or an unknown user gets 1045.
    let e = error_line(&s.endpoint.mysql_as("root", "wrong", "SELECT 1"));
    assert!(e.starts_with("ERROR 1045 (28000)"), "{e}");
    assert!(
        e.contains("Access denied for user 'root'"),
        "MySQL's wording: {e}"
    );
    let e = error_line(&s.endpoint.mysql_as("nobody", "x", "SELECT 1"));
    assert!(e.starts_with("ERROR 1045 (28000)"), "{e}");
    let e = error_line(&s.endpoint.mysql_as("root", "", "SELECT 1"));
    assert!(e.starts_with("ERROR 1045 (28000)"), "no password: {e}");

    // A user with SELECT on t only.
    stdout_ok(&s.endpoint.mysql(
        "CREATE USER 'alice'@'%' IDENTIFIED BY 'alice-pw'; GRANT SELECT ON test.t TO alice",
    ));
    let e = error_line(&s.endpoint.mysql("CREATE USER alice"));
    assert!(e.starts_with("ERROR 1396"), "an existing user: {e}");
    assert_eq!(
        stdout_ok(
            &s.endpoint
                .mysql_as("alice", "alice-pw", "SELECT SUM(v) FROM t")
        ),
        "SUM(v)\n30\n"
    );
    let e = error_line(
        &s.endpoint
            .mysql_as("alice", "alice-pw", "INSERT INTO t VALUES (3, 30)"),
    );
    assert!(e.starts_with("ERROR 1142 (42000)"), "{e}");
    assert!(
        e.contains("INSERT command denied to user 'alice'@'%' for table 't'"),
        "{e}"
    );
    for sql in [
        "UPDATE t SET v = 0 WHERE id = 1",
        "DELETE FROM t",
        "DROP TABLE t",
        "CREATE TABLE u (id INT PRIMARY KEY)",
        "CREATE INDEX iv ON t (v)",
    ] {
        let e = error_line(&s.endpoint.mysql_as("alice", "alice-pw", sql));
        assert!(e.starts_with("ERROR 1142 (42000)"), "{sql}: {e}");
    }
    let e = error_line(
        &s.endpoint
            .mysql_as("alice", "alice-pw", "CREATE USER mallory"),
    );
    assert!(e.starts_with("ERROR 1227"), "{e}");
    let e = error_line(&s.endpoint.mysql_as(
        "alice",
        "alice-pw",
        "SET GLOBAL stratus_cop_cache = OFF",
    ));
    assert!(e.starts_with("ERROR 1227"), "{e}");
    assert_eq!(
        count(&s),
        "COUNT(*)\n2\n",
        "the refused statements wrote nothing"
    );
    assert_eq!(
        stdout_ok(&s.endpoint.mysql("SHOW GRANTS FOR alice")),
        "Grants for alice@%\nGRANT SELECT ON `test`.`t` TO `alice`@`%`\n"
    );

    // Grants and revokes apply to the next statement of a connection already open.
    let script = r#"
import os, pymysql
port = int(os.environ["PORT"])
alice = pymysql.connect(host="127.0.0.1", port=port, user="alice", password="alice-pw", database="test", autocommit=True)
root = pymysql.connect(host="127.0.0.1", port=port, user="root", password=os.environ["PASSWORD"], database="test", autocommit=True)
a, r = alice.cursor(), root.cursor()
def code(sql):
    try:
        a.execute(sql)
        return 0
    except pymysql.err.MySQLError as e:
        return e.args[0]
print("before", code("INSERT INTO t VALUES (3, 30)"))
r.execute("GRANT INSERT ON test.* TO alice")
print("granted", code("INSERT INTO t VALUES (3, 30)"))
r.execute("REVOKE SELECT ON test.t FROM 'alice'@'%'")
print("revoked", code("SELECT * FROM t"))
print("insert still", code("INSERT INTO t VALUES (4, 40)"))
r.execute("ALTER USER alice IDENTIFIED BY 'new-pw'")
r.execute("DROP USER alice")
print("dropped", code("INSERT INTO t VALUES (5, 50)"))
"#;
    let out = stdout_ok(&s.endpoint.python(script));
    assert_eq!(
        out,
        "before 1142\ngranted 0\nrevoked 1142\ninsert still 0\ndropped 1142\n"
    );
    assert_eq!(count(&s), "COUNT(*)\n4\n", "the granted inserts, only them");
    let e = error_line(&s.endpoint.mysql_as("alice", "alice-pw", "SELECT 1"));
    assert!(e.starts_with("ERROR 1045 (28000)"), "a dropped user: {e}");

    // A user's own password and grants are its own business; root's are not.
    stdout_ok(&s.endpoint.mysql("CREATE USER bob IDENTIFIED BY 'b1'"));
    stdout_ok(&s.endpoint.mysql_as("bob", "b1", "SET PASSWORD = 'b2'"));
    assert_eq!(
        stdout_ok(&s.endpoint.mysql_as("bob", "b2", "SHOW GRANTS")),
        "Grants for bob@%\nGRANT USAGE ON *.* TO `bob`@`%`\n"
    );
    let e = error_line(
        &s.endpoint
            .mysql_as("bob", "b2", "SET PASSWORD FOR root = 'x'"),
    );
    assert!(e.starts_with("ERROR 1227"), "{e}");
    // Root's password is unchanged: it still logs in.
    stdout_ok(&s.endpoint.mysql_as("root", ROOT_PASSWORD, "SELECT 1"));
}

#[test]
fn an_address_with_too_many_failed_logins_is_blocked_even_with_the_right_password() {
    let s = EndpointOverServer::start(&["--max-failed-logins", "4", "--failed-login-window", "3s"]);
    let failures = |reason: &str| {
        s.endpoint
            .metrics()
            .sum("stratus_sql_login_failures_total", &[("reason", reason)])
            .unwrap()
    };
    assert_eq!(
        failures("wrong_password"),
        0.0,
        "every series exists from the start"
    );
    let started = std::time::Instant::now();
    for _ in 0..4 {
        let e = error_line(&s.endpoint.mysql_as("root", "guess", "SELECT 1"));
        assert!(e.starts_with("ERROR 1045"), "{e}");
    }
    let e = error_line(&s.endpoint.mysql_as("root", ROOT_PASSWORD, "SELECT 1"));
    // The error comes instead of the greeting, as MySQL refuses a blocked host; MariaDB's
    // client reports it inside its own 2002 ("error packet before ... TLS handshake").
    assert!(e.contains("1129"), "blocked: {e}");
    assert!(
        e.contains("Host '127.0.0.1' is blocked because of many failed logins"),
        "{e}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "the test was too slow to see the block within its window"
    );
    assert_eq!(failures("wrong_password"), 4.0);
    assert_eq!(failures("blocked"), 1.0);
    // Once the window that began with the first failure ends, the address may log in again.
    // (The first failure came a little after `started`: half a second covers it.)
    std::thread::sleep(std::time::Duration::from_millis(3500).saturating_sub(started.elapsed()));
    stdout_ok(&s.endpoint.mysql_as("root", ROOT_PASSWORD, "SELECT 1"));
}

#[test]
fn the_endpoint_refuses_limits_it_cannot_run_with() {
    let out = std::process::Command::new(e2e::binaries::binary(e2e::binaries::STRATUS))
        .args(["sql-server", "--max-connections", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("max-connections: expected a value above 0, found 0"),
        "{stderr}"
    );
}

/// With `--ssl-cert`/`--ssl-key` the endpoint offers TLS; with `--require-secure-transport` a
/// client that does not take it is refused (3159). Over TLS the login and its refusal (1045)
/// work as over plain TCP, and a client that trusts another CA refuses the endpoint.
#[test]
fn the_endpoint_speaks_tls_and_can_require_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca = harness::certs::ThrowawayCa::create(&dir.path().join("ca"), "sql-ca").unwrap();
    let cert = ca.issue("stratus-sql").unwrap();
    let other = harness::certs::ThrowawayCa::create(&dir.path().join("other"), "other").unwrap();
    let (cert_path, key_path) = (
        cert.cert_path.display().to_string(),
        cert.key_path.display().to_string(),
    );
    let s = EndpointOverServer::start(&[
        "--ssl-cert",
        &cert_path,
        "--ssl-key",
        &key_path,
        "--require-secure-transport",
        "--connect-timeout",
        "1s",
    ]);
    let ca_opt = format!("--ssl-ca={}", ca.ca_path().display());
    let verified = [ca_opt.as_str(), "--ssl-verify-server-cert"];
    // `--ssl-verify-server-cert` makes the client insist on TLS with a certificate the CA
    // signed for the address it dials: a query through it ran over TLS.
    assert_eq!(
        stdout_ok(&s.endpoint.mysql_with(
            &verified,
            "root",
            ROOT_PASSWORD,
            "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1); SELECT COUNT(*) FROM t"
        )),
        "COUNT(*)\n1\n"
    );
    let e = error_line(
        &s.endpoint
            .mysql_with(&verified, "root", "wrong", "SELECT 1"),
    );
    assert!(e.starts_with("ERROR 1045 (28000)"), "over TLS: {e}");
    let e = error_line(
        &s.endpoint
            .mysql_with(&["--skip-ssl"], "root", ROOT_PASSWORD, "SELECT 1"),
    );
    assert!(e.contains("3159"), "plain TCP while TLS is required: {e}");
    let other_opt = format!("--ssl-ca={}", other.ca_path().display());
    let out = s.endpoint.mysql_with(
        &[other_opt.as_str(), "--ssl-verify-server-cert"],
        "root",
        ROOT_PASSWORD,
        "SELECT 1",
    );
    assert!(
        !out.status.success(),
        "a client trusting another CA connected"
    );

    // A client that sets up TLS (openssl's MySQL STARTTLS) and then says nothing is cut off
    // at the login deadline (1 s here), not left to the idle one (8 h).
    let mut stall = std::process::Command::new("openssl")
        .args(["s_client", "-starttls", "mysql", "-connect"])
        .arg(s.endpoint.addr.to_string())
        .arg("-CAfile")
        .arg(ca.ca_path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run openssl (Debian's openssl package)");
    let started = std::time::Instant::now();
    while stall.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(10) {
            let _ = stall.kill();
            panic!("a client silent after TLS was set up was still connected after 10 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = stall.wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("Verify return code: 0"),
        "TLS was set up with the endpoint's certificate before the silence: {printed}"
    );

    // Rotation without a restart: a certificate from a new CA written over the files serves
    // new connections within the reload interval (10 s); the old CA's clients are refused.
    let new_ca = harness::certs::ThrowawayCa::create(&dir.path().join("new"), "new-ca").unwrap();
    let new_cert = new_ca.issue("stratus-sql").unwrap();
    std::fs::write(&cert.key_path, std::fs::read(&new_cert.key_path).unwrap()).unwrap();
    std::fs::write(&cert.cert_path, std::fs::read(&new_cert.cert_path).unwrap()).unwrap();
    let new_opt = format!("--ssl-ca={}", new_ca.ca_path().display());
    let started = std::time::Instant::now();
    loop {
        let out = s.endpoint.mysql_with(
            &[new_opt.as_str(), "--ssl-verify-server-cert"],
            "root",
            ROOT_PASSWORD,
            "SELECT 1",
        );
        if out.status.success() {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the rotated certificate was not served within 20 s: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let out = s
        .endpoint
        .mysql_with(&verified, "root", ROOT_PASSWORD, "SELECT 1");
    assert!(
        !out.status.success(),
        "the old CA still verifies the endpoint"
    );
}
