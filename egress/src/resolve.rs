//! From a request's host to the addresses the proxy may connect to: `hosts` first, then the
//! host's resolver, and the policy checked on every address after resolution. The proxy then
//! connects to exactly those checked addresses, so a name that resolves differently later (DNS
//! rebinding) never reaches an address that was not checked.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use kern_sandbox_egress_policy::{Host, Policy, Refusal};

/// Where a request may go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Checked addresses, in the resolver's order.
    pub addrs: Vec<IpAddr>,
    /// They came from `hosts`.
    pub pinned: bool,
}

/// Resolves `host` and keeps the addresses `policy` allows for `port`. A refusal names the
/// first refused address's reason.
pub async fn resolve(
    policy: &Policy,
    host: &Host,
    port: u16,
    timeout: Duration,
) -> Result<Resolved, Refusal> {
    let (candidates, pinned) = match host {
        Host::Ip(ip) => (vec![*ip], false),
        Host::Name(name) => match policy.pinned(name) {
            Some(ip) => (vec![ip], true),
            None => {
                if !policy.worth_resolving(name) {
                    // No DNS query for a name nothing allows: a query is a way out too.
                    return Err(Refusal::Policy("not in allowOut".into()));
                }
                let looked =
                    tokio::time::timeout(timeout, tokio::net::lookup_host((name.as_str(), port)))
                        .await;
                let addrs: Vec<IpAddr> = match looked {
                    Ok(Ok(it)) => it.map(|a| a.ip()).collect(),
                    Ok(Err(e)) => return Err(Refusal::Upstream(format!("does not resolve ({e})"))),
                    Err(_) => return Err(Refusal::Upstream("name resolution timed out".into())),
                };
                let mut uniq = Vec::with_capacity(addrs.len());
                for a in addrs {
                    if !uniq.contains(&a) {
                        uniq.push(a);
                    }
                }
                (uniq, false)
            }
        },
    };
    decide(policy, host, port, candidates, pinned)
}

/// The policy on every candidate address: the allowed ones stay.
pub fn decide(
    policy: &Policy,
    host: &Host,
    port: u16,
    candidates: Vec<IpAddr>,
    pinned: bool,
) -> Result<Resolved, Refusal> {
    let mut first_refusal = None;
    let mut addrs = Vec::with_capacity(candidates.len());
    for ip in candidates {
        match policy.check(host, port, ip, pinned) {
            Ok(()) => addrs.push(ip),
            Err(why) => {
                first_refusal.get_or_insert(why);
            }
        }
    }
    if addrs.is_empty() {
        return Err(Refusal::Policy(
            first_refusal.unwrap_or_else(|| "does not resolve".into()),
        ));
    }
    Ok(Resolved { addrs, pinned })
}

/// Connects to the first checked address that answers.
pub async fn dial(
    addrs: &[IpAddr],
    port: u16,
    timeout: Duration,
) -> Result<(TcpStream, IpAddr), Refusal> {
    let mut last = String::from("no address");
    for &ip in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(SocketAddr::new(ip, port))).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok((s, ip));
            }
            Ok(Err(e)) => last = format!("could not connect to {}: {e}", SocketAddr::new(ip, port)),
            Err(_) => last = format!("connecting to {} timed out", SocketAddr::new(ip, port)),
        }
    }
    Err(Refusal::Upstream(last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(allow: Value, hosts: Value) -> Policy {
        Policy::new(&json!({ "allowOut": allow, "hosts": hosts })).unwrap()
    }
    use serde_json::Value;

    const T: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn names_resolve_then_every_address_is_checked() {
        // "localhost" resolves on the host to loopback: refused unless named, whatever DNS says.
        let p = policy(json!(["localhost"]), json!({}));
        let r = resolve(&p, &Host::Name("localhost".into()), 80, T).await;
        match r {
            Err(Refusal::Policy(why)) => assert!(why.contains("loopback"), "{why}"),
            // A host without a localhost entry cannot resolve it: still nothing reached.
            Err(Refusal::Upstream(why)) => assert!(why.contains("resolve"), "{why}"),
            Ok(r) => panic!("loopback reached: {r:?}"),
        }
        // Pinned by hosts: allowed, and only that address.
        let p = policy(json!(["api.test"]), json!({ "api.test": "127.0.0.1" }));
        let r = resolve(&p, &Host::Name("api.test".into()), 443, T)
            .await
            .unwrap();
        assert_eq!(r.addrs, vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
        assert!(r.pinned);
        // Not allowed: refused before any lookup.
        let r = resolve(&p, &Host::Name("other.test".into()), 443, T).await;
        assert_eq!(r, Err(Refusal::Policy("not in allowOut".into())));
        // An IP literal is refused unless listed, even a loopback one a name was pinned to.
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let r = resolve(&p, &Host::Ip(lo), 443, T).await;
        assert_eq!(
            r,
            Err(Refusal::Policy(
                "an IP address not listed in allowOut".into()
            ))
        );
    }

    #[test]
    fn a_rebinding_answer_keeps_only_checked_addresses() {
        let p = policy(json!(["rebind.test"]), json!({}));
        let host = Host::Name("rebind.test".into());
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        let meta: IpAddr = "169.254.169.254".parse().unwrap();
        let lo6: IpAddr = "::1".parse().unwrap();
        let r = decide(&p, &host, 80, vec![meta, public, lo6], false).unwrap();
        assert_eq!(r.addrs, vec![public]);
        let r = decide(&p, &host, 80, vec![meta, lo6], false).unwrap_err();
        assert!(
            r.reason().contains("169.254.169.254 is a link-local"),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn dial_reports_what_failed() {
        // A port just bound and released on loopback: nothing listens there now.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let e = dial(&[lo], port, T).await.unwrap_err();
        assert!(
            matches!(&e, Refusal::Upstream(m) if m.contains("could not connect")),
            "{e:?}"
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (_s, ip) = dial(&[lo], port, T).await.unwrap();
        assert_eq!(ip, lo);
    }
}
