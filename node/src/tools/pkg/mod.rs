//! The package tools: `pkg_search` (read-only, capability `package.read`) and
//! `pkg_install` (capability `package.install`, needs an operator's approval by
//! default), over apt, dnf, apk or brew, whichever the node has ([`manager`]).
//!
//! Installing a package runs its maintainer scripts as root, so it is the kind of
//! call an operator should see before it happens: `pkg_install` declares
//! `requiresApproval`, and the approval request carries its plan, the manager's own
//! dry run (`apt-get -s install …`) read into the exact packages it would install,
//! upgrade and remove. `dryRun: true` answers with that plan and changes nothing, so
//! it needs no approval.
//!
//! Package names and queries are validated strictly and passed after `--`
//! ([`manager::package_name`]); the manager runs as [`crate::tools::host_run`]
//! describes (no shell, stdin closed, bounded output, killed on cancel), with
//! `DEBIAN_FRONTEND=noninteractive` for apt. apt is implemented and tested against a
//! recorded fake and the real apt-get; dnf, apk and brew are best effort, their
//! output parsers written from their documented formats (see docs/operations.md).

pub mod install;
pub mod manager;
pub mod search;

pub use install::PkgInstall;
pub use search::PkgSearch;

use crate::tool::ToolContext;
use crate::tools::host_run::{self, HostCommand, HostOutput};
use std::path::Path;
use std::time::Duration;

/// Runs `program args…` for a package tool, bounded by `timeout` and the call's
/// deadline.
async fn run(
    program: &Path,
    args: Vec<String>,
    env: &[(&str, &str)],
    timeout: Duration,
    max_output: usize,
    ctx: &ToolContext,
) -> Result<HostOutput, host_run::HostRunError> {
    let budget = ctx
        .remaining()
        .saturating_sub(Duration::from_millis(500))
        .max(Duration::from_millis(100));
    let mut command = HostCommand::new(program, args, timeout.min(budget), max_output);
    command
        .env
        .extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    host_run::run(&command, &ctx.cancel).await
}
