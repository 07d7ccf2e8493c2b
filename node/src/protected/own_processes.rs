//! gsv's own processes as `/proc` shows them, which no file tool may open.
//!
//! Under `gsv up` the gateway runs in the node's process, so `/proc/self/mem` or
//! `/proc/self/environ` hold the admin token and every token that connected; a
//! standalone node's memory holds its credential. One file read there is worth
//! more than every other guard. So a descriptor on procfs is refused when it belongs
//! to a process that is:
//!
//! - this process (`/proc/self`, `/proc/thread-self`, `/proc/<pid>`, any of its
//!   threads `/proc/<tid>`, which `readdir` does not list but `open` reaches);
//! - one of its ancestors (the shell or service manager that started gsv, whose
//!   environment may hold a token);
//! - any process running the same gsv executable (another node, a gateway).
//!
//! `/proc/kcore` (the machine's memory, for a root node) is refused too. Other procfs
//! files (`/proc/cpuinfo`, `/proc/meminfo`, other programs' `/proc/<pid>/status`)
//! stay readable: the kernel's own permission checks apply to them.

use std::path::{Component, Path};

/// Whether `real` (the kernel's name for a descriptor on procfs) is gsv's own process
/// state. Unknown answers (a `status` that cannot be read) count as protected.
pub fn is_own_proc_path(real: &Path) -> bool {
    let mut names = real.components().filter_map(|c| match c {
        Component::Normal(n) => n.to_str(),
        _ => None,
    });
    // The first all-digit component is the process (or thread) id; procfs is mounted
    // at `/proc`, and wherever else it is, mount paths of digits alone are rare.
    let mut pid = None;
    let mut kcore = false;
    for n in names.by_ref() {
        if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
            pid = n.parse::<i32>().ok();
            break;
        }
        kcore = n == "kcore";
    }
    if kcore {
        return true;
    }
    let Some(pid) = pid else {
        // No process id: /proc/self resolves to one, so this is machine-wide state.
        return false;
    };
    match thread_group(pid) {
        Some(tgid) => is_own_process(tgid),
        None => true,
    }
}

/// The process a process or thread id belongs to (`Tgid:` of its `status`).
fn thread_group(id: i32) -> Option<i32> {
    status_field(id, "Tgid:")
}

/// The parent of a process (`PPid:` of its `status`).
fn parent(pid: i32) -> Option<i32> {
    status_field(pid, "PPid:")
}

/// A numeric field of `/proc/ID/status`, named with its colon.
fn status_field(id: i32, field: &str) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{id}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether `pid` is this process, one of its ancestors, or runs the same executable.
fn is_own_process(pid: i32) -> bool {
    let me = std::process::id() as i32;
    let mut cur = me;
    for _ in 0..64 {
        if cur == pid {
            return true;
        }
        match parent(cur) {
            Some(p) if p > 0 && p != cur => cur = p,
            _ => break,
        }
    }
    same_executable(pid)
}

/// Whether `pid` runs the file this process runs (by device and inode).
fn same_executable(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |p: String| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    match (id("/proc/self/exe".into()), id(format!("/proc/{pid}/exe"))) {
        (Some(mine), Some(theirs)) => mine == theirs,
        // Its executable cannot be read: not ours to read either (another user's).
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_state_is_recognised() {
        let me = std::process::id();
        assert!(is_own_proc_path(Path::new(&format!("/proc/{me}/mem"))));
        assert!(is_own_proc_path(Path::new(&format!(
            "/proc/{me}/task/{me}/environ"
        ))));
        assert!(is_own_proc_path(Path::new("/proc/kcore")));
        // A live thread of this process, by its own id (not listed in /proc, but open
        // reaches it).
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let link = std::fs::read_link("/proc/thread-self").unwrap();
            let tid: i32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
            tx.send(tid).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, me as i32);
        assert!(is_own_proc_path(Path::new(&format!("/proc/{tid}/mem"))));
        done_tx.send(()).unwrap();
        t.join().unwrap();
        let ppid = parent(me as i32).unwrap();
        assert!(is_own_proc_path(Path::new(&format!(
            "/proc/{ppid}/environ"
        ))));
        assert!(!is_own_proc_path(Path::new("/proc/cpuinfo")));
        // A child running another program is not ours.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let child_path = format!("/proc/{}/status", child.id());
        let theirs = is_own_proc_path(Path::new(&child_path));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!theirs);
    }
}
