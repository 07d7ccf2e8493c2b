//! The host's process table, read from `/proc` (Linux): what proc_list lists and what
//! proc_kill checks before it signals.
//!
//! Each process is read from three small files: `stat` (state, parent, CPU times,
//! start time, resident pages), `status` (effective uid) and `cmdline` (the argv,
//! read up to [`MAX_COMMAND_BYTES`]). `stat` is parsed from its *last* `)`: the
//! process name (`comm`) sits in parentheses and may itself contain spaces and
//! parentheses. A process that ends while it is being read is skipped, never an error.
//!
//! Derived values:
//!
//! - `start`: boot time (`/proc/stat` `btime`) plus the start tick count, as RFC 3339
//!   UTC with milliseconds. `btime` is whole seconds and follows wall-clock steps, so
//!   two readings of one process agree to within a second ([`same_start`]).
//! - `cpuPercent`: CPU time used over the process's whole lifetime (user + system,
//!   divided by the time since it started), like `ps`'s `%CPU`, not a fresh sample:
//!   cheap, and the same value for the same process whoever asks.
//!
//! Other operating systems have no `/proc` of this shape: [`Table::open`] answers
//! [`TableError::Unsupported`].

use chrono::{DateTime, SecondsFormat, Utc};
use nix::unistd::{Uid, User};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use thiserror::Error;

/// The longest command line kept per process, in bytes (longer ones end with `…`).
pub const MAX_COMMAND_BYTES: usize = 4096;

/// Why the process table, or one process in it, could not be read.
#[derive(Debug, Error)]
pub enum TableError {
    #[error("process listing is not supported on this operating system (it reads Linux's /proc)")]
    Unsupported,
    #[error("no process with pid {0}")]
    NotFound(i32),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unexpected contents in {0}")]
    Malformed(PathBuf),
}

/// One process, as proc_list lists it and proc_kill shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProcessRecord {
    pub pid: i32,
    pub ppid: i32,
    /// Its process group (sessions of the node run each in a group of their own).
    #[serde(skip)]
    pub pgrp: i32,
    /// Effective uid.
    pub uid: u32,
    /// The uid's name in the node's user database, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The kernel's name for the process (`comm`, at most 15 bytes).
    pub name: String,
    /// One letter: R running, S sleeping, D disk wait, Z zombie, T stopped, …
    pub state: String,
    /// CPU use over the process's lifetime, in percent of one CPU.
    pub cpu_percent: f64,
    /// Resident memory.
    pub rss_bytes: u64,
    /// When it started (RFC 3339, UTC).
    pub start: String,
    /// Its argv joined by spaces; `[name]` for kernel threads.
    pub command: String,
}

/// What every process's values are computed against: read once per listing.
pub struct Table {
    boot_time: i64,
    ticks_per_second: u64,
    uptime_secs: f64,
    page_size: u64,
    users: HashMap<u32, Option<String>>,
}

impl Table {
    /// Reads the host-wide values (boot time, uptime, clock rate, page size).
    pub fn open() -> Result<Table, TableError> {
        if !cfg!(target_os = "linux") {
            return Err(TableError::Unsupported);
        }
        let stat = read_small("/proc/stat".into())?;
        let boot_time = stat
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .ok_or_else(|| TableError::Malformed("/proc/stat".into()))?;
        let uptime = read_small("/proc/uptime".into())?;
        let uptime_secs = uptime
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| TableError::Malformed("/proc/uptime".into()))?;
        Ok(Table {
            boot_time,
            ticks_per_second: rustix::param::clock_ticks_per_second().max(1),
            uptime_secs,
            page_size: rustix::param::page_size() as u64,
            users: HashMap::new(),
        })
    }

    /// The pids in `/proc` now (ascending).
    pub fn pids(&self) -> Result<Vec<i32>, TableError> {
        let dir = std::fs::read_dir("/proc").map_err(|source| TableError::Io {
            path: "/proc".into(),
            source,
        })?;
        let mut pids: Vec<i32> = dir
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| *pid > 0)
            .collect();
        pids.sort_unstable();
        Ok(pids)
    }

    /// Reads one process: [`TableError::NotFound`] if it does not exist (or ended).
    pub fn read(&mut self, pid: i32) -> Result<ProcessRecord, TableError> {
        let base = PathBuf::from(format!("/proc/{pid}"));
        let stat = read_small(base.join("stat")).map_err(|e| not_found(e, pid))?;
        let fields =
            StatFields::parse(&stat).ok_or_else(|| TableError::Malformed(base.join("stat")))?;
        let status = read_small(base.join("status")).map_err(|e| not_found(e, pid))?;
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            .and_then(|id| id.parse::<u32>().ok())
            .ok_or_else(|| TableError::Malformed(base.join("status")))?;
        let command = read_command(&base).map_err(|e| not_found(e, pid))?;
        let hz = self.ticks_per_second as f64;
        let started_secs = fields.start_ticks as f64 / hz;
        let lifetime = self.uptime_secs - started_secs;
        let cpu_percent = if lifetime > 0.0 {
            let used = (fields.utime + fields.stime) as f64 / hz;
            (used / lifetime * 1000.0).round() / 10.0
        } else {
            0.0
        };
        let start_ms = self.boot_time.saturating_mul(1000).saturating_add(
            (fields.start_ticks.saturating_mul(1000) / self.ticks_per_second) as i64,
        );
        let start = DateTime::<Utc>::from_timestamp_millis(start_ms)
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
            .unwrap_or_default();
        let user = self.user_name(uid);
        Ok(ProcessRecord {
            pid,
            ppid: fields.ppid,
            pgrp: fields.pgrp,
            uid,
            user,
            command: if command.is_empty() {
                format!("[{}]", fields.name)
            } else {
                command
            },
            name: fields.name,
            state: fields.state,
            cpu_percent,
            rss_bytes: fields.rss_pages.saturating_mul(self.page_size),
            start,
        })
    }

    /// The name of `uid`, looked up once per table.
    fn user_name(&mut self, uid: u32) -> Option<String> {
        self.users
            .entry(uid)
            .or_insert_with(|| {
                User::from_uid(Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map(|u| u.name)
            })
            .clone()
    }
}

/// The parent of `pid` (`None` if it cannot be read), for walking ancestry.
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = read_small(PathBuf::from(format!("/proc/{pid}/stat"))).ok()?;
    StatFields::parse(&stat).map(|f| f.ppid)
}

/// Whether two `start` values (RFC 3339) name the same start: within one second, as
/// `btime` may move by a second between readings.
pub fn same_start(a: &str, b: &str) -> bool {
    match (
        DateTime::parse_from_rfc3339(a),
        DateTime::parse_from_rfc3339(b),
    ) {
        (Ok(a), Ok(b)) => (a - b).num_milliseconds().abs() < 1000,
        _ => false,
    }
}

/// The fields proc_list needs from `/proc/PID/stat`.
#[derive(Debug, PartialEq)]
struct StatFields {
    name: String,
    state: String,
    ppid: i32,
    pgrp: i32,
    utime: u64,
    stime: u64,
    start_ticks: u64,
    rss_pages: u64,
}

impl StatFields {
    /// Parses `pid (comm) state ppid …`: `comm` is everything between the first `(`
    /// and the last `)`, whatever it contains.
    fn parse(stat: &str) -> Option<StatFields> {
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let name = stat.get(open + 1..close)?.to_owned();
        let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
        // Field n of proc(5) (1-based) is rest[n - 3].
        let num = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
        Some(StatFields {
            name,
            state: (*rest.first()?).to_owned(),
            ppid: rest.get(1)?.parse().ok()?,
            pgrp: rest.get(2)?.parse().ok()?,
            utime: num(14)?,
            stime: num(15)?,
            start_ticks: num(22)?,
            rss_pages: rest.get(21).and_then(|v| v.parse::<i64>().ok())?.max(0) as u64,
        })
    }
}

/// `/proc/PID/cmdline` as one line (NULs as spaces), cut to [`MAX_COMMAND_BYTES`].
fn read_command(base: &std::path::Path) -> Result<String, TableError> {
    let path = base.join("cmdline");
    let file = std::fs::File::open(&path).map_err(|source| TableError::Io {
        path: path.clone(),
        source,
    })?;
    let mut raw = Vec::new();
    file.take(MAX_COMMAND_BYTES as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|source| TableError::Io { path, source })?;
    let cut = raw.len() > MAX_COMMAND_BYTES;
    raw.truncate(MAX_COMMAND_BYTES);
    for b in raw.iter_mut() {
        if *b == 0 {
            *b = b' ';
        }
    }
    let mut text = String::from_utf8_lossy(&raw).trim_end().to_owned();
    if cut {
        text.push('…');
    }
    Ok(text)
}

/// A small `/proc` file, whole.
fn read_small(path: PathBuf) -> Result<String, TableError> {
    std::fs::read_to_string(&path).map_err(|source| TableError::Io { path, source })
}

/// A process that vanished mid-read (`ENOENT`, `ESRCH`) is not found.
fn not_found(e: TableError, pid: i32) -> TableError {
    match &e {
        TableError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound
                || source.raw_os_error() == Some(libc::ESRCH) =>
        {
            TableError::NotFound(pid)
        }
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_spaces_and_parens_parse() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194560 100 0 0 0 12 3 0 0 20 0 1 0 5000 1000 250 18446744073709551615";
        let f = StatFields::parse(line).unwrap();
        assert_eq!(f.name, "a) b (c)");
        assert_eq!(f.state, "S");
        assert_eq!(f.ppid, 7);
        assert_eq!(
            (f.utime, f.stime, f.start_ticks, f.rss_pages),
            (12, 3, 5000, 250)
        );
        assert!(StatFields::parse("42 (x S 1").is_none());
        assert!(StatFields::parse("42 (x) S").is_none());
        assert!(StatFields::parse("").is_none());
    }

    #[test]
    fn start_times_match_within_a_second() {
        assert!(same_start(
            "2026-01-01T00:00:00.100Z",
            "2026-01-01T00:00:00.900Z"
        ));
        assert!(!same_start(
            "2026-01-01T00:00:00.000Z",
            "2026-01-01T00:00:02.000Z"
        ));
        assert!(!same_start("yesterday", "2026-01-01T00:00:00Z"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let mut table = Table::open().unwrap();
        let me = std::process::id() as i32;
        let r = table.read(me).unwrap();
        assert_eq!(r.pid, me);
        assert_eq!(r.uid, rustix::process::geteuid().as_raw());
        assert!(r.rss_bytes > 0);
        assert!(r.start.ends_with('Z'), "{}", r.start);
        assert!(table.pids().unwrap().contains(&me));
        assert_eq!(parent_of(me), Some(r.ppid));
        assert!(matches!(table.read(i32::MAX), Err(TableError::NotFound(_))));
    }
}
