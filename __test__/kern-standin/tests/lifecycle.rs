//! Exit codes, `--timeout`, `stop`, `ps`, and signals to the supervisor - and that nothing survives.

mod common;

use std::process::Child;
use std::time::{Duration, Instant};

use common::*;

fn spawn_box(env: &Env, name: &str, cmd: &[&str]) -> Child {
    let mut args = vec!["box", name, "--image", IMAGE, "--no-uid-range", "--"];
    args.extend_from_slice(cmd);
    env.cmd(&args).spawn().expect("spawn stand-in")
}

/// Wait until the box's workload processes (matched by `marker`) are up.
fn wait_running(marker: &str, count: usize) {
    assert!(
        eventually(Duration::from_secs(20), || processes_with(marker).len()
            >= count),
        "box with {marker:?} did not start"
    );
}

#[test]
fn exit_status_is_the_workloads() {
    let env = Env::new();
    let code = |cmd: &[&str]| {
        let mut args = vec!["box", "ex", "--image", IMAGE, "--no-uid-range", "--"];
        args.extend_from_slice(cmd);
        env.run(&args).status.code()
    };
    assert_eq!(code(&["sh", "-c", "exit 3"]), Some(3));
    assert_eq!(code(&["sh", "-c", "exit 255"]), Some(255));
    // PID 1 ignores its own default-disposition signals, exactly as under kern.
    assert_eq!(code(&["sh", "-c", "kill -9 $$; exit 4"]), Some(4));
    // Death by signal N is 128+N: see the seccomp (159), timeout and stop (137) tests.
    let out = env.run(&[
        "box",
        "ex",
        "--image",
        IMAGE,
        "--no-uid-range",
        "--",
        "nosuchcmd",
    ]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(
        text(&out.stderr),
        "kern: cannot start 'nosuchcmd' in box: No such file or directory (os error 2)\n\
         hint: the command must exist inside the box (try a full path like /bin/sh) and, if \
         dynamically linked, its libraries/loader must be present in the rootfs\n"
    );
    assert_eq!(code(&["/etc/passwd"]), Some(126));
    // The default command is the image's (python3, which exits at EOF on stdin).
    assert_eq!(
        env.run(&["box", "ex", "--image", IMAGE]).status.code(),
        Some(0)
    );
}

#[test]
fn timeout_terms_then_kills_after_two_seconds() {
    let env = Env::new();
    let timed = |cmd: &[&str]| {
        let mut args = vec![
            "box",
            "to",
            "--image",
            IMAGE,
            "--no-uid-range",
            "--timeout",
            "2",
            "--",
        ];
        args.extend_from_slice(cmd);
        let t = Instant::now();
        let out = env.run(&args);
        (out.status.code(), t.elapsed(), text(&out.stdout))
    };
    // PID 1 without a handler ignores the SIGTERM; the SIGKILL lands 2 s later.
    let m1 = marker_sleep();
    let (code, took, _) = timed(&["sleep", &m1]);
    assert_eq!(code, Some(137));
    assert!(
        took >= Duration::from_millis(3900) && took < Duration::from_secs(20),
        "{took:?}"
    );
    assert_no_survivor(&m1);

    // A shell that ignores TERM (and has a child) is killed whole, after the grace.
    let m2 = marker_sleep();
    let script = format!("trap '' TERM; sleep {m2} & sleep {m2}; echo unreachable");
    let (code, took, stdout) = timed(&["sh", "-c", &script]);
    assert_eq!(code, Some(137));
    assert!(took >= Duration::from_millis(3900), "{took:?}");
    assert_eq!(stdout, "");
    assert_no_survivor(&m2);

    // A handler that exits on TERM ends the box at N s with its own code.
    let m3 = marker_sleep();
    let script = format!("trap 'echo got TERM; exit 42' TERM; sleep {m3} & wait");
    let (code, took, stdout) = timed(&["sh", "-c", &script]);
    assert_eq!((code, stdout.as_str()), (Some(42), "got TERM\n"));
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(3900),
        "{took:?}"
    );
    assert_no_survivor(&m3);
}

#[test]
fn stop_ends_the_whole_tree_and_the_waiter() {
    let env = Env::new();
    let name = unique("stop");
    let (a, b) = (marker_sleep(), marker_sleep());
    // Background children of PID 1, one of them in its own session: all must go.
    let script = format!("sleep {a} & setsid sleep {b} & wait");
    let mut child = spawn_box(&env, &name, &["sh", "-c", &script]);
    // Each marker shows up in the supervisor's argv, PID 1's and its own sleep's.
    wait_running(&a, 3);
    wait_running(&b, 3);

    let ps = env.run(&["ps", "--json"]);
    let want = format!(
        "[{{\"name\":\"{name}\",\"pid\":{},\"pod\":\"\",\"rootfs\":\"/\",\"command\":\"sh -c {script}\",\"started\":",
        child.id()
    );
    assert!(text(&ps.stdout).starts_with(&want), "{}", text(&ps.stdout));

    // The name is taken while the box runs.
    let clash = env.run(&["box", &name, "--image", IMAGE, "--", "true"]);
    assert_eq!(clash.status.code(), Some(1));
    assert_eq!(
        text(&clash.stderr),
        format!(
            "error: a box named '{name}' is already running\nhint: run `kern ps` to see running \
             boxes; `kern stop <name>` frees the name\n"
        )
    );

    let stop = env.run(&["stop", &name]);
    assert_eq!(text(&stop.stderr), "");
    assert_eq!(
        text(&stop.stdout),
        format!("stopped '{name}' (pid {})\n", child.id())
    );
    assert!(stop.status.success());
    let status = wait_deadline(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(137));
    assert_no_survivor(&a);
    assert_no_survivor(&b);
    assert_eq!(text(&env.run(&["ps", "--json"]).stdout), "[]\n");
    let again = env.run(&["stop", &name]);
    assert_eq!(again.status.code(), Some(1));
}

#[test]
fn stop_gives_a_handling_workload_its_exit() {
    let env = Env::new();
    let name = unique("grace");
    let m = marker_sleep();
    let script = format!("trap 'echo trapped; exit 7' TERM; sleep {m} & wait");
    let mut child = spawn_box(&env, &name, &["sh", "-c", &script]);
    wait_running(&m, 3);
    let stop = env.run(&["stop", &name]);
    assert!(stop.status.success(), "{}", text(&stop.stderr));
    assert_eq!(
        wait_deadline(&mut child, Duration::from_secs(20)).code(),
        Some(7)
    );
    assert_no_survivor(&m);
}

#[test]
fn supervisor_signals_follow_kern() {
    let env = Env::new();
    // First SIGTERM is forwarded to PID 1 (ignored by `sleep` as init), the second exits 143.
    let m = marker_sleep();
    let mut child = spawn_box(&env, &unique("sig"), &["sleep", &m]);
    wait_running(&m, 2); // the supervisor's argv carries it too
                         // SAFETY: plain syscall on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "one SIGTERM must not end the box"
    );
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(
        wait_deadline(&mut child, Duration::from_secs(20)).code(),
        Some(143)
    );
    assert_no_survivor(&m);

    // SIGKILL of the supervisor takes the box with it.
    let m = marker_sleep();
    let mut child = spawn_box(
        &env,
        &unique("sig"),
        &["sh", "-c", &format!("sleep {m} & sleep {m}")],
    );
    wait_running(&m, 3);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_no_survivor(&m);
    assert_eq!(text(&env.run(&["ps", "--json"]).stdout), "[]\n");
}

#[test]
fn a_supervisor_killed_during_start_up_takes_the_box_along() {
    // bwrap arms the box's PDEATHSIG only after its mount set-up, without checking that its own
    // parent is still there: a supervisor SIGKILLed inside that window must still leave no
    // workload behind. The kills sweep the start-up, a quarter of a millisecond apart.
    let env = Env::new();
    let mut boxes = Vec::new();
    for step in 0..120u64 {
        let (m, name) = (marker_sleep(), unique("su"));
        let mut child = spawn_box(&env, &name, &["sleep", &m]);
        std::thread::sleep(Duration::from_micros(250 * step));
        child.kill().unwrap();
        child.wait().unwrap();
        boxes.push((m, name));
    }
    let alive = || -> Vec<&str> {
        let markers = boxes.iter().map(|(m, _)| m.as_str());
        markers.filter(|m| !processes_with(m).is_empty()).collect()
    };
    eventually(Duration::from_secs(10), || alive().is_empty());
    let workloads = alive();
    // A kill before bwrap let its box child go on leaves that child waiting for a go-ahead that
    // never comes (bwrap 0.8): no workload, but a process all the same; end ours, and any
    // workload that survived, before the verdict.
    for (m, name) in &boxes {
        for pid in processes_with_arg(name)
            .into_iter()
            .chain(processes_with(m))
        {
            // SAFETY: plain syscall on pids this test's own boxes left behind.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    assert!(
        workloads.is_empty(),
        "workloads outlived their supervisor: {workloads:?}"
    );
}

/// Pids of processes with `arg` as one whole argument (box names are prefixes of one another).
fn processes_with_arg(arg: &str) -> Vec<i32> {
    processes_with(arg)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
        })
        .collect()
}
