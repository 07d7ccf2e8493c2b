//! The tools a node can offer, one file each.
//!
//! A new tool is a file here implementing [`crate::Tool`] plus one line in
//! [`crate::Registry::standard`]. Shared helpers for tools live beside them
//! ([`args`] for validating untrusted arguments, [`paths`] for resolving path
//! arguments and confining them to the workspace, [`beneath`] for opening beneath a
//! directory without races, [`protected`] for the files no tool may touch, [`ignored`]
//! for counting what ignore rules keep out of Glob, Grep and fs_list, [`file_info`]
//! for what fs_list and fs_stat say about an entry, [`git`] for the git tools' hardened git, [`output`] for turning a tool's
//! typed output into its result).

pub mod args;
pub mod bash;
pub mod beneath;
pub mod capture;
pub mod container;
pub mod echo;
pub mod edit;
pub mod encoding;
pub mod exec;
pub mod exec_program;
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
pub mod protected;
pub mod read;
pub mod term;
pub mod time;
pub mod write;

/// The names of every tool a standard gsv node can offer (`Echo` only with
/// `--echo-tool`): what `gsv token create` checks policy globs against.
pub const STANDARD_NAMES: &[&str] = &[
    "Read",
    "Write",
    "Edit",
    "Glob",
    "Grep",
    "fs_list",
    "fs_stat",
    "time",
    "git_status",
    "git_log",
    "git_diff",
    "git_show",
    "git_clone",
    "git_commit",
    "git_push",
    "git_pull",
    "Bash",
    "exec",
    "Process",
    "proc_list",
    "proc_kill",
    "term_capture",
    "term_send",
    "net_diagnose",
    "net_discover",
    "net_services",
    "network_status",
    "dns_lookup",
    "container_list",
    "container_logs",
    "container_exec",
    "pkg_search",
    "pkg_install",
    "fetch_url",
    "Echo",
];
