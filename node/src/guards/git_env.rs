//! The environment an auto-approved command runs with: git's program-running settings
//! pinned, so a repository's own configuration cannot turn an auto-approved
//! `git status` into "run this".
//!
//! git reads `.git/config` from the repository it runs in, and some of its settings
//! name programs git runs by itself: `core.fsmonitor` runs on `git status`, `git diff`
//! and most other commands; `core.pager` runs whenever output goes to a terminal (the
//! Bash tool's `pty` mode); `core.hooksPath` moves the hooks. An agent that can write
//! the repository (Write, Edit, or any operator-approved command) can plant them, and
//! the next auto-approved `git status` runs its program — no `--approve-shell` pattern
//! can see that, since the command text is innocent.
//!
//! So when the node runs a Bash command **because an `--approve-shell` pattern
//! approved it** (no operator looked at it), it adds settings through git's
//! environment configuration (`GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` /
//! `GIT_CONFIG_VALUE_n`, git ≥ 2.31), which take precedence over every configuration
//! file: `core.fsmonitor=false`, `core.hooksPath=/dev/null`, `core.pager=cat`,
//! `protocol.allow=never` (no fetch, push or clone over any transport, so no
//! `core.sshCommand`, `ext::` or `uploadpack` programs), `credential.helper=` (none),
//! no signature checks (`log.showSignature=false`, `gpg.*program=false`: a planted
//! `gpg.program` never runs for a signed commit), no editor or prompt programs
//! (`core.editor`, `sequence.editor`, `core.askPass`), and no pager per command
//! (`pager.log` and friends, which win over `core.pager`);
//! sets `GIT_PAGER=cat`; and removes the variables that name programs for git
//! (`GIT_EXTERNAL_DIFF`, `GIT_SSH`, `GIT_SSH_COMMAND`, `GIT_ASKPASS`, `SSH_ASKPASS`,
//! `GIT_PROXY_COMMAND`, `GIT_EXEC_PATH`, `GIT_EDITOR`, `GIT_SEQUENCE_EDITOR`) and the
//! ones that point git at another repository or configuration (`GIT_DIR`,
//! `GIT_WORK_TREE`, `GIT_CONFIG`, `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM`,
//! `GIT_CONFIG_PARAMETERS`).
//!
//! **What this does not stop** (and why docs/security.md says not to auto-approve git
//! where an agent can write the repository): settings with names git does not fix in
//! advance — `diff.<driver>.textconv` and `diff.<driver>.command`,
//! `filter.<driver>.clean`/`smudge`/`process`, `merge.<driver>.driver`, chosen by
//! `.gitattributes` or `.git/info/attributes` (a `git status` can run a clean filter,
//! a `git diff` a textconv) — and `diff.external`, which cannot be unset from the
//! environment (an empty value makes `git diff` fail). Aliases cannot shadow git's own
//! commands, so they matter only to patterns that approve other names. Commands an
//! operator approved run with the plain login environment.
//!
//! The git tools ([`crate::tools::git`]) force the same [`GIT_SETTINGS`], plus
//! [`READ_TOOL_SETTINGS`], and close the gaps above for themselves (drivers emptied,
//! `--no-ext-diff --no-textconv`, an empty environment).

use std::ffi::OsString;

/// The settings forced on an auto-approved command's git, over every config file.
pub const GIT_SETTINGS: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("protocol.allow", "never"),
    ("credential.helper", ""),
    // Signatures: no check runs a program the repository names.
    ("log.showSignature", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    // Editors and prompts: an edit that would start one fails instead.
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    // Pagers by command (they win over `core.pager` and `GIT_PAGER`).
    ("pager.log", "false"),
    ("pager.show", "false"),
    ("pager.diff", "false"),
    ("pager.status", "false"),
    ("pager.branch", "false"),
    ("pager.tag", "false"),
    ("pager.grep", "false"),
    ("pager.blame", "false"),
    ("pager.stash", "false"),
    ("pager.reflog", "false"),
    ("pager.shortlog", "false"),
    ("pager.whatchanged", "false"),
    ("pager.config", "false"),
];

/// Variables removed from an auto-approved command's environment.
pub const REMOVED_VARS: &[&str] = &[
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
];

/// What the git tools (`git_status`, `git_log`, `git_diff`, `git_show`,
/// [`crate::tools::git`]) force on top of [`GIT_SETTINGS`]: no attributes file from
/// the user's configuration, no submodule summaries (a git run in another
/// repository), no colour.
pub const READ_TOOL_SETTINGS: &[(&str, &str)] = &[
    ("core.attributesFile", "/dev/null"),
    ("status.submoduleSummary", "false"),
    ("color.ui", "never"),
    ("core.quotePath", "false"),
];

/// `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n` for `settings`:
/// configuration that takes precedence over every configuration file.
pub fn config_env<'a>(
    settings: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(OsString, OsString)> {
    let mut out = Vec::new();
    let mut count = 0usize;
    for (i, (key, value)) in settings.into_iter().enumerate() {
        out.push((format!("GIT_CONFIG_KEY_{i}").into(), key.into()));
        out.push((format!("GIT_CONFIG_VALUE_{i}").into(), value.into()));
        count = i + 1;
    }
    out.push(("GIT_CONFIG_COUNT".into(), count.to_string().into()));
    out
}

/// The environment changes for an auto-approved command (`None` removes a variable).
pub fn auto_approved_overrides() -> Vec<(OsString, Option<OsString>)> {
    let mut out: Vec<(OsString, Option<OsString>)> = REMOVED_VARS
        .iter()
        .map(|v| (OsString::from(v), None))
        .collect();
    out.push(("GIT_PAGER".into(), Some("cat".into())));
    out.extend(
        config_env(GIT_SETTINGS.iter().copied())
            .into_iter()
            .map(|(k, v)| (k, Some(v))),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_numbered_from_zero_and_counted() {
        let o = auto_approved_overrides();
        let get = |name: &str| {
            o.iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.clone())
        };
        assert_eq!(
            get("GIT_CONFIG_COUNT"),
            Some(OsString::from(GIT_SETTINGS.len().to_string()))
        );
        assert_eq!(
            get("GIT_CONFIG_KEY_0"),
            Some(OsString::from("core.fsmonitor"))
        );
        assert_eq!(get("GIT_CONFIG_VALUE_0"), Some(OsString::from("false")));
        assert_eq!(
            get("GIT_CONFIG_KEY_4"),
            Some(OsString::from("credential.helper"))
        );
        assert!(o.iter().any(|(k, v)| k == "GIT_SSH_COMMAND" && v.is_none()));
    }
}
