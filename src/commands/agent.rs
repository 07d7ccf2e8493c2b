//! `gsv call`, `gsv nodes`, `gsv tools`: the agent protocol from the command line.
//! (`gsv nodes show` and `accept-tools` are in [`super::nodes`].)

use crate::exit;
use crate::resolve;
use crate::terminal::safe;
use gsv_client::{AgentClient, ClientError};
use gsv_protocol::method::NodeSummary;
use gsv_protocol::{ErrorCode, ErrorShape};
use std::path::PathBuf;

/// Where to connect and as whom.
pub struct Target {
    pub gateway: Option<String>,
    pub token: Option<String>,
    pub data: Option<PathBuf>,
    /// `--ca` / `$GSV_CA`: the only trusted roots for a TLS gateway.
    pub ca: Option<PathBuf>,
    /// `--pin` / `$GSV_PIN`: the gateway certificate's SHA-256 fingerprint.
    pub pin: Option<String>,
}

fn fail(code: &str, message: impl std::fmt::Display, exit: u8) -> u8 {
    eprintln!("error: {code}: {}", safe(&message.to_string()));
    exit
}

pub(crate) fn client_error(e: &ClientError) -> u8 {
    match e {
        ClientError::Remote(ErrorShape { code, message, .. }) => {
            fail(code.as_str(), message, exit::for_code(*code))
        }
        ClientError::Url(e) => fail("invalid_args", e, exit::USAGE),
        ClientError::Tls(e) => fail("invalid_args", e, exit::USAGE),
        ClientError::Certificate { .. } => fail("certificate", e, exit::AUTH),
        ClientError::Unreachable { .. } | ClientError::Closed => {
            fail("unreachable", e, exit::UNREACHABLE)
        }
        ClientError::Protocol(m) => fail("protocol", m, exit::UNREACHABLE),
        ClientError::Io { .. } => fail("io", e, exit::TOOL_ERROR),
        ClientError::Integrity(m) => fail("integrity", m, exit::TOOL_ERROR),
    }
}

/// Sends one request and decodes its result as `T`; on failure prints the error (the
/// gateway's, or `protocol` for a result that does not decode) and gives the exit code.
pub(crate) async fn request_as<T: serde::de::DeserializeOwned>(
    client: &AgentClient,
    method: gsv_protocol::Method,
    params: &impl serde::Serialize,
) -> Result<T, u8> {
    let raw = client
        .request(method, params)
        .await
        .map_err(|e| client_error(&e))?;
    serde_json::from_str(raw.get()).map_err(|e| fail("protocol", e, exit::UNREACHABLE))
}

/// Prints `value` as pretty JSON on stdout (`--json`).
pub(crate) fn print_json(value: &impl serde::Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

pub(crate) async fn connect(target: &Target) -> Result<AgentClient, u8> {
    target
        .resolve()?
        .connect()
        .await
        .map_err(|e| client_error(&e))
}

/// Where an agent command connects, resolved once (a command that reconnects, like
/// `gsv cp` retrying, dials the same gateway with the same token every time).
pub(crate) struct Dialer {
    gateway: String,
    token: String,
    tls: gsv_client::TlsOptions,
}

impl Dialer {
    /// Dials and authenticates.
    pub async fn connect(&self) -> Result<AgentClient, ClientError> {
        AgentClient::connect_with(&self.gateway, &self.token, &self.tls).await
    }

    /// Dials and authenticates as a bulk lane (`gsv cp`: served below calls).
    pub async fn connect_bulk(&self) -> Result<AgentClient, ClientError> {
        AgentClient::connect_bulk(&self.gateway, &self.token, &self.tls).await
    }
}

impl Target {
    /// The gateway, token and TLS trust to use; with no token, prints why and gives
    /// the exit code.
    pub(crate) fn resolve(&self) -> Result<Dialer, u8> {
        let data = resolve::data_dir(self.data.as_deref());
        let gateway = resolve::gateway(self.gateway.as_deref(), &data);
        let Some(token) = resolve::agent_token(self.token.as_deref(), &data) else {
            return Err(fail(
                ErrorCode::Unauthorized.as_str(),
                format!(
                    "no token: pass --token, set GSV_AGENT_TOKEN, or run `gsv up` (it writes {})",
                    data.join(gsv_gateway::datadir::AGENT_TOKEN_FILE).display()
                ),
                exit::AUTH,
            ));
        };
        let tls = resolve::tls(self.ca.clone(), self.pin.clone(), &gateway, &data);
        Ok(Dialer {
            gateway,
            token,
            tls,
        })
    }
}

/// What `gsv call --select` runs with: the arguments, the batch, the offline wait (ms).
pub type FanoutInput = (
    serde_json::Value,
    Option<gsv_protocol::fanout::Batch>,
    Option<u64>,
);

/// Checks `gsv call --select SEL TOOL ARGS [--batch B] [--wait-offline DUR]` before
/// connecting: a bare tool name (a `{node}__{tool}` name is a usage error), JSON
/// arguments, a valid batch and duration. On failure prints why and gives
/// [`exit::USAGE`].
pub fn fanout_args(
    select: &str,
    tool: &str,
    args: &str,
    batch: Option<&str>,
    wait_offline: Option<&str>,
) -> Result<FanoutInput, u8> {
    if tool.contains(gsv_protocol::names::NAMESPACE_SEPARATOR) {
        return Err(fail(
            "invalid_args",
            format!(
                "with --select, give the bare tool name (not {tool}): it runs on every node {select} picks"
            ),
            exit::USAGE,
        ));
    }
    let batch = batch
        .map(crate::commands::fanout::parse_batch)
        .transpose()
        .map_err(|e| fail("invalid_args", e, exit::USAGE))?;
    let wait = wait_offline
        .map(crate::commands::fanout::parse_wait)
        .transpose()
        .map_err(|e| fail("invalid_args", e, exit::USAGE))?;
    Ok((call_args(args)?, batch, wait))
}

/// `gsv call NAME ARGS`: prints the text content (or the whole result with `--json`).
pub async fn call(
    target: Target,
    name: &str,
    args: &str,
    json: bool,
    timeout_ms: Option<u64>,
) -> u8 {
    let args = match call_args(args) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let id = client.next_id();
    let request = client.call_with_id(&id, name, args, timeout_ms);
    tokio::pin!(request);
    let outcome = tokio::select! {
        biased;
        outcome = &mut request => outcome,
        _ = super::shutdown_signal() => return super::interrupted(&client, &id, request).await,
    };
    match outcome {
        Ok(result) => {
            if json {
                print_json(&result);
            } else {
                print_text(&result);
            }
            result_exit(&result)
        }
        Err(e) => client_error(&e),
    }
}

/// A tool result's text as `gsv call` prints it: the tool's output as it is on stdout,
/// a tool error on stderr, escaped.
pub(crate) fn print_text(result: &gsv_protocol::ToolResult) {
    let text = result.joined_text();
    if result.is_error {
        eprintln!("error: tool_error: {}", safe(&text));
    } else if text.ends_with('\n') {
        print!("{text}");
    } else {
        println!("{text}");
    }
}

/// The exit code of a tool result: 1 for a tool error.
pub(crate) fn result_exit(result: &gsv_protocol::ToolResult) -> u8 {
    if result.is_error {
        exit::TOOL_ERROR
    } else {
        exit::OK
    }
}

/// A call's arguments from the command line (`JSON`, `-`, `@FILE`), or the usage
/// error already printed.
pub(crate) fn call_args(args: &str) -> Result<serde_json::Value, u8> {
    let text = crate::commands::call_args::read(args)
        .map_err(|e| fail("invalid_args", e.to_string(), exit::USAGE))?;
    serde_json::from_str(&text).map_err(|e| {
        fail(
            "invalid_args",
            format!("arguments are not valid JSON: {e}"),
            exit::USAGE,
        )
    })
}

/// `gsv nodes [--select SEL]`: one line per node, or JSON.
pub async fn nodes(target: Target, json: bool, select: Option<&str>) -> u8 {
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let gateway = client.hello.gateway_version.clone();
    match client.select_nodes(select).await {
        Ok(nodes) => {
            if json {
                print_json(&nodes);
            } else if nodes.is_empty() {
                match select {
                    Some(_) => eprintln!("no nodes match the selector"),
                    None => eprintln!("no nodes"),
                }
            } else {
                for n in &nodes {
                    let state = if n.online { "online" } else { "offline" };
                    println!(
                        "{:<24} {:<8} {:<6}/{:<8} {:>2} tools  since {}{}{}",
                        safe(&n.id),
                        state,
                        safe(&n.runtime.host_os),
                        safe(&n.runtime.host_arch),
                        n.tools.len(),
                        gsv_gateway::time::rfc3339(n.since),
                        crate::commands::nodes::marks(n, &gateway),
                        crate::commands::nodes::labels_mark(n)
                    );
                }
                // On stderr, after the table: scripts reading the table see it unchanged.
                for n in &nodes {
                    if let Some(line) = login_profile_warning(n) {
                        eprintln!("{line}");
                    }
                    for line in crate::commands::nodes::warnings(n, &gateway) {
                        eprintln!("{line}");
                    }
                }
            }
            exit::OK
        }
        Err(e) => client_error(&e),
    }
}

/// Most changed files named in one warning line of `gsv nodes`.
const MAX_WARNING_NAMES: usize = 8;

/// The warning `gsv nodes` prints for a node whose login profile differs from its
/// baseline, with the node's text escaped; `None` when it does not.
pub fn login_profile_warning(n: &NodeSummary) -> Option<String> {
    let lp = n.runtime.login_profile.as_ref()?;
    if lp.changed.is_empty() {
        return None;
    }
    let mut names: Vec<String> = lp
        .changed
        .iter()
        .take(MAX_WARNING_NAMES)
        .map(|c| safe(c).into_owned())
        .collect();
    if lp.changed.len() > MAX_WARNING_NAMES {
        names.push(format!("and {} more", lp.changed.len() - MAX_WARNING_NAMES));
    }
    Some(format!(
        "! {}: login profile changed since enrollment: {} (accept with: gsv node --accept-login-profile)",
        safe(&n.id),
        names.join(", ")
    ))
}

/// `gsv tools`: one line per tool this token may call, or JSON.
pub async fn tools(target: Target, json: bool) -> u8 {
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.list_tools().await {
        Ok(tools) => {
            if json {
                print_json(&tools);
            } else if tools.is_empty() {
                eprintln!("no tools visible to this token");
            } else {
                for t in tools {
                    let first_line = t.description.lines().next().unwrap_or("");
                    let offline = if t.online { "" } else { " (offline)" };
                    println!("{:<40} {}{}", safe(&t.name), safe(first_line), offline);
                }
            }
            exit::OK
        }
        Err(e) => client_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::{HostRole, LoginProfileChange, Runtime};

    fn node(id: &str, changed: Option<Vec<&str>>) -> NodeSummary {
        NodeSummary {
            id: id.into(),
            online: true,
            since: 0,
            host_role: HostRole::Execution,
            capabilities: Vec::new(),
            tools: Vec::new(),
            runtime: Runtime {
                login_profile: changed.map(|c| {
                    Box::new(LoginProfileChange {
                        changed: c.into_iter().map(String::from).collect(),
                        since: 1,
                        checked_at: 2,
                    })
                }),
                ..Runtime::default()
            },
            conn_id: None,
            remote_addr: None,
            version: String::new(),
            unaccepted: None,
            labels: Default::default(),
            replica: None,
        }
    }

    #[test]
    fn login_profile_warnings_name_the_files_escaped_and_bounded() {
        assert_eq!(login_profile_warning(&node("a", None)), None);
        assert_eq!(login_profile_warning(&node("a", Some(vec![]))), None);
        assert_eq!(
            login_profile_warning(&node("laptop", Some(vec!["~/.profile", "$BASH_ENV"]))).as_deref(),
            Some("! laptop: login profile changed since enrollment: ~/.profile, $BASH_ENV (accept with: gsv node --accept-login-profile)")
        );
        let hostile = login_profile_warning(&node("x", Some(vec!["~/.p\x1b[2K\rok"]))).unwrap();
        assert!(
            !hostile.contains('\x1b') && !hostile.contains('\r'),
            "{hostile}"
        );
        let many: Vec<&str> = vec!["f"; 20];
        let line = login_profile_warning(&node("x", Some(many))).unwrap();
        assert!(line.contains("and 12 more"), "{line}");
    }
}
