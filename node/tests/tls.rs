//! `[security]` on a real socket: a listener with TLS serves a client whose certificate the
//! cluster CA signed and whose name is allowed, and refuses (connection fails, handler never
//! runs) a plain-HTTP client, a client with a certificate from another CA, one whose name is
//! not in `cert-allowed-cn`, and one with no certificate at all; a key file every user can
//! read is refused at load with its path. The certificates come from a throwaway CA made here.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use node::http::{HttpLimits, serve_until};
use node::tls::{SecurityConfig, Tls, TlsError};
use node::{ClientError, HttpClient};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A CA that signs node certificates into a directory.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    dir: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), cert.pem()).unwrap();
        Ca { cert, key, dir }
    }

    /// A node certificate with common name `cn`, valid for 127.0.0.1, and its `[security]`
    /// (this CA, `allowed` names).
    fn node(&self, cn: &str, allowed: &[&str]) -> SecurityConfig {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let cert_path = self.dir.join(format!("{cn}.pem"));
        let key_path = self.dir.join(format!("{cn}-key.pem"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
        SecurityConfig {
            ca_path: self.dir.join("ca.pem"),
            cert_path,
            key_path,
            cert_allowed_cn: allowed.iter().map(|s| s.to_string()).collect(),
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
            Some(tls),
        )
        .await
        .unwrap();
    });
    (port, hits, stop)
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
