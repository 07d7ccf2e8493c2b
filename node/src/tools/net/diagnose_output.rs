//! `net_diagnose`'s structured content ([`super::diagnose`]): the target, and what
//! each step found. Every step carries a `status`; one that did not run or did not
//! succeed says why in `reason` (skipped) or `failure`.

use super::parse::ping::PingStats;
use super::parse::traceroute::Hop;
use super::portcheck::PortCheck;
use serde::Serialize;

/// The whole diagnosis.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiagnoseOutput<'a> {
    /// The target as the caller gave it.
    pub target: &'a str,
    /// The address probed; `null` when DNS gave none a probe may target.
    pub resolved_to: Option<String>,
    /// The probed address's class (`private (RFC 1918)`, `public`, ...); absent when
    /// nothing was probed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<&'static str>,
    pub dns: DnsStep,
    pub ping: Step<PingCheck>,
    pub traceroute: Step<TraceCheck>,
    /// `null` when no `port` was asked for.
    pub port_check: Option<Step<PortCheck>>,
    pub elapsed_ms: u64,
}

/// Step 1, resolving the target: `{status: "ok", timeMs, addresses}`,
/// `{status: "failed", timeMs, failure}`, or `{status: "skipped", reason}` for an
/// address literal.
#[derive(Debug, Serialize)]
#[serde(
    tag = "status",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum DnsStep {
    Skipped {
        reason: &'static str,
    },
    Ok {
        time_ms: u64,
        /// Canonical addresses, duplicates removed, in the resolver's order.
        addresses: Vec<String>,
    },
    Failed {
        time_ms: u64,
        failure: String,
    },
}

/// A probe (ping, traceroute, port check): what it found, or why it did not run.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Step<T> {
    Ran(T),
    NotRun(NotRun),
}

impl<T> Step<T> {
    /// A probe skipped because there is nothing to probe.
    pub fn skipped(reason: &str) -> Self {
        Step::NotRun(NotRun::Skipped {
            reason: reason.to_owned(),
        })
    }
}

/// Why a probe did not run: `{status, reason}` when skipped, `{status, failure}` when
/// its program could not be run.
#[derive(Debug, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum NotRun {
    /// DNS gave no address a probe may target.
    Skipped {
        reason: String,
    },
    #[serde(rename = "not installed")]
    NotInstalled {
        failure: String,
    },
    Cancelled {
        failure: String,
    },
    /// The program could not be started, or gave nothing to read.
    Failed {
        failure: String,
    },
}

/// How a probe that ran went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Ok,
    /// ping: no echo reply.
    #[serde(rename = "no reply")]
    NoReply,
    /// traceroute: the path never reached the target.
    #[serde(rename = "not reached")]
    NotReached,
    #[serde(rename = "timed out")]
    TimedOut,
    /// Nothing could be read from the program's output.
    Failed,
}

/// Step 2, `ping`: the statistics it printed, if any, beside `status`.
#[derive(Debug, Serialize)]
pub struct PingCheck {
    pub status: CheckStatus,
    #[serde(flatten)]
    pub stats: Option<PingStats>,
    /// Why it is not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Step 3, `traceroute` (or `tracepath`): the path.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceCheck {
    pub status: CheckStatus,
    /// `traceroute` or `tracepath`.
    pub program: &'static str,
    /// Hops in `path`.
    pub hops: usize,
    /// The last address that answered.
    pub last_hop: Option<String>,
    /// Whether the target itself answered.
    pub reached: bool,
    pub path: Vec<Hop>,
    /// Why it is not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}
