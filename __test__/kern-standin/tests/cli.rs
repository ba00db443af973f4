//! The CLI contract: kern's rejections (exit 1, `error:` + `hint:`), `--version`, and the argv log.

mod common;

use common::*;

const USAGE_HINT: &str = "hint: run `kern --help` for full usage\n";

fn rejected(env: &Env, args: &[&str], stderr: &str) {
    let out = env.run(args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?}: {}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stderr), stderr, "{args:?}");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
}

#[test]
fn rejects_what_kern_rejects_with_kerns_words() {
    let env = Env::new();
    let usage = |m: &str| format!("error: usage: kern {m}\n{USAGE_HINT}");
    rejected(
        &env,
        &["box", "t1", "--bogus", "--image", IMAGE, "--", "true"],
        &usage("box: unknown flag (see --help)"),
    );
    // No `--flag=value` form in kern's parser.
    rejected(
        &env,
        &["box", "t1", "--image", IMAGE, "--memory=512m", "--", "true"],
        &usage("box: unknown flag (see --help)"),
    );
    rejected(
        &env,
        &["box", "t1", "--image", IMAGE, "echo", "hi"],
        &usage("box: unexpected argument (did you forget `--` before the command?)"),
    );
    rejected(
        &env,
        &[
            "box", "t1", "--image", IMAGE, "--memory", "1.5g", "--", "true",
        ],
        &usage("--memory <size> (e.g. 512m, 1g, 268435456)"),
    );
    rejected(
        &env,
        &[
            "box",
            "t1",
            "--image",
            IMAGE,
            "--timeout",
            "-1",
            "--",
            "true",
        ],
        &usage("--timeout <seconds> (e.g. 60)"),
    );
    rejected(
        &env,
        &[
            "box", "t1", "--image", IMAGE, "--net", "bridge", "--", "true",
        ],
        &usage("--net <host|none> (host = share host net; none = isolated)"),
    );
    rejected(
        &env,
        &[
            "box",
            "t1",
            "--image",
            IMAGE,
            "--security-profile",
            "strict",
            "--",
            "true",
        ],
        &usage("--security-profile: expected `untrusted`"),
    );
    rejected(
        &env,
        &[
            "box",
            "t1",
            "--image",
            IMAGE,
            "--apparmor",
            "-bad",
            "--",
            "true",
        ],
        &usage("--apparmor <profile> (letters, digits, '.', '_', '-'; no leading '-')"),
    );
    rejected(
        &env,
        &[
            "box",
            "t1",
            "--image",
            IMAGE,
            "--require-limits",
            "--allow-uncapped",
            "--",
            "true",
        ],
        &usage(
            "--require-limits and --allow-uncapped are mutually exclusive (one refuses an \
             unenforceable cap, the other accepts it); this also holds when either is set through \
             KERN_REQUIRE_LIMITS or KERN_ALLOW_UNCAPPED",
        ),
    );
    // kern takes one capability per --cap-drop; a comma list is an unknown name.
    rejected(
        &env,
        &[
            "box",
            "t1",
            "--image",
            IMAGE,
            "--cap-drop",
            "NET_RAW,SYS_ADMIN",
            "--",
            "true",
        ],
        "error: sandbox: unknown capability 'NET_RAW,SYS_ADMIN' in --cap-drop (e.g. NET_ADMIN, \
         SYS_PTRACE, or ALL)\n",
    );
    rejected(
        &env,
        &["box", "t1", "--", "true"],
        "error: sandbox: need --rootfs or --image\n",
    );
    rejected(
        &env,
        &["box", "bad/name", "--image", IMAGE, "--", "true"],
        "error: invalid box name: box name allows only letters, digits, '_', '.' and '-'\n\
         hint: box names: letters/digits/_/./- only, no leading '-' or '.', max 64 chars\n",
    );
    rejected(
        &env,
        &[
            "box",
            "t1",
            "--image",
            IMAGE,
            "-v",
            "/tmp:data",
            "--",
            "true",
        ],
        "error: sandbox: -v '/tmp:data': target must be absolute\n",
    );
    rejected(
        &env,
        &["frobnicate"],
        "error: unknown command 'frobnicate'\nhint: run `kern --help` for the list of commands\n",
    );
    rejected(&env, &["stop"], &usage("stop <name>... | stop --all"));
    rejected(
        &env,
        &["stop", "--bogus", "x"],
        &format!(
            "error: stop: unknown flag \"--bogus\" - run `kern stop --help` for what it accepts\n\
             {USAGE_HINT}"
        ),
    );
    rejected(
        &env,
        &["ps", "--jsn"],
        &format!(
            "error: ps: unknown flag \"--jsn\" - run `kern ps --help` for what it accepts\n{USAGE_HINT}"
        ),
    );
    rejected(
        &env,
        &["stop", "nosuchbox"],
        "error: no running box named 'nosuchbox'\nhint: run `kern ps` to see running boxes\n",
    );
}

#[test]
fn unknown_image_fails_like_an_offline_kern() {
    let env = Env::new();
    rejected(
        &env,
        &["box", "t1", "--image", "nosuchimage:1.0", "--", "true"],
        "→ image 'nosuchimage:1.0' not cached - pulling once (reused after)\n\
         → resolving nosuchimage:1.0 (linux/amd64)\n\
         error: curl failed: exit Some(6): curl: (6) Could not resolve host: registry-1.docker.io\n\
         hint: pull/push need `curl`, GNU `tar`, `gzip`, `sha256sum` (and `zstd` for \
         zstd-compressed images) on PATH, plus a working network\n"
            .replace(
                "amd64",
                if cfg!(target_arch = "aarch64") {
                    "arm64"
                } else {
                    "amd64"
                },
            )
            .as_str(),
    );
    rejected(
        &env,
        &[
            "box",
            "t1",
            "--image",
            "nosuchimage:1.0",
            "--pull",
            "never",
            "--",
            "true",
        ],
        "error: image 'nosuchimage:1.0' is not usable locally (no complete cache entry: it needs \
         its rootfs, its sentinel and its config sidecar) and `--pull never` was given\n\
         hint: check the image name and tag exist; private images need `kern login` first\n",
    );
}

#[test]
fn version_and_empty_ps() {
    let env = Env::new();
    let out = env.run(&["--version"]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), "kern 0.0.0\n");
    let out = env.run(&["ps", "--json"]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), "[]\n");
}

#[test]
fn argv_log_records_every_invocation() {
    let env = Env::new();
    let log = env.state.path().join("argv.log");
    let calls: [&[&str]; 4] = [
        &["--version"],
        &["ps", "--json"],
        &["stop", "no-such-box"],
        &[
            "box",
            "argv1",
            "--image",
            IMAGE,
            "--",
            "sh",
            "-c",
            "exit 0 # two words",
        ],
    ];
    for args in calls {
        let mut c = env.cmd(args);
        c.env("KERN_STANDIN_ARGV_LOG", &log);
        output(c.spawn().unwrap());
    }
    let want: Vec<u8> = calls
        .iter()
        .flat_map(|args| {
            let mut line = args.join("\0").into_bytes();
            line.push(b'\n');
            line
        })
        .collect();
    assert_eq!(text(&std::fs::read(&log).unwrap()), text(&want));
}
