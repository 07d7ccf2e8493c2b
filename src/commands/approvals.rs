//! `gsv approvals list|approve|deny`: the operator's side of approval requests.
//!
//! Talks to the running gateway over the agent WebSocket with the admin token (found in
//! the data directory like the other commands), because a decision must reach the call
//! that is waiting for it in the gateway's memory.

use crate::commands::client::request_as;
use crate::exit;
use crate::resolve;
use crate::terminal::safe;
use gsv_client::{AgentClient, ClientError};
use gsv_gateway::approvals::{ApprovalRequest, ListPage, ListQuery};
use gsv_gateway::datadir;
use gsv_protocol::method::{ApprovalsDecideParams, Verdict};
use gsv_protocol::Method;
use std::path::PathBuf;

/// Where the gateway is and which token to use (the admin token by default).
pub struct OperatorTarget {
    pub gateway: Option<String>,
    pub token: Option<String>,
    pub data: Option<PathBuf>,
    /// `--ca` / `$GSV_CA`: the only trusted roots for a TLS gateway.
    pub ca: Option<PathBuf>,
    /// `--pin` / `$GSV_PIN`: the gateway certificate's SHA-256 fingerprint.
    pub pin: Option<String>,
}

/// Prints a client error and gives the exit code (the same mapping as every command).
pub(crate) fn fail(e: &ClientError) -> u8 {
    crate::commands::client::client_error(e)
}

/// Where the gateway is, the token to use and how to trust it, resolved from an
/// [`OperatorTarget`].
pub(crate) struct Resolved {
    pub gateway: String,
    pub token: String,
    pub tls: gsv_client::TlsOptions,
}

impl OperatorTarget {
    /// The gateway, the token (`--token`, else the data directory's admin token) and
    /// the TLS trust; without a token says so and gives the exit code.
    pub(crate) fn resolve(&self) -> Result<Resolved, u8> {
        let data = resolve::data_dir(self.data.as_deref());
        let gateway = resolve::gateway(self.gateway.as_deref(), &data);
        let token = self
            .token
            .clone()
            .or_else(|| datadir::read_line(&data.join(datadir::ADMIN_TOKEN_FILE)));
        let Some(token) = token else {
            eprintln!(
                "error: unauthorized: no admin token: pass --token or run this where {} exists",
                data.join(datadir::ADMIN_TOKEN_FILE).display()
            );
            return Err(exit::AUTH);
        };
        let tls = resolve::tls(self.ca.clone(), self.pin.clone(), &gateway, &data);
        Ok(Resolved {
            gateway,
            token,
            tls,
        })
    }
}

pub(crate) async fn connect(t: &OperatorTarget) -> Result<AgentClient, u8> {
    let r = t.resolve()?;
    AgentClient::connect_with(&r.gateway, &r.token, &r.tls)
        .await
        .map_err(|e| fail(&e))
}

/// `gsv approvals list [--all] [--json] [--limit N] [--offset N]`: one page, newest
/// first, grouped by agent, with every agent's count and how many more there are.
pub async fn list(t: OperatorTarget, query: ListQuery, json: bool) -> u8 {
    let client = match connect(&t).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let page: ListPage = match request_as(&client, Method::ApprovalsList, &query).await {
        Ok(p) => p,
        Err(code) => return code,
    };
    if json {
        // The page's requests (an array, as before); counts go to stderr.
        crate::commands::client::print_json(&page.approvals);
    } else if page.total == 0 {
        eprintln!(
            "{}",
            if query.all {
                "no approval requests"
            } else {
                "no pending approval requests"
            }
        );
    } else {
        print!("{}", render(&page, query.all));
    }
    let shown_to = page.offset + page.approvals.len() as u64;
    if shown_to < page.total {
        eprintln!(
            "{} more: gsv approvals list --offset {shown_to}{}",
            page.total - shown_to,
            if query.all { " --all" } else { "" }
        );
    }
    exit::OK
}

/// The page as text: a line per agent with its count (fewest first, so a lone request
/// is not buried under another agent's flood), then the page's requests of each agent.
fn render(page: &ListPage, all: bool) -> String {
    let mut out = String::new();
    let what = if all { "requests" } else { "pending" };
    for group in &page.by_agent {
        out.push_str(&format!(
            "agent {}: {} {what}\n",
            safe(&group.agent),
            group.count
        ));
        for a in page.approvals.iter().filter(|a| a.agent == group.agent) {
            out.push_str(&format!(
                "  {}  {:<8} {}  (expires {})\n",
                safe(&a.id),
                safe(&a.state),
                safe(&a.summary),
                gsv_gateway::time::rfc3339(a.expires_at)
            ));
            if !a.nodes.is_empty() {
                render_nodes(&mut out, &a.nodes);
            }
            if let Some(plan) = &a.plan {
                render_plan(&mut out, plan);
            }
        }
    }
    out
}

/// Nodes of a fan-out's request named under it (the rest: `--json`).
const NODES_SHOWN: usize = 20;

/// The nodes a fan-out's one request covers, under it, escaped.
fn render_nodes(out: &mut String, nodes: &[String]) {
    let shown: Vec<String> = nodes
        .iter()
        .take(NODES_SHOWN)
        .map(|n| safe(n).into_owned())
        .collect();
    let more = match nodes.len().saturating_sub(NODES_SHOWN) {
        0 => String::new(),
        n => format!(" ... and {n} more (gsv approvals list --json)"),
    };
    out.push_str(&format!(
        "      on {} nodes: {}{more}\n",
        nodes.len(),
        shown.join(", ")
    ));
}

/// Lines of a plan shown under its request (the rest: `--json`).
const PLAN_LINES: usize = 20;

/// The tool's dry-run plan under its request, a line each, escaped (it is the node's
/// text).
fn render_plan(out: &mut String, plan: &str) {
    let lines: Vec<&str> = plan.lines().collect();
    out.push_str("      plan:\n");
    for line in lines.iter().take(PLAN_LINES) {
        out.push_str(&format!("        {}\n", safe(line)));
    }
    if lines.len() > PLAN_LINES {
        out.push_str(&format!(
            "        ... {} more lines (gsv approvals list --json)\n",
            lines.len() - PLAN_LINES
        ));
    }
}

/// `gsv approvals approve|deny ID`.
pub async fn decide(t: OperatorTarget, id: &str, approve: bool) -> u8 {
    let client = match connect(&t).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let decision = if approve { "approve" } else { "deny" };
    match client
        .request(
            Method::ApprovalsDecide,
            &ApprovalsDecideParams {
                id: id.to_owned(),
                decision: if approve {
                    Verdict::Approve
                } else {
                    Verdict::Deny
                },
            },
        )
        .await
    {
        Ok(raw) => {
            let req: Result<ApprovalRequest, _> = serde_json::from_str(raw.get());
            match req {
                Ok(r) => eprintln!("{} {}: {}", safe(&r.state), safe(&r.id), safe(&r.summary)),
                Err(_) => eprintln!("{decision}d {id}"),
            }
            exit::OK
        }
        Err(e) => fail(&e),
    }
}
