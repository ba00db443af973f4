//! What a workload can and cannot see or do inside a box.

mod common;

use common::*;

fn in_box(env: &Env, flags: &[&str], cmd: &[&str]) -> std::process::Output {
    let name = unique("iso");
    let mut args = vec!["box", name.as_str(), "--image", IMAGE, "--no-uid-range"];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(cmd);
    env.run(&args)
}

fn interfaces(proc_net_dev: &str) -> Vec<String> {
    proc_net_dev
        .lines()
        .skip(2)
        .filter_map(|l| Some(l.split(':').next()?.trim().to_string()))
        .collect()
}

#[test]
fn network_is_loopback_only_unless_net() {
    let env = Env::new();
    let out = in_box(&env, &[], &["cat", "/proc/net/dev"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(interfaces(&text(&out.stdout)), ["lo"]);

    // --egress-allow keeps the isolated namespace (the stand-in runs no proxy) and kern's proxy env.
    let out = in_box(
        &env,
        &["--egress-allow", "example.com,pypi.org"],
        &["sh", "-c", "cat /proc/net/dev; echo PROXY=$HTTPS_PROXY"],
    );
    assert!(out.status.success());
    assert_eq!(
        interfaces(&text(&out.stdout).replace("PROXY=http://127.0.0.1:3128\n", "")),
        ["lo"]
    );
    assert!(text(&out.stdout).contains("PROXY=http://127.0.0.1:3128\n"));
    assert!(text(&out.stderr).starts_with("kern: note: --egress-allow gives the box outbound"));

    let host = interfaces(&std::fs::read_to_string("/proc/net/dev").unwrap());
    let out = in_box(&env, &["--net"], &["cat", "/proc/net/dev"]);
    assert_eq!(
        interfaces(&text(&out.stdout)),
        host,
        "--net shares the host's interfaces"
    );
}

#[test]
fn host_files_outside_the_binds_are_absent() {
    let env = Env::new();
    let secret = tempfile::Builder::new()
        .prefix("kern-standin-host-")
        .tempfile_in("/tmp")
        .unwrap();
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(shared.path().join("in.txt"), "from-host").unwrap();
    let vol = format!("{}:/data", shared.path().display());
    let ro = format!("{}:/ro:ro", shared.path().display());
    let script = format!(
        "test -e {} && echo LEAK; ls -A /root; ls -A /tmp; cat /data/in.txt; echo; \
         echo boxed > /data/out.txt; echo x > /ro/no.txt 2>/dev/null || echo RO-REFUSED; \
         test -e /home || echo NO-HOME; cat /proc/1/cmdline | tr '\\0' ' '",
        secret.path().display()
    );
    let out = in_box(&env, &["-v", &vol, "-v", &ro], &["sh", "-c", &script]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "from-host\nRO-REFUSED\nNO-HOME\nsh -c ".to_string() + &script + " "
    );
    assert_eq!(
        std::fs::read_to_string(shared.path().join("out.txt")).unwrap(),
        "boxed\n"
    );
    assert!(!shared.path().join("no.txt").exists());
}

#[test]
fn environment_is_rebuilt_like_kerns() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("box.env");
    std::fs::write(&file, "# comment\n\nFOO = bar baz \nQUOTED=\"kept\"\n").unwrap();
    let name = unique("env");
    let mut cmd = env.cmd(&[
        "box",
        &name,
        "--image",
        IMAGE,
        "--env-file",
        file.to_str().unwrap(),
        "--",
        "env",
    ]);
    cmd.env("LEAKY_HOST_SECRET", "nope");
    let out = output(cmd.spawn().unwrap());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut got: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    got.sort();
    let mut want = [
        "FOO= bar baz".to_string(),
        format!("HOSTNAME={name}"),
        "HOME=/root".into(),
        "LANG=C.UTF-8".into(),
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        "QUOTED=\"kept\"".into(),
        "TERM=xterm".into(),
    ];
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn read_only_root_and_workdir() {
    let env = Env::new();
    let out = in_box(
        &env,
        &["--ro", "--workdir", "/tmp"],
        &[
            "sh",
            "-c",
            "pwd; touch /x 2>/dev/null || echo ROOT-RO; touch t 2>/dev/null || echo TMP-RO",
        ],
    );
    assert_eq!(text(&out.stdout), "/tmp\nROOT-RO\nTMP-RO\n");
    // A missing absolute workdir is created (writable root), as kern and Docker do.
    let out = in_box(&env, &["--workdir", "/app/sub"], &["pwd"]);
    assert_eq!(text(&out.stdout), "/app/sub\n");
    // ... but a failed chdir is an in-box setup failure: 125.
    let out = in_box(&env, &["--workdir", "relative"], &["pwd"]);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        text(&out.stderr),
        "kern: sandbox setup failed: chdir(workdir) failed: No such file or directory (os error 2)\n"
    );
}

#[test]
fn capabilities_follow_kerns_drops() {
    let env = Env::new();
    let caps = |flags: &[&str]| {
        let out = in_box(&env, flags, &["grep", "^Cap", "/proc/self/status"]);
        text(&out.stdout)
    };
    let default = caps(&[]);
    assert!(default.contains("CapInh:\t0000000000000000\n"));
    assert!(default.contains("CapAmb:\t0000000000000000\n"));
    let bnd = |s: &str| {
        let hex = s
            .lines()
            .find_map(|l| l.strip_prefix("CapBnd:\t"))
            .unwrap()
            .to_string();
        u64::from_str_radix(&hex, 16).unwrap()
    };
    let mask = bnd(&default);
    for dropped in [12u32, 16, 17, 19, 21, 22, 39] {
        assert_eq!(
            mask & (1 << dropped),
            0,
            "cap {dropped} must be dropped by default"
        );
    }
    assert_ne!(mask & (1 << 13), 0, "NET_RAW is kept by default");
    assert_eq!(bnd(&caps(&["--cap-drop", "NET_RAW"])) & (1 << 13), 0);
    assert_eq!(bnd(&caps(&["--cap-drop", "ALL"])), 0);
    let out = in_box(
        &env,
        &["--security-profile", "untrusted"],
        &["sh", "-c", "touch /x || true"],
    );
    assert!(text(&out.stderr).starts_with(
        "kern: security-profile=untrusted: seccomp=allowlist, cap-drop=ALL, read-only=on \
         (Landlock and --require-limits untouched)\n"
    ));
}

/// Syscall numbers for the ctypes probes.
#[cfg(target_arch = "x86_64")]
const SYS: [(&str, i64); 5] = [
    ("mount", 165),
    ("unshare", 272),
    ("ptrace", 101),
    ("bpf", 321),
    ("keyctl", 250),
];
#[cfg(target_arch = "aarch64")]
const SYS: [(&str, i64); 5] = [
    ("mount", 40),
    ("unshare", 97),
    ("ptrace", 117),
    ("bpf", 280),
    ("keyctl", 219),
];

#[test]
fn seccomp_kills_escape_syscalls_with_sigsys() {
    let env = Env::new();
    for (name, nr) in SYS {
        // unshare(CLONE_NEWUSER): a flag a plain namespace-less kernel would also accept.
        let arg = if name == "unshare" { "0x10000000" } else { "0" };
        let code = format!(
            "import ctypes; r = ctypes.CDLL(None, use_errno=True).syscall({nr}, {arg}, 0, 0, 0, 0); \
             print('returned', r, ctypes.get_errno())"
        );
        let out = in_box(&env, &[], &["python3", "-c", &code]);
        if name == "keyctl" {
            // kern denies the keyring with ENOSYS (38) rather than a kill; so does the stand-in.
            assert_eq!(out.status.code(), Some(0), "{name}");
            assert_eq!(text(&out.stdout), "returned -1 38\n");
        } else {
            assert_eq!(
                out.status.code(),
                Some(159),
                "{name}: {}",
                text(&out.stdout)
            );
            assert!(out.stdout.is_empty(), "{name} returned instead of dying");
        }
    }
    // The util-linux tool goes through unshare(2) too.
    let out = in_box(&env, &[], &["unshare", "-U", "true"]);
    assert_eq!(out.status.code(), Some(159));
}

/// What the binding's egress relay relies on, as on kern: in a default (isolated) `--ro` box the
/// loopback is up (a listener and a connect to it work), a host unix socket bound in read-only by
/// file is connectable, `/dev/shm` is writable, and env files apply in order.
#[test]
fn loopback_a_bound_socket_and_dev_shm_work_in_a_read_only_box() {
    use std::io::Write;
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("proxy.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let _ = s.write_all(b"from-host");
        }
    });
    let (e1, e2) = (dir.path().join("e1"), dir.path().join("e2"));
    std::fs::write(&e1, "A=1\nB=1\n").unwrap();
    std::fs::write(&e2, "B=2\n").unwrap();
    let bind = format!("{}:/.kern-sandbox/egress.sock:ro", sock.display());
    let script = "import os, socket\n\
        l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n\
        c = socket.create_connection(l.getsockname(), timeout=5); a, _ = l.accept()\n\
        c.sendall(b'lo'); print(a.recv(2).decode())\n\
        u = socket.socket(socket.AF_UNIX); u.connect('/.kern-sandbox/egress.sock')\n\
        print(u.recv(64).decode())\n\
        open('/dev/shm/x', 'w').write('x'); print('shm')\n\
        print(os.environ['A'] + os.environ['B'])";
    let out = in_box(
        &env,
        &[
            "--ro",
            "-v",
            &bind,
            "--env-file",
            e1.to_str().unwrap(),
            "--env-file",
            e2.to_str().unwrap(),
        ],
        &["python3", "-c", script],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "lo\nfrom-host\nshm\n12\n");
}
