//! The holder's side of a link: `GET /v1/replica` on the gateway's listener. The
//! dialling replica must answer a fresh challenge with the HMAC of this run's secret
//! (which only replicas on NATS heard) within [`OPENING`]; until then the connection
//! counts as unauthenticated (the listener's caps) and its frames are capped at
//! 64 KiB. Then every call on it is taken exactly as one forwarded over NATS
//! ([`crate::cluster::calls::on_link`]).

use super::wire::{self, Challenge, LinkMsg, Proof, Welcome};
use super::OPENING;
use crate::cluster::Cluster;
use crate::conn::Ws;
use crate::state::Shared;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{SinkExt, StreamExt};
use gsv_transport::tungstenite::Message;
use std::net::SocketAddr;
use std::sync::Arc;

/// The route of `GET /v1/replica`, for a replica's listener (a gateway alone has none:
/// 404).
pub fn router(shared: Arc<Shared>, cluster: Arc<Cluster>) -> Router {
    Router::new()
        .route("/v1/replica", get(endpoint))
        .with_state((shared, cluster))
}

/// `GET /v1/replica`: 404 unless this replica offers a link.
async fn endpoint(
    State((shared, cluster)): State<(Arc<Shared>, Arc<Cluster>)>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    let Some(secret) = cluster.links.own.get().map(|o| o.secret.clone()) else {
        return (StatusCode::NOT_FOUND, "this replica offers no link\n").into_response();
    };
    let ticket = shared.admission.ticket(peer);
    crate::upgrade::upgrade(req, move |ws| async move {
        let Some((ws, from)) = open(ws, &cluster.replica, &secret).await else {
            tracing::info!(peer = %peer, "cluster: a link's opening failed");
            return;
        };
        if let Some(t) = &ticket {
            t.authenticated();
        }
        drop(ticket);
        tracing::info!(replica = %from, "cluster: link from replica open");
        serve(shared, cluster, ws).await;
        tracing::info!(replica = %from, "cluster: link from replica closed");
    })
}

/// The opening: challenge, proof, welcome; the session stream and the dialling
/// replica's name, `None` when it failed (the connection is closed).
async fn open(mut ws: Ws, own: &str, secret: &str) -> Option<(Ws, String)> {
    let challenge = wire::random_hex();
    let opening = async {
        let text = serde_json::to_string(&Challenge {
            challenge: challenge.clone(),
        })
        .ok()?;
        ws.send(Message::text(text)).await.ok()?;
        let proof: Proof = loop {
            match ws.next().await? {
                Ok(Message::Text(t)) => break serde_json::from_str(t.as_str()).ok()?,
                Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                _ => return None,
            }
        };
        let valid = crate::cluster::valid_replica_name(&proof.replica)
            && wire::proven(secret.as_bytes(), &challenge, &proof.replica, &proof.proof);
        valid.then_some(proof.replica)
    };
    let from = match tokio::time::timeout(OPENING, opening).await {
        Ok(Some(from)) => from,
        _ => {
            gsv_transport::driver::close_stream(
                &mut ws,
                gsv_transport::tungstenite::protocol::frame::coding::CloseCode::Policy,
                "link refused",
            )
            .await;
            return None;
        }
    };
    let mut ws = crate::upgrade::into_session(ws, false).await;
    let text = serde_json::to_string(&Welcome {
        replica: own.to_owned(),
    })
    .ok()?;
    ws.send(Message::text(text)).await.ok()?;
    Some((ws, from))
}

/// Takes the calls that come on the link until it ends; their answers go back on it.
async fn serve(shared: Arc<Shared>, cluster: Arc<crate::cluster::Cluster>, ws: Ws) {
    let (sink, mut stream) = ws.split();
    let peer = super::peer(&cluster.links, sink);
    loop {
        let frame = tokio::select! {
            f = stream.next() => f,
            _ = shared.shutdown.cancelled() => break,
            _ = peer.wire.dead.cancelled() => break,
        };
        let Some(Ok(frame)) = frame else { break };
        let Message::Text(text) = frame else { continue };
        match serde_json::from_str::<LinkMsg>(text.as_str()) {
            Ok(LinkMsg::Call { key, call }) => {
                tokio::spawn(crate::cluster::calls::on_link(
                    Arc::clone(&shared),
                    Arc::clone(&cluster),
                    key,
                    call,
                    peer.clone(),
                ));
                // The call goes on first: this task's next read can wait.
                tokio::task::yield_now().await;
            }
            Ok(_) => {
                tracing::warn!(
                    "cluster: a message other than a call on a link from another replica; ignored"
                )
            }
            Err(e) => {
                tracing::warn!(error = %e, "cluster: unreadable message on a link; ignored")
            }
        }
    }
    // Answers still to come go over NATS.
    peer.close().await;
}
