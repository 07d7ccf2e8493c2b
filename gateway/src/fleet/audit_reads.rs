//! Reading the audit log back (the console's audit page): rows newest first, the last
//! sequence number and, when asked, the chain's verification, read in one go from the
//! store the log lives in, which a door does not hold.

use crate::audit::{AuditRow, VerifyReport};
use crate::store::StoreError;
use tokio::task::JoinError;

/// One read of the audit log.
pub struct AuditRead {
    /// Rows newest first.
    pub rows: Vec<AuditRow>,
    /// The newest row's sequence number (0 for an empty log).
    pub last_seq: i64,
    /// The whole chain's verification, when asked for.
    pub verify: Option<VerifyReport>,
}

impl super::Fleet {
    /// Up to `limit` audit rows before sequence number `before` (newest first),
    /// those matching `text` only, with the last sequence number and, if `verify`,
    /// the chain walked whole ([`crate::audit::verify`]); all on one connection.
    pub async fn read_audit(
        &self,
        before: Option<i64>,
        limit: u32,
        text: Option<String>,
        verify: bool,
    ) -> Result<Result<AuditRead, StoreError>, JoinError> {
        self.shared
            .store
            .blocking(move |s| {
                s.with_conn(|c| {
                    Ok(AuditRead {
                        rows: crate::audit::rows_before(c, before, limit, text.as_deref())?,
                        last_seq: crate::audit::last_seq(c)?,
                        verify: verify.then(|| crate::audit::verify(c)).transpose()?,
                    })
                })
            })
            .await
    }
}
