//! The host-side egress proxy (issue 37): the box's only way out, owned by the binding.
//!
//! # The socket contract
//!
//! A proxy listens on a **host Unix-domain socket** (mode 0600) at a path its owner chooses, in a
//! directory only the owner can enter (the path must not exist yet). The box side relays each
//! TCP connection a program makes to its in-box proxy port to one new stream on this socket,
//! byte for byte, and adds nothing. On each stream the proxy speaks HTTP/1.1 proxy protocol, as
//! a client configured with `HTTP_PROXY`/`HTTPS_PROXY` sends it:
//!
//! - `CONNECT host:port HTTP/1.1` (HTTPS, or any TCP): answered `200 Connection Established`,
//!   then the stream is the tunnel. A host with no header rules is tunnelled untouched (the
//!   upstream's own TLS reaches the client). A host with rules is terminated: the proxy speaks
//!   TLS to the client with a leaf certificate for that host signed by the proxy's CA
//!   ([`EgressProxy::ca_pem`], which the box must trust), reads HTTP/1.1 requests inside
//!   (keep-alive, chunked or sized bodies), sets the rule's headers and sends them over its own
//!   TLS connection to the upstream, verified against the host's roots and `upstreamCa`.
//! - An absolute-form request (`GET http://host[:port]/path HTTP/1.1`): forwarded, rules
//!   applied; the stream is kept alive between requests.
//! - A refused request gets `403 Forbidden` with one line of text,
//!   `kern-sandbox egress: host:port refused: reason`, and the stream is closed; one the policy
//!   allows but that cannot be reached gets `502 Bad Gateway` the same way (`… failed: …`).
//!   Anything else (an origin-form request, `https://` in absolute form, a malformed head) is a
//!   `400`; a head over [`Limits::max_head`] a `431`; past [`Limits::max_connections`] streams a
//!   `503`.
//!
//! Names are resolved on the host (or by `hosts`) and the policy is checked on every resolved
//! address; the proxy connects to the checked address itself. Every request yields an [`Event`].
//!
//! # Rust API
//!
//! [`Policy::new`] checks a [`NetworkPolicy`] (an `ERR_BAD_NETWORK_POLICY` naming the entry);
//! [`EgressProxy::start`] serves one on the current tokio runtime; [`EgressProxy::update`] swaps
//! the policy; [`EgressProxy::close`] (or dropping it) stops it and removes the socket file.

mod addr;
pub mod attach;
mod ca;
mod http;
pub mod js;
mod policy;
mod proxy;
mod resolve;
mod tls;

#[cfg(test)]
mod tests;

pub use policy::{NetworkPolicy, Policy};
pub use proxy::{EgressProxy, Event, EventSink, Limits};
