//! The tokens in the store, as a door reads and changes them (the console's tokens
//! page): whether one is live, the list of all, issuing and revoking one, each
//! through [`crate::tokens`] on the store's blocking pool. A door holds no store.

use crate::policy::PolicySpec;
use crate::store::{StoreError, TokenInfo};
use crate::token::TokenKind;
use crate::tokens::{Issued, Issuer};
use tokio::task::JoinError;

impl super::Fleet {
    /// Whether the token `id` exists and is not revoked.
    pub async fn token_live(&self, id: &str) -> Result<Result<bool, StoreError>, JoinError> {
        let id = id.to_owned();
        self.shared.store.blocking(move |s| s.token_live(&id)).await
    }

    /// Every token (ids, kinds, subjects, policies; never secrets).
    pub async fn list_tokens(&self) -> Result<Result<Vec<TokenInfo>, StoreError>, JoinError> {
        self.shared.store.blocking(|s| s.list_tokens()).await
    }

    /// Issues a new token of `kind` for `subject` under `policy`, as `issuer`
    /// (audited by [`crate::tokens::issue`]): the secret, shown once, and its id.
    pub async fn issue_token(
        &self,
        issuer: Issuer,
        kind: TokenKind,
        subject: String,
        policy: Option<PolicySpec>,
    ) -> Result<Result<Issued, StoreError>, JoinError> {
        self.shared
            .store
            .blocking(move |s| crate::tokens::issue(s, issuer, kind, &subject, policy.as_ref()))
            .await
    }

    /// Revokes token `id` as `issuer` (audited by [`crate::tokens::revoke`]); whether
    /// there was an active token of that id.
    pub async fn revoke_token(
        &self,
        issuer: Issuer,
        id: &str,
    ) -> Result<Result<bool, StoreError>, JoinError> {
        let id = id.to_owned();
        self.shared
            .store
            .blocking(move |s| crate::tokens::revoke(s, issuer, &id))
            .await
    }
}
