//! Simulated nodes and raw agents: light async tasks that speak the real gsv protocol
//! (challenge → connect → hello-ok; `tool.invoke` of Echo answered with a canned
//! result; pings answered by tokio-tungstenite), so thousands fit in one process.

use futures_util::{SinkExt, StreamExt};
use gsv_protocol::frame::encode_ok;
use gsv_protocol::handshake::{Auth, ClientInfo};
use gsv_protocol::{
    ConnectParams, Frame, HostRole, Method, NodeId, NodeInfo, Role, Runtime, ToolDef,
};
use serde_json::value::RawValue;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a dial plus handshake may take.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(30);

/// The tool declarations a real node sends: the standard set plus Echo.
#[derive(Clone)]
pub struct NodeTemplate {
    pub tools: Vec<ToolDef>,
    pub capabilities: Vec<String>,
}

impl NodeTemplate {
    pub fn standard(workspace: &Path) -> Result<NodeTemplate, String> {
        let id = NodeId::parse("sim").map_err(|e| e.to_string())?;
        let mut config = gsv_node::NodeConfig::new(
            "http://127.0.0.1:1".into(),
            id,
            String::new(),
            workspace.to_path_buf(),
        );
        config.echo_tool = true;
        let registry = gsv_node::Registry::standard(&config).map_err(|e| e.to_string())?;
        Ok(NodeTemplate {
            tools: registry.defs(),
            capabilities: registry.capabilities(),
        })
    }

    /// The node DESIGN.md §8 measures memory with: 12 tools (Echo and the standard
    /// set's first 11), the standard capabilities.
    pub fn twelve(workspace: &Path) -> Result<NodeTemplate, String> {
        let mut t = NodeTemplate::standard(workspace)?;
        let (echo, others): (Vec<ToolDef>, Vec<ToolDef>) =
            t.tools.into_iter().partition(|d| d.name == "Echo");
        t.tools = echo
            .into_iter()
            .chain(others.into_iter().take(11))
            .collect();
        Ok(t)
    }

    fn params(&self, id: &str, token: &str, nonce: String) -> ConnectParams {
        ConnectParams {
            min_protocol: gsv_protocol::MIN_PROTOCOL_VERSION,
            max_protocol: gsv_protocol::PROTOCOL_VERSION,
            role: Role::Node,
            auth: Auth {
                token: token.to_owned(),
                nonce,
            },
            client: ClientInfo {
                name: "gsv-bench-sim".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            node: Some(NodeInfo {
                id: id.to_owned(),
                tools: self.tools.clone(),
                capabilities: self.capabilities.clone(),
                host_role: HostRole::Execution,
                runtime: Runtime {
                    host_os: "linux".into(),
                    host_arch: std::env::consts::ARCH.into(),
                    ..Default::default()
                },
                instance: String::new(),
                journal: false,
            }),
            lane: None,
        }
    }
}

/// Small buffers: thousands of these live in one process.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(8 * 1024)
}

/// Opens a WebSocket (TCP_NODELAY).
pub async fn dial(url: &str) -> Result<Ws, String> {
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(ws_config()), true)
        .await
        .map_err(|e| format!("dial {url}: {e}"))?;
    Ok(ws)
}

/// The client handshake (the transport's own), its failure as a message.
async fn handshake(
    ws: &mut Ws,
    params: impl FnOnce(String) -> ConnectParams,
) -> Result<(), String> {
    gsv_transport::handshake(ws, params)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The loopback address node `id` dials from: one of 4,096 in 127.64.0.0/16, by a
/// hash of its id. Real nodes dial from machines of their own; tens of thousands of
/// simulated ones on one source address leave the kernel a long search for a free
/// port at every `connect` (at 84,000 nodes the fleet's processes spent 88 % of their
/// time there, and a killed replica's nodes took that much longer to get back).
fn source_of(id: &str) -> std::net::IpAddr {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    std::net::Ipv4Addr::new(127, 64, ((h >> 8) % 16) as u8, (h % 256) as u8).into()
}

/// Opens a WebSocket from loopback address `source` (TCP_NODELAY) when `url` is a
/// `ws://` URL whose host is an address; as [`dial`] otherwise.
pub async fn dial_from(url: &str, source: std::net::IpAddr) -> Result<Ws, String> {
    let to = url
        .strip_prefix("ws://")
        .and_then(|rest| rest.split('/').next())
        .and_then(|authority| authority.parse::<std::net::SocketAddr>().ok());
    let Some(to) = to else {
        return dial(url).await;
    };
    let socket = if to.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(|e| format!("dial {url}: {e}"))?;
    if to.is_ipv4() == source.is_ipv4() {
        socket
            .bind(std::net::SocketAddr::new(source, 0))
            .map_err(|e| format!("dial {url} from {source}: {e}"))?;
    }
    let tcp = socket
        .connect(to)
        .await
        .map_err(|e| format!("dial {url}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let (ws, _) = tokio_tungstenite::client_async_with_config(
        url,
        MaybeTlsStream::Plain(tcp),
        Some(ws_config()),
    )
    .await
    .map_err(|e| format!("dial {url}: {e}"))?;
    Ok(ws)
}

/// Dials `url` and registers as node `id`.
pub async fn connect_node(
    url: &str,
    template: &NodeTemplate,
    id: &str,
    token: &str,
) -> Result<Ws, String> {
    let go = async {
        let mut ws = dial_from(url, source_of(id)).await?;
        handshake(&mut ws, |nonce| template.params(id, token, nonce)).await?;
        Ok(ws)
    };
    tokio::time::timeout(HANDSHAKE_LIMIT, go)
        .await
        .map_err(|_| format!("{id}: handshake took over {HANDSHAKE_LIMIT:?}"))?
}

/// Dials the gateway's agent endpoint and authenticates.
pub async fn connect_agent(gateway: &str, token: &str) -> Result<Ws, String> {
    let url = gsv_protocol::endpoint::Gateway::parse(gateway)
        .map_err(|e| e.to_string())?
        .ws_url(gsv_protocol::endpoint::AGENT_PATH);
    let mut ws = dial(&url).await?;
    handshake(&mut ws, |nonce| ConnectParams {
        min_protocol: gsv_protocol::MIN_PROTOCOL_VERSION,
        max_protocol: gsv_protocol::PROTOCOL_VERSION,
        role: Role::Agent,
        auth: Auth {
            token: token.to_owned(),
            nonce,
        },
        client: ClientInfo {
            name: "gsv-bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        node: None,
        lane: None,
    })
    .await?;
    Ok(ws)
}

/// What every simulated Echo call returns.
pub fn canned() -> &'static RawValue {
    static CANNED: OnceLock<Box<RawValue>> = OnceLock::new();
    CANNED.get_or_init(|| {
        RawValue::from_string(
            r#"{"content":[{"type":"text","text":"ping"}],"structuredContent":{"text":"ping"},"isError":false}"#
                .to_owned(),
        )
        .expect("valid JSON")
    })
}

/// Answers `tool.invoke` until the connection ends or `stop` fires. With `relay`, each
/// frame carries a `N|` routing prefix that is echoed back in front of the answer.
pub async fn serve(mut ws: Ws, relay: bool, stop: &CancellationToken) {
    loop {
        let msg = tokio::select! {
            _ = stop.cancelled() => break,
            m = ws.next() => m,
        };
        match msg {
            Some(Ok(Message::Text(t))) => {
                let t = t.as_str();
                let (prefix, body) = if relay {
                    match t.find('|') {
                        Some(i) => t.split_at(i + 1),
                        None => continue,
                    }
                } else {
                    ("", t)
                };
                if let Ok(Frame::Req {
                    id,
                    method: Method::ToolInvoke,
                    ..
                }) = Frame::decode(body)
                {
                    let mut reply = String::with_capacity(prefix.len() + 160);
                    reply.push_str(prefix);
                    reply.push_str(&encode_ok(&id, canned()));
                    if ws.send(Message::text(reply)).await.is_err() {
                        break;
                    }
                }
            }
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
            Some(Ok(_)) => {}
        }
    }
    let _ = ws.close(None).await;
}

/// Connects `creds` as nodes, at most `wave` dials at a time, and keeps them served
/// until `stop`. Returns once every node has its hello-ok (or the first error).
pub async fn connect_fleet(
    url: &str,
    template: &NodeTemplate,
    creds: &[(String, String)],
    wave: usize,
    stop: &CancellationToken,
) -> Result<Vec<tokio::task::JoinHandle<()>>, String> {
    let sem = Arc::new(tokio::sync::Semaphore::new(wave));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<(), String>>(creds.len().max(1));
    let mut handles = Vec::with_capacity(creds.len());
    for (id, token) in creds {
        let (id, token) = (id.clone(), token.clone());
        let (sem, tx, stop, url, template) = (
            sem.clone(),
            tx.clone(),
            stop.clone(),
            url.to_owned(),
            template.clone(),
        );
        handles.push(tokio::spawn(async move {
            let permit = sem.acquire_owned().await;
            let r = connect_node(&url, &template, &id, &token).await;
            drop(permit);
            drop(template);
            match r {
                Ok(ws) => {
                    let _ = tx.send(Ok(())).await;
                    drop(tx);
                    serve(ws, false, &stop).await;
                }
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                }
            }
        }));
    }
    drop(tx);
    for _ in 0..creds.len() {
        match rx.recv().await {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(e),
            None => return Err("a simulated node task ended".into()),
        }
    }
    Ok(handles)
}

/// Counters of a reconnecting fleet.
#[derive(Default)]
pub struct Counters {
    /// hello-oks received, over all connections.
    pub hello: AtomicUsize,
    /// Failed dials or handshakes.
    pub failed: AtomicUsize,
}

/// Starts a [`reconnecting_node`] for each `(id, token, replicas in dial order)`.
pub fn spawn_fleet(
    nodes: Vec<(String, String, Vec<String>)>,
    template: &Arc<NodeTemplate>,
    sem: &Arc<tokio::sync::Semaphore>,
    counters: &Arc<Counters>,
    stop: &CancellationToken,
) {
    for (id, token, urls) in nodes {
        tokio::spawn(reconnecting_node(
            urls,
            template.clone(),
            id,
            token,
            sem.clone(),
            counters.clone(),
            stop.clone(),
        ));
    }
}

/// A node that reconnects for ever (jittered backoff: 0–500 ms first, doubling, cap
/// 5 s) until `stop`, to the next of `urls` after each connection that failed or
/// ended (gateway replicas, as `gsv node --gateway URL1,URL2` does). The first
/// connect waits for a permit of `sem`.
pub async fn reconnecting_node(
    urls: Vec<String>,
    template: Arc<NodeTemplate>,
    id: String,
    token: String,
    sem: Arc<tokio::sync::Semaphore>,
    counters: Arc<Counters>,
    stop: CancellationToken,
) {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (id.bytes().fold(0u64, |h, b| h * 31 + b as u64));
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut first = Some(sem);
    let mut attempt = 0u32;
    let mut turn = 0usize;
    while !stop.is_cancelled() {
        let Some(url) = urls.get(turn % urls.len().max(1)) else {
            return;
        };
        turn += 1;
        let permit = match first.take() {
            Some(s) => s.acquire_owned().await.ok(),
            None => None,
        };
        let r = tokio::select! {
            _ = stop.cancelled() => break,
            r = connect_node(url, &template, &id, &token) => r,
        };
        drop(permit);
        match r {
            Ok(ws) => {
                counters.hello.fetch_add(1, Ordering::SeqCst);
                attempt = 0;
                serve(ws, false, &stop).await;
            }
            Err(_) => {
                counters.failed.fetch_add(1, Ordering::SeqCst);
            }
        }
        let cap_ms = (500u64 << attempt.min(4)).min(5_000);
        attempt += 1;
        let wait = Duration::from_millis(rand() % (cap_ms + 1));
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
