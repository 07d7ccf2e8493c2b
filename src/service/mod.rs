//! Running a node as a service: what `gsv node install` and `gsv node uninstall`
//! write and start.
//!
//! One [`ServiceSpec`] (executable, arguments, data directory) is handed to whichever
//! manager runs the node here: [`systemd`] (Linux), [`launchd`] (macOS), or, where
//! neither can, [`background`] (a detached process with a pid file). The arguments
//! come from `gsv node`'s own flags ([`argv`]), with the token in a 0600 file.
//! [`exe`] puts the executable in place.

pub mod argv;
pub mod background;
mod error;
pub mod exe;
pub mod launchd;
pub mod spec;
pub mod systemd;

pub use error::ServiceError;
pub use spec::{Scope, ServiceSpec};

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether a step changed anything (the service was started or restarted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changed(pub bool);

/// What runs the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd,
    Background,
}

impl Manager {
    pub fn as_str(self) -> &'static str {
        match self {
            Manager::Systemd => "systemd",
            Manager::Launchd => "launchd",
            Manager::Background => "background",
        }
    }

    /// The manager for `--service`: an explicit one if it is usable here (else an
    /// error; `dry`, for `--print`, takes it as it is), or with `auto` launchd on
    /// macOS, systemd where it runs, else the background with the reason why (`dry`:
    /// no side effects while finding out).
    pub fn choose(
        asked: Option<Manager>,
        scope: Scope,
        dry: bool,
    ) -> Result<(Manager, Option<String>), ServiceError> {
        let check = |m: Manager| match m {
            Manager::Systemd => systemd::usable(scope, dry),
            Manager::Launchd => launchd::usable(),
            Manager::Background => Ok(()),
        };
        if let Some(m) = asked {
            if dry {
                // `--print` shows what that manager would be given, wherever it runs.
                return Ok((m, None));
            }
            return check(m)
                .map(|()| (m, None))
                .map_err(|why| ServiceError::Unavailable {
                    manager: m.as_str(),
                    why,
                });
        }
        let preferred = if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        };
        match check(preferred) {
            Ok(()) => Ok((preferred, None)),
            Err(why) => Ok((Manager::Background, Some(why))),
        }
    }

    /// Installs (or updates) and starts the service for `spec`.
    pub fn apply(self, spec: &ServiceSpec, exe_changed: bool) -> Result<Changed, ServiceError> {
        match self {
            Manager::Systemd => systemd::apply(spec, exe_changed),
            Manager::Launchd => launchd::apply(spec, exe_changed),
            Manager::Background => background::apply(spec, exe_changed),
        }
    }

    /// What the manager would be given for `spec` (for `--print`).
    pub fn definition(self, spec: &ServiceSpec) -> Result<String, ServiceError> {
        match self {
            Manager::Systemd => systemd::render(spec),
            Manager::Launchd => launchd::render(spec),
            Manager::Background => Ok(format!("{}\n", spec.foreground_command())),
        }
    }

    /// Where that definition goes.
    pub fn definition_path(self, spec: &ServiceSpec) -> PathBuf {
        match self {
            Manager::Systemd => {
                systemd::unit_dir(spec.scope).join(systemd::unit_name(spec.id.as_str()))
            }
            Manager::Launchd => launchd::plist_dir(spec.scope)
                .join(format!("{}.plist", launchd::label(spec.id.as_str()))),
            Manager::Background => ServiceSpec::pid_file(&spec.data, &spec.id),
        }
    }
}

/// The user's home directory (`$HOME`, else `/`).
pub fn home() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Runs a service manager's command; a failure carries its stderr.
pub fn run(cmd: &mut Command) -> Result<(), ServiceError> {
    let shown = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| ServiceError::Command {
            command: shown.clone(),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(ServiceError::Command {
        command: shown,
        detail: format!("{}: {}", out.status, crate::terminal::safe(stderr.trim())),
    })
}

/// Writes a file atomically (temp file, sync, rename) with `mode`.
pub fn write_file(path: &Path, content: &[u8], mode: u32) -> Result<(), ServiceError> {
    use std::io::Write;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("gsv"),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(mode);
        }
        let mut f = opts.open(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        ServiceError::Io {
            what: "write",
            path: path.to_owned(),
            source,
        }
    })
}

/// The node ids of the files `PREFIX<id>SUFFIX` in `dir`.
pub fn ids_in(dir: &Path, prefix: &str, suffix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            let id = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
            gsv_protocol::NodeId::parse(id).ok().map(|_| id.to_owned())
        })
        .collect();
    ids.sort();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_by_file_name() {
        let dir = std::env::temp_dir().join(format!("gsv-ids-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in [
            "gsv-node-web1.service",
            "gsv-node-db.service",
            "gsv-node-Bad.service",
            "other.service",
        ] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        assert_eq!(ids_in(&dir, "gsv-node-", ".service"), ["db", "web1"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_explicit_manager_that_cannot_run_is_an_error() {
        if !cfg!(target_os = "macos") {
            let e = Manager::choose(Some(Manager::Launchd), Scope::User, false).unwrap_err();
            assert_eq!(e.code(), "invalid_args");
            // `--print` shows it anyway.
            assert_eq!(
                Manager::choose(Some(Manager::Launchd), Scope::User, true).unwrap(),
                (Manager::Launchd, None)
            );
        }
        assert_eq!(
            Manager::choose(Some(Manager::Background), Scope::User, true).unwrap(),
            (Manager::Background, None)
        );
    }

    #[test]
    fn a_failed_command_reports_its_stderr() {
        let e = run(Command::new("sh").args(["-c", "echo nope >&2; exit 3"])).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("`sh -c echo nope >&2; exit 3` failed"),
            "{text}"
        );
        assert!(text.contains("nope"), "{text}");
        assert!(run(&mut Command::new("true")).is_ok());
    }
}
