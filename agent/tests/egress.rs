//! The egress relay, run on the host (no box): `kern-sandbox-agent egress ... -- argv` binds the
//! port and writes the bundle before the workload runs, relays each TCP connection to the proxy
//! socket both ways (half-closes included), keeps the workload's pid and exit code, and ends with
//! the workload.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixListener;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const AGENT: &str = env!("CARGO_BIN_EXE_kern-sandbox-agent");
const CA: &str = "-----BEGIN CERTIFICATE-----\nTEST-CA\n-----END CERTIFICATE-----\n";

/// A free loopback port (another process may take it in between; the tests accept that).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A stand-in proxy: each connection gets `reply-to:` and then everything it sent, echoed, and an
/// EOF once the client shut its write half.
fn echo_proxy(sock: &Path) {
    let l = UnixListener::bind(sock).unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let _ = s.write_all(b"reply-to:");
                let mut r = s.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut s);
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
}

struct Relay {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

fn start(workload: &[&str]) -> Relay {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("proxy.sock");
    echo_proxy(&sock);
    std::fs::write(dir.path().join("ca.pem"), CA).unwrap();
    let port = free_port();
    let child = Command::new(AGENT)
        .arg("egress")
        .args(["--sock".as_ref(), sock.as_os_str()])
        .args(["--port", &port.to_string()])
        .args(["--ca".as_ref(), dir.path().join("ca.pem").as_os_str()])
        .args([
            "--bundle".as_ref(),
            dir.path().join("bundle.pem").as_os_str(),
        ])
        .arg("--")
        .args(workload)
        .spawn()
        .unwrap();
    Relay { child, port, dir }
}

fn connect(port: u16) -> TcpStream {
    let started = Instant::now();
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => return s,
            Err(_) if started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("the relay never listened: {e}"),
        }
    }
}

#[test]
fn the_workload_keeps_its_pid_and_exit_code() {
    let mut r = start(&["sh", "-c", "echo $$ > \"$0\"; exit 3", "/dev/null"]);
    let status = r.child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let pid_file = r.dir.path().join("pid");
    let mut r = start(&["sh", "-c", "echo $$ > \"$0\"", pid_file.to_str().unwrap()]);
    assert!(r.child.wait().unwrap().success());
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, r.child.id(), "the workload runs in the agent's place");
}

#[test]
fn a_signal_ends_the_workload_as_it_would_without_the_relay() {
    let mut r = start(&["sh", "-c", "kill -SYS $$"]);
    assert_eq!(r.child.wait().unwrap().signal(), Some(libc::SIGSYS));
}

#[test]
fn a_missing_command_is_127() {
    let mut r = start(&["/no/such/command"]);
    assert_eq!(r.child.wait().unwrap().code(), Some(127));
}

#[test]
fn the_bundle_is_the_system_one_then_the_proxy_ca() {
    let mut r = start(&["true"]);
    assert!(r.child.wait().unwrap().success());
    let bundle = std::fs::read_to_string(r.dir.path().join("bundle.pem")).unwrap();
    assert!(bundle.ends_with(CA));
    let system = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok());
    if let Some(system) = system {
        assert!(bundle.starts_with(system.trim_end()));
    }
}

#[test]
fn a_bundle_path_already_taken_is_refused_before_the_workload_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, CA).unwrap();
    let taken = dir.path().join("taken");
    std::os::unix::fs::symlink("/etc/passwd", &taken).unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(AGENT)
        .args(["egress", "--sock", "/nonexistent", "--port"])
        .arg(free_port().to_string())
        .args([
            "--ca".as_ref(),
            ca.as_os_str(),
            "--bundle".as_ref(),
            taken.as_os_str(),
        ])
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CA bundle"));
    assert!(!marker.exists());
}

#[test]
fn connections_are_relayed_both_ways_with_half_close_and_end_with_the_workload() {
    let mut r = start(&["sleep", "30"]);
    // Several at once, each with more than a buffer's worth each way.
    let payload: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (port, payload) = (r.port, payload.clone());
            std::thread::spawn(move || {
                let mut s = connect(port);
                let mut w = s.try_clone().unwrap();
                let writer = std::thread::spawn(move || {
                    w.write_all(&payload).unwrap();
                    w.shutdown(Shutdown::Write).unwrap();
                });
                let mut got = Vec::new();
                s.read_to_end(&mut got).unwrap();
                writer.join().unwrap();
                got
            })
        })
        .collect();
    for c in clients {
        let got = c.join().unwrap();
        assert_eq!(&got[..9], b"reply-to:");
        assert!(
            got[9..] == payload[..],
            "the echo came back whole, in order"
        );
    }
    r.child.kill().unwrap();
    r.child.wait().unwrap();
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", r.port)).is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the relay outlived its workload"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_machine_agent_runs_the_relay_on_a_thread_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = dir.path().join("proxy.sock");
    echo_proxy(&proxy);
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, CA).unwrap();
    let bundle = dir.path().join("bundle.pem");
    let port = free_port().to_string();
    let args: Vec<&std::ffi::OsStr> = vec![
        "--egress-sock".as_ref(),
        proxy.as_os_str(),
        "--egress-port".as_ref(),
        port.as_ref(),
        "--egress-ca".as_ref(),
        ca.as_os_str(),
        "--egress-bundle".as_ref(),
        bundle.as_os_str(),
    ];
    let mut host = common::Host::start_with(dir, &args);
    // Bound and written before the hello: nothing the host starts can race them.
    assert!(std::fs::read_to_string(&bundle).unwrap().ends_with(CA));
    let mut s = connect(port.parse().unwrap());
    s.write_all(b"ping").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    assert_eq!(got, "reply-to:ping");
    // Its processes do not inherit the listener.
    let out = host.run(&["sh", "-c", "ls -l /proc/self/fd/ | grep -c socket || true"]);
    assert_eq!(out.stdout(), "0\n");
    host.child.kill().unwrap();
    host.child.wait().unwrap();
}

#[test]
fn a_proxy_that_is_gone_ends_the_connection_instead_of_hanging() {
    let mut r = start(&["sleep", "30"]);
    std::fs::remove_file(r.dir.path().join("proxy.sock")).unwrap();
    let mut s = connect(r.port);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    match s.read(&mut buf) {
        Ok(n) => assert_eq!(n, 0),
        Err(e) => assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "the connection hung"
        ),
    }
    r.child.kill().unwrap();
    r.child.wait().unwrap();
}
