//! `NativeEgress`: the proxy for JS, so tests (and later lib/) can start one on a socket path
//! with a policy, update it, hear its events and close it.

use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;

use crate::egress::js::{event_sink, EgressEventFn};
use crate::egress::{EgressProcess, NetworkPolicy};
use crate::errors::{self, Error};

/// A running egress proxy on a host Unix socket.
#[napi]
pub struct NativeEgress {
    inner: Arc<EgressProcess>,
}

#[napi]
impl NativeEgress {
    /// Checks `policy` (throws `ERR_BAD_NETWORK_POLICY`), then listens on `socketPath`, which
    /// must not exist yet. `onRequest` hears every request.
    #[napi(ts_return_type = "Promise<NativeEgress>")]
    pub fn start<'e>(
        env: &'e Env,
        socket_path: String,
        policy: NetworkPolicy,
        on_request: Option<EgressEventFn>,
    ) -> napi::Result<PromiseRaw<'e, NativeEgress>> {
        if socket_path.is_empty() || socket_path.contains('\0') {
            return Err(Error::InvalidOption("socketPath must be a file path".into()).into());
        }
        let policy = errors::guard(|| policy.check())?;
        let bin = crate::locate::find_egress()?;
        let events = on_request.map(event_sink);
        let path = PathBuf::from(socket_path);
        crate::promise(env, async move {
            let inner = EgressProcess::start(&bin, &path, policy, events).await?;
            Ok(NativeEgress {
                inner: Arc::new(inner),
            })
        })
    }

    /// The proxy's CA certificate (PEM): the box trusts it for terminated hosts.
    #[napi(getter)]
    pub fn ca_pem(&self) -> String {
        self.inner.ca_pem().to_string()
    }

    #[napi(getter)]
    pub fn socket_path(&self) -> String {
        self.inner.socket_path().to_string_lossy().into_owned()
    }

    /// Streams being served right now.
    #[napi(getter)]
    pub fn active_connections(&self) -> u32 {
        self.inner.active_connections() as u32
    }

    /// Replaces the policy for requests that start from now on; an invalid one throws
    /// `ERR_BAD_NETWORK_POLICY` and changes nothing.
    #[napi]
    pub fn update(&self, policy: NetworkPolicy) -> napi::Result<()> {
        let policy = errors::guard(|| policy.check())?;
        Ok(self.inner.update(policy)?)
    }

    /// Stops accepting, ends every connection and removes the socket file.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> napi::Result<PromiseRaw<'e, ()>> {
        let p = self.inner.clone();
        crate::promise(env, async move {
            p.close().await;
            Ok(())
        })
    }
}
