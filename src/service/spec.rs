//! What a node service runs, whatever runs it: the executable, its arguments, and the
//! files that belong to it in the node's data directory.

use super::ServiceError;
use gsv_protocol::NodeId;
use std::path::{Path, PathBuf};

/// A system service (as root) or one user's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    System,
    User,
}

impl Scope {
    /// `--system`, `--user`, or by who runs the command: root gets a system service.
    pub fn choose(system: bool, user: bool) -> Scope {
        match (system, user) {
            (true, _) => Scope::System,
            (_, true) => Scope::User,
            _ if is_root() => Scope::System,
            _ => Scope::User,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::System => "system",
            Scope::User => "user",
        }
    }
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The data directory of a node service: `--data`, else `/var/lib/gsv` for a system
/// service, else the user's data directory (as `gsv node` resolves it).
pub fn default_data(scope: Scope, flag: Option<&Path>) -> PathBuf {
    match (flag, scope) {
        (Some(d), _) => d.to_owned(),
        (None, Scope::System) => PathBuf::from("/var/lib/gsv"),
        (None, Scope::User) => crate::resolve::data_dir(None),
    }
}

/// Everything a service manager needs to run one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSpec {
    pub id: NodeId,
    pub scope: Scope,
    /// Absolute path of the gsv executable the service runs.
    pub exe: PathBuf,
    /// Its arguments: `node --gateway ... --token-file ...`.
    pub args: Vec<String>,
    /// The node's data directory (absolute).
    pub data: PathBuf,
    /// `--keep-sessions-on-exit`: the manager must leave the node's background
    /// sessions running when it stops the node.
    pub keep_sessions: bool,
}

impl ServiceSpec {
    /// The 0600 file the join token (or credential) is kept in, for `--token-file`.
    pub fn token_file(data: &Path, id: &NodeId) -> PathBuf {
        data.join(format!("node-{id}.token"))
    }

    /// Where the node's output goes when no journal takes it (launchd, background).
    pub fn log_file(&self) -> PathBuf {
        self.data.join(format!("node-{}.log", self.id))
    }

    /// The pid file of a node started in the background.
    pub fn pid_file(data: &Path, id: &NodeId) -> PathBuf {
        data.join(format!("node-{id}.pid"))
    }

    /// The executable as text.
    pub fn exe_str(&self) -> Result<&str, ServiceError> {
        text(&self.exe)
    }

    /// The command that runs the node in the foreground, for a shell.
    pub fn foreground_command(&self) -> String {
        std::iter::once(self.exe.to_string_lossy().into_owned())
            .chain(self.args.iter().cloned())
            .map(|a| sh_word(&a))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A path as UTF-8 text, or [`ServiceError::NotUtf8`].
pub fn text(path: &Path) -> Result<&str, ServiceError> {
    path.to_str()
        .ok_or_else(|| ServiceError::NotUtf8(path.to_owned()))
}

/// `s` as one shell word: bare when it needs no quoting, else single-quoted.
pub fn sh_word(s: &str) -> String {
    let bare = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@+%".contains(&b));
    if bare {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        assert_eq!(sh_word("--id"), "--id");
        assert_eq!(sh_word("/usr/local/bin/gsv"), "/usr/local/bin/gsv");
        assert_eq!(sh_word("^ls( -l)?$"), "'^ls( -l)?$'");
        assert_eq!(sh_word("it's"), r"'it'\''s'");
        assert_eq!(sh_word(""), "''");
    }

    #[test]
    fn scope_by_flag_then_user() {
        assert_eq!(Scope::choose(true, false), Scope::System);
        assert_eq!(Scope::choose(false, true), Scope::User);
        let by_user = if is_root() {
            Scope::System
        } else {
            Scope::User
        };
        assert_eq!(Scope::choose(false, false), by_user);
        assert_eq!(
            default_data(Scope::System, None),
            PathBuf::from("/var/lib/gsv")
        );
        assert_eq!(
            default_data(Scope::User, Some(Path::new("/d"))),
            PathBuf::from("/d")
        );
    }
}
