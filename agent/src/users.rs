//! Users and groups from the box's own /etc/passwd and /etc/group (a static binary has no NSS,
//! and the box's files are the truth inside it anyway).

use std::collections::HashMap;

use crate::error::Fail;

/// A user to run a process as.
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    /// Primary and supplementary groups.
    pub groups: Vec<u32>,
}

/// `name:x:uid:gid:gecos:home:shell` lines, parsed leniently (a malformed line is skipped).
fn passwd() -> Vec<(String, u32, u32, String)> {
    read_lines("/etc/passwd", |f| {
        Some((
            f.first()?.to_string(),
            f.get(2)?.parse().ok()?,
            f.get(3)?.parse().ok()?,
            f.get(5)?.to_string(),
        ))
    })
}

/// `name:x:gid:member,member` lines.
fn groups() -> Vec<(String, u32, Vec<String>)> {
    read_lines("/etc/group", |f| {
        let members = f.get(3).map(|m| {
            m.split(',')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        });
        Some((
            f.first()?.to_string(),
            f.get(2)?.parse().ok()?,
            members.unwrap_or_default(),
        ))
    })
}

fn read_lines<T>(path: &str, parse: impl Fn(&[&str]) -> Option<T>) -> Vec<T> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| parse(&l.split(':').collect::<Vec<_>>()))
        .collect()
}

/// Resolves a user name or numeric uid in the box's passwd file.
pub fn lookup(spec: &str) -> Result<User, Fail> {
    let numeric: Option<u32> = spec.parse().ok();
    let (name, uid, gid, home) = passwd()
        .into_iter()
        .find(|(name, uid, _, _)| name == spec || Some(*uid) == numeric)
        .ok_or_else(|| Fail::invalid(format!("no user {spec} in the box's /etc/passwd")))?;
    let mut ids = vec![gid];
    for (_, group, members) in groups() {
        if members.contains(&name) && !ids.contains(&group) {
            ids.push(group);
        }
    }
    Ok(User {
        name,
        uid,
        gid,
        home,
        groups: ids,
    })
}

/// uid and gid to name maps, loaded once per request.
pub struct Names {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

impl Names {
    pub fn load() -> Names {
        let mut users = HashMap::new();
        for (name, uid, _, _) in passwd() {
            users.entry(uid).or_insert(name);
        }
        let mut groups_by_id = HashMap::new();
        for (name, gid, _) in groups() {
            groups_by_id.entry(gid).or_insert(name);
        }
        Names {
            users,
            groups: groups_by_id,
        }
    }

    /// The user's name, else the uid as a string.
    pub fn user(&self, uid: u32) -> String {
        self.users
            .get(&uid)
            .cloned()
            .unwrap_or_else(|| uid.to_string())
    }

    pub fn group(&self, gid: u32) -> String {
        self.groups
            .get(&gid)
            .cloned()
            .unwrap_or_else(|| gid.to_string())
    }
}
