//! The facts a node reports about its host (`runtime.facts` in `connect`, `facts` in
//! the answer to `node.probe`): OS, architecture, kernel, OS release, host name, CPUs,
//! memory, gsv version, uptime.
//!
//! Collected cheaply and never fatally: on Linux a few small files under `/proc` and
//! `/etc`; on macOS `sysctl` and `sw_vers` (best effort, each with a short deadline);
//! elsewhere what the standard library knows. A fact the node cannot read is left out,
//! never guessed and never a reason to fail. The gateway shows these as
//! *self-reported*: they help an agent pick a host, policy never reads them.

use gsv_protocol::inventory::Facts;

/// What the node reports about its host now.
pub fn collect() -> Facts {
    let mut facts = Facts {
        os: crate::probe::host_os().to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        cpus: std::thread::available_parallelism()
            .ok()
            .and_then(|n| u32::try_from(n.get()).ok()),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..Facts::default()
    };
    platform::fill(&mut facts);
    facts
}

/// The `PRETTY_NAME` of an os-release file (else `NAME VERSION_ID`), unquoted.
pub fn os_release_name(text: &str) -> Option<String> {
    let mut fields = std::collections::HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            fields.insert(k.trim(), unquote(v.trim()));
        }
    }
    if let Some(p) = fields.get("PRETTY_NAME").filter(|p| !p.is_empty()) {
        return Some(p.clone());
    }
    let name = fields.get("NAME").filter(|n| !n.is_empty())?;
    match fields.get("VERSION_ID").filter(|v| !v.is_empty()) {
        Some(v) => Some(format!("{name} {v}")),
        None => Some(name.clone()),
    }
}

/// An os-release value without its quotes and shell escapes (`"Debian \"x\""`).
fn unquote(v: &str) -> String {
    let inner = v
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(v);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
pub fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    let unit = match parts.next() {
        Some("kB") | Some("KB") | Some("kb") => 1024,
        None => 1,
        Some(_) => return None,
    };
    n.checked_mul(unit)
}

/// Whole seconds of `/proc/uptime` (its first field).
pub fn uptime_secs(text: &str) -> Option<u64> {
    let first = text.split_whitespace().next()?;
    let whole = first.split('.').next()?;
    whole.parse().ok()
}

/// The first line of a small text, trimmed; `None` when empty.
fn first_line(text: &str) -> Option<String> {
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

#[cfg(target_os = "linux")]
mod platform {
    use super::*;

    /// Files above this size are not facts files; they are not read.
    const MAX_FILE: u64 = 64 * 1024;

    fn read(path: &str) -> Option<String> {
        use std::io::Read;
        let f = std::fs::File::open(path).ok()?;
        let mut text = String::new();
        f.take(MAX_FILE).read_to_string(&mut text).ok()?;
        Some(text)
    }

    pub fn fill(f: &mut Facts) {
        f.kernel = read("/proc/sys/kernel/osrelease")
            .as_deref()
            .and_then(first_line)
            .unwrap_or_default();
        f.os_release = read("/etc/os-release")
            .or_else(|| read("/usr/lib/os-release"))
            .as_deref()
            .and_then(os_release_name)
            .unwrap_or_default();
        f.hostname = read("/proc/sys/kernel/hostname")
            .or_else(|| read("/etc/hostname"))
            .as_deref()
            .and_then(first_line)
            .unwrap_or_default();
        f.memory_bytes = read("/proc/meminfo").as_deref().and_then(meminfo_total);
        f.uptime_secs = read("/proc/uptime").as_deref().and_then(uptime_secs);
    }
}

#[cfg(target_os = "macos")]
mod platform {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// How long one `sysctl` or `sw_vers` may take before its fact is left out.
    const DEADLINE: Duration = Duration::from_secs(2);

    /// The trimmed stdout of a short command, or `None` (missing, failed, too slow).
    fn run(program: &str, args: &[&str]) -> Option<String> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => break,
                Ok(Some(_)) | Err(_) => return None,
                Ok(None) if start.elapsed() > DEADLINE => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        let out = child.wait_with_output().ok()?;
        first_line(&String::from_utf8_lossy(&out.stdout))
    }

    pub fn fill(f: &mut Facts) {
        f.kernel = run("/usr/sbin/sysctl", &["-n", "kern.osrelease"]).unwrap_or_default();
        f.hostname = run("/bin/hostname", &[]).unwrap_or_default();
        f.memory_bytes =
            run("/usr/sbin/sysctl", &["-n", "hw.memsize"]).and_then(|s| s.parse().ok());
        f.os_release = run("/usr/bin/sw_vers", &["-productVersion"])
            .map(|v| format!("macOS {v}"))
            .unwrap_or_default();
        // `{ sec = 1700000000, usec = 0 } Tue Nov ...`: seconds since boot from now.
        f.uptime_secs = run("/usr/sbin/sysctl", &["-n", "kern.boottime"]).and_then(|s| {
            let sec = s
                .split("sec = ")
                .nth(1)?
                .split(',')
                .next()?
                .trim()
                .parse::<u64>()
                .ok()?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_secs();
            now.checked_sub(sec)
        });
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod platform {
    use super::*;

    /// Nothing beyond what the standard library knows.
    pub fn fill(_f: &mut Facts) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_prefers_pretty_name_and_unquotes() {
        let debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n";
        assert_eq!(
            os_release_name(debian).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        let bare = "# comment\nNAME=Alpine\nVERSION_ID=3.20.1\n";
        assert_eq!(os_release_name(bare).as_deref(), Some("Alpine 3.20.1"));
        assert_eq!(os_release_name("NAME='Arch'\n").as_deref(), Some("Arch"));
        assert_eq!(
            os_release_name("PRETTY_NAME=\"A \\\"quoted\\\" one\"").as_deref(),
            Some("A \"quoted\" one")
        );
        assert_eq!(os_release_name("ID=x\n"), None);
        assert_eq!(os_release_name(""), None);
    }

    #[test]
    fn meminfo_reads_mem_total_in_bytes() {
        let text = "MemTotal:       16318480 kB\nMemFree:         1234 kB\n";
        assert_eq!(meminfo_total(text), Some(16_318_480 * 1024));
        assert_eq!(meminfo_total("MemFree: 1 kB\n"), None);
        assert_eq!(meminfo_total("MemTotal: lots kB\n"), None);
        assert_eq!(meminfo_total("MemTotal: 1 MB\n"), None);
        assert_eq!(meminfo_total("MemTotal: 99999999999999999999 kB\n"), None);
    }

    #[test]
    fn uptime_is_whole_seconds() {
        assert_eq!(uptime_secs("350735.47 234388.90\n"), Some(350_735));
        assert_eq!(uptime_secs("12 3\n"), Some(12));
        assert_eq!(uptime_secs(""), None);
        assert_eq!(uptime_secs("x y"), None);
    }

    #[test]
    fn collected_facts_name_this_host_and_build() {
        let f = collect();
        assert_eq!(f.os, crate::probe::host_os());
        assert_eq!(f.arch, std::env::consts::ARCH);
        assert_eq!(f.version, env!("CARGO_PKG_VERSION"));
        assert!(f.cpus.is_some_and(|n| n >= 1));
        #[cfg(target_os = "linux")]
        {
            assert!(!f.kernel.is_empty());
            assert!(f.memory_bytes.is_some_and(|m| m > 0));
            assert!(f.uptime_secs.is_some());
        }
    }
}
