//! Issuing and revoking tokens, each recorded in the audit log.
//!
//! Every command that brings a token into being goes through here: `gsv token create`
//! and `revoke`, the admin token the gateway mints for itself, and the node and agent
//! tokens `gsv up` writes for its local node and the local user. The token row and its
//! audit row (`kind: policy`, `token_created` / `token_revoked`, the acting command as
//! `actor`) are written in one transaction, so no token exists that the audit log does
//! not know about, and no audit row names a token that was never stored.

use crate::audit::{self, AuditEvent};
use crate::datadir;
use crate::operator::OperatorRole;
use crate::policy::PolicySpec;
use crate::store::{
    insert_operator_token, insert_token, read_node_labels, revoke_token, write_node_labels, Store,
    StoreError,
};
use crate::token::TokenKind;
use gsv_protocol::inventory::Labels;
use rusqlite::TransactionBehavior;
use std::path::{Path, PathBuf};

/// Who issues or revokes a token: the audit row's `actor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issuer {
    /// `gsv token create` / `revoke`.
    Cli,
    /// The gateway itself (its admin token).
    Gateway,
    /// `gsv up` (its node's and the local agent's tokens).
    Up,
    /// The operator console (`/ui`).
    Console,
}

impl Issuer {
    fn actor(self) -> &'static str {
        match self {
            Issuer::Cli => "cli",
            Issuer::Gateway => "gateway",
            Issuer::Up => "up",
            Issuer::Console => "console",
        }
    }
}

/// A token just issued: the full token (shown once) and its id.
#[derive(Debug)]
pub struct Issued {
    pub token: String,
    pub id: String,
}

/// Why a token could not be kept in its file.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("could not write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Mints a token of `kind` for `subject` (with `policy` for an agent token) and
/// records it, in one transaction.
pub fn issue(
    store: &Store,
    issuer: Issuer,
    kind: TokenKind,
    subject: &str,
    policy: Option<&PolicySpec>,
) -> Result<Issued, StoreError> {
    issue_with_labels(store, issuer, kind, subject, policy, None)
}

/// [`issue`] for a node id (`kind` node or join) that also gives the node `labels`
/// (`gsv token create node ID --label K=V`), replacing the labels it had: the token,
/// the labels and both audit rows (`token_created`, `node.labels_changed` with the
/// labels before and after) in one transaction. `None` leaves the node's labels as
/// they are. The labels must already be checked (`check_labels`); the store checks
/// them again and refuses the whole issue if they break a rule.
pub fn issue_with_labels(
    store: &Store,
    issuer: Issuer,
    kind: TokenKind,
    subject: &str,
    policy: Option<&PolicySpec>,
    labels: Option<&Labels>,
) -> Result<Issued, StoreError> {
    store.with_conn(|conn| {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (token, id) = insert_token(&tx, kind, subject, policy)?;
        let now = gsv_protocol::now_ms();
        let mut rows = vec![(
            now,
            AuditEvent::TokenIssued {
                actor: issuer.actor(),
                token_id: &id,
                kind,
                subject,
                policy,
                role: None,
            }
            .into(),
        )];
        let before;
        if let Some(after) = labels {
            before = read_node_labels(&tx, subject)?;
            if before != *after {
                write_node_labels(&tx, subject, after, issuer.actor(), now)?;
                rows.push((
                    now,
                    AuditEvent::NodeLabelsChanged {
                        by: issuer.actor(),
                        node: subject,
                        before: &before,
                        after,
                    }
                    .into(),
                ));
            }
        }
        audit::append_in(&tx, &rows)?;
        tx.commit()?;
        Ok(Issued { token, id })
    })
}

/// Mints an operator token for `name` with `role` (`gsv token create operator`) and
/// records it, in one transaction.
pub fn issue_operator(
    store: &Store,
    issuer: Issuer,
    name: &str,
    role: OperatorRole,
) -> Result<Issued, StoreError> {
    store.with_conn(|conn| {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (token, id) = insert_operator_token(&tx, name, role)?;
        let event = AuditEvent::TokenIssued {
            actor: issuer.actor(),
            token_id: &id,
            kind: TokenKind::Operator,
            subject: name,
            policy: None,
            role: Some(role),
        };
        audit::append_in(&tx, &[(gsv_protocol::now_ms(), event.into())])?;
        tx.commit()?;
        Ok(Issued { token, id })
    })
}

/// Revokes the active token `id` and records it, in one transaction. `Ok(false)` when
/// there is no such active token (nothing is recorded then).
pub fn revoke(store: &Store, issuer: Issuer, id: &str) -> Result<bool, StoreError> {
    store.with_conn(|conn| {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !revoke_token(&tx, id)? {
            return Ok(false);
        }
        let event = AuditEvent::TokenRevoked {
            actor: issuer.actor(),
            token_id: id,
        };
        audit::append_in(&tx, &[(gsv_protocol::now_ms(), event.into())])?;
        tx.commit()?;
        Ok(true)
    })
}

/// The token kept in `path` when it is still valid for `kind` and `subject`; else a
/// new one, issued (and recorded) and written there (0600).
pub fn reuse_or_issue(
    store: &Store,
    path: &Path,
    issuer: Issuer,
    kind: TokenKind,
    subject: &str,
    policy: Option<&PolicySpec>,
) -> Result<String, TokenFileError> {
    if let Some(existing) = datadir::read_line(path) {
        if let Ok(Some(rec)) = store.verify(&existing) {
            if rec.kind == kind && rec.subject == subject {
                return Ok(existing);
            }
        }
    }
    let issued = issue(store, issuer, kind, subject, policy)?;
    datadir::write_secret(path, &issued.token).map_err(|source| TokenFileError::Write {
        path: path.to_owned(),
        source,
    })?;
    Ok(issued.token)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a fresh directory (left in the system's temp dir, like the store's
    /// own tests).
    fn store() -> (PathBuf, Store) {
        let dir = std::env::temp_dir().join(format!("gsv-tokens-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let store = Store::open(&dir).expect("store");
        (dir, store)
    }

    fn rows(store: &Store) -> Vec<(String, String, String)> {
        store
            .with_conn(|c| {
                let mut stmt =
                    c.prepare("SELECT actor, outcome, detail FROM audit ORDER BY seq")?;
                let rows = stmt
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(rows)
            })
            .expect("rows")
    }

    #[test]
    fn issuing_and_revoking_are_recorded_with_their_actor() {
        let (_d, store) = store();
        let issued = issue(&store, Issuer::Up, TokenKind::Agent, "me", None).expect("issued");
        assert!(store.verify(&issued.token).expect("verify").is_some());
        assert!(revoke(&store, Issuer::Cli, &issued.id).expect("revoked"));
        assert!(!revoke(&store, Issuer::Cli, &issued.id).expect("no longer active"));
        let rows = rows(&store);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            (rows[0].0.as_str(), rows[0].1.as_str()),
            ("up", "token_created")
        );
        assert!(rows[0].2.contains(&issued.id) && rows[0].2.contains("\"subject\":\"me\""));
        assert_eq!(
            (rows[1].0.as_str(), rows[1].1.as_str()),
            ("cli", "token_revoked")
        );
        let report = store.with_conn(|c| audit::verify(c)).expect("verify");
        assert!(report.ok, "{:?}", report.problem);
    }

    #[test]
    fn node_labels_are_written_with_the_token_and_audited() {
        let (_d, store) = store();
        let prod: Labels = [("env".to_owned(), "prod".to_owned())].into();
        issue_with_labels(
            &store,
            Issuer::Cli,
            TokenKind::Join,
            "web1",
            None,
            Some(&prod),
        )
        .expect("issued");
        assert_eq!(store.node_labels("web1").expect("labels"), prod);
        // Without labels: the node keeps the ones it has.
        issue(&store, Issuer::Cli, TokenKind::Join, "web1", None).expect("issued");
        assert_eq!(store.node_labels("web1").expect("labels"), prod);
        let outcomes: Vec<String> = rows(&store).into_iter().map(|r| r.1).collect();
        assert_eq!(
            outcomes,
            ["token_created", "node.labels_changed", "token_created"]
        );
        assert!(rows(&store)[1]
            .2
            .contains(r#""after":{"env":"prod"},"before":{}"#));
        // Labels that break a rule: no token, no labels, no row.
        let bad: Labels = [("Env".to_owned(), "x".to_owned())].into();
        assert!(issue_with_labels(
            &store,
            Issuer::Cli,
            TokenKind::Join,
            "web2",
            None,
            Some(&bad)
        )
        .is_err());
        assert_eq!(rows(&store).len(), 3);
        assert!(store
            .list_tokens()
            .expect("list")
            .iter()
            .all(|t| t.subject != "web2"));
        let report = store.with_conn(|c| audit::verify(c)).expect("verify");
        assert!(report.ok, "{:?}", report.problem);
    }

    #[test]
    fn a_kept_token_is_reused_and_a_stale_one_replaced() {
        let (dir, store) = store();
        let path = dir.join("agent.token");
        let first = reuse_or_issue(
            &store,
            &path,
            Issuer::Gateway,
            TokenKind::Admin,
            "admin",
            None,
        )
        .expect("issued");
        let again = reuse_or_issue(
            &store,
            &path,
            Issuer::Gateway,
            TokenKind::Admin,
            "admin",
            None,
        )
        .expect("reused");
        assert_eq!(first, again);
        assert_eq!(rows(&store).len(), 1, "reuse records nothing");
        // Another subject for the same file: a new token, recorded.
        let other = reuse_or_issue(
            &store,
            &path,
            Issuer::Gateway,
            TokenKind::Admin,
            "other",
            None,
        )
        .expect("replaced");
        assert_ne!(first, other);
        assert_eq!(rows(&store).len(), 2);
    }
}
