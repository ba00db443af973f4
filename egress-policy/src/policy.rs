//! The egress policy: E2B's `network` shape (`allowOut`, `denyOut`, `rules`) plus `hosts` and
//! `upstreamCa`, checked once into a [`Policy`] that answers the proxy's questions.
//!
//! Header values from `rules` are secrets: they appear in no error message, no `Debug` output and
//! no event. Messages name the entry (`network.allowOut[2]: "a.*.com": …`) and header names only.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use serde_json::Value;

use crate::addr::{self, Net};

/// A policy that does not hold: the message names the entry (`network.allowOut[2]: …`) and
/// never a header value. The binding maps it to `ERR_BAD_NETWORK_POLICY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadPolicy(pub String);

impl fmt::Display for BadPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadPolicy {}

type Result<T> = std::result::Result<T, BadPolicy>;

/// The JSON a policy was checked from, kept to hand the same policy to the proxy process. Its
/// Debug prints nothing: `rules` hold secrets.
#[derive(Clone)]
struct Source(Value);

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<policy source>")
    }
}

/// What a request names: a host name (lower case, no trailing dot) or an IP address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl Host {
    /// A request's host as it came (`example.com`, `1.2.3.4`, `[::1]` or `::1`); None if it is
    /// neither a valid name nor an address.
    pub fn parse(s: &str) -> Option<Host> {
        let bare = s
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .unwrap_or(s);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Host::Ip(addr::canonical(ip)));
        }
        let name = s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
        check_name(&name).ok()?;
        Some(Host::Name(name))
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// What an allowOut or rules entry matches.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Name(String),
    /// `*.example.com`, held as `.example.com`: any name below it, never the name itself.
    Suffix(String),
    Net(Net),
}

impl Pattern {
    fn matches_name(&self, name: &str) -> bool {
        match self {
            Pattern::Name(n) => n == name,
            Pattern::Suffix(s) => name.len() > s.len() && name.ends_with(s.as_str()),
            Pattern::Net(_) => false,
        }
    }
}

#[derive(Clone, Debug)]
struct Allow {
    pattern: Pattern,
    port: Option<u16>,
    /// The entry as written, for refusal reasons.
    text: String,
}

impl Allow {
    fn port_ok(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }
}

/// Headers a rule sets. Debug prints the names only: the values are secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `name` (a later rule replaces an earlier one's value for the same name).
    fn set(&mut self, name: &str, value: String) {
        self.0.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.0.push((name.to_string(), value));
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(n, _)| format!("{n}: <redacted>")))
            .finish()
    }
}

/// A validated policy. Cheap to share; the proxy swaps a whole one on update.
#[derive(Clone, Debug)]
pub struct Policy {
    /// None: every address not refused by class or denyOut.
    allow: Option<Vec<Allow>>,
    deny: Vec<(Net, String)>,
    /// denyOut named 0.0.0.0/0 (IPv4) or ::/0 (IPv6): only allowOut's entries pass.
    deny_rest: Vec<(Net, String)>,
    rules: Vec<(Pattern, Arc<Headers>)>,
    hosts: HashMap<String, IpAddr>,
    /// upstreamCa's certificates, each checked to be a usable trust anchor.
    upstream_ca: Vec<CertificateDer<'static>>,
    source: Source,
}

/// Why a request did not get through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The policy refuses it: 403.
    Policy(String),
    /// The policy allows it but it could not be reached (no address, connect or TLS failed): 502.
    Upstream(String),
}

impl Refusal {
    pub fn reason(&self) -> &str {
        match self {
            Refusal::Policy(r) | Refusal::Upstream(r) => r,
        }
    }
}

fn bad(path: impl fmt::Display, why: impl fmt::Display) -> BadPolicy {
    BadPolicy(format!("{path}: {why}"))
}

impl Policy {
    /// Checks `input` (a JSON object: `allowOut`, `denyOut`, `rules`, `hosts`, `upstreamCa`)
    /// whole; the first bad entry is the error and nothing is built.
    pub fn new(input: &Value) -> Result<Policy> {
        let allow = match input.get("allowOut") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                list(v, "network.allowOut")?
                    .into_iter()
                    .map(|(path, s)| {
                        let (pattern, port) = parse_entry(s).map_err(|why| bad(&path, why))?;
                        Ok(Allow {
                            pattern,
                            port,
                            text: s.to_string(),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?,
            ),
        };
        let (mut deny, mut deny_rest) = (Vec::new(), Vec::new());
        if let Some(v) = input.get("denyOut").filter(|v| !v.is_null()) {
            for (path, s) in list(v, "network.denyOut")? {
                match parse_entry(s).map_err(|why| bad(&path, why))? {
                    (Pattern::Net(n), None) if n.is_everything() => {
                        deny_rest.push((n, s.to_string()))
                    }
                    (Pattern::Net(n), None) => deny.push((n, s.to_string())),
                    (Pattern::Net(_), Some(_)) => {
                        return Err(bad(path, format!("{s:?}: denyOut takes no port")))
                    }
                    _ => {
                        return Err(bad(
                            path,
                            format!("{s:?}: denyOut takes IP addresses and CIDRs, not names (leave the name out of allowOut)"),
                        ))
                    }
                }
            }
        }
        let rules = match input.get("rules").filter(|v| !v.is_null()) {
            None => Vec::new(),
            Some(v) => parse_rules(v)?,
        };
        let mut hosts = HashMap::new();
        if let Some(v) = input.get("hosts").filter(|v| !v.is_null()) {
            let Value::Object(m) = v else {
                return Err(bad("network.hosts", "must be an object of name: address"));
            };
            for (name, ip) in m {
                let path = format!("network.hosts[{name:?}]");
                let key = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
                check_name(&key).map_err(|why| bad(&path, format!("{name:?}: {why}")))?;
                let Value::String(ip) = ip else {
                    return Err(bad(&path, "the address must be a string"));
                };
                let ip: IpAddr = ip
                    .parse()
                    .map_err(|_| bad(&path, format!("{ip:?}: not an IP address")))?;
                hosts.insert(key, addr::canonical(ip));
            }
        }
        let extra = match input.get("upstreamCa").filter(|v| !v.is_null()) {
            None => Vec::new(),
            Some(Value::String(s)) => pem_certs(s).map_err(|why| bad("network.upstreamCa", why))?,
            Some(v @ Value::Array(_)) => {
                let mut all = Vec::new();
                for (path, s) in list(v, "network.upstreamCa")? {
                    all.extend(pem_certs(s).map_err(|why| bad(path, why))?);
                }
                all
            }
            Some(_) => {
                return Err(bad(
                    "network.upstreamCa",
                    "must be PEM text or an array of PEM texts",
                ))
            }
        };
        for (i, c) in extra.iter().enumerate() {
            // What the proxy's TLS client will require of each root (rustls takes roots through
            // the same call), checked here so that a bad one fails up front.
            webpki::anchor_from_trusted_cert(c).map_err(|e| {
                bad(
                    "network.upstreamCa",
                    format!("certificate {i} is not a usable CA certificate: {e:?}"),
                )
            })?;
        }
        Ok(Policy {
            allow,
            deny,
            deny_rest,
            rules,
            hosts,
            upstream_ca: extra,
            source: Source(input.clone()),
        })
    }

    /// The JSON it was checked from, for the proxy process (which checks it again).
    pub fn source(&self) -> &Value {
        &self.source.0
    }

    /// upstreamCa's certificates (DER).
    pub fn upstream_ca(&self) -> &[CertificateDer<'static>] {
        &self.upstream_ca
    }

    /// The address `hosts` pins `name` to.
    pub fn pinned(&self, name: &str) -> Option<IpAddr> {
        self.hosts.get(name).copied()
    }

    /// Whether resolving `name` could lead anywhere: no DNS query leaves the host for a name no
    /// entry can allow (a query is itself a way out).
    pub fn worth_resolving(&self, name: &str) -> bool {
        match &self.allow {
            None => true,
            Some(list) => list.iter().any(|a| match &a.pattern {
                Pattern::Net(_) => true,
                p => p.matches_name(name),
            }),
        }
    }

    /// Decides one address `host` resolved to (or is). `pinned`: it came from `hosts`.
    pub fn check(
        &self,
        host: &Host,
        port: u16,
        ip: IpAddr,
        pinned: bool,
    ) -> std::result::Result<(), String> {
        let ip = addr::canonical(ip);
        if let Some((_, text)) = self.deny.iter().find(|(n, _)| n.contains(ip)) {
            return Err(format!("{ip} is in denyOut {text:?}"));
        }
        let allowed = |a: &&Allow| {
            a.port_ok(port)
                && match (&a.pattern, host) {
                    (Pattern::Net(n), _) => n.contains(ip),
                    (p, Host::Name(name)) => p.matches_name(name),
                    (_, Host::Ip(_)) => false,
                }
        };
        match &self.allow {
            None => {
                if let Host::Ip(_) = host {
                    return Err("an IP address not listed in allowOut".into());
                }
                if let Some((_, text)) = self.deny_rest.iter().find(|(n, _)| n.contains(ip)) {
                    return Err(format!(
                        "not in allowOut (denyOut {text:?} refuses the rest)"
                    ));
                }
            }
            Some(list) => {
                if !list.iter().any(|a| allowed(&a)) {
                    return Err(self.why_not_allowed(list, host, port));
                }
            }
        }
        if let Some(class) = addr::special(ip) {
            let named = pinned
                || self.allow.iter().flatten().any(|a| match a.pattern {
                    Pattern::Net(n) => a.port_ok(port) && n.contains(ip) && n.within(&class.block),
                    _ => false,
                });
            if !named {
                return Err(format!(
                    "{ip} is {} address, not named in allowOut or hosts",
                    class.what
                ));
            }
        }
        Ok(())
    }

    fn why_not_allowed(&self, list: &[Allow], host: &Host, port: u16) -> String {
        let near = list.iter().find(|a| match (&a.pattern, host) {
            (Pattern::Net(n), Host::Ip(ip)) => n.contains(*ip),
            (p, Host::Name(name)) => p.matches_name(name),
            _ => false,
        });
        match (near, host) {
            (Some(a), _) => format!("port {port} is not allowed by allowOut {:?}", a.text),
            (None, Host::Ip(_)) => "an IP address not listed in allowOut".into(),
            (None, Host::Name(_)) => "not in allowOut".into(),
        }
    }

    /// The headers the rules set on `host`'s requests: an exact name beats the longest wildcard;
    /// for an IP, the longest CIDR. None: no rule, the host is tunnelled.
    pub fn headers_for(&self, host: &Host) -> Option<Arc<Headers>> {
        let mut best: Option<(u32, &Arc<Headers>)> = None;
        for (p, h) in &self.rules {
            let rank = match (p, host) {
                (Pattern::Name(n), Host::Name(name)) if n == name => u32::MAX,
                (Pattern::Suffix(s), Host::Name(name)) if p.matches_name(name) => s.len() as u32,
                (Pattern::Net(n), Host::Ip(ip)) if n.contains(*ip) => n.prefix() as u32,
                _ => continue,
            };
            if best.is_none_or(|(r, _)| rank > r) {
                best = Some((rank, h));
            }
        }
        best.map(|(_, h)| h.clone())
    }
}

/// A JSON array of non-empty strings, each with its path for messages.
fn list<'v>(v: &'v Value, path: &str) -> Result<Vec<(String, &'v str)>> {
    let Value::Array(items) = v else {
        return Err(bad(path, "must be an array of strings"));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let p = format!("{path}[{i}]");
            match item {
                Value::String(s) if s.is_empty() => Err(bad(p, "an empty entry")),
                Value::String(s) => Ok((p, s.as_str())),
                Value::Null => Err(bad(p, "an empty entry")),
                _ => Err(bad(p, "must be a string")),
            }
        })
        .collect()
}

fn parse_rules(v: &Value) -> Result<Vec<(Pattern, Arc<Headers>)>> {
    let Value::Object(m) = v else {
        return Err(bad("network.rules", "must be an object of host: rules"));
    };
    let mut out = Vec::new();
    for (key, rules) in m {
        let path = format!("network.rules[{key:?}]");
        let pattern = match parse_entry(key).map_err(|why| bad(&path, why))? {
            (p, None) => p,
            (_, Some(_)) => {
                return Err(bad(&path, format!("{key:?}: a rule's host takes no port")))
            }
        };
        let Value::Array(list) = rules else {
            return Err(bad(&path, "must be an array of rules"));
        };
        let mut headers = Headers::default();
        for (i, rule) in list.iter().enumerate() {
            let path = format!("{path}[{i}]");
            let Value::Object(rule) = rule else {
                return Err(bad(
                    path,
                    "must be a rule object ({ transform: { headers } })",
                ));
            };
            if let Some(k) = rule.keys().find(|k| *k != "transform") {
                return Err(bad(&path, format!("unknown key {k:?}")));
            }
            let transform = match rule.get("transform") {
                None | Some(Value::Null) => continue,
                Some(Value::Object(t)) => t,
                Some(_) => return Err(bad(format!("{path}.transform"), "must be an object")),
            };
            if let Some(k) = transform.keys().find(|k| *k != "headers") {
                return Err(bad(
                    format!("{path}.transform"),
                    format!("unknown key {k:?}"),
                ));
            }
            let hs = match transform.get("headers") {
                None | Some(Value::Null) => continue,
                Some(Value::Object(h)) => h,
                Some(_) => {
                    return Err(bad(
                        format!("{path}.transform.headers"),
                        "must be an object of name: value",
                    ))
                }
            };
            for (name, value) in hs {
                let p = format!("{path}.transform.headers[{name:?}]");
                if !is_token(name) {
                    return Err(bad(p, "not a valid header name"));
                }
                if is_hop_by_hop(name) {
                    return Err(bad(p, "a connection-level header cannot be set"));
                }
                let Value::String(value) = value else {
                    return Err(bad(p, "the value must be a string"));
                };
                if !value_ok(value) {
                    return Err(bad(
                        p,
                        "the value holds a control character (CR, LF, NUL or another)",
                    ));
                }
                headers.set(name, value.clone());
            }
        }
        out.push((pattern, Arc::new(headers)));
    }
    Ok(out)
}

/// Headers that belong to one connection, not to the request: a rule setting them would break
/// the framing the proxy relies on.
fn is_hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "content-length",
        "transfer-encoding",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
    ]
    .iter()
    .any(|h| h.eq_ignore_ascii_case(name))
}

/// RFC 9110 token characters.
pub fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A field value: visible characters, spaces, tabs and obs-text; no CR, LF, NUL or other control.
fn value_ok(s: &str) -> bool {
    s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// One allowOut/denyOut/rules entry: the pattern and its port.
fn parse_entry(s: &str) -> std::result::Result<(Pattern, Option<u16>), String> {
    let q = format!("{s:?}");
    if s.is_empty() {
        return Err("an empty entry".into());
    }
    if s.bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(format!("{q}: holds whitespace or a control character"));
    }
    if s == "*" || s.starts_with("*:") {
        return Err(format!(
            "{q}: a bare * is not allowed (name the hosts; 0.0.0.0/0 and ::/0 mean every address)"
        ));
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (inner, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{q}: an unclosed ["))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("{q}: only :port may follow ]"))?,
            ),
        };
        let net = parse_net(inner, true).map_err(|why| format!("{q}: {why}"))?;
        return Ok((
            Pattern::Net(net),
            port.map(|p| parse_port(p, &q)).transpose()?,
        ));
    } else if s.matches(':').count() >= 2 {
        (s, None)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = port.map(|p| parse_port(p, &q)).transpose()?;
    if host.contains('/') || host.parse::<IpAddr>().is_ok() {
        let net = parse_net(host, false).map_err(|why| format!("{q}: {why}"))?;
        return Ok((Pattern::Net(net), port));
    }
    let lower = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("*.") {
        if rest.contains('*') {
            return Err(format!(
                "{q}: a wildcard may only lead (as in *.example.com)"
            ));
        }
        check_name(rest).map_err(|why| format!("{q}: {why}"))?;
        return Ok((Pattern::Suffix(format!(".{rest}")), port));
    }
    if lower.contains('*') {
        return Err(format!(
            "{q}: a wildcard may only lead (as in *.example.com)"
        ));
    }
    check_name(&lower).map_err(|why| format!("{q}: {why}"))?;
    Ok((Pattern::Name(lower), port))
}

fn parse_port(p: &str, q: &str) -> std::result::Result<u16, String> {
    match p.parse::<u32>() {
        Ok(n) if (1..=65535).contains(&n) && p.bytes().all(|b| b.is_ascii_digit()) => Ok(n as u16),
        _ => Err(format!("{q}: port out of range (1-65535)")),
    }
}

fn parse_net(s: &str, v6_only: bool) -> std::result::Result<Net, String> {
    let (a, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let ip: IpAddr = a
        .parse()
        .map_err(|_| "not an IP address or CIDR".to_string())?;
    if v6_only && ip.is_ipv4() {
        return Err("[…] holds IPv6 addresses only".into());
    }
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(p) => match p.parse::<u8>() {
            Ok(n) if n <= max && p.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err(format!("CIDR prefix out of range (0-{max})")),
        },
    };
    Net::new(ip, prefix).ok_or_else(|| format!("CIDR prefix out of range (0-{max})"))
}

/// A DNS name in lower case: labels of letters, digits, `-` and `_`, 1-63 long, 253 in all. The
/// last label must start with a letter, so numeric forms a resolver reads as an address
/// (`127.1`, `0x7f.1`) are never names.
fn check_name(name: &str) -> std::result::Result<(), &'static str> {
    const BAD: &str = "not a host name, IP address or CIDR";
    if name.is_empty() || name.len() > 253 {
        return Err(BAD);
    }
    let labels: Vec<&str> = name.split('.').collect();
    for l in &labels {
        if l.is_empty()
            || l.len() > 63
            || l.starts_with('-')
            || l.ends_with('-')
            || !l
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(BAD);
        }
    }
    let last = labels.last().expect("split yields one");
    if !last.as_bytes()[0].is_ascii_lowercase() || last.starts_with("0x") {
        return Err(BAD);
    }
    Ok(())
}

/// Every CERTIFICATE block of a PEM text; an error if there is none or one does not decode.
fn pem_certs(pem: &str) -> std::result::Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block in the PEM text".into());
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(v: Value) -> Result<Policy> {
        Policy::new(&v)
    }

    fn err(v: Value) -> String {
        match policy(v) {
            Err(e) => e.to_string(),
            Ok(p) => panic!("accepted: {p:?}"),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn name(s: &str) -> Host {
        Host::Name(s.into())
    }

    #[test]
    fn bad_entries_name_themselves() {
        let e = err(json!({ "allowOut": ["ok.com", "b.com", "a.*.com"] }));
        assert_eq!(
            e,
            r#"network.allowOut[2]: "a.*.com": a wildcard may only lead (as in *.example.com)"#
        );
        assert!(err(json!({ "allowOut": ["*"] })).contains("bare *"));
        assert!(err(json!({ "allowOut": ["*:443"] })).contains("bare *"));
        assert!(err(json!({ "allowOut": ["**.a.com"] })).contains("may only lead"));
        assert!(err(json!({ "allowOut": ["a.com*"] })).contains("may only lead"));
        assert!(err(json!({ "allowOut": ["10.0.0.0/33"] })).contains("prefix out of range (0-32)"));
        assert!(err(json!({ "allowOut": ["::/129"] })).contains("(0-128)"));
        assert!(err(json!({ "allowOut": ["10.0.0.0/x"] })).contains("prefix out of range"));
        assert!(err(json!({ "allowOut": ["a.com:0"] })).contains("port out of range"));
        assert!(err(json!({ "allowOut": ["a.com:65536"] })).contains("port out of range"));
        assert!(err(json!({ "allowOut": ["a.com:+80"] })).contains("port out of range"));
        assert!(err(json!({ "allowOut": ["[::1]x"] })).contains("only :port"));
        assert!(err(json!({ "allowOut": ["[10.0.0.1]:80"] })).contains("IPv6"));
        assert!(err(json!({ "allowOut": ["a..com"] })).contains("not a host name"));
        assert!(err(json!({ "allowOut": ["-a.com"] })).contains("not a host name"));
        assert!(err(json!({ "allowOut": ["127.1"] })).contains("not a host name"));
        assert!(err(json!({ "allowOut": ["a.0x7f"] })).contains("not a host name"));
        assert!(err(json!({ "allowOut": ["a b.com"] })).contains("whitespace"));
        assert_eq!(
            err(json!({ "allowOut": ["a.com", ""] })),
            "network.allowOut[1]: an empty entry"
        );
        assert_eq!(
            err(json!({ "allowOut": [null] })),
            "network.allowOut[0]: an empty entry"
        );
        assert_eq!(
            err(json!({ "allowOut": [5] })),
            "network.allowOut[0]: must be a string"
        );
        assert!(err(json!({ "allowOut": "a.com" })).contains("must be an array"));
        assert!(err(json!({ "denyOut": ["evil.com"] })).contains("not names"));
        assert!(err(json!({ "denyOut": ["10.0.0.0/8:80"] })).contains("no port"));
        assert!(
            err(json!({ "hosts": { "a..b": "1.2.3.4" } })).starts_with("network.hosts[\"a..b\"]")
        );
        assert!(err(json!({ "hosts": { "a.test": "nope" } })).contains("not an IP address"));
        assert!(err(json!({ "hosts": { "a.test": 1 } })).contains("must be a string"));
        assert!(err(json!({ "upstreamCa": 5 })).contains("PEM"));
        assert!(err(json!({ "upstreamCa": "no pem here" })).starts_with("network.upstreamCa: "));
        assert!(err(json!({ "upstreamCa": ["x"] })).starts_with("network.upstreamCa[0]: "));
    }

    #[test]
    fn header_rules_are_checked_and_never_echo_values() {
        let secret = "Bearer s3cret";
        let h = |name: &str, value: Value| json!({ "rules": { "api.test": [{ "transform": { "headers": { name: value } } }] } });
        for (v, want) in [
            (json!(format!("{secret}\r\nX: y")), "control character"),
            (json!(format!("{secret}\n")), "control character"),
            (json!(format!("{secret}\0")), "control character"),
            (json!(5), "must be a string"),
            (json!(null), "must be a string"),
        ] {
            let e = err(h("Authorization", v));
            assert!(
                e.starts_with(
                    r#"network.rules["api.test"][0].transform.headers["Authorization"]: "#
                ),
                "{e}"
            );
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
        assert!(err(h("Bad Name", json!("v"))).contains("not a valid header name"));
        assert!(err(h("X\r\nY", json!("v"))).contains(r#"["X\r\nY"]: not a valid header name"#));
        assert!(err(h("", json!("v"))).contains("not a valid header name"));
        assert!(err(h("Host", json!("v"))).contains("connection-level"));
        assert!(err(h("Content-Length", json!("1"))).contains("connection-level"));
        assert!(err(json!({ "rules": { "a.*.b": [] } })).contains("may only lead"));
        assert!(err(json!({ "rules": { "a.com:443": [] } })).contains("no port"));
        assert!(err(json!({ "rules": { "a.com": {} } })).contains("array of rules"));
        assert!(err(json!({ "rules": { "a.com": [5] } })).contains("rule object"));
        assert!(err(json!({ "rules": { "a.com": [{ "transfrom": {} }] } })).contains("unknown key"));
        assert!(err(json!({ "rules": { "a.com": [{ "transform": "x" }] } }))
            .contains("must be an object"));
        assert!(
            err(json!({ "rules": { "a.com": [{ "transform": { "headers": [] } }] } }))
                .contains("name: value")
        );
        let p = policy(json!({ "rules": { "api.test": [
            { "transform": { "headers": { "Authorization": secret, "X-A": "1" } } },
            { "transform": { "headers": { "authorization": "Bearer later" } } },
            {}
        ] } }))
        .unwrap();
        let hs = p.headers_for(&name("api.test")).unwrap();
        let got: Vec<_> = hs.iter().collect();
        assert_eq!(got, [("X-A", "1"), ("authorization", "Bearer later")]);
        let dbg = format!("{p:?}");
        assert!(!dbg.contains("s3cret") && !dbg.contains("later"), "{dbg}");
    }

    #[test]
    fn exact_beats_the_longest_wildcard() {
        let rule = |v: &str| json!([{ "transform": { "headers": { "X-Which": v } } }]);
        let p = policy(json!({ "rules": {
            "*.example.com": rule("short"),
            "*.api.example.com": rule("long"),
            "v1.api.example.com": rule("exact"),
            "10.0.0.0/8": rule("net8"),
            "10.1.0.0/16": rule("net16"),
        } }))
        .unwrap();
        let which = |h: Host| {
            p.headers_for(&h)
                .map(|hs| hs.iter().next().unwrap().1.to_string())
        };
        assert_eq!(which(name("v1.api.example.com")).as_deref(), Some("exact"));
        assert_eq!(which(name("v2.api.example.com")).as_deref(), Some("long"));
        assert_eq!(which(name("www.example.com")).as_deref(), Some("short"));
        assert_eq!(which(name("example.com")), None);
        assert_eq!(which(name("badexample.com")), None);
        assert_eq!(which(Host::Ip(ip("10.1.2.3"))).as_deref(), Some("net16"));
        assert_eq!(which(Host::Ip(ip("10.2.2.3"))).as_deref(), Some("net8"));
    }

    #[test]
    fn allow_and_deny() {
        let p = policy(json!({
            "allowOut": ["api.test", "*.cdn.test:443", "1.2.3.0/24", "[2606:4700::1]:443", "pub.test"],
            "denyOut": ["1.2.3.4", "5.0.0.0/8"],
        }))
        .unwrap();
        let pub_ip = ip("93.184.216.34");
        assert_eq!(p.check(&name("api.test"), 80, pub_ip, false), Ok(()));
        assert_eq!(p.check(&name("x.cdn.test"), 443, pub_ip, false), Ok(()));
        assert_eq!(
            p.check(&name("x.cdn.test"), 80, pub_ip, false).unwrap_err(),
            r#"port 80 is not allowed by allowOut "*.cdn.test:443""#
        );
        assert_eq!(
            p.check(&name("cdn.test"), 443, pub_ip, false).unwrap_err(),
            "not in allowOut"
        );
        assert_eq!(
            p.check(&name("evil.test"), 443, pub_ip, false).unwrap_err(),
            "not in allowOut"
        );
        // A name is allowed by the CIDR its address lies in; a literal must be listed.
        assert_eq!(
            p.check(&name("other.test"), 443, ip("1.2.3.9"), false),
            Ok(())
        );
        assert_eq!(
            p.check(&Host::Ip(ip("1.2.3.9")), 443, ip("1.2.3.9"), false),
            Ok(())
        );
        assert_eq!(
            p.check(&Host::Ip(ip("8.8.8.8")), 443, ip("8.8.8.8"), false)
                .unwrap_err(),
            "an IP address not listed in allowOut"
        );
        // A deny wins over every allow.
        assert_eq!(
            p.check(&name("api.test"), 443, ip("1.2.3.4"), false)
                .unwrap_err(),
            r#"1.2.3.4 is in denyOut "1.2.3.4""#
        );
        assert_eq!(
            p.check(&name("pub.test"), 443, ip("::ffff:5.6.7.8"), false)
                .unwrap_err(),
            r#"5.6.7.8 is in denyOut "5.0.0.0/8""#
        );
        let six = ip("2606:4700::1");
        assert_eq!(p.check(&Host::Ip(six), 443, six, false), Ok(()));
        assert!(p.check(&Host::Ip(six), 80, six, false).is_err());
        assert!(p.worth_resolving("api.test"));
        // CIDR entries mean any name may resolve into them.
        assert!(p.worth_resolving("anything.test"));
        let names_only = policy(json!({ "allowOut": ["api.test"] })).unwrap();
        assert!(!names_only.worth_resolving("exfil.attacker.test"));
    }

    #[test]
    fn private_and_loopback_only_when_named() {
        let p = policy(json!({ "allowOut": ["api.test", "local.test", "10.1.0.0/16", "0.0.0.0/0"], "hosts": { "LOCAL.test.": "127.0.0.1" } })).unwrap();
        // A name resolving (by DNS) to loopback or metadata is refused: rebinding protection.
        assert_eq!(
            p.check(&name("api.test"), 443, ip("127.0.0.1"), false)
                .unwrap_err(),
            "127.0.0.1 is a loopback address, not named in allowOut or hosts"
        );
        assert!(p
            .check(&name("api.test"), 80, ip("169.254.169.254"), false)
            .unwrap_err()
            .contains("link-local"));
        assert!(p
            .check(&name("api.test"), 80, ip("::ffff:192.168.0.1"), false)
            .unwrap_err()
            .contains("private"));
        assert!(p
            .check(&name("api.test"), 80, ip("fd00::1"), false)
            .unwrap_err()
            .contains("unique-local"));
        assert!(p
            .check(&name("api.test"), 80, ip("100.64.1.1"), false)
            .unwrap_err()
            .contains("carrier-grade"));
        // 0.0.0.0/0 does not name 10.0.0.0/8; 10.1.0.0/16 does name its own addresses.
        assert!(p
            .check(&name("api.test"), 80, ip("10.2.0.1"), false)
            .is_err());
        assert_eq!(
            p.check(&name("api.test"), 80, ip("10.1.0.1"), false),
            Ok(())
        );
        assert_eq!(
            p.check(&Host::Ip(ip("10.1.0.1")), 80, ip("10.1.0.1"), false),
            Ok(())
        );
        // hosts pins and allows its own address.
        assert_eq!(p.pinned("local.test"), Some(ip("127.0.0.1")));
        assert_eq!(
            p.check(&name("local.test"), 8443, ip("127.0.0.1"), true),
            Ok(())
        );
        // Everything else stays refused by class.
        let open = policy(json!({})).unwrap();
        assert_eq!(
            open.check(&name("a.test"), 443, ip("93.184.216.34"), false),
            Ok(())
        );
        assert!(open
            .check(&name("a.test"), 443, ip("127.0.0.1"), false)
            .is_err());
        assert!(open.check(&name("a.test"), 443, ip("::1"), false).is_err());
        assert!(open
            .check(
                &Host::Ip(ip("93.184.216.34")),
                443,
                ip("93.184.216.34"),
                false
            )
            .is_err());
        let explicit = policy(json!({ "allowOut": ["127.0.0.1:8080"] })).unwrap();
        let lo = ip("127.0.0.1");
        assert_eq!(explicit.check(&Host::Ip(lo), 8080, lo, false), Ok(()));
        assert!(explicit.check(&Host::Ip(lo), 8081, lo, false).is_err());
    }

    #[test]
    fn deny_everything_else_is_e2bs_idiom() {
        let p =
            policy(json!({ "allowOut": ["api.test"], "denyOut": ["0.0.0.0/0", "::/0"] })).unwrap();
        let pub_ip = ip("93.184.216.34");
        assert_eq!(p.check(&name("api.test"), 443, pub_ip, false), Ok(()));
        assert_eq!(
            p.check(&name("b.test"), 443, pub_ip, false).unwrap_err(),
            "not in allowOut"
        );
        let none = policy(json!({ "denyOut": ["0.0.0.0/0"] })).unwrap();
        assert!(none
            .check(&name("b.test"), 443, pub_ip, false)
            .unwrap_err()
            .contains("0.0.0.0/0"));
        assert_eq!(
            none.check(&name("b.test"), 443, ip("2606:4700::1"), false),
            Ok(())
        );
    }

    #[test]
    fn request_hosts() {
        assert_eq!(Host::parse("API.Test."), Some(name("api.test")));
        assert_eq!(Host::parse("[::1]"), Some(Host::Ip(ip("::1"))));
        assert_eq!(
            Host::parse("::ffff:127.0.0.1"),
            Some(Host::Ip(ip("127.0.0.1")))
        );
        assert_eq!(Host::parse("127.1"), None);
        assert_eq!(Host::parse("a b"), None);
        assert_eq!(Host::parse(""), None);
        assert_eq!(Host::Ip(ip("::1")).to_string(), "[::1]");
    }
}
