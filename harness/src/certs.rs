//! A throwaway certificate authority for a TLS cluster on one machine (`stratus up --tls`, the
//! TLS tests): a self-signed CA and node certificates it signs, each with a common name (the
//! tier a node's `[security]` lists give it) and valid for `127.0.0.1` and `localhost`, written
//! as PEM files (keys `0600`, as a node requires). Not for production: the CA's key is kept
//! only in memory and gone when this value is.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use node::tls::SecurityConfig;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot make the {what}: {reason}")]
    Generate { what: String, reason: String },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A CA that signs node certificates into its directory.
pub struct ThrowawayCa {
    cert: rcgen::Certificate,
    key: KeyPair,
    dir: PathBuf,
}

impl ThrowawayCa {
    /// A new CA named `name`; its certificate goes to `<dir>/ca.pem`.
    pub fn create(dir: &Path, name: &str) -> Result<ThrowawayCa, CertError> {
        let gen_err = |reason: rcgen::Error| CertError::Generate {
            what: format!("CA {name}"),
            reason: reason.to_string(),
        };
        let key = KeyPair::generate().map_err(gen_err)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(gen_err)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).map_err(gen_err)?;
        create_dir(dir)?;
        write(&dir.join("ca.pem"), cert.pem().as_bytes(), 0o644)?;
        Ok(ThrowawayCa {
            cert,
            key,
            dir: dir.to_path_buf(),
        })
    }

    /// The CA's certificate file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate with common name `cn` for `127.0.0.1` and `localhost`, usable by a
    /// listener and a client, in `<dir>/<cn>.pem` and `<dir>/<cn>-key.pem`; the `[security]`
    /// that uses it (no name lists: the caller adds them).
    pub fn issue(&self, cn: &str) -> Result<SecurityConfig, CertError> {
        let gen_err = |reason: rcgen::Error| CertError::Generate {
            what: format!("certificate {cn}"),
            reason: reason.to_string(),
        };
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).map_err(gen_err)?;
        params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().map_err(gen_err)?;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(gen_err)?;
        let cert_path = self.dir.join(format!("{cn}.pem"));
        let key_path = self.dir.join(format!("{cn}-key.pem"));
        write(&cert_path, cert.pem().as_bytes(), 0o644)?;
        write(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
        Ok(SecurityConfig {
            ca_path: self.ca_path(),
            cert_path,
            key_path,
            ..SecurityConfig::default()
        })
    }
}

fn create_dir(dir: &Path) -> Result<(), CertError> {
    std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes `bytes` to `path` with permissions `mode` (set before the bytes go in, so a key is
/// never readable by others even for a moment).
fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CertError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let err = |source| CertError::Write {
        path: path.to_path_buf(),
        source,
    };
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(err)?;
    file.write_all(bytes).map_err(err)?;
    file.sync_all().map_err(err)
}
