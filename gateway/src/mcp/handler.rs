//! The MCP server itself: `tools/list`, `tools/call` and the resources over the live
//! node registry, in the view the session got ([`super::view`]).
//!
//! rmcp handles the protocol (JSON-RPC, both lifecycles, sessions, SSE); this file
//! answers its questions from gsv's state. A flat call of `{node}__{tool}` and a
//! fleet view's `fleet_call {node, tool}` are the same call here. Every call goes through
//! [`crate::router::call`] with a [`Caller`], so policy, approvals, audit and metrics
//! apply exactly as for the WebSocket agent API. What MCP adds on top:
//!
//! - progress: with a `progressToken`, the node's `call.progress` events become
//!   `notifications/progress` on the call's stream;
//! - cancellation: `notifications/cancelled` (or, on the 2026-07-28 revision, a closed
//!   response stream) cancels the request's token, which cancels the call on the node;
//! - approval through elicitation: a call that needs approval is put to the MCP
//!   client's user (`elicitation/create` in a session; an `InputRequiredResult` on the
//!   2026-07-28 revision), and falls back to the operator queue — saying so in the
//!   result — when the client cannot ask;
//! - `notifications/tools/list_changed` when the tools the session lists change, and
//!   `notifications/resources/list_changed` when the nodes it sees do (on the
//!   session's standalone stream, or through `subscriptions/listen` on 2026-07-28).

use super::auth::McpPrincipal;
use super::fleet_tools::{self, FleetTool};
use super::gathered::Gathered;
use super::listens::Listens;
use super::nodes;
use super::resources;
use super::result::{self, Mapped};
use super::used::{Used, UsedByToken};
use super::view::{self, Lens, Shown, UrlView};
use super::{fleet_copy, fleet_jobs, fleet_run, fleet_use};
use crate::approvals::{ApprovalRequest, Verdict};
use crate::audit::args_hash;
use crate::fleet::Fleet;
use crate::policy::Decision;
use crate::router::{self, ApprovalAsker, ApprovalQuestion, Caller};
use dashmap::DashMap;
use futures_util::future::BoxFuture;
use gsv_protocol::event::CallProgress;
use gsv_protocol::method::ToolsCallParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitationAction, ElicitationSchema, Implementation,
    InitializeRequestParams, InitializeResult, InputRequest, InputRequests, InputRequiredResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{ElicitationMode, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The protocol revisions served: the `initialize` handshake for 2025-03-26,
/// 2025-06-18 and 2025-11-25, and the session-less 2026-07-28 revision
/// (`server/discover`, per-request metadata).
pub const SUPPORTED_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// How long tool-set changes are collected before sessions compare their lists (a
/// fleet reconnecting after a gateway restart is one notification, not thousands).
const LIST_CHANGED_DEBOUNCE: Duration = Duration::from_millis(250);
/// Progress events buffered per call before the oldest news is dropped.
const PROGRESS_BUFFER: usize = 16;
/// Pending 2026-07-28 approval questions kept at most (oldest evicted first).
const MAX_PENDING_QUESTIONS: usize = 4096;
/// The key of the approval question inside an `InputRequiredResult`.
const APPROVAL_INPUT: &str = "gsv_approval";

const INSTRUCTIONS: &str = "gsv gateway: the tools of every machine (node) in this fleet. \
Tool names are namespaced by node, `{node}__{tool}` (e.g. `laptop__Bash`, `server__Read`): \
pick the machine by picking the prefix. Descriptions start with `[node \u{b7} os]`. Each \
node's everyday tools are listed (Bash, Process, Read, Write, Edit, Glob, Grep); \
fleet_tools {node} gives the definitions of all its tools (git_*, net_*, proc_*, exec, \
fetch_url...), and any `{node}__{tool}` may be called by name, listed or not; fleet_use \
{nodes} lists all of a node's tools by name until fleet_release. fleet_nodes lists the \
nodes; fleet_run runs one tool on many nodes; fleet_jobs and fleet_job read kept \
results. Tools of an offline node stay listed; calling one says since when. Some calls need \
a human's approval first.";

/// What a fleet-view session is told.
const FLEET_INSTRUCTIONS: &str = "gsv gateway: a fleet of machines (nodes), reached through \
a few tools. fleet_nodes lists the nodes you can use (labels, facts such as os, and the \
tools you may call there; `select` narrows it, e.g. `role=web`); fleet_tools gives one \
node's tool definitions; fleet_call {node, tool, args} runs one, and so does calling \
`{node}__{tool}` by name (e.g. `web1__Bash`); fleet_use {nodes: [...]} or {select} lists \
those nodes' tools by name until fleet_release; fleet_run {select, tool, \
args} runs one on many nodes; fleet_jobs and fleet_job read kept results. Some calls need \
a human's approval first.";

/// State shared by every MCP handler of one gateway.
pub struct McpState {
    pub fleet: Fleet,
    /// Approval questions handed to 2026-07-28 clients (`InputRequiredResult`), by
    /// the opaque `requestState` they must echo back.
    questions: DashMap<String, PendingQuestion>,
    /// `auto`'s choices in cluster mode ([`view::AutoViews`]).
    auto_views: view::AutoViews,
    /// The other replicas' nodes as the list_changed watchers last gathered them.
    gathered: Gathered,
    /// Open `subscriptions/listen` streams, capped like sessions.
    listens: Listens,
    /// The nodes each token brought into its 2026-07-28 listings (`fleet_use`; a
    /// 2025 session keeps its own on its handler).
    used: UsedByToken,
}

/// What a `requestState` stands for: one exact call of one token, asked once.
struct PendingQuestion {
    token_id: String,
    name: String,
    args_hash: String,
    /// What the node resolved the call's paths to when the user was asked: the answer
    /// holds only while the node still resolves them the same way.
    plan: Option<String>,
    expires: Instant,
}

impl McpState {
    pub fn new(fleet: Fleet) -> Arc<McpState> {
        Arc::new(McpState {
            questions: DashMap::new(),
            auto_views: view::AutoViews::default(),
            gathered: Gathered::default(),
            used: UsedByToken::default(),
            listens: Listens::new(
                fleet.config().mcp_sessions_per_token,
                fleet.config().mcp_sessions_max,
            ),
            fleet,
        })
    }

    fn remember_question(&self, q: PendingQuestion) -> String {
        let now = Instant::now();
        self.questions.retain(|_, v| v.expires > now);
        if self.questions.len() >= MAX_PENDING_QUESTIONS {
            let oldest = self
                .questions
                .iter()
                .min_by_key(|e| e.value().expires)
                .map(|e| e.key().clone());
            if let Some(k) = oldest {
                self.questions.remove(&k);
            }
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.questions.insert(id.clone(), q);
        id
    }
}

/// The MCP server handler. rmcp makes one per session (2025 revisions) or per request
/// (2026-07-28); dropping it ends the session's background work.
pub struct McpHandler {
    state: Arc<McpState>,
    scope: Arc<Scope>,
    /// The view and selection of a 2025-revision session, fixed at `initialize`.
    session: OnceLock<(Shown, UrlView)>,
    /// The nodes a 2025-revision session brought into its listing (`fleet_use`).
    used: Arc<Used>,
}

/// Cancelled when the handler that owns it is dropped.
struct Scope(CancellationToken);

impl Drop for Scope {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl McpHandler {
    pub fn new(state: Arc<McpState>) -> McpHandler {
        let stop = state.fleet.shutdown().child_token();
        McpHandler {
            state,
            scope: Arc::new(Scope(stop)),
            session: OnceLock::new(),
            used: Arc::default(),
        }
    }

    fn fleet(&self) -> &Fleet {
        &self.state.fleet
    }

    /// What this request sees: the caller, with the session's view and selection
    /// (2025 revisions), or a view decided now (2026-07-28 has no session; `auto`
    /// then counts on each request).
    async fn lens(&self, extensions: &rmcp::model::Extensions) -> Result<Lens, ErrorData> {
        let who = principal(extensions)?;
        if let Some((shown, url)) = self.session.get() {
            return Ok(Lens {
                listed: view::listed(
                    url,
                    who.policy.mcp_tools(),
                    url.view.unwrap_or(who.policy.mcp_view()),
                ),
                who,
                shown: *shown,
                select: url.select.clone(),
                used: Arc::clone(&self.used),
                remote: None,
            });
        }
        let used = self.state.used.of(&who.token_id);
        Ok(self.decide(who, &url_view(extensions), used).await)
    }

    /// The view `who` gets with what the URL asks for. In cluster mode `auto` counts
    /// the tools the token sees on every replica: the other replicas' nodes are
    /// gathered for it (and kept on the lens for the listing that follows), unless the
    /// same choice was made while nothing in the fleet changed. The nodes in `used`
    /// are listed in either view and do not weigh in `auto`'s choice.
    async fn decide(&self, who: McpPrincipal, url: &UrlView, used: Arc<Used>) -> Lens {
        let fleet = self.fleet();
        let asked = url.view.unwrap_or(who.policy.mcp_view());
        let mut lens = Lens {
            shown: Shown::Flat,
            listed: view::listed(url, who.policy.mcp_tools(), asked),
            select: url.select.clone(),
            who,
            used,
            remote: None,
        };
        let count = |lens: &Lens| {
            fleet_tools::listing_bytes(lens.listed.is_all())
                + nodes::lens_listing_bytes(fleet, lens, view::AUTO_MAX_BYTES)
        };
        if asked != view::McpView::Auto || fleet.alone() {
            lens.shown = view::choose(url.view, lens.who.policy.mcp_view(), || count(&lens));
            return lens;
        }
        let epoch = fleet.tools_epoch();
        // Kept by selection and listed tools: both change what `auto` weighs.
        let select = Some(format!(
            "{}\u{0}{}",
            lens.select
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default(),
            lens.listed.key()
        ));
        if let Some(shown) = self
            .state
            .auto_views
            .get(&lens.who.token_id, select.as_deref(), epoch)
        {
            lens.shown = shown;
            return lens;
        }
        let mut lens = nodes::with_remote(fleet, lens).await;
        lens.shown = view::choose(url.view, lens.who.policy.mcp_view(), || count(&lens));
        self.state
            .auto_views
            .put(lens.who.token_id.clone(), select, epoch, lens.shown);
        lens
    }
}

/// The URL's `?view=` and `?select=` (put there by [`view::check_query`]).
fn url_view(extensions: &rmcp::model::Extensions) -> UrlView {
    let parts: Option<&axum::http::request::Parts> = extensions.get();
    parts
        .and_then(|p| p.extensions.get::<UrlView>())
        .cloned()
        .unwrap_or_default()
}

/// When the request arrived (put there by the auth middleware).
fn arrived(extensions: &rmcp::model::Extensions) -> Option<std::time::Instant> {
    let parts: Option<&axum::http::request::Parts> = extensions.get();
    parts
        .and_then(|p| p.extensions.get::<super::auth::Arrived>())
        .map(|a| a.0)
}

/// The authenticated caller of the request (put there by the auth middleware).
fn principal(extensions: &rmcp::model::Extensions) -> Result<McpPrincipal, ErrorData> {
    let parts: Option<&axum::http::request::Parts> = extensions.get();
    let found: Option<&McpPrincipal> = parts.and_then(|p| p.extensions.get());
    found
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("request was not authenticated", None))
}

/// A digest of the tools `lens` lists (names, descriptions, schemas, hints; not
/// whether their node is online, which does not change the list). The fleet view's
/// list changes only with the nodes the session uses.
fn tools_digest(fleet: &Fleet, lens: &Lens) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if lens.shown == Shown::Fleet && lens.used.is_empty() {
        return h.finish();
    }
    let (_, entries) = nodes::listing(fleet, lens);
    for e in &entries {
        e.name.hash(&mut h);
        e.description.hash(&mut h);
        e.input_schema.to_string().hash(&mut h);
        e.annotations.hash(&mut h);
    }
    h.finish()
}

/// What changed in what a session sees.
#[derive(Default)]
struct Changes {
    tools: bool,
    resources: bool,
}

/// The last digests of a session's tool list and node set.
struct Seen {
    tools: u64,
    nodes: u64,
    /// Cluster mode: [`crate::fleet::Fleet::elsewhere_epoch`] when the other
    /// replicas' nodes were last gathered, and what they held for the session.
    remote_epoch: u64,
    remote: Option<Arc<view::RemoteFleet>>,
}

impl Seen {
    /// The digests now. In cluster mode the other replicas' nodes count too: gathered
    /// again only when the node directory changed since `last` (not for every change
    /// of this replica's own nodes), and once for all watchers of the same token and
    /// selection ([`Gathered`]).
    async fn now(state: &McpState, lens: &Lens, last: Option<&Seen>) -> Seen {
        let fleet = &state.fleet;
        let mut lens = lens.clone();
        // What the lens was made with is gathered again, not reused.
        lens.remote = None;
        let (remote_epoch, remote) = match fleet.elsewhere_epoch() {
            None => (0, None),
            Some(epoch) => match last.filter(|l| l.remote_epoch == epoch && l.remote.is_some()) {
                Some(l) => (epoch, l.remote.clone()),
                None => {
                    let select = lens.select.as_ref().map(|s| s.to_string());
                    let fleet = state
                        .gathered
                        .get(&lens.who.token_id, select.as_deref(), epoch, || async {
                            let gathered = nodes::with_remote(fleet, lens.clone()).await;
                            gathered.remote.unwrap_or_default()
                        })
                        .await;
                    (epoch, Some(fleet))
                }
            },
        };
        lens.remote = remote.clone();
        Seen {
            tools: tools_digest(fleet, &lens),
            nodes: resources::digest(fleet, &lens),
            remote_epoch,
            remote,
        }
    }
}

/// What wakes a session's `list_changed` watcher: the fleet's change counter and the
/// session's nodes in use.
struct Wakers {
    fleet: tokio::sync::watch::Receiver<u64>,
    used: tokio::sync::watch::Receiver<u64>,
}

impl Wakers {
    fn of(fleet: &Fleet, lens: &Lens) -> Wakers {
        Wakers {
            fleet: fleet.watch_tools(),
            used: lens.used.subscribe(),
        }
    }
}

/// Waits for the next change of what `lens` sees (its tools or its nodes); `None`
/// when `stop` fired or the gateway is going away.
async fn next_change(
    state: &McpState,
    lens: &Lens,
    wake: &mut Wakers,
    last: &mut Seen,
    stop: &CancellationToken,
) -> Option<Changes> {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return None,
            r = wake.fleet.changed() => if r.is_err() { return None },
            r = wake.used.changed() => if r.is_err() { return None },
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(LIST_CHANGED_DEBOUNCE) => {}
        }
        wake.fleet.borrow_and_update();
        wake.used.borrow_and_update();
        let now = Seen::now(state, lens, Some(last)).await;
        let changes = Changes {
            tools: now.tools != last.tools,
            resources: now.nodes != last.nodes,
        };
        *last = now;
        if changes.tools || changes.resources {
            return Some(changes);
        }
    }
}

impl McpHandler {
    /// Sends `notifications/tools/list_changed` and `notifications/resources/list_changed`
    /// to a 2025-revision session whenever what it sees changes, until it ends.
    fn watch(&self, peer: Peer<RoleServer>, lens: Lens) {
        let state = Arc::clone(&self.state);
        let stop = self.scope.0.clone();
        let span = tracing::debug_span!("mcp_session", agent = %lens.who.name);
        tokio::spawn(
            async move {
                let mut wake = Wakers::of(&state.fleet, &lens);
                let mut last = Seen::now(&state, &lens, None).await;
                while let Some(c) = next_change(&state, &lens, &mut wake, &mut last, &stop).await {
                    if c.tools && peer.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                    if c.resources && peer.notify_resource_list_changed().await.is_err() {
                        break;
                    }
                    tracing::debug!(
                        tools = c.tools,
                        resources = c.resources,
                        "sent list_changed"
                    );
                }
            }
            .instrument(span),
        );
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("gsv", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS);
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let who = principal(&context.extensions)?;
        let url = url_view(&context.extensions);
        let lens = self.decide(who, &url, Arc::clone(&self.used)).await;
        tracing::info!(
            agent = %lens.who.name,
            client = %request.client_info.name,
            version = %request.protocol_version,
            view = ?lens.shown,
            "MCP session started"
        );
        // The view is fixed for the session: a listing never changes shape under it.
        let _ = self.session.set((lens.shown, url));
        self.watch(context.peer.clone(), lens.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if lens.shown == Shown::Fleet {
            result.instructions = Some(FLEET_INSTRUCTIONS.to_owned());
        }
        Ok(result)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let lens = self.lens(&context.extensions).await?;
        // The gateway tools lead the first page: those no node tool does (fleet_run,
        // fleet_jobs, fleet_job, fleet_copy) when every tool is listed, else every
        // fleet tool, so that what is not listed can be found and called.
        let gateway = if lens.shown == Shown::Flat && lens.listed.is_all() {
            fleet_tools::flat_definitions()
        } else {
            fleet_tools::definitions()
        };
        if lens.shown == Shown::Fleet && lens.used.is_empty() {
            return Ok(ListToolsResult::with_all_items(gateway));
        }
        let lens = nodes::with_remote(self.fleet(), lens).await;
        let (nodes, entries) = nodes::listing(self.fleet(), &lens);
        let cursor = request.and_then(|r| r.cursor);
        let mut page = result::list_page(&entries, cursor.as_deref(), |node| {
            nodes
                .iter()
                .find(|n| n.id == node)
                .and_then(|n| n.os.as_deref())
        })?;
        if cursor.is_none() {
            let mut tools = gateway;
            tools.append(&mut page.tools);
            page.tools = tools;
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let lens = self.lens(&context.extensions).await?;
        let span = tracing::info_span!("mcp_call", agent = %lens.who.name, tool = ?request.name);
        self.dispatch(request, context, lens).instrument(span).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let lens = nodes::with_remote(self.fleet(), self.lens(&context.extensions).await?).await;
        let cursor = request.and_then(|r| r.cursor);
        resources::list(self.fleet(), &lens, cursor.as_deref())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        principal(&context.extensions)?;
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let lens = nodes::with_remote(self.fleet(), self.lens(&context.extensions).await?).await;
        resources::read(self.fleet(), &lens, &request.uri).map(Into::into)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let lens = self.lens(&context.request_context().extensions).await?;
        // Held until the stream ends; a stream past the token's share is refused.
        let _slot = self
            .state
            .listens
            .open(&lens.who.token_id)
            .map_err(|e| {
                tracing::warn!(agent = %lens.who.name, limit = e.limit, max = e.max, "MCP listen stream refused: over its limit");
                e.to_rpc()
            })?;
        let tools = context.accepted().tools_list_changed == Some(true);
        let resources = context.accepted().resources_list_changed == Some(true);
        if !tools && !resources {
            context.cancelled().await;
            return Ok(());
        }
        let stop = self.scope.0.child_token();
        let mut wake = Wakers::of(self.fleet(), &lens);
        let mut last = Seen::now(&self.state, &lens, None).await;
        // rmcp acknowledged the stream before this handler ran, and a client may act
        // on the acknowledgment at once: a `fleet_use` / `fleet_release` made since the
        // request arrived is in `last` already, so it is announced here.
        let arrived = arrived(&context.request_context().extensions);
        if tools
            && arrived.is_some_and(|t| lens.used.changed_since(t))
            && context.sink().notify_tool_list_changed().await.is_err()
        {
            return Ok(());
        }
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = next_change(&self.state, &lens, &mut wake, &mut last, &stop) => {
                    let Some(c) = changed else { return Ok(()) };
                    if tools && c.tools && context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                    if resources
                        && c.resources
                        && context.sink().notify_resource_list_changed().await.is_err()
                    {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// Whether the request speaks the session-less 2026-07-28 revision.
fn is_2026(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether the client said it can show elicitation forms.
fn can_elicit(context: &RequestContext<RoleServer>) -> bool {
    if is_2026(context) {
        context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some())
    } else {
        context
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
    }
}

/// The approval question as an elicitation form with no fields: the client shows the
/// message with accept / decline buttons.
fn elicitation_params(question: &str) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.to_owned(),
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    }
}

/// `Allow laptop__Bash: rm -r build/ ?`
/// The question an MCP client's user reads: the summary through the one display rule
/// (`gsv_protocol::display`), so a hidden or bidi character in an agent's arguments
/// cannot redraw what the user approves, then what the node resolved the call's paths
/// to (the same plan an operator's card shows), each line through the same rule.
fn question_text(summary: &str, plan: Option<&str>) -> String {
    use gsv_protocol::display::safe;
    let mut text = format!("Allow {} ?", safe(summary));
    for line in plan.into_iter().flat_map(str::lines) {
        text.push('\n');
        text.push_str(&safe(line));
    }
    text
}

/// An elicitation answer as an approval decision: accept approves; decline and cancel
/// deny.
fn decision_of(action: &ElicitationAction) -> Verdict {
    match action {
        ElicitationAction::Accept => Verdict::Approve,
        _ => Verdict::Deny,
    }
}

/// Asks the MCP client's user (2025 sessions: `elicitation/create` on the call's
/// stream), remembers whether the call fell back to the operator queue, and relays the
/// news to the client as progress.
struct McpAsker {
    peer: Peer<RoleServer>,
    elicit: bool,
    /// An answer decided before routing (2026-07-28 `InputRequiredResult` round trip).
    preset: Option<Answered>,
    progress: Option<mpsc::Sender<CallProgress>>,
    queued: Mutex<Option<ApprovalRequest>>,
}

impl ApprovalAsker for McpAsker {
    fn ask<'a>(&'a self, q: &'a ApprovalQuestion<'a>) -> BoxFuture<'a, Option<Verdict>> {
        Box::pin(async move {
            if let Some(a) = &self.preset {
                // The node resolves the paths otherwise than the user read (a symlink
                // moved in between): their answer was not about this call; an
                // operator decides.
                if a.plan.as_deref() != q.plan {
                    tracing::warn!("the call's paths resolve otherwise than the user was shown; the call waits for an operator");
                    return None;
                }
                return Some(a.verdict);
            }
            if !self.elicit {
                return None;
            }
            let params = elicitation_params(&question_text(&q.summary, q.plan));
            match self.peer.create_elicitation(params).await {
                Ok(answer) => Some(decision_of(&answer.action)),
                Err(e) => {
                    tracing::warn!(error = %e, "elicitation failed; the call waits for an operator");
                    None
                }
            }
        })
    }

    fn queued(&self, request: &ApprovalRequest) {
        if let Some(tx) = &self.progress {
            let _ = tx.try_send(CallProgress {
                call_id: String::new(),
                message: Some(format!(
                    "waiting for an operator to approve request {} (gsv approvals approve {})",
                    request.id, request.id
                )),
                progress: None,
                total: None,
            });
        }
        if let Ok(mut q) = self.queued.lock() {
            *q = Some(request.clone());
        }
    }
}

/// One routed call, whichever view asked for it.
struct Routed {
    /// `{node}__{tool}`.
    name: String,
    args: Value,
    timeout_ms: Option<u64>,
}

impl McpHandler {
    /// A `tools/call`: one of the view's gateway tools, or a `{node}__{tool}` in any
    /// view (the fleet view lists none, yet `laptop__Bash` works there too).
    async fn dispatch(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        lens: Lens,
    ) -> Result<CallToolResponse, ErrorData> {
        let fleet = self.fleet();
        // The fleet view's tools; the flat view lists those no node offers too.
        let gateway = FleetTool::from_name(&request.name)
            .filter(|t| lens.shown == Shown::Fleet || !lens.listed.is_all() || t.in_flat());
        let mut args = request.arguments.clone();
        if let Some(t) = gateway {
            t.floor_counts(&mut args);
        }
        let answer = match gateway {
            // `{node}__{tool}`, in every view: listed or not, the same routed call (the
            // router answers a tool the token may not call as one that does not exist).
            None => {
                let routed = Routed {
                    name: request.name.to_string(),
                    args: Value::Object(args.unwrap_or_default()),
                    timeout_ms: None,
                };
                return self.call(routed, request, context, lens).await;
            }
            Some(FleetTool::Run) => return Ok(self.run(request, context, lens).await.into()),
            Some(FleetTool::Copy) => return Ok(self.copy(request, context, lens).await.into()),
            Some(FleetTool::Jobs) => {
                return Ok(fleet_jobs::jobs_answer(fleet, &lens.who, args).await.into())
            }
            Some(FleetTool::Job) => {
                return Ok(fleet_jobs::job_answer(fleet, &lens.who, args).await.into())
            }
            Some(FleetTool::Nodes) => {
                let lens = nodes::with_remote(fleet, lens).await;
                fleet_tools::nodes_answer(fleet, &lens, args)
            }
            Some(FleetTool::Tools) => {
                let lens = nodes::with_remote(fleet, lens).await;
                fleet_tools::tools_answer(fleet, &lens, args)
            }
            Some(FleetTool::Use) => {
                let lens = nodes::with_remote(fleet, lens).await;
                fleet_use::use_answer(fleet, &lens, args)
            }
            Some(FleetTool::Release) => {
                let lens = nodes::with_remote(fleet, lens).await;
                fleet_use::release_answer(fleet, &lens, args)
            }
            Some(FleetTool::Call) => match fleet_tools::call_target(args) {
                Ok(t) => {
                    tracing::Span::current().record("tool", t.name.as_str());
                    let routed = Routed {
                        name: t.name,
                        args: t.args,
                        timeout_ms: t.timeout_ms,
                    };
                    return self.call(routed, request, context, lens).await;
                }
                Err(e) => Err(e),
            },
        };
        match answer {
            Ok(r) => Ok(r.into()),
            Err(e) => e.into_result().map(Into::into),
        }
    }

    /// `fleet_run`: the fan-out, with one progress notification per finished node and
    /// cancelled with the request.
    async fn run(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        lens: Lens,
    ) -> CallToolResult {
        let params = match fleet_run::parse(request.arguments, lens.select.as_deref()) {
            Ok(p) => p,
            Err(e) => return e.into_result(),
        };
        let token = context.meta.get_progress_token();
        let cancel = context.ct.child_token();
        fleet_run::run(
            self.fleet(),
            &lens.who,
            params,
            cancel,
            &context.peer,
            token,
        )
        .await
    }

    /// `fleet_copy`: a node → node copy, with progress notifications and cancelled
    /// with the request. Both nodes must be in the session's `?select=`.
    async fn copy(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        lens: Lens,
    ) -> CallToolResult {
        let params = match fleet_copy::parse(request.arguments) {
            Ok(p) => p,
            Err(e) => return result::error_result(&e),
        };
        if lens.select.is_some() {
            for node in [&params.from.node, &params.to.node] {
                if !self.in_selection(&lens, node).await {
                    tracing::info!(node = ?node, "fleet_copy outside the session's ?select= refused");
                    return result::error_result(&gsv_protocol::ErrorShape::new(
                        gsv_protocol::ErrorCode::NotFound,
                        format!("node {node} is not among this session's nodes"),
                    ));
                }
            }
        }
        let token = context.meta.get_progress_token();
        let cancel = context.ct.child_token();
        fleet_copy::run(
            self.fleet(),
            &lens.who,
            params,
            cancel,
            &context.peer,
            token,
        )
        .await
    }

    /// Whether the node of `name` is outside the session's `?select=`.
    async fn outside_selection(&self, lens: &Lens, name: &str) -> bool {
        if lens.select.is_none() {
            return false;
        }
        let Some((node, _)) = name.split_once("__") else {
            return false;
        };
        // The session's nodes: selected, and reachable by its token (a node it cannot
        // reach would be refused as unknown by the router anyway).
        !self.in_selection(lens, node).await
    }

    /// Whether `node` is one of the session's nodes: held here, or (cluster mode) by
    /// another replica, asked only when it is not held here.
    async fn in_selection(&self, lens: &Lens, node: &str) -> bool {
        if nodes::lens_has_node(self.fleet(), lens, node) {
            return true;
        }
        if self.fleet().alone() || lens.remote.is_some() {
            return false;
        }
        let gathered = nodes::with_remote(self.fleet(), lens.clone()).await;
        nodes::lens_has_node(self.fleet(), &gathered, node)
    }

    async fn call(
        &self,
        routed: Routed,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        lens: Lens,
    ) -> Result<CallToolResponse, ErrorData> {
        let Routed {
            name,
            args: args_value,
            timeout_ms,
        } = routed;
        // Outside the session's selection: the same answer as a tool that does not
        // exist, before anything else looks at the call.
        if self.outside_selection(&lens, &name).await {
            tracing::info!(tool = ?name, "call outside the session's ?select= refused");
            return Err(result::not_found(&name));
        }
        let who = lens.who;
        let args = serde_json::value::to_raw_value(&args_value)
            .map_err(|e| ErrorData::invalid_params(format!("arguments: {e}"), None))?;

        // 2026-07-28: no server-to-client requests; a call needing approval is answered
        // with the question, and the client retries with the answer.
        let mut preset = None;
        if is_2026(&context)
            && can_elicit(&context)
            && who.policy.self_confirm()
            && match self.fleet().tool_classes(&name) {
                Some(classes) => who.policy.decide(&name, classes),
                // Held by another replica: the name decides here, the holder's
                // router judges the call again with the tool's classes.
                None => who.policy.precheck(&name),
            } == Decision::Confirm
        {
            match request.request_state.as_deref() {
                None => return Ok(self.ask_first(&who, &name, &args_value).await.into()),
                Some(state) => {
                    preset = Some(self.answer_of(&who, &name, &args_value, state, &request)?)
                }
            }
        }

        let progress_token = context.meta.get_progress_token();
        let (tx, mut rx) = mpsc::channel::<CallProgress>(PROGRESS_BUFFER);
        let asker = McpAsker {
            peer: context.peer.clone(),
            elicit: !is_2026(&context) && can_elicit(&context) && who.policy.self_confirm(),
            preset,
            progress: Some(tx.clone()),
            queued: Mutex::new(None),
        };
        let params = ToolsCallParams {
            name: name.clone(),
            args,
            timeout_ms,
            is_async: false,
        };
        let cancel = context.ct.child_token();
        let mut last = 0.0;
        let outcome = {
            let caller = Caller::of(&who.name, &who.token_id, &who.policy)
                .with_progress_to(progress_token.is_some().then_some(tx))
                .with_asker(&asker);
            let call = self.fleet().call(&caller, params, cancel);
            tokio::pin!(call);
            loop {
                tokio::select! {
                    biased;
                    Some(p) = rx.recv() => {
                        forward_progress(&context.peer, progress_token.as_ref(), p, &mut last).await
                    }
                    outcome = &mut call => break outcome,
                }
            }
        };
        while let Ok(p) = rx.try_recv() {
            forward_progress(&context.peer, progress_token.as_ref(), p, &mut last).await;
        }
        let queued = asker.queued.lock().ok().and_then(|mut q| q.take());
        let mut result = match outcome {
            Ok(raw) => match result::call_result(raw.get()) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "node result could not be mapped");
                    CallToolResult::error(vec![ContentBlock::text(format!("internal: {e}"))])
                }
            },
            Err(e) => match result::map_error(&e, &name) {
                Mapped::ToolError(r) => r,
                Mapped::Protocol(err) => return Err(err),
            },
        };
        if let Some(req) = queued {
            result.content.push(ContentBlock::text(format!(
                "[gsv] This call needed an operator's approval: it waited in the operator \
                 queue as request {} (gsv approvals list).",
                req.id
            )));
        }
        Ok(result.into())
    }

    /// First round on 2026-07-28: the approval question as an `InputRequiredResult`.
    async fn ask_first(&self, who: &McpPrincipal, name: &str, args: &Value) -> InputRequiredResult {
        let summary = router::summary_of(name, args);
        let plan = self.fleet().approval_plan(name, args).await;
        let ttl = self.fleet().approval_ttl();
        let state = self.state.remember_question(PendingQuestion {
            token_id: who.token_id.clone(),
            name: name.to_owned(),
            args_hash: args_hash(args),
            plan: plan.clone(),
            expires: Instant::now() + ttl,
        });
        let mut requests = InputRequests::new();
        let input = InputRequest::Elicitation(ElicitRequest::new(elicitation_params(
            &question_text(&summary, plan.as_deref()),
        )));
        requests.insert(APPROVAL_INPUT.to_owned(), input);
        tracing::info!("asking the MCP client's user for approval");
        InputRequiredResult::new(Some(requests), Some(state))
    }

    /// Retry on 2026-07-28: the user's answer to a question this gateway asked about
    /// this exact call, once.
    fn answer_of(
        &self,
        who: &McpPrincipal,
        name: &str,
        args: &Value,
        state: &str,
        request: &CallToolRequestParams,
    ) -> Result<Answered, ErrorData> {
        let stale = || {
            ErrorData::invalid_params(
                "requestState is unknown, used or expired; call the tool again",
                None,
            )
        };
        let (_, q) = self.state.questions.remove(state).ok_or_else(stale)?;
        if q.expires <= Instant::now()
            || q.token_id != who.token_id
            || q.name != name
            || q.args_hash != args_hash(args)
        {
            return Err(stale());
        }
        let action = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(APPROVAL_INPUT))
            .and_then(|v| v.get("action"))
            .and_then(|a| serde_json::from_value::<ElicitationAction>(a.clone()).ok())
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("inputResponses.{APPROVAL_INPUT} with an action is required"),
                    None,
                )
            })?;
        Ok(Answered {
            verdict: decision_of(&action),
            plan: q.plan,
        })
    }
}

/// A user's answer to a question this gateway asked (2026-07-28), with the plan the
/// question showed.
struct Answered {
    verdict: Verdict,
    plan: Option<String>,
}

/// Sends one progress notification (only with a token; values strictly increase).
async fn forward_progress(
    peer: &Peer<RoleServer>,
    token: Option<&ProgressToken>,
    p: CallProgress,
    last: &mut f64,
) {
    let Some(token) = token else { return };
    let value = p.progress.filter(|v| *v > *last).unwrap_or(*last + 1.0);
    *last = value;
    let mut n = ProgressNotificationParam::new(token.clone(), value);
    n.total = p.total;
    n.message = p.message;
    if let Err(e) = peer.notify_progress(n).await {
        tracing::debug!(error = %e, "progress notification not delivered");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_approval_question_is_the_form_it_always_was() {
        let params = elicitation_params("Allow lab__Bash: ls ?");
        assert_eq!(
            serde_json::to_value(&params).expect("params"),
            json!({
                "mode": "form",
                "message": "Allow lab__Bash: ls ?",
                "requestedSchema": {"type": "object", "properties": {}},
            })
        );
        let input = InputRequest::Elicitation(ElicitRequest::new(params));
        assert_eq!(
            serde_json::to_value(&input).expect("input"),
            json!({
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Allow lab__Bash: ls ?",
                    "requestedSchema": {"type": "object", "properties": {}},
                },
            })
        );
    }
}
