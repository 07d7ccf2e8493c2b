//! The node's tree requests on a real directory: a listing that never follows a
//! symlink, and places that refuse entries outside the top and never write through
//! a symlink.

use super::{list, place, TreeError};
use crate::tools::paths::PathPolicy;
use gsv_protocol::transfer::tree::{EntryKind, PlaceParams, PlaceStep, TreeEntry};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

fn tmp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gsv-tree-{tag}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn dir(path: &str, mode: u32) -> TreeEntry {
    TreeEntry {
        path: path.into(),
        kind: EntryKind::Dir,
        mode,
        mtime_ms: 1_600_000_000_000,
        size: 0,
        target: None,
    }
}

fn link(path: &str, target: &str) -> TreeEntry {
    TreeEntry {
        path: path.into(),
        kind: EntryKind::Symlink,
        mode: 0,
        mtime_ms: 0,
        size: 0,
        target: Some(target.into()),
    }
}

fn step(
    policy: &PathPolicy,
    top: &Path,
    step: PlaceStep,
    entries: Vec<TreeEntry>,
) -> Result<usize, TreeError> {
    place::place(
        policy,
        PlaceParams {
            path: top.display().to_string(),
            into: None,
            step,
            entries,
        },
    )
    .map(|p| p.done)
}

#[test]
fn a_listing_reports_links_as_links_and_never_enters_them() {
    let ws = tmp("list");
    let outside = tmp("outside");
    std::fs::write(outside.join("secret"), "s").expect("write");
    std::fs::create_dir_all(ws.join("t/sub")).expect("mkdir");
    std::fs::write(ws.join("t/sub/f"), "hello").expect("write");
    symlink(&outside, ws.join("t/evil")).expect("link");
    let policy = PathPolicy::new(&ws, true);
    let l = list::list(&policy, "t").expect("lists");
    let paths: Vec<_> = l
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.kind))
        .collect();
    assert_eq!(
        paths,
        [
            (".", EntryKind::Dir),
            ("evil", EntryKind::Symlink),
            ("sub", EntryKind::Dir),
            ("sub/f", EntryKind::File)
        ]
    );
    assert_eq!(
        l.entries[1].target.as_deref(),
        Some(outside.to_str().expect("utf8"))
    );
    assert_eq!(l.entries[3].size, 5);
    // The top itself may not lead out of a confined workspace.
    let e = list::list(&policy, outside.to_str().expect("utf8")).expect_err("outside");
    assert_eq!(e.code(), gsv_protocol::ErrorCode::Forbidden);
    let e = list::list(&policy, "t/evil").expect_err("through the link");
    assert_eq!(e.code(), gsv_protocol::ErrorCode::Forbidden);
}

#[test]
fn places_refuse_escaping_entries_and_never_write_through_a_link() {
    let ws = tmp("place");
    let outside = tmp("outside");
    let policy = PathPolicy::new(&ws, false);
    let top = ws.join("dest");
    for bad in ["../x", "/tmp/x", "a/../../x", "a//b"] {
        let e = step(&policy, &top, PlaceStep::Dirs, vec![dir(bad, 0o755)]).expect_err(bad);
        assert_eq!(e.code(), gsv_protocol::ErrorCode::InvalidArgs, "{bad}: {e}");
        let e = step(&policy, &top, PlaceStep::Links, vec![link(bad, "/etc")]).expect_err(bad);
        assert_eq!(e.code(), gsv_protocol::ErrorCode::InvalidArgs, "{bad}: {e}");
    }
    assert!(!outside.join("x").exists());
    // A symlink of the copy pointing out, then a directory "under" it: refused.
    assert_eq!(
        step(&policy, &top, PlaceStep::Dirs, vec![dir(".", 0o755)]).expect("top"),
        1
    );
    step(
        &policy,
        &top,
        PlaceStep::Links,
        vec![link("evil", outside.to_str().expect("utf8"))],
    )
    .expect("link made");
    let e = step(&policy, &top, PlaceStep::Dirs, vec![dir("evil/sub", 0o755)])
        .expect_err("under a link");
    assert!(matches!(e, TreeError::InTheWay { .. }), "{e}");
    let e = step(&policy, &top, PlaceStep::Dirs, vec![dir("evil", 0o755)])
        .expect_err("a link as a dir");
    assert!(matches!(e, TreeError::InTheWay { .. }), "{e}");
    let e = step(&policy, &top, PlaceStep::Settle, vec![dir("evil", 0o777)])
        .expect_err("settle via link");
    assert!(matches!(e, TreeError::InTheWay { .. }), "{e}");
    assert!(
        std::fs::read_dir(&outside)
            .expect("outside")
            .next()
            .is_none(),
        "nothing written outside"
    );
    assert_ne!(
        std::fs::metadata(&outside)
            .expect("outside")
            .permissions()
            .mode()
            & 0o777,
        0o777
    );
    // A file of the tree where a symlink stands: the link is removed, not followed.
    let mut file = dir("evil", 0o644);
    file.kind = EntryKind::File;
    step(&policy, &top, PlaceStep::Dirs, vec![file]).expect("cleared");
    assert!(std::fs::symlink_metadata(top.join("evil")).is_err());
}

#[test]
fn settle_gives_directories_their_modes_and_mtimes_deepest_first() {
    let ws = tmp("settle");
    let policy = PathPolicy::new(&ws, true);
    let top = ws.join("t");
    let dirs = vec![dir(".", 0o755), dir("a", 0o700), dir("a/b", 0o500)];
    step(&policy, &top, PlaceStep::Dirs, dirs.clone()).expect("dirs");
    step(&policy, &top, PlaceStep::Settle, dirs).expect("settled");
    for (p, mode) in [("", 0o755), ("a", 0o700), ("a/b", 0o500)] {
        let md = std::fs::metadata(top.join(p)).expect("meta");
        assert_eq!(md.permissions().mode() & 0o777, mode, "{p}");
        let mtime = md
            .modified()
            .expect("mtime")
            .duration_since(std::time::UNIX_EPOCH)
            .expect("epoch");
        assert_eq!(mtime.as_millis(), 1_600_000_000_000, "{p}");
    }
    std::fs::set_permissions(top.join("a/b"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod back");
}
