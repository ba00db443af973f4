//! Processes through the agent, run on the host (no box): spawn, output order, exit codes,
//! stdin, signals, ptys, ps, and what happens when the host goes away.

mod common;

use common::{wait_gone, Host};
use serde_json::json;

#[test]
fn hello_names_the_protocol_version_pid_and_cwd() {
    let host = Host::start();
    assert_eq!(host.hello["t"], "hello");
    assert_eq!(host.hello["version"], 1);
    assert_eq!(host.hello["pid"], host.child.id());
    assert_eq!(
        host.hello["cwd"],
        std::env::current_dir().unwrap().to_str().unwrap()
    );
}

#[test]
fn echo_output_comes_before_its_exit_with_code_zero() {
    let mut host = Host::start();
    let out = host.run(&["echo", "hello"]);
    assert_eq!(out.stdout(), "hello\n");
    assert_eq!(out.code, 0);
    assert!(out.signal.is_null());
}

#[test]
fn stdout_and_stderr_are_separate_and_large_output_arrives_whole() {
    let mut host = Host::start();
    let out = host.run(&[
        "sh",
        "-c",
        "echo out; echo err >&2; head -c 300000 /dev/zero",
    ]);
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.stdout.len(), 4 + 300_000);
    assert!(out.stdout.starts_with(b"out\n"));
}

#[test]
fn exit_codes_and_death_by_signal() {
    let mut host = Host::start();
    let out = host.run(&["sh", "-c", "exit 3"]);
    assert_eq!((out.code, out.signal.clone()), (3, json!(null)));
    let out = host.run(&["sh", "-c", "kill -TERM $$"]);
    assert_eq!((out.code, out.signal), (143, json!(15)));
}

#[test]
fn env_is_added_and_cwd_is_honoured() {
    let mut host = Host::start();
    let dir = host.dir.path().to_str().unwrap().to_owned();
    let pid = host.spawn(
        json!({"argv": ["sh", "-c", "echo $FOO; pwd"], "env": {"FOO": "bar"}, "cwd": dir}),
        b"",
    );
    let out = host.collect(pid);
    assert_eq!(out.stdout(), format!("bar\n{dir}\n"));
}

#[test]
fn stdin_data_is_written_then_closed() {
    let mut host = Host::start();
    let pid = host.spawn(json!({"argv": ["cat"], "stdin": "data"}), b"some input");
    assert_eq!(host.collect(pid).stdout(), "some input");
}

#[test]
fn open_stdin_takes_writes_until_close_stdin() {
    let mut host = Host::start();
    // It outlives its stdin, so the writes after close_stdin meet a running process.
    let pid = host.spawn(
        json!({"argv": ["sh", "-c", "cat; echo done; sleep 1000"], "stdin": "open"}),
        b"",
    );
    host.ok(json!({"t": "write", "pid": pid}), b"line one\n");
    host.ok(json!({"t": "write", "pid": pid}), b"line two\n");
    host.ok(json!({"t": "close_stdin", "pid": pid}), b"");
    host.ok(json!({"t": "close_stdin", "pid": pid}), b"");
    assert_eq!(
        host.err(json!({"t": "write", "pid": pid})),
        "ERR_STDIN_CLOSED"
    );
    let mut seen = Vec::new();
    while !seen.ends_with(b"done\n") {
        seen.extend(
            host.wait_for(|h| h["t"] == "out" && h["pid"] == pid && h["fd"] == 1)
                .1,
        );
    }
    assert_eq!(String::from_utf8_lossy(&seen), "line one\nline two\ndone\n");
    host.ok(json!({"t": "signal", "pid": pid, "signal": 9}), b"");
    assert_eq!(host.collect(pid).code, 137);
    assert_eq!(
        host.err(json!({"t": "write", "pid": pid})),
        "ERR_PROCESS_EXITED"
    );
    // Closing the input of a process that has exited is fine: its input is over either way.
    host.ok(json!({"t": "close_stdin", "pid": pid}), b"");
}

#[test]
fn stdin_none_refuses_writes() {
    let mut host = Host::start();
    let pid = host.spawn(json!({"argv": ["sleep", "1000"]}), b"");
    assert_eq!(
        host.err(json!({"t": "write", "pid": pid})),
        "ERR_STDIN_CLOSED"
    );
    host.ok(json!({"t": "signal", "pid": pid, "signal": 9}), b"");
    assert_eq!(host.collect(pid).code, 137);
}

#[test]
fn a_background_grandchild_holding_the_pipes_does_not_hold_the_exit() {
    let mut host = Host::start();
    // `sleep 30` keeps stdout open for 30 s, the same as the test's patience: the exit frame must
    // come from the drain window, long before.
    let out = host.run(&["sh", "-c", "sleep 30 & echo hi"]);
    assert_eq!(out.stdout(), "hi\n");
    assert_eq!(out.code, 0);
}

#[test]
fn a_signal_reaches_the_whole_process_group() {
    let mut host = Host::start();
    let pid = host.spawn(
        json!({"argv": ["sh", "-c", "sleep 1000 & echo $!; wait"]}),
        b"",
    );
    let (_, first) = host.wait_for(|h| h["t"] == "out" && h["pid"] == pid);
    let grandchild: i64 = String::from_utf8_lossy(&first).trim().parse().unwrap();
    let (answer, _) = host.ok(json!({"t": "signal", "pid": pid, "signal": 9}), b"");
    assert_eq!(answer["delivered"], true);
    let out = host.collect(pid);
    assert_eq!((out.code, out.signal), (137, json!(9)));
    assert!(
        wait_gone(grandchild),
        "the child of the child survived the group kill"
    );
    let (answer, _) = host.ok(json!({"t": "signal", "pid": pid, "signal": 9}), b"");
    assert_eq!(answer["delivered"], false);
    assert_eq!(
        host.err(json!({"t": "signal", "pid": 999_999_999, "signal": 9})),
        "ERR_PROCESS_NOT_FOUND"
    );
    assert_eq!(
        host.err(json!({"t": "write", "pid": 999_999_999})),
        "ERR_PROCESS_NOT_FOUND"
    );
}

#[test]
fn a_pty_process_gets_a_terminal_its_size_and_term() {
    let mut host = Host::start();
    let pid = host.spawn(
        json!({"argv": ["sh", "-c", "tty; echo $TERM"], "pty": {"cols": 80, "rows": 24}}),
        b"",
    );
    let out = host.collect(pid);
    let text = out.stdout();
    assert!(text.starts_with("/dev/pts/"), "tty printed {text:?}");
    assert!(text.contains("xterm-256color"), "{text:?}");
    assert!(out.stderr.is_empty());
}

#[test]
fn resize_changes_what_stty_size_sees() {
    let mut host = Host::start();
    let req = json!({"argv": ["sh", "-c", "stty size; read x; stty size"], "stdin": "open", "pty": {"cols": 80, "rows": 24}});
    let pid = host.spawn(req, b"");
    let mut before = Vec::new();
    while !String::from_utf8_lossy(&before).contains("24 80") {
        before.extend(host.wait_for(|h| h["t"] == "out" && h["pid"] == pid).1);
    }
    host.ok(
        json!({"t": "resize", "pid": pid, "cols": 100, "rows": 30}),
        b"",
    );
    host.ok(json!({"t": "write", "pid": pid}), b"\n");
    let text = host.collect(pid).stdout();
    assert!(text.contains("30 100"), "{text:?}");
    assert_eq!(
        host.err(json!({"t": "resize", "pid": pid, "cols": 0, "rows": 30})),
        "ERR_INVALID_ARGUMENT"
    );
}

#[test]
fn close_stdin_on_a_pty_ends_input_with_eot() {
    let mut host = Host::start();
    let pid = host.spawn(
        json!({"argv": ["cat"], "stdin": "open", "pty": {"cols": 80, "rows": 24}}),
        b"",
    );
    host.ok(json!({"t": "write", "pid": pid}), b"typed\n");
    host.ok(json!({"t": "close_stdin", "pid": pid}), b"");
    let out = host.collect(pid);
    assert_eq!(out.code, 0);
    assert!(out.stdout().contains("typed"));
}

#[test]
fn resize_needs_a_pty() {
    let mut host = Host::start();
    let pid = host.spawn(json!({"argv": ["sleep", "1000"]}), b"");
    assert_eq!(
        host.err(json!({"t": "resize", "pid": pid, "cols": 10, "rows": 10})),
        "ERR_INVALID_ARGUMENT"
    );
    host.ok(json!({"t": "signal", "pid": pid, "signal": 9}), b"");
}

#[test]
fn ps_lists_running_processes_only() {
    let mut host = Host::start();
    let pid = host.spawn(json!({"argv": ["sleep", "1000"]}), b"");
    let (answer, _) = host.ok(json!({"t": "ps"}), b"");
    let procs = answer["procs"].as_array().unwrap();
    let me = procs
        .iter()
        .find(|p| p["pid"] == pid)
        .expect("the sleep is listed");
    assert_eq!(me["argv"], json!(["sleep", "1000"]));
    assert_eq!(me["pty"], false);
    assert!(me["cwd"].as_str().unwrap().starts_with('/'));
    host.ok(json!({"t": "signal", "pid": pid, "signal": 15}), b"");
    host.collect(pid);
    let (answer, _) = host.ok(json!({"t": "ps"}), b"");
    assert!(!answer["procs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["pid"] == pid));
}

#[test]
fn spawn_failures_have_codes() {
    let mut host = Host::start();
    let missing = host.call(
        json!({"t": "spawn", "argv": ["true"], "cwd": "/no/such/dir"}),
        b"",
    );
    let (code, message) = missing.unwrap_err();
    assert_eq!(code, "ERR_NOT_FOUND");
    assert!(message.contains("/no/such/dir"), "{message}");
    assert_eq!(
        host.err(json!({"t": "spawn", "argv": ["no-such-program-here"]})),
        "ERR_NOT_FOUND"
    );
    let script = host.dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    assert_eq!(
        host.err(json!({"t": "spawn", "argv": [script]})),
        "ERR_PERMISSION_DENIED"
    );
    assert_eq!(
        host.err(json!({"t": "spawn", "argv": []})),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        host.err(json!({"t": "spawn", "argv": ["true"], "user": "no-such-user"})),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        host.err(json!({"t": "no_such_request"})),
        "ERR_INVALID_ARGUMENT"
    );
    // The agent is still fine.
    assert_eq!(host.run(&["true"]).code, 0);
}

#[test]
fn user_sets_the_login_variables() {
    let mut host = Host::start();
    let pid = host.spawn(
        json!({"argv": ["sh", "-c", "echo $USER $LOGNAME $HOME"], "user": "0"}),
        b"",
    );
    assert_eq!(host.collect(pid).stdout(), "root root /root\n");
}

#[test]
fn sixty_four_processes_at_once_all_run_and_are_reaped() {
    let mut host = Host::start();
    let ids: Vec<u32> = (0..64)
        .map(|i| {
            host.request(
                json!({"t": "spawn", "argv": ["sh", "-c", format!("echo {i}")]}),
                b"",
            )
        })
        .collect();
    let pids: Vec<i64> = ids
        .into_iter()
        .map(|id| host.answer(id).unwrap().0["pid"].as_i64().unwrap())
        .collect();
    for (i, pid) in pids.into_iter().enumerate() {
        let out = host.collect(pid);
        assert_eq!((out.stdout(), out.code), (format!("{i}\n"), 0));
    }
}

#[test]
fn closing_the_socket_kills_the_processes_and_ends_the_agent() {
    let mut host = Host::start();
    let pid = host.spawn(json!({"argv": ["sleep", "1000"]}), b"");
    host.stream.shutdown(std::net::Shutdown::Both).unwrap();
    let status = host.wait_exit();
    assert!(status.success(), "{status:?}");
    assert!(wait_gone(pid), "sleep {pid} outlived the connection");
}

#[test]
fn shutdown_answers_then_kills_everything_and_exits() {
    let mut host = Host::start();
    let pid = host.spawn(json!({"argv": ["sleep", "1000"]}), b"");
    host.ok(json!({"t": "shutdown"}), b"");
    let status = host.wait_exit();
    assert!(status.success(), "{status:?}");
    assert!(wait_gone(pid), "sleep {pid} outlived shutdown");
}

#[test]
fn sigterm_to_the_agent_is_survived() {
    let mut host = Host::start();
    // SAFETY: kill has no memory effects; the pid is our own child.
    unsafe { libc::kill(host.child.id() as i32, libc::SIGTERM) };
    // SAFETY: as above.
    unsafe { libc::kill(host.child.id() as i32, libc::SIGHUP) };
    assert_eq!(host.run(&["echo", "still here"]).stdout(), "still here\n");
}

#[test]
fn children_start_with_default_signal_state_and_no_agent_fds() {
    let mut host = Host::start();
    // The agent blocks SIGCHLD and handles SIGTERM/SIGINT/SIGHUP; none of that may leak into a
    // child (a blocked or ignored signal survives exec), nor may the agent's own fds.
    let out = host.run(&[
        "sh",
        "-c",
        "grep -E '^Sig(Blk|Ign)' /proc/self/status; ls /proc/self/fd",
    ]);
    let text = out.stdout();
    let mask = |name: &str| {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk:"), 0, "{text}");
    // Signals 1-31. Above them libc reserves a few for itself (no sigaction can reset them), and
    // the test harness that starts the agent leaves them ignored.
    assert_eq!(mask("SigIgn:") & 0x7fff_ffff, 0, "{text}");
    let fds: Vec<&str> = text.lines().skip(2).collect();
    // 0, 1, 2 and the fd ls itself opens for /proc/self/fd.
    assert_eq!(fds, vec!["0", "1", "2", "3"], "{text}");
}

#[test]
fn ps_shortens_huge_arguments() {
    let mut host = Host::start();
    let script = format!("sleep 1000 #{}", "x".repeat(100_000));
    let pid = host.spawn(json!({"argv": ["sh", "-c", script]}), b"");
    let (answer, _) = host.ok(json!({"t": "ps"}), b"");
    let me = answer["procs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap()
        .clone();
    let listed = me["argv"][2].as_str().unwrap();
    assert_eq!(listed.len(), 4096);
    assert!(script.starts_with(listed));
    host.ok(json!({"t": "signal", "pid": pid, "signal": 9}), b"");
    host.collect(pid);
}
