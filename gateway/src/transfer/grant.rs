//! One approval for a whole directory copy (`gsv cp -r`) under a `confirm` rule.
//!
//! A tree is copied as a manifest request and then one ordinary transfer per file;
//! asking an operator for each would ask hundreds of times for one copy. So the first
//! request of a tree (`transfer.place` of its directories, or `transfer.list`) asks
//! once, showing the source, the destination and the tree's size, and the approval
//! becomes a [`Grant`]: for the connection that asked, on that node, for that file
//! tool, beneath the tree's top as the node resolved it, for [`GRANT_LIFE`]. The
//! tree's other requests and its files' transfers under that top need no second
//! approval; anything else (another node, another path, another connection, the other
//! direction) still asks.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one approved tree copy may take.
pub const GRANT_LIFE: Duration = Duration::from_secs(3600);
/// Approved tree copies one connection holds at once (the oldest goes first).
pub const MAX_GRANTS_PER_CONN: usize = 4;

/// An approved tree copy.
#[derive(Debug, Clone)]
pub(super) struct Grant {
    pub conn_id: String,
    pub node: String,
    pub tool: &'static str,
    /// The tree's top, absolute, as the node resolved it.
    pub root: String,
    /// The operator request that approved it (logged with each use).
    pub approval: String,
    pub until: Instant,
}

/// The approved tree copies of the gateway.
#[derive(Default)]
pub(super) struct Grants(Mutex<Vec<Grant>>);

impl Grants {
    /// Keeps `g`; expired grants go, and the connection's oldest beyond
    /// [`MAX_GRANTS_PER_CONN`].
    pub fn add(&self, g: Grant) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        all.retain(|x| x.until > now);
        let mine = all.iter().filter(|x| x.conn_id == g.conn_id).count();
        if mine >= MAX_GRANTS_PER_CONN {
            if let Some(at) = all.iter().position(|x| x.conn_id == g.conn_id) {
                all.remove(at);
            }
        }
        all.push(g);
    }

    /// The approval covering `path` (the top itself, or beneath it) on `node` for
    /// `tool`, for connection `conn_id`, if one does.
    pub fn covering(&self, conn_id: &str, node: &str, tool: &str, path: &str) -> Option<String> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        all.iter()
            .filter(|g| g.until > now && g.conn_id == conn_id && g.node == node && g.tool == tool)
            .find(|g| beneath(&g.root, path))
            .map(|g| g.approval.clone())
    }

    /// Forgets a connection's grants (it closed).
    pub fn drop_conn(&self, conn_id: &str) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|g| g.conn_id != conn_id);
    }
}

/// Whether `path` is `root` or names something beneath it: `root/` followed by
/// components that are neither empty, `.` nor `..` (so it cannot climb out by its
/// spelling; the node's own path rules apply as for any transfer).
fn beneath(root: &str, path: &str) -> bool {
    if path == root {
        return true;
    }
    let root = root.trim_end_matches('/');
    match path.strip_prefix(root).and_then(|r| r.strip_prefix('/')) {
        Some(rest) => rest
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".."),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(conn: &str, root: &str) -> Grant {
        Grant {
            conn_id: conn.into(),
            node: "box".into(),
            tool: "Write",
            root: root.into(),
            approval: format!("ap-{conn}-{root}"),
            until: Instant::now() + GRANT_LIFE,
        }
    }

    #[test]
    fn a_grant_covers_its_top_and_what_is_beneath_it_only() {
        let g = Grants::default();
        g.add(grant("c1", "/srv/dest"));
        let covers = |conn, node, tool, path| g.covering(conn, node, tool, path).is_some();
        assert!(covers("c1", "box", "Write", "/srv/dest"));
        assert!(covers("c1", "box", "Write", "/srv/dest/a/b.txt"));
        for path in [
            "/srv/dest/../etc/passwd",
            "/srv/dest/./x",
            "/srv/dest//x",
            "/srv/destination/x",
            "/srv",
            "dest/x",
            "/srv/dest/",
        ] {
            assert!(!covers("c1", "box", "Write", path), "{path}");
        }
        assert!(
            !covers("c2", "box", "Write", "/srv/dest/x"),
            "another connection"
        );
        assert!(
            !covers("c1", "other", "Write", "/srv/dest/x"),
            "another node"
        );
        assert!(!covers("c1", "box", "Read", "/srv/dest/x"), "another tool");
        g.drop_conn("c1");
        assert!(
            !covers("c1", "box", "Write", "/srv/dest/x"),
            "gone with its connection"
        );
    }

    #[test]
    fn a_connection_holds_a_bounded_number_of_grants() {
        let g = Grants::default();
        for i in 0..MAX_GRANTS_PER_CONN + 2 {
            g.add(grant("c1", &format!("/t{i}")));
        }
        assert!(
            g.covering("c1", "box", "Write", "/t0/x").is_none(),
            "oldest gone"
        );
        assert!(g.covering("c1", "box", "Write", "/t1/x").is_none());
        let last = format!("/t{}/x", MAX_GRANTS_PER_CONN + 1);
        assert!(g.covering("c1", "box", "Write", &last).is_some());
        let mut expired = grant("c3", "/old");
        expired.until = Instant::now();
        g.add(expired);
        assert!(g.covering("c3", "box", "Write", "/old/x").is_none());
    }
}
