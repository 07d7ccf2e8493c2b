//! Closing the connections of revoked tokens.
//!
//! `gsv token revoke` writes the database from another process; the gateway notices
//! within a second by polling for newly revoked ids (a single indexed-free query on a
//! small table), closes every node and agent connection that authenticated with one of
//! them, and cancels their running jobs.

use crate::state::Shared;
use rusqlite::params;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const POLL: Duration = Duration::from_secs(1);

/// Runs until the gateway shuts down.
pub async fn watch(shared: Arc<Shared>) {
    let mut since = gsv_protocol::now_ms() as i64 - 1;
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let from = since;
        let found = shared.store.blocking(move |store| {
            store.with_conn(|c| {
                let mut stmt = c.prepare(
                    "SELECT id, revoked_at, kind FROM tokens WHERE revoked_at IS NOT NULL AND revoked_at >= ?1",
                )?;
                let rows = stmt.query_map(params![from], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?))
                })?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
        })
        .await;
        let revoked = match found {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot read revocations");
                continue;
            }
            Err(_) => continue,
        };
        let mut ended = Vec::with_capacity(revoked.len());
        for (id, at, kind) in revoked {
            since = since.max(at + 1);
            ended.push((id, kind));
        }
        cut(&shared, ended).await;
    }
}

/// Ends what the revoked tokens `(id, kind)` hold on this gateway: their node and
/// agent connections, console sessions and jobs, and agents' process sessions on every
/// node. Also used when a revocation made on another replica arrives
/// ([`crate::cluster::tokens`]).
pub(crate) async fn cut(shared: &Shared, revoked: Vec<(String, String)>) {
    let mut ids = Vec::with_capacity(revoked.len());
    for (id, kind) in revoked {
        shared.peers.token_revoked(&id);
        close_token(shared, &id);
        // A join token is marked revoked when it is redeemed: no sessions to end.
        if kind == "agent" {
            ids.push(id);
        }
    }
    // Agents' process sessions end too (nodes ignore ids that own none).
    if !ids.is_empty() {
        shared.revoked_recent.invalidate().await;
        crate::session_end::end_everywhere(shared, ids);
    }
}

fn close_token(shared: &Shared, token_id: &str) {
    // Console sessions opened with a code it minted end too.
    shared.token_holders.revoked(token_id);
    shared.changes.send(crate::changes::Topic::Tokens);
    // Its jobs end too: a revoked token's calls do not run on.
    let cancelled = crate::jobs::cancel_token_jobs(shared, token_id);
    if cancelled > 0 {
        tracing::info!(
            token_id,
            cancelled,
            "token revoked: its running jobs cancelled"
        );
    }
    for a in shared.agents.iter() {
        if a.token_id == token_id {
            tracing::info!(agent = %a.name, token_id, "token revoked: closing agent connection");
            a.out
                .close_with(CloseCode::Policy, gsv_protocol::limits::CLOSE_REVOKED);
        }
    }
    for n in shared.registry.all() {
        if n.token_id == token_id {
            tracing::info!(node_id = %n.id, token_id, "token revoked: closing node connection");
            n.out
                .close_with(CloseCode::Policy, gsv_protocol::limits::CLOSE_REVOKED);
        }
    }
}
