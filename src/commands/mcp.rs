//! `gsv mcp`: MCP on stdin/stdout for clients that only launch commands, as a plain
//! bridge to the gateway's own MCP endpoint (`/mcp`).
//!
//! It exists because some MCP clients cannot speak HTTP: they start a command and talk
//! MCP over its stdio. `gsv mcp` relays those messages to `/mcp` and the answers back
//! ([`crate::mcp_bridge`]), so the client gets what an HTTP client of `/mcp` gets —
//! the same tools, results, progress, cancellation, list changes and elicitation. It
//! finds the gateway, the token and the TLS trust like `gsv call`. Nothing but MCP goes
//! to stdout: logs go to stderr.

use super::client::Target;
use crate::exit;
use crate::mcp_bridge::{self, stdio, Upstream};
use crate::resolve;
use gsv_gateway::mcp::view::McpView;
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long the last lines may take to reach stdout at the end.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

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
    let http = ClientConfig::one(ServerEntry::Http {
        url: url.clone(),
        headers: Headers {
            authorization: format!("Bearer <the token in {token_file}>"),
        },
    });
    let stdio = ClientConfig::one(ServerEntry::Stdio {
        command: exe,
        args: vec!["mcp".into(), "--data".into(), data.display().to_string()],
    });
    let (http, stdio) = (json_line(&http), json_line(&stdio));
    format!(
        "  MCP          {url}   (Authorization: Bearer <agent token>)\n\
         \x20 connect an MCP client:\n\
         \x20   Claude Code: claude mcp add --transport http gsv {url} --header \"Authorization: Bearer $(cat {token_file})\"\n\
         \x20   JSON (HTTP): {http}\n\
         \x20   JSON (stdio, for clients that only launch commands): {stdio}\n"
    )
}

/// An MCP client's configuration entry for gsv (`{"mcpServers": {"gsv": ...}}`), the
/// shape Claude Desktop, Cursor and most clients read.
#[derive(serde::Serialize)]
struct ClientConfig {
    #[serde(rename = "mcpServers")]
    servers: std::collections::BTreeMap<&'static str, ServerEntry>,
}

impl ClientConfig {
    fn one(entry: ServerEntry) -> Self {
        ClientConfig {
            servers: [("gsv", entry)].into(),
        }
    }
}

#[derive(serde::Serialize)]
#[serde(untagged)]
enum ServerEntry {
    Http { url: String, headers: Headers },
    Stdio { command: String, args: Vec<String> },
}

#[derive(serde::Serialize)]
struct Headers {
    #[serde(rename = "Authorization")]
    authorization: String,
}

/// One line of JSON (serializing these plain structs cannot fail).
fn json_line(config: &ClientConfig) -> String {
    serde_json::to_string(config).unwrap_or_default()
}

/// `gsv mcp`: bridges stdio to the gateway's `/mcp` (with `?view=` / `?select=` when
/// given) until the client closes stdin (or
/// stdout, or a signal comes), then ends the session; exits 0. Exits 3 at once without
/// a token, 2 on a bad `--gateway`, `--ca` or `--pin`.
pub async fn run(target: Target, view: Option<McpView>, select: Option<String>) -> u8 {
    if let Some(sel) = &select {
        if let Err(e) = gsv_protocol::selector::Selector::parse(sel) {
            eprintln!("error: invalid_args: --select: {e}");
            return exit::USAGE;
        }
    }
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
    let upstream = Upstream::new(&gateway, &token, &tls)
        .and_then(|u| u.with_view(view.as_ref().map(McpView::as_str), select.as_deref()));
    let upstream = match upstream {
        Ok(u) => u,
        Err(e) => {
            eprintln!("error: invalid_args: {e}");
            return exit::USAGE;
        }
    };
    tracing::debug!(url = upstream.url(), "bridging stdio to the gateway");
    let stop = CancellationToken::new();
    let started = stdio::stdin_lines(mcp_bridge::MAX_LINE_BYTES)
        .and_then(|input| Ok((input, stdio::stdout_writer(stop.clone())?)));
    let (input, (output, written)) = match started {
        Ok(io) => io,
        Err(e) => {
            eprintln!("error: internal: cannot start the stdio threads: {e}");
            return exit::TOOL_ERROR;
        }
    };
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            super::shutdown_signal().await;
            stop.cancel();
        });
    }
    mcp_bridge::run(upstream, input, output, stop).await;
    let _ = tokio::time::timeout(FLUSH_TIMEOUT, written).await;
    exit::OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_lines_hold_client_configs_that_parse() {
        let text = setup_lines(
            "http://127.0.0.1:8787",
            Path::new("/d/agent.token"),
            Path::new("/d"),
        );
        let json_after = |label: &str| -> serde_json::Value {
            let line = text.lines().find(|l| l.contains(label)).expect(label);
            let start = line.find('{').expect("JSON");
            serde_json::from_str(&line[start..]).expect("valid JSON")
        };
        let http = json_after("JSON (HTTP)");
        assert_eq!(
            http["mcpServers"]["gsv"]["url"],
            "http://127.0.0.1:8787/mcp"
        );
        assert_eq!(
            http["mcpServers"]["gsv"]["headers"]["Authorization"],
            "Bearer <the token in /d/agent.token>"
        );
        let stdio = json_after("JSON (stdio");
        assert_eq!(
            stdio["mcpServers"]["gsv"]["args"],
            serde_json::json!(["mcp", "--data", "/d"])
        );
        assert!(stdio["mcpServers"]["gsv"]["command"].is_string());
    }
}
