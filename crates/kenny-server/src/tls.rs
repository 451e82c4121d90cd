//! Built-in TLS: a certificate chain and its key read from PEM files and served with
//! rustls (the `ring` provider the rest of the server already uses), reloaded when
//! either file changes, so a renewed certificate (certbot, acme.sh, a copied file) is
//! picked up without a restart. A reload that fails keeps the certificate in use and
//! says why in the log; at start-up the same failure stops the server.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

/// Where the certificate and key are, and how often to look for changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the server certificate first, then any intermediates.
    pub cert: PathBuf,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    pub reload_every: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS {what} file {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the certificate chain there")]
    NoCertificate { path: PathBuf },
    #[error("{path} holds no PEM private key; give the key of the certificate there (PKCS#8, RSA or EC)")]
    NoKey { path: PathBuf },
    #[error("the TLS certificate and key do not make a usable pair ({0}); check that the key is the certificate's")]
    Rejected(rustls::Error),
}

/// What a file looked like when it was read; a change in either means "read again".
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Reads both files into a server configuration (HTTP/1.1 only, which is all the
/// listener speaks).
pub fn load(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let read = |what, path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            what,
            path: path.to_owned(),
            source,
        })
    };
    let cert_pem = read("certificate", &files.cert)?;
    let key_pem = read("key", &files.key)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: files.cert.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| TlsError::NoKey {
        path: files.key.clone(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Rejected)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::Rejected)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The configuration in force and the files it came from.
pub struct Tls {
    files: TlsFiles,
    current: RwLock<(Arc<ServerConfig>, Stamp, Stamp)>,
}

impl Tls {
    pub fn open(files: TlsFiles) -> Result<Tls, TlsError> {
        let stamps = (stamp(&files.cert), stamp(&files.key));
        let config = load(&files)?;
        Ok(Tls {
            files,
            current: RwLock::new((config, stamps.0, stamps.1)),
        })
    }

    /// The acceptor for a new connection: the configuration in force now.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner());
        tokio_rustls::TlsAcceptor::from(current.0.clone())
    }

    /// Reads the files again if either changed since the last read; `None` when
    /// neither did. On failure the configuration in force stays, and the stamps are
    /// kept too, so the same broken files are reported once, not on every look.
    pub fn reload_if_changed(&self) -> Option<Result<(), TlsError>> {
        let (cert, key) = (stamp(&self.files.cert), stamp(&self.files.key));
        {
            let current = self.current.read().unwrap_or_else(|p| p.into_inner());
            if current.1 == cert && current.2 == key {
                return None;
            }
        }
        let loaded = load(&self.files);
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        current.1 = cert;
        current.2 = key;
        Some(loaded.map(|config| current.0 = config))
    }
}

/// Looks for changed files every `reload_every` until shutdown.
pub(crate) async fn watch(tls: Arc<Tls>, shutdown: CancellationToken) {
    let every = tls.files.reload_every;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let tls = tls.clone();
        let outcome = tokio::task::spawn_blocking(move || tls.reload_if_changed()).await;
        match outcome {
            Ok(Some(Ok(()))) => tracing::info!("TLS certificate reloaded"),
            Ok(Some(Err(e))) => {
                tracing::error!(error = %e, "TLS certificate not reloaded; the previous one stays in use")
            }
            Ok(None) | Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> TlsFiles {
        TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            reload_every: Duration::from_secs(1),
        }
    }

    #[test]
    fn missing_or_wrong_files_say_which_and_what_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let err = load(&f).unwrap_err().to_string();
        assert!(
            err.contains("cannot read the TLS certificate file") && err.contains("cert.pem"),
            "{err}"
        );
        std::fs::write(&f.cert, "not a certificate").unwrap();
        std::fs::write(&f.key, "not a key").unwrap();
        let err = load(&f).unwrap_err().to_string();
        assert!(err.contains("holds no PEM certificate"), "{err}");
        std::fs::write(
            &f.cert,
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUZm9v\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = load(&f).unwrap_err().to_string();
        assert!(
            err.contains("holds no PEM private key") && err.contains("key.pem"),
            "{err}"
        );
    }
}
