//! Flow control: a host that stops reading does not stall the agent's request reader, and the
//! agent's memory stays bounded while output piles up.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use common::Host;
use serde_json::json;

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what} did not happen"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// Whether `pid` sleeps in a pipe write (its kernel wait channel says so). Panics if it is gone.
fn blocked_in_pipe_write(pid: i64) -> bool {
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_else(|_| {
        panic!("process {pid} finished: its output was buffered, not held back")
    });
    wchan.contains("pipe_write")
}

/// The bytes `pid` has written so far. Panics if it is gone.
fn written(pid: i64) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_else(|_| {
        panic!("process {pid} finished: its output was buffered, not held back")
    });
    let line = io.lines().find(|l| l.starts_with("wchar:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn requests_are_served_while_the_host_is_not_reading_and_memory_stays_bounded() {
    let mut host = Host::start();
    const FLOOD: usize = 96 << 20;
    let pid = host.spawn(
        json!({"argv": ["head", "-c", FLOOD.to_string(), "/dev/zero"]}),
        b"",
    );
    // From here the host reads nothing: the flood fills the socket and the agent's queue.
    let made_by_file_worker = host.dir.path().join("written");
    let made_by_a_process = host.dir.path().join("touched");
    host.request(
        json!({"t": "write_file", "path": made_by_file_worker}),
        b"x",
    );
    host.request(
        json!({"t": "spawn", "argv": ["touch", made_by_a_process]}),
        b"",
    );
    wait_until("the write_file", || made_by_file_worker.exists());
    wait_until("the spawned touch", || {
        Path::new(&made_by_a_process).exists()
    });
    // Back-pressure reaches the flood: it ends up blocked on its pipe for good, having written
    // only what the queue, the socket and the pipe hold. (An agent that buffered everything
    // would let it run to the end instead, failing this wait.)
    wait_until("the flood settling blocked on its pipe", || {
        let before = written(pid);
        std::thread::sleep(Duration::from_millis(50));
        blocked_in_pipe_write(pid) && written(pid) == before
    });
    let flood = written(pid);
    assert!(
        flood < 32 << 20,
        "the flood wrote {flood} bytes the host has not read"
    );
    let rss = rss_bytes(host.child.id());
    assert!(
        rss < 48 << 20,
        "the agent holds {rss} bytes while the host does not read"
    );
    let out = host.collect(pid);
    assert_eq!((out.stdout.len(), out.code), (FLOOD, 0));
}

/// A server that writes a greeting, shuts its write half and returns what it reads to EOF.
fn greeting_server() -> (u16, std::thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        // The agent may already have dropped the connection (a host `close`): then these fail
        // and what was read is what counts.
        let _ = sock
            .write_all(b"welcome")
            .and_then(|()| sock.shutdown(Shutdown::Write));
        let mut got = Vec::new();
        let _ = sock.read_to_end(&mut got);
        got
    });
    (port, handle)
}

#[test]
fn the_box_side_can_finish_first_and_the_host_still_sends() {
    let mut host = Host::start();
    let (port, server) = greeting_server();
    let (answer, _) = host.ok(json!({"t": "connect", "port": port}), b"");
    let s = answer["stream"].clone();
    let mut got = Vec::new();
    loop {
        let (h, p) = host.wait_for(|h| h["stream"] == s && (h["t"] == "data" || h["t"] == "eof"));
        if h["t"] == "eof" {
            break;
        }
        got.extend(p);
    }
    assert_eq!(got, b"welcome");
    host.send(&json!({"t": "data", "stream": s}), b"late reply");
    host.send(&json!({"t": "eof", "stream": s}), b"");
    host.wait_for(|h| h["t"] == "closed" && h["stream"] == s);
    assert_eq!(server.join().unwrap(), b"late reply");
}

#[test]
fn a_host_close_drops_the_stream_and_others_carry_on() {
    let mut host = Host::start();
    let (port, server) = greeting_server();
    let (answer, _) = host.ok(json!({"t": "connect", "port": port}), b"");
    let s = answer["stream"].clone();
    host.send(&json!({"t": "close", "stream": s}), b"");
    // The server sees the connection end without any data from the host.
    assert_eq!(server.join().unwrap(), b"");
    // Traffic for a closed stream is ignored, and the connection is fine.
    host.send(&json!({"t": "data", "stream": s}), b"nobody listens");
    assert_eq!(host.run(&["true"]).code, 0);
    let (port2, server2) = greeting_server();
    let (answer, _) = host.ok(json!({"t": "connect", "port": port2}), b"");
    assert_ne!(answer["stream"], s);
    host.send(&json!({"t": "eof", "stream": answer["stream"]}), b"");
    assert_eq!(server2.join().unwrap(), b"");
}
