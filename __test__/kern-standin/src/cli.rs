//! Argument parsing for the slice of kern's CLI the binding drives.
//!
//! kern's parser is hand-rolled: every flag value is the NEXT argv element (no `--flag=value`), flags
//! may sit before or after the box name, `--` ends option parsing, and any flag it does not know is a
//! usage error (exit 1). This module keeps that shape and kern's exact usage strings for the flags it
//! supports. A flag kern has but the stand-in does not implement is refused as unknown, so a test can
//! never pass against the stand-in by relying on something it silently ignores.

use crate::error::Error;

/// `--pull`: only the policy's effect on an image that is not available matters to the stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PullPolicy {
    #[default]
    Missing,
    Never,
    Always,
}

#[derive(Debug, Default, PartialEq)]
pub struct BoxArgs {
    pub name: String,
    pub image: Option<String>,
    pub pull: PullPolicy,
    pub command: Vec<String>,
    pub read_only: bool,
    pub volumes: Vec<String>,
    pub env: Vec<String>,
    pub env_files: Vec<String>,
    pub workdir: Option<String>,
    pub share_net: bool,
    pub egress_allow: Vec<String>,
    pub memory: Option<u64>,
    pub cpus: Option<f64>,
    pub pids_limit: Option<u64>,
    pub timeout: u64,
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    pub untrusted: bool,
    pub require_limits: bool,
    pub allow_uncapped: bool,
    pub apparmor: Option<String>,
    pub uid_range: bool,
    pub no_uid_range: bool,
    /// `vcpu:`/`vgpio:`/`vdisk:` tokens, in order.
    pub profiles: Vec<String>,
}

#[derive(Debug, PartialEq)]
pub enum Command {
    Version,
    Banner,
    Help,
    Box(Box<BoxArgs>),
    Stop { names: Vec<String>, all: bool },
    Ps { json: bool, quiet: bool },
}

const USAGE_MEMORY: &str = "--memory <size> (e.g. 512m, 1g, 268435456)";
const USAGE_CPUS: &str = "--cpus <n> (e.g. 1.5 = 1½ cores, 2)";
const USAGE_PIDS: &str = "--pids-limit <N> (>= 2: the box needs a process slot for its own PID 1 \
                          plus the workload; 1 cannot start the box, e.g. use 256)";
const REJECT_MEMORY_SWAP: &str =
    "--memory-swap is not supported (Docker's mem+swap total, ambiguous on cgroup v2); \
     use --memory-swap-max <size> = the swap allowance (memory.swap.max)";

pub fn parse(args: &[String]) -> Result<Command, Error> {
    let rest: Vec<&str> = args.iter().map(String::as_str).collect();
    // kern answers `<verb> ... --help` anywhere before `--` with help rather than a refusal.
    if rest.len() > 1
        && rest[1..]
            .iter()
            .take_while(|a| **a != "--")
            .any(|a| matches!(*a, "--help" | "-h"))
    {
        return Ok(Command::Help);
    }
    Ok(match rest.first().copied() {
        None => Command::Banner,
        Some("--help" | "-h" | "help") => Command::Help,
        Some("--version" | "-V" | "version") => Command::Version,
        Some("box") => Command::Box(Box::new(parse_box(&rest)?)),
        Some(verb @ ("stop" | "kill")) => {
            reject_unknown_flags(verb, &rest, &["--all", "-a"])?;
            let all = rest.iter().any(|a| *a == "--all" || *a == "-a");
            let names: Vec<String> = rest[1..]
                .iter()
                .filter(|a| !a.starts_with('-'))
                .map(|s| (*s).to_string())
                .collect();
            if !all && names.is_empty() {
                return Err(Error::Usage("stop <name>... | stop --all"));
            }
            Command::Stop { names, all }
        }
        Some("ps") => {
            reject_unknown_flags("ps", &rest, &["--json", "-q", "--quiet", "-a", "--all"])?;
            Command::Ps {
                json: rest.contains(&"--json"),
                quiet: rest.iter().any(|a| *a == "-q" || *a == "--quiet"),
            }
        }
        Some(other) => return Err(Error::UnknownCommand(other.to_string())),
    })
}

/// kern's shared rule for the small verbs: any `-`-token before `--` that is not allowed verbatim.
fn reject_unknown_flags(verb: &str, args: &[&str], allowed: &[&str]) -> Result<(), Error> {
    for &a in args.iter().skip(1).take_while(|a| **a != "--") {
        if a.starts_with('-') && a != "-" && !allowed.contains(&a) {
            return Err(Error::Cli(format!(
                "{verb}: unknown flag {a:?} - run `kern {verb} --help` for what it accepts"
            )));
        }
    }
    Ok(())
}

/// kern's `parse_binary_size`: binary units, optional trailing `b`, integers only, > 0.
pub fn parse_size(s: &str) -> Option<u64> {
    let lower = s.trim().to_ascii_lowercase();
    let t = lower.strip_suffix('b').unwrap_or(&lower).trim_end();
    let (num, mult) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 1u64 << 10),
        'm' => (&t[..t.len() - 1], 1 << 20),
        'g' => (&t[..t.len() - 1], 1 << 30),
        't' => (&t[..t.len() - 1], 1 << 40),
        '0'..='9' => (t, 1),
        _ => return None,
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|b| *b > 0)
}

/// An AppArmor profile name as kern accepts it at the CLI edge.
fn valid_apparmor_name(s: &str) -> bool {
    let b = s.as_bytes();
    let rest_ok = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-');
    (1..=128).contains(&b.len())
        && (b[0].is_ascii_alphanumeric() || matches!(b[0], b'_' | b'.'))
        && b[1..].iter().all(rest_ok)
}

fn is_profile_token(s: &str) -> bool {
    ["vcpu:", "vgpio:", "vdisk:"]
        .iter()
        .any(|p| s.starts_with(p))
}

fn parse_box(rest: &[&str]) -> Result<BoxArgs, Error> {
    let mut a = BoxArgs::default();
    let mut name: Option<&str> = None;
    let mut i = 1; // rest[0] == "box"
                   // The value after a flag, if any (kern reads it even when it looks like a flag or is `--`).
    let value = |i: usize| rest.get(i).copied();
    while i < rest.len() {
        let arg = rest[i];
        match arg {
            "--" => {
                a.command = rest[i + 1..].iter().map(|s| (*s).to_string()).collect();
                break;
            }
            "--read-only" | "--ro" => a.read_only = true,
            // Value-optional, Docker-shaped: bare `--net` (or before another flag) shares the host net.
            "--net" => match value(i + 1) {
                Some("host") => {
                    a.share_net = true;
                    i += 1;
                }
                Some("none") => {
                    a.share_net = false;
                    i += 1;
                }
                Some(v) if !v.starts_with('-') => {
                    return Err(Error::Usage(
                        "--net <host|none> (host = share host net; none = isolated)",
                    ))
                }
                _ => a.share_net = true,
            },
            "--network" => {
                i += 1;
                a.share_net = match value(i) {
                    Some("host") => true,
                    Some("none") => false,
                    _ => {
                        return Err(Error::Usage(
                            "--network <host|none> (host = share host net; none = isolated)",
                        ))
                    }
                };
            }
            "--pids-limit" => {
                i += 1;
                a.pids_limit = Some(
                    value(i)
                        .and_then(|v| v.parse::<u64>().ok())
                        .filter(|n| *n >= 2)
                        .ok_or(Error::Usage(USAGE_PIDS))?,
                );
            }
            "--cap-add" => {
                i += 1;
                let v = value(i).ok_or(Error::Usage("--cap-add <CAP> (e.g. NET_ADMIN, or ALL)"))?;
                a.cap_add.push(v.to_string());
            }
            "--cap-drop" => {
                i += 1;
                let v = value(i).ok_or(Error::Usage("--cap-drop <CAP> (e.g. NET_RAW, or ALL)"))?;
                a.cap_drop.push(v.to_string());
            }
            "--uid-range" => a.uid_range = true,
            "--no-uid-range" => a.no_uid_range = true,
            "--require-limits" => a.require_limits = true,
            "--allow-uncapped" => a.allow_uncapped = true,
            "--security-profile" => {
                i += 1;
                match value(i) {
                    Some("untrusted") => a.untrusted = true,
                    _ => return Err(Error::Usage("--security-profile: expected `untrusted`")),
                }
            }
            "--env-file" => {
                i += 1;
                let v = value(i).ok_or(Error::Usage("--env-file <file>"))?;
                a.env_files.push(v.to_string());
            }
            "--timeout" => {
                i += 1;
                a.timeout = value(i)
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or(Error::Usage("--timeout <seconds> (e.g. 60)"))?;
            }
            // The stand-in prints no status panel, so these only need to be accepted.
            "-q" | "--quiet" | "--verbose" => {}
            "--image" => {
                i += 1;
                a.image = value(i).map(str::to_string);
            }
            "--pull" => {
                i += 1;
                a.pull = match value(i) {
                    Some("missing") => PullPolicy::Missing,
                    Some("never") => PullPolicy::Never,
                    Some("always") => PullPolicy::Always,
                    _ => {
                        return Err(Error::Usage(
                            "--pull: expected `missing`, `never`, or `always`",
                        ))
                    }
                };
            }
            "-v" | "--volume" => {
                i += 1;
                a.volumes.extend(value(i).map(str::to_string));
            }
            "-e" | "--env" => {
                i += 1;
                a.env.extend(value(i).map(str::to_string));
            }
            "--egress-allow" => {
                i += 1;
                if let Some(v) = value(i) {
                    a.egress_allow.extend(
                        v.split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(String::from),
                    );
                }
            }
            "--apparmor" => {
                i += 1;
                match value(i).map(str::trim) {
                    Some(v) if valid_apparmor_name(v) => a.apparmor = Some(v.to_string()),
                    _ => {
                        return Err(Error::Usage(
                            "--apparmor <profile> (letters, digits, '.', '_', '-'; no leading '-')",
                        ))
                    }
                }
            }
            // kern's -it gives the box a console terminal and /dev/pts; bwrap's --dev always
            // mounts a private devpts, so the stand-in's boxes have terminals either way.
            "-i" | "-t" | "-it" | "-ti" | "--interactive" | "--tty" => {}
            "-w" | "--workdir" => {
                i += 1;
                a.workdir = value(i).map(str::to_string);
            }
            "-m" | "--memory" => {
                i += 1;
                a.memory = Some(
                    value(i)
                        .and_then(parse_size)
                        .ok_or(Error::Usage(USAGE_MEMORY))?,
                );
            }
            "--cpus" => {
                i += 1;
                a.cpus = Some(
                    value(i)
                        .and_then(|v| v.parse::<f64>().ok())
                        .filter(|c| *c > 0.0 && c.is_finite())
                        .ok_or(Error::Usage(USAGE_CPUS))?,
                );
            }
            "--memory-swap" => return Err(Error::Usage(REJECT_MEMORY_SWAP)),
            s if s.starts_with('-') => return Err(Error::Usage("box: unknown flag (see --help)")),
            s if is_profile_token(s) => a.profiles.push(s.to_string()),
            s if name.is_none() => name = Some(s),
            _ => {
                return Err(Error::Usage(
                    "box: unexpected argument (did you forget `--` before the command?)",
                ))
            }
        }
        i += 1;
    }
    if a.untrusted && a.cap_add.iter().any(|c| c.eq_ignore_ascii_case("ALL")) {
        return Err(Error::Usage(
            "--cap-add ALL cancels the cap-drop of --security-profile untrusted; these are \
             contradictory. Drop the profile, or add the specific capabilities you need.",
        ));
    }
    // kern names an anonymous box after its own pid.
    a.name = name
        .map(str::to_string)
        .unwrap_or_else(|| format!("box-{}", std::process::id()));
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_v(v: &[&str]) -> Result<Command, Error> {
        parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn boxed(v: &[&str]) -> BoxArgs {
        match parse_v(v) {
            Ok(Command::Box(b)) => *b,
            other => panic!("expected a box command, got {other:?}"),
        }
    }

    #[test]
    fn full_binding_argv_parses() {
        let b = boxed(&[
            "box",
            "n1",
            "--image",
            "python:3.12-slim",
            "--ro",
            "-v",
            "/a:/b:ro",
            "-v",
            "/c:/d",
            "--workdir",
            "/w",
            "--timeout",
            "5",
            "--memory",
            "256m",
            "--cpus",
            "1.5",
            "--pids-limit",
            "64",
            "--egress-allow",
            "a.com, b.org,",
            "vcpu:small",
            "vdisk:x",
            "--env-file",
            "/e",
            "--cap-drop",
            "ALL",
            "--cap-drop",
            "NET_RAW",
            "--security-profile",
            "untrusted",
            "--require-limits",
            "--apparmor",
            "prof.1",
            "--",
            "python3",
            "-c",
            "--memory",
        ]);
        assert_eq!(b.name, "n1");
        assert!(b.read_only && b.untrusted && b.require_limits && !b.share_net);
        assert_eq!(b.volumes, ["/a:/b:ro", "/c:/d"]);
        assert_eq!(b.memory, Some(256 << 20));
        assert_eq!(b.cpus, Some(1.5));
        assert_eq!(b.pids_limit, Some(64));
        assert_eq!(b.timeout, 5);
        assert_eq!(b.egress_allow, ["a.com", "b.org"]);
        assert_eq!(b.profiles, ["vcpu:small", "vdisk:x"]);
        assert_eq!(b.cap_drop, ["ALL", "NET_RAW"]);
        assert_eq!(b.apparmor.as_deref(), Some("prof.1"));
        assert_eq!(b.command, ["python3", "-c", "--memory"]);
    }

    #[test]
    fn net_is_value_optional_like_kern() {
        assert!(boxed(&["box", "n", "--net"]).share_net);
        assert!(boxed(&["box", "n", "--net", "--", "true"]).share_net);
        assert!(boxed(&["box", "n", "--net", "host"]).share_net);
        assert!(!boxed(&["box", "n", "--net", "none"]).share_net);
        assert!(matches!(
            parse_v(&["box", "n", "--net", "bridge"]),
            Err(Error::Usage(_))
        ));
    }

    #[test]
    fn value_is_the_next_token_even_when_it_is_a_separator() {
        // `--image -- true`: kern takes `--` as the image and then refuses `true` as a second name.
        let e = parse_v(&["box", "t1", "--image", "--", "true"]).unwrap_err();
        assert!(e.to_string().contains("unexpected argument"));
        assert_eq!(boxed(&["box", "t1", "--image"]).image, None);
    }

    #[test]
    fn rejections_use_kern_wording() {
        let msg = |v: &[&str]| parse_v(v).unwrap_err().to_string();
        assert_eq!(
            msg(&["box", "t", "--bogus"]),
            "usage: kern box: unknown flag (see --help)"
        );
        assert_eq!(
            msg(&["box", "t", "--memory=1g"]),
            "usage: kern box: unknown flag (see --help)"
        );
        assert_eq!(
            msg(&["box", "t", "--memory", "1.5g"]),
            format!("usage: kern {USAGE_MEMORY}")
        );
        assert_eq!(
            msg(&["box", "t", "--pids-limit", "1"]),
            format!("usage: kern {USAGE_PIDS}")
        );
        assert_eq!(
            msg(&["box", "t", "--timeout", "-1"]),
            "usage: kern --timeout <seconds> (e.g. 60)"
        );
        assert_eq!(msg(&["frob"]), "unknown command 'frob'");
        assert_eq!(
            msg(&["ps", "--jsn"]),
            "ps: unknown flag \"--jsn\" - run `kern ps --help` for what it accepts"
        );
        assert_eq!(msg(&["stop"]), "usage: kern stop <name>... | stop --all");
    }

    #[test]
    fn sizes_follow_kern() {
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("512MB"), Some(512 << 20));
        assert_eq!(parse_size(" 1G "), Some(1 << 30));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("1.5g"), None);
    }

    #[test]
    fn anonymous_box_gets_a_pid_name() {
        assert_eq!(
            boxed(&["box", "--image", "x"]).name,
            format!("box-{}", std::process::id())
        );
    }
}
