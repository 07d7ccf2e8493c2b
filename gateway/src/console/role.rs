//! What a console session may do, apart from who minted it.
//!
//! The console does not know token kinds: it gets a [`Role`] when its login code is
//! minted, from the principal that asked ([`Role::from_principal`], the one place the
//! mapping lives). Every read is open to every role; deciding approvals and managing
//! tokens and sessions are not.

use super::ConsoleError;
use crate::auth::Principal;
use crate::operator::OperatorRole;
use serde::Serialize;

/// A console session's authority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything: decide, manage tokens, kill sessions.
    Admin,
    /// Reads, and decides approval requests.
    Approver,
    /// Reads only.
    Viewer,
}

impl Role {
    /// Whether the session may approve or deny a call.
    pub fn can_decide(self) -> bool {
        matches!(self, Role::Admin | Role::Approver)
    }

    /// Whether the session may create and revoke tokens and kill process sessions.
    pub fn can_manage(self) -> bool {
        matches!(self, Role::Admin)
    }

    /// The role a caller of `POST /v1/ui/login-codes` gets: the admin token makes an
    /// admin session, an operator token a session of its role; an agent token makes
    /// none.
    pub(crate) fn from_principal(principal: &Principal) -> Result<Role, ConsoleError> {
        match principal {
            Principal::Admin { .. } => Ok(Role::Admin),
            Principal::Operator { role, .. } => Ok(match role {
                OperatorRole::Approver => Role::Approver,
                OperatorRole::Viewer => Role::Viewer,
            }),
            Principal::Agent { .. } => Err(ConsoleError::AgentToken),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_admins_manage_and_viewers_only_read() {
        assert!(Role::Admin.can_decide() && Role::Admin.can_manage());
        assert!(Role::Approver.can_decide() && !Role::Approver.can_manage());
        assert!(!Role::Viewer.can_decide() && !Role::Viewer.can_manage());
    }
}
