//! The `kern box …` argv contract, flag for flag and in the reference's order.

use std::ffi::OsString;
use std::path::Path;

use super::egress::{self, EgressBox};
use crate::options::Config;
use crate::workspace::DEPS_DIR;

/// kern's own `--timeout` is a backstop a little past the binding's deadline.
const BACKSTOP_GRACE_S: u64 = 5;

/// What varies per box on top of the session's [`Config`].
pub struct BoxSpec<'a> {
    pub name: &'a str,
    pub workspace: &'a Path,
    /// Bind `<ws>/.deps` read-only (`depsReadonly`, a run box, and the dir exists).
    pub deps_readonly: bool,
    pub timeout_s: f64,
    /// The setup box: full network, no egress allowlist.
    pub setup: bool,
    pub env_file: Option<&'a Path>,
    pub command: &'a [String],
    /// A machine's box: a writable root, a terminal (kern gives a box /dev/pts only with `-it`),
    /// and the agent with its control directory bound in.
    pub machine: Option<MachineBox<'a>>,
    /// Attached to a host egress proxy: no `--net`/`--egress-allow`, the proxy's socket, CA and
    /// env bound in, and the relay in front of the workload (see `egress`).
    pub egress: Option<&'a EgressBox>,
}

pub struct MachineBox<'a> {
    /// The agent binary on the host, bound read-only at `agent_at`.
    pub agent: &'a Path,
    pub agent_at: &'a str,
    /// The private directory holding the control socket, bound read-only at `ctl_at`.
    pub ctl: &'a Path,
    pub ctl_at: &'a str,
}

/// The argv after the kern binary itself.
pub fn box_argv(cfg: &Config, spec: &BoxSpec<'_>) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::with_capacity(32 + spec.command.len());
    a.extend(["box", spec.name, "--image", &cfg.image].map(OsString::from));
    if spec.machine.is_none() {
        a.push("--ro".into());
    }
    workspace_flags(&mut a, cfg, spec);
    limit_flags(&mut a, cfg, spec);
    if spec.egress.is_some() && !spec.setup {
        // The proxy is the box's only way out: kern's default, isolated network.
    } else if !cfg.egress_allow.is_empty() && !spec.setup {
        flag(&mut a, "--egress-allow", cfg.egress_allow.join(","));
    } else if cfg.network || spec.setup {
        a.push("--net".into());
    }
    a.extend(cfg.profiles.iter().map(OsString::from));
    for m in &cfg.mounts {
        let mut v = m.source.as_os_str().to_owned();
        v.push(":");
        v.push(&m.target);
        if m.read_only {
            v.push(":ro");
        }
        flag(&mut a, "-v", v);
    }
    let egress = spec.egress.filter(|_| !spec.setup);
    if let Some(e) = egress {
        a.extend(egress::box_binds(e, spec.machine.is_none()));
    }
    security_flags(&mut a, cfg);
    if let Some(f) = spec.env_file {
        flag(&mut a, "--env-file", f);
    }
    // After the session's: kern applies env files in order, so these values win.
    if let Some(e) = egress {
        flag(&mut a, "--env-file", &e.env_file);
    }
    if let Some(m) = &spec.machine {
        for (host, at) in [(m.agent, m.agent_at), (m.ctl, m.ctl_at)] {
            let mut v = host.as_os_str().to_owned();
            v.push(format!(":{at}:ro"));
            flag(&mut a, "-v", v);
        }
        a.push("-it".into());
    }
    a.push("--".into());
    match (egress, &spec.machine) {
        (None, _) => a.extend(spec.command.iter().map(OsString::from)),
        (Some(_), Some(_)) => {
            a.extend(spec.command.iter().map(OsString::from));
            a.extend(egress::machine_args().into_iter().map(OsString::from));
        }
        (Some(_), None) => a.extend(egress::wrap(spec.command).into_iter().map(OsString::from)),
    }
    a
}

/// The argv of a box whose own image (a kernel's or a machine's), if given, replaces the
/// session's for that box only.
pub fn box_argv_with_image(
    cfg: &Config,
    image: Option<String>,
    spec: &BoxSpec<'_>,
) -> Vec<OsString> {
    match image {
        Some(image) => box_argv(
            &Config {
                image,
                ..cfg.clone()
            },
            spec,
        ),
        None => box_argv(cfg, spec),
    }
}

fn flag(a: &mut Vec<OsString>, name: &str, value: impl Into<OsString>) {
    a.push(name.into());
    a.push(value.into());
}

/// One bind of the workspace, at `cfg.box_workspace` (validated plain), also the workdir; and
/// its dependencies read-only over it where asked.
fn workspace_flags(a: &mut Vec<OsString>, cfg: &Config, spec: &BoxSpec<'_>) {
    let mut ws = spec.workspace.as_os_str().to_owned();
    ws.push(":");
    ws.push(&cfg.box_workspace);
    flag(a, "-v", ws);
    flag(a, "--workdir", &cfg.box_workspace);
    if spec.deps_readonly {
        let mut deps = spec.workspace.join(DEPS_DIR).into_os_string();
        deps.push(format!(":{}/{DEPS_DIR}:ro", cfg.box_workspace));
        flag(a, "-v", deps);
    }
}

/// kern's backstop timeout and the resource limits.
fn limit_flags(a: &mut Vec<OsString>, cfg: &Config, spec: &BoxSpec<'_>) {
    let backstop = spec.timeout_s.ceil() as u64 + BACKSTOP_GRACE_S;
    flag(a, "--timeout", backstop.to_string());
    if let Some(m) = cfg.memory_mb {
        flag(a, "--memory", format!("{m}m"));
    }
    if let Some(c) = cfg.cpus {
        flag(a, "--cpus", c.to_string());
    }
    if let Some(p) = cfg.pids {
        flag(a, "--pids-limit", p.to_string());
    }
}

/// Dropped capabilities, seccomp and AppArmor profiles, and whether kern must enforce limits.
fn security_flags(a: &mut Vec<OsString>, cfg: &Config) {
    for c in &cfg.cap_drop {
        flag(a, "--cap-drop", c);
    }
    if let Some(p) = &cfg.security_profile {
        flag(a, "--security-profile", p);
    }
    if cfg.require_limits {
        a.push("--require-limits".into());
    }
    if let Some(p) = &cfg.apparmor {
        flag(a, "--apparmor", p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Mount;
    use std::path::PathBuf;

    fn cfg() -> Config {
        Config {
            kern: PathBuf::from("/bin/kern"),
            image: "python:3.12-slim".into(),
            setup: None,
            workspace: None,
            memory_mb: Some(512),
            cpus: None,
            pids: Some(256),
            timeout_s: 30.0,
            network: false,
            policy: None,
            egress_allow: vec![],
            mounts: vec![],
            profiles: vec![],
            env_file: Ok(String::new()),
            max_output: 1,
            enforce_limits: true,
            deps_readonly: false,
            track_files: true,
            cap_drop: vec![],
            security_profile: None,
            require_limits: false,
            apparmor: None,
            box_workspace: "/workspace".into(),
            prewarm: 0,
            snapshot_dir: None,
            snapshot_max_bytes: 1,
            egress: None,
        }
    }

    fn strs(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    #[test]
    fn reference_order_for_a_plain_box() {
        let cmd = vec!["python3".to_string(), "-c".into(), "print(1)".into()];
        let spec = BoxSpec {
            name: "n1",
            workspace: Path::new("/tmp/ws"),
            deps_readonly: false,
            timeout_s: 30.0,
            setup: false,
            env_file: Some(Path::new("/tmp/p/env")),
            command: &cmd,
            machine: None,
            egress: None,
        };
        assert_eq!(
            strs(box_argv(&cfg(), &spec)),
            [
                "box",
                "n1",
                "--image",
                "python:3.12-slim",
                "--ro",
                "-v",
                "/tmp/ws:/workspace",
                "--workdir",
                "/workspace",
                "--timeout",
                "35",
                "--memory",
                "512m",
                "--pids-limit",
                "256",
                "--env-file",
                "/tmp/p/env",
                "--",
                "python3",
                "-c",
                "print(1)"
            ]
        );
    }

    #[test]
    fn every_optional_flag_in_place() {
        let mut c = cfg();
        c.cpus = Some(1.5);
        c.egress_allow = vec!["a.example.org".into(), "b.example.net".into()];
        c.profiles = vec!["vcpu:heavy".into()];
        c.mounts = vec![
            Mount {
                source: "/data".into(),
                target: "/d".into(),
                read_only: true,
            },
            Mount {
                source: "/data2".into(),
                target: "/e".into(),
                read_only: false,
            },
        ];
        c.cap_drop = vec!["ALL".into()];
        c.security_profile = Some("untrusted".into());
        c.require_limits = true;
        c.apparmor = Some("kern-box".into());
        let cmd = vec!["true".to_string()];
        let spec = BoxSpec {
            name: "n2",
            workspace: Path::new("/w"),
            deps_readonly: true,
            timeout_s: 0.5,
            setup: false,
            env_file: None,
            command: &cmd,
            machine: None,
            egress: None,
        };
        assert_eq!(
            strs(box_argv(&c, &spec)),
            [
                "box",
                "n2",
                "--image",
                "python:3.12-slim",
                "--ro",
                "-v",
                "/w:/workspace",
                "--workdir",
                "/workspace",
                "-v",
                "/w/.deps:/workspace/.deps:ro",
                "--timeout",
                "6",
                "--memory",
                "512m",
                "--cpus",
                "1.5",
                "--pids-limit",
                "256",
                "--egress-allow",
                "a.example.org,b.example.net",
                "vcpu:heavy",
                "-v",
                "/data:/d:ro",
                "-v",
                "/data2:/e",
                "--cap-drop",
                "ALL",
                "--security-profile",
                "untrusted",
                "--require-limits",
                "--apparmor",
                "kern-box",
                "--",
                "true"
            ]
        );
    }

    #[test]
    fn another_box_workspace_moves_the_bind_workdir_and_deps() {
        let mut c = cfg();
        c.box_workspace = "/home/user".into();
        let cmd = vec!["true".to_string()];
        let spec = BoxSpec {
            name: "h",
            workspace: Path::new("/w"),
            deps_readonly: true,
            timeout_s: 1.0,
            setup: false,
            env_file: None,
            command: &cmd,
            machine: None,
            egress: None,
        };
        let v = strs(box_argv(&c, &spec));
        assert_eq!(
            v[5..11],
            [
                "-v",
                "/w:/home/user",
                "--workdir",
                "/home/user",
                "-v",
                "/w/.deps:/home/user/.deps:ro"
            ]
        );
        assert!(!v.iter().any(|a| a.contains("/workspace")));
    }

    #[test]
    fn setup_box_gets_the_network_not_the_allowlist() {
        let mut c = cfg();
        c.egress_allow = vec!["a.example.org".into()];
        let cmd = vec!["sh".to_string()];
        let spec = BoxSpec {
            name: "s",
            workspace: Path::new("/w"),
            deps_readonly: false,
            timeout_s: 120.0,
            setup: true,
            env_file: None,
            command: &cmd,
            machine: None,
            egress: None,
        };
        let v = strs(box_argv(&c, &spec));
        assert!(v.contains(&"--net".to_string()));
        assert!(!v.contains(&"--egress-allow".to_string()));
    }

    fn egress_box() -> EgressBox {
        EgressBox {
            attach: egress::EgressAttach {
                sock: "/run/p/proxy.sock".into(),
                ca_pem: String::new(),
                agent: "/opt/agent".into(),
            },
            ca_file: "/tmp/p/egress/ca.pem".into(),
            env_file: "/tmp/p/egress/env".into(),
        }
    }

    #[test]
    fn an_attached_box_keeps_the_isolated_network_and_runs_the_relay_first() {
        let mut c = cfg();
        c.egress_allow = vec!["a.example.org".into()];
        let e = egress_box();
        let cmd = vec!["curl".to_string(), "https://x.test/".into()];
        let spec = BoxSpec {
            name: "e",
            workspace: Path::new("/w"),
            deps_readonly: false,
            timeout_s: 1.0,
            setup: false,
            env_file: Some(Path::new("/tmp/p/env")),
            command: &cmd,
            machine: None,
            egress: Some(&e),
        };
        let v = strs(box_argv(&c, &spec));
        assert!(!v.contains(&"--net".to_string()));
        assert!(!v.contains(&"--egress-allow".to_string()));
        let binds: Vec<&str> = v
            .windows(2)
            .filter(|w| w[0] == "-v")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(
            binds[1..],
            [
                "/run/p/proxy.sock:/.kern-sandbox/egress.sock:ro",
                "/tmp/p/egress/ca.pem:/.kern-sandbox/egress-ca.pem:ro",
                "/opt/agent:/.kern-sandbox/agent:ro"
            ]
        );
        let envs: Vec<&str> = v
            .windows(2)
            .filter(|w| w[0] == "--env-file")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(envs, ["/tmp/p/env", "/tmp/p/egress/env"]);
        let dd = v.iter().position(|a| a == "--").unwrap();
        assert_eq!(v[dd + 1..dd + 3], ["/.kern-sandbox/agent", "egress"]);
        assert_eq!(v[v.len() - 3..], ["--", "curl", "https://x.test/"]);
        // The setup box is never attached: it has the host network.
        let setup = BoxSpec {
            setup: true,
            ..spec
        };
        let v = strs(box_argv(&c, &setup));
        assert!(v.contains(&"--net".to_string()));
        assert!(!v.iter().any(|a| a.contains("egress")));
    }

    #[test]
    fn an_attached_machine_gets_the_relay_flags_not_a_second_agent() {
        let e = egress_box();
        let cmd = vec![
            "/.kern-sandbox/agent".to_string(),
            "/.kern-sandbox/ctl/sock".into(),
        ];
        let spec = BoxSpec {
            name: "m",
            workspace: Path::new("/w"),
            deps_readonly: false,
            timeout_s: 1.0,
            setup: false,
            env_file: None,
            command: &cmd,
            machine: Some(MachineBox {
                agent: Path::new("/opt/agent"),
                agent_at: "/.kern-sandbox/agent",
                ctl: Path::new("/tmp/p/ctl"),
                ctl_at: "/.kern-sandbox/ctl",
            }),
            egress: Some(&e),
        };
        let v = strs(box_argv(&cfg(), &spec));
        assert_eq!(
            v.iter()
                .filter(|a| a.ends_with(":/.kern-sandbox/agent:ro"))
                .count(),
            1
        );
        let dd = v.iter().position(|a| a == "--").unwrap();
        assert_eq!(v[dd + 1..dd + 3], cmd[..]);
        assert_eq!(v[dd + 3..], egress::machine_args()[..]);
    }
}
