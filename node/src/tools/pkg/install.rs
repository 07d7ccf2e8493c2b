//! `pkg_install`: install packages with the node's package manager, or, with
//! `dryRun: true`, say exactly what would be installed and change nothing.
//!
//! Every call first runs the manager's own simulation (apt: `apt-get -s install -y
//! --no-install-recommends -- PKGS`; dnf: `install --assumeno`; apk: `add
//! --simulate`; brew: `install --dry-run`) and reads it into the packages it would
//! install (with versions, and the version replaced for an upgrade) and remove. That
//! plan is what [`Tool::plan`] puts in the operator's approval request, what a dry run
//! answers, and what a real install reports next to the manager's exit code and the
//! end of its output.
//!
//! Installing needs root (except brew, which refuses it): a node not running as
//! root uses `sudo -n` if sudo is set up to run without a password, and otherwise
//! answers with a tool error saying so; nothing ever prompts (stdin is closed).

use super::manager::{self, Kind, Manager, PkgError};
use super::run;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::host_run::{self, HostCommand};
use crate::tools::output;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// Most packages in one call.
pub const MAX_PACKAGES: usize = 50;
/// Most bytes of the manager's output read.
pub const MAX_INSTALL_OUTPUT: usize = 1024 * 1024;
/// How much of the end of a real install's output the result carries.
pub const OUTPUT_TAIL_BYTES: usize = 16 * 1024;
/// How long the simulation may take.
const PLAN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an install may take (bounded by the call's deadline too).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(1800);
/// The environment every manager run gets on top of `LC_ALL=C`.
const APT_ENV: &[(&str, &str)] = &[
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("APT_LISTCHANGES_FRONTEND", "none"),
];
const BREW_ENV: &[(&str, &str)] = &[
    ("HOMEBREW_NO_AUTO_UPDATE", "1"),
    ("HOMEBREW_NO_ANALYTICS", "1"),
    ("HOMEBREW_NO_INSTALL_CLEANUP", "1"),
];

/// One package the manager would install, upgrade or remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Planned {
    pub name: String,
    /// The version it would install (or the one removed); absent when the manager
    /// does not say (brew).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The version installed now, for an upgrade.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
}

/// What the simulation says would happen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub install: Vec<Planned>,
    pub remove: Vec<Planned>,
    /// The manager's own summary line (apt: `0 upgraded, 4 newly installed, …`).
    pub summary: String,
}

impl Plan {
    /// The plan in a few lines, for the operator and the model.
    pub fn render(&self, manager: Kind, requested: &[String]) -> String {
        let one = |p: &Planned| match (&p.current, &p.version) {
            (Some(c), Some(v)) => format!("{} {c} -> {v}", p.name),
            (None, Some(v)) => format!("{} {v}", p.name),
            _ => p.name.clone(),
        };
        let list = |ps: &[Planned]| {
            if ps.is_empty() {
                "nothing".to_owned()
            } else {
                ps.iter().map(one).collect::<Vec<_>>().join(", ")
            }
        };
        let mut text = format!(
            "{} install {}: would install or upgrade {} package(s): {}; would remove {}: {}",
            manager.name(),
            requested.join(" "),
            self.install.len(),
            list(&self.install),
            self.remove.len(),
            list(&self.remove),
        );
        if !self.summary.is_empty() {
            text.push_str(&format!(" ({})", self.summary));
        }
        text
    }
}

/// Reads `apt-get -s install` output: `Inst name [current] (version release [arch])`
/// and `Remv name [version]` lines, and the `N upgraded, …` summary.
pub fn parse_apt(text: &str) -> Plan {
    let mut plan = Plan::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Inst ") {
            let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let rest = rest.trim_start();
            let (current, rest) = match rest.strip_prefix('[') {
                Some(r) => match r.split_once(']') {
                    Some((c, r)) => (Some(c.to_owned()), r.trim_start()),
                    None => (None, rest),
                },
                None => (None, rest),
            };
            let version = rest
                .strip_prefix('(')
                .and_then(|r| r.split_whitespace().next())
                .map(|v| v.trim_end_matches(')').to_owned());
            plan.install.push(Planned {
                name: name.to_owned(),
                version,
                current,
            });
        } else if let Some(rest) = line.strip_prefix("Remv ") {
            let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let version = rest
                .trim()
                .strip_prefix('[')
                .and_then(|r| r.split(']').next())
                .map(str::to_owned);
            plan.remove.push(Planned {
                name: name.to_owned(),
                version,
                current: None,
            });
        } else if line.contains(" upgraded, ") && line.contains(" newly installed") {
            plan.summary = line.trim().to_owned();
        }
    }
    plan
}

/// Reads `dnf install --assumeno` output: the rows of the `Installing`, `Upgrading`
/// and `Removing` sections of its transaction table (`name arch version repo size`),
/// and the `Install N Packages` summary lines. Written from dnf's documented format;
/// not tested against a real dnf.
pub fn parse_dnf(text: &str) -> Plan {
    let mut plan = Plan::default();
    let mut section: Option<bool> = None; // Some(true): install, Some(false): remove
    let mut summary = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.ends_with(':') {
            let head = t.trim_end_matches(':').to_ascii_lowercase();
            section = if head.starts_with("install") || head.starts_with("upgrad") {
                Some(true)
            } else if head.starts_with("remov") {
                Some(false)
            } else {
                None
            };
            continue;
        }
        if t.starts_with("Transaction Summary") {
            section = None;
            continue;
        }
        if ["Install ", "Upgrade ", "Remove "]
            .iter()
            .any(|p| t.starts_with(p))
            && t.contains("Package")
        {
            summary.push(t.to_owned());
            continue;
        }
        let fields: Vec<&str> = t.split_whitespace().collect();
        if let (Some(kind), true) = (section, fields.len() >= 5) {
            let p = Planned {
                name: fields[0].to_owned(),
                version: Some(fields[2].to_owned()),
                current: None,
            };
            if kind {
                plan.install.push(p);
            } else {
                plan.remove.push(p);
            }
        }
    }
    plan.summary = summary.join(", ");
    plan
}

/// Reads `apk add --simulate` output: `(1/3) Installing name (version)`,
/// `Upgrading name (old -> new)`, `Purging name (version)`. Not tested against a real
/// apk.
pub fn parse_apk(text: &str) -> Plan {
    let mut plan = Plan::default();
    for line in text.lines() {
        let t = line.trim();
        let t = match t.strip_prefix('(').and_then(|r| r.split_once(") ")) {
            Some((_, rest)) => rest,
            None => continue,
        };
        let (verb, rest) = t.split_once(' ').unwrap_or((t, ""));
        let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let inner = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or("");
        let (current, version) = match inner.split_once(" -> ") {
            Some((a, b)) => (Some(a.to_owned()), Some(b.to_owned())),
            None => (None, (!inner.is_empty()).then(|| inner.to_owned())),
        };
        let p = Planned {
            name: name.to_owned(),
            version,
            current,
        };
        match verb {
            "Installing" | "Upgrading" | "Downgrading" => plan.install.push(p),
            "Purging" | "Removing" => plan.remove.push(p),
            _ => {}
        }
    }
    plan.summary = format!("{} to install or upgrade", plan.install.len());
    plan
}

/// Reads `brew install --dry-run` output: the names after `==> Would install N
/// formula(e):` (and `==> Would install N dependencies`). Not tested against a real
/// brew.
pub fn parse_brew(text: &str) -> Plan {
    let mut plan = Plan::default();
    let mut listing = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(head) = t.strip_prefix("==> ") {
            listing = head.starts_with("Would install");
            if listing && plan.summary.is_empty() {
                plan.summary = head.trim_end_matches(':').to_owned();
            }
            continue;
        }
        if listing {
            for word in t.split_whitespace() {
                plan.install.push(Planned {
                    name: word.to_owned(),
                    version: None,
                    current: None,
                });
            }
        }
    }
    plan
}

/// The validated arguments of one call.
#[derive(Debug, Clone)]
struct Request {
    packages: Vec<String>,
    dry_run: bool,
}

fn parse_request(args: &Value, kind: Kind) -> Result<Request, PkgError> {
    let a = Args::new(args, &["packages", "dryRun"])?;
    let dry_run = a.bool("dryRun")?.unwrap_or(false);
    let shape = || {
        PkgError::Shape(format!(
            "\"packages\" must be an array of 1 to {MAX_PACKAGES} package names"
        ))
    };
    let list = args
        .get("packages")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty() && l.len() <= MAX_PACKAGES)
        .ok_or_else(shape)?;
    let mut packages = Vec::with_capacity(list.len());
    for item in list {
        let name = item.as_str().ok_or_else(shape)?;
        let name = manager::package_name(kind, name)?;
        if !packages.contains(&name) {
            packages.push(name);
        }
    }
    Ok(Request { packages, dry_run })
}

/// The manager's arguments to simulate (`dry`) or do the install.
fn install_args(kind: Kind, packages: &[String], dry: bool) -> Vec<String> {
    let head: &[&str] = match (kind, dry) {
        (Kind::Apt, true) => &["-s", "-q", "install", "-y", "--no-install-recommends", "--"],
        (Kind::Apt, false) => &["-q", "install", "-y", "--no-install-recommends", "--"],
        (Kind::Dnf, true) => &["install", "--assumeno", "--"],
        (Kind::Dnf, false) => &["install", "-y", "--"],
        (Kind::Apk, true) => &["add", "--simulate", "--"],
        (Kind::Apk, false) => &["add", "--"],
        (Kind::Brew, true) => &["install", "--dry-run", "--"],
        (Kind::Brew, false) => &["install", "--"],
    };
    head.iter()
        .map(|s| (*s).to_owned())
        .chain(packages.iter().cloned())
        .collect()
}

fn env(kind: Kind) -> &'static [(&'static str, &'static str)] {
    match kind {
        Kind::Apt => APT_ENV,
        Kind::Brew => BREW_ENV,
        _ => &[],
    }
}

/// Runs the simulation and reads it.
async fn simulate(m: &Manager, packages: &[String], ctx: &ToolContext) -> Result<Plan, String> {
    let args = install_args(m.kind, packages, true);
    let out = run(
        &m.install,
        args,
        env(m.kind),
        PLAN_TIMEOUT,
        MAX_INSTALL_OUTPUT,
        ctx,
    )
    .await
    .map_err(|e| e.to_string())?;
    let text = out.stdout_text();
    let plan = match m.kind {
        Kind::Apt => parse_apt(&text),
        Kind::Dnf => parse_dnf(&text),
        Kind::Apk => parse_apk(&text),
        Kind::Brew => parse_brew(&text),
    };
    // dnf's --assumeno ends with status 1 after printing its transaction.
    let dnf_declined = m.kind == Kind::Dnf && out.status == Some(1) && !out.timed_out;
    if !out.success() && !dnf_declined {
        return Err(format!(
            "the dry run ({} {}) failed: {}",
            m.kind.name(),
            packages.join(" "),
            out.failure()
        ));
    }
    Ok(plan)
}

/// Why a real install cannot get the privileges it needs.
#[derive(Debug, thiserror::Error)]
#[error("installing with {manager} needs root: the node runs as uid {uid}, and sudo {why}; run the node as root or allow its user `sudo -n {program}`")]
struct NotRoot {
    manager: &'static str,
    uid: u32,
    why: &'static str,
    program: String,
}

/// The program and leading arguments that run the manager with the privileges it
/// needs: itself when root (or brew), else `sudo -n --` when sudo works without a
/// password.
async fn privileged(m: &Manager, ctx: &ToolContext) -> Result<(PathBuf, Vec<String>), NotRoot> {
    let uid = nix::unistd::geteuid().as_raw();
    if !m.kind.needs_root() || uid == 0 {
        return Ok((m.install.clone(), Vec::new()));
    }
    let not_root = |why| NotRoot {
        manager: m.kind.name(),
        uid,
        why,
        program: m.install.display().to_string(),
    };
    let Some((_, sudo)) = host_run::find(&["sudo"], &ctx.workspace) else {
        return Err(not_root("is not installed"));
    };
    let probe = HostCommand::new(
        &sudo,
        vec!["-n".into(), "true".into()],
        Duration::from_secs(10),
        4096,
    );
    match host_run::run(&probe, &ctx.cancel).await {
        Ok(out) if out.success() => Ok((
            sudo,
            vec!["-n".into(), "--".into(), m.install.display().to_string()],
        )),
        _ => Err(not_root(
            "cannot be used without a password (sudo -n true failed)",
        )),
    }
}

/// `pkg_install`'s structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallOutput {
    pub manager: &'static str,
    pub dry_run: bool,
    /// The packages asked for.
    pub requested: Vec<String>,
    #[serde(flatten)]
    pub plan: Plan,
    /// The manager's exit code (real installs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The end of the manager's output (real installs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(skip_serializing_if = "crate::tools::output::is_false")]
    pub truncated: bool,
}

/// The `pkg_install` tool.
pub struct PkgInstall;

#[async_trait::async_trait]
impl Tool for PkgInstall {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "pkg_install".to_owned(),
            description: "Install packages with the node's package manager (apt, dnf, apk \
                          or brew). Needs root or passwordless sudo on the node."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "packages": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1, "maxLength": manager::MAX_NAME_LEN},
                        "minItems": 1,
                        "maxItems": MAX_PACKAGES,
                        "description": "e.g. [\"jq\", \"ripgrep\"]."
                    },
                    "dryRun": {"type": "boolean", "description": "List what would be installed, upgraded or removed; change nothing (no approval needed)."}
                },
                "required": ["packages"],
                "additionalProperties": false
            }),
            capability: Capability::PackageInstall.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Install packages", false, false, true, true),
            default_timeout_ms: Some(INSTALL_TIMEOUT.as_millis() as u64),
            requires_bins: ["apt-get", "dnf", "apk", "brew"]
                .iter()
                .map(|b| (*b).to_owned())
                .collect(),
            requires_approval: true,
        }
    }

    fn dry_run(&self, args: &Value) -> bool {
        args.get("dryRun") == Some(&Value::Bool(true))
    }

    async fn plan(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let m = manager::detect(&ctx.workspace).ok()?;
        let request = parse_request(args, m.kind).ok()?;
        Some(match simulate(&m, &request.packages, ctx).await {
            Ok(plan) => plan.render(m.kind, &request.packages),
            Err(e) => e,
        })
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let m = match manager::detect(&ctx.workspace) {
            Ok(m) => m,
            Err(e) => return ToolResult::error(format!("pkg_install: {e}")),
        };
        let request = match parse_request(&args, m.kind) {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("pkg_install: {e}")),
        };
        let plan = match simulate(&m, &request.packages, &ctx).await {
            Ok(plan) => plan,
            Err(e) => return ToolResult::error(format!("pkg_install: {e}")),
        };
        let text = plan.render(m.kind, &request.packages);
        if request.dry_run {
            return output::with_text(
                format!("dry run, nothing changed: {text}"),
                &InstallOutput {
                    manager: m.kind.name(),
                    dry_run: true,
                    requested: request.packages,
                    plan,
                    exit_code: None,
                    output: None,
                    truncated: false,
                },
            );
        }
        let (program, mut args) = match privileged(&m, &ctx).await {
            Ok(p) => p,
            Err(e) => return ToolResult::error(format!("pkg_install: {e}")),
        };
        args.extend(install_args(m.kind, &request.packages, false));
        tracing::info!(manager = m.kind.name(), packages = ?request.packages, "installing packages");
        let out = match run(
            &program,
            args,
            env(m.kind),
            INSTALL_TIMEOUT,
            MAX_INSTALL_OUTPUT,
            &ctx,
        )
        .await
        {
            Ok(out) => out,
            Err(e) => return ToolResult::error(format!("pkg_install: {e}")),
        };
        let all = out.stdout_text();
        let start = all.len().saturating_sub(OUTPUT_TAIL_BYTES);
        let start = (start..=all.len())
            .find(|i| all.is_char_boundary(*i))
            .unwrap_or(all.len());
        let result = InstallOutput {
            manager: m.kind.name(),
            dry_run: false,
            requested: request.packages,
            plan,
            exit_code: out.status,
            output: Some(all[start..].to_owned()),
            truncated: out.stdout_truncated || start > 0,
        };
        if !out.success() {
            return output::error_with(
                format!(
                    "pkg_install: {} install failed: {}",
                    m.kind.name(),
                    out.failure()
                ),
                &result,
            );
        }
        output::with_text(format!("installed: {text}"), &result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `apt-get -s install -y --no-install-recommends -- cowsay sl tree` on Debian 12.
    const APT_NEW: &str = "Reading package lists...
Building dependency tree...
Reading state information...
The following additional packages will be installed:
  libtext-charwidth-perl
Suggested packages:
  filters cowsay-off
The following NEW packages will be installed:
  cowsay libtext-charwidth-perl sl tree
0 upgraded, 4 newly installed, 0 to remove and 131 not upgraded.
Inst libtext-charwidth-perl (0.04-11 Debian:12.15/oldstable [amd64])
Inst cowsay (3.03+dfsg2-8 Debian:12.15/oldstable [all])
Inst sl (5.02-1+b1 Debian:12.15/oldstable [amd64])
Inst tree (2.1.0-1 Debian:12.15/oldstable [amd64])
Conf libtext-charwidth-perl (0.04-11 Debian:12.15/oldstable [amd64])
Conf cowsay (3.03+dfsg2-8 Debian:12.15/oldstable [all])
Conf sl (5.02-1+b1 Debian:12.15/oldstable [amd64])
Conf tree (2.1.0-1 Debian:12.15/oldstable [amd64])
";

    #[test]
    fn apt_simulations_are_read_exactly() {
        let plan = parse_apt(APT_NEW);
        let names: Vec<_> = plan.install.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["libtext-charwidth-perl", "cowsay", "sl", "tree"]);
        assert_eq!(plan.install[1].version.as_deref(), Some("3.03+dfsg2-8"));
        assert!(plan.remove.is_empty());
        assert_eq!(
            plan.summary,
            "0 upgraded, 4 newly installed, 0 to remove and 131 not upgraded."
        );
        let up = parse_apt(
            "Remv old-thing [1.0]\nInst jq [1.6-2.1+deb12u1] (1.6-2.1+deb12u3 Debian-Security:12/oldstable-security [amd64]) []\n",
        );
        assert_eq!(
            up.install,
            vec![Planned {
                name: "jq".into(),
                version: Some("1.6-2.1+deb12u3".into()),
                current: Some("1.6-2.1+deb12u1".into()),
            }]
        );
        assert_eq!(up.remove[0].version.as_deref(), Some("1.0"));
        let text = up.render(Kind::Apt, &["jq".into()]);
        assert!(
            text.contains("jq 1.6-2.1+deb12u1 -> 1.6-2.1+deb12u3"),
            "{text}"
        );
        assert!(text.contains("would remove 1: old-thing 1.0"), "{text}");
    }

    #[test]
    fn other_managers_are_read_best_effort() {
        let dnf = parse_dnf(
            "Dependencies resolved.
================================================================
 Package      Architecture   Version        Repository     Size
================================================================
Installing:
 jq           x86_64         1.7.1-8.fc40   fedora         52 k
Installing dependencies:
 oniguruma    x86_64         6.9.9-3.fc40   fedora        219 k

Transaction Summary
================================================================
Install  2 Packages

Operation aborted.
",
        );
        let names: Vec<_> = dnf.install.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["jq", "oniguruma"]);
        assert_eq!(dnf.install[0].version.as_deref(), Some("1.7.1-8.fc40"));
        assert_eq!(dnf.summary, "Install  2 Packages");
        let apk = parse_apk("(1/2) Installing oniguruma (6.9.9-r0)\n(2/2) Installing jq (1.7.1-r0)\nOK: 8 MiB in 17 packages\n");
        assert_eq!(apk.install[1].name, "jq");
        assert_eq!(apk.install[1].version.as_deref(), Some("1.7.1-r0"));
        let brew = parse_brew(
            "==> Would install 1 formula:\njq\n==> Would install 1 dependency for jq:\noniguruma\n",
        );
        assert_eq!(brew.install.len(), 2);
    }

    #[test]
    fn requests_are_validated_and_argv_ends_options() {
        let r = parse_request(
            &json!({"packages": ["sl", "sl", "tree"], "dryRun": true}),
            Kind::Apt,
        )
        .unwrap();
        assert_eq!(r.packages, ["sl", "tree"]);
        assert!(r.dry_run);
        assert_eq!(
            install_args(Kind::Apt, &r.packages, true),
            [
                "-s",
                "-q",
                "install",
                "-y",
                "--no-install-recommends",
                "--",
                "sl",
                "tree"
            ]
        );
        for (args, needle) in [
            (
                json!({"packages": ["-o", "APT::Get::AllowUnauthenticated=1"]}),
                "must not start with '-'",
            ),
            (json!({"packages": []}), "\"packages\" must be"),
            (json!({"packages": "sl"}), "\"packages\" must be"),
            (json!({"packages": ["./x.deb"]}), "not valid for apt"),
            (
                json!({"packages": ["sl"], "force": true}),
                "unknown argument",
            ),
        ] {
            let e = parse_request(&args, Kind::Apt).unwrap_err().to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
        let many: Vec<String> = (0..=MAX_PACKAGES).map(|i| format!("p{i}")).collect();
        assert!(parse_request(&json!({"packages": many}), Kind::Apt).is_err());
        assert!(PkgInstall.dry_run(&json!({"packages": ["sl"], "dryRun": true})));
        assert!(!PkgInstall.dry_run(&json!({"packages": ["sl"], "dryRun": "true"})));
    }
}
