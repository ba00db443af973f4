//! Finding a box's processes on the host through /proc: kern's children, and below kern's pid by
//! command line.

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
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        !matches!(state, None | Some("Z" | "X"))
    })
}

/// Whether `pid` catches or blocks signal `sig` (so it does not die of it at once).
pub fn takes_signal(pid: i32, sig: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let bit = 1u64 << (sig - 1);
    ["SigBlk:", "SigCgt:"].iter().any(|key| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
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
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name in parentheses may hold anything: fields are counted after the last ')'.
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            parent.insert(pid, ppid);
        }
    }
    Some(parent)
}
