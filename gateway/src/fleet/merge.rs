//! One answer out of this replica's part and the other replicas' parts: a node list,
//! a tool list, an approval page. Written once here, so every door's list is merged the
//! same way.

use crate::approvals::{AgentCount, ListPage};
use gsv_protocol::method::{NodeSummary, ToolEntry};
use std::collections::BTreeMap;

/// `local` and `remote` as one entry per key (`key`), an online copy over an offline
/// one (`online`), a local one over a remote one otherwise; by key.
fn one_each<T>(
    local: Vec<T>,
    remote: Vec<T>,
    key: impl Fn(&T) -> &str,
    online: impl Fn(&T) -> bool,
) -> Vec<T> {
    let mut by_key: BTreeMap<String, T> = BTreeMap::new();
    for item in local.into_iter().chain(remote) {
        match by_key.get(key(&item)) {
            Some(kept) if online(kept) || !online(&item) => {}
            _ => {
                by_key.insert(key(&item).to_owned(), item);
            }
        }
    }
    by_key.into_values().collect()
}

/// This replica's list with the others' merged in: one entry per node, an online one
/// over an offline one; online nodes first, then offline, each by id.
pub fn nodes(local: Vec<NodeSummary>, remote: Vec<NodeSummary>) -> Vec<NodeSummary> {
    let merged = one_each(local, remote, |n| &n.id, |n| n.online);
    let (mut online, offline): (Vec<_>, Vec<_>) = merged.into_iter().partition(|n| n.online);
    online.extend(offline);
    online
}

/// This replica's tool list with the others' merged in: one entry per name, an online
/// one over an offline one, by name.
pub fn tools(local: Vec<ToolEntry>, remote: Vec<ToolEntry>) -> Vec<ToolEntry> {
    one_each(local, remote, |t| &t.name, |t| t.online)
}

/// One approval page out of several replicas' first requests: newest first (then by id),
/// `offset` skipped, `limit` kept; totals and per-agent counts summed, fewest first.
pub fn pages(pages: impl Iterator<Item = ListPage>, offset: u32, limit: u32) -> ListPage {
    let mut all = Vec::new();
    let mut total = 0;
    let mut by_agent: BTreeMap<String, u64> = Default::default();
    for page in pages {
        total += page.total;
        for a in page.by_agent {
            *by_agent.entry(a.agent).or_default() += a.count;
        }
        all.extend(page.approvals);
    }
    all.sort_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    let approvals = all
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .collect();
    let mut by_agent: Vec<AgentCount> = by_agent
        .into_iter()
        .map(|(agent, count)| AgentCount { agent, count })
        .collect();
    by_agent.sort_by(|a, b| a.count.cmp(&b.count).then_with(|| a.agent.cmp(&b.agent)));
    ListPage {
        approvals,
        total,
        offset: u64::from(offset),
        by_agent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::ApprovalRequest;

    fn node(id: &str, online: bool, replica: &str) -> NodeSummary {
        NodeSummary {
            id: id.into(),
            online,
            since: 1,
            host_role: gsv_protocol::HostRole::Execution,
            capabilities: vec![],
            tools: vec![],
            runtime: Default::default(),
            conn_id: None,
            remote_addr: None,
            version: String::new(),
            unaccepted: None,
            labels: Default::default(),
            replica: Some(replica.into()),
        }
    }

    #[test]
    fn online_elsewhere_replaces_offline_here() {
        let merged = nodes(
            vec![node("b", false, "a"), node("c", true, "a")],
            vec![
                node("b", true, "x"),
                node("a", true, "x"),
                node("c", false, "y"),
            ],
        );
        let seen: Vec<(&str, bool, &str)> = merged
            .iter()
            .map(|n| (n.id.as_str(), n.online, n.replica.as_deref().unwrap()))
            .collect();
        assert_eq!(seen, [("a", true, "x"), ("b", true, "x"), ("c", true, "a")]);
    }

    fn request(id: &str, agent: &str, at: u64) -> ApprovalRequest {
        serde_json::from_value(serde_json::json!({
            "id": id, "agent": agent, "tokenId": "00ff", "node": "n1", "tool": "Echo",
            "argsHash": "", "summary": "", "reason": "", "state": "pending",
            "createdAt": at, "expiresAt": at + 1000, "decidedAt": null, "decidedBy": null
        }))
        .expect("a request")
    }

    fn page(requests: Vec<ApprovalRequest>) -> ListPage {
        let mut by_agent: BTreeMap<String, u64> = Default::default();
        for r in &requests {
            *by_agent.entry(r.agent.clone()).or_default() += 1;
        }
        ListPage {
            total: requests.len() as u64,
            approvals: requests,
            offset: 0,
            by_agent: by_agent
                .into_iter()
                .map(|(agent, count)| AgentCount { agent, count })
                .collect(),
        }
    }

    #[test]
    fn pages_of_several_replicas_merge_newest_first_with_summed_counts() {
        let a = page(vec![request("a3", "x", 30), request("a1", "x", 10)]);
        let b = page(vec![request("b4", "y", 40), request("b2", "x", 20)]);
        let merged = pages([a, b].into_iter(), 1, 2);
        let ids: Vec<&str> = merged.approvals.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a3", "b2"]);
        assert_eq!((merged.total, merged.offset), (4, 1));
        let counts: Vec<(&str, u64)> = merged
            .by_agent
            .iter()
            .map(|c| (c.agent.as_str(), c.count))
            .collect();
        assert_eq!(counts, [("y", 1), ("x", 3)]);
    }
}
