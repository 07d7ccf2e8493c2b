//! Killing a command's whole process group: SIGTERM, a grace period, then SIGKILL.
//!
//! Every command runs as the leader of its own process group (pipes:
//! `process_group(0)`; pty: `setsid`, which makes a new group too), so everything it
//! starts — `sleep 1000 &`, a build's worker processes — shares the group and can be
//! signalled at once with `killpg`. Killing only the shell would leave those
//! grandchildren running and holding the output pipes open.
//!
//! Termination sends SIGTERM to the group, then checks every 20 ms whether any
//! member is left; if one still is after [`KILL_GRACE`], the group gets SIGKILL. The
//! waiting happens on a dedicated thread, so it runs even when it is started from a
//! `Drop` (a cancelled call) or while the async runtime shuts down. A group with no
//! member left is never signalled again, so a recycled process id cannot be hit.

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::time::{Duration, Instant};
use tracing::{debug, warn};

/// How long a group has to exit after SIGTERM before it gets SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How often the group is checked during the grace period.
const POLL: Duration = Duration::from_millis(20);

/// Whether any process of group `pgid` still exists (zombies included).
pub fn group_alive(pgid: u32) -> bool {
    let Some(pid) = to_pid(pgid) else {
        return false;
    };
    // Signal 0 checks existence and permission without sending anything.
    !matches!(killpg(pid, None), Err(Errno::ESRCH))
}

/// Sends SIGTERM to group `pgid` now and SIGKILL after `grace` if any member is left.
/// Returns at once; the grace period runs on its own thread.
pub fn terminate(pgid: u32, grace: Duration) {
    let Some(pid) = to_pid(pgid) else {
        return;
    };
    match killpg(pid, Signal::SIGTERM) {
        Ok(()) => debug!(pgid, "sent SIGTERM to the process group"),
        Err(Errno::ESRCH) => return,
        Err(e) => warn!(pgid, error = %e, "could not signal the process group"),
    }
    let spawned = std::thread::Builder::new()
        .name(format!("gsv-kill-{pgid}"))
        .spawn(move || escalate(pid, grace));
    if let Err(e) = spawned {
        warn!(pgid, error = %e, "no thread for the grace period; sending SIGKILL now");
        let _ = killpg(pid, Signal::SIGKILL);
    }
}

/// Sends SIGKILL to group `pgid` at once (node shutdown, after the grace period).
pub fn kill_now(pgid: u32) {
    if let Some(pid) = to_pid(pgid) {
        let _ = killpg(pid, Signal::SIGKILL);
    }
}

fn escalate(pid: Pid, grace: Duration) {
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(killpg(pid, None), Err(Errno::ESRCH)) {
            return;
        }
        std::thread::sleep(POLL);
    }
    match killpg(pid, Signal::SIGKILL) {
        Ok(()) => debug!(pgid = pid.as_raw(), "sent SIGKILL to the process group"),
        Err(Errno::ESRCH) => {}
        Err(e) => warn!(pgid = pid.as_raw(), error = %e, "could not SIGKILL the process group"),
    }
}

/// The group id as a `Pid`; 0 and 1 are refused (they would mean "my own group" and
/// init's).
fn to_pid(pgid: u32) -> Option<Pid> {
    i32::try_from(pgid)
        .ok()
        .filter(|&p| p > 1)
        .map(Pid::from_raw)
}

/// The name of signal number `signal` (`SIGTERM`), or `SIG{n}` for one nix does not
/// know.
pub fn signal_name(signal: i32) -> String {
    Signal::try_from(signal)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("SIG{signal}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_bad_ids() {
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(200), "SIG200");
        assert!(to_pid(0).is_none());
        assert!(to_pid(1).is_none());
        assert!(to_pid(u32::MAX).is_none());
        assert!(!group_alive(0));
    }
}
