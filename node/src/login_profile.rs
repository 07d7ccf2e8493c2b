//! Whether the files a node's login shell reads changed since the node recorded them.
//!
//! The node captures its login environment once per process by running
//! `$SHELL -lc 'env -0'` ([`crate::probe::login_env`]), and its Bash tool runs every
//! command with that environment. So whoever can write a login profile (`~/.profile`,
//! `~/.bashrc`, ...) — an agent allowed only `Write` on an unconfined node is enough —
//! has code run as the node's user at the node's next start, and through `BASH_ENV` /
//! `ENV` before every `bash -c` / `sh -c` command of every agent after it.
//!
//! This module detects that; it prevents nothing. It takes a fingerprint of those
//! files (SHA-256 of each, absent ones recorded as absent, so a new file is a change)
//! and of the `BASH_ENV` / `ENV` values, keeps the first one as a baseline in the
//! node's data directory (`node-<ID>.login-profile`, 0600; the file tools never touch
//! it), and compares at every start and every `node.probe`. A difference is logged and
//! reported to the gateway as `runtime.loginProfile`, which `gsv nodes` shows;
//! `gsv node --accept-login-profile` records the baseline again. The profile files are
//! fingerprinted *before* the login shell runs, so a profile that rewrites itself while
//! it runs is still caught.

use crate::probe::LoginEnv;
use gsv_protocol::{now_ms, LoginProfileChange};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use thiserror::Error;
use tracing::{info, warn};

/// Bytes of a file that are hashed; its length is recorded whole.
pub const MAX_HASHED_BYTES: u64 = 1 << 20;
/// Files taken from one directory (`/etc/profile.d/*.sh`, fish's `conf.d`).
pub const MAX_DIR_FILES: usize = 256;
/// Largest baseline file read back.
const MAX_BASELINE_BYTES: u64 = 4 << 20;
/// Version of the baseline file's format.
const BASELINE_VERSION: u32 = 1;
/// Variables naming a file that `bash -c` (`BASH_ENV`) or `sh -c` (`ENV`, dash and
/// POSIX shells) source before every command.
const FILE_VARIABLES: &[&str] = &["BASH_ENV", "ENV"];
/// Files every user's login shell may read.
const SYSTEM_FILES: &[&str] = &[
    "/etc/profile",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/environment",
    "/etc/zshenv",
    "/etc/zsh/zshenv",
    "/etc/zprofile",
    "/etc/zsh/zprofile",
];
/// Directories whose files of one extension `/etc/profile` sources.
const SYSTEM_DIRS: &[(&str, &str)] = &[("/etc/profile.d", "sh")];
/// sh and bash files in the home directory.
const HOME_FILES: &[&str] = &[".profile", ".bash_profile", ".bash_login", ".bashrc"];
/// zsh files, in `$ZDOTDIR` (default: the home directory).
const ZSH_FILES: &[&str] = &[".zshenv", ".zprofile", ".zshrc", ".zlogin"];

/// What one checked file (or variable) looked like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum EntryState {
    /// No such file, or the variable is unset.
    Absent,
    /// A regular file: SHA-256 of its first [`MAX_HASHED_BYTES`] bytes, and its length.
    File { sha256: String, len: u64 },
    /// A directory, FIFO, device or socket (never opened, never read).
    NotRegular,
    /// It exists but could not be read.
    Unreadable,
    /// A variable's value, by its SHA-256.
    Set { sha256: String },
}

/// What the login shell reads, one entry per absolute path (or `$NAME` for a
/// variable).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(BTreeMap<String, EntryState>);

impl Fingerprint {
    /// Records `state` for `key` (an absolute path or `$NAME`).
    pub fn insert(&mut self, key: impl Into<String>, state: EntryState) {
        self.0.insert(key.into(), state);
    }

    /// The keys whose state differs from `baseline`'s, sorted. A key one side lacks
    /// counts as absent there: a file created since is a change, one that was never
    /// there and still is not is none.
    pub fn changed_since(&self, baseline: &Fingerprint) -> Vec<String> {
        let keys: BTreeSet<&String> = self.0.keys().chain(baseline.0.keys()).collect();
        keys.into_iter()
            .filter(|key| {
                let now = self.0.get(*key).unwrap_or(&EntryState::Absent);
                let then = baseline.0.get(*key).unwrap_or(&EntryState::Absent);
                now != then
            })
            .cloned()
            .collect()
    }
}

/// Where the node's user's profile files are.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// `$HOME`, else the user's entry in the password database.
    pub home: Option<PathBuf>,
    /// `$ZDOTDIR` (zsh's files), when absolute.
    pub zdotdir: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (fish's files), when absolute.
    pub config_home: Option<PathBuf>,
}

impl Places {
    /// The places as the node process's environment gives them (what its login shell
    /// starts with).
    pub fn of_process() -> Places {
        // Not deprecated from Rust 1.86 on: `$HOME` when set and not empty, else the
        // password database.
        #[allow(deprecated)]
        let home = std::env::home_dir().filter(|h| h.is_absolute());
        let absolute = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        Places {
            home,
            zdotdir: absolute("ZDOTDIR"),
            config_home: absolute("XDG_CONFIG_HOME"),
        }
    }

    /// Every profile file to check, and the directories whose files (of an extension)
    /// are checked too.
    fn files_and_dirs(&self) -> (Vec<PathBuf>, Vec<(PathBuf, &'static str)>) {
        let mut files: Vec<PathBuf> = SYSTEM_FILES.iter().map(PathBuf::from).collect();
        let mut dirs: Vec<(PathBuf, &'static str)> = SYSTEM_DIRS
            .iter()
            .map(|(d, ext)| (PathBuf::from(d), *ext))
            .collect();
        if let Some(home) = &self.home {
            files.extend(HOME_FILES.iter().map(|f| home.join(f)));
        }
        if let Some(zdir) = self.zdotdir.as_ref().or(self.home.as_ref()) {
            files.extend(ZSH_FILES.iter().map(|f| zdir.join(f)));
        }
        let config = self
            .config_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".config")));
        if let Some(config) = config {
            files.push(config.join("fish/config.fish"));
            dirs.push((config.join("fish/conf.d"), "fish"));
        }
        (files, dirs)
    }

    /// How `key` is shown: a path under the home directory as `~/...`.
    pub fn display(&self, key: &str) -> String {
        if let Some(home) = &self.home {
            if let Ok(rest) = Path::new(key).strip_prefix(home) {
                if !rest.as_os_str().is_empty() {
                    return format!("~/{}", rest.display());
                }
            }
        }
        key.to_owned()
    }

    /// The file a `BASH_ENV` / `ENV` value names, when it can be told without running
    /// a shell: an absolute path, or one starting with `~/`, `$HOME/` or `${HOME}/`.
    fn expand(&self, value: &OsStr) -> Option<PathBuf> {
        let text = value.to_str()?;
        for prefix in ["~/", "$HOME/", "${HOME}/"] {
            if let Some(rest) = text.strip_prefix(prefix) {
                return self.home.as_ref().map(|h| h.join(rest));
            }
        }
        let path = PathBuf::from(value);
        path.is_absolute().then_some(path)
    }
}

/// The profile files as they are now (blocking: a few `stat`s and reads).
pub fn snapshot_files(places: &Places) -> Fingerprint {
    let (files, dirs) = places.files_and_dirs();
    let mut fp = Fingerprint::default();
    for file in files {
        let state = file_state(&file);
        fp.insert(file.to_string_lossy(), state);
    }
    for (dir, ext) in dirs {
        for file in dir_files(&dir, ext) {
            let state = file_state(&file);
            fp.insert(file.to_string_lossy(), state);
        }
    }
    fp
}

/// Adds `BASH_ENV` and `ENV` from the login environment, and the files they name, to
/// `fp` (blocking).
pub fn add_env_files(fp: &mut Fingerprint, places: &Places, env: &LoginEnv) {
    for name in FILE_VARIABLES {
        let value = env.get(name);
        let state = match value {
            Some(v) => EntryState::Set {
                sha256: hex(&Sha256::digest(v.as_encoded_bytes())),
            },
            None => EntryState::Absent,
        };
        fp.insert(format!("${name}"), state);
        if let Some(file) = value.and_then(|v| places.expand(v)) {
            let state = file_state(&file);
            fp.insert(file.to_string_lossy(), state);
        }
    }
}

/// The files of `dir` whose names end in `.ext`, sorted, at most [`MAX_DIR_FILES`].
fn dir_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension() == Some(OsStr::new(ext)))
        .collect();
    files.sort();
    files.truncate(MAX_DIR_FILES);
    files
}

/// What `path` is now. Never blocks on a FIFO and never opens a device: only a
/// regular file is opened (non-blocking, and checked again on the descriptor), and at
/// most [`MAX_HASHED_BYTES`] of it are read.
pub fn file_state(path: &Path) -> EntryState {
    use rustix::fs::{Mode, OFlags};
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return EntryState::NotRegular,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return EntryState::Absent
        }
        Err(_) => return EntryState::Unreadable,
    }
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOENT) => return EntryState::Absent,
        Err(_) => return EntryState::Unreadable,
    };
    let len = match file.metadata() {
        Ok(meta) if meta.is_file() => meta.len(),
        Ok(_) => return EntryState::NotRegular,
        Err(_) => return EntryState::Unreadable,
    };
    let mut hasher = Sha256::new();
    let mut buf = [0u8; 16 * 1024];
    let mut limited = file.take(MAX_HASHED_BYTES);
    loop {
        match limited.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return EntryState::Unreadable,
        }
    }
    EntryState::File {
        sha256: hex(&hasher.finalize()),
        len,
    }
}

fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

/// Why the baseline could not be read or kept.
#[derive(Debug, Error)]
pub enum BaselineError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_BASELINE_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path} is not a login-profile baseline: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path} has baseline format {found}; this node reads {BASELINE_VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("encoding the baseline: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The baseline file's contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Baseline {
    pub version: u32,
    /// When it was recorded (ms since the epoch).
    pub recorded_at: u64,
    pub entries: Fingerprint,
}

impl Baseline {
    pub fn new(entries: Fingerprint) -> Baseline {
        Baseline {
            version: BASELINE_VERSION,
            recorded_at: now_ms(),
            entries,
        }
    }

    /// The baseline kept in `path`; `Ok(None)` if there is none yet.
    pub fn load(path: &Path) -> Result<Option<Baseline>, BaselineError> {
        let read_err = |source| BaselineError::Read {
            path: path.to_owned(),
            source,
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_err(e)),
        };
        let mut text = Vec::new();
        file.take(MAX_BASELINE_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(read_err)?;
        if text.len() as u64 > MAX_BASELINE_BYTES {
            return Err(BaselineError::TooLarge {
                path: path.to_owned(),
            });
        }
        let baseline: Baseline =
            serde_json::from_slice(&text).map_err(|source| BaselineError::Parse {
                path: path.to_owned(),
                source,
            })?;
        if baseline.version != BASELINE_VERSION {
            return Err(BaselineError::Version {
                path: path.to_owned(),
                found: baseline.version,
            });
        }
        Ok(Some(baseline))
    }

    /// Writes the baseline to `path` (0600, atomically, its directory 0700).
    pub fn store(&self, path: &Path) -> Result<(), BaselineError> {
        let mut text = serde_json::to_vec_pretty(self)?;
        text.push(b'\n');
        crate::private_file::write_private(path, &text).map_err(|source| BaselineError::Write {
            path: path.to_owned(),
            source,
        })
    }
}

/// The check a node runs at start and on every `node.probe`, and what it last found.
pub struct LoginProfileCheck {
    places: Places,
    env: Arc<LoginEnv>,
    /// What the current state is compared with; `None` when the stored baseline could
    /// not be read (then every file that exists counts as changed).
    baseline: Option<Baseline>,
    status: Mutex<Option<LoginProfileChange>>,
    /// A node whose tools run on another host makes no check (its own shell runs
    /// none of them).
    off: bool,
}

impl LoginProfileCheck {
    /// No check: finds nothing, ever (nodes that work on another host).
    pub fn off() -> LoginProfileCheck {
        LoginProfileCheck {
            places: Places::default(),
            env: Arc::new(LoginEnv::new(None, std::ffi::OsStr::new(""))),
            baseline: None,
            status: Mutex::new(None),
            off: true,
        }
    }

    /// Compares the profile files (`files`, taken before the login shell ran) and the
    /// login environment's `BASH_ENV` / `ENV` with the baseline in `baseline_file`,
    /// which is recorded when there is none yet or `accept` is set. Without a file
    /// the baseline is the state at this start, kept in memory (blocking).
    pub fn start(
        baseline_file: Option<&Path>,
        accept: bool,
        places: Places,
        mut files: Fingerprint,
        env: Arc<LoginEnv>,
    ) -> LoginProfileCheck {
        add_env_files(&mut files, &places, &env);
        let now = files;
        let loaded = match baseline_file {
            Some(path) if !accept => Baseline::load(path),
            _ => Ok(None),
        };
        let record = |why: &str| {
            let baseline = Baseline::new(now.clone());
            if let Some(path) = baseline_file {
                match baseline.store(path) {
                    Ok(()) => {
                        info!(file = %path.display(), entries = baseline.entries.0.len(), "{why}")
                    }
                    Err(e) => {
                        warn!(error = %e, "could not store the login-profile baseline; it is kept in memory until the node stops")
                    }
                }
            }
            Some(baseline)
        };
        let baseline = match loaded {
            Ok(Some(baseline)) => Some(baseline),
            Ok(None) if accept => {
                record("--accept-login-profile: the login profile as it is now is the new baseline")
            }
            Ok(None) => record("recorded the login-profile baseline"),
            Err(e) => {
                warn!(error = %e, "the login-profile baseline cannot be read: every profile file counts as changed until the node is started with --accept-login-profile");
                None
            }
        };
        let check = LoginProfileCheck {
            places,
            env,
            baseline,
            status: Mutex::new(None),
            off: false,
        };
        check.judge(&now);
        check
    }

    /// Fingerprints everything again and compares it with the baseline; returns (and
    /// keeps) the change, if any (blocking).
    pub fn recheck(&self) -> Option<LoginProfileChange> {
        if self.off {
            return None;
        }
        let mut now = snapshot_files(&self.places);
        add_env_files(&mut now, &self.places, &self.env);
        self.judge(&now)
    }

    /// The last check's finding, as the node reports it.
    pub fn status(&self) -> Option<Box<LoginProfileChange>> {
        self.lock().clone().map(Box::new)
    }

    fn judge(&self, now: &Fingerprint) -> Option<LoginProfileChange> {
        let empty = Fingerprint::default();
        let (against, since) = match &self.baseline {
            Some(b) => (&b.entries, b.recorded_at),
            None => (&empty, 0),
        };
        let changed: Vec<String> = now
            .changed_since(against)
            .iter()
            .map(|key| self.places.display(key))
            .collect();
        let finding = (!changed.is_empty()).then(|| LoginProfileChange {
            changed,
            since,
            checked_at: now_ms(),
        });
        if let Some(f) = &finding {
            warn!(
                changed = ?f.changed,
                baseline_recorded_at_ms = f.since,
                "the login profile changed since its baseline: what it runs or sets reaches every Bash command of this node; review it, then restart the node with --accept-login-profile"
            );
        }
        *self.lock() = finding.clone();
        finding
    }

    fn lock(&self) -> MutexGuard<'_, Option<LoginProfileChange>> {
        // Plain data; a panic elsewhere cannot leave it torn.
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gsv-lp-{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn file(sha: &str) -> EntryState {
        EntryState::File {
            sha256: sha.into(),
            len: 1,
        }
    }

    #[test]
    fn comparison_treats_a_missing_entry_as_absent() {
        let mut base = Fingerprint::default();
        base.insert("/h/.profile", file("aa"));
        base.insert("/h/.bashrc", EntryState::Absent);
        base.insert("/h/.zshrc", file("cc"));
        base.insert("$BASH_ENV", EntryState::Absent);

        let mut same = base.clone();
        // Never there, still not there, and not listed now: no change.
        same.insert("/etc/profile.d/x.sh", EntryState::Absent);
        assert!(same.changed_since(&base).is_empty());
        assert!(base.changed_since(&base).is_empty());

        let mut now = base.clone();
        now.insert("/h/.profile", file("ab")); // edited
        now.insert("/h/.bashrc", file("bb")); // created
        now.insert("/h/.zshrc", EntryState::Absent); // removed
        now.insert("/etc/profile.d/evil.sh", file("dd")); // new key, present
        now.insert(
            "$BASH_ENV",
            EntryState::Set {
                sha256: "ee".into(),
            },
        );
        assert_eq!(
            now.changed_since(&base),
            [
                "$BASH_ENV",
                "/etc/profile.d/evil.sh",
                "/h/.bashrc",
                "/h/.profile",
                "/h/.zshrc"
            ]
        );
        // A key only the baseline has, present there: gone now.
        let mut fewer = Fingerprint::default();
        fewer.insert("/h/.bashrc", EntryState::Absent);
        assert_eq!(fewer.changed_since(&base), ["/h/.profile", "/h/.zshrc"]);
        // Same bytes hashed, another length: a change.
        assert_ne!(
            file("aa"),
            EntryState::File {
                sha256: "aa".into(),
                len: 2
            }
        );
    }

    #[test]
    fn file_states_are_bounded_and_never_block() {
        let dir = temp("states");
        let f = dir.join("f");
        std::fs::write(&f, b"export A=1\n").unwrap();
        let EntryState::File { sha256, len } = file_state(&f) else {
            panic!("a regular file");
        };
        assert_eq!(len, 11);
        assert_eq!(sha256, hex(&Sha256::digest(b"export A=1\n")));
        assert_eq!(file_state(&dir.join("missing")), EntryState::Absent);
        assert_eq!(file_state(&f.join("below-a-file")), EntryState::Absent);
        assert_eq!(file_state(&dir), EntryState::NotRegular);
        assert_eq!(file_state(Path::new("/dev/null")), EntryState::NotRegular);
        // A FIFO with no writer: reported, not waited on.
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            assert_eq!(file_state(&fifo), EntryState::NotRegular);
        }
        // Only the first MiB is hashed; the length is whole.
        let big = dir.join("big");
        let mut content = vec![b'a'; (MAX_HASHED_BYTES + 10) as usize];
        std::fs::write(&big, &content).unwrap();
        let first = file_state(&big);
        *content.last_mut().unwrap() = b'b';
        std::fs::write(&big, &content).unwrap();
        assert_eq!(file_state(&big), first);
        content.push(b'c');
        std::fs::write(&big, &content).unwrap();
        assert_ne!(file_state(&big), first);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn names_under_home_are_shown_with_a_tilde_and_env_files_are_followed() {
        let home = temp("home");
        let places = Places {
            home: Some(home.clone()),
            zdotdir: None,
            config_home: None,
        };
        let key = home.join(".profile").to_string_lossy().into_owned();
        assert_eq!(places.display(&key), "~/.profile");
        assert_eq!(places.display("/etc/profile"), "/etc/profile");
        assert_eq!(places.display("$BASH_ENV"), "$BASH_ENV");
        assert_eq!(
            places.expand(OsStr::new("$HOME/.env.sh")),
            Some(home.join(".env.sh"))
        );
        assert_eq!(
            places.expand(OsStr::new("~/.env.sh")),
            Some(home.join(".env.sh"))
        );
        assert_eq!(places.expand(OsStr::new("relative.sh")), None);

        let (files, dirs) = places.files_and_dirs();
        for f in [".profile", ".bashrc", ".zshenv", ".config/fish/config.fish"] {
            assert!(files.contains(&home.join(f)), "{f}");
        }
        assert!(files.contains(&PathBuf::from("/etc/profile")));
        assert!(dirs.contains(&(PathBuf::from("/etc/profile.d"), "sh")));

        let target = home.join("hook.sh");
        let env = LoginEnv::new(
            Some(vec![(
                OsString::from("BASH_ENV"),
                OsString::from("$HOME/hook.sh"),
            )]),
            OsStr::new("/bin"),
        );
        let mut before = Fingerprint::default();
        add_env_files(&mut before, &places, &env);
        std::fs::write(&target, b"echo hi\n").unwrap();
        let mut after = Fingerprint::default();
        add_env_files(&mut after, &places, &env);
        let changed: Vec<String> = after
            .changed_since(&before)
            .iter()
            .map(|k| places.display(k))
            .collect();
        assert_eq!(changed, ["~/hook.sh"]);
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn the_baseline_is_recorded_once_compared_and_accepted_again() {
        let home = temp("check");
        let data = temp("data");
        let baseline = data.join("node-n1.login-profile");
        let places = Places {
            home: Some(home.clone()),
            zdotdir: None,
            config_home: None,
        };
        let env = Arc::new(LoginEnv::new(Some(Vec::new()), OsStr::new("/bin")));
        let start = |accept: bool| {
            LoginProfileCheck::start(
                Some(&baseline),
                accept,
                places.clone(),
                snapshot_files(&places),
                Arc::clone(&env),
            )
        };

        // First start: recorded, nothing to report.
        let first = start(false);
        assert_eq!(first.status(), None);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&baseline).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // A planted profile: seen by a re-probe of the running node and at the next start.
        std::fs::write(home.join(".profile"), b"export X=1\n").unwrap();
        let found = first.recheck().expect("a change");
        assert_eq!(found.changed, ["~/.profile"]);
        let next = start(false);
        let status = next.status().expect("a change");
        assert_eq!(status.changed, ["~/.profile"]);
        let recorded = Baseline::load(&baseline).unwrap().unwrap();
        assert_eq!(status.since, recorded.recorded_at);
        assert!(status.checked_at >= status.since);

        // Accepted: the new state is the baseline, at this start and the next.
        let accepted = start(true);
        assert_eq!(accepted.status(), None);
        assert_eq!(start(false).status(), None);

        // Put back as it was: a change again (against the accepted state).
        std::fs::remove_file(home.join(".profile")).unwrap();
        assert_eq!(
            accepted.recheck().map(|c| c.changed),
            Some(vec!["~/.profile".to_owned()])
        );

        // A baseline that cannot be read is never replaced silently: every existing
        // file counts as changed until accepted.
        std::fs::write(home.join(".bashrc"), b"alias x=y\n").unwrap();
        std::fs::write(&baseline, b"not json").unwrap();
        let broken = start(false).status().expect("a change");
        assert!(
            broken.changed.contains(&"~/.bashrc".to_owned()),
            "{broken:?}"
        );
        assert_eq!(broken.since, 0);
        assert_eq!(std::fs::read(&baseline).unwrap(), b"not json");
        assert_eq!(start(true).status(), None);

        // Without a data directory: the baseline is this start, in memory.
        let memory = LoginProfileCheck::start(
            None,
            false,
            places.clone(),
            snapshot_files(&places),
            Arc::clone(&env),
        );
        assert_eq!(memory.status(), None);
        std::fs::write(home.join(".bashrc"), b"alias x=z\n").unwrap();
        assert_eq!(
            memory.recheck().map(|c| c.changed),
            Some(vec!["~/.bashrc".to_owned()])
        );
        std::fs::remove_dir_all(home).unwrap();
        std::fs::remove_dir_all(data).unwrap();
    }
}
