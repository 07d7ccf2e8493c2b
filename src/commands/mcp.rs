//! `gsv mcp`: an MCP server on stdin/stdout that forwards to a gateway, for MCP clients
//! that only launch stdio servers.
//!
//! It speaks MCP to the client (rmcp over stdio: the `initialize` handshake and the
//! session-less 2026-07-28 revision alike) and gsv's WebSocket agent protocol to the
//! gateway ([`AgentClient`]), resolving the gateway and token like `gsv call`. The tool
//! list and results are mapped by the same code as the gateway's own `/mcp`
//! (`gsv_gateway::mcp::result`), so both look the same to a client. Progress
//! (`call.progress` events) becomes `notifications/progress`; a cancelled request
//! sends `cancel` to the gateway, which kills the call on its node; `tools.changed`
//! events become `notifications/tools/list_changed`. The WebSocket protocol gives an
//! ordinary agent no way to approve its own calls, so a call that needs approval waits
//! for an operator (`gsv approvals approve ID`), and the result says so.
//!
//! Nothing but MCP goes to stdout: logs go to stderr.

use super::agent::Target;
use crate::client::{AgentClient, ClientError, Event};
use crate::exit;
use crate::resolve;
use gsv_gateway::mcp::result::{self as mapping, Mapped};
use gsv_protocol::event::CallProgress;
use gsv_protocol::EventName;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig,
    SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How long `tools.changed` events are collected before the list is compared.
const LIST_CHANGED_DEBOUNCE: Duration = Duration::from_millis(250);
/// Progress events buffered per call.
const PROGRESS_BUFFER: usize = 16;

/// Where the bridge connects, resolved once at start.
struct Upstream {
    gateway: String,
    token: String,
    tls: crate::client::TlsOptions,
}

/// One live connection to the gateway, with the calls waiting for its events.
struct Conn {
    client: AgentClient,
    calls: std::sync::Mutex<HashMap<String, InFlight>>,
}

impl Conn {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, InFlight>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A call in flight through the bridge.
struct InFlight {
    name: String,
    progress: mpsc::Sender<CallProgress>,
}

/// State shared by every request of the bridge.
struct Inner {
    upstream: Upstream,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// Bumped on `tools.changed` and on every (re)connect.
    epoch: watch::Sender<u64>,
    stop: CancellationToken,
}

/// The MCP server handler of `gsv mcp`.
#[derive(Clone)]
struct Bridge {
    inner: Arc<Inner>,
}

/// A failed call as the MCP client sees it: the gateway's errors mapped like `/mcp`
/// maps them; not reaching the gateway at all is a tool error `unreachable: ...`.
fn call_error(e: &ClientError) -> Mapped {
    match e {
        ClientError::Remote(shape) => mapping::map_error(shape),
        other => Mapped::ToolError(CallToolResult::error(vec![ContentBlock::text(format!(
            "unreachable: {other}"
        ))])),
    }
}

fn protocol_error(e: &ClientError) -> ErrorData {
    match e {
        ClientError::Remote(shape) => ErrorData::internal_error(shape.to_string(), None),
        other => ErrorData::internal_error(format!("unreachable: {other}"), None),
    }
}

impl Inner {
    /// The live connection, dialling (again) when there is none.
    async fn conn(self: &Arc<Self>) -> Result<Arc<Conn>, ClientError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.client.is_closed() {
                return Ok(c.clone());
            }
        }
        let u = &self.upstream;
        let client = AgentClient::connect_with(&u.gateway, &u.token, &u.tls).await?;
        let conn = Arc::new(Conn {
            client,
            calls: std::sync::Mutex::new(HashMap::new()),
        });
        tracing::info!(gateway = %u.gateway, "connected to the gateway");
        tokio::spawn(pump(self.clone(), conn.clone()));
        self.epoch.send_modify(|e| *e = e.wrapping_add(1));
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// A digest of the tool list (names, descriptions, schemas, hints).
    async fn tools_digest(self: &Arc<Self>) -> Option<u64> {
        let conn = self.conn().await.ok()?;
        let tools = conn.client.list_tools().await.ok()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for t in &tools {
            t.name.hash(&mut h);
            t.description.hash(&mut h);
            t.input_schema.to_string().hash(&mut h);
            t.annotations.hash(&mut h);
        }
        Some(h.finish())
    }

    /// Waits for the next change of the tool list; `false` once `stop` fired.
    async fn next_list_change(
        self: &Arc<Self>,
        rx: &mut watch::Receiver<u64>,
        last: &mut Option<u64>,
        stop: &CancellationToken,
    ) -> bool {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return false,
                r = rx.changed() => if r.is_err() { return false },
            }
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(LIST_CHANGED_DEBOUNCE) => {}
            }
            rx.borrow_and_update();
            let now = self.tools_digest().await;
            if now.is_some() && now != *last {
                *last = now;
                return true;
            }
        }
    }
}

/// Reads the connection's events: progress to the call it belongs to, approval
/// requests as progress of the matching calls, `tools.changed` to the list watchers.
async fn pump(inner: Arc<Inner>, conn: Arc<Conn>) {
    while !conn.client.is_closed() && !inner.stop.is_cancelled() {
        let Some(Event { event, payload, .. }) =
            conn.client.next_event(Duration::from_secs(1)).await
        else {
            continue;
        };
        match event {
            EventName::CallProgress => {
                if let Ok(p) = serde_json::from_value::<CallProgress>(payload) {
                    if let Some(call) = conn.calls().get(&p.call_id) {
                        let _ = call.progress.try_send(p);
                    }
                }
            }
            EventName::ApprovalRequested => {
                let (Some(id), Some(node), Some(tool)) = (
                    payload.get("id").and_then(|v| v.as_str()),
                    payload.get("node").and_then(|v| v.as_str()),
                    payload.get("tool").and_then(|v| v.as_str()),
                ) else {
                    continue;
                };
                let name = format!("{node}__{tool}");
                for call in conn.calls().values().filter(|c| c.name == name) {
                    let _ = call.progress.try_send(CallProgress {
                        call_id: approval_marker(id),
                        message: Some(format!(
                            "waiting for an operator to approve request {id} (gsv approvals approve {id})"
                        )),
                        progress: None,
                        total: None,
                    });
                }
            }
            EventName::ToolsChanged => inner.epoch.send_modify(|e| *e = e.wrapping_add(1)),
            _ => {}
        }
    }
    // Reconnecting later may find a different fleet.
    inner.epoch.send_modify(|e| *e = e.wrapping_add(1));
}

/// Progress events about an approval carry this call id, so the call can tell them
/// apart from the node's own progress.
fn approval_marker(id: &str) -> String {
    format!("approval:{id}")
}

impl Bridge {
    fn watch_tools(&self, peer: Peer<RoleServer>) {
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let mut rx = inner.epoch.subscribe();
            let mut last = inner.tools_digest().await;
            while inner
                .next_list_change(&mut rx, &mut last, &inner.stop.clone())
                .await
            {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let conn = match self.inner.conn().await {
            Ok(c) => c,
            Err(e) => {
                return match call_error(&e) {
                    Mapped::ToolError(r) => Ok(r.into()),
                    Mapped::Protocol(err) => Err(err),
                }
            }
        };
        let name = request.name.to_string();
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let id = conn.client.next_id();
        let (tx, mut rx) = mpsc::channel(PROGRESS_BUFFER);
        conn.calls().insert(
            id.clone(),
            InFlight {
                name: name.clone(),
                progress: tx,
            },
        );
        let token = context.meta.get_progress_token();
        let mut last = 0.0;
        let mut approval = None;
        let mut on_progress = |p: CallProgress| {
            if let Some(a) = p.call_id.strip_prefix("approval:") {
                approval = Some(a.to_owned());
            }
            let token = token.clone()?;
            let value = p.progress.filter(|v| *v > last).unwrap_or(last + 1.0);
            last = value;
            let mut n = ProgressNotificationParam::new(token, value);
            n.total = p.total;
            n.message = p.message;
            Some(n)
        };
        let outcome = {
            let call = conn.client.call_with_id(&id, &name, args, None);
            tokio::pin!(call);
            let mut cancelled = false;
            loop {
                tokio::select! {
                    biased;
                    Some(p) = rx.recv() => {
                        if let Some(n) = on_progress(p) {
                            let _ = context.peer.notify_progress(n).await;
                        }
                    }
                    _ = context.ct.cancelled(), if !cancelled => {
                        cancelled = true;
                        tracing::info!(call_id = %id, "cancelled by the MCP client");
                        let _ = conn.client.cancel(&id).await;
                    }
                    outcome = &mut call => break outcome,
                }
            }
        };
        conn.calls().remove(&id);
        let mut result = match outcome {
            Ok(r) => {
                let raw = serde_json::to_string(&r).unwrap_or_default();
                mapping::call_result(&raw).unwrap_or_else(|e| {
                    CallToolResult::error(vec![ContentBlock::text(format!("internal: {e}"))])
                })
            }
            Err(e) => match call_error(&e) {
                Mapped::ToolError(r) => r,
                Mapped::Protocol(err) => return Err(err),
            },
        };
        while let Ok(p) = rx.try_recv() {
            on_progress(p);
        }
        if let Some(a) = approval {
            result.content.push(ContentBlock::text(format!(
                "[gsv] This call needed approval; over `gsv mcp` it waited in the operator \
                 queue as request {a} (gsv approvals list)."
            )));
        }
        Ok(result.into())
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("gsv-mcp", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "gsv: the tools of every machine (node) of a fleet, namespaced `{node}__{tool}`.",
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(gsv_gateway::mcp::SUPPORTED_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.watch_tools(context.peer.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let conn = self.inner.conn().await.map_err(|e| protocol_error(&e))?;
        let entries = conn
            .client
            .list_tools()
            .await
            .map_err(|e| protocol_error(&e))?;
        let cursor = request.and_then(|r| r.cursor);
        mapping::list_page(&entries, cursor.as_deref())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = tracing::info_span!("mcp_call", tool = %request.name);
        self.call(request, context).instrument(span).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        if context.accepted().tools_list_changed != Some(true) {
            context.cancelled().await;
            return Ok(());
        }
        let inner = self.inner.clone();
        let stop = inner.stop.child_token();
        let mut rx = inner.epoch.subscribe();
        let mut last = inner.tools_digest().await;
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = inner.next_list_change(&mut rx, &mut last, &stop) => {
                    if !changed || context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// What `gsv up` prints so an MCP client can be connected by pasting: the MCP URL, a
/// Claude Code command, a generic JSON client entry and a stdio entry using `gsv mcp`.
/// The token itself is never printed (terminals keep scrollback): the lines read it
/// from `token_file`, or name it.
pub fn setup_lines(gateway_url: &str, token_file: &Path, data: &Path) -> String {
    let url = format!("{gateway_url}{}", gsv_gateway::mcp::PATH);
    let token_file = token_file.display();
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "gsv".to_owned());
    let http = serde_json::json!({
        "mcpServers": { "gsv": {
            "url": url,
            "headers": { "Authorization": format!("Bearer <the token in {token_file}>") },
        }}
    });
    let stdio = serde_json::json!({
        "mcpServers": { "gsv": {
            "command": exe,
            "args": ["mcp", "--data", data.display().to_string()],
        }}
    });
    format!(
        "  MCP          {url}   (Authorization: Bearer <agent token>)\n\
         \x20 connect an MCP client:\n\
         \x20   Claude Code: claude mcp add --transport http gsv {url} --header \"Authorization: Bearer $(cat {token_file})\"\n\
         \x20   JSON (HTTP): {http}\n\
         \x20   JSON (stdio, for clients that only launch commands): {stdio}\n"
    )
}

/// `gsv mcp`: serves MCP on stdio until the client closes stdin.
pub async fn run(target: Target) -> u8 {
    let data = resolve::data_dir(target.data.as_deref());
    let gateway = resolve::gateway(target.gateway.as_deref(), &data);
    let Some(token) = resolve::agent_token(target.token.as_deref(), &data) else {
        eprintln!(
            "error: unauthorized: no token: pass --token, set GSV_AGENT_TOKEN, or run `gsv up` (it writes {})",
            data.join(gsv_gateway::datadir::AGENT_TOKEN_FILE).display()
        );
        return exit::AUTH;
    };
    let tls = resolve::tls(target.ca.clone(), target.pin.clone(), &gateway, &data);
    let inner = Arc::new(Inner {
        upstream: Upstream {
            gateway,
            token,
            tls,
        },
        conn: tokio::sync::Mutex::new(None),
        epoch: watch::Sender::new(0),
        stop: CancellationToken::new(),
    });
    // Dial early so the first request does not wait for it; failures are reported to
    // the client per request, so a gateway that starts later still works.
    {
        let inner = inner.clone();
        tokio::spawn(async move {
            if let Err(e) = inner.conn().await {
                tracing::warn!(error = %e, "gateway not reachable yet");
            }
        });
    }
    let bridge = Bridge {
        inner: inner.clone(),
    };
    let code = match bridge.serve(rmcp::transport::io::stdio()).await {
        Ok(service) => match service.waiting().await {
            Ok(_) => exit::OK,
            Err(e) => {
                eprintln!("error: internal: {e}");
                exit::TOOL_ERROR
            }
        },
        Err(e) => {
            eprintln!("error: mcp: {e}");
            exit::USAGE
        }
    };
    inner.stop.cancel();
    code
}
