//! Every process a token's sessions start carries its owner in the environment, so a
//! revocation can end them however they detached.
//!
//! A session is one process group, killed as a group. A command that leaves it —
//! `setsid sleep 1000 &`, `nohup … &` after `setsid`, a daemon that double-forks — is
//! no longer in the group, and used to outlive its token's revocation. The
//! environment is inherited across `fork`, `exec`, `setsid` and daemonizing alike, so
//! each session's command gets [`OWNER_VAR`]`=<token id>` (set after the caller's own
//! `env`, which cannot replace it), and ending a token's sessions also ends every
//! process whose environment carries that token's tag ([`end_tagged`]): SIGTERM, then
//! SIGKILL after [`super::group::KILL_GRACE`] for those still tagged.
//!
//! What survives, and why: a process that removes the variable from its own
//! environment before it detaches (`env -u GSV_SESSION_OWNER setsid …`) is no longer
//! recognisable, and processes of another OS user (after `sudo`) cannot be read or
//! signalled by the node. Run nodes as a dedicated user and deny `class:run` to
//! agents whose processes must never outlive them.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::time::Duration;
use tracing::{debug, info};

/// The variable that names a session's owner (its token id).
pub const OWNER_VAR: &str = "GSV_SESSION_OWNER";

/// The override that tags a session's processes with `owner`.
pub fn tag(owner: &str) -> (OsString, Option<OsString>) {
    (OWNER_VAR.into(), Some(owner.into()))
}

/// The processes (other than this one) whose environment tags them with one of
/// `owners`.
fn tagged(owners: &[String]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let wanted: Vec<Vec<u8>> = owners
        .iter()
        .map(|o| format!("{OWNER_VAR}={o}").into_bytes())
        .collect();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me && *pid > 1)
        .filter(|pid| carries(*pid, &wanted))
        .collect()
}

/// Whether process `pid`'s environment holds one of `wanted` (`NAME=value`).
fn carries(pid: i32, wanted: &[Vec<u8>]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| {
            env.split(|b| *b == 0)
                .any(|var| wanted.iter().any(|w| w == var))
        })
        .unwrap_or(false)
}

/// Ends every process tagged with one of `owners`: SIGTERM now, SIGKILL after `grace`
/// for those still tagged (a pid reused meanwhile is not tagged). Returns how many
/// were signalled; the grace period runs on its own thread.
pub fn end_tagged(owners: &[String], grace: Duration) -> usize {
    if owners.is_empty() {
        return 0;
    }
    let pids = tagged(owners);
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
    }
    if pids.is_empty() {
        return 0;
    }
    info!(
        count = pids.len(),
        "ending processes a revoked token's sessions left behind"
    );
    let owners = owners.to_vec();
    let signalled = pids.len();
    let spawned = std::thread::Builder::new()
        .name("gsv-end-tagged".into())
        .spawn(move || {
            std::thread::sleep(grace);
            for pid in tagged(&owners) {
                debug!(pid, "SIGKILL to a process left by a revoked token");
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        });
    if spawned.is_err() {
        // No thread for the grace period: no grace.
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
    }
    signalled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_tagged_process_is_found_and_ended() {
        let owner = format!("test-{}", std::process::id());
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "30"])
            .env(OWNER_VAR, &owner)
            .spawn()
            .expect("setsid sleep");
        let pid = child.id() as i32;
        // setsid may fork: the sleep is found by its tag either way.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while tagged(std::slice::from_ref(&owner)).is_empty() {
            assert!(std::time::Instant::now() < deadline, "not found");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!tagged(&["someone-else".to_owned()]).contains(&pid));
        assert!(end_tagged(std::slice::from_ref(&owner), Duration::from_millis(200)) >= 1);
        let _ = child.wait();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !tagged(std::slice::from_ref(&owner)).is_empty() {
            assert!(std::time::Instant::now() < deadline, "still running");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
