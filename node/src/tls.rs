//! `[security]`: TLS with a cluster CA on a node's listener and on its clients, mutual: each
//! side proves itself with a certificate the CA signed, as TiKV does.
//!
//! ```toml
//! [security]
//! ca-path = ""            # PEM file of the CA certificate(s) every peer's certificate must chain to
//! cert-path = ""          # PEM file of this node's certificate (chain)
//! key-path = ""           # PEM file of its private key: no access for other users (chmod 600)
//! cert-allowed-cn = []    # common names a peer's certificate must carry (empty: any the CA signed)
//! node-cn = []            # names of cluster nodes: the only callers of node-only paths
//! admin-cn = []           # names of admins: callers of raw loads, splits, drains, rules
//! admin-token-path = ""   # a file with a token that makes a request an admin's
//! ```
//!
//! All three paths empty (the default) is plain HTTP. Setting them is all or nothing: a node
//! with TLS accepts only TLS connections whose client certificate chains to `ca-path` (and,
//! when `cert-allowed-cn` is set, carries one of those names as its subject's common name),
//! and its clients speak only https, presenting `cert-path` and checking the server's
//! certificate against the CA and the address they dial.
//!
//! Each connection's caller is a node, an admin or a client (`wire::access::Caller`) by its
//! certificate's common name: in `node-cn` a node, else in `admin-cn` an admin, else a client;
//! every listener checks each request's path against it (`crate::access`). With both lists
//! empty every certificate the CA signed is a node (TiKV's model: the CA is the trust).
//!
//! The files are read again every ten seconds by each listener, and a change takes effect on
//! new connections, both ends (rotation without a restart, `stratus_tls_reloads_total`); a
//! change that does not load keeps the settings in use.
//!
//! A key file readable by every user is refused at start, with its path (as ssh refuses a
//! private key others can read); group access is allowed, as container secrets mount keys
//! group-readable.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

use wire::access::Caller;

use crate::config::ConfigError;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SecurityConfig {
    /// The cluster CA's certificate(s), PEM.
    pub ca_path: PathBuf,
    /// This node's certificate, PEM (its chain may follow it in the file).
    pub cert_path: PathBuf,
    /// This node's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_path: PathBuf,
    /// Common names a peer's certificate must carry; empty = any certificate the CA signed.
    pub cert_allowed_cn: Vec<String>,
    /// Common names of cluster nodes (servers, workers, placement drivers): the callers of
    /// node-only paths (Raft, offload, delegate, heartbeats).
    pub node_cn: Vec<String>,
    /// Common names of admins: the callers of raw loads, splits, flushes, leader transfers,
    /// drains, operators and placement rules (nodes may call them too).
    pub admin_cn: Vec<String>,
    /// A file holding the admin token (refused when every user may read it): with it, a
    /// request to an admin path must carry `Authorization: Bearer <token>` or come from an
    /// admin's or a node's certificate, with or without TLS. The file's path is what the
    /// config shows, never the token.
    pub admin_token_path: PathBuf,
}

impl SecurityConfig {
    /// Whether TLS is on (the paths are set).
    pub fn enabled(&self) -> bool {
        !self.ca_path.as_os_str().is_empty()
    }

    /// The paths are all set or all empty; allowed names need TLS.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let set = [
            ("security.ca-path", &self.ca_path),
            ("security.cert-path", &self.cert_path),
            ("security.key-path", &self.key_path),
        ];
        let any = set.iter().any(|(_, p)| !p.as_os_str().is_empty());
        if any && let Some((key, _)) = set.iter().find(|(_, p)| p.as_os_str().is_empty()) {
            return Err(ConfigError::invalid(
                key,
                "expected a path: ca-path, cert-path and key-path are set together (TLS) or \
                 not at all (plain HTTP), found it empty while another is set",
            ));
        }
        for (key, names) in [
            ("security.cert-allowed-cn", &self.cert_allowed_cn),
            ("security.node-cn", &self.node_cn),
            ("security.admin-cn", &self.admin_cn),
        ] {
            if !any && !names.is_empty() {
                return Err(ConfigError::invalid(
                    key,
                    "expected no names without TLS (ca-path, cert-path, key-path), found some",
                ));
            }
        }
        if !self.admin_cn.is_empty() && self.node_cn.is_empty() {
            // Tiers on, and no certificate a node's: every Raft message, offload and heartbeat
            // would be refused.
            return Err(ConfigError::invalid(
                "security.node-cn",
                "expected the nodes' names when admin-cn is set (with tiers, only they may call \
                 node paths), found none",
            ));
        }
        Ok(())
    }

    /// With TLS, every URL of another node this config names (under `key`) must be https:
    /// the node's clients speak nothing else, and an http URL would fail at its first call
    /// instead of at start. Empty strings (unset) pass.
    pub fn check_urls<'a>(
        &self,
        key: &str,
        urls: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ConfigError> {
        if !self.enabled() {
            return Ok(());
        }
        match urls
            .into_iter()
            .find(|u| !u.is_empty() && !u.starts_with("https://"))
        {
            Some(u) => Err(ConfigError::invalid(
                key,
                format!("expected https:// URLs with [security] (TLS), found {u:?}"),
            )),
            None => Ok(()),
        }
    }

    /// The admin token from `admin-token-path` (`None` when unset): the file's first line,
    /// which must not be empty.
    pub fn admin_token(&self) -> Result<Option<AdminToken>, TlsError> {
        let path = &self.admin_token_path;
        if path.as_os_str().is_empty() {
            return Ok(None);
        }
        let token = read_secret_line("admin token file", path, "a token on its first line")?;
        Ok(Some(AdminToken(Arc::from(token.as_str()))))
    }

    /// Reads the files and builds both ends' TLS settings; `None` when TLS is off.
    pub fn load(&self) -> Result<Option<Arc<Tls>>, TlsError> {
        if !self.enabled() {
            return Ok(None);
        }
        Tls::load(self).map(|t| Some(Arc::new(t)))
    }
}

/// A secret that makes a request an admin's (`security.admin-token-path`). Its `Debug` does
/// not show it.
#[derive(Clone)]
pub struct AdminToken(Arc<str>);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(** redacted **)")
    }
}

impl AdminToken {
    /// The `Authorization` header value that carries it.
    pub fn header_value(&self) -> String {
        format!("Bearer {}", self.0)
    }

    /// Whether `header` (an `Authorization` value) carries this token; compared in time that
    /// does not depend on where the bytes differ.
    pub fn matches(&self, header: &[u8]) -> bool {
        let Some(given) = header.strip_prefix(b"Bearer ") else {
            return false;
        };
        let want = self.0.as_bytes();
        given.len() == want.len()
            && given
                .iter()
                .zip(want)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

/// The URL scheme of a node with (`https`) or without (`http`) TLS: its base URL when none is
/// configured, and every URL it builds from a bare address.
pub fn scheme(tls: Option<&Tls>) -> &'static str {
    if tls.is_some() { "https" } else { "http" }
}

/// Why a node's TLS setup could not be loaded. Each names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}")]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {path}: expected {expected}, found {found}")]
    Secret {
        what: &'static str,
        path: PathBuf,
        expected: &'static str,
        found: String,
    },
    #[error("{what} {path}: expected PEM {expected}, found {found}")]
    Pem {
        what: &'static str,
        path: PathBuf,
        expected: &'static str,
        found: String,
    },
    #[error(
        "key file {path} is readable by every user (mode {mode:03o}); expected no access for \
         others (chmod 600 or 640)"
    )]
    KeyReadableByAll { path: PathBuf, mode: u32 },
    #[error("CA certificates in {path} cannot verify peers: {reason}")]
    Ca { path: PathBuf, reason: String },
    #[error("certificate {cert} and key {key} do not make a TLS identity: {reason}")]
    Identity {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
}

/// A node's TLS settings: what its listener accepts and what its clients present, reloaded
/// from the files when they change ([`Tls::reload_if_changed`], which a listener calls every
/// [`RELOAD_INTERVAL`]): a rotated certificate, key or CA takes effect on new connections
/// without a restart (TiKV's rotation). Connections already open keep their session.
#[derive(Debug)]
pub struct Tls {
    config: SecurityConfig,
    /// What the files held at the last (re)load: the listener takes its settings from it for
    /// each connection, and the client side reads its certificate and CA through it at each
    /// handshake, so a client built once follows every reload.
    current: Arc<Current>,
    client: Arc<rustls::ClientConfig>,
}

/// How often a listener looks at its certificate files.
pub const RELOAD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// What one reading of the files made.
#[derive(Debug)]
struct Loaded {
    /// The files' bytes, to tell a change.
    files: [Vec<u8>; 3],
    server: Arc<rustls::ServerConfig>,
    key: Arc<rustls::sign::CertifiedKey>,
    verifier: Arc<rustls::client::WebPkiServerVerifier>,
}

/// What a listener re-reads from its files when they change (every [`RELOAD_INTERVAL`]:
/// `crate::http::reload_periodically`).
pub trait Reload: Send + Sync + 'static {
    /// `Ok(true)` when the files changed and now serve new connections; an `Err` keeps the
    /// settings in use.
    fn reload_if_changed(&self) -> Result<bool, TlsError>;
}

/// A listener's TLS identity for clients that present no certificate (the SQL endpoint's
/// MySQL clients, which log in with a password instead): a certificate chain and its key
/// (refused when every user may read it), re-read when the files change.
pub struct ServerIdentity {
    cert: PathBuf,
    key: PathBuf,
    /// The files' bytes (to tell a change) and the settings built from them.
    current: parking_lot::RwLock<(Vec<u8>, Vec<u8>, Arc<rustls::ServerConfig>)>,
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIdentity")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl ServerIdentity {
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<ServerIdentity>, TlsError> {
        let (cert_bytes, key_bytes) = ServerIdentity::read(cert, key)?;
        let config = ServerIdentity::build(cert, key, &cert_bytes, &key_bytes)?;
        Ok(Arc::new(ServerIdentity {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: parking_lot::RwLock::new((cert_bytes, key_bytes, config)),
        }))
    }

    /// The settings new connections use.
    pub fn config(&self) -> Arc<rustls::ServerConfig> {
        self.current.read().2.clone()
    }

    fn read(cert: &Path, key: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
        check_key_permissions(key)?;
        Ok((
            read_file("certificate file", cert)?,
            read_file("key file", key)?,
        ))
    }

    fn build(
        cert: &Path,
        key: &Path,
        cert_bytes: &[u8],
        key_bytes: &[u8],
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let certs = parse_certs("certificate file", cert, cert_bytes)?;
        let private = parse_key(key, key_bytes)?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(certs, private))
            .map_err(|e| TlsError::Identity {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
                reason: e.to_string(),
            })?;
        Ok(Arc::new(config))
    }
}

impl Reload for ServerIdentity {
    fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let (cert_bytes, key_bytes) = ServerIdentity::read(&self.cert, &self.key)?;
        {
            let current = self.current.read();
            if current.0 == cert_bytes && current.1 == key_bytes {
                return Ok(false);
            }
        }
        let config = ServerIdentity::build(&self.cert, &self.key, &cert_bytes, &key_bytes)?;
        *self.current.write() = (cert_bytes, key_bytes, config);
        Ok(true)
    }
}

impl Reload for Tls {
    fn reload_if_changed(&self) -> Result<bool, TlsError> {
        Tls::reload_if_changed(self)
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    fn load(c: &SecurityConfig) -> Result<Tls, TlsError> {
        let current = Arc::new(Current(parking_lot::RwLock::new(Arc::new(Loaded::read(
            c,
        )?))));
        // No ALPN here: the connector sets it (http/1.1).
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Identity {
                cert: c.cert_path.clone(),
                key: c.key_path.clone(),
                reason: e.to_string(),
            })?
            .dangerous()
            .with_custom_certificate_verifier(current.clone())
            .with_client_cert_resolver(current.clone());
        Ok(Tls {
            config: c.clone(),
            current,
            client: Arc::new(client),
        })
    }

    /// The listener's settings now (each accepted connection takes the current ones).
    pub(crate) fn server_config(&self) -> Arc<rustls::ServerConfig> {
        self.current.loaded().server.clone()
    }

    /// The client side's settings (following every reload).
    pub(crate) fn client_config(&self) -> Arc<rustls::ClientConfig> {
        self.client.clone()
    }

    /// Reads the three files again and, when any changed, switches to them: `Ok(true)`. A
    /// change that does not load (a file caught mid-write, a key that does not match) keeps
    /// the settings in use and is the `Err`, for the caller to log; the next call tries again.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let files = Loaded::read_files(&self.config)?;
        if files == self.current.loaded().files {
            return Ok(false);
        }
        let loaded = Arc::new(Loaded::build(&self.config, files)?);
        *self.current.0.write() = loaded;
        Ok(true)
    }

    /// Who a peer that presented `certs` (leaf first; the CA already verified them) is, or
    /// `Err` naming what its certificate carries when `cert-allowed-cn` does not list it.
    pub fn check_peer(&self, certs: Option<&[CertificateDer<'_>]>) -> Result<Caller, String> {
        let c = &self.config;
        let tiered = !c.node_cn.is_empty() || !c.admin_cn.is_empty();
        if c.cert_allowed_cn.is_empty() && !tiered {
            return Ok(Caller::Node);
        }
        let Some(leaf) = certs.and_then(|c| c.first()) else {
            return Err("expected a client certificate, found none".into());
        };
        let names = common_names(leaf)?;
        let carries = |list: &[String]| names.iter().any(|n| list.contains(n));
        if !c.cert_allowed_cn.is_empty() && !carries(&c.cert_allowed_cn) {
            return Err(format!(
                "expected a certificate with a common name in {:?}, found {names:?}",
                c.cert_allowed_cn
            ));
        }
        Ok(if !tiered || carries(&c.node_cn) {
            Caller::Node
        } else if carries(&c.admin_cn) {
            Caller::Admin
        } else {
            Caller::Client
        })
    }
}

impl Loaded {
    fn read_files(c: &SecurityConfig) -> Result<[Vec<u8>; 3], TlsError> {
        check_key_permissions(&c.key_path)?;
        Ok([
            read_file("CA file", &c.ca_path)?,
            read_file("certificate file", &c.cert_path)?,
            read_file("key file", &c.key_path)?,
        ])
    }

    fn read(c: &SecurityConfig) -> Result<Loaded, TlsError> {
        Loaded::build(c, Loaded::read_files(c)?)
    }

    fn build(c: &SecurityConfig, files: [Vec<u8>; 3]) -> Result<Loaded, TlsError> {
        let ca = parse_certs("CA file", &c.ca_path, &files[0])?;
        let certs = parse_certs("certificate file", &c.cert_path, &files[1])?;
        let key = parse_key(&c.key_path, &files[2])?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in ca {
            roots.add(cert).map_err(|e| TlsError::Ca {
                path: c.ca_path.clone(),
                reason: e.to_string(),
            })?;
        }
        let roots = Arc::new(roots);
        let identity = |reason: String| TlsError::Identity {
            cert: c.cert_path.clone(),
            key: c.key_path.clone(),
            reason,
        };
        let ca_error = |reason: String| TlsError::Ca {
            path: c.ca_path.clone(),
            reason,
        };
        let client_verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
                .build()
                .map_err(|e| ca_error(e.to_string()))?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| identity(e.to_string()))?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| identity(e.to_string()))?;
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let signing = provider()
            .key_provider
            .load_private_key(key)
            .map_err(|e| identity(e.to_string()))?;
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider())
                .build()
                .map_err(|e| ca_error(e.to_string()))?;
        Ok(Loaded {
            files,
            server: Arc::new(server),
            key: Arc::new(rustls::sign::CertifiedKey::new(certs, signing)),
            verifier,
        })
    }
}

/// The client side's view of a [`Tls`]'s current settings: the certificate it presents and the
/// CA it checks servers against, read at each handshake.
#[derive(Debug)]
struct Current(parking_lot::RwLock<Arc<Loaded>>);

impl Current {
    fn loaded(&self) -> Arc<Loaded> {
        self.0.read().clone()
    }
}

impl rustls::client::ResolvesClientCert for Current {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.loaded().key.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl rustls::client::danger::ServerCertVerifier for Current {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.loaded().verifier.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.loaded()
            .verifier
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.loaded()
            .verifier
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.loaded().verifier.supported_verify_schemes()
    }
}

/// The subject common names of a DER certificate.
fn common_names(der: &CertificateDer<'_>) -> Result<Vec<String>, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| {
        format!("expected an X.509 certificate, found one that does not parse: {e}")
    })?;
    Ok(cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect())
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn parse_certs(
    what: &'static str,
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(bytes).collect();
    match certs {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        Ok(_) => Err(TlsError::Pem {
            what,
            path: path.to_path_buf(),
            expected: "CERTIFICATE blocks",
            found: "none".into(),
        }),
        Err(e) => Err(TlsError::Pem {
            what,
            path: path.to_path_buf(),
            expected: "CERTIFICATE blocks",
            found: e.to_string(),
        }),
    }
}

fn parse_key(path: &Path, bytes: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(bytes).map_err(|e| TlsError::Pem {
        what: "key file",
        path: path.to_path_buf(),
        expected: "a PRIVATE KEY block",
        found: e.to_string(),
    })
}

/// The first line of a secret file (a token, a password), trimmed: refused when every user
/// may read the file, as key files are, or when the line is empty (`expected` says what it
/// should hold).
pub fn read_secret_line(
    what: &'static str,
    path: &Path,
    expected: &'static str,
) -> Result<String, TlsError> {
    check_key_permissions(path)?;
    let bytes = read_file(what, path)?;
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return Err(TlsError::Secret {
            what,
            path: path.to_path_buf(),
            expected,
            found: "an empty line".into(),
        });
    }
    Ok(line.to_string())
}

/// Refuses a key file every user may read (`o+r`), as ssh does.
fn check_key_permissions(path: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|source| TlsError::Read {
        what: "key file",
        path: path.to_path_buf(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o004 != 0 {
        return Err(TlsError::KeyReadableByAll {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}
