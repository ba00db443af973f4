//! The proxy end to end on loopback: a test CA and HTTP/HTTPS servers on 127.0.0.1 made here,
//! reached only through `hosts` pins.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

use kern_sandbox_egress_policy::Event;

use crate::http::{Conn, Head};
use crate::proxy::{EgressProxy, Limits};
use crate::tls::Enforced;

const SECRET: &str = "Bearer s3cret-value";

struct TestCa {
    pem: String,
    server: Arc<rustls::ServerConfig>,
}

/// A CA and a server certificate for api.test and plain.test, like a test suite would make.
fn test_ca() -> TestCa {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["api.test".into(), "plain.test".into()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let server = rustls::ServerConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    TestCa {
        pem: ca_cert.pem(),
        server: Arc::new(server),
    }
}

/// A loopback server that answers each request with its head as received (keep-alive).
async fn echo_server(tls: Option<Arc<rustls::ServerConfig>>) -> u16 {
    echo_server_with(tls, false).await
}

/// `one_each`: the server closes every connection after one answer, without saying so (as a
/// server whose keep-alive timeout passed does).
async fn echo_server_with(tls: Option<Arc<rustls::ServerConfig>>, one_each: bool) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    Some(cfg) => {
                        if let Ok(s) = tokio_rustls::TlsAcceptor::from(cfg).accept(s).await {
                            echo(s, one_each).await
                        }
                    }
                    None => echo(s, one_each).await,
                }
            });
        }
    });
    port
}

async fn echo<S: AsyncRead + AsyncWrite + Unpin>(s: S, one_each: bool) {
    let mut c = Conn::new(s, Duration::from_secs(30));
    while let Ok(Some(raw)) = c.read_head(65536).await {
        let h = Head::request(&raw).unwrap();
        let body = h.request_body().unwrap();
        let mut sink = Vec::new();
        c.copy_body(body, &mut sink).await.unwrap();
        let mut out = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n",
            raw.len() + sink.len()
        )
        .into_bytes();
        out.extend_from_slice(&raw);
        out.extend_from_slice(&sink);
        if c.io.write_all(&out).await.is_err() || c.io.flush().await.is_err() || one_each {
            let _ = c.io.shutdown().await;
            return;
        }
    }
}

struct Fixture {
    proxy: EgressProxy,
    path: PathBuf,
    events: Arc<Mutex<Vec<Event>>>,
    ca: TestCa,
    https: u16,
    http: u16,
    _dir: tempfile::TempDir,
}

fn policy(v: Value) -> Enforced {
    Enforced::new(&v).unwrap()
}

fn standard(ca: &TestCa) -> Value {
    json!({
        "allowOut": ["api.test", "plain.test"],
        "hosts": { "api.test": "127.0.0.1", "plain.test": "127.0.0.1", "other.test": "127.0.0.1" },
        "rules": { "api.test": [{ "transform": { "headers": { "Authorization": SECRET } } }] },
        "upstreamCa": ca.pem,
    })
}

async fn fixture() -> Fixture {
    let ca = test_ca();
    let https = echo_server(Some(ca.server.clone())).await;
    let http = echo_server(None).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("egress.sock");
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let proxy = EgressProxy::start(
        &path,
        policy(standard(&ca)),
        Some(Arc::new(move |e| sink.lock().unwrap().push(e))),
        Limits::default(),
    )
    .unwrap();
    Fixture {
        proxy,
        path,
        events,
        ca,
        https,
        http,
        _dir: dir,
    }
}

/// Sends a CONNECT and returns the answer's head, and the stream if it was 200.
async fn connect(path: &PathBuf, target: &str) -> (String, Option<UnixStream>) {
    let mut s = UnixStream::connect(path).await.unwrap();
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut c = Conn::new(s, Duration::from_secs(30));
    let raw = c.read_head(65536).await.unwrap().unwrap();
    let text = String::from_utf8(raw.clone()).unwrap();
    if text.starts_with("HTTP/1.1 200") {
        let (s, rest) = c.into_parts();
        assert!(rest.is_empty());
        (text, Some(s))
    } else {
        let h = Head::response(&raw).unwrap();
        let mut body = Vec::new();
        c.copy_body(h.response_body("CONNECT").unwrap(), &mut body)
            .await
            .unwrap();
        (format!("{text}{}", String::from_utf8(body).unwrap()), None)
    }
}

async fn tls_over(
    s: UnixStream,
    name: &str,
    trust_pem: &str,
) -> tokio_rustls::client::TlsStream<UnixStream> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(trust_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let cfg = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from(name.to_string()).unwrap(), s)
        .await
        .unwrap()
}

/// One request on `c`, the answer's body as text.
async fn ask<S: AsyncRead + AsyncWrite + Unpin>(c: &mut Conn<S>, req: &str) -> (u16, String) {
    c.io.write_all(req.as_bytes()).await.unwrap();
    c.io.flush().await.unwrap();
    let h = Head::response(&c.read_head(65536).await.unwrap().unwrap()).unwrap();
    let mut body = Vec::new();
    c.copy_body(h.response_body("GET").unwrap(), &mut body)
        .await
        .unwrap();
    (h.code, String::from_utf8(body).unwrap())
}

#[tokio::test]
async fn terminated_hosts_get_the_rule_headers_and_tunnels_stay_untouched() {
    let f = fixture().await;
    let (head, s) = connect(&f.path, &format!("api.test:{}", f.https)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let tls = tls_over(s.unwrap(), "api.test", f.proxy.ca_pem()).await;
    // The leaf is the proxy's, not the server's.
    let leaf: &CertificateDer = &tls.get_ref().1.peer_certificates().unwrap()[0];
    assert!(!f.ca.pem.is_empty() && !leaf.is_empty());
    let mut c = Conn::new(tls, Duration::from_secs(30));
    let req = "GET /v1/x HTTP/1.1\r\nHost: api.test\r\nauthorization: Bearer fake\r\n\r\n";
    let (code, seen) = ask(&mut c, req).await;
    assert_eq!(code, 200);
    assert!(
        seen.contains(&format!("Authorization: {SECRET}\r\n")),
        "{seen}"
    );
    assert!(!seen.contains("fake"), "{seen}");
    // Keep-alive, a chunked body.
    let req = "POST /v1/y HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let (code, seen) = ask(&mut c, req).await;
    assert_eq!(code, 200);
    assert!(
        seen.starts_with("POST /v1/y HTTP/1.1\r\n") && seen.ends_with("3\r\nabc\r\n0\r\n\r\n"),
        "{seen}"
    );
    drop(c);

    // No rules: a tunnel, the server's own certificate reaches the client.
    let (head, s) = connect(&f.path, &format!("plain.test:{}", f.https)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut c = Conn::new(
        tls_over(s.unwrap(), "plain.test", &f.ca.pem).await,
        Duration::from_secs(30),
    );
    let (_, seen) = ask(&mut c, "GET / HTTP/1.1\r\nHost: plain.test\r\n\r\n").await;
    assert!(
        !seen.to_ascii_lowercase().contains("authorization"),
        "{seen}"
    );
    drop(c);

    f.proxy.close().await;
    let evs = f.events.lock().unwrap().clone();
    let dbg = format!("{evs:?}");
    assert!(!dbg.contains("s3cret"), "{dbg}");
    let terminated: Vec<_> = evs.iter().filter(|e| e.reason == "terminated").collect();
    assert_eq!(terminated.len(), 2, "{evs:?}");
    assert_eq!(terminated[0].path.as_deref(), Some("/v1/x"));
    assert_eq!(
        (terminated[0].method.as_str(), terminated[0].port),
        ("GET", f.https)
    );
    assert!(terminated[0].allowed && terminated[0].bytes > 0);
    let tunnel = evs
        .iter()
        .find(|e| e.reason == "tunnelled")
        .expect("tunnel event");
    assert_eq!(
        (
            tunnel.host.as_str(),
            tunnel.method.as_str(),
            tunnel.path.clone()
        ),
        ("plain.test", "CONNECT", None)
    );
    assert!(tunnel.bytes > 0);
}

#[tokio::test]
async fn plain_http_refusals_updates_and_close() {
    let f = fixture().await;
    let s = UnixStream::connect(&f.path).await.unwrap();
    let mut c = Conn::new(s, Duration::from_secs(30));
    let url = format!("http://api.test:{}/p?q=1", f.http);
    let (code, seen) = ask(
        &mut c,
        &format!("GET {url} HTTP/1.1\r\nHost: api.test\r\nProxy-Connection: keep-alive\r\n\r\n"),
    )
    .await;
    assert_eq!(code, 200);
    assert!(seen.starts_with("GET /p?q=1 HTTP/1.1\r\n"), "{seen}");
    assert!(
        seen.contains(&format!("Authorization: {SECRET}")) && !seen.contains("Proxy-Connection"),
        "{seen}"
    );
    // The same stream again (keep-alive), with a body.
    let (code, seen) = ask(
        &mut c,
        &format!("POST {url} HTTP/1.1\r\nHost: api.test\r\nContent-Length: 2\r\n\r\nhi"),
    )
    .await;
    assert_eq!(code, 200);
    assert!(seen.ends_with("\r\n\r\nhi"), "{seen}");
    drop(c);

    let refused = |target: &str| {
        let path = f.path.clone();
        let target = target.to_string();
        async move { connect(&path, &target).await.0 }
    };
    let r = refused("evil.test:443").await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    assert!(
        r.ends_with("kern-sandbox egress: evil.test:443 refused: not in allowOut\n"),
        "{r}"
    );
    let r = refused(&format!("127.0.0.1:{}", f.https)).await;
    assert!(
        r.contains("refused: an IP address not listed in allowOut"),
        "{r}"
    );
    let r = refused(&format!("[::1]:{}", f.https)).await;
    assert!(r.contains("refused: an IP address not listed"), "{r}");
    // Not a proxy request.
    let mut s = UnixStream::connect(&f.path).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");

    // A deny wins, even over a pin; an invalid update changes nothing.
    let mut p = standard(&f.ca);
    p["denyOut"] = json!(["127.0.0.0/8"]);
    f.proxy.update(policy(p));
    let r = refused(&format!("plain.test:{}", f.https)).await;
    assert!(
        r.contains("refused: 127.0.0.1 is in denyOut \"127.0.0.0/8\""),
        "{r}"
    );
    let mut p = standard(&f.ca);
    p["allowOut"] = json!(["other.test"]);
    f.proxy.update(policy(p));
    let r = refused(&format!("plain.test:{}", f.https)).await;
    assert!(r.contains("refused: not in allowOut"), "{r}");
    let (ok, _) = connect(&f.path, &format!("other.test:{}", f.https)).await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");

    // close(): an open stream ends, the socket file goes.
    let idle = UnixStream::connect(&f.path).await.unwrap();
    tokio::task::yield_now().await;
    f.proxy.close().await;
    assert!(!f.path.exists());
    assert_eq!(f.proxy.active_connections(), 0);
    let mut idle = idle;
    let mut buf = [0u8; 1];
    assert_eq!(idle.read(&mut buf).await.unwrap_or(0), 0);
    assert!(UnixStream::connect(&f.path).await.is_err());
    let evs = f.events.lock().unwrap().clone();
    assert!(evs.iter().any(|e| !e.allowed
        && e.host == "evil.test"
        && e.reason == "not in allowOut"
        && e.bytes == 0));
    let fwd: Vec<_> = evs.iter().filter(|e| e.reason == "forwarded").collect();
    assert_eq!(fwd.len(), 2);
    assert_eq!(fwd[0].path.as_deref(), Some("/p?q=1"));
}

#[tokio::test]
async fn a_live_terminated_stream_sees_an_update() {
    let f = fixture().await;
    let (_, s) = connect(&f.path, &format!("api.test:{}", f.https)).await;
    let mut c = Conn::new(
        tls_over(s.unwrap(), "api.test", f.proxy.ca_pem()).await,
        Duration::from_secs(30),
    );
    let (code, _) = ask(&mut c, "GET /a HTTP/1.1\r\nHost: api.test\r\n\r\n").await;
    assert_eq!(code, 200);
    let mut p = standard(&f.ca);
    p["allowOut"] = json!(["plain.test"]);
    f.proxy.update(policy(p));
    let (code, body) = ask(&mut c, "GET /b HTTP/1.1\r\nHost: api.test\r\n\r\n").await;
    assert_eq!(code, 403);
    assert!(
        body.contains("api.test:") && body.contains("refused: not in allowOut"),
        "{body}"
    );
    f.proxy.close().await;
}

#[tokio::test]
async fn dropping_the_proxy_stops_it() {
    let f = fixture().await;
    let path = f.path.clone();
    let s = UnixStream::connect(&path).await.unwrap();
    drop(f.proxy);
    let mut s = s;
    let mut buf = [0u8; 1];
    // The serving task ends its streams once it sees the drop.
    assert_eq!(s.read(&mut buf).await.unwrap_or(0), 0);
    assert!(!path.exists());
}

#[tokio::test]
async fn a_kept_alive_upstream_that_closed_is_dialled_again() {
    let f = fixture().await;
    let https = echo_server_with(Some(f.ca.server.clone()), true).await;
    let http = echo_server_with(None, true).await;
    // Plain HTTP: two requests on one client stream, each on a new upstream connection.
    let s = UnixStream::connect(&f.path).await.unwrap();
    let mut c = Conn::new(s, Duration::from_secs(30));
    for p in ["/one", "/two"] {
        let req = format!("GET http://api.test:{http}{p} HTTP/1.1\r\nHost: api.test\r\n\r\n");
        let (code, seen) = ask(&mut c, &req).await;
        assert_eq!(code, 200, "{p}: {seen}");
        assert!(seen.starts_with(&format!("GET {p} ")), "{seen}");
    }
    // Terminated: the same, inside the box's one TLS session.
    let (_, s) = connect(&f.path, &format!("api.test:{https}")).await;
    let mut c = Conn::new(
        tls_over(s.unwrap(), "api.test", f.proxy.ca_pem()).await,
        Duration::from_secs(30),
    );
    for p in ["/one", "/two", "/three"] {
        let (code, seen) = ask(
            &mut c,
            &format!("GET {p} HTTP/1.1\r\nHost: api.test\r\n\r\n"),
        )
        .await;
        assert_eq!(code, 200, "{p}: {seen}");
        assert!(seen.contains(&format!("Authorization: {SECRET}")), "{seen}");
    }
    f.proxy.close().await;
}

#[tokio::test]
async fn bounded_streams_and_heads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.sock");
    let limits = Limits {
        max_connections: 1,
        max_head: 1024,
        ..Limits::default()
    };
    let proxy = EgressProxy::start(&path, policy(json!({})), None, limits).unwrap();
    let mut first = UnixStream::connect(&path).await.unwrap();
    // The first stream is being served once it answers something.
    first.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut out = String::new();
    first.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    let held = UnixStream::connect(&path).await.unwrap();
    // Wait for the proxy to count it (it answers nothing until a head arrives).
    while proxy.active_connections() < 1 {
        tokio::task::yield_now().await;
    }
    let mut second = UnixStream::connect(&path).await.unwrap();
    let mut out = String::new();
    second.read_to_string(&mut out).await.unwrap();
    assert!(
        out.starts_with("HTTP/1.1 503") && out.ends_with("too many connections\n"),
        "{out}"
    );
    drop(held);
    while proxy.active_connections() > 0 {
        tokio::task::yield_now().await;
    }
    let mut big = UnixStream::connect(&path).await.unwrap();
    let head = format!(
        "GET http://a.test/ HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(2048)
    );
    big.write_all(head.as_bytes()).await.unwrap();
    let mut out = String::new();
    big.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 431"), "{out}");
    proxy.close().await;
}
