//! Directory copies (`gsv cp -r`): a tree as a manifest plus one ordinary file
//! transfer per file, so each file keeps its SHA-256 check and its resume
//! (`docs/protocol.md` §5.11, "Directory trees").
//!
//! Both ways go in the same order: directories (and the ground cleared for files),
//! then the files, then the symlinks, then the directories' modes and mtimes, deepest
//! first. A symlink of the copy therefore never exists while another entry of the
//! same copy is written, and no entry is written through one. A put is placed by the
//! node (`transfer.place`, which checks every path itself); a get is placed here
//! ([`local`]) after the node's listing passed the same checks, so a hostile node
//! cannot write outside the local destination.

mod local;
mod nodes;

use crate::{AgentClient, ClientError};
use gsv_protocol::transfer::tree::{
    check_manifest, AgentListParams, AgentPlaceParams, EntryKind, Listing, PlaceStep, Placed,
    TreeEntry, MAX_PLACE_ENTRIES,
};
use gsv_protocol::Method;
use std::path::{Path, PathBuf};

/// What a directory copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeCopied {
    /// The top directory as it was placed (resolved on the node for a put, local for
    /// a get).
    pub root: String,
    pub files: u64,
    /// Directories, the top included.
    pub dirs: u64,
    pub symlinks: u64,
    /// Bytes of all the files.
    pub bytes: u64,
}

impl AgentClient {
    /// `transfer.list`: the tree `remote` names on `node` (needs `{node}__Read`);
    /// `local`: where it is copied to, named for an operator asked to approve it.
    pub async fn list_tree(
        &self,
        node: &str,
        remote: &str,
        local: Option<&Path>,
    ) -> Result<Listing, ClientError> {
        let raw = self
            .request(
                Method::TransferList,
                &AgentListParams {
                    node: node.to_owned(),
                    path: remote.to_owned(),
                    source: local.map(|l| l.display().to_string()),
                },
            )
            .await?;
        serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad transfer.list result: {e}")))
    }

    /// `transfer.place`: one step of placing a tree at `remote` on `node` (needs
    /// `{node}__Write`), in requests of at most [`MAX_PLACE_ENTRIES`] entries. `into`
    /// (the `dirs` step): go into `remote/into` when `remote` is a directory. Returns
    /// the top as the node resolved it. `local`: the tree copied, named for an
    /// operator asked to approve it.
    pub async fn place_tree(
        &self,
        node: &str,
        remote: &str,
        (into, local): (Option<&str>, Option<&Path>),
        step: PlaceStep,
        entries: &[TreeEntry],
    ) -> Result<Placed, ClientError> {
        let mut root = remote.to_owned();
        let mut into = into.map(str::to_owned);
        let mut done = 0;
        let mut batches = entries.chunks(MAX_PLACE_ENTRIES).peekable();
        // One request even for no entries: the `dirs` step makes the top.
        let empty: &[TreeEntry] = &[];
        let first = batches.next().unwrap_or(empty);
        for batch in std::iter::once(first).chain(batches) {
            let raw = self
                .request(
                    Method::TransferPlace,
                    &AgentPlaceParams {
                        node: node.to_owned(),
                        path: root.clone(),
                        into: into.take(),
                        step,
                        entries: batch.to_vec(),
                        source: local.map(|l| l.display().to_string()),
                    },
                )
                .await?;
            let placed: Placed = serde_json::from_str(raw.get())
                .map_err(|e| ClientError::Protocol(format!("bad transfer.place result: {e}")))?;
            root = placed.root;
            done += placed.done;
        }
        Ok(Placed { root, done })
    }

    /// Copies the local directory `local` to `remote` on `node`, like `cp -r`: into
    /// `remote/NAME` when `remote` is a directory already, else as `remote`. Modes
    /// and mtimes are kept, symlinks copied as links. `progress(done, total)` counts
    /// the bytes of all the files.
    ///
    /// `top` carries the copy's top across tries: `None` on the first, set once the
    /// node has made it; a later try of the same copy (after a dropped connection)
    /// goes into exactly that top, never into `top/NAME`, and its files resume.
    pub async fn put_tree(
        &self,
        node: &str,
        local: &Path,
        remote: &str,
        top: &mut Option<String>,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<TreeCopied, ClientError> {
        let entries = local::walk(local)?;
        let remote = match top.as_deref() {
            Some(t) => t,
            None if remote.is_empty() => ".",
            None => remote,
        };
        let into = match top {
            Some(_) => None,
            None => local::name_of(&local.to_string_lossy()),
        };
        let (mut copied, total) = count(&entries);
        let ground = ground(&entries);
        let placed = self
            .place_tree(
                node,
                remote,
                (into.as_deref(), Some(local)),
                PlaceStep::Dirs,
                &ground,
            )
            .await?;
        let root = placed.root;
        *top = Some(root.clone());
        let mut base = 0u64;
        progress(0, total);
        for e in entries.iter().filter(|e| e.kind == EntryKind::File) {
            let done = self
                .put_file(
                    node,
                    &local.join(&e.path),
                    &format!("{root}/{}", e.path),
                    |d, _| progress(base + d, total.max(base + d)),
                )
                .await?;
            base += done.bytes;
        }
        let links: Vec<_> = only(&entries, EntryKind::Symlink);
        if !links.is_empty() {
            self.place_tree(node, &root, (None, None), PlaceStep::Links, &links)
                .await?;
        }
        let dirs = only(&entries, EntryKind::Dir);
        self.place_tree(node, &root, (None, None), PlaceStep::Settle, &dirs)
            .await?;
        copied.root = root;
        copied.bytes = base;
        Ok(copied)
    }

    /// Copies the directory `remote` on `node` to the local path `local`, like `cp
    /// -r`: into `local/NAME` when `local` is a directory already, else as `local`.
    /// The node's listing is checked first (no absolute, `..` or repeated entry,
    /// nothing under a file or symlink); no symlink is followed locally.
    ///
    /// `top` carries the copy's top across tries, as for [`AgentClient::put_tree`]; a
    /// later try also leaves alone each file an earlier one finished (a regular file
    /// there with the listed size and mtime).
    pub async fn get_tree(
        &self,
        node: &str,
        remote: &str,
        local: &Path,
        top: &mut Option<PathBuf>,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<TreeCopied, ClientError> {
        let listing = self.list_tree(node, remote, Some(local)).await?;
        check_manifest(&listing.entries).map_err(|e| {
            ClientError::Protocol(format!("the node's listing of {remote} is refused: {e}"))
        })?;
        let again = top.is_some();
        let made = match top.as_deref() {
            Some(t) => local::make_top(t, None)?,
            None => local::make_top(local, local::name_of(remote).as_deref())?,
        };
        *top = Some(made.clone());
        let top = made;
        local::make_ground(&top, &listing.entries)?;
        let (mut copied, total) = count(&listing.entries);
        let mut base = 0u64;
        progress(0, total);
        for e in listing.entries.iter().filter(|e| e.kind == EntryKind::File) {
            let target = local::file_target(&top, &e.path)?;
            if again && local::finished(&target, e) {
                base += e.size;
                progress(base, total);
                continue;
            }
            let done = self
                .get_file(
                    node,
                    &format!("{}/{}", listing.root, e.path),
                    &target,
                    |d, _| progress(base + d, total.max(base + d)),
                )
                .await?;
            base += done.bytes;
        }
        local::make_links(&top, &listing.entries)?;
        local::settle(&top, &listing.entries)?;
        copied.root = top.display().to_string();
        copied.bytes = base;
        Ok(copied)
    }
}

/// The counts of a manifest, and its files' bytes.
fn count(entries: &[TreeEntry]) -> (TreeCopied, u64) {
    let mut c = TreeCopied::default();
    let mut total = 0u64;
    for e in entries {
        match e.kind {
            EntryKind::File => {
                c.files += 1;
                total = total.saturating_add(e.size);
            }
            EntryKind::Dir => c.dirs += 1,
            EntryKind::Symlink => c.symlinks += 1,
        }
    }
    (c, total)
}

/// What the `dirs` step places: the directories, and the files' places cleared.
fn ground(entries: &[TreeEntry]) -> Vec<TreeEntry> {
    entries
        .iter()
        .filter(|e| e.kind != EntryKind::Symlink)
        .cloned()
        .collect()
}

fn only(entries: &[TreeEntry], kind: EntryKind) -> Vec<TreeEntry> {
    entries.iter().filter(|e| e.kind == kind).cloned().collect()
}
