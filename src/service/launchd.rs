//! A node as a launchd job on macOS: `gsv.node.<id>`, a daemon in
//! `/Library/LaunchDaemons` (as root) or an agent in `~/Library/LaunchAgents`.
//!
//! launchd starts it at load and at boot (or login), restarts it when it exits with
//! an error (`KeepAlive` / `SuccessfulExit` false, at most every 10 s), and sends its
//! output to `node-<id>.log` in the node's data directory.

use super::spec::{Scope, ServiceSpec};
use super::{run, Changed, ServiceError};
use std::path::PathBuf;
use std::process::Command;

/// The job's label.
pub fn label(id: &str) -> String {
    format!("gsv.node.{id}")
}

/// Where jobs of `scope` are defined.
pub fn plist_dir(scope: Scope) -> PathBuf {
    match scope {
        Scope::System => PathBuf::from("/Library/LaunchDaemons"),
        Scope::User => crate::service::home().join("Library").join("LaunchAgents"),
    }
}

/// The property list for `spec`.
pub fn render(spec: &ServiceSpec) -> Result<String, ServiceError> {
    let args = std::iter::once(spec.exe_str()?)
        .chain(spec.args.iter().map(String::as_str))
        .map(|a| Ok(format!("        <string>{}</string>\n", escape(a)?)))
        .collect::<Result<String, ServiceError>>()?;
    let log = escape(super::spec::text(&spec.log_file())?)?;
    Ok(format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by gsv node install (gsv {version}); gsv node uninstall removes it. -->
<plist version="1.0">
<dict>
    <key>Label</key>
    <string>{label}</string>
    <key>ProgramArguments</key>
    <array>
{args}    </array>
    <key>EnvironmentVariables</key>
    <dict>
        <key>RUST_LOG</key>
        <string>info</string>
    </dict>
    <key>RunAtLoad</key>
    <true/>
    <key>KeepAlive</key>
    <dict>
        <key>SuccessfulExit</key>
        <false/>
    </dict>
    <key>ThrottleInterval</key>
    <integer>10</integer>
    <key>AbandonProcessGroup</key>
    <{keep}/>
    <key>StandardOutPath</key>
    <string>{log}</string>
    <key>StandardErrorPath</key>
    <string>{log}</string>
</dict>
</plist>
"#,
        version = env!("CARGO_PKG_VERSION"),
        label = label(spec.id.as_str()),
        keep = if spec.keep_sessions { "true" } else { "false" },
    ))
}

/// XML text escaping; control characters cannot be in a plist string.
fn escape(s: &str) -> Result<String, ServiceError> {
    if s.chars().any(char::is_control) {
        return Err(ServiceError::ControlCharacter(s.to_owned()));
    }
    Ok(s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;"))
}

/// launchd's domain for `scope`: `system`, or `gui/<uid>`.
fn domain(scope: Scope) -> String {
    match scope {
        Scope::System => "system".to_owned(),
        // SAFETY: getuid has no preconditions and cannot fail.
        Scope::User => format!("gui/{}", unsafe { libc::getuid() }),
    }
}

/// Whether launchd can run the node here.
pub fn usable() -> Result<(), String> {
    if !cfg!(target_os = "macos") {
        return Err("launchd is macOS's; this is not macOS".into());
    }
    Ok(())
}

/// Writes the plist if it changed and (re)loads the job.
pub fn apply(spec: &ServiceSpec, exe_changed: bool) -> Result<Changed, ServiceError> {
    let dir = plist_dir(spec.scope);
    let label = label(spec.id.as_str());
    let path = dir.join(format!("{label}.plist"));
    let plist = render(spec)?;
    let changed = std::fs::read_to_string(&path).ok().as_deref() != Some(plist.as_str());
    if changed {
        std::fs::create_dir_all(&dir).map_err(ServiceError::io("create", &dir))?;
        super::write_file(&path, plist.as_bytes(), 0o644)?;
        eprintln!("wrote {}", path.display());
    } else {
        eprintln!("{} is unchanged", path.display());
    }
    let domain = domain(spec.scope);
    let target = format!("{domain}/{label}");
    let loaded = run(Command::new("launchctl").args(["print", &target])).is_ok();
    let path_str = super::spec::text(&path)?;
    if loaded && (changed || exe_changed) {
        let _ = run(Command::new("launchctl").args(["bootout", &target]));
        run(Command::new("launchctl").args(["bootstrap", &domain, path_str]))?;
        eprintln!("reloaded {label}");
    } else if loaded {
        run(Command::new("launchctl").args(["kickstart", &target]))?;
        eprintln!("{label} is loaded");
    } else {
        run(Command::new("launchctl").args(["bootstrap", &domain, path_str]))?;
        eprintln!("loaded {label} (log: {})", spec.log_file().display());
    }
    Ok(Changed(changed || exe_changed))
}

/// Unloads and removes the job of `id`, if there is one.
pub fn remove(scope: Scope, id: &str) -> Result<bool, ServiceError> {
    let label = label(id);
    let path = plist_dir(scope).join(format!("{label}.plist"));
    if !path.exists() {
        return Ok(false);
    }
    if cfg!(target_os = "macos") {
        let target = format!("{}/{label}", domain(scope));
        if let Err(e) = run(Command::new("launchctl").args(["bootout", &target])) {
            eprintln!("warning: {e}");
        }
    }
    std::fs::remove_file(&path).map_err(ServiceError::io("remove", &path))?;
    eprintln!("removed {}", path.display());
    Ok(true)
}

/// The node ids with a plist in `scope`'s directory.
pub fn installed(scope: Scope) -> Vec<String> {
    super::ids_in(&plist_dir(scope), "gsv.node.", ".plist")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::NodeId;

    #[test]
    fn plist_names_the_program_its_arguments_and_the_log() {
        let spec = ServiceSpec {
            id: NodeId::parse("web1").unwrap(),
            scope: Scope::User,
            exe: PathBuf::from("/Users/me/.local/bin/gsv"),
            args: vec!["node".into(), "--approve-shell".into(), "^a&b<c>$".into()],
            data: PathBuf::from("/Users/me/.local/share/gsv"),
            keep_sessions: false,
        };
        let plist = render(&spec).unwrap();
        assert!(plist.contains("<string>gsv.node.web1</string>"));
        assert!(plist.contains(
            "        <string>/Users/me/.local/bin/gsv</string>\n        <string>node</string>\n"
        ));
        assert!(plist.contains("<string>^a&amp;b&lt;c&gt;$</string>"));
        assert!(plist.contains("<string>/Users/me/.local/share/gsv/node-web1.log</string>"));
        assert!(plist.contains("<key>AbandonProcessGroup</key>\n    <false/>"));
        // An XML comment cannot hold "--".
        for comment in plist.lines().filter_map(|l| l.strip_prefix("<!--")) {
            let inner = comment.strip_suffix("-->").unwrap();
            assert!(!inner.contains("--"), "{comment}");
        }
        let mut bad = spec.clone();
        bad.args.push("a\u{7}".into());
        assert!(render(&bad).is_err());
    }
}
