//! Queries on the `tokens` table: minting, verifying, redeeming join tokens, listing
//! and revoking.
//!
//! Kept apart from the store's connection handling ([`super`]) so the file that opens
//! the database does not also carry every token query.

use super::{Store, StoreError};
use crate::operator::OperatorRole;
use crate::policy::PolicySpec;
use crate::token::{self, TokenKind};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

/// A valid, unrevoked token as found at authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: String,
    pub kind: TokenKind,
    /// Node id (node tokens), agent name (agent tokens) or `admin`.
    pub subject: String,
    pub policy: Option<PolicySpec>,
    /// An operator token's role (operator tokens only).
    pub role: Option<OperatorRole>,
}

/// What redeeming a join token came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeem {
    /// The node's new credential (shown once, in `hello-ok`).
    Credential { token: String, id: String },
    /// The node id already has an active credential.
    AlreadyEnrolled,
    /// The join token was used by another connection first.
    AlreadyUsed,
}

/// One row of `gsv token list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenInfo {
    pub id: String,
    pub kind: String,
    pub subject: String,
    pub policy: Option<PolicySpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<OperatorRole>,
    pub created_at: u64,
    pub revoked_at: Option<u64>,
}

impl Store {
    /// Mints and stores a token; returns the full token string (shown once) and its id.
    /// Unaudited: commands issue tokens through [`crate::tokens`], which records them.
    pub fn create_token(
        &self,
        kind: TokenKind,
        subject: &str,
        policy: Option<&PolicySpec>,
    ) -> Result<(String, String), StoreError> {
        insert_token(&self.conn(), kind, subject, policy)
    }

    /// Checks a presented token. `Ok(None)` if it is malformed, unknown, revoked or
    /// its secret does not match.
    pub fn verify(&self, presented: &str) -> Result<Option<TokenRecord>, StoreError> {
        let Some(parsed) = token::parse(presented) else {
            return Ok(None);
        };
        let row = self
            .conn()
            .query_row(
                "SELECT kind, subject, hash, policy, role FROM tokens WHERE id = ?1 AND revoked_at IS NULL",
                params![parsed.id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, Option<String>>(4)?,
                    ))
                },
            )
            .optional()?;
        let Some((kind, subject, hash, policy, role)) = row else {
            return Ok(None);
        };
        if TokenKind::parse(&kind) != Some(parsed.kind) || !parsed.matches(&hash) {
            return Ok(None);
        }
        let policy = policy
            .map(|p| serde_json::from_str::<PolicySpec>(&p))
            .transpose()
            .map_err(|e| StoreError::Policy(e.to_string()))?;
        let role = role.as_deref().map(OperatorRole::parse);
        if parsed.kind == TokenKind::Operator && !matches!(role, Some(Some(_))) {
            // The schema's checks keep this from happening; a row that breaks them
            // authenticates nobody rather than someone with a guessed role.
            return Err(StoreError::Policy(format!(
                "operator token {} has no valid role",
                parsed.id
            )));
        }
        Ok(Some(TokenRecord {
            id: parsed.id.to_owned(),
            kind: parsed.kind,
            subject,
            policy,
            role: role.flatten(),
        }))
    }

    /// The active token with this id, without its secret: for a call another replica
    /// authenticated and forwarded (cluster mode). `Ok(None)` when it is unknown or
    /// revoked here.
    pub fn active_by_id(&self, id: &str) -> Result<Option<TokenRecord>, StoreError> {
        let row = self
            .conn()
            .query_row(
                "SELECT kind, subject, policy, role FROM tokens WHERE id = ?1 AND revoked_at IS NULL",
                params![id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                },
            )
            .optional()?;
        let Some((kind, subject, policy, role)) = row else {
            return Ok(None);
        };
        let Some(kind) = TokenKind::parse(&kind) else {
            return Ok(None);
        };
        let policy = policy
            .map(|p| serde_json::from_str::<PolicySpec>(&p))
            .transpose()
            .map_err(|e| StoreError::Policy(e.to_string()))?;
        let role = role.as_deref().and_then(OperatorRole::parse);
        if (kind == TokenKind::Operator) != role.is_some() {
            return Ok(None);
        }
        Ok(Some(TokenRecord {
            id: id.to_owned(),
            kind,
            subject,
            policy,
            role,
        }))
    }

    /// Exchanges a join token for a node credential, once. Refused when the node id
    /// already has an active credential (revoke it first to enroll again) — the join
    /// token then stays usable — or when the join token was used meanwhile.
    pub fn redeem_join(&self, join_id: &str, node_id: &str) -> Result<Redeem, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let enrolled: i64 = tx.query_row(
            "SELECT COUNT(*) FROM tokens WHERE kind = 'node' AND subject = ?1 AND revoked_at IS NULL",
            params![node_id],
            |r| r.get(0),
        )?;
        if enrolled > 0 {
            return Ok(Redeem::AlreadyEnrolled);
        }
        let used = tx.execute(
            "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND kind = 'join' AND revoked_at IS NULL",
            params![join_id, now_ms() as i64],
        )?;
        if used == 0 {
            return Ok(Redeem::AlreadyUsed);
        }
        let t = token::generate(TokenKind::Node);
        tx.execute(
            "INSERT INTO tokens (id, kind, subject, hash, policy, created_at) VALUES (?1, 'node', ?2, ?3, NULL, ?4)",
            params![t.id, node_id, &t.hash[..], now_ms() as i64],
        )?;
        tx.commit()?;
        Ok(Redeem::Credential {
            token: t.token,
            id: t.id,
        })
    }

    /// Every token, newest first.
    pub fn list_tokens(&self) -> Result<Vec<TokenInfo>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, kind, subject, policy, created_at, revoked_at, role FROM tokens ORDER BY created_at DESC, id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<String>>(6)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, kind, subject, policy, created, revoked, role) = row?;
            out.push(TokenInfo {
                id,
                kind,
                subject,
                policy: policy.and_then(|p| serde_json::from_str(&p).ok()),
                role: role.as_deref().and_then(OperatorRole::parse),
                created_at: created.max(0) as u64,
                revoked_at: revoked.map(|r| r.max(0) as u64),
            });
        }
        Ok(out)
    }

    /// Revokes a token by id. `Ok(false)` if there is no such unrevoked token.
    pub fn revoke(&self, id: &str) -> Result<bool, StoreError> {
        revoke_token(&self.conn(), id)
    }
}

/// Mints a token and inserts it through `conn` (a connection or a transaction).
pub(crate) fn insert_token(
    conn: &Connection,
    kind: TokenKind,
    subject: &str,
    policy: Option<&PolicySpec>,
) -> Result<(String, String), StoreError> {
    let t = token::generate(kind);
    let policy_json = policy
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Policy(e.to_string()))?;
    conn.execute(
        "INSERT INTO tokens (id, kind, subject, hash, policy, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![t.id, kind.as_str(), subject, &t.hash[..], policy_json, now_ms() as i64],
    )?;
    Ok((t.token, t.id))
}

/// Mints an operator token for `name` with `role` and inserts it through `conn`.
pub(crate) fn insert_operator_token(
    conn: &Connection,
    name: &str,
    role: OperatorRole,
) -> Result<(String, String), StoreError> {
    let t = token::generate(TokenKind::Operator);
    conn.execute(
        "INSERT INTO tokens (id, kind, subject, hash, policy, created_at, role) VALUES (?1, 'operator', ?2, ?3, NULL, ?4, ?5)",
        params![t.id, name, &t.hash[..], now_ms() as i64, role.as_str()],
    )?;
    Ok((t.token, t.id))
}

/// Revokes the active token `id` through `conn`; whether there was one.
pub(crate) fn revoke_token(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    let n = conn.execute(
        "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
        params![id, now_ms() as i64],
    )?;
    Ok(n > 0)
}

fn now_ms() -> u64 {
    gsv_protocol::now_ms()
}
