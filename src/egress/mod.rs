//! The host-side egress proxy (issue 37): the box's only way out, owned by the binding and run
//! in a process of its own, `kern-sandbox-egress` (crate egress/, where the socket contract is
//! described), so that TLS and HTTP parsing and the CA's key stay out of the Node process.
//!
//! # Rust API
//!
//! [`NetworkPolicy::check`] checks a policy (an `ERR_BAD_NETWORK_POLICY` naming the entry);
//! [`EgressProcess::start`] starts a proxy process serving one; [`EgressProcess::update`] swaps
//! the policy; [`EgressProcess::close`] (or dropping it) stops it and removes the socket file.

pub mod attach;
pub mod js;
mod policy;
mod process;

use std::sync::Arc;

pub use kern_sandbox_egress_policy::Event;
pub use policy::{NetworkPolicy, Policy};
pub use process::EgressProcess;

/// Where each [`Event`] of a proxy goes.
pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;
