//! A box's processes as the host's /proc shows them: kern's children, a process's state, parent
//! and group, and below kern's pid by command line.

use std::collections::HashMap;

/// A process below `root` (by parent links) whose command line (NUL-separated, as in
/// /proc/PID/cmdline) `matches`.
pub fn find_descendant(root: i32, matches: impl Fn(&[u8]) -> bool) -> Option<i32> {
    let parent = parents()?;
    let descends = |mut pid: i32| {
        for _ in 0..64 {
            match parent.get(&pid) {
                Some(&p) if p == root => return true,
                Some(&p) if p > 1 => pid = p,
                _ => return false,
            }
        }
        false
    };
    parent.keys().copied().find(|&pid| {
        descends(pid) && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| matches(&c))
    })
}

/// The children of `pid`'s main thread (kern forks from it); none when it is gone.
pub fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `pid` is a live process (not a zombie waiting to be reaped).
pub fn running(pid: i32) -> bool {
    stat(pid).is_some_and(|s| s.live())
}

/// One process as /proc/PID/stat shows it.
#[derive(Clone, Copy)]
pub struct Stat {
    pub ppid: i32,
    pub pgrp: i32,
    pub state: u8,
    /// Start time in clock ticks since boot: with the pid, it names one process for good.
    pub start: u64,
}

impl Stat {
    /// Neither a zombie nor dead.
    pub fn live(&self) -> bool {
        !matches!(self.state, b'Z' | b'X')
    }
}

pub fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Fields are counted after the last ')': the command name may hold anything.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: *f.first()?.as_bytes().first()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// /proc/PID/status, read once for any number of [`status_field`]s.
pub fn status(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
}

/// The value of the line `key` ("SigCgt:", "NSpid:") of a /proc/PID/status text.
pub fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| l.strip_prefix(key))
}

/// Whether `pid` catches or blocks signal `sig` (so it does not die of it at once).
pub fn takes_signal(pid: i32, sig: i32) -> bool {
    let Some(status) = status(pid) else {
        return false;
    };
    let bit = 1u64 << (sig - 1);
    ["SigBlk:", "SigCgt:"].iter().any(|key| {
        status_field(&status, key)
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|mask| mask & bit != 0)
    })
}

/// Every process's parent.
fn parents() -> Option<HashMap<i32, i32>> {
    let mut parent = HashMap::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(s) = stat(pid) {
            parent.insert(pid, s.ppid);
        }
    }
    Some(parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_paren() {
        let line = "42 (a) b) (c) S 7 42 42 0 -1 4194560 1 0 0 0 3 4 0 0 20 0 1 0 9876 1 2";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.state, s.ppid, s.pgrp, s.start), (b'S', 7, 42, 9876));
        assert!(s.live());
    }
}
