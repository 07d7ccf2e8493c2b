//! The tools a node can offer, one file (or directory) each.
//!
//! A new tool is a file here implementing [`crate::Tool`] plus one line in
//! [`crate::Registry::standard`]. A tool that also works on the far host of an SSH-
//! or container-backed node holds a [`Host`], is made with `X::on(host, ..)` for it
//! (one line in [`crate::Registry::remote`]), and keeps that body in `x/on_host.rs`
//! beside the local one in `x/mod.rs`, using [`crate::remote`] (the transport) from
//! above; its declaration is the same on both. Shared helpers for tools live beside them
//! ([`args`] for validating untrusted arguments, [`paths`] for resolving path
//! arguments and confining them to the workspace (opening beneath a directory
//! without races, [`crate::beneath`], and refusing the files no tool may touch,
//! [`crate::protected`]), [`ignored`] for counting what ignore rules keep out of Glob, Grep and fs_list, [`file_info`]
//! for what fs_list and fs_stat say about an entry, [`git`] for the git tools' hardened git, [`output`] for turning a tool's
//! typed output into its result).

use gsv_protocol::capability::Capability;
use std::sync::Arc;

/// Which machine a tool works on: the node's own (`None`), or the far host of an SSH-
/// or container-backed node. A tool that can work on a far host holds one, is made
/// with `X::on(host, ..)` for it, and keeps that body in its `on_host.rs`, beside the
/// local one; its declaration is the same either way.
pub type Host = Option<Arc<crate::remote::RemoteHost>>;

/// A tool's `check` on [`Host`]: the far host's shells are up (a local node has
/// nothing to wait for).
pub(crate) async fn host_ready(host: &Host) -> Result<(), gsv_protocol::ErrorShape> {
    match host {
        Some(host) => host.ready().await.map_err(|e| e.shape()),
        None => Ok(()),
    }
}

pub mod args;
pub mod bash;
pub mod capture;
pub mod container;
pub mod echo;
pub mod edit;
pub mod encoding;
pub mod exec;
pub mod fetch;
pub mod file_info;
pub mod follow;
pub mod fs_list;
pub mod fs_stat;
pub mod git;
pub mod glob;
pub mod grep;
pub mod host_run;
pub mod ignored;
pub mod net;
pub mod output;
pub mod paths;
pub mod pkg;
pub mod proc;
pub mod process;
pub mod process_output;
pub mod read;
pub mod term;
pub mod time;
pub mod write;

/// Every tool a standard gsv node can offer (`Echo` only with `--echo-tool`) and the
/// capability it declares: what `gsv token create` checks policy globs and classes
/// against (a unit test holds it to the registry's own declarations).
pub const STANDARD_TOOLS: &[(&str, Capability)] = &[
    ("Read", Capability::FilesystemRead),
    ("Write", Capability::FilesystemWrite),
    ("Edit", Capability::FilesystemEdit),
    ("Glob", Capability::FilesystemList),
    ("Grep", Capability::TextSearch),
    ("fs_list", Capability::FilesystemList),
    ("fs_stat", Capability::FilesystemStat),
    ("time", Capability::SystemTime),
    ("git_status", Capability::VcsRead),
    ("git_log", Capability::VcsRead),
    ("git_diff", Capability::VcsRead),
    ("git_show", Capability::VcsRead),
    ("git_clone", Capability::VcsWrite),
    ("git_commit", Capability::VcsWrite),
    ("git_push", Capability::VcsWrite),
    ("git_pull", Capability::VcsWrite),
    ("Bash", Capability::ShellExec),
    ("exec", Capability::ProcessExec),
    ("Process", Capability::ProcessManage),
    ("proc_list", Capability::ProcessList),
    ("proc_kill", Capability::ProcessSignal),
    ("term_capture", Capability::TerminalControl),
    ("term_send", Capability::TerminalControl),
    ("net_diagnose", Capability::NetworkDiagnose),
    ("net_discover", Capability::NetworkDiscover),
    ("net_services", Capability::NetworkScan),
    ("network_status", Capability::NetworkStatus),
    ("dns_lookup", Capability::DnsQuery),
    ("container_list", Capability::ContainerRead),
    ("container_logs", Capability::ContainerRead),
    ("container_exec", Capability::ContainerExec),
    ("pkg_search", Capability::PackageRead),
    ("pkg_install", Capability::PackageInstall),
    ("fetch_url", Capability::HttpFetch),
    ("Echo", Capability::DiagnosticsEcho),
];

/// The names in [`STANDARD_TOOLS`].
pub fn standard_names() -> Vec<&'static str> {
    STANDARD_TOOLS.iter().map(|(name, _)| *name).collect()
}
