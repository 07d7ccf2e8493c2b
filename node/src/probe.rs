//! Host facts for the gateway: OS, architecture, environment variable names, and which
//! binaries are on the PATH.
//!
//! Binaries are looked up on the PATH of the user's *login* environment (what their
//! shell sees), not the node process's own, which under a service manager is often
//! minimal. That PATH is read once per process by running the login shell; after that
//! every probe is a few `stat` calls. The gateway can ask for a re-probe at any time
//! (`node.probe`), e.g. after the user installs a tool.

use gsv_protocol::method::ProbeResult;
use gsv_protocol::{now_ms, Runtime};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::OnceCell;
use tracing::{debug, warn};

/// Binaries every node reports, whatever its tools.
pub const DEFAULT_BINS: &[&str] = &[
    "sh",
    "bash",
    "git",
    "python3",
    "node",
    "curl",
    "ssh",
    "docker",
    "nmap",
    "ping",
    "traceroute",
    "ip",
    "ss",
    "rg",
];
/// Most binaries tracked at once; names asked for beyond this are not added.
pub const MAX_TRACKED_BINS: usize = 256;
/// Longest binary name accepted.
pub const MAX_BIN_NAME_LEN: usize = 64;
/// How long reading the login shell's PATH may take.
const LOGIN_SHELL_TIMEOUT: Duration = Duration::from_secs(5);
const PATH_BEGIN: &str = "__GSV_PATH_BEGIN__";
const PATH_END: &str = "__GSV_PATH_END__";

/// Whether `name` may be probed: 1-64 characters of `[A-Za-z0-9._+-]` (so never a path).
pub fn valid_bin_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_BIN_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// `linux`, `macos`, `windows`, or the platform's own name elsewhere.
pub fn host_os() -> &'static str {
    std::env::consts::OS
}

/// The names (never the values) of the node process's environment variables, sorted.
pub fn env_names() -> Vec<String> {
    let names: BTreeSet<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    names.into_iter().collect()
}

/// The PATH of the user's login environment, read once per process.
pub async fn login_path() -> OsString {
    static LOGIN_PATH: OnceCell<OsString> = OnceCell::const_new();
    LOGIN_PATH.get_or_init(read_login_path).await.clone()
}

async fn read_login_path() -> OsString {
    let own = std::env::var_os("PATH").unwrap_or_default();
    let shell = std::env::var_os("SHELL")
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| OsString::from("/bin/sh"));
    // Markers keep whatever a login profile prints from being taken for the PATH.
    let script = format!(r#"printf '\n{PATH_BEGIN}%s{PATH_END}\n' "$PATH""#);
    let mut cmd = tokio::process::Command::new(&shell);
    cmd.arg("-lc")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(LOGIN_SHELL_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) => match extract_path(&String::from_utf8_lossy(&out.stdout)) {
            Some(path) => {
                debug!(shell = ?shell, "read the login shell's PATH");
                OsString::from(path)
            }
            None => {
                warn!(shell = ?shell, status = %out.status, "login shell printed no PATH; probing the node's own PATH");
                own
            }
        },
        Ok(Err(e)) => {
            warn!(shell = ?shell, error = %e, "could not run the login shell; probing the node's own PATH");
            own
        }
        Err(_) => {
            warn!(shell = ?shell, "login shell took over 5 s; probing the node's own PATH");
            own
        }
    }
}

fn extract_path(stdout: &str) -> Option<&str> {
    let start = stdout.rfind(PATH_BEGIN)? + PATH_BEGIN.len();
    let rest = &stdout[start..];
    let path = &rest[..rest.find(PATH_END)?];
    (!path.is_empty()).then_some(path)
}

/// Binary availability on the login PATH, cached between probes.
pub struct Probe {
    search_path: OsString,
    state: Mutex<Status>,
}

#[derive(Default)]
struct Status {
    bins: BTreeMap<String, bool>,
    updated_at: u64,
}

impl Probe {
    /// Reads the login PATH (once per process) and probes [`DEFAULT_BINS`] plus `extra`.
    pub async fn start(extra: impl IntoIterator<Item = String>) -> Probe {
        Probe::with_search_path(login_path().await, extra).await
    }

    /// Like [`Probe::start`] with an explicit search PATH.
    pub async fn with_search_path(
        search_path: OsString,
        extra: impl IntoIterator<Item = String>,
    ) -> Probe {
        let probe = Probe {
            search_path,
            state: Mutex::new(Status::default()),
        };
        let mut names: Vec<String> = DEFAULT_BINS.iter().map(|s| (*s).to_owned()).collect();
        names.extend(extra);
        probe.probe(&names).await;
        probe
    }

    /// Probes `bins` (or, if empty, everything tracked), merges the answers into the
    /// cached status and returns the whole status. Invalid names are skipped.
    pub async fn probe(&self, bins: &[String]) -> ProbeResult {
        let names: Vec<String> = if bins.is_empty() {
            self.lock().bins.keys().cloned().collect()
        } else {
            let mut wanted = BTreeSet::new();
            for name in bins {
                if valid_bin_name(name) {
                    wanted.insert(name.clone());
                } else {
                    debug!(name = %name.chars().take(80).collect::<String>(), "ignoring invalid binary name");
                }
            }
            wanted.into_iter().collect()
        };
        let search_path = self.search_path.clone();
        let found = tokio::task::spawn_blocking(move || {
            names
                .into_iter()
                .map(|name| {
                    let present = lookup(&search_path, &name).is_some();
                    (name, present)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_else(|e| {
            warn!(error = %e, "binary probe failed");
            Vec::new()
        });
        let mut state = self.lock();
        for (name, present) in found {
            let tracked = state.bins.len() < MAX_TRACKED_BINS || state.bins.contains_key(&name);
            if tracked {
                state.bins.insert(name, present);
            }
        }
        state.updated_at = now_ms();
        ProbeResult {
            host_bin_status: state.bins.clone(),
            host_bin_status_updated_at: state.updated_at,
        }
    }

    /// The runtime facts to declare in `connect`, with the cached binary status.
    pub fn runtime(&self) -> Runtime {
        let state = self.lock();
        Runtime {
            host_os: host_os().to_owned(),
            host_arch: std::env::consts::ARCH.to_owned(),
            host_env: env_names(),
            host_bin_status: state.bins.clone(),
            host_bin_status_updated_at: state.updated_at,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Status> {
        // Plain data; a panic elsewhere cannot leave it torn.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn lookup(search_path: &OsString, name: &str) -> Option<PathBuf> {
    which::which_in(name, Some(search_path), "/").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_names() {
        for ok in [
            "sh",
            "python3",
            "g++",
            "x86_64-linux-gnu-gcc",
            "a.b",
            &"a".repeat(64),
        ] {
            assert!(valid_bin_name(ok), "{ok}");
        }
        for bad in ["", "/bin/sh", "../sh", "a b", "sh;rm", "é", &"a".repeat(65)] {
            assert!(!valid_bin_name(bad), "{bad}");
        }
    }

    #[test]
    fn path_markers() {
        assert_eq!(
            extract_path("welcome!\n__GSV_PATH_BEGIN__/usr/bin:/bin__GSV_PATH_END__\n"),
            Some("/usr/bin:/bin")
        );
        assert_eq!(extract_path("no markers"), None);
        assert_eq!(extract_path("__GSV_PATH_BEGIN____GSV_PATH_END__"), None);
    }

    #[tokio::test]
    async fn login_path_finds_sh() {
        let path = login_path().await;
        assert!(!path.is_empty());
        assert!(lookup(&path, "sh").is_some());
    }

    #[tokio::test]
    async fn probing_tracks_defaults_extras_and_requests() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let probe = Probe::with_search_path(path, ["gsv-no-such-bin-1".to_owned()]).await;
        let rt = probe.runtime();
        assert_eq!(rt.host_os, std::env::consts::OS);
        assert_eq!(rt.host_arch, std::env::consts::ARCH);
        assert_eq!(rt.host_bin_status.get("sh"), Some(&true));
        assert_eq!(rt.host_bin_status.get("gsv-no-such-bin-1"), Some(&false));
        assert_eq!(rt.host_bin_status.len(), DEFAULT_BINS.len() + 1);
        assert!(rt.host_bin_status_updated_at > 0);
        let mut sorted = rt.host_env.clone();
        sorted.sort();
        assert_eq!(rt.host_env, sorted);
        assert!(rt.host_env.iter().any(|n| n == "PATH"));
        // Names only: no `=` and no value.
        assert!(rt.host_env.iter().all(|n| !n.contains('=')));

        let r = probe
            .probe(&["ls".into(), "bad/name".into(), "gsv-no-such-bin-2".into()])
            .await;
        assert_eq!(r.host_bin_status.get("ls"), Some(&true));
        assert_eq!(r.host_bin_status.get("gsv-no-such-bin-2"), Some(&false));
        assert!(!r.host_bin_status.contains_key("bad/name"));
        assert_eq!(r.host_bin_status.len(), DEFAULT_BINS.len() + 3);

        // An empty request re-probes everything tracked.
        let again = probe.probe(&[]).await;
        assert_eq!(again.host_bin_status, r.host_bin_status);
        assert!(again.host_bin_status_updated_at >= r.host_bin_status_updated_at);
    }

    #[tokio::test]
    async fn tracking_is_bounded() {
        let probe = Probe::with_search_path(OsString::new(), Vec::new()).await;
        let many: Vec<String> = (0..MAX_TRACKED_BINS + 50)
            .map(|i| format!("b{i}"))
            .collect();
        let r = probe.probe(&many).await;
        assert_eq!(r.host_bin_status.len(), MAX_TRACKED_BINS);
        assert!(r.host_bin_status.values().all(|v| !v));
    }
}
