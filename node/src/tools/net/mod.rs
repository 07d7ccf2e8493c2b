//! The network triage tools: `net_diagnose`, `net_discover`, `net_services`,
//! `network_status` and `dns_lookup` (see `reference/network-tools-design.org`).
//!
//! They answer "why can't I reach X?", "what is on this LAN?", "what listens on that
//! host?", "what is my network state?" and "what does DNS say?" with structured
//! results, and they are read-only: nothing here changes the host's network
//! configuration. What makes them risky is where they send packets, so:
//!
//! - Every target and subnet goes through [`target`] first: parsed, resolved, and
//!   classified on the **resolved** address (public wins). Private targets run;
//!   `net_discover` refuses public ones outright; `net_diagnose` and `net_services`
//!   probe a public target only with `external: true`, and then [`crate::Tool::check`]
//!   answers `approval_required` so an operator decides (the gateway re-sends the call
//!   with the approval). All of it happens before any process starts or any packet is
//!   sent.
//! - Programs run through [`run`]: an argv list built by the tool from validated
//!   values (the resolved IP, never the input string; no raw nmap flags from the
//!   caller), a timeout on every process, the process group killed when it expires.
//! - Each tool declares the binaries it needs (`requiresBins`, reported in
//!   `hostBinStatus`); a missing hard requirement (nmap) is an "install nmap" error,
//!   not a missing tool. `dns_lookup` needs none: it resolves with `hickory-resolver`.
//!
//! Each tool's structured content is a `Serialize` type beside it (in
//! `<tool>_output.rs` where there are several), built from the parsers' typed
//! records ([`parse`]).
//!
//! The system's resolver, command runner and TCP connector are reached through
//! [`NetEnv`], so tests can substitute fakes and check that a refused call never
//! spawned anything or opened a connection.

pub mod diagnose;
pub mod diagnose_output;
pub mod discover;
pub mod dns;
pub mod dns_output;
pub mod parse;
pub mod portcheck;
pub mod run;
pub mod services;
pub mod status;
pub mod status_output;
pub mod target;

pub use diagnose::NetDiagnose;
pub use discover::NetDiscover;
pub use dns::DnsLookup;
pub use services::NetServices;
pub use status::NetworkStatus;

use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape, ToolAnnotations, ToolResult};
use portcheck::{Connector, SystemConnector};
use run::{CommandRunner, SystemRunner};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use target::{HostResolver, SystemResolver};

/// How long resolving a target may take.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest approval summary.
const MAX_SUMMARY_CHARS: usize = 300;

/// What the network tools reach the host through. [`NetEnv::system`] is the real one.
#[derive(Clone)]
pub struct NetEnv {
    pub runner: Arc<dyn CommandRunner>,
    pub resolver: Arc<dyn HostResolver>,
    pub connector: Arc<dyn Connector>,
    /// The kernel's IPv4 neighbour table (`/proc/net/arp`), read for MAC addresses.
    pub arp_table: PathBuf,
    /// The resolver configuration read when `resolvectl` is unavailable.
    pub resolv_conf: PathBuf,
}

impl NetEnv {
    /// Real processes (programs resolved now, see [`run`]), the system resolver, real
    /// TCP connections, the real files.
    pub fn system() -> NetEnv {
        NetEnv {
            runner: Arc::new(SystemRunner::new()),
            resolver: Arc::new(SystemResolver),
            connector: Arc::new(SystemConnector),
            arp_table: PathBuf::from("/proc/net/arp"),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
        }
    }
}

impl Default for NetEnv {
    fn default() -> Self {
        NetEnv::system()
    }
}

/// The annotations every network tool declares: read-only, not destructive.
fn annotations(title: &str, open_world: bool) -> ToolAnnotations {
    ToolAnnotations {
        title: Some(title.to_owned()),
        read_only_hint: Some(true),
        destructive_hint: Some(false),
        idempotent_hint: Some(true),
        open_world_hint: Some(open_world),
    }
}

/// The `approval_required` answer of [`crate::Tool::check`] for a public target.
fn approval_required(reason: &str, summary: &str) -> ErrorShape {
    ErrorShape::new(
        ErrorCode::ApprovalRequired,
        format!("this call needs an operator's approval: {reason}"),
    )
    .with(ErrorDetails::ApprovalRequired {
        reason: reason.to_owned(),
        summary: truncate(summary, MAX_SUMMARY_CHARS),
        plan: None,
    })
}

/// The answer of `execute` when a call that needs approval arrives without one (the
/// gateway normally never sends it: `check` asked first).
fn unapproved(tool: &str, reason: &str) -> ToolResult {
    ToolResult::error(format!(
        "{tool}: refused: {reason}; an operator's approval is required and this call carries none"
    ))
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    text.chars().take(max.saturating_sub(3)).collect::<String>() + "..."
}

/// `d` as whole milliseconds.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
