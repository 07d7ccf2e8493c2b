//! Host facts for the gateway: OS, architecture, environment variable names, and which
//! binaries are on the PATH.
//!
//! Binaries are looked up on the PATH of the user's *login* environment (what their
//! shell sees), not the node process's own, which under a service manager is often
//! minimal. That environment ([`LoginEnv`]) is captured once per process by running
//! the login shell (`$SHELL -lc 'env -0'`), and its PATH is the login PATH followed by
//! any entries of the node's own PATH it lacks; the Bash tool runs every command with
//! the same environment, so `hostBinStatus` tells the truth about what a command can
//! run. After the capture every probe is a few `stat` calls. The gateway can ask for a
//! re-probe at any time (`node.probe`), e.g. after the user installs a tool.

use gsv_protocol::method::ProbeResult;
use gsv_protocol::{now_ms, Runtime};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
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
/// How long capturing the login shell's environment may take.
const LOGIN_SHELL_TIMEOUT: Duration = Duration::from_secs(5);
/// Markers around `env -0`'s output, so whatever a login profile prints is not taken
/// for a variable.
const ENV_BEGIN: &[u8] = b"__GSV_ENV_BEGIN__";
const ENV_END: &[u8] = b"__GSV_ENV_END__";
/// Variables that describe the capturing shell itself, not the user's environment.
const SHELL_STATE_VARS: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_"];

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

/// The user's shell: `$SHELL` when it is an absolute path to an executable file,
/// otherwise `/bin/sh`.
pub fn user_shell() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("SHELL")
        .map(PathBuf::from)
        .filter(|shell| {
            shell.is_absolute()
                && std::fs::metadata(shell)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// The environment commands run with: the user's login environment, captured once per
/// process (see [`login_env`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginEnv {
    /// Every variable, `PATH` included (already merged), sorted by name.
    pub vars: Vec<(OsString, OsString)>,
    /// The merged `PATH`: the login PATH, then the node's own entries it lacks.
    pub path: OsString,
    /// Whether the login shell answered (`false`: the node's own environment is used).
    pub from_login_shell: bool,
}

impl LoginEnv {
    /// Builds the environment from captured login variables (`None`: the capture
    /// failed) and the node's own `PATH`.
    pub fn new(login: Option<Vec<(OsString, OsString)>>, own_path: &OsStr) -> LoginEnv {
        let from_login_shell = login.is_some();
        let mut vars: BTreeMap<OsString, OsString> = match login {
            Some(vars) => vars.into_iter().collect(),
            None => std::env::vars_os().collect(),
        };
        for name in SHELL_STATE_VARS {
            vars.remove(OsStr::new(name));
        }
        let login_path = vars.get(OsStr::new("PATH")).cloned().unwrap_or_default();
        let path = merge_paths(&login_path, own_path);
        vars.insert(OsString::from("PATH"), path.clone());
        LoginEnv {
            vars: vars.into_iter().collect(),
            path,
            from_login_shell,
        }
    }

    /// This environment with `overrides` applied: `Some` sets a variable, `None`
    /// removes it. `PATH` is kept as merged unless overridden.
    pub fn with_overrides(&self, overrides: &[(OsString, Option<OsString>)]) -> LoginEnv {
        let mut vars: BTreeMap<OsString, OsString> = self.vars.iter().cloned().collect();
        for (name, value) in overrides {
            match value {
                Some(v) => vars.insert(name.clone(), v.clone()),
                None => vars.remove(name),
            };
        }
        let path = vars.get(OsStr::new("PATH")).cloned().unwrap_or_default();
        LoginEnv {
            vars: vars.into_iter().collect(),
            path,
            from_login_shell: self.from_login_shell,
        }
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }
}

/// `login` followed by the entries of `own` it lacks (empty entries, which would mean
/// "the current directory", are never added).
pub fn merge_paths(login: &OsStr, own: &OsStr) -> OsString {
    let mut entries: Vec<PathBuf> = std::env::split_paths(login)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    for entry in std::env::split_paths(own) {
        if !entry.as_os_str().is_empty() && !entries.contains(&entry) {
            entries.push(entry);
        }
    }
    // Entries came out of split_paths, so they contain no separator.
    std::env::join_paths(entries).unwrap_or_else(|_| login.to_owned())
}

/// The user's login environment, captured once per process by running
/// `$SHELL -lc 'env -0'` (stdin closed, 5 s at most). If that fails, the node's own
/// environment. Either way `PATH` is the merged one (see [`merge_paths`]).
pub async fn login_env() -> Arc<LoginEnv> {
    static LOGIN_ENV: OnceCell<Arc<LoginEnv>> = OnceCell::const_new();
    LOGIN_ENV
        .get_or_init(|| async {
            let own = std::env::var_os("PATH").unwrap_or_default();
            Arc::new(LoginEnv::new(capture_login_vars().await, &own))
        })
        .await
        .clone()
}

/// The PATH commands and probes search: [`LoginEnv::path`].
pub async fn login_path() -> OsString {
    login_env().await.path.clone()
}

async fn capture_login_vars() -> Option<Vec<(OsString, OsString)>> {
    let shell = user_shell();
    let begin = String::from_utf8_lossy(ENV_BEGIN);
    let end = String::from_utf8_lossy(ENV_END);
    let script = format!(
        "printf '%s\\0' {begin}; env -0 2>/dev/null || /usr/bin/env -0; printf '%s\\0' {end}"
    );
    let mut cmd = tokio::process::Command::new(&shell);
    cmd.arg("-lc")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            warn!(shell = %shell.display(), error = %e, "could not run the login shell; using the node's own environment");
            return None;
        }
    };
    let pgid = child.id();
    match tokio::time::timeout(LOGIN_SHELL_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => {
            let vars = parse_env_output(&out.stdout);
            match &vars {
                Some(vars) => {
                    debug!(shell = %shell.display(), vars = vars.len(), "captured the login environment")
                }
                None => {
                    warn!(shell = %shell.display(), status = %out.status, "the login shell printed no environment; using the node's own")
                }
            }
            vars
        }
        Ok(Err(e)) => {
            warn!(shell = %shell.display(), error = %e, "the login shell failed; using the node's own environment");
            None
        }
        Err(_) => {
            // Whatever the profile started goes with it.
            if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            warn!(shell = %shell.display(), "the login shell took over 5 s; using the node's own environment");
            None
        }
    }
}

/// The variables between the markers of the capture script's output.
fn parse_env_output(stdout: &[u8]) -> Option<Vec<(OsString, OsString)>> {
    use std::os::unix::ffi::OsStrExt;
    let mut begin = ENV_BEGIN.to_vec();
    begin.push(0);
    let start = stdout
        .windows(begin.len())
        .rposition(|w| w == begin.as_slice())?
        + begin.len();
    let mut vars = Vec::new();
    for entry in stdout[start..].split(|&b| b == 0) {
        if entry == ENV_END {
            return Some(vars);
        }
        let Some(eq) = entry.iter().position(|&b| b == b'=').filter(|&eq| eq > 0) else {
            continue;
        };
        vars.push((
            OsStr::from_bytes(&entry[..eq]).to_owned(),
            OsStr::from_bytes(&entry[eq + 1..]).to_owned(),
        ));
    }
    None
}

/// The far host a node works on (SSH, container), as the probe asks it: which
/// binaries it has and its facts. The transport implements it
/// (`remote/facts.rs`, for `remote::RemoteHost`); the probe names no transport.
#[async_trait::async_trait]
pub trait FarHost: Send + Sync {
    /// Which of `bins` the host has on its login `PATH`, and its facts, in one
    /// request; an error when it cannot be reached now.
    async fn facts(
        &self,
        bins: &[String],
    ) -> Result<HostFacts, Box<dyn std::error::Error + Send + Sync>>;
    /// How the node reaches it (`ssh`, `container`), for the facts' `backend`.
    fn backend(&self) -> &'static str;
    /// Its state in a word, reachable (`up`) or not, for the facts' `backendState`.
    fn state_word(&self, up: bool) -> &'static str;
    /// The host as logs name it.
    fn shown(&self) -> String;
}

/// A far host's facts and which of the asked binaries it has on its login `PATH`.
#[derive(Debug, Default, Clone)]
pub struct HostFacts {
    pub facts: gsv_protocol::inventory::Facts,
    pub bins: BTreeMap<String, bool>,
}

/// Binary availability on the login PATH, cached between probes.
pub struct Probe {
    search_path: OsString,
    state: Mutex<Status>,
    /// The host the tools work on, when it is not this machine (SSH, container):
    /// then every fact and binary is the far host's.
    remote: Option<Arc<dyn FarHost>>,
}

#[derive(Default)]
struct Status {
    bins: BTreeMap<String, bool>,
    updated_at: u64,
    /// The far host's facts, as last collected (remote hosts only).
    facts: Option<gsv_protocol::inventory::Facts>,
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
            remote: None,
        };
        let mut names: Vec<String> = DEFAULT_BINS.iter().map(|s| (*s).to_owned()).collect();
        names.extend(extra);
        probe.probe(&names).await;
        probe
    }

    /// A probe of the far host a node works on (SSH, container): binaries on that
    /// host's login `PATH`, that host's facts. A host that cannot be reached now
    /// leaves them unknown until the next probe.
    pub async fn remote(host: Arc<dyn FarHost>, extra: impl IntoIterator<Item = String>) -> Probe {
        let probe = Probe {
            search_path: OsString::new(),
            state: Mutex::new(Status::default()),
            remote: Some(host),
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
        if let Some(host) = &self.remote {
            return self.probe_remote(host.as_ref(), &names).await;
        }
        let search_path = self.search_path.clone();
        let (found, facts) = tokio::task::spawn_blocking(move || {
            let found = names
                .into_iter()
                .map(|name| {
                    let present = lookup(&search_path, &name).is_some();
                    (name, present)
                })
                .collect::<Vec<_>>();
            (found, crate::facts::collect())
        })
        .await
        .unwrap_or_else(|e| {
            warn!(error = %e, "binary probe failed");
            (Vec::new(), crate::facts::collect())
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
            login_profile: None,
            facts: Some(Box::new(facts)),
        }
    }

    async fn probe_remote(&self, host: &dyn FarHost, names: &[String]) -> ProbeResult {
        // A host the node cannot reach now (a stopped container, a dropped master
        // that cannot be made again) is reported as such, not from an old shell.
        let found = host.facts(names).await;
        let mut state = self.lock();
        match found {
            Ok(found) => {
                for (name, present) in found.bins {
                    let tracked =
                        state.bins.len() < MAX_TRACKED_BINS || state.bins.contains_key(&name);
                    if tracked {
                        state.bins.insert(name, present);
                    }
                }
                let mut facts = found.facts;
                facts.backend = host.backend().to_owned();
                facts.backend_state = host.state_word(true).to_owned();
                state.facts = Some(facts);
                state.updated_at = now_ms();
            }
            Err(e) => {
                warn!(host = %host.shown(), error = ?e, "could not probe the host");
                // What was known stays; the state says the host is not there now.
                let facts = state.facts.get_or_insert_with(Default::default);
                facts.backend = host.backend().to_owned();
                facts.backend_state = host.state_word(false).to_owned();
            }
        }
        ProbeResult {
            host_bin_status: state.bins.clone(),
            host_bin_status_updated_at: state.updated_at,
            login_profile: None,
            facts: state.facts.clone().map(Box::new),
        }
    }

    /// The runtime facts to declare in `connect`, with the cached binary status.
    pub fn runtime(&self) -> Runtime {
        let state = self.lock();
        if self.remote.is_some() {
            let facts = state.facts.clone().unwrap_or_default();
            return Runtime {
                host_os: facts.os.clone(),
                host_arch: facts.arch.clone(),
                host_env: Vec::new(),
                host_bin_status: state.bins.clone(),
                host_bin_status_updated_at: state.updated_at,
                login_profile: None,
                facts: Some(Box::new(facts)),
            };
        }
        Runtime {
            host_os: host_os().to_owned(),
            host_arch: std::env::consts::ARCH.to_owned(),
            host_env: env_names(),
            host_bin_status: state.bins.clone(),
            host_bin_status_updated_at: state.updated_at,
            login_profile: None,
            // A few small file reads (Linux), once per connect.
            facts: Some(Box::new(crate::facts::collect())),
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
    fn env_markers() {
        let out = b"welcome!\n__GSV_ENV_BEGIN__\0A=1\0B=x=y\nz\0=bad\0noeq\0__GSV_ENV_END__\0";
        let vars = parse_env_output(out).unwrap();
        assert_eq!(
            vars,
            [
                (OsString::from("A"), OsString::from("1")),
                (OsString::from("B"), OsString::from("x=y\nz")),
            ]
        );
        assert_eq!(parse_env_output(b"no markers"), None);
        assert_eq!(parse_env_output(b"__GSV_ENV_BEGIN__\0A=1\0"), None);
        assert_eq!(
            parse_env_output(b"__GSV_ENV_BEGIN__\0__GSV_ENV_END__\0"),
            Some(vec![])
        );
    }

    #[test]
    fn paths_merge_login_first() {
        let merged = merge_paths(OsStr::new("/a:/b"), OsStr::new("/b:/c::/a:/d"));
        assert_eq!(merged, OsString::from("/a:/b:/c:/d"));
        assert_eq!(merge_paths(OsStr::new(""), OsStr::new("/x")), "/x");
    }

    #[test]
    fn login_env_merges_path_and_drops_shell_state() {
        let login = vec![
            (OsString::from("PATH"), OsString::from("/login/bin")),
            (OsString::from("PWD"), OsString::from("/somewhere")),
            (OsString::from("HOME"), OsString::from("/home/u")),
        ];
        let env = LoginEnv::new(Some(login), OsStr::new("/own/bin:/login/bin"));
        assert!(env.from_login_shell);
        assert_eq!(env.path, OsString::from("/login/bin:/own/bin"));
        assert_eq!(env.get("PATH"), Some(OsStr::new("/login/bin:/own/bin")));
        assert_eq!(env.get("HOME"), Some(OsStr::new("/home/u")));
        assert_eq!(env.get("PWD"), None);
        let fallback = LoginEnv::new(None, OsStr::new("/own/bin"));
        assert!(!fallback.from_login_shell);
        assert!(fallback.get("PATH").is_some());
        let changed = env.with_overrides(&[
            (OsString::from("HOME"), None),
            (OsString::from("GIT_PAGER"), Some(OsString::from("cat"))),
        ]);
        assert_eq!(changed.get("HOME"), None);
        assert_eq!(changed.get("GIT_PAGER"), Some(OsStr::new("cat")));
        assert_eq!(changed.path, env.path);
    }

    #[tokio::test]
    async fn login_path_finds_sh() {
        let path = login_path().await;
        assert!(!path.is_empty());
        assert!(lookup(&path, "sh").is_some());
        // Nothing the node was started with is hidden by the login profile.
        let own = std::env::var_os("PATH").unwrap_or_default();
        let merged: Vec<PathBuf> = std::env::split_paths(&path).collect();
        for entry in std::env::split_paths(&own).filter(|p| !p.as_os_str().is_empty()) {
            assert!(merged.contains(&entry), "{entry:?} missing from {path:?}");
        }
        let env = login_env().await;
        assert_eq!(env.get("PATH"), Some(path.as_os_str()));
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
