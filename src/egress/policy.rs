//! The policy as JS hands it over, checked up front (crate egress-policy) so that a bad one is an
//! `ERR_BAD_NETWORK_POLICY` naming the entry before anything starts.

use napi_derive::napi;
use serde_json::{Map, Value};

use crate::errors::{Error, Result};
pub use kern_sandbox_egress_policy::Policy;

/// The policy as JS hands it over. Fields are loose JSON on purpose: every type error becomes an
/// `ERR_BAD_NETWORK_POLICY` that names the entry, not napi's generic conversion error.
#[napi(object)]
#[derive(Default)]
pub struct NetworkPolicy {
    /// Names (`api.example.com`), leading wildcards (`*.example.com`), IP addresses and CIDRs,
    /// each optionally `:port` (`[v6]:port` for IPv6). Absent: every public address.
    #[napi(ts_type = "string[]")]
    pub allow_out: Option<Value>,
    /// IP addresses and CIDRs refused even when allowOut allows them; `0.0.0.0/0` or `::/0`
    /// refuse everything allowOut does not name.
    #[napi(ts_type = "string[]")]
    pub deny_out: Option<Value>,
    /// Per host (name, `*.` wildcard, IP or CIDR): ordered rules whose `transform.headers` are set
    /// on that host's requests. Rules never grant access.
    #[napi(
        ts_type = "Record<string, Array<{ transform?: { headers?: Record<string, string> } }>>"
    )]
    pub rules: Option<Value>,
    /// Names resolved to chosen addresses; an address named here is allowed even if private.
    #[napi(ts_type = "Record<string, string>")]
    pub hosts: Option<Value>,
    /// PEM CA certificates trusted upstream besides the host's system roots.
    #[napi(ts_type = "string | string[]")]
    pub upstream_ca: Option<Value>,
}

impl NetworkPolicy {
    /// Checks it whole; the first bad entry is the error and nothing is built.
    pub fn check(self) -> Result<Policy> {
        let mut m = Map::new();
        for (k, v) in [
            ("allowOut", self.allow_out),
            ("denyOut", self.deny_out),
            ("rules", self.rules),
            ("hosts", self.hosts),
            ("upstreamCa", self.upstream_ca),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        }
        Policy::new(&Value::Object(m)).map_err(|e| Error::BadNetworkPolicy(e.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bad_policy_is_err_bad_network_policy_naming_the_entry() {
        let e = NetworkPolicy {
            allow_out: Some(json!(["ok.com", "a.*.com"])),
            ..Default::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.code(), "ERR_BAD_NETWORK_POLICY");
        assert_eq!(
            e.to_string(),
            r#"network.allowOut[1]: "a.*.com": a wildcard may only lead (as in *.example.com)"#
        );
        let p = NetworkPolicy {
            deny_out: Some(json!(["10.0.0.0/8"])),
            ..Default::default()
        }
        .check()
        .unwrap();
        // Only the fields JS gave go to the proxy process.
        assert_eq!(p.source(), &json!({ "denyOut": ["10.0.0.0/8"] }));
    }
}
