//! Which view of the fleet an MCP session gets, and what of the fleet it covers.
//!
//! The same fleet can be shown two ways, under the same policy: `flat` lists
//! `{node}__{tool}` names (every tool the token may call, or the set [`Listed`] says),
//! `fleet` lists the nine gateway tools (`fleet_nodes`, `fleet_tools`, `fleet_call`,
//! `fleet_run`, `fleet_jobs`, `fleet_job`, `fleet_copy`, `fleet_use`, `fleet_release`)
//! whatever the fleet's size, and the tools of the nodes the session put in use
//! ([`super::used`]).
//! Past a few machines a flat list swamps an agent's context, so the default, `auto`,
//! shows flat while the listing takes at most [`AUTO_MAX_BYTES`] and fleet beyond; a
//! namespaced call works in either.
//!
//! The choice comes from `?view=` on the MCP URL, else the token's `--mcp-view`, else
//! `auto`; `?select=SEL` narrows the session to the nodes a selector picks. Both are
//! read from the URL by [`check_query`] (a bad one is an HTTP 400 before any MCP
//! message is looked at) and fixed for a 2025-revision session when it initializes,
//! so a listing never changes shape under an agent. A session-less (2026-07-28)
//! request has no session: its view is decided on each request, by the same rule.

use super::auth::McpPrincipal;
use super::listed::BadTools;
pub use super::listed::Listed;
pub use crate::mcp_view::{BadView, McpView};
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gsv_protocol::method::{NodeSummary, ToolEntry};
use gsv_protocol::selector::{Selector, SelectorError};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use thiserror::Error;

/// Most bytes of definitions a flat listing may take for `auto` to still show it
/// (about 12k model tokens): five nodes' reference tools and the fleet tools fit.
pub const AUTO_MAX_BYTES: usize = 48 * 1024;

/// The view a session shows: what `auto` came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Flat,
    Fleet,
}

/// The view shown: the URL's, else the token's, else `auto`, which weighs the flat
/// listing the session would get (`bytes` of its definitions, only asked then).
pub fn choose(url: Option<McpView>, token: McpView, bytes: impl FnOnce() -> usize) -> Shown {
    match url.unwrap_or(token) {
        McpView::Flat => Shown::Flat,
        McpView::Fleet => Shown::Fleet,
        McpView::Auto if bytes() <= AUTO_MAX_BYTES => Shown::Flat,
        McpView::Auto => Shown::Fleet,
    }
}

/// The node tools a flat session lists: the URL's `?tools=`, else the token's
/// (`--mcp-tools`), else every tool when the flat view was asked for by name, else the
/// reference set ([`Listed`]). A stored set that no longer parses counts as absent.
pub fn listed(url: &UrlView, token: Option<&str>, asked: McpView) -> Listed {
    if let Some(l) = &url.tools {
        return l.clone();
    }
    if let Some(l) = token.and_then(|t| Listed::parse(t).ok()) {
        return l;
    }
    match asked {
        McpView::Flat => Listed::All,
        _ => Listed::Reference,
    }
}

/// `auto`'s choices in cluster mode, by token and selection, each with the fleet's
/// change counter ([`crate::fleet::Fleet::tools_epoch`]) it was made at: a request
/// made while nothing changed reuses it instead of gathering the other replicas'
/// nodes again.
#[derive(Default)]
pub struct AutoViews(dashmap::DashMap<(String, Option<String>), (u64, Shown)>);

/// Choices kept at most (selections come from URLs: past this, all are forgotten).
const MAX_AUTO_VIEWS: usize = 4096;

impl AutoViews {
    /// The choice for `token` and `select` made at `epoch`, if there is one.
    pub fn get(&self, token: &str, select: Option<&str>, epoch: u64) -> Option<Shown> {
        self.0
            .get(&(token.to_owned(), select.map(str::to_owned)))
            .filter(|e| e.0 == epoch)
            .map(|e| e.1)
    }

    pub fn put(&self, token: String, select: Option<String>, epoch: u64, shown: Shown) {
        if self.0.len() >= MAX_AUTO_VIEWS {
            self.0.clear();
        }
        self.0.insert((token, select), (epoch, shown));
    }
}

/// Why the MCP URL's query was refused.
#[derive(Debug, Error)]
pub enum QueryError {
    #[error("?view=: {0}")]
    View(#[from] BadView),
    #[error("?select=: {0}")]
    Select(#[from] SelectorError),
    #[error("the URL's query is not valid form encoding: {0}")]
    Encoding(String),
    #[error("?{0}= is given twice")]
    Repeated(&'static str),
    #[error("?tools=: {0}")]
    Tools(#[from] BadTools),
}

/// What the MCP URL asks for (`?view=`, `?select=`, `?tools=`); put into each
/// request's extensions by [`check_query`].
#[derive(Debug, Clone, Default)]
pub struct UrlView {
    pub view: Option<McpView>,
    pub select: Option<Arc<Selector>>,
    pub tools: Option<Listed>,
}

impl UrlView {
    /// Parses the query of the MCP URL. Other parameters are ignored (clients and
    /// proxies add their own).
    pub fn parse(query: Option<&str>) -> Result<UrlView, QueryError> {
        let Some(query) = query.filter(|q| !q.is_empty()) else {
            return Ok(UrlView::default());
        };
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
            .map_err(|e: serde_urlencoded::de::Error| QueryError::Encoding(e.to_string()))?;
        let mut seen: HashMap<&'static str, String> = HashMap::new();
        for (k, v) in pairs {
            let key = match k.as_str() {
                "view" => "view",
                "select" => "select",
                "tools" => "tools",
                _ => continue,
            };
            if seen.insert(key, v).is_some() {
                return Err(QueryError::Repeated(key));
            }
        }
        let view = seen.get("view").map(|v| v.parse()).transpose()?;
        let select = seen
            .get("select")
            .map(|s| Selector::parse(s).map(Arc::new))
            .transpose()?;
        let tools = seen.get("tools").map(|t| Listed::parse(t)).transpose()?;
        Ok(UrlView {
            view,
            select,
            tools,
        })
    }
}

/// What the other cluster replicas hold that a lens sees: their online nodes and
/// those nodes' tools, each judged there by the token's policy.
#[derive(Debug, Default)]
pub struct RemoteFleet {
    pub nodes: Vec<NodeSummary>,
    pub entries: Vec<ToolEntry>,
}

/// What one request (or one 2025 session) sees: who, which view, which nodes.
#[derive(Clone)]
pub struct Lens {
    pub who: McpPrincipal,
    pub shown: Shown,
    /// What a flat listing names on each node.
    pub listed: Listed,
    /// The URL's `?select=`: only these nodes, in every list and call.
    pub select: Option<Arc<Selector>>,
    /// The nodes the session brought into its listing (`fleet_use`): its own set
    /// (2025 revisions) or its token's (2026-07-28).
    pub used: Arc<super::used::Used>,
    /// Cluster mode: what the other replicas hold that this lens sees, gathered for
    /// the request that lists ([`super::nodes::with_remote`]); `None` otherwise.
    pub remote: Option<Arc<RemoteFleet>>,
}

/// The JSON-RPC error body of a refused query (no request was read: id `null`).
#[derive(Serialize)]
struct RpcErrorBody {
    jsonrpc: &'static str,
    id: Option<()>,
    error: RpcError,
}

#[derive(Serialize)]
struct RpcError {
    code: i32,
    message: String,
}

/// JSON-RPC's invalid-params code.
const INVALID_PARAMS: i32 = -32602;

/// Middleware on `/mcp`: refuses a bad `?view=` or `?select=` with HTTP 400 and a
/// JSON-RPC error, else hands the parsed [`UrlView`] to the handler.
pub async fn check_query(mut req: Request, next: Next) -> Response {
    match UrlView::parse(req.uri().query()) {
        Ok(v) => {
            req.extensions_mut().insert(v);
            next.run(req).await
        }
        Err(e) => {
            tracing::debug!(error = ?e.to_string(), "MCP URL refused");
            let body = RpcErrorBody {
                jsonrpc: "2.0",
                id: None,
                error: RpcError {
                    code: INVALID_PARAMS,
                    message: e.to_string(),
                },
            };
            (
                StatusCode::BAD_REQUEST,
                [(header::CONNECTION, HeaderValue::from_static("close"))],
                axum::Json(body),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_choices_hold_only_at_their_epoch_and_stay_few() {
        let views = AutoViews::default();
        views.put("t1".into(), None, 7, Shown::Fleet);
        assert_eq!(views.get("t1", None, 7), Some(Shown::Fleet));
        assert_eq!(views.get("t1", None, 8), None, "the fleet changed since");
        assert_eq!(
            views.get("t1", Some("os=linux"), 7),
            None,
            "another selection"
        );
        assert_eq!(views.get("t2", None, 7), None, "another token");
        for i in 0..(MAX_AUTO_VIEWS + 10) {
            views.put("t1".into(), Some(format!("id~n{i}")), 7, Shown::Flat);
        }
        assert!(views.0.len() <= MAX_AUTO_VIEWS);
    }

    #[test]
    fn the_url_beats_the_token_and_auto_counts() {
        let never = || -> usize { panic!("counted without auto") };
        assert_eq!(
            choose(Some(McpView::Fleet), McpView::Flat, never),
            Shown::Fleet
        );
        assert_eq!(
            choose(Some(McpView::Flat), McpView::Fleet, never),
            Shown::Flat
        );
        assert_eq!(choose(None, McpView::Fleet, never), Shown::Fleet);
        assert_eq!(choose(None, McpView::Auto, || AUTO_MAX_BYTES), Shown::Flat);
        assert_eq!(
            choose(None, McpView::Auto, || AUTO_MAX_BYTES + 1),
            Shown::Fleet
        );
        assert_eq!(
            choose(Some(McpView::Auto), McpView::Flat, || 0),
            Shown::Flat
        );
        assert_eq!(
            choose(Some(McpView::Auto), McpView::Flat, || 1 << 20),
            Shown::Fleet
        );
    }

    #[test]
    fn queries_parse_or_say_what_is_wrong() {
        let v = UrlView::parse(None).unwrap();
        assert!(v.view.is_none() && v.select.is_none());
        let v = UrlView::parse(Some("view=fleet&select=role%3Dweb,fact.os=linux&x=1")).unwrap();
        assert_eq!(v.view, Some(McpView::Fleet));
        assert_eq!(v.select.unwrap().terms().len(), 2);
        let e = UrlView::parse(Some("view=tree")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "?view=: unknown view \"tree\": use flat, fleet or auto"
        );
        assert!(matches!(
            UrlView::parse(Some("select=a,,b")),
            Err(QueryError::Select(_))
        ));
        assert!(matches!(
            UrlView::parse(Some("view=flat&view=fleet")),
            Err(QueryError::Repeated("view"))
        ));
        let v = UrlView::parse(Some("tools=Bash%2Cgit_*")).unwrap();
        assert!(v
            .tools
            .as_ref()
            .is_some_and(|l| l.lists("git_log") && !l.lists("Read")));
        assert!(matches!(
            UrlView::parse(Some("tools=")),
            Err(QueryError::Tools(BadTools::Empty))
        ));
        // Without ?tools=: every tool when flat is asked for by name, else the
        // reference set.
        let none = UrlView::default();
        assert!(listed(&none, None, McpView::Flat).is_all());
        assert!(!listed(&none, None, McpView::Auto).is_all());
        assert!(listed(&v, None, McpView::Flat).lists("git_log"));
        // The token's set, unless the URL gives one.
        assert!(listed(&none, Some("git_*"), McpView::Flat).lists("git_log"));
        assert!(!listed(&none, Some("git_*"), McpView::Flat).lists("Read"));
        assert!(!listed(&v, Some("Read"), McpView::Auto).lists("Read"));
        assert!(!listed(&none, Some("[bad"), McpView::Auto).is_all());
    }

    #[test]
    fn views_round_trip_through_serde_and_text() {
        for v in [McpView::Flat, McpView::Fleet, McpView::Auto] {
            assert_eq!(v.as_str().parse::<McpView>().unwrap(), v);
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{v}\""));
        }
    }
}
