//! The `kern box …` argv contract, flag for flag and in the reference's order.

use std::ffi::OsString;
use std::path::Path;

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
}

/// The argv after the kern binary itself.
pub fn box_argv(cfg: &Config, spec: &BoxSpec<'_>) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::with_capacity(32 + spec.command.len());
    let mut push = |s: &str| a.push(s.into());
    push("box");
    push(spec.name);
    push("--image");
    push(&cfg.image);
    push("--ro");
    push("-v");
    // One bind of the workspace, at `cfg.box_workspace` (validated plain), also the workdir.
    let mut ws = spec.workspace.as_os_str().to_owned();
    ws.push(":");
    ws.push(&cfg.box_workspace);
    a.push(ws);
    a.push("--workdir".into());
    a.push((&cfg.box_workspace).into());
    if spec.deps_readonly {
        let mut deps = spec.workspace.join(DEPS_DIR).into_os_string();
        deps.push(format!(":{}/{DEPS_DIR}:ro", cfg.box_workspace));
        a.push("-v".into());
        a.push(deps);
    }
    a.push("--timeout".into());
    a.push(
        (spec.timeout_s.ceil() as u64 + BACKSTOP_GRACE_S)
            .to_string()
            .into(),
    );
    if let Some(m) = cfg.memory_mb {
        a.push("--memory".into());
        a.push(format!("{m}m").into());
    }
    if let Some(c) = cfg.cpus {
        a.push("--cpus".into());
        a.push(c.to_string().into());
    }
    if let Some(p) = cfg.pids {
        a.push("--pids-limit".into());
        a.push(p.to_string().into());
    }
    if !cfg.egress_allow.is_empty() && !spec.setup {
        a.push("--egress-allow".into());
        a.push(cfg.egress_allow.join(",").into());
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
        a.push("-v".into());
        a.push(v);
    }
    for c in &cfg.cap_drop {
        a.push("--cap-drop".into());
        a.push(c.into());
    }
    if let Some(p) = &cfg.security_profile {
        a.push("--security-profile".into());
        a.push(p.into());
    }
    if cfg.require_limits {
        a.push("--require-limits".into());
    }
    if let Some(p) = &cfg.apparmor {
        a.push("--apparmor".into());
        a.push(p.into());
    }
    if let Some(f) = spec.env_file {
        a.push("--env-file".into());
        a.push(f.into());
    }
    a.push("--".into());
    a.extend(spec.command.iter().map(OsString::from));
    a
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
        };
        let v = strs(box_argv(&c, &spec));
        assert!(v.contains(&"--net".to_string()));
        assert!(!v.contains(&"--egress-allow".to_string()));
    }
}
