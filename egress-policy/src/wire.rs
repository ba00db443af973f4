//! The proxy process's control channel: one JSON object per line, the binding's on the
//! process's stdin and the process's on its stdout.
//!
//! - In: `{"policy": P}` first (the process answers `{"ready": CA_PEM}`, or `{"error": why}` and
//!   exits); then `{"seq": n, "update": P}` and `{"seq": n, "active": null}`, each answered
//!   `{"ack": n}` (plus `"error"` for a refused update, `"active": count` for the count).
//!   End of input: the proxy stops, ends every stream, removes its socket and exits.
//! - Out, besides answers: `{"event": E}` for every request ([`Event`]); never a header value.

use serde_json::{json, Map, Value};

/// One request through the proxy, as the audit callback sees it. It never holds header values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub host: String,
    pub port: u16,
    /// `CONNECT` for a tunnel; the inner method for a terminated or plain HTTP request.
    pub method: String,
    /// The request target of a plain HTTP or terminated request; None for a tunnel or a refusal
    /// of a CONNECT.
    pub path: Option<String>,
    pub allowed: bool,
    /// `tunnelled`, `terminated`, `forwarded`, or why it was refused or failed.
    pub reason: String,
    /// Bytes relayed both ways (heads and bodies); 0 for a refusal.
    pub bytes: u64,
}

impl Event {
    fn to_json(&self) -> Value {
        json!({
            "host": self.host,
            "port": self.port,
            "method": self.method,
            "path": self.path,
            "allowed": self.allowed,
            "reason": self.reason,
            "bytes": self.bytes,
        })
    }

    fn from_json(v: &Value) -> Option<Event> {
        let s = |k: &str| v.get(k)?.as_str().map(str::to_string);
        Some(Event {
            host: s("host")?,
            port: u16::try_from(v.get("port")?.as_u64()?).ok()?,
            method: s("method")?,
            path: s("path"),
            allowed: v.get("allowed")?.as_bool()?,
            reason: s("reason")?,
            bytes: v.get("bytes")?.as_u64()?,
        })
    }
}

/// A line the binding writes.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Start(Value),
    Update(u64, Value),
    Active(u64),
}

/// A line the proxy process writes.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Ready(String),
    Failed(String),
    Event(Event),
    /// An answer to command `seq`: an error for a refused update, the count for `Active`.
    Ack {
        seq: u64,
        error: Option<String>,
        active: Option<u64>,
    },
}

fn line(v: Value) -> String {
    let mut s = v.to_string();
    s.push('\n');
    s
}

impl Command {
    /// The line, newline included (JSON text never holds a raw newline).
    pub fn encode(&self) -> String {
        line(match self {
            Command::Start(p) => json!({ "policy": p }),
            Command::Update(seq, p) => json!({ "seq": seq, "update": p }),
            Command::Active(seq) => json!({ "seq": seq, "active": null }),
        })
    }

    pub fn decode(l: &str) -> Option<Command> {
        let v: Value = serde_json::from_str(l).ok()?;
        if let Some(p) = v.get("policy") {
            return Some(Command::Start(p.clone()));
        }
        let seq = v.get("seq")?.as_u64()?;
        match v.get("update") {
            Some(p) => Some(Command::Update(seq, p.clone())),
            None => v.get("active").map(|_| Command::Active(seq)),
        }
    }
}

impl Reply {
    /// The line, newline included.
    pub fn encode(&self) -> String {
        line(match self {
            Reply::Ready(pem) => json!({ "ready": pem }),
            Reply::Failed(why) => json!({ "error": why }),
            Reply::Event(e) => json!({ "event": e.to_json() }),
            Reply::Ack { seq, error, active } => {
                let mut m = Map::new();
                m.insert("ack".into(), json!(seq));
                if let Some(e) = error {
                    m.insert("error".into(), json!(e));
                }
                if let Some(n) = active {
                    m.insert("active".into(), json!(n));
                }
                Value::Object(m)
            }
        })
    }

    pub fn decode(l: &str) -> Option<Reply> {
        let v: Value = serde_json::from_str(l).ok()?;
        if let Some(e) = v.get("event") {
            return Event::from_json(e).map(Reply::Event);
        }
        if let Some(seq) = v.get("ack") {
            return Some(Reply::Ack {
                seq: seq.as_u64()?,
                error: v.get("error").and_then(Value::as_str).map(str::to_string),
                active: v.get("active").and_then(Value::as_u64),
            });
        }
        if let Some(pem) = v.get("ready") {
            return pem.as_str().map(|p| Reply::Ready(p.to_string()));
        }
        let why = v.get("error")?.as_str()?;
        Some(Reply::Failed(why.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips_on_one_line() {
        let ev = Event {
            host: "api.test".into(),
            port: 443,
            method: "GET".into(),
            path: Some("/a\nb".into()),
            allowed: true,
            reason: "terminated".into(),
            bytes: 1 << 40,
        };
        let replies = [
            Reply::Ready("-----BEGIN CERTIFICATE-----\nMII\n".into()),
            Reply::Failed("could not listen".into()),
            Reply::Event(ev.clone()),
            Reply::Event(Event { path: None, ..ev }),
            Reply::Ack {
                seq: 7,
                error: None,
                active: None,
            },
            Reply::Ack {
                seq: 8,
                error: Some("network.allowOut[0]: x".into()),
                active: None,
            },
            Reply::Ack {
                seq: 9,
                error: None,
                active: Some(3),
            },
        ];
        for r in replies {
            let l = r.encode();
            assert_eq!(l.matches('\n').count(), 1, "{l}");
            assert_eq!(Reply::decode(&l), Some(r));
        }
        let p = json!({ "allowOut": ["a.test"], "rules": { "a.test": [] } });
        for c in [
            Command::Start(p.clone()),
            Command::Update(3, p),
            Command::Active(4),
        ] {
            let l = c.encode();
            assert_eq!(l.matches('\n').count(), 1, "{l}");
            assert_eq!(Command::decode(&l), Some(c));
        }
        assert_eq!(Command::decode("{}"), None);
        assert_eq!(Reply::decode("not json"), None);
    }
}
