//! The proxy itself: a Unix-socket listener, one task per accepted stream, HTTP/1.1 proxy
//! requests on each (CONNECT and absolute-form), tunnels for hosts with no rules and TLS
//! termination for hosts with rules.

use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use kern_sandbox_egress_policy::{Event, Host, Refusal};

use crate::ca::Authority;
use crate::http::{simple_response, Body, Conn, Head};
use crate::resolve::{dial, resolve};
use crate::tls::Enforced;

/// Bounds on what one proxy holds.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Streams served at once; past it a new one gets 503 and is closed.
    pub max_connections: usize,
    /// The largest request or response head.
    pub max_head: usize,
    /// How long a stream may sit with nothing read: before a request, inside a body, in a
    /// tunnel with no traffic either way.
    pub idle: Duration,
    /// Resolving a name, connecting, or a TLS handshake.
    pub connect: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            max_head: 64 * 1024,
            idle: Duration::from_secs(300),
            connect: Duration::from_secs(15),
        }
    }
}

pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;

struct Shared {
    policy: RwLock<Arc<Enforced>>,
    ca: Authority,
    limits: Limits,
    events: Option<EventSink>,
    active: AtomicUsize,
}

impl Shared {
    fn policy(&self) -> Arc<Enforced> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn emit(&self, ev: Event) {
        if let Some(f) = &self.events {
            f(ev);
        }
    }
}

/// A running proxy. Dropping it (or `close()`) stops accepting, ends every connection it
/// serves and removes its socket file.
pub struct EgressProxy {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    path: PathBuf,
}

impl EgressProxy {
    /// Listens on the Unix socket `path` (which must not exist; its mode is set to 0600) and
    /// serves on the current tokio runtime.
    pub fn start(
        path: &Path,
        policy: Enforced,
        events: Option<EventSink>,
        limits: Limits,
    ) -> Result<EgressProxy, String> {
        let ca = Authority::new()?;
        let listener = UnixListener::bind(path)
            .map_err(|e| format!("could not listen on {}: {e}", path.display()))?;
        // Owner only. Between bind and this chmod the umask's mode holds: the owner should put
        // the socket in a directory only it can enter.
        {
            use std::os::unix::fs::PermissionsExt;
            if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
                let _ = std::fs::remove_file(path);
                return Err(format!("could not set the mode of {}: {e}", path.display()));
            }
        }
        let shared = Arc::new(Shared {
            policy: RwLock::new(Arc::new(policy)),
            ca,
            limits,
            events,
            active: AtomicUsize::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(serve(listener, shared.clone(), stopped, path.to_path_buf()));
        Ok(EgressProxy {
            shared,
            stop,
            task: Mutex::new(Some(task)),
            path: path.to_path_buf(),
        })
    }

    /// The per-proxy CA certificate (PEM) the box must trust for terminated hosts. Its private
    /// key never leaves this process.
    pub fn ca_pem(&self) -> &str {
        self.shared.ca.pem()
    }

    /// Swaps the policy: requests that start after this see the new one (terminated and plain
    /// HTTP connections check each request; an open tunnel carries on).
    pub fn update(&self, policy: Enforced) {
        *self
            .shared
            .policy
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
    }

    /// Streams being served right now.
    pub fn active_connections(&self) -> usize {
        self.shared.active.load(Ordering::Acquire)
    }

    /// Stops accepting, ends every connection and removes the socket file; resolves once done.
    pub async fn close(&self) {
        let _ = self.stop.send(true);
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        // The serving task removes it too; this covers a runtime already gone.
        if self.task.get_mut().map(|t| t.is_some()).unwrap_or(false) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

async fn serve(
    listener: UnixListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
    path: PathBuf,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            // Only close() sends, and the sender's drop ends it too.
            _ = stopped.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => {
                    // Counted by the streams' own guards, so a finished stream not yet reaped
                    // from the set does not hold a place.
                    if shared.active.load(Ordering::Acquire) >= shared.limits.max_connections {
                        let _ = s.try_write(&simple_response(
                            503,
                            "Service Unavailable",
                            "kern-sandbox egress: too many connections",
                            true,
                        ));
                        continue;
                    }
                    shared.active.fetch_add(1, Ordering::AcqRel);
                    // Moved into the task: counted out even if it is aborted before it runs.
                    let gone = Leaving(shared.clone());
                    conns.spawn(async move {
                        handle(s, &gone.0).await;
                        drop(gone);
                    });
                }
                // Out of fds or the like: wait a little instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(&path);
    conns.shutdown().await;
}

/// An event sent when dropped: a tunnel's, once it ends or is aborted.
struct Report<'a> {
    sh: &'a Shared,
    ev: Event,
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        self.sh.emit(std::mem::take(&mut self.ev));
    }
}

/// Counts a connection out however its task ends (aborted included).
struct Leaving(Arc<Shared>);

impl Drop for Leaving {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

fn refusal_line(host: &Host, port: u16, why: &Refusal) -> String {
    match why {
        Refusal::Policy(r) => format!("kern-sandbox egress: {host}:{port} refused: {r}"),
        Refusal::Upstream(r) => format!("kern-sandbox egress: {host}:{port} failed: {r}"),
    }
}

fn refusal_response(host: &Host, port: u16, why: &Refusal) -> Vec<u8> {
    let line = refusal_line(host, port, why);
    match why {
        Refusal::Policy(_) => simple_response(403, "Forbidden", &line, true),
        Refusal::Upstream(_) => simple_response(502, "Bad Gateway", &line, true),
    }
}

async fn handle(s: UnixStream, sh: &Shared) {
    let mut client = Conn::new(s, sh.limits.idle);
    let mut upstream: Option<PlainUpstream> = None;
    loop {
        let raw = match client.read_head(sh.limits.max_head).await {
            Ok(Some(raw)) => raw,
            Ok(None) => return,
            Err(e) => {
                if e.kind() == io::ErrorKind::InvalidData {
                    let r = simple_response(
                        431,
                        "Request Header Fields Too Large",
                        &format!("kern-sandbox egress: {e}"),
                        true,
                    );
                    let _ = client.io.write_all(&r).await;
                }
                return;
            }
        };
        let head = match Head::request(&raw) {
            Ok(h) => h,
            Err(why) => {
                let _ = client.io.write_all(&bad_request(why)).await;
                return;
            }
        };
        if head.method == "CONNECT" {
            return connect(client, head, sh).await;
        }
        match plain(&mut client, head, sh, &mut upstream).await {
            Ok(true) => continue,
            Ok(false) | Err(_) => return,
        }
    }
}

fn bad_request(why: &str) -> Vec<u8> {
    simple_response(
        400,
        "Bad Request",
        &format!("kern-sandbox egress: {why}"),
        true,
    )
}

/// `host:port` of a CONNECT or of an absolute URI's authority (`default` when no port).
fn authority(s: &str, default: Option<u16>) -> Option<(Host, u16)> {
    let (h, p) = if let Some(rest) = s.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{inner}]"), port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h.to_string(), Some(p)),
            Some(_) => return None,
            None => (s.to_string(), None),
        }
    };
    let port = match p {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            p.parse::<u16>().ok().filter(|&n| n != 0)?
        }
        Some(_) => return None,
        None => default?,
    };
    Some((Host::parse(&h)?, port))
}

/// A stream whose first reads come from bytes already read past a head.
struct Prefixed<S> {
    pre: Vec<u8>,
    pos: usize,
    io: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos < self.pre.len() {
            let n = buf.remaining().min(self.pre.len() - self.pos);
            let start = self.pos;
            buf.put_slice(&self.pre[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A CONNECT that will not be served: its 403/502 with the one-line reason, and the event.
/// Answers a CONNECT the policy let through; false when the client is already gone.
async fn established(client: &mut Conn<UnixStream>) -> bool {
    client
        .io
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_ok()
}

async fn refuse_connect(
    client: &mut Conn<UnixStream>,
    sh: &Shared,
    host: &Host,
    port: u16,
    why: Refusal,
) {
    let _ = client
        .io
        .write_all(&refusal_response(host, port, &why))
        .await;
    sh.emit(Event {
        host: host.to_string(),
        port,
        method: "CONNECT".into(),
        path: None,
        allowed: false,
        reason: why.reason().to_string(),
        bytes: 0,
    });
}

async fn connect(mut client: Conn<UnixStream>, head: Head, sh: &Shared) {
    let Some((host, port)) = authority(&head.target, None) else {
        let _ = client
            .io
            .write_all(&bad_request("CONNECT needs host:port"))
            .await;
        return;
    };
    let policy = sh.policy();
    let reached = async {
        let r = resolve(&policy, &host, port, sh.limits.connect).await?;
        let (tcp, ip) = dial(&r.addrs, port, sh.limits.connect).await?;
        Ok::<_, Refusal>((tcp, ip, r.pinned))
    };
    let (tcp, ip, pinned) = match reached.await {
        Ok(t) => t,
        Err(why) => return refuse_connect(&mut client, sh, &host, port, why).await,
    };
    let Some(rules) = policy.headers_for(&host).filter(|h| !h.is_empty()) else {
        // No rules: a tunnel, TLS untouched.
        if !established(&mut client).await {
            return;
        }
        let (io, pre) = client.into_parts();
        // Reported when the tunnel ends, however it ends (close() included).
        let mut report = Report {
            sh,
            ev: Event {
                host: host.to_string(),
                port,
                method: "CONNECT".into(),
                path: None,
                allowed: true,
                reason: "tunnelled".into(),
                bytes: 0,
            },
        };
        relay(
            io,
            pre,
            tcp,
            Vec::new(),
            sh.limits.idle,
            &mut report.ev.bytes,
        )
        .await;
        return;
    };
    drop(rules);
    // Rules: the upstream's TLS first, so a failure is still a 502 on the CONNECT.
    let up = match upstream_tls(&policy, &host, tcp, sh.limits.connect).await {
        Ok(s) => s,
        Err(why) => return refuse_connect(&mut client, sh, &host, port, why).await,
    };
    let server_cfg = match sh.ca.server_config(&host) {
        Ok(c) => c,
        Err(e) => {
            let why = Refusal::Upstream(format!("could not make a certificate: {e}"));
            return refuse_connect(&mut client, sh, &host, port, why).await;
        }
    };
    if !established(&mut client).await {
        return;
    }
    let (io, pre) = client.into_parts();
    let acceptor = tokio_rustls::TlsAcceptor::from(server_cfg);
    let inner = match tokio::time::timeout(
        sh.limits.connect,
        acceptor.accept(Prefixed { pre, pos: 0, io }),
    )
    .await
    {
        Ok(Ok(s)) => s,
        // The box did not trust our CA, or went away: nothing to answer on.
        _ => return,
    };
    terminated(
        Conn::new(inner, sh.limits.idle),
        Conn::new(up, sh.limits.idle),
        &host,
        port,
        ip,
        pinned,
        sh,
    )
    .await;
}

type UpstreamTls = tokio_rustls::client::TlsStream<TcpStream>;

/// TLS to a terminated host's upstream: its certificate checked against the policy's roots,
/// SNI the host's name.
async fn upstream_tls(
    policy: &Enforced,
    host: &Host,
    tcp: TcpStream,
    timeout: Duration,
) -> std::result::Result<UpstreamTls, Refusal> {
    let name = match host {
        Host::Name(n) => ServerName::try_from(n.clone())
            .map_err(|_| Refusal::Upstream("not a valid TLS server name".into()))?,
        Host::Ip(ip) => ServerName::IpAddress((*ip).into()),
    };
    let tls = policy.tls().map_err(Refusal::Upstream)?;
    let connector = tokio_rustls::TlsConnector::from(tls);
    match tokio::time::timeout(timeout, connector.connect(name, tcp)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(Refusal::Upstream(format!("upstream TLS failed: {e}"))),
        Err(_) => Err(Refusal::Upstream("upstream TLS handshake timed out".into())),
    }
}

/// Requests inside a terminated CONNECT: each one checked against the current policy, the rules'
/// headers set, relayed to the one upstream TLS connection.
async fn terminated<C>(
    mut client: Conn<C>,
    mut up: Conn<UpstreamTls>,
    host: &Host,
    port: u16,
    ip: IpAddr,
    pinned: bool,
    sh: &Shared,
) where
    C: AsyncRead + AsyncWrite + Unpin,
{
    // The first request goes on the connection just checked; later ones may find it closed.
    let mut fresh = true;
    loop {
        let raw = match client.read_head(sh.limits.max_head).await {
            Ok(Some(raw)) => raw,
            _ => break,
        };
        let mut req = match Head::request(&raw) {
            Ok(h) => h,
            Err(why) => {
                let _ = client.io.write_all(&bad_request(why)).await;
                break;
            }
        };
        let policy = sh.policy();
        let mut ev = Event {
            host: host.to_string(),
            port,
            method: req.method.clone(),
            path: Some(req.target.clone()),
            allowed: false,
            reason: String::new(),
            bytes: 0,
        };
        if let Err(why) = policy.check(host, port, ip, pinned) {
            let why = Refusal::Policy(why);
            let _ = client
                .io
                .write_all(&refusal_response(host, port, &why))
                .await;
            let _ = client.io.flush().await;
            ev.reason = why.reason().to_string();
            sh.emit(ev);
            break;
        }
        if let Some(rules) = policy.headers_for(host) {
            req.apply(&rules);
        }
        let mut r = exchange(&mut client, &mut up, req.clone(), sh, !fresh).await;
        fresh = false;
        if let Err(Exchange::Stale) = r {
            // The same checked address again, a new TLS session.
            let again = async {
                let (tcp, _) = dial(&[ip], port, sh.limits.connect).await?;
                upstream_tls(&policy, host, tcp, sh.limits.connect).await
            };
            match again.await {
                Ok(s) => {
                    up = Conn::new(s, sh.limits.idle);
                    r = exchange(&mut client, &mut up, req, sh, false).await;
                }
                Err(why) => {
                    let _ = client
                        .io
                        .write_all(&refusal_response(host, port, &why))
                        .await;
                    let _ = client.io.flush().await;
                    ev.reason = why.reason().to_string();
                    sh.emit(ev);
                    break;
                }
            }
        }
        drop(policy);
        match r {
            Err(Exchange::Stale) => {
                ev.reason = "the upstream closed without an answer".into();
                sh.emit(ev);
                break;
            }
            Ok((bytes, keep)) => {
                ev.allowed = true;
                ev.reason = "terminated".into();
                ev.bytes = bytes;
                sh.emit(ev);
                if !keep {
                    break;
                }
            }
            Err(Exchange::Upgraded(bytes)) => {
                ev.allowed = true;
                ev.reason = "terminated (upgraded)".into();
                ev.bytes = bytes;
                sh.emit(ev);
                return;
            }
            Err(Exchange::Failed(why, bytes)) => {
                ev.allowed = true;
                ev.reason = why;
                ev.bytes = bytes;
                sh.emit(ev);
                break;
            }
        }
    }
    let _ = client.io.shutdown().await;
    let _ = up.io.shutdown().await;
}

enum Exchange {
    /// The kept-alive upstream had gone away before answering a request with no body: the
    /// caller may send it again on a new connection (nothing reached the client).
    Stale,
    /// A 101 answer: the connection became a tunnel and has ended.
    Upgraded(u64),
    /// It broke part way; the connection is unusable.
    Failed(String, u64),
}

/// One request relayed and its answer relayed back: bytes both ways, and whether both
/// connections may carry another.
async fn exchange<C, U>(
    client: &mut Conn<C>,
    up: &mut Conn<U>,
    mut req: Head,
    sh: &Shared,
    retryable: bool,
) -> std::result::Result<(u64, bool), Exchange>
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let mut bytes = 0u64;
    let fail = |what: &str, e: &dyn std::fmt::Display, bytes| {
        Exchange::Failed(format!("{what}: {e}"), bytes)
    };
    let body = match req.request_body() {
        Ok(b) => b,
        Err(why) => {
            let _ = client.io.write_all(&bad_request(why)).await;
            return Err(Exchange::Failed(why.to_string(), 0));
        }
    };
    // The proxy answers 100-continue itself: the client then sends the body right away.
    if req
        .get("expect")
        .any(|v| v.eq_ignore_ascii_case(b"100-continue"))
    {
        req.remove("expect");
        if body != Body::None {
            client
                .io
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .map_err(|e| fail("client", &e, 0))?;
            client.io.flush().await.map_err(|e| fail("client", &e, 0))?;
        }
    }
    // A server may close a kept-alive connection at any moment; a request with no body that
    // got no answer at all is safe to send again.
    let retryable = retryable && body == Body::None;
    let encoded = req.encode();
    bytes += encoded.len() as u64;
    if let Err(e) = up.io.write_all(&encoded).await {
        return Err(match retryable {
            true => Exchange::Stale,
            false => fail("upstream write", &e, bytes),
        });
    }
    bytes += client
        .copy_body(body, &mut up.io)
        .await
        .map_err(|e| fail("request body", &e, bytes))?;
    loop {
        let raw = match up.read_head(sh.limits.max_head).await {
            Ok(Some(raw)) => raw,
            Ok(None) | Err(_) if retryable && up.buffered().is_empty() => {
                return Err(Exchange::Stale)
            }
            Ok(None) => {
                let line = "kern-sandbox egress: the upstream closed without an answer";
                let _ = client
                    .io
                    .write_all(&simple_response(502, "Bad Gateway", line, true))
                    .await;
                let _ = client.io.flush().await;
                return Err(Exchange::Failed(
                    "the upstream closed without an answer".into(),
                    bytes,
                ));
            }
            Err(e) => {
                let line = format!("kern-sandbox egress: bad upstream answer: {e}");
                let _ = client
                    .io
                    .write_all(&simple_response(502, "Bad Gateway", &line, true))
                    .await;
                let _ = client.io.flush().await;
                return Err(fail("upstream answer", &e, bytes));
            }
        };
        let resp = match Head::response(&raw) {
            Ok(r) => r,
            Err(why) => {
                let line = format!("kern-sandbox egress: bad upstream answer: {why}");
                let _ = client
                    .io
                    .write_all(&simple_response(502, "Bad Gateway", &line, true))
                    .await;
                let _ = client.io.flush().await;
                return Err(Exchange::Failed(why.to_string(), bytes));
            }
        };
        client
            .io
            .write_all(&raw)
            .await
            .map_err(|e| fail("client", &e, bytes))?;
        bytes += raw.len() as u64;
        if resp.code == 101 {
            client
                .io
                .flush()
                .await
                .map_err(|e| fail("client", &e, bytes))?;
            return Err(Exchange::Upgraded(bytes + upgrade(client, up, sh).await));
        }
        if (100..200).contains(&resp.code) {
            continue;
        }
        let rbody = resp
            .response_body(&req.method)
            .map_err(|why| Exchange::Failed(why.to_string(), bytes))?;
        bytes += up
            .copy_body(rbody, &mut client.io)
            .await
            .map_err(|e| fail("response body", &e, bytes))?;
        let keep = req.keep_alive() && resp.keep_alive() && rbody != Body::UntilClose;
        return Ok((bytes, keep));
    }
}

/// After a 101: both sides become one tunnel.
async fn upgrade<C, U>(client: &mut Conn<C>, up: &mut Conn<U>, sh: &Shared) -> u64
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let a_pre = client.buffered().to_vec();
    let b_pre = up.buffered().to_vec();
    let mut total = 0;
    relay(
        &mut client.io,
        a_pre,
        &mut up.io,
        b_pre,
        sh.limits.idle,
        &mut total,
    )
    .await;
    total
}

/// Relays both ways until both sides are done or nothing moves for `idle`, counting the bytes
/// into `total` as they pass.
/// `a_pre` was read from `a` already and goes to `b` first (and `b_pre` to `a`).
async fn relay<A, B>(
    mut a: A,
    a_pre: Vec<u8>,
    mut b: B,
    b_pre: Vec<u8>,
    idle: Duration,
    total: &mut u64,
) where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    *total += (a_pre.len() + b_pre.len()) as u64;
    if b.write_all(&a_pre).await.is_err() || a.write_all(&b_pre).await.is_err() {
        return;
    }
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    let (mut a_open, mut b_open) = (true, true);
    while a_open || b_open {
        tokio::select! {
            r = a.read(&mut ba), if a_open => match r {
                Ok(0) | Err(_) => {
                    a_open = false;
                    let _ = b.shutdown().await;
                }
                Ok(n) => {
                    if b.write_all(&ba[..n]).await.is_err() || b.flush().await.is_err() {
                        break;
                    }
                    *total += n as u64;
                }
            },
            r = b.read(&mut bb), if b_open => match r {
                Ok(0) | Err(_) => {
                    b_open = false;
                    let _ = a.shutdown().await;
                }
                Ok(n) => {
                    if a.write_all(&bb[..n]).await.is_err() || a.flush().await.is_err() {
                        break;
                    }
                    *total += n as u64;
                }
            },
            _ = tokio::time::sleep(idle) => break,
        }
    }
}

/// A plain HTTP request's upstream, kept for the next request to the same place.
struct PlainUpstream {
    host: Host,
    port: u16,
    ip: IpAddr,
    pinned: bool,
    conn: Conn<TcpStream>,
}

/// One absolute-form request (`GET http://host/path`): Ok(true) if the client's stream may
/// carry another.
async fn plain(
    client: &mut Conn<UnixStream>,
    mut req: Head,
    sh: &Shared,
    upstream: &mut Option<PlainUpstream>,
) -> io::Result<bool> {
    let lower = req.target.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("http://").map(|_| &req.target[7..]) else {
        let why = if lower.starts_with("https://") {
            "send https:// requests through CONNECT"
        } else {
            "this is a proxy: send absolute-form requests (http://host/path) or CONNECT"
        };
        client.io.write_all(&bad_request(why)).await?;
        return Ok(false);
    };
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    let auth = auth.to_string();
    let Some((host, port)) = (!auth.contains('@'))
        .then(|| authority(&auth, Some(80)))
        .flatten()
    else {
        client
            .io
            .write_all(&bad_request("a bad host in the request URI"))
            .await?;
        return Ok(false);
    };
    let mut ev = Event {
        host: host.to_string(),
        port,
        method: req.method.clone(),
        path: Some(path.clone()),
        allowed: false,
        reason: String::new(),
        bytes: 0,
    };
    let policy = sh.policy();
    let reuse = upstream
        .as_ref()
        .is_some_and(|u| u.host == host && u.port == port);
    let checked = if reuse {
        let u = upstream.as_ref().expect("checked above");
        policy
            .check(&host, port, u.ip, u.pinned)
            .map_err(Refusal::Policy)
    } else {
        *upstream = None;
        async {
            let r = resolve(&policy, &host, port, sh.limits.connect).await?;
            let (tcp, ip) = dial(&r.addrs, port, sh.limits.connect).await?;
            *upstream = Some(PlainUpstream {
                host: host.clone(),
                port,
                ip,
                pinned: r.pinned,
                conn: Conn::new(tcp, sh.limits.idle),
            });
            Ok(())
        }
        .await
    };
    if let Err(why) = checked {
        client
            .io
            .write_all(&refusal_response(&host, port, &why))
            .await?;
        ev.reason = why.reason().to_string();
        sh.emit(ev);
        return Ok(false);
    }
    req.target = path;
    req.remove("proxy-connection");
    req.remove("proxy-authorization");
    if req.get("host").next().is_none() {
        req.headers.push(("Host".into(), auth.into_bytes()));
    }
    if let Some(rules) = policy.headers_for(&host) {
        req.apply(&rules);
    }
    drop(policy);
    let up = upstream.as_mut().expect("set above");
    let mut r = exchange(client, &mut up.conn, req.clone(), sh, reuse).await;
    if let Err(Exchange::Stale) = r {
        // The kept-alive connection had closed: the same checked address, a new connection.
        match dial(&[up.ip], port, sh.limits.connect).await {
            Ok((tcp, _)) => {
                up.conn = Conn::new(tcp, sh.limits.idle);
                r = exchange(client, &mut up.conn, req, sh, false).await;
            }
            Err(why) => {
                *upstream = None;
                client
                    .io
                    .write_all(&refusal_response(&host, port, &why))
                    .await?;
                ev.reason = why.reason().to_string();
                sh.emit(ev);
                return Ok(false);
            }
        }
    }
    ev.allowed = true;
    let keep = match r {
        Err(Exchange::Stale) => {
            ev.reason = "the upstream closed without an answer".into();
            false
        }
        Ok((bytes, keep)) => {
            ev.reason = "forwarded".into();
            ev.bytes = bytes;
            keep
        }
        Err(Exchange::Upgraded(bytes)) => {
            ev.reason = "forwarded (upgraded)".into();
            ev.bytes = bytes;
            false
        }
        Err(Exchange::Failed(why, bytes)) => {
            ev.reason = why;
            ev.bytes = bytes;
            false
        }
    };
    sh.emit(ev);
    if !keep {
        *upstream = None;
    }
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        let h = |s: &str, d| authority(s, d).map(|(h, p)| format!("{h}:{p}"));
        assert_eq!(h("api.test:443", None).as_deref(), Some("api.test:443"));
        assert_eq!(h("API.test", Some(80)).as_deref(), Some("api.test:80"));
        assert_eq!(h("api.test", None), None);
        assert_eq!(h("[::1]:8443", None).as_deref(), Some("[::1]:8443"));
        assert_eq!(h("127.0.0.1:0", None), None);
        assert_eq!(h("a.test:99999", None), None);
        assert_eq!(h("a.test:+1", None), None);
        assert_eq!(h("::1:80", None), None);
        assert_eq!(h("a b:80", None), None);
    }
}
