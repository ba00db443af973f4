//! What a box needs to reach an egress proxy: the proxy's side of the box attachment (the box
//! side, binds, env and relay argv, is lifecycle/egress.rs).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::{EgressProcess, EventSink, Policy};
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
/// purpose: the public way is a network policy, which starts an [`OwnedProxy`].
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

/// A proxy started by its owner (a session, or a machine with a policy of its own) in a 0700
/// directory of its own, which goes with it.
pub struct OwnedProxy {
    proxy: EgressProcess,
    dir: PathBuf,
}

impl OwnedProxy {
    /// Creates `dir` (0700; it must not exist), starts a proxy process serving `policy` on
    /// `dir/sock`, and returns the attach its boxes get (`agent` relays in one-shot and kernel
    /// boxes).
    pub async fn start(
        dir: &Path,
        policy: Policy,
        events: Option<EventSink>,
        agent: PathBuf,
    ) -> Result<(OwnedProxy, EgressAttach)> {
        let bin = crate::locate::find_egress()?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let sock = dir.join("sock");
        let proxy = match EgressProcess::start(&bin, &sock, policy, events).await {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_dir_all(dir);
                return Err(e);
            }
        };
        let attach = EgressAttach {
            sock,
            ca_pem: proxy.ca_pem().to_string(),
            agent,
        };
        let owned = OwnedProxy {
            proxy,
            dir: dir.to_path_buf(),
        };
        Ok((owned, attach))
    }

    /// Replaces the policy for requests that start from now on.
    pub fn update(&self, policy: Policy) -> Result<()> {
        self.proxy.update(policy)
    }

    /// The policy in force now.
    pub fn policy(&self) -> Policy {
        self.proxy.policy()
    }

    /// Stops the proxy (every connection ends) and removes its directory; resolves once done.
    pub async fn close(&self) {
        self.proxy.close().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for OwnedProxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
