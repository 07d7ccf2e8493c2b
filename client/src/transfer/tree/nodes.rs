//! A directory copied from one node to another (`gsv cp -r A:dir B:dest`): the source
//! node's listing, placed on the destination node, each file an ordinary node → node
//! copy through the gateway (`transfer.copy`), so no byte lands on this machine or on
//! the gateway's disk.

use super::{count, ground, only, TreeCopied};
use crate::{AgentClient, ClientError};
use gsv_protocol::transfer::tree::{check_manifest, EntryKind, PlaceStep};
use gsv_protocol::transfer::Place;
use std::path::Path;

impl AgentClient {
    /// Copies the directory `from` names to `to`, node to node, like `cp -r`: into
    /// `to/NAME` when `to` is a directory already, else as `to`. Needs
    /// `{from.node}__Read` and `{to.node}__Write`; under `confirm` rules each side asks
    /// an operator once for the whole tree. `top` carries the copy's top across tries
    /// as for [`AgentClient::put_tree`]; a later try copies the files again, and a file
    /// cut off mid-way resumes.
    pub async fn copy_tree(
        &self,
        from: &Place,
        to: &Place,
        top: &mut Option<String>,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<TreeCopied, ClientError> {
        let named = |p: &Place| format!("{}:{}", p.node, p.path);
        let listing = self
            .list_tree(&from.node, &from.path, Some(Path::new(&named(to))))
            .await?;
        check_manifest(&listing.entries).map_err(|e| {
            ClientError::Protocol(format!(
                "the node's listing of {} is refused: {e}",
                named(from)
            ))
        })?;
        let (dest, into) = match top.as_deref() {
            Some(t) => (t.to_owned(), None),
            None if to.path.is_empty() => (".".to_owned(), super::local::name_of(&from.path)),
            None => (to.path.clone(), super::local::name_of(&from.path)),
        };
        let ground = ground(&listing.entries);
        let placed = self
            .place_tree(
                &to.node,
                &dest,
                (into.as_deref(), Some(Path::new(&named(from)))),
                PlaceStep::Dirs,
                &ground,
            )
            .await?;
        let root = placed.root;
        *top = Some(root.clone());
        let (mut copied, total) = count(&listing.entries);
        let mut base = 0u64;
        progress(0, total);
        for e in listing.entries.iter().filter(|e| e.kind == EntryKind::File) {
            let done = self
                .copy_file(
                    Place {
                        node: from.node.clone(),
                        path: format!("{}/{}", listing.root, e.path),
                    },
                    Place {
                        node: to.node.clone(),
                        path: format!("{root}/{}", e.path),
                    },
                    |d, _| progress(base + d, total.max(base + d)),
                )
                .await?;
            base += done.bytes;
        }
        let links = only(&listing.entries, EntryKind::Symlink);
        if !links.is_empty() {
            self.place_tree(&to.node, &root, (None, None), PlaceStep::Links, &links)
                .await?;
        }
        let dirs = only(&listing.entries, EntryKind::Dir);
        self.place_tree(&to.node, &root, (None, None), PlaceStep::Settle, &dirs)
            .await?;
        copied.root = format!("{}:{root}", to.node);
        copied.bytes = base;
        Ok(copied)
    }
}
