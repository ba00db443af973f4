//! The egress policy and the messages between the binding and its proxy process
//! (`kern-sandbox-egress`, crate egress/).
//!
//! The binding checks a policy here when JS hands it over, so a bad one is an
//! `ERR_BAD_NETWORK_POLICY` naming the entry at once; the proxy process checks the same JSON
//! again with the same code and enforces it.

mod addr;
mod policy;
pub mod wire;

pub use policy::{is_token, BadPolicy, Headers, Host, Policy, Refusal};
pub use wire::Event;
