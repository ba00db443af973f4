//! File requests, watches, port streams and metrics through the agent, run on the host.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};

use common::Host;
use serde_json::{json, Value};

fn path(host: &Host, rel: &str) -> String {
    host.dir.path().join(rel).to_str().unwrap().to_owned()
}

#[test]
fn write_file_creates_parents_and_read_returns_the_bytes() {
    let mut host = Host::start();
    let file = path(&host, "a/b/c.bin");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    host.ok(
        json!({"t": "write_file", "path": file, "mode": 0o600}),
        &data,
    );
    let (_, back) = host.ok(json!({"t": "read", "path": file}), b"");
    assert_eq!(back, data);
    let (stat, _) = host.ok(json!({"t": "stat", "path": file}), b"");
    let entry = &stat["entry"];
    assert_eq!(entry["type"], "file");
    assert_eq!(entry["size"], 200_000);
    assert_eq!(entry["mode"].as_u64().unwrap() & 0o7777, 0o600);
    assert_eq!(entry["name"], "c.bin");
    assert_eq!(entry["path"], file);
    assert_eq!(entry["owner"], "root");
    assert!(entry["mtime"].as_f64().unwrap() > 1.6e12);
    let (parent, _) = host.ok(json!({"t": "stat", "path": path(&host, "a/b")}), b"");
    assert_eq!(parent["entry"]["type"], "dir");
    // An existing file: truncated, and chmod'ed when a mode is given.
    host.ok(
        json!({"t": "write_file", "path": file, "mode": 0o640}),
        b"short",
    );
    let (_, back) = host.ok(json!({"t": "read", "path": file}), b"");
    assert_eq!(back, b"short");
    let (stat, _) = host.ok(json!({"t": "stat", "path": file}), b"");
    assert_eq!(stat["entry"]["mode"].as_u64().unwrap() & 0o7777, 0o640);
}

#[test]
fn relative_paths_are_under_the_agent_cwd() {
    let mut host = Host::start();
    let (answer, _) = host.ok(json!({"t": "stat", "path": "Cargo.toml"}), b"");
    let expected = std::env::current_dir().unwrap().join("Cargo.toml");
    assert_eq!(answer["entry"]["path"], expected.to_str().unwrap());
}

#[test]
fn read_errors_have_codes() {
    let mut host = Host::start();
    let file = path(&host, "f");
    std::fs::write(&file, "0123456789").unwrap();
    assert_eq!(
        host.err(json!({"t": "read", "path": path(&host, "missing")})),
        "ERR_NOT_FOUND"
    );
    assert_eq!(
        host.err(json!({"t": "read", "path": path(&host, "")})),
        "ERR_IS_A_DIRECTORY"
    );
    assert_eq!(
        host.err(json!({"t": "read", "path": file, "max": 9})),
        "ERR_TOO_LARGE"
    );
    let (_, exact) = host.ok(json!({"t": "read", "path": file, "max": 10}), b"");
    assert_eq!(exact, b"0123456789");
    assert_eq!(
        host.err(json!({"t": "list", "path": file})),
        "ERR_NOT_A_DIRECTORY"
    );
    assert_eq!(
        host.err(json!({"t": "write_file", "path": path(&host, "f/under-a-file")})),
        "ERR_NOT_A_DIRECTORY"
    );
    assert_eq!(
        host.err(json!({"t": "write_file", "path": path(&host, "")})),
        "ERR_IS_A_DIRECTORY"
    );
    assert_eq!(
        host.err(json!({"t": "stat", "path": path(&host, "missing")})),
        "ERR_NOT_FOUND"
    );
    assert_eq!(
        host.err(json!({"t": "remove", "path": path(&host, "missing")})),
        "ERR_NOT_FOUND"
    );
}

#[test]
fn a_fifo_without_a_writer_does_not_hang_the_file_worker() {
    let mut host = Host::start();
    let fifo = path(&host, "fifo");
    let c = std::ffi::CString::new(fifo.clone()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (_, data) = host.ok(json!({"t": "read", "path": fifo}), b"");
    assert!(data.is_empty());
    host.ok(json!({"t": "stat", "path": fifo}), b"");
}

fn names(entries: &Value) -> Vec<String> {
    let mut v: Vec<String> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn list_goes_depth_levels_down_and_not_through_symlinks() {
    let mut host = Host::start();
    let root = host.dir.path().join("tree");
    std::fs::create_dir_all(root.join("d/e/f")).unwrap();
    std::fs::write(root.join("top.txt"), "x").unwrap();
    std::fs::write(root.join("d/inner.txt"), "y").unwrap();
    std::os::unix::fs::symlink(root.join("d"), root.join("link")).unwrap();
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_owned();
    let (one, _) = host.ok(json!({"t": "list", "path": p(""), "depth": 1}), b"");
    assert_eq!(
        names(&one["entries"]),
        vec![p("d"), p("link"), p("top.txt")]
    );
    let (two, _) = host.ok(json!({"t": "list", "path": p(""), "depth": 2}), b"");
    assert_eq!(
        names(&two["entries"]),
        vec![p("d"), p("d/e"), p("d/inner.txt"), p("link"), p("top.txt")]
    );
    let link = two["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "link")
        .unwrap();
    assert_eq!(link["type"], "symlink");
    assert_eq!(link["symlinkTarget"], p("d"));
    let (stat, _) = host.ok(json!({"t": "stat", "path": p("link")}), b"");
    assert_eq!(stat["entry"]["type"], "symlink");
    assert_eq!(stat["entry"]["symlinkTarget"], p("d"));
}

#[test]
fn remove_takes_a_whole_tree_but_not_what_a_symlink_points_to() {
    let mut host = Host::start();
    let root = host.dir.path().to_path_buf();
    std::fs::create_dir_all(root.join("victim/sub")).unwrap();
    std::fs::create_dir_all(root.join("keep")).unwrap();
    std::fs::write(root.join("keep/precious"), "p").unwrap();
    std::os::unix::fs::symlink(root.join("keep"), root.join("victim/sub/link")).unwrap();
    host.ok(json!({"t": "remove", "path": path(&host, "victim")}), b"");
    assert!(!root.join("victim").exists());
    assert!(root.join("keep/precious").exists());
    host.ok(
        json!({"t": "remove", "path": path(&host, "keep/precious")}),
        b"",
    );
    assert!(!root.join("keep/precious").exists());
}

#[test]
fn rename_creates_the_target_parents_and_mkdir_says_whether_it_created() {
    let mut host = Host::start();
    std::fs::write(host.dir.path().join("from"), "moved").unwrap();
    host.ok(
        json!({"t": "rename", "from": path(&host, "from"), "to": path(&host, "x/y/to")}),
        b"",
    );
    assert_eq!(
        std::fs::read_to_string(host.dir.path().join("x/y/to")).unwrap(),
        "moved"
    );
    assert_eq!(
        host.err(json!({"t": "rename", "from": path(&host, "from"), "to": path(&host, "z")})),
        "ERR_NOT_FOUND"
    );
    let (first, _) = host.ok(json!({"t": "mkdir", "path": path(&host, "m/n/o")}), b"");
    assert_eq!(first["created"], true);
    let (again, _) = host.ok(json!({"t": "mkdir", "path": path(&host, "m/n/o")}), b"");
    assert_eq!(again["created"], false);
    assert_eq!(
        host.err(json!({"t": "mkdir", "path": path(&host, "x/y/to")})),
        "ERR_EXISTS"
    );
    assert_eq!(
        host.err(json!({"t": "mkdir", "path": path(&host, "x/y/to/sub")})),
        "ERR_NOT_A_DIRECTORY"
    );
}

/// The next event of watch `w`.
fn event(host: &mut Host, w: &Value) -> (String, String) {
    let (h, _) = host.wait_for(|h| h["t"] == "event" && h["watch"] == *w);
    (
        h["type"].as_str().unwrap().to_owned(),
        h["path"].as_str().unwrap().to_owned(),
    )
}

/// Events of watch `w` up to and including the first of type `kind` at `at`.
fn events_until(host: &mut Host, w: &Value, kind: &str, at: &str) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    loop {
        let e = event(host, w);
        let done = e.0 == kind && e.1 == at;
        seen.push(e);
        if done {
            return seen;
        }
    }
}

/// An agent watching a fresh directory `w` of its host's: the host, the directory, the watch id.
fn watching(recursive: bool) -> (Host, std::path::PathBuf, Value) {
    let mut host = Host::start();
    let root = host.dir.path().join("w");
    std::fs::create_dir(&root).unwrap();
    let path = root.join("").to_str().unwrap().to_owned();
    let (answer, _) = host.ok(
        json!({"t": "watch", "path": path, "recursive": recursive}),
        b"",
    );
    (host, root, answer["watch"].clone())
}

#[test]
fn watch_reports_create_write_rename_remove_and_stops_at_unwatch() {
    let (mut host, root, w) = watching(true);
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_owned();
    std::fs::write(root.join("a"), "1").unwrap();
    let seen = events_until(&mut host, &w, "write", &p("a"));
    assert_eq!(seen[0], ("create".to_owned(), p("a")));
    std::fs::rename(root.join("a"), root.join("b")).unwrap();
    assert_eq!(event(&mut host, &w), ("rename".to_owned(), p("a")));
    assert_eq!(event(&mut host, &w), ("create".to_owned(), p("b")));
    std::fs::remove_file(root.join("b")).unwrap();
    assert_eq!(event(&mut host, &w), ("remove".to_owned(), p("b")));
    // Recursive: a new subdirectory is watched as it appears.
    std::fs::create_dir(root.join("sub")).unwrap();
    assert_eq!(event(&mut host, &w), ("create".to_owned(), p("sub")));
    std::fs::write(root.join("sub/deep"), "2").unwrap();
    events_until(&mut host, &w, "create", &p("sub/deep"));
    host.ok(json!({"t": "unwatch", "watch": w}), b"");
    // What arrived before the unwatch's answer is fair; nothing may come after it.
    host.take_stashed(|h| h["t"] == "event" && h["watch"] == w);
    std::fs::write(root.join("after"), "3").unwrap();
    // A second watch sees a later change; by then an event of the first for "after" would
    // have arrived (one inotify queue, read in order).
    let (answer, _) = host.ok(json!({"t": "watch", "path": p("")}), b"");
    let w2 = answer["watch"].clone();
    std::fs::write(root.join("later"), "4").unwrap();
    events_until(&mut host, &w2, "create", &p("later"));
    let stray = host.take_stashed(|h| h["t"] == "event" && h["watch"] == w);
    assert!(stray.is_empty(), "events after unwatch: {stray:?}");
}

#[test]
fn watch_needs_an_existing_directory() {
    let mut host = Host::start();
    std::fs::write(host.dir.path().join("file"), "").unwrap();
    assert_eq!(
        host.err(json!({"t": "watch", "path": path(&host, "missing")})),
        "ERR_NOT_FOUND"
    );
    assert_eq!(
        host.err(json!({"t": "watch", "path": path(&host, "file")})),
        "ERR_NOT_A_DIRECTORY"
    );
}

/// A one-connection echo server on 127.0.0.1: echoes until EOF, then shuts its write half.
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        loop {
            match sock.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => sock.write_all(&buf[..n]).unwrap(),
            }
        }
        sock.shutdown(Shutdown::Write).unwrap();
    });
    port
}

#[test]
fn connect_relays_data_and_eof_both_ways() {
    let mut host = Host::start();
    let port = echo_server();
    let (answer, _) = host.ok(json!({"t": "connect", "port": port}), b"");
    let s = answer["stream"].clone();
    host.send(&json!({"t": "data", "stream": s}), b"ping");
    let mut back = Vec::new();
    while back.len() < 4 {
        back.extend(host.wait_for(|h| h["t"] == "data" && h["stream"] == s).1);
    }
    assert_eq!(back, b"ping");
    host.send(&json!({"t": "eof", "stream": s}), b"");
    host.wait_for(|h| h["t"] == "eof" && h["stream"] == s);
    host.wait_for(|h| h["t"] == "closed" && h["stream"] == s);
}

#[test]
fn connect_to_a_closed_port_is_refused() {
    let mut host = Host::start();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    assert_eq!(
        host.err(json!({"t": "connect", "port": port})),
        "ERR_CONNECTION_REFUSED"
    );
    assert_eq!(
        host.err(json!({"t": "connect", "port": 0})),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        host.err(json!({"t": "connect", "port": 70000})),
        "ERR_INVALID_ARGUMENT"
    );
}

#[test]
fn metrics_are_sane_numbers() {
    let mut host = Host::start();
    let (m, _) = host.ok(json!({"t": "metrics"}), b"");
    assert!(m["cpuUsageUsec"].is_u64(), "{m}");
    assert!(m["memoryBytes"].as_u64().unwrap() > 0, "{m}");
    assert!(m["pids"].as_u64().unwrap() >= 1, "{m}");
    assert!(
        m["memoryLimitBytes"].is_null() || m["memoryLimitBytes"].as_u64().unwrap() > 0,
        "{m}"
    );
    assert!(m["diskBytes"].is_null());
}

#[test]
fn an_oversized_payload_is_refused_and_the_connection_lives_on() {
    let mut host = Host::start();
    let big = vec![0u8; (64 << 20) + 1];
    let code = match host.call(json!({"t": "write_file", "path": path(&host, "big")}), &big) {
        Err((code, _)) => code,
        Ok(_) => panic!("a 64 MiB + 1 payload was accepted"),
    };
    assert_eq!(code, "ERR_TOO_LARGE");
    assert!(!host.dir.path().join("big").exists());
    assert_eq!(host.run(&["true"]).code, 0);
}

#[test]
fn an_answer_over_the_header_limit_is_too_large_and_a_smaller_one_works() {
    let mut host = Host::start();
    let root = host.dir.path().join("many");
    std::fs::create_dir(&root).unwrap();
    // ~260 bytes of JSON per entry: 6000 entries are well over 1 MiB.
    for i in 0..6000 {
        std::fs::write(root.join(format!("{i:0>60}")), "").unwrap();
    }
    std::fs::create_dir(root.join("sub")).unwrap();
    let code = host.err(json!({"t": "list", "path": root, "depth": 1}));
    assert_eq!(code, "ERR_TOO_LARGE");
    let (small, _) = host.ok(
        json!({"t": "list", "path": root.join("sub"), "depth": 1}),
        b"",
    );
    assert_eq!(small["entries"], json!([]));
}

#[test]
fn each_write_to_a_file_is_one_event_and_a_later_one_is_another() {
    let (mut host, root, w) = watching(false);
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_owned();
    std::fs::write(root.join("f"), "1").unwrap();
    events_until(&mut host, &w, "write", &p("f"));
    // The modify and the close of the first write may come in two reads: still one event. A
    // later write is reported again (its truncation and its data may show as two), and nothing
    // else comes before the marker.
    std::thread::sleep(std::time::Duration::from_millis(50));
    std::fs::write(root.join("f"), "2").unwrap();
    std::fs::write(root.join("marker"), "").unwrap();
    let mut seen = events_until(&mut host, &w, "create", &p("marker"));
    seen.pop();
    assert!(!seen.is_empty(), "the second write was not reported");
    assert!(
        seen.iter().all(|e| *e == ("write".to_owned(), p("f"))),
        "{seen:?}"
    );
}
