//! The per-proxy certificate authority: made when a proxy starts, its private key kept in this
//! process only. It signs a leaf certificate for each terminated host on first use (cached).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

use kern_sandbox_egress_policy::Host;

/// Leaf configurations kept; past this the cache starts over (hosts with rules are few).
const CACHE_MAX: usize = 1024;

pub struct Authority {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    /// One key for every leaf of this proxy: minting is then one signature.
    leaf_key: KeyPair,
    cache: Mutex<HashMap<Host, Arc<ServerConfig>>>,
}

fn validity(p: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::days(1);
    p.not_after = now + time::Duration::days(365);
}

impl Authority {
    pub fn new() -> Result<Authority, String> {
        let err = |e: rcgen::Error| format!("could not make the egress CA: {e}");
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "kern-sandbox egress CA");
        dn.push(DnType::OrganizationName, "kern-sandbox");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params);
        let cert = params.self_signed(&key).map_err(err)?;
        Ok(Authority {
            pem: cert.pem(),
            ca_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
            leaf_key: KeyPair::generate().map_err(err)?,
            cache: Mutex::new(HashMap::new()),
        })
    }

    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The TLS server side for `host`: a leaf for that name (or address) signed by this CA,
    /// ALPN http/1.1 only.
    pub fn server_config(&self, host: &Host) -> std::result::Result<Arc<ServerConfig>, String> {
        if let Some(c) = self.lock().get(host) {
            return Ok(c.clone());
        }
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        let san = match host {
            Host::Name(n) => {
                dn.push(DnType::CommonName, n.as_str());
                SanType::DnsName(
                    n.clone()
                        .try_into()
                        .map_err(|e: rcgen::Error| e.to_string())?,
                )
            }
            Host::Ip(ip) => {
                dn.push(DnType::CommonName, ip.to_string());
                SanType::IpAddress(*ip)
            }
        };
        params.distinguished_name = dn;
        params.subject_alt_names = vec![san];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        let leaf = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| e.to_string())?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let mut cfg = ServerConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.ca_der.clone()], key)
            .map_err(|e| e.to_string())?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let cfg = Arc::new(cfg);
        let mut cache = self.lock();
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(host.clone(), cfg.clone());
        Ok(cfg)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Host, Arc<ServerConfig>>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authority { key: <host memory only> }")
    }
}
