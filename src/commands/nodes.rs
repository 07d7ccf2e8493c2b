//! `gsv nodes show ID`, `gsv nodes label ID` and `gsv nodes accept-tools ID`, and the
//! marks `gsv nodes` puts on a node: a version other than the gateway's, tools not
//! accepted, its labels.
//!
//! Everything shown here came from a node (ids, tool names, descriptions, versions,
//! facts) and goes through [`safe`] before it reaches the terminal; labels follow
//! strict rules but are escaped too. `--json` prints the gateway's answer as JSON.

use crate::commands::approvals::{self, OperatorTarget};
use crate::commands::client::{connect, print_json, request_as, Target};
use crate::exit;
use crate::terminal::safe;
use gsv_protocol::inventory::{check_label_key, parse_label, Facts, Labels, FACT_KEYS};
use gsv_protocol::method::{NodeLabelsResult, NodeSummary, NodesLabelParams};
use gsv_protocol::offer::{AcceptToolsResult, NodeDetail, NodeIdParams, UnacceptedOffer};
use gsv_protocol::Method;

/// Most names listed in one mark or warning line.
const MAX_NAMES: usize = 8;

/// `names` escaped and joined, at most [`MAX_NAMES`] of them.
fn names(list: &[String]) -> String {
    let mut out: Vec<String> = list
        .iter()
        .take(MAX_NAMES)
        .map(|n| safe(n).into_owned())
        .collect();
    if list.len() > MAX_NAMES {
        out.push(format!("and {} more", list.len() - MAX_NAMES));
    }
    out.join(", ")
}

/// The node's version as shown: `-` when it sent none.
fn version(n: &NodeSummary) -> String {
    match n.version.as_str() {
        "" => "-".to_owned(),
        v => safe(v).into_owned(),
    }
}

/// Labels as `gsv nodes` shows them: `env=prod,role=web` (escaped).
pub fn compact_labels(labels: &Labels) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    safe(&pairs.join(",")).into_owned()
}

/// What `gsv nodes` appends to a node's line for its labels: two spaces and
/// [`compact_labels`], or nothing when it has none; then, in cluster mode,
/// `  replica=NAME` (the gateway replica that holds the node).
pub fn labels_mark(n: &NodeSummary) -> String {
    let labels = match n.labels.is_empty() {
        true => String::new(),
        false => format!("  {}", compact_labels(&n.labels)),
    };
    // Cluster mode: the replica that holds it.
    match &n.replica {
        Some(r) => format!("{labels}  replica={}", safe(r)),
        None => labels,
    }
}

/// The facts a node reported, one `  key  value` line each in [`FACT_KEYS`] order,
/// escaped; memory also in GiB. Empty when it reported none.
pub fn facts_lines(facts: Option<&Facts>) -> String {
    let Some(facts) = facts else {
        return String::new();
    };
    let mut out = String::new();
    for key in FACT_KEYS {
        let Some(value) = facts.get(key) else {
            continue;
        };
        let shown = match (*key, facts.memory_bytes) {
            ("memoryBytes", Some(b)) => format!("{b} ({:.1} GiB)", b as f64 / (1u64 << 30) as f64),
            _ => safe(&value).into_owned(),
        };
        out.push_str(&format!("  {key:<12}  {shown}\n"));
    }
    out
}

/// Whether the node runs another version than the gateway (`gateway` empty: an older
/// gateway that does not say; nothing is marked then).
pub fn version_differs(n: &NodeSummary, gateway: &str) -> bool {
    !gateway.is_empty() && n.version != gateway
}

/// What `gsv nodes` appends to a node's line: its version, marked when it differs from
/// the gateway's, and its unaccepted tools.
pub fn marks(n: &NodeSummary, gateway: &str) -> String {
    let mut out = format!("  {}", version(n));
    if version_differs(n, gateway) {
        out.push_str(&format!(" (gateway {})", safe(gateway)));
    }
    if let Some(u) = n.unaccepted.as_ref().filter(|u| !u.is_empty()) {
        out.push_str(&format!("  [{}]", unaccepted_mark(u)));
    }
    out
}

fn unaccepted_mark(u: &UnacceptedOffer) -> String {
    let mut parts = Vec::new();
    if !u.tools.is_empty() {
        let what = if u.hidden {
            "new tools, hidden"
        } else {
            "new tools"
        };
        parts.push(format!("{what}: {}", names(&u.tools)));
    }
    if !u.capabilities.is_empty() {
        parts.push(format!("new capabilities: {}", names(&u.capabilities)));
    }
    parts.join("; ")
}

/// The warnings (stderr, after the table) for a node: a version other than the
/// gateway's, an offer not accepted.
pub fn warnings(n: &NodeSummary, gateway: &str) -> Vec<String> {
    let id = safe(&n.id);
    let mut out = Vec::new();
    if version_differs(n, gateway) {
        out.push(format!(
            "! {id}: runs gsv {}, the gateway runs {}",
            version(n),
            safe(gateway)
        ));
    }
    if let Some(u) = n.unaccepted.as_ref().filter(|u| !u.is_empty()) {
        let hidden = match u.hidden && !u.tools.is_empty() {
            true => "; hidden from agents until accepted",
            false => "",
        };
        out.push(format!(
            "! {id}: offers what was not accepted for it: {}{hidden} (review: gsv nodes show {id}; accept: gsv nodes accept-tools {id})",
            unaccepted_mark(u)
        ));
    }
    out
}

/// `gsv nodes show ID`: the node's state, version, capabilities and tools.
pub async fn show(target: Target, id: &str, json: bool) -> u8 {
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let params = NodeIdParams { id: id.to_owned() };
    let detail: NodeDetail = match request_as(&client, Method::NodesShow, &params).await {
        Ok(d) => d,
        Err(code) => return code,
    };
    if json {
        print_json(&detail);
    } else {
        print!("{}", render(&detail));
        for line in warnings(&detail.node, &detail.gateway_version) {
            eprintln!("{line}");
        }
    }
    exit::OK
}

/// `gsv nodes show` as text.
pub fn render(d: &NodeDetail) -> String {
    let n = &d.node;
    let state = if n.online { "online" } else { "offline" };
    let mut out = format!(
        "node          {}\nstate         {state} since {}\n",
        safe(&n.id),
        gsv_gateway::time::rfc3339(n.since)
    );
    let differs = match version_differs(n, &d.gateway_version) {
        true => format!(" (differs from the gateway's {})", safe(&d.gateway_version)),
        false => String::new(),
    };
    out.push_str(&format!("version       {}{differs}\n", version(n)));
    out.push_str(&format!(
        "host          {}/{}\n",
        safe(&n.runtime.host_os),
        safe(&n.runtime.host_arch)
    ));
    if let Some(addr) = &n.remote_addr {
        out.push_str(&format!("address       {}\n", safe(addr)));
    }
    let caps: Vec<String> = n
        .capabilities
        .iter()
        .map(|c| safe(c).into_owned())
        .collect();
    out.push_str(&format!("capabilities  {}\n", caps.join(", ")));
    let labels = match n.labels.is_empty() {
        true => "-".to_owned(),
        false => compact_labels(&n.labels),
    };
    out.push_str(&format!("labels        {labels}\n"));
    let facts = facts_lines(n.runtime.facts.as_deref());
    if !facts.is_empty() {
        out.push_str("facts (self-reported by the node, not verified)\n");
        out.push_str(&facts);
    }
    if let Some(u) = n.unaccepted.as_ref().filter(|u| !u.is_empty()) {
        out.push_str(&format!("unaccepted    {}\n", unaccepted_mark(u)));
    }
    out.push_str(&format!("tools         {}\n", d.tools.len()));
    for t in &d.tools {
        let first_line = t.description.lines().next().unwrap_or("");
        let flag = match (t.unaccepted, t.hidden) {
            (_, true) => "  [new, hidden]",
            (true, false) => "  [new]",
            _ => "",
        };
        out.push_str(&format!(
            "  {:<16} {:<18} {}{flag}\n",
            safe(&t.name),
            safe(&t.capability),
            safe(first_line)
        ));
    }
    out
}

/// `gsv nodes label ID K=V... [--remove K]...`: sets and removes the node's labels
/// (admin token); prints the node's labels now. Checked here first, so a typo exits 2
/// before anything is sent; the gateway checks again.
pub async fn label(
    target: OperatorTarget,
    id: &str,
    set: &[String],
    remove: &[String],
    json: bool,
) -> u8 {
    let mut params = NodesLabelParams {
        id: id.to_owned(),
        ..Default::default()
    };
    if set.is_empty() && remove.is_empty() {
        eprintln!("error: invalid_args: give labels to set (KEY=VALUE) or --remove KEY");
        return exit::USAGE;
    }
    for text in set {
        match parse_label(text) {
            Ok((k, v)) => {
                if params.set.insert(k.clone(), v).is_some() {
                    eprintln!("error: invalid_args: label key {k:?} is given twice");
                    return exit::USAGE;
                }
            }
            Err(e) => {
                eprintln!("error: invalid_args: {e}");
                return exit::USAGE;
            }
        }
    }
    for key in remove {
        if let Err(e) = check_label_key(key) {
            eprintln!("error: invalid_args: {e}");
            return exit::USAGE;
        }
        params.remove.push(key.clone());
    }
    let client = match approvals::connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let result: NodeLabelsResult = match request_as(&client, Method::NodesLabel, &params).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    if json {
        print_json(&result);
    } else {
        let labels = match result.labels.is_empty() {
            true => "(no labels)".to_owned(),
            false => compact_labels(&result.labels),
        };
        println!("{}  {labels}", safe(&result.id));
    }
    exit::OK
}

/// `gsv nodes accept-tools ID`: what the node offers now becomes its accepted offer.
pub async fn accept_tools(target: OperatorTarget, id: &str, json: bool) -> u8 {
    let client = match approvals::connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let params = NodeIdParams { id: id.to_owned() };
    let result: AcceptToolsResult =
        match request_as(&client, Method::NodesAcceptTools, &params).await {
            Ok(r) => r,
            Err(code) => return code,
        };
    if json {
        print_json(&result);
    } else {
        eprintln!("{}", accepted_line(&result));
    }
    exit::OK
}

/// What `gsv nodes accept-tools` says it did.
pub fn accepted_line(r: &AcceptToolsResult) -> String {
    let id = safe(&r.node);
    if r.accepted.is_empty() {
        return format!(
            "{id}: nothing new to accept; its {} tools are accepted",
            r.tools.len()
        );
    }
    let mut parts = Vec::new();
    if !r.accepted.tools.is_empty() {
        parts.push(format!("tools: {}", names(&r.accepted.tools)));
    }
    if !r.accepted.capabilities.is_empty() {
        parts.push(format!("capabilities: {}", names(&r.accepted.capabilities)));
    }
    let visible = match r.accepted.hidden {
        true => " (no longer hidden from agents)",
        false => "",
    };
    format!(
        "{id}: accepted {}{visible}; it offers {} tools, all accepted",
        parts.join("; "),
        r.tools.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::offer::NodeTool;
    use gsv_protocol::{HostRole, Runtime};

    fn node(id: &str, version: &str, unaccepted: Option<UnacceptedOffer>) -> NodeSummary {
        NodeSummary {
            id: id.into(),
            online: true,
            since: 0,
            host_role: HostRole::Execution,
            capabilities: vec!["diagnostics.echo".into()],
            tools: vec!["Echo".into()],
            runtime: Runtime::default(),
            conn_id: None,
            remote_addr: None,
            version: version.into(),
            unaccepted,
            labels: Default::default(),
            replica: None,
        }
    }

    fn offer(tools: &[&str], hidden: bool) -> Option<UnacceptedOffer> {
        Some(UnacceptedOffer {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            capabilities: vec![],
            hidden,
        })
    }

    #[test]
    fn versions_are_marked_only_when_they_differ() {
        assert_eq!(marks(&node("a", "0.1.0", None), "0.1.0"), "  0.1.0");
        assert_eq!(
            marks(&node("a", "0.0.9", None), "0.1.0"),
            "  0.0.9 (gateway 0.1.0)"
        );
        assert_eq!(marks(&node("a", "", None), "0.1.0"), "  - (gateway 0.1.0)");
        // An older gateway does not say its version: nothing to compare.
        assert!(warnings(&node("a", "0.0.9", None), "").is_empty());
        assert_eq!(
            warnings(&node("a", "0.0.9", None), "0.1.0"),
            ["! a: runs gsv 0.0.9, the gateway runs 0.1.0"]
        );
    }

    #[test]
    fn unaccepted_tools_are_marked_escaped_and_bounded() {
        let n = node("lab", "0.1.0", offer(&["Echo"], true));
        assert_eq!(marks(&n, "0.1.0"), "  0.1.0  [new tools, hidden: Echo]");
        let w = warnings(&n, "0.1.0");
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("new tools, hidden: Echo; hidden from agents until accepted")
                && w[0].contains("gsv nodes accept-tools lab"),
            "{w:?}"
        );
        let hostile = node("x\x1b[2K", "1\r\u{202e}", offer(&["E\x1b]0;t\x07"], false));
        let all = format!(
            "{}{}",
            marks(&hostile, "0.1.0"),
            warnings(&hostile, "0.1.0").join("")
        );
        assert!(
            !all.contains('\x1b') && !all.contains('\r') && !all.contains('\u{202e}'),
            "{all}"
        );
        let many: Vec<&str> = vec!["T"; 20];
        assert!(marks(&node("a", "0.1.0", offer(&many, false)), "0.1.0").contains("and 12 more"));
    }

    #[test]
    fn show_lists_every_tool_with_its_capability_and_state() {
        let d = NodeDetail {
            node: node("lab", "0", offer(&["Echo"], true)),
            tools: vec![
                NodeTool {
                    name: "Echo".into(),
                    capability: "diagnostics.echo".into(),
                    description: "Return text\nmore".into(),
                    unaccepted: true,
                    hidden: true,
                },
                NodeTool {
                    name: "Read\x1b[1A".into(),
                    capability: "filesystem.read".into(),
                    description: "Read a file".into(),
                    unaccepted: false,
                    hidden: false,
                },
            ],
            gateway_version: "0.1.0".into(),
        };
        let text = render(&d);
        assert!(
            text.contains("version       0 (differs from the gateway's 0.1.0)"),
            "{text}"
        );
        assert!(
            text.contains("unaccepted    new tools, hidden: Echo"),
            "{text}"
        );
        assert!(
            text.contains("  Echo             diagnostics.echo   Return text  [new, hidden]"),
            "{text}"
        );
        assert!(text.contains("Read\\x1b[1A"), "{text}");
        assert!(!text.contains('\x1b'), "{text}");
    }

    #[test]
    fn labels_and_facts_are_shown_escaped_facts_marked_self_reported() {
        let mut n = node("web1", "0.1.0", None);
        assert_eq!(labels_mark(&n), "");
        n.labels = [
            ("role".to_owned(), "web".to_owned()),
            ("env".to_owned(), "prod".to_owned()),
        ]
        .into();
        assert_eq!(labels_mark(&n), "  env=prod,role=web");
        n.runtime.facts = Some(Box::new(Facts {
            os: "linux".into(),
            os_release: "Evil\x1b[2J\u{202e}OS".into(),
            memory_bytes: Some(2 << 30),
            ..Facts::default()
        }));
        let d = NodeDetail {
            node: n,
            tools: vec![],
            gateway_version: "0.1.0".into(),
        };
        let text = render(&d);
        assert!(text.contains("labels        env=prod,role=web\n"), "{text}");
        assert!(
            text.contains(
                "facts (self-reported by the node, not verified)\n  os            linux\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  memoryBytes   2147483648 (2.0 GiB)\n"),
            "{text}"
        );
        assert!(text.contains("osRelease     Evil\\x1b[2J"), "{text}");
        assert!(
            !text.contains('\x1b') && !text.contains('\u{202e}'),
            "{text}"
        );
        let bare = render(&NodeDetail {
            node: node("db1", "0.1.0", None),
            tools: vec![],
            gateway_version: "0.1.0".into(),
        });
        assert!(
            bare.contains("labels        -\n") && !bare.contains("facts"),
            "{bare}"
        );
    }

    #[test]
    fn accept_says_what_it_accepted() {
        let mut r = AcceptToolsResult {
            node: "lab".into(),
            tools: vec!["Echo".into(), "Read".into()],
            ..Default::default()
        };
        assert_eq!(
            accepted_line(&r),
            "lab: nothing new to accept; its 2 tools are accepted"
        );
        r.accepted.tools = vec!["Echo".into()];
        r.accepted.capabilities = vec!["diagnostics.echo".into()];
        assert_eq!(
            accepted_line(&r),
            "lab: accepted tools: Echo; capabilities: diagnostics.echo; it offers 2 tools, all accepted"
        );
    }
}
