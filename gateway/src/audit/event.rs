//! What the gateway records in the audit log, one variant per kind of event, and the
//! one place each becomes a stored row.
//!
//! Feature modules describe what happened ([`AuditEvent`]) with the data it needs;
//! [`AuditEvent::into_entry`] decides the row's kind, actor, outcome, columns and
//! `detail`. Each `detail` is a `Serialize` struct with the JSON field names rows have
//! always had (`tokenId`, `connId`, `joinTokenId`...), turned into a JSON value whose
//! text (keys sorted, as serde_json writes a map) is what the row stores and its hash
//! covers: rows written before and after this type existed read and verify the same.

use super::{AuditEntry, AuditKind};
use crate::offers::OfferDiff;
use crate::policy::PolicySpec;
use crate::token::TokenKind;
use gsv_protocol::inventory::Labels;
use gsv_protocol::method::{ApprovalRequest, Verdict};
use gsv_protocol::{ErrorCode, NamespacedName};
use serde::Serialize;
use std::fmt::Debug;
use std::net::SocketAddr;

/// One event for the audit log.
#[derive(Debug)]
pub enum AuditEvent<'a> {
    /// An agent's WebSocket passed its handshake.
    AgentConnected {
        agent: &'a str,
        remote: SocketAddr,
        token_id: &'a str,
        conn_id: &'a str,
    },
    /// An agent's WebSocket ended (`reason`: why, as the connection driver says).
    AgentDisconnected {
        agent: &'a str,
        reason: &'a dyn Debug,
        token_id: &'a str,
        conn_id: &'a str,
    },
    /// A node presented a join token: enrolled, or refused.
    NodeEnrollment {
        node: &'a str,
        join_token_id: &'a str,
        remote: SocketAddr,
        outcome: Enrollment,
    },
    /// A node connected (and whether it reports its login profile changed).
    NodeConnected {
        node: &'a str,
        remote: SocketAddr,
        conn_id: &'a str,
        login_profile_changed: Option<&'a [String]>,
    },
    /// A node's connection ended, with the calls it left pending and the stray
    /// results it sent (`cut_off`: closed for flooding them).
    NodeDisconnected {
        node: &'a str,
        reason: &'a dyn Debug,
        cut_off: bool,
        pending_calls: usize,
        conn_id: &'a str,
        stray_results: u64,
    },
    /// The first refused authentication of its source, role and code in a window.
    Refused {
        peer: SocketAddr,
        role: &'a str,
        code: &'a str,
        message: &'a str,
    },
    /// The refusals of one source, role and code after the first in a window.
    RefusedRepeatedly {
        source: &'a str,
        role: &'a str,
        code: &'a str,
        last_message: &'a str,
        count: u64,
        first_ms: u64,
        last_ms: u64,
        interval_ms: u64,
    },
    /// A routed call ended (`outcome`: `ok`, `tool_error` or an error code).
    Call {
        agent: &'a str,
        token_id: &'a str,
        name: &'a NamespacedName,
        args_hash: Option<String>,
        args: Option<String>,
        outcome: &'a str,
        duration_ms: u64,
    },
    /// A file transfer ended (`outcome`: `ok`, `cancelled` or an error code); `tool` is
    /// `Read` for a get, `Write` for a put.
    Transfer {
        agent: &'a str,
        token_id: &'a str,
        node: &'a str,
        tool: &'a str,
        path: &'a str,
        bytes: u64,
        sha256: Option<&'a str>,
        outcome: &'a str,
        duration_ms: u64,
    },
    /// A directory copy's `transfer.list` (`tool` `Read`) or `transfer.place` (`tool`
    /// `Write`) was answered or refused; `entries` it listed or placed.
    TransferTree {
        agent: &'a str,
        token_id: &'a str,
        node: &'a str,
        tool: &'a str,
        method: &'a str,
        path: &'a str,
        entries: usize,
        outcome: &'a str,
        duration_ms: u64,
    },
    /// A call waits in the operator queue.
    ApprovalRequested {
        agent: &'a str,
        request: &'a ApprovalRequest,
    },
    /// The caller's own user decided on its call (MCP elicitation).
    CallerDecided {
        agent: &'a str,
        token_id: &'a str,
        name: &'a NamespacedName,
        args_hash: String,
        verdict: Verdict,
    },
    /// An operator decided a request (`by`: who), or the decision was refused with
    /// `Err(code)`.
    ApprovalDecided {
        by: &'a str,
        approval: &'a str,
        verdict: Verdict,
        result: Result<&'a ApprovalRequest, ErrorCode>,
    },
    /// A token was issued (`actor`: the issuing command).
    TokenIssued {
        actor: &'a str,
        token_id: &'a str,
        kind: TokenKind,
        subject: &'a str,
        policy: Option<&'a PolicySpec>,
        /// An operator token's role.
        role: Option<crate::operator::OperatorRole>,
    },
    /// A token was revoked (`actor`: the revoking command).
    TokenRevoked { actor: &'a str, token_id: &'a str },
    /// A node registered offering other tools or capabilities than were accepted for
    /// its id (`hidden`: its new tools are hidden from agents until accepted).
    NodeToolsChanged {
        node: &'a str,
        conn_id: &'a str,
        diff: &'a OfferDiff,
        hidden: bool,
    },
    /// A node's offer was accepted: by an operator (`by`: `operator` or `admin-api`;
    /// `tools` and `capabilities`: what became accepted), or at the node id's first
    /// registration (`first_use`, `by` `first-use`: everything it offered).
    NodeToolsAccepted {
        by: &'a str,
        node: &'a str,
        tools: &'a [String],
        capabilities: &'a [String],
        first_use: bool,
    },
    /// An operator changed a node's labels (`by`: `cli` at enrollment, `operator` over
    /// WebSocket, `admin-api` over HTTP), with the whole set before and after.
    NodeLabelsChanged {
        by: &'a str,
        node: &'a str,
        before: &'a Labels,
        after: &'a Labels,
    },
}

/// What became of a join token presented at connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enrollment {
    /// Exchanged for the node's credential.
    Enrolled,
    /// The node id already has a credential.
    AlreadyEnrolled,
    /// The join token was spent already.
    JoinTokenUsed,
}

impl Enrollment {
    fn outcome(self) -> &'static str {
        match self {
            Enrollment::Enrolled => "enrolled",
            Enrollment::AlreadyEnrolled => "refused:already_enrolled",
            Enrollment::JoinTokenUsed => "refused:join_token_used",
        }
    }
}

fn verdict_outcome(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Approve => "approved",
        Verdict::Deny => "denied",
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentConnectedDetail<'a> {
    conn_id: &'a str,
    remote: SocketAddr,
    token_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentDisconnectedDetail<'a> {
    conn_id: &'a str,
    token_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EnrollmentDetail<'a> {
    join_token_id: &'a str,
    remote: SocketAddr,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeConnectedDetail<'a> {
    conn_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    login_profile_changed: Option<&'a [String]>,
    remote: SocketAddr,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeDisconnectedDetail<'a> {
    conn_id: &'a str,
    pending_calls: usize,
    stray_results: u64,
}

#[derive(Serialize)]
struct RefusedDetail<'a> {
    message: &'a str,
    role: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RefusedRepeatedlyDetail<'a> {
    count: u64,
    first_ms: u64,
    interval_ms: u64,
    last_ms: u64,
    message: &'a str,
    repeated: bool,
    role: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenIdDetail<'a> {
    token_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TransferDetail<'a> {
    bytes: u64,
    path: std::borrow::Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<&'a str>,
    token_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TreeDetail<'a> {
    method: &'a str,
    path: std::borrow::Cow<'a, str>,
    entries: usize,
    token_id: &'a str,
}

#[derive(Serialize)]
struct ApprovalDetail<'a> {
    approval: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallerDecidedDetail<'a> {
    token_id: &'a str,
    via: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenIssuedDetail<'a> {
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<&'a PolicySpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'a str>,
    subject: &'a str,
    token_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolsChangedDetail<'a> {
    added_capabilities: &'a [String],
    added_tools: &'a [String],
    conn_id: &'a str,
    hidden: bool,
    removed_capabilities: &'a [String],
    removed_tools: &'a [String],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolsAcceptedDetail<'a> {
    capabilities: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    first_use: bool,
    tools: &'a [String],
}

#[derive(Serialize)]
struct LabelsChangedDetail<'a> {
    after: &'a Labels,
    before: &'a Labels,
}

/// A row's columns before its detail.
struct Row {
    kind: AuditKind,
    actor: String,
    outcome: String,
}

impl Row {
    fn new(kind: AuditKind, actor: impl Into<String>, outcome: impl Into<String>) -> Self {
        Row {
            kind,
            actor: actor.into(),
            outcome: outcome.into(),
        }
    }

    /// The entry with `detail` (as a JSON value, so its text has its keys sorted).
    fn with(self, detail: impl Serialize) -> AuditEntry {
        AuditEntry {
            kind: self.kind,
            actor: self.actor,
            node: None,
            tool: None,
            args_hash: None,
            args: None,
            outcome: self.outcome,
            duration_ms: None,
            detail: serde_json::to_value(detail).ok(),
        }
    }
}

impl AuditEntry {
    fn on(mut self, node: &str) -> Self {
        self.node = Some(node.to_owned());
        self
    }

    fn call(mut self, name: &NamespacedName, args_hash: Option<String>) -> Self {
        self.node = Some(name.node.to_string());
        self.tool = Some(name.tool.to_string());
        self.args_hash = args_hash;
        self
    }
}

impl AuditEvent<'_> {
    /// The row this event is stored as.
    pub fn into_entry(self) -> AuditEntry {
        use AuditEvent::*;
        match self {
            AgentConnected {
                agent,
                remote,
                token_id,
                conn_id,
            } => Row::new(AuditKind::Connect, format!("agent:{agent}"), "ok").with(
                AgentConnectedDetail {
                    conn_id,
                    remote,
                    token_id,
                },
            ),
            AgentDisconnected {
                agent,
                reason,
                token_id,
                conn_id,
            } => Row::new(
                AuditKind::Disconnect,
                format!("agent:{agent}"),
                format!("{reason:?}"),
            )
            .with(AgentDisconnectedDetail { conn_id, token_id }),
            NodeEnrollment {
                node,
                join_token_id,
                remote,
                outcome,
            } => Row::new(AuditKind::Policy, format!("node:{node}"), outcome.outcome())
                .with(EnrollmentDetail {
                    join_token_id,
                    remote,
                })
                .on(node),
            NodeConnected {
                node,
                remote,
                conn_id,
                login_profile_changed,
            } => Row::new(AuditKind::Connect, format!("node:{node}"), "ok")
                .with(NodeConnectedDetail {
                    conn_id,
                    login_profile_changed,
                    remote,
                })
                .on(node),
            NodeDisconnected {
                node,
                reason,
                cut_off,
                pending_calls,
                conn_id,
                stray_results,
            } => {
                let outcome = match cut_off {
                    true => "StrayResults".to_owned(),
                    false => format!("{reason:?}"),
                };
                Row::new(AuditKind::Disconnect, format!("node:{node}"), outcome)
                    .with(NodeDisconnectedDetail {
                        conn_id,
                        pending_calls,
                        stray_results,
                    })
                    .on(node)
            }
            Refused {
                peer,
                role,
                code,
                message,
            } => Row::new(AuditKind::Refused, peer.to_string(), code)
                .with(RefusedDetail { message, role }),
            RefusedRepeatedly {
                source,
                role,
                code,
                last_message,
                count,
                first_ms,
                last_ms,
                interval_ms,
            } => Row::new(AuditKind::Refused, source, code).with(RefusedRepeatedlyDetail {
                count,
                first_ms,
                interval_ms,
                last_ms,
                message: last_message,
                repeated: true,
                role,
            }),
            Call {
                agent,
                token_id,
                name,
                args_hash,
                args,
                outcome,
                duration_ms,
            } => {
                let mut e = Row::new(AuditKind::Call, format!("agent:{agent}"), outcome)
                    .with(TokenIdDetail { token_id })
                    .call(name, args_hash);
                e.args = args;
                e.duration_ms = Some(duration_ms);
                e
            }
            Transfer {
                agent,
                token_id,
                node,
                tool,
                path,
                bytes,
                sha256,
                outcome,
                duration_ms,
            } => {
                let mut e = Row::new(AuditKind::Transfer, format!("agent:{agent}"), outcome)
                    .with(TransferDetail {
                        bytes,
                        path: gsv_protocol::limits::cut_audit_path(path),
                        sha256,
                        token_id,
                    })
                    .on(node);
                e.tool = Some(tool.to_owned());
                e.duration_ms = Some(duration_ms);
                e
            }
            TransferTree {
                agent,
                token_id,
                node,
                tool,
                method,
                path,
                entries,
                outcome,
                duration_ms,
            } => {
                let mut e = Row::new(AuditKind::Transfer, format!("agent:{agent}"), outcome)
                    .with(TreeDetail {
                        method,
                        path: gsv_protocol::limits::cut_audit_path(path),
                        entries,
                        token_id,
                    })
                    .on(node);
                e.tool = Some(tool.to_owned());
                e.duration_ms = Some(duration_ms);
                e
            }
            ApprovalRequested { agent, request } => {
                let mut e = Row::new(AuditKind::Approval, format!("agent:{agent}"), "requested")
                    .with(ApprovalDetail {
                        approval: &request.id,
                    })
                    .on(&request.node);
                e.tool = Some(request.tool.clone());
                e.args_hash = Some(request.args_hash.clone());
                e
            }
            CallerDecided {
                agent,
                token_id,
                name,
                args_hash,
                verdict,
            } => Row::new(
                AuditKind::Approval,
                format!("agent:{agent}"),
                verdict_outcome(verdict),
            )
            .with(CallerDecidedDetail {
                token_id,
                via: "caller",
            })
            .call(name, Some(args_hash)),
            ApprovalDecided {
                by,
                approval,
                verdict,
                result,
            } => {
                let outcome = match result {
                    Ok(_) => verdict_outcome(verdict).to_owned(),
                    Err(code) => format!("refused:{code}"),
                };
                let mut e =
                    Row::new(AuditKind::Approval, by, outcome).with(ApprovalDetail { approval });
                if let Ok(req) = result {
                    e.node = Some(req.node.clone());
                    e.tool = Some(req.tool.clone());
                    e.args_hash = Some(req.args_hash.clone());
                }
                e
            }
            TokenIssued {
                actor,
                token_id,
                kind,
                subject,
                policy,
                role,
            } => Row::new(AuditKind::Policy, actor, "token_created").with(TokenIssuedDetail {
                kind: kind.as_str(),
                policy,
                role: role.map(|r| r.as_str()),
                subject,
                token_id,
            }),
            TokenRevoked { actor, token_id } => {
                Row::new(AuditKind::Policy, actor, "token_revoked").with(TokenIdDetail { token_id })
            }
            NodeToolsChanged {
                node,
                conn_id,
                diff,
                hidden,
            } => Row::new(
                AuditKind::Policy,
                format!("node:{node}"),
                "node.tools_changed",
            )
            .with(ToolsChangedDetail {
                added_capabilities: &diff.added_capabilities,
                added_tools: &diff.added_tools,
                conn_id,
                hidden,
                removed_capabilities: &diff.removed_capabilities,
                removed_tools: &diff.removed_tools,
            })
            .on(node),
            NodeToolsAccepted {
                by,
                node,
                tools,
                capabilities,
                first_use,
            } => Row::new(AuditKind::Policy, by, "node.tools_accepted")
                .with(ToolsAcceptedDetail {
                    capabilities,
                    first_use,
                    tools,
                })
                .on(node),
            NodeLabelsChanged {
                by,
                node,
                before,
                after,
            } => Row::new(AuditKind::Policy, by, "node.labels_changed")
                .with(LabelsChangedDetail { after, before })
                .on(node),
        }
    }
}

impl From<AuditEvent<'_>> for AuditEntry {
    fn from(event: AuditEvent<'_>) -> Self {
        event.into_entry()
    }
}

#[cfg(test)]
mod tests {
    //! Each event's row, pinned: the `detail` text must be byte for byte what the
    //! `json!` maps these events were written with before (rows of both verify with
    //! the same hashes), so each test also rebuilds the old map and compares.
    use super::*;
    use serde_json::json;

    /// The columns of an entry, and its detail as stored.
    fn row(e: AuditEvent<'_>) -> (AuditEntry, String) {
        let entry = e.into_entry();
        let detail = entry
            .detail
            .as_ref()
            .map(|d| d.to_string())
            .unwrap_or_default();
        (entry, detail)
    }

    fn peer() -> SocketAddr {
        "127.0.0.1:5000".parse().expect("addr")
    }

    #[test]
    fn agent_connects_and_disconnects() {
        let (e, detail) = row(AuditEvent::AgentConnected {
            agent: "ci",
            remote: peer(),
            token_id: "t1",
            conn_id: "c1",
        });
        assert_eq!(
            detail,
            r#"{"connId":"c1","remote":"127.0.0.1:5000","tokenId":"t1"}"#
        );
        assert_eq!(
            detail,
            json!({ "remote": peer().to_string(), "tokenId": "t1", "connId": "c1" }).to_string()
        );
        assert_eq!(
            (e.kind, e.actor.as_str(), e.outcome.as_str(), e.node),
            (AuditKind::Connect, "agent:ci", "ok", None)
        );

        #[derive(Debug)]
        #[allow(dead_code)]
        enum EndReason {
            PeerGone,
        }
        let (e, detail) = row(AuditEvent::AgentDisconnected {
            agent: "ci",
            reason: &EndReason::PeerGone,
            token_id: "t1",
            conn_id: "c1",
        });
        assert_eq!(detail, r#"{"connId":"c1","tokenId":"t1"}"#);
        assert_eq!(
            (e.kind, e.actor.as_str(), e.outcome.as_str()),
            (AuditKind::Disconnect, "agent:ci", "PeerGone")
        );
    }

    #[test]
    fn ipv6_remotes_are_written_as_before() {
        let v6: SocketAddr = "[::1]:8787".parse().expect("addr");
        let (_, detail) = row(AuditEvent::NodeEnrollment {
            node: "lab",
            join_token_id: "j1",
            remote: v6,
            outcome: Enrollment::Enrolled,
        });
        assert_eq!(detail, r#"{"joinTokenId":"j1","remote":"[::1]:8787"}"#);
        assert_eq!(
            detail,
            json!({ "joinTokenId": "j1", "remote": v6.to_string() }).to_string()
        );
    }

    #[test]
    fn node_enrollment_outcomes() {
        for (outcome, text) in [
            (Enrollment::Enrolled, "enrolled"),
            (Enrollment::AlreadyEnrolled, "refused:already_enrolled"),
            (Enrollment::JoinTokenUsed, "refused:join_token_used"),
        ] {
            let (e, _) = row(AuditEvent::NodeEnrollment {
                node: "lab",
                join_token_id: "j1",
                remote: peer(),
                outcome,
            });
            assert_eq!(
                (e.kind, e.actor.as_str(), e.outcome.as_str()),
                (AuditKind::Policy, "node:lab", text)
            );
            assert_eq!(e.node.as_deref(), Some("lab"));
        }
    }

    #[test]
    fn node_connects_with_and_without_a_changed_login_profile() {
        let changed = vec!["~/.profile".to_owned(), "q\"uote".to_owned()];
        let (e, detail) = row(AuditEvent::NodeConnected {
            node: "lab",
            remote: peer(),
            conn_id: "c2",
            login_profile_changed: Some(&changed),
        });
        assert_eq!(
            detail,
            r#"{"connId":"c2","loginProfileChanged":["~/.profile","q\"uote"],"remote":"127.0.0.1:5000"}"#
        );
        let mut old = json!({ "remote": peer().to_string(), "connId": "c2" });
        old["loginProfileChanged"] = json!(changed);
        assert_eq!(detail, old.to_string());
        assert_eq!(e.node.as_deref(), Some("lab"));
        assert_eq!(e.actor, "node:lab");

        let (_, detail) = row(AuditEvent::NodeConnected {
            node: "lab",
            remote: peer(),
            conn_id: "c2",
            login_profile_changed: None,
        });
        assert_eq!(detail, r#"{"connId":"c2","remote":"127.0.0.1:5000"}"#);
    }

    #[test]
    fn node_disconnects_name_their_reason_or_the_stray_flood() {
        #[derive(Debug)]
        struct HeartbeatLost;
        for (cut_off, outcome) in [(false, "HeartbeatLost"), (true, "StrayResults")] {
            let (e, detail) = row(AuditEvent::NodeDisconnected {
                node: "lab",
                reason: &HeartbeatLost,
                cut_off,
                pending_calls: 2,
                conn_id: "c3",
                stray_results: 7,
            });
            assert_eq!(
                detail,
                r#"{"connId":"c3","pendingCalls":2,"strayResults":7}"#
            );
            assert_eq!(
                detail,
                json!({ "pendingCalls": 2, "connId": "c3", "strayResults": 7 }).to_string()
            );
            assert_eq!(
                (e.kind, e.outcome.as_str(), e.node.as_deref()),
                (AuditKind::Disconnect, outcome, Some("lab"))
            );
        }
    }

    #[test]
    fn refusals_first_and_repeated() {
        let (e, detail) = row(AuditEvent::Refused {
            peer: peer(),
            role: "http",
            code: "unauthorized",
            message: "invalid or revoked token",
        });
        assert_eq!(
            detail,
            r#"{"message":"invalid or revoked token","role":"http"}"#
        );
        assert_eq!(
            (e.kind, e.actor.as_str(), e.outcome.as_str()),
            (AuditKind::Refused, "127.0.0.1:5000", "unauthorized")
        );

        let (e, detail) = row(AuditEvent::RefusedRepeatedly {
            source: "127.0.0.1",
            role: "agent",
            code: "rate_limited",
            last_message: "m",
            count: 500,
            first_ms: 1,
            last_ms: 2,
            interval_ms: 60_000,
        });
        assert_eq!(
            detail,
            r#"{"count":500,"firstMs":1,"intervalMs":60000,"lastMs":2,"message":"m","repeated":true,"role":"agent"}"#
        );
        assert_eq!(
            detail,
            json!({
                "role": "agent", "message": "m", "count": 500u64, "firstMs": 1u64,
                "lastMs": 2u64, "intervalMs": 60_000u64, "repeated": true,
            })
            .to_string()
        );
        assert_eq!(
            (e.actor.as_str(), e.outcome.as_str()),
            ("127.0.0.1", "rate_limited")
        );
    }

    #[test]
    fn calls_fill_every_column() {
        let name = NamespacedName::parse("lab__Bash").expect("name");
        let (e, detail) = row(AuditEvent::Call {
            agent: "ci",
            token_id: "t1",
            name: &name,
            args_hash: Some("ab".into()),
            args: Some(r#"{"command":"ls"}"#.into()),
            outcome: "tool_error",
            duration_ms: 12,
        });
        assert_eq!(detail, r#"{"tokenId":"t1"}"#);
        assert_eq!(
            (
                e.kind,
                e.actor.as_str(),
                e.outcome.as_str(),
                e.node.as_deref(),
                e.tool.as_deref(),
                e.args_hash.as_deref(),
                e.args.as_deref(),
                e.duration_ms
            ),
            (
                AuditKind::Call,
                "agent:ci",
                "tool_error",
                Some("lab"),
                Some("Bash"),
                Some("ab"),
                Some(r#"{"command":"ls"}"#),
                Some(12)
            )
        );
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            id: "ab12".into(),
            agent: "ci".into(),
            token_id: "t1".into(),
            node: "lab".into(),
            tool: "Bash".into(),
            args_hash: "h".into(),
            summary: "s".into(),
            reason: "r".into(),
            plan: None,
            nodes: Vec::new(),
            created_at: 0,
            expires_at: 0,
            state: "pending".into(),
            decided_at: None,
            decided_by: None,
            args: None,
        }
    }

    #[test]
    fn approvals_requested_decided_and_refused() {
        let req = request();
        let (e, detail) = row(AuditEvent::ApprovalRequested {
            agent: "ci",
            request: &req,
        });
        assert_eq!(detail, r#"{"approval":"ab12"}"#);
        assert_eq!(
            (
                e.kind,
                e.actor.as_str(),
                e.outcome.as_str(),
                e.node.as_deref(),
                e.tool.as_deref(),
                e.args_hash.as_deref()
            ),
            (
                AuditKind::Approval,
                "agent:ci",
                "requested",
                Some("lab"),
                Some("Bash"),
                Some("h")
            )
        );

        let (e, detail) = row(AuditEvent::ApprovalDecided {
            by: "operator",
            approval: "ab12",
            verdict: Verdict::Deny,
            result: Ok(&req),
        });
        assert_eq!(detail, r#"{"approval":"ab12"}"#);
        assert_eq!(
            (e.actor.as_str(), e.outcome.as_str(), e.tool.as_deref()),
            ("operator", "denied", Some("Bash"))
        );

        let (e, detail) = row(AuditEvent::ApprovalDecided {
            by: "admin-api",
            approval: "zz",
            verdict: Verdict::Approve,
            result: Err(ErrorCode::NotFound),
        });
        assert_eq!(detail, r#"{"approval":"zz"}"#);
        assert_eq!(
            (e.outcome.as_str(), e.node, e.tool, e.args_hash),
            ("refused:not_found", None, None, None)
        );

        let name = NamespacedName::parse("lab__Bash").expect("name");
        let (e, detail) = row(AuditEvent::CallerDecided {
            agent: "ci",
            token_id: "t1",
            name: &name,
            args_hash: "h".into(),
            verdict: Verdict::Approve,
        });
        assert_eq!(detail, r#"{"tokenId":"t1","via":"caller"}"#);
        assert_eq!(
            detail,
            json!({ "via": "caller", "tokenId": "t1" }).to_string()
        );
        assert_eq!(
            (
                e.outcome.as_str(),
                e.node.as_deref(),
                e.args_hash.as_deref()
            ),
            ("approved", Some("lab"), Some("h"))
        );
    }

    #[test]
    fn node_offers_changed_and_accepted() {
        let diff = OfferDiff {
            added_tools: vec!["Echo".into()],
            removed_tools: vec!["Bash".into()],
            added_capabilities: vec!["diagnostics.echo".into()],
            removed_capabilities: vec![],
        };
        let (e, detail) = row(AuditEvent::NodeToolsChanged {
            node: "lab",
            conn_id: "c4",
            diff: &diff,
            hidden: true,
        });
        assert_eq!(
            detail,
            r#"{"addedCapabilities":["diagnostics.echo"],"addedTools":["Echo"],"connId":"c4","hidden":true,"removedCapabilities":[],"removedTools":["Bash"]}"#
        );
        assert_eq!(
            (
                e.kind,
                e.actor.as_str(),
                e.outcome.as_str(),
                e.node.as_deref()
            ),
            (
                AuditKind::Policy,
                "node:lab",
                "node.tools_changed",
                Some("lab")
            )
        );
        let tools = vec!["Echo".to_owned()];
        let (e, detail) = row(AuditEvent::NodeToolsAccepted {
            by: "operator",
            node: "lab",
            tools: &tools,
            capabilities: &[],
            first_use: false,
        });
        assert_eq!(detail, r#"{"capabilities":[],"tools":["Echo"]}"#);
        assert_eq!(
            (e.actor.as_str(), e.outcome.as_str(), e.node.as_deref()),
            ("operator", "node.tools_accepted", Some("lab"))
        );
        let (e, detail) = row(AuditEvent::NodeToolsAccepted {
            by: "first-use",
            node: "lab",
            tools: &tools,
            capabilities: &[],
            first_use: true,
        });
        assert_eq!(
            detail,
            r#"{"capabilities":[],"firstUse":true,"tools":["Echo"]}"#
        );
        assert_eq!(e.actor, "first-use");
    }

    #[test]
    fn node_labels_changed_keep_before_and_after() {
        let before: Labels = [("env".to_owned(), "prod".to_owned())].into();
        let after: Labels = [
            ("env".to_owned(), "staging".to_owned()),
            ("role".to_owned(), "web".to_owned()),
        ]
        .into();
        let (e, detail) = row(AuditEvent::NodeLabelsChanged {
            by: "operator",
            node: "web1",
            before: &before,
            after: &after,
        });
        assert_eq!(e.kind, AuditKind::Policy);
        assert_eq!(
            (e.actor.as_str(), e.outcome.as_str(), e.node.as_deref()),
            ("operator", "node.labels_changed", Some("web1"))
        );
        assert_eq!(
            detail,
            json!({"after": {"env": "staging", "role": "web"}, "before": {"env": "prod"}})
                .to_string()
        );
    }

    #[test]
    fn tokens_issued_and_revoked() {
        let policy = PolicySpec {
            allow: vec!["lab__*".into()],
            deny: vec![],
            confirm: vec!["*__Bash".into()],
            self_confirm: true,
            ..PolicySpec::default()
        };
        let (e, detail) = row(AuditEvent::TokenIssued {
            actor: "cli",
            token_id: "t9",
            kind: TokenKind::Agent,
            subject: "ci",
            policy: Some(&policy),
            role: None,
        });
        assert_eq!(
            detail,
            r#"{"kind":"agent","policy":{"allow":["lab__*"],"confirm":["*__Bash"],"deny":[],"self_confirm":true},"subject":"ci","tokenId":"t9"}"#
        );
        assert_eq!(
            (e.kind, e.actor.as_str(), e.outcome.as_str()),
            (AuditKind::Policy, "cli", "token_created")
        );
        let (_, detail) = row(AuditEvent::TokenIssued {
            actor: "gateway",
            token_id: "t0",
            kind: TokenKind::Admin,
            subject: "admin",
            policy: None,
            role: None,
        });
        assert_eq!(
            detail,
            r#"{"kind":"admin","subject":"admin","tokenId":"t0"}"#
        );
        let (e, detail) = row(AuditEvent::TokenRevoked {
            actor: "up",
            token_id: "t9",
        });
        assert_eq!(detail, r#"{"tokenId":"t9"}"#);
        assert_eq!(
            (e.actor.as_str(), e.outcome.as_str()),
            ("up", "token_revoked")
        );
    }
}
