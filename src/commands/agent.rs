//! `gsv call`, `gsv nodes`, `gsv tools`: the agent protocol from the command line.
//! (`gsv nodes show` and `accept-tools` are in [`super::nodes`].)

use super::client::{
    call_args, client_error, connect, fail, print_json, print_text, result_exit, Target,
};
use crate::exit;
use crate::terminal::safe;
use gsv_protocol::method::NodeSummary;

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
