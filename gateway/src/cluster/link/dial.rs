//! The forwarding side of a link: dials the holder's `/v1/replica`, proves it heard
//! the holder's hello, then sends calls and reads what comes back (answers, progress,
//! holder words) until the link ends.

use super::wire::{self, Challenge, LinkMsg, Proof, Welcome};
use super::{LinkInfo, OPENING};
use crate::cluster::Cluster;
use futures_util::StreamExt;
use gsv_transport::tungstenite::Message;
use std::sync::Arc;

/// Dials `replica`'s link and serves it until it ends.
pub(super) async fn run(cluster: Arc<Cluster>, replica: String, info: LinkInfo) {
    match open(&cluster, &replica, &info).await {
        Ok(ws) => {
            tracing::info!(replica = %replica, url = %info.url, "cluster: link to replica open");
            serve(&cluster, &replica, ws).await;
            tracing::info!(replica = %replica, "cluster: link to replica closed");
        }
        Err(e) => {
            tracing::debug!(replica = %replica, url = %info.url, error = %e, "cluster: cannot open a link to replica; its calls go over NATS")
        }
    }
}

async fn open(
    cluster: &Cluster,
    replica: &str,
    info: &LinkInfo,
) -> Result<gsv_transport::dial::ClientWs, String> {
    let tls = if info.url.starts_with("wss://") {
        Some(
            gsv_transport::tls::client_config(None, info.pin.as_deref())
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    let mut ws = gsv_transport::dial::dial(&info.url, tls, OPENING)
        .await
        .map_err(|e| e.to_string())?;
    let opening = async {
        let challenge: Challenge = read_json(&mut ws).await?;
        let proof = Proof {
            replica: cluster.replica.clone(),
            proof: wire::proof(
                info.secret.as_bytes(),
                &challenge.challenge,
                &cluster.replica,
            ),
        };
        send_json(&mut ws, &proof).await?;
        let welcome: Welcome = read_json(&mut ws).await?;
        if welcome.replica != replica {
            return Err(format!(
                "the link at {} is replica {:?}'s, not {replica:?}'s",
                info.url, welcome.replica
            ));
        }
        Ok(())
    };
    tokio::time::timeout(OPENING, opening)
        .await
        .map_err(|_| "the link's opening timed out".to_owned())??;
    Ok(ws)
}

async fn read_json<T: serde::de::DeserializeOwned>(
    ws: &mut gsv_transport::dial::ClientWs,
) -> Result<T, String> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                return serde_json::from_str(t.as_str()).map_err(|e| e.to_string())
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(other)) => return Err(format!("unexpected frame {other:?}")),
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("the link closed during its opening".into()),
        }
    }
}

async fn send_json<T: serde::Serialize>(
    ws: &mut gsv_transport::dial::ClientWs,
    value: &T,
) -> Result<(), String> {
    use futures_util::SinkExt;
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    ws.send(Message::text(text))
        .await
        .map_err(|e| e.to_string())
}

/// Registers the link and reads it until it ends.
async fn serve(cluster: &Cluster, replica: &str, ws: gsv_transport::dial::ClientWs) {
    let (sink, mut stream) = ws.split();
    let peer = super::peer(&cluster.links, sink);
    cluster.links.open.insert(replica.to_owned(), peer.clone());
    loop {
        let frame = tokio::select! {
            f = stream.next() => f,
            _ = peer.wire.dead.cancelled() => break,
        };
        let Some(Ok(frame)) = frame else { break };
        let Message::Text(text) = frame else { continue };
        match serde_json::from_str::<LinkMsg>(text.as_str()) {
            Ok(LinkMsg::Answer { key, answer }) => {
                crate::cluster::call_book::answered(cluster, &key, answer);
                // The woken caller goes on first: this task's next read can wait.
                tokio::task::yield_now().await;
            }
            Ok(LinkMsg::Progress { key, progress }) => {
                crate::cluster::call_book::progressed(cluster, &key, Some(progress))
            }
            Ok(LinkMsg::Holder { key, holder }) => {
                crate::cluster::call_book::held(cluster, &key, holder)
            }
            Ok(LinkMsg::Call { .. }) => {
                tracing::warn!(replica = %replica, "cluster: a call on a link dialled from here; ignored")
            }
            Err(e) => {
                tracing::warn!(replica = %replica, error = %e, "cluster: unreadable message on a link; ignored")
            }
        }
    }
    cluster.links.closed(replica, &peer);
    peer.close().await;
}
