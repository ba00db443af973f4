//! Just enough HTTP/1.1 for a proxy: read a message head (bounded), tell how its body is framed,
//! and relay the body byte for byte (Content-Length, chunked, or to the end of the stream).
//! Bodies are never buffered whole; chunked framing is relayed as it came.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use kern_sandbox_egress_policy::Headers;

/// The most headers one message may carry.
const MAX_HEADERS: usize = 128;
/// The longest chunk-size or trailer line.
const MAX_LINE: usize = 8 * 1024;
const READ_SIZE: usize = 64 * 1024;

/// A stream with a read buffer: what was read past one message stays for the next one (or for
/// the TLS handshake after a CONNECT).
pub struct Conn<S> {
    pub io: S,
    buf: Vec<u8>,
    pos: usize,
    idle: Duration,
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "idle timeout")
}

impl<S: AsyncRead + Unpin> Conn<S> {
    pub fn new(io: S, idle: Duration) -> Self {
        Conn {
            io,
            buf: Vec::new(),
            pos: 0,
            idle,
        }
    }

    /// Buffered bytes not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Hands the stream and its unread bytes over (a CONNECT becomes a tunnel or a TLS session).
    pub fn into_parts(mut self) -> (S, Vec<u8>) {
        self.buf.drain(..self.pos);
        (self.io, self.buf)
    }

    /// Reads more; Ok(0) at the end of the stream.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > READ_SIZE {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + READ_SIZE, 0);
        let r = tokio::time::timeout(self.idle, self.io.read(&mut self.buf[len..])).await;
        let n = match r {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => {
                self.buf.truncate(len);
                return Err(e);
            }
            Err(_) => {
                self.buf.truncate(len);
                return Err(timed_out());
            }
        };
        self.buf.truncate(len + n);
        Ok(n)
    }

    /// The next message head, up to `limit` bytes; None at a clean end of the stream (nothing
    /// read). Empty lines before a head are skipped (RFC 9112 2.2).
    pub async fn read_head(&mut self, limit: usize) -> io::Result<Option<Vec<u8>>> {
        loop {
            while self.buffered().starts_with(b"\r\n") || self.buffered().starts_with(b"\n") {
                self.pos += if self.buffered()[0] == b'\r' { 2 } else { 1 };
            }
            if let Some(end) = head_end(self.buffered()) {
                if end > limit {
                    return Err(too_large());
                }
                let head = self.buffered()[..end].to_vec();
                self.pos += end;
                return Ok(Some(head));
            }
            if self.buffered().len() > limit {
                return Err(too_large());
            }
            if self.fill().await? == 0 {
                return match self.buffered().is_empty() {
                    true => Ok(None),
                    false => Err(io::ErrorKind::UnexpectedEof.into()),
                };
            }
        }
    }

    async fn read_line(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(i) = self.buffered().iter().position(|&b| b == b'\n') {
                let line = self.buffered()[..=i].to_vec();
                self.pos += i + 1;
                return Ok(line);
            }
            if self.buffered().len() > MAX_LINE {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
            }
            if self.fill().await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Relays exactly `n` bytes to `out`.
    async fn copy_exact<W: AsyncWrite + Unpin>(
        &mut self,
        mut n: u64,
        out: &mut W,
    ) -> io::Result<()> {
        while n > 0 {
            if self.buffered().is_empty() && self.fill().await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let take = self.buffered().len().min(n.min(usize::MAX as u64) as usize);
            out.write_all(&self.buffered()[..take]).await?;
            self.pos += take;
            n -= take as u64;
        }
        Ok(())
    }

    /// Relays a body framed as `body`; returns its size on the wire.
    pub async fn copy_body<W: AsyncWrite + Unpin>(
        &mut self,
        body: Body,
        out: &mut W,
    ) -> io::Result<u64> {
        let n = match body {
            Body::None => 0,
            Body::Length(n) => {
                self.copy_exact(n, out).await?;
                n
            }
            Body::Chunked => {
                let mut total = 0u64;
                loop {
                    let line = self.read_line().await?;
                    let size = chunk_size(&line)?;
                    out.write_all(&line).await?;
                    total += line.len() as u64;
                    if size == 0 {
                        // Trailers, up to the empty line.
                        loop {
                            let t = self.read_line().await?;
                            out.write_all(&t).await?;
                            total += t.len() as u64;
                            if t == b"\r\n" || t == b"\n" {
                                break;
                            }
                        }
                        break total;
                    }
                    self.copy_exact(size, out).await?;
                    let end = self.read_line().await?;
                    if end != b"\r\n" && end != b"\n" {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "bad chunk end"));
                    }
                    out.write_all(&end).await?;
                    total += size + end.len() as u64;
                }
            }
            Body::UntilClose => {
                let mut total = 0u64;
                loop {
                    if self.buffered().is_empty() && self.fill().await? == 0 {
                        break total;
                    }
                    out.write_all(self.buffered()).await?;
                    total += self.buffered().len() as u64;
                    self.pos = self.buf.len();
                }
            }
        };
        out.flush().await?;
        Ok(n)
    }
}

fn too_large() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "message head too large")
}

/// Where a head ends (after its blank line), if it is all there.
fn head_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(off) = b[i..].iter().position(|&c| c == b'\n') {
        let nl = i + off;
        let rest = &b[nl + 1..];
        if rest.starts_with(b"\n") {
            return Some(nl + 2);
        }
        if rest.starts_with(b"\r\n") {
            return Some(nl + 3);
        }
        i = nl + 1;
    }
    None
}

fn chunk_size(line: &[u8]) -> io::Result<u64> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "bad chunk size");
    let hex: &[u8] = line
        .split(|&b| b == b';' || b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default();
    let hex = std::str::from_utf8(hex)
        .map_err(|_| bad())?
        .trim_matches([' ', '\t']);
    if hex.is_empty() || hex.len() > 15 {
        return Err(bad());
    }
    u64::from_str_radix(hex, 16).map_err(|_| bad())
}

/// How a message's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// A parsed message head: a request (`method`, `target`) or a response (`code`).
#[derive(Clone, Debug)]
pub struct Head {
    pub method: String,
    pub target: String,
    pub code: u16,
    pub reason: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Head {
    pub fn request(raw: &[u8]) -> Result<Head, &'static str> {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Request::new(&mut hs);
        match r.parse(raw) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err("incomplete request head"),
            Err(httparse::Error::TooManyHeaders) => return Err("too many headers"),
            Err(_) => return Err("malformed request head"),
        }
        Ok(Head {
            method: r.method.unwrap_or_default().to_string(),
            target: r.path.unwrap_or_default().to_string(),
            code: 0,
            reason: String::new(),
            minor: r.version.unwrap_or(1),
            headers: owned(r.headers),
        })
    }

    pub fn response(raw: &[u8]) -> Result<Head, &'static str> {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut hs);
        match r.parse(raw) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err("incomplete response head"),
            Err(_) => return Err("malformed response head"),
        }
        Ok(Head {
            method: String::new(),
            target: String::new(),
            code: r.code.unwrap_or(0),
            reason: r.reason.unwrap_or_default().to_string(),
            minor: r.version.unwrap_or(1),
            headers: owned(r.headers),
        })
    }

    pub fn get<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    pub fn remove(&mut self, name: &str) {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    }

    /// Sets a rule's headers, replacing any the client sent under the same names.
    pub fn apply(&mut self, rules: &Headers) {
        for (name, value) in rules.iter() {
            self.remove(name);
            self.headers
                .push((name.to_string(), value.as_bytes().to_vec()));
        }
    }

    /// True if a `Connection` header lists `token`.
    pub fn connection_has(&self, token: &str) -> bool {
        self.get("connection").any(|v| {
            v.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
        })
    }

    /// Whether the connection stays open after this message (HTTP/1.1 unless `close`; HTTP/1.0
    /// only with `keep-alive`).
    pub fn keep_alive(&self) -> bool {
        if self.minor == 0 {
            self.connection_has("keep-alive")
        } else {
            !self.connection_has("close")
        }
    }

    /// A request's body framing; Err for framing a proxy must not guess at (RFC 9112 6.3): both
    /// Transfer-Encoding and Content-Length, a coding that does not end in chunked, conflicting
    /// lengths.
    pub fn request_body(&self) -> Result<Body, &'static str> {
        let te: Vec<&[u8]> = self.get("transfer-encoding").collect();
        let cl = self.content_length()?;
        if !te.is_empty() {
            if cl.is_some() {
                return Err("both Transfer-Encoding and Content-Length");
            }
            return match last_coding_is_chunked(&te) {
                true => Ok(Body::Chunked),
                false => Err("a Transfer-Encoding that does not end in chunked"),
            };
        }
        Ok(cl.map_or(Body::None, Body::Length))
    }

    /// A response's body framing, given the request's method.
    pub fn response_body(&self, method: &str) -> Result<Body, &'static str> {
        if method.eq_ignore_ascii_case("HEAD")
            || (100..200).contains(&self.code)
            || self.code == 204
            || self.code == 304
        {
            return Ok(Body::None);
        }
        let te: Vec<&[u8]> = self.get("transfer-encoding").collect();
        if !te.is_empty() {
            return Ok(match last_coding_is_chunked(&te) {
                true => Body::Chunked,
                false => Body::UntilClose,
            });
        }
        Ok(self
            .content_length()?
            .map_or(Body::UntilClose, Body::Length))
    }

    fn content_length(&self) -> Result<Option<u64>, &'static str> {
        let mut found: Option<u64> = None;
        for v in self.get("content-length") {
            for part in v.split(|&b| b == b',') {
                let part = part.trim_ascii();
                if part.is_empty() || !part.iter().all(u8::is_ascii_digit) || part.len() > 19 {
                    return Err("a bad Content-Length");
                }
                let n: u64 = std::str::from_utf8(part)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or("a bad Content-Length")?;
                if found.is_some_and(|f| f != n) {
                    return Err("conflicting Content-Length values");
                }
                found = Some(n);
            }
        }
        Ok(found)
    }

    /// The head as bytes: a request line if `method` is set, else a status line.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        if self.method.is_empty() {
            out.extend_from_slice(
                format!("HTTP/1.{} {} {}\r\n", self.minor, self.code, self.reason).as_bytes(),
            );
        } else {
            out.extend_from_slice(
                format!("{} {} HTTP/1.{}\r\n", self.method, self.target, self.minor).as_bytes(),
            );
        }
        for (n, v) in &self.headers {
            out.extend_from_slice(n.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

fn owned(hs: &[httparse::Header<'_>]) -> Vec<(String, Vec<u8>)> {
    hs.iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect()
}

fn last_coding_is_chunked(te: &[&[u8]]) -> bool {
    te.last()
        .and_then(|v| v.rsplit(|&b| b == b',').next())
        .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// A complete short response the proxy itself gives (403, 502, …): plain text, one line.
pub fn simple_response(code: u16, reason: &str, text: &str, close: bool) -> Vec<u8> {
    let body = format!("{text}\n");
    format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n{}\r\n{body}",
        body.len(),
        if close { "connection: close\r\n" } else { "" },
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(bytes: &[u8]) -> Conn<&[u8]> {
        Conn::new(bytes, Duration::from_secs(5))
    }

    #[tokio::test]
    async fn heads_and_bodies() {
        let wire = b"\r\nPOST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nT: 1\r\n\r\nGET /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcleft";
        let mut c = conn(wire);
        let h = Head::request(&c.read_head(1024).await.unwrap().unwrap()).unwrap();
        assert_eq!(
            (h.method.as_str(), h.target.as_str(), h.minor),
            ("POST", "/a", 1)
        );
        assert_eq!(h.request_body(), Ok(Body::Chunked));
        let mut out = Vec::new();
        let n = c.copy_body(Body::Chunked, &mut out).await.unwrap();
        assert_eq!(out, b"5;ext=1\r\nhello\r\n0\r\nT: 1\r\n\r\n");
        assert_eq!(n, out.len() as u64);
        let h = Head::request(&c.read_head(1024).await.unwrap().unwrap()).unwrap();
        assert_eq!(h.request_body(), Ok(Body::Length(3)));
        let mut out = Vec::new();
        c.copy_body(Body::Length(3), &mut out).await.unwrap();
        assert_eq!(out, b"abc");
        assert_eq!(c.into_parts().1, b"left");
    }

    #[tokio::test]
    async fn limits_and_ends() {
        let mut c = conn(b"");
        assert!(c.read_head(1024).await.unwrap().is_none());
        let mut c = conn(b"GET / HTTP/1.1\r\nHost: x");
        assert_eq!(
            c.read_head(1024).await.unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(2000));
        let mut c = conn(big.as_bytes());
        assert!(c
            .read_head(1024)
            .await
            .unwrap_err()
            .to_string()
            .contains("too large"));
        let mut c = conn(b"zz\r\n");
        assert!(c.copy_body(Body::Chunked, &mut Vec::new()).await.is_err());
        let mut c = conn(b"3\r\nabcX\r\n");
        assert!(c.copy_body(Body::Chunked, &mut Vec::new()).await.is_err());
        let mut c = conn(b"ab");
        assert!(c.copy_body(Body::Length(3), &mut Vec::new()).await.is_err());
        let mut c = conn(b"to the end");
        let mut out = Vec::new();
        assert_eq!(c.copy_body(Body::UntilClose, &mut out).await.unwrap(), 10);
    }

    #[test]
    fn framing_refuses_smuggling() {
        let req = |extra: &str| {
            Head::request(format!("POST / HTTP/1.1\r\n{extra}\r\n").as_bytes()).unwrap()
        };
        assert_eq!(
            req("Content-Length: 5\r\n").request_body(),
            Ok(Body::Length(5))
        );
        assert_eq!(
            req("Content-Length: 5, 5\r\n").request_body(),
            Ok(Body::Length(5))
        );
        assert!(req("Content-Length: 5\r\nContent-Length: 6\r\n")
            .request_body()
            .is_err());
        assert!(req("Content-Length: -1\r\n").request_body().is_err());
        assert!(req("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")
            .request_body()
            .is_err());
        assert!(req("Transfer-Encoding: gzip\r\n").request_body().is_err());
        assert_eq!(
            req("Transfer-Encoding: gzip, chunked\r\n").request_body(),
            Ok(Body::Chunked)
        );
        assert_eq!(req("").request_body(), Ok(Body::None));
        let resp = |s: &str| Head::response(s.as_bytes()).unwrap();
        assert_eq!(
            resp("HTTP/1.1 200 OK\r\n\r\n").response_body("GET"),
            Ok(Body::UntilClose)
        );
        assert_eq!(
            resp("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n").response_body("HEAD"),
            Ok(Body::None)
        );
        assert_eq!(
            resp("HTTP/1.1 204 No Content\r\n\r\n").response_body("GET"),
            Ok(Body::None)
        );
        assert_eq!(
            resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").response_body("GET"),
            Ok(Body::Chunked)
        );
    }

    #[test]
    fn rules_replace_what_the_client_sent() {
        let mut h = Head::request(b"GET / HTTP/1.1\r\nauthorization: fake\r\nX-Keep: 1\r\nConnection: Keep-Alive, close\r\n\r\n").unwrap();
        assert!(h.connection_has("close") && !h.keep_alive());
        let json = serde_json::json!({ "Authorization": "Bearer real" });
        let p = kern_sandbox_egress_policy::Policy::new(
            &serde_json::json!({ "rules": { "a.test": [{ "transform": { "headers": json } }] } }),
        )
        .unwrap();
        h.apply(
            &p.headers_for(&kern_sandbox_egress_policy::Host::Name("a.test".into()))
                .unwrap(),
        );
        let text = String::from_utf8(h.encode()).unwrap();
        assert_eq!(text, "GET / HTTP/1.1\r\nX-Keep: 1\r\nConnection: Keep-Alive, close\r\nAuthorization: Bearer real\r\n\r\n");
        let r = simple_response(403, "Forbidden", "why", true);
        assert!(String::from_utf8(r)
            .unwrap()
            .ends_with("connection: close\r\n\r\nwhy\n"));
    }
}
