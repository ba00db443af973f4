//! TLS on both sides of a terminated host, with rustls on the `ring` provider: the client to the
//! upstream (system roots plus `upstreamCa`, SNI, ALPN http/1.1), made once per policy.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use kern_sandbox_egress_policy::Policy;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use serde_json::Value;

/// The one crypto provider the proxy uses (never a process-wide default).
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

/// The upstream client: system roots plus `extra`, HTTP/1.1 only.
fn client_config(extra: &[CertificateDer<'static>]) -> Result<Arc<ClientConfig>, String> {
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

/// A policy as the proxy enforces it: the checked policy and its upstream TLS client.
pub struct Enforced {
    pub policy: Policy,
    /// Made on first use, by the first terminated host: reading the host's roots costs a few ms,
    /// which a proxy whose policy has no rules (or one not yet used) never pays at start.
    tls: OnceLock<Result<Arc<ClientConfig>, String>>,
}

impl Enforced {
    /// Checks `json` (an `ERR_BAD_NETWORK_POLICY` message naming the entry).
    pub fn new(json: &Value) -> Result<Enforced, String> {
        let policy = Policy::new(json).map_err(|e| e.to_string())?;
        Ok(Enforced {
            policy,
            tls: OnceLock::new(),
        })
    }

    /// The upstream TLS client: the host's roots plus upstreamCa (each of which the policy
    /// check has already parsed as a trust anchor, as rustls does here).
    pub fn tls(&self) -> Result<Arc<ClientConfig>, String> {
        self.tls
            .get_or_init(|| {
                client_config(self.policy.upstream_ca())
                    .map_err(|why| format!("network.upstreamCa: {why}"))
            })
            .clone()
    }
}

impl Deref for Enforced {
    type Target = Policy;
    fn deref(&self) -> &Policy {
        &self.policy
    }
}
