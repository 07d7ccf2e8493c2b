//! A node as a systemd service: `gsv-node-<id>.service`, a system unit in
//! `/etc/systemd/system` (as root) or a user unit in `~/.config/systemd/user` with
//! lingering on, so it runs from boot without a login.
//!
//! The unit restarts the node when it fails (`Restart=on-failure`), except after exit
//! codes 2 and 3 — a usage error, a refused token or a rejected certificate — which a
//! restart cannot fix and would only repeat at the gateway. Output goes to the
//! journal (`journalctl -u gsv-node-<id>`). Stopping sends SIGTERM to the node, which
//! ends its background sessions itself (`KillMode=mixed`), or leaves them running with
//! `--keep-sessions-on-exit` (`KillMode=process`).

use super::spec::{Scope, ServiceSpec};
use super::{run, Changed, ServiceError};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether systemd is the init system here (sd_booted(3): `/run/systemd/system`).
pub fn booted() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// The unit's file name.
pub fn unit_name(id: &str) -> String {
    format!("gsv-node-{id}.service")
}

/// Where units of `scope` live.
pub fn unit_dir(scope: Scope) -> PathBuf {
    match scope {
        Scope::System => PathBuf::from("/etc/systemd/system"),
        Scope::User => std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::service::home().join(".config"))
            .join("systemd")
            .join("user"),
    }
}

/// The unit file for `spec`.
pub fn render(spec: &ServiceSpec) -> Result<String, ServiceError> {
    let exec = std::iter::once(spec.exe_str()?)
        .chain(spec.args.iter().map(String::as_str))
        .map(quote)
        .collect::<Result<Vec<_>, _>>()?
        .join(" ");
    let mut unit = format!(
        "# Written by `gsv node install` (gsv {version}); remove it with\n\
         # `gsv node uninstall --id {id}{scope_flag}`. Logs: journalctl {journal}-u {name}\n\
         [Unit]\n\
         Description=gsv node {id}\n",
        version = env!("CARGO_PKG_VERSION"),
        id = spec.id,
        name = unit_name(spec.id.as_str()),
        scope_flag = match spec.scope {
            Scope::System => " --system",
            Scope::User => " --user",
        },
        journal = match spec.scope {
            Scope::System => "",
            Scope::User => "--user ",
        },
    );
    if spec.scope == Scope::System {
        unit.push_str("After=network-online.target\nWants=network-online.target\n");
    }
    unit.push_str("\n[Service]\nType=exec\n");
    if spec.scope == Scope::System {
        // Sets HOME, USER and SHELL, which the node's login-environment probe reads.
        unit.push_str("User=root\n");
    }
    unit.push_str(&format!(
        "ExecStart={exec}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         # 2: usage, 3: token refused or certificate rejected; a restart cannot fix them.\n\
         RestartPreventExitStatus=2 3\n\
         KillMode={kill}\n\
         Environment=RUST_LOG=info\n\
         LimitNOFILE=65536\n\
         \n\
         [Install]\n\
         WantedBy={wanted}\n",
        kill = if spec.keep_sessions {
            "process"
        } else {
            "mixed"
        },
        wanted = match spec.scope {
            Scope::System => "multi-user.target",
            Scope::User => "default.target",
        },
    ));
    Ok(unit)
}

/// One word of an `ExecStart=` line: bare when it is plain, else double-quoted with
/// `\` and `"` escaped; `%` (specifiers) and `$` (variables) are doubled either way.
pub fn quote(word: &str) -> Result<String, ServiceError> {
    if word.chars().any(char::is_control) {
        return Err(ServiceError::ControlCharacter(word.to_owned()));
    }
    let escaped = word.replace('%', "%%").replace('$', "$$");
    let bare = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@+".contains(&b));
    if bare {
        Ok(escaped)
    } else {
        Ok(format!(
            "\"{}\"",
            escaped.replace('\\', r"\\").replace('"', "\\\"")
        ))
    }
}

/// `systemctl` for `scope`.
fn systemctl(scope: Scope) -> Command {
    let mut c = Command::new("systemctl");
    if scope == Scope::User {
        c.arg("--user");
        user_bus_env(&mut c);
    }
    c
}

/// A user's systemd is found through `$XDG_RUNTIME_DIR`, which a `su` or `sudo -u`
/// shell may lack: it is `/run/user/<uid>`.
fn user_bus_env(c: &mut Command) {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none_or(|v| v.is_empty()) {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        c.env("XDG_RUNTIME_DIR", format!("/run/user/{uid}"));
    }
}

/// Whether systemd can run a service of `scope` here; `Err` says why not. For a user
/// service this turns lingering on first (so the user's manager runs at all, and from
/// boot), unless `dry`.
pub fn usable(scope: Scope, dry: bool) -> Result<(), String> {
    if !booted() {
        return Err("systemd is not running here (no /run/systemd/system)".into());
    }
    if which("systemctl").is_none() {
        return Err("systemctl is not on PATH".into());
    }
    if scope == Scope::System || dry {
        return Ok(());
    }
    if let Err(e) = run(Command::new("loginctl").arg("enable-linger")) {
        eprintln!("warning: {e}: the node will run only while you are logged in");
    }
    // The user's manager may take a moment to start after lingering is turned on.
    for _ in 0..20 {
        let mut c = systemctl(Scope::User);
        c.arg("show-environment");
        if run(&mut c).is_ok() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Err("your systemd user manager does not answer (`systemctl --user` needs a login session or lingering)".into())
}

/// The first `name` on `$PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Writes the unit if it changed, enables it, and starts it (restarts it if the unit
/// or the executable changed).
pub fn apply(spec: &ServiceSpec, exe_changed: bool) -> Result<Changed, ServiceError> {
    let dir = unit_dir(spec.scope);
    let name = unit_name(spec.id.as_str());
    let path = dir.join(&name);
    let unit = render(spec)?;
    let unit_changed = std::fs::read_to_string(&path).ok().as_deref() != Some(unit.as_str());
    if unit_changed {
        std::fs::create_dir_all(&dir).map_err(ServiceError::io("create", &dir))?;
        super::write_file(&path, unit.as_bytes(), 0o644)?;
        eprintln!("wrote {}", path.display());
        run(systemctl(spec.scope).arg("daemon-reload"))?;
    } else {
        eprintln!("{} is unchanged", path.display());
    }
    run(systemctl(spec.scope).args(["enable", "--quiet", &name]))?;
    let verb = if unit_changed || exe_changed {
        "restart"
    } else {
        "start"
    };
    run(systemctl(spec.scope).args([verb, &name]))?;
    let how = match spec.scope {
        Scope::System => "",
        Scope::User => " --user",
    };
    eprintln!(
        "{verb}ed {name} (systemctl{how} status {name}; journalctl{how} -u {name})",
        verb = if verb == "start" { "start" } else { "restart" }
    );
    Ok(Changed(unit_changed || exe_changed))
}

/// Stops, disables and removes the unit of `id`, if there is one. Returns whether it
/// did anything.
pub fn remove(scope: Scope, id: &str) -> Result<bool, ServiceError> {
    let name = unit_name(id);
    let path = unit_dir(scope).join(&name);
    if !path.exists() {
        return Ok(false);
    }
    if booted() && which("systemctl").is_some() {
        if let Err(e) = run(systemctl(scope).args(["disable", "--now", "--quiet", &name])) {
            eprintln!("warning: {e}");
        }
    }
    std::fs::remove_file(&path).map_err(ServiceError::io("remove", &path))?;
    eprintln!("removed {}", path.display());
    if booted() && which("systemctl").is_some() {
        let _ = run(systemctl(scope).arg("daemon-reload"));
    }
    Ok(true)
}

/// The node ids with a unit in `scope`'s directory.
pub fn installed(scope: Scope) -> Vec<String> {
    super::ids_in(&unit_dir(scope), "gsv-node-", ".service")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_exec_start() {
        assert_eq!(quote("--id").unwrap(), "--id");
        assert_eq!(quote("/usr/local/bin/gsv").unwrap(), "/usr/local/bin/gsv");
        assert_eq!(quote("^ls( -l)?$").unwrap(), r#""^ls( -l)?$$""#);
        assert_eq!(quote("50%").unwrap(), r#""50%%""#);
        assert_eq!(quote(r#"a\b"c"#).unwrap(), r#""a\\b\"c""#);
        assert_eq!(quote("").unwrap(), r#""""#);
        assert!(quote("a\nb").is_err());
    }
}
