//! Who may do what besides agents: the admin, and operators with a role.
//!
//! Operators watch the fleet and decide approvals without holding the admin token
//! (`gsv token create operator NAME --role approver|viewer`). The role is one small
//! closed set, and every check of it goes through [`Authority`], so the WebSocket
//! methods, the HTTP API and the console ask the same question the same way.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An operator token's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperatorRole {
    /// Reads everything an operator reads and decides approvals.
    Approver,
    /// Reads everything an operator reads; changes nothing.
    Viewer,
}

impl OperatorRole {
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorRole::Approver => "approver",
            OperatorRole::Viewer => "viewer",
        }
    }

    pub fn parse(s: &str) -> Option<OperatorRole> {
        match s {
            "approver" => Some(OperatorRole::Approver),
            "viewer" => Some(OperatorRole::Viewer),
            _ => None,
        }
    }
}

impl fmt::Display for OperatorRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a connection's or request's token lets it do beyond its tool policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// The admin token: everything.
    Admin,
    /// An operator token with its role.
    Operator(OperatorRole),
    /// An agent token: its policy decides, it reads only its own.
    Agent,
}

impl Authority {
    /// Reads the whole fleet: every node, approval, job, session, and the operator
    /// events (approvals opened and decided, sessions ended).
    pub fn reads_all(self) -> bool {
        !matches!(self, Authority::Agent)
    }

    /// Decides approval requests.
    pub fn decides(self) -> bool {
        matches!(
            self,
            Authority::Admin | Authority::Operator(OperatorRole::Approver)
        )
    }

    /// Changes the fleet itself: tokens, labels, accepted tools, other tokens' jobs.
    pub fn is_admin(self) -> bool {
        self == Authority::Admin
    }

    /// How a decision by `name` (the token's subject) is recorded in `decided_by` and
    /// the audit log: `by` (the channel, e.g. `operator` or `admin-api`) for the admin
    /// token, `operator:NAME` for an operator's.
    pub fn decider(self, by: &str, name: &str) -> String {
        match self {
            Authority::Operator(_) => format!("operator:{name}"),
            _ => by.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_and_unknown_ones_are_refused() {
        for r in [OperatorRole::Approver, OperatorRole::Viewer] {
            assert_eq!(OperatorRole::parse(r.as_str()), Some(r));
        }
        assert_eq!(OperatorRole::parse("admin"), None);
        assert_eq!(OperatorRole::parse("Approver"), None);
    }

    #[test]
    fn only_the_admin_and_approvers_decide() {
        assert!(Authority::Admin.decides());
        assert!(Authority::Operator(OperatorRole::Approver).decides());
        assert!(!Authority::Operator(OperatorRole::Viewer).decides());
        assert!(!Authority::Agent.decides());
        assert!(Authority::Operator(OperatorRole::Viewer).reads_all());
        assert!(!Authority::Agent.reads_all());
        assert!(!Authority::Operator(OperatorRole::Approver).is_admin());
    }
}
