//! `kern-sandbox-egress`: the host-side egress proxy (issue 37), a process of its own that the
//! binding starts for each policy owner (a session, a machine with a policy of its own, a
//! `NativeEgress`). It keeps TLS and HTTP parsing, and the CA's private key, out of the Node
//! process (issue 34: the addon links no TLS stack).
//!
//! `kern-sandbox-egress --socket PATH [--parent PID]`; the control channel is stdin/stdout, one
//! JSON object per line (kern_sandbox_egress_policy::wire). It ends when its input ends, and
//! when its parent dies (SIGTERM by PR_SET_PDEATHSIG, handled the same way).
//!
//! # The socket contract
//!
//! The proxy listens on a **host Unix-domain socket** (mode 0600) at a path its owner chooses, in
//! a directory only the owner can enter (the path must not exist yet). The box side relays each
//! TCP connection a program makes to its in-box proxy port to one new stream on this socket,
//! byte for byte, and adds nothing. On each stream the proxy speaks HTTP/1.1 proxy protocol, as
//! a client configured with `HTTP_PROXY`/`HTTPS_PROXY` sends it:
//!
//! - `CONNECT host:port HTTP/1.1` (HTTPS, or any TCP): answered `200 Connection Established`,
//!   then the stream is the tunnel. A host with no header rules is tunnelled untouched (the
//!   upstream's own TLS reaches the client). A host with rules is terminated: the proxy speaks
//!   TLS to the client with a leaf certificate for that host signed by the proxy's CA (the
//!   `ready` line's PEM, which the box must trust), reads HTTP/1.1 requests inside (keep-alive,
//!   chunked or sized bodies), sets the rule's headers and sends them over its own TLS
//!   connection to the upstream, verified against the host's roots and `upstreamCa`.
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
//! address; the proxy connects to the checked address itself. Every request yields an event.

mod ca;
mod http;
mod proxy;
mod resolve;
mod tls;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use kern_sandbox_egress_policy::wire::{Command, Reply};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use proxy::{EgressProxy, Limits};
use tls::Enforced;

struct Args {
    socket: PathBuf,
    parent: Option<u32>,
}

fn args() -> Result<Args, String> {
    let mut it = std::env::args_os().skip(1);
    let (mut socket, mut parent) = (None, None);
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--socket") => socket = it.next().map(PathBuf::from),
            Some("--parent") => {
                parent = it.next().and_then(|p| p.to_str()?.parse::<u32>().ok());
                if parent.is_none() {
                    return Err("--parent takes a process id".into());
                }
            }
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    let socket = socket.ok_or("--socket PATH is required")?;
    Ok(Args { socket, parent })
}

/// Ends with the process that started it: SIGTERM when the parent goes (handled as the end of
/// input), and no start at all if it has gone already.
fn follow_parent(parent: u32) -> Result<(), String> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and touches no memory of ours.
    let r = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) };
    if r != 0 {
        return Err(format!("prctl: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } as u32 != parent {
        return Err("the parent process is gone".into());
    }
    Ok(())
}

fn main() {
    let code = match args() {
        Ok(a) => match a.parent.map(follow_parent).transpose() {
            Ok(_) => run(a),
            Err(e) => {
                eprintln!("kern-sandbox-egress: {e}");
                1
            }
        },
        Err(e) => {
            eprintln!("kern-sandbox-egress: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn run(a: Args) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kern-sandbox-egress: no runtime: {e}");
            return 1;
        }
    };
    rt.block_on(serve(a.socket))
}

/// Writes every reply line to stdout, in order, until every sender is gone.
async fn writer(mut rx: mpsc::UnboundedReceiver<String>) {
    let mut out = tokio::io::stdout();
    while let Some(l) = rx.recv().await {
        if out.write_all(l.as_bytes()).await.is_err() || out.flush().await.is_err() {
            // Nobody listens any more: the binding is gone.
            return;
        }
    }
}

async fn serve(socket: PathBuf) -> i32 {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let out = tokio::spawn(writer(rx));
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let first = input.next_line().await.ok().flatten();
    let started = match first.as_deref().and_then(Command::decode) {
        Some(Command::Start(p)) => Enforced::new(&p).and_then(|policy| {
            let events = tx.clone();
            let sink: proxy::EventSink = Arc::new(move |e| {
                let _ = events.send(Reply::Event(e).encode());
            });
            EgressProxy::start(&socket, policy, Some(sink), Limits::default())
        }),
        _ => Err("the first line must be {\"policy\": …}".into()),
    };
    let proxy = match started {
        Ok(p) => p,
        Err(why) => {
            let _ = tx.send(Reply::Failed(why).encode());
            drop(tx);
            let _ = out.await;
            return 1;
        }
    };
    let _ = tx.send(Reply::Ready(proxy.ca_pem().to_string()).encode());
    loop {
        let line = tokio::select! {
            l = input.next_line() => l.ok().flatten(),
            _ = async { term.as_mut()?.recv().await }, if term.is_some() => None,
        };
        let Some(line) = line else { break };
        let reply = match Command::decode(&line) {
            Some(Command::Update(seq, p)) => {
                let error = Enforced::new(&p).map(|e| proxy.update(e)).err();
                Reply::Ack {
                    seq,
                    error,
                    active: None,
                }
            }
            Some(Command::Active(seq)) => Reply::Ack {
                seq,
                error: None,
                active: Some(proxy.active_connections() as u64),
            },
            // A second start, or a line that is no command: the binding never sends one.
            Some(Command::Start(_)) | None => continue,
        };
        let _ = tx.send(reply.encode());
    }
    // Every stream ends (their events are sent), the socket file goes; then the last lines out.
    proxy.close().await;
    drop(proxy);
    drop(tx);
    let _ = out.await;
    0
}
