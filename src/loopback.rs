//! A loopback listener bound synchronously, for callers that must name a host port before they
//! can await anything (E2B's `getHost(port)` returns a string). Node's own `listen()` only binds
//! on a later tick; binding here and handing Node the descriptor gives the port at once.

use std::net::TcpListener;
use std::os::fd::IntoRawFd;

use napi_derive::napi;

use crate::errors::Error;

/// A listening TCP socket on 127.0.0.1 at an ephemeral port.
#[napi(object)]
pub struct LoopbackListener {
    /// The descriptor, owned by the caller from now on (Node's `listen({ fd })` takes it over).
    pub fd: i32,
    pub port: u32,
}

/// Binds 127.0.0.1:0 and listens. Non-blocking syscalls only: safe on the event loop.
#[napi]
pub fn bind_loopback() -> napi::Result<LoopbackListener> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| Error::Sandbox(format!("cannot bind a port on 127.0.0.1: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::Sandbox(format!("cannot read the bound port: {e}")))?
        .port();
    // Node's TCP handle expects a non-blocking socket.
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Sandbox(format!("cannot make the listener non-blocking: {e}")))?;
    Ok(LoopbackListener {
        fd: listener.into_raw_fd(),
        port: u32::from(port),
    })
}
