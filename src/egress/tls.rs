//! TLS on both sides of a terminated host, with rustls on the `ring` provider: the client to the
//! upstream (system roots plus `upstreamCa`, SNI, ALPN http/1.1) and the PEM parsing of
//! `upstreamCa`.

use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// The one crypto provider the proxy uses (never a process-wide default: the host application
/// may have its own).
pub fn provider() -> Arc<CryptoProvider> {
    static P: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    // Deprecated for lacking post-quantum key exchange, which only aws-lc has; aws-lc needs
    // cmake and a C toolchain at build time, ring does not.
    #[allow(deprecated)]
    P.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// The host's trusted roots (its CA bundle, as OpenSSL finds it), read once per process.
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

/// Every CERTIFICATE block of a PEM text; an error if there is none or one does not decode.
pub fn pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block in the PEM text".into());
    }
    Ok(certs)
}

/// The upstream client: system roots plus `extra`, HTTP/1.1 only.
pub fn client_config(extra: &[CertificateDer<'static>]) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(system_roots().iter().cloned());
    for (i, c) in extra.iter().enumerate() {
        roots
            .add(c.clone())
            .map_err(|e| format!("certificate {i} is not a usable CA certificate: {e}"))?;
    }
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
