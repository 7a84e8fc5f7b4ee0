//! `[security]` on a real socket: a listener with TLS serves a client whose certificate the
//! cluster CA signed and whose name is allowed, and refuses (connection fails, handler never
//! runs) a plain-HTTP client, a client with a certificate from another CA, one whose name is
//! not in `cert-allowed-cn`, and one with no certificate at all; a key file every user can
//! read is refused at load with its path; with `node-cn` and `admin-cn`, each request's path is
//! checked against its caller's tier (403 beyond it). The certificates come from a throwaway CA.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use harness::certs::ThrowawayCa;
use node::http::{HttpLimits, serve_until};
use node::tls::{SecurityConfig, Tls, TlsError};
use node::{ClientError, HttpClient};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A throwaway CA in `dir/name` ([`harness::certs`]).
struct Ca(ThrowawayCa);

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        Ca(ThrowawayCa::create(&dir.join(name), name).unwrap())
    }

    /// A node certificate with common name `cn` and its `[security]` (this CA, `allowed`
    /// names).
    fn node(&self, cn: &str, allowed: &[&str]) -> SecurityConfig {
        SecurityConfig {
            cert_allowed_cn: allowed.iter().map(|s| s.to_string()).collect(),
            ..self.0.issue(cn).unwrap()
        }
    }
}

fn load(c: &SecurityConfig) -> Arc<Tls> {
    c.validate().unwrap();
    c.load().unwrap().expect("TLS is on")
}

/// A TLS listener serving `/` (counting the requests that reached the handler).
async fn start(tls: Arc<Tls>) -> (u16, Arc<AtomicUsize>, oneshot::Sender<()>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let router = Router::new().route(
        "/",
        get(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                "ok"
            }
        }),
    );
    let (port, stop) = serve(router, Some(tls)).await;
    (port, hits, stop)
}

/// Serves `router` (with `tls`, or plain HTTP) on an ephemeral port until `stop` is sent.
async fn serve(router: Router, tls: Option<Arc<Tls>>) -> (u16, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        let limits = HttpLimits::default();
        serve_until(
            listener,
            router,
            shutdown,
            Duration::from_secs(2),
            &limits,
            tls,
        )
        .await
        .unwrap();
    });
    (port, stop)
}

async fn get_with(client: &HttpClient, url: &str) -> Result<String, ClientError> {
    let reply = client.get(url, Duration::from_secs(5)).await?;
    Ok(format!(
        "{} {}",
        reply.status.as_u16(),
        String::from_utf8_lossy(&reply.body)
    ))
}

#[tokio::test]
async fn only_a_client_the_ca_signed_with_an_allowed_name_gets_through() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "cluster-ca");
    let other_ca = Ca::new(dir.path(), "other-ca");
    let server = load(&ca.node("server-1", &["server-1", "worker-1"]));
    let (port, hits, stop) = start(server).await;
    let https = format!("https://127.0.0.1:{port}/");

    // Signed by the CA, name allowed: served.
    let worker = HttpClient::with_tls(1 << 20, Some(&load(&ca.node("worker-1", &[]))));
    assert_eq!(get_with(&worker, &https).await.unwrap(), "200 ok");
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // Signed by the CA, name not allowed: the connection is closed after the handshake.
    let stranger = HttpClient::with_tls(1 << 20, Some(&load(&ca.node("intruder", &[]))));
    let e = get_with(&stranger, &https).await.unwrap_err();
    assert!(e.is_retryable(), "a transport failure: {e}");

    // Another CA: the handshake fails (and this client does not trust the server either).
    let foreign = HttpClient::with_tls(1 << 20, Some(&load(&other_ca.node("worker-1", &[]))));
    assert!(get_with(&foreign, &https).await.is_err());

    // No certificate: a client of public https servers only.
    let anonymous = HttpClient::new(1 << 20);
    assert!(get_with(&anonymous, &https).await.is_err());

    // Plain HTTP to the TLS port: not a TLS handshake, refused.
    let plain = format!("http://127.0.0.1:{port}/");
    assert!(get_with(&anonymous, &plain).await.is_err());

    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "no refused client reached the handler"
    );
    // The one allowed client still gets through afterwards.
    assert_eq!(get_with(&worker, &https).await.unwrap(), "200 ok");
    stop.send(()).unwrap();
}

#[tokio::test]
async fn a_tls_client_never_speaks_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "cluster-ca");
    let client = HttpClient::with_tls(1 << 20, Some(&load(&ca.node("worker-1", &[]))));
    let e = get_with(&client, "http://127.0.0.1:9/").await.unwrap_err();
    assert!(e.to_string().contains("127.0.0.1:9"), "{e}");
}

#[test]
fn a_key_file_every_user_can_read_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "cluster-ca");
    let c = ca.node("server-1", &[]);
    std::fs::set_permissions(&c.key_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = c.load().unwrap_err();
    assert!(matches!(e, TlsError::KeyReadableByAll { .. }), "{e}");
    assert!(
        e.to_string().contains(&c.key_path.display().to_string()),
        "{e}"
    );
    // Group-readable (a mounted secret) is fine.
    std::fs::set_permissions(&c.key_path, std::fs::Permissions::from_mode(0o640)).unwrap();
    c.load().unwrap().expect("TLS is on");
}

#[test]
fn security_paths_are_all_or_nothing_and_bad_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "cluster-ca");
    let full = ca.node("server-1", &[]);
    let partial = SecurityConfig {
        key_path: PathBuf::new(),
        ..full.clone()
    };
    let e = partial.validate().unwrap_err().to_string();
    assert!(e.contains("security.key-path"), "{e}");
    let names_without_tls = SecurityConfig {
        cert_allowed_cn: vec!["a".into()],
        ..SecurityConfig::default()
    };
    let e = names_without_tls.validate().unwrap_err().to_string();
    assert!(e.contains("security.cert-allowed-cn"), "{e}");
    // Admins named but no node: every node path would be refused.
    let admins_only = SecurityConfig {
        admin_cn: vec!["ops".into()],
        ..full.clone()
    };
    let e = admins_only.validate().unwrap_err().to_string();
    assert!(e.contains("security.node-cn"), "{e}");
    // With TLS, a node's URL of another node must be https; without, anything goes.
    let e = full
        .check_urls("raft.peers", ["https://a:1", "http://b:2"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("raft.peers") && e.contains("http://b:2"), "{e}");
    full.check_urls("raft.peers", ["https://a:1", ""]).unwrap();
    SecurityConfig::default()
        .check_urls("raft.peers", ["http://b:2"])
        .unwrap();
    assert!(SecurityConfig::default().load().unwrap().is_none());

    // A CA file that holds no certificate, and a missing certificate file.
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let e = SecurityConfig {
        ca_path: not_pem.clone(),
        ..full.clone()
    }
    .load()
    .unwrap_err()
    .to_string();
    assert!(e.contains(&not_pem.display().to_string()), "{e}");
    let missing = dir.path().join("missing.pem");
    let e = SecurityConfig {
        cert_path: missing.clone(),
        ..full
    }
    .load()
    .unwrap_err()
    .to_string();
    assert!(e.contains(&missing.display().to_string()), "{e}");
}

/// A router guarded as a server's ([`node::access::guarded`], admin paths also accepting
/// `token`): a node path, an admin path and a client path, each answering "ok".
fn guarded_paths(token: Option<node::tls::AdminToken>) -> Router {
    use axum::routing::post;
    use wire::paths;
    let router = Router::new()
        .route(paths::RAFT_BATCH, post(|| async { "ok" }))
        .route(paths::RAW_LOAD, post(|| async { "ok" }))
        .route(paths::GET, post(|| async { "ok" }));
    node::access::guarded(router, wire::traffic::Role::Server, token)
}

#[tokio::test]
async fn each_path_answers_only_callers_of_its_tier() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "cluster-ca");
    let tiers = |c: SecurityConfig| SecurityConfig {
        node_cn: vec!["stratus-server".into()],
        admin_cn: vec!["stratus-admin".into()],
        ..c
    };
    let tls = load(&tiers(ca.node("stratus-server", &[])));
    let (port, stop) = serve(guarded_paths(None), Some(tls)).await;
    let url = |path: &str| format!("https://127.0.0.1:{port}{path}");
    let status = |client: HttpClient, path: &'static str| {
        let url = url(path);
        async move {
            let reply = client
                .post(&url, bytes::Bytes::new(), Duration::from_secs(5))
                .await
                .unwrap();
            (
                reply.status.as_u16(),
                String::from_utf8_lossy(&reply.body).into_owned(),
            )
        }
    };
    let as_cn = |cn: &str| HttpClient::with_tls(1 << 20, Some(&load(&ca.node(cn, &[]))));
    let (node, admin, client) = (
        as_cn("stratus-server"),
        as_cn("stratus-admin"),
        as_cn("app"),
    );
    use wire::paths::{GET, RAFT_BATCH, RAW_LOAD};
    // A node reaches everything.
    for path in [RAFT_BATCH, RAW_LOAD, GET] {
        assert_eq!(status(node.clone(), path).await.0, 200, "node {path}");
    }
    // An admin: everything but the node-only paths.
    let (code, body) = status(admin.clone(), RAFT_BATCH).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("node") && body.contains("admin"), "{body}");
    assert_eq!(status(admin.clone(), RAW_LOAD).await.0, 200);
    assert_eq!(status(admin, GET).await.0, 200);
    // Any other certificate the CA signed is a client: reads only.
    let (code, body) = status(client.clone(), RAW_LOAD).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("security.admin-cn"), "{body}");
    assert_eq!(status(client.clone(), RAFT_BATCH).await.0, 403);
    assert_eq!(status(client, GET).await.0, 200);
    stop.send(()).unwrap();
}

/// Copies `cn`'s certificate and key, and the CA, from `from`'s directory over `to`'s files.
fn rotate(from: &SecurityConfig, to: &SecurityConfig) {
    std::fs::copy(&from.ca_path, &to.ca_path).unwrap();
    std::fs::copy(&from.cert_path, &to.cert_path).unwrap();
    std::fs::copy(&from.key_path, &to.key_path).unwrap();
}

#[tokio::test]
async fn rotated_certificate_files_take_effect_on_new_connections_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let old_ca = Ca::new(dir.path(), "old-ca");
    let new_ca = Ca::new(dir.path(), "new-ca");
    let server_files = old_ca.node("server-1", &[]);
    let server_tls = load(&server_files);
    let (port, hits, stop) = start(server_tls.clone()).await;
    let https = format!("https://127.0.0.1:{port}/");
    let client_files = old_ca.node("worker-1", &[]);
    let client_tls = load(&client_files);
    let fresh = |tls: &Tls| HttpClient::with_tls(1 << 20, Some(tls));
    assert_eq!(
        get_with(&fresh(&client_tls), &https).await.unwrap(),
        "200 ok"
    );

    // The server's files move to a new CA: after the reload, new connections need it.
    rotate(&new_ca.node("server-1", &[]), &server_files);
    assert!(server_tls.reload_if_changed().unwrap(), "the files changed");
    assert!(!server_tls.reload_if_changed().unwrap(), "and not again");
    let new_client = load(&new_ca.node("worker-1", &[]));
    assert_eq!(
        get_with(&fresh(&new_client), &https).await.unwrap(),
        "200 ok"
    );
    let stale = fresh(&client_tls);
    assert!(
        get_with(&stale, &https).await.is_err(),
        "the old CA's client is refused"
    );

    // The client's files rotate too: the same client, built before, follows its reload.
    rotate(&new_ca.node("worker-1", &[]), &client_files);
    assert!(client_tls.reload_if_changed().unwrap());
    assert_eq!(get_with(&stale, &https).await.unwrap(), "200 ok");

    // A file caught mid-write does not load: the settings in use stay, and say why.
    std::fs::write(
        &server_files.cert_path,
        "-----BEGIN CERTIFICATE-----\ntrunc",
    )
    .unwrap();
    let e = server_tls.reload_if_changed().unwrap_err().to_string();
    assert!(
        e.contains(&server_files.cert_path.display().to_string()),
        "{e}"
    );
    assert_eq!(
        get_with(&fresh(&new_client), &https).await.unwrap(),
        "200 ok"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 4);
    stop.send(()).unwrap();
}

#[tokio::test]
async fn with_an_admin_token_admin_paths_need_it_even_over_plain_http() {
    use std::os::unix::fs::PermissionsExt;
    use wire::paths::{GET, RAFT_BATCH, RAW_LOAD};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin-token");
    std::fs::write(&path, "s3cret-token\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let security = SecurityConfig {
        admin_token_path: path.clone(),
        ..SecurityConfig::default()
    };
    let token = security.admin_token().unwrap().expect("a token");
    assert!(!format!("{token:?}").contains("s3cret"), "Debug hides it");
    let (port, _stop) = serve(guarded_paths(Some(token.clone())), None).await;
    let base = format!("http://127.0.0.1:{port}");
    let call = |client: HttpClient, path: &'static str| {
        let url = format!("{base}{path}");
        async move {
            let r = client
                .post(&url, bytes::Bytes::new(), Duration::from_secs(5))
                .await
                .unwrap();
            (
                r.status.as_u16(),
                String::from_utf8_lossy(&r.body).into_owned(),
            )
        }
    };
    let anonymous = HttpClient::new(1 << 20);
    let (code, body) = call(anonymous.clone(), RAW_LOAD).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("admin token"), "{body}");
    // The wrong token, or one of another length, is no better.
    for wrong in ["s3cret-tokeX\n", "s3cret\n"] {
        std::fs::write(dir.path().join("wrong"), wrong).unwrap();
        std::fs::set_permissions(
            dir.path().join("wrong"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let bad = SecurityConfig {
            admin_token_path: dir.path().join("wrong"),
            ..SecurityConfig::default()
        }
        .admin_token()
        .unwrap();
        let client = HttpClient::new(1 << 20).with_admin_token(bad);
        assert_eq!(call(client, RAW_LOAD).await.0, 403, "{wrong:?}");
    }
    let admin = HttpClient::new(1 << 20).with_admin_token(Some(token));
    assert_eq!(call(admin, RAW_LOAD).await.0, 200);
    // Without TLS the other tiers stay open: reads, and (no certificates to tell) node paths.
    assert_eq!(call(anonymous.clone(), GET).await.0, 200);
    assert_eq!(call(anonymous, RAFT_BATCH).await.0, 200);
    // A token file others can read is refused, naming it.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = security.admin_token().unwrap_err().to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
}
