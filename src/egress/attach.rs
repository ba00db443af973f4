//! What a box needs to reach an egress proxy: the proxy's side of the box attachment (the box
//! side, binds, env and relay argv, is lifecycle/egress.rs).

use std::path::PathBuf;

use crate::errors::{Error, Result};

/// A box attached to a host egress proxy: what the policy owner (the session, or a machine with a
/// policy of its own) hands the box builder.
#[derive(Debug, Clone, PartialEq)]
pub struct EgressAttach {
    /// The proxy's unix socket on the host.
    pub sock: PathBuf,
    /// The proxy CA's certificate, PEM. Only the certificate: the key stays with the proxy.
    pub ca_pem: String,
    /// The agent binary on the host (the relay of one-shot and kernel boxes).
    pub agent: PathBuf,
}

/// The internal test hook: `KERN_SANDBOX_TEST_EGRESS_SOCK` (a proxy socket) and
/// `KERN_SANDBOX_TEST_EGRESS_CA` (a PEM certificate file), read when a Sandbox is constructed,
/// attach its boxes to that socket, with the agent at `KERN_SANDBOX_AGENT`. Undocumented on
/// purpose: the egress policy sets the attach once it is merged.
pub fn from_test_env() -> Result<Option<EgressAttach>> {
    let Some(sock) = std::env::var_os("KERN_SANDBOX_TEST_EGRESS_SOCK").filter(|s| !s.is_empty())
    else {
        return Ok(None);
    };
    let ca = std::env::var_os("KERN_SANDBOX_TEST_EGRESS_CA").unwrap_or_default();
    let ca_pem = std::fs::read_to_string(&ca)
        .map_err(|e| Error::io("KERN_SANDBOX_TEST_EGRESS_CA: cannot read the CA", e))?;
    let agent = std::env::var_os("KERN_SANDBOX_AGENT")
        .filter(|a| !a.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| {
            Error::InvalidOption("KERN_SANDBOX_TEST_EGRESS_SOCK needs KERN_SANDBOX_AGENT".into())
        })?;
    Ok(Some(EgressAttach {
        sock: sock.into(),
        ca_pem,
        agent,
    }))
}
