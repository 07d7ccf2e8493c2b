//! The partial file of a `get`: written beside its target as
//! `.NAME.gsv-part-KEY-SIZE-MTIME`, where KEY names the node and remote path and SIZE
//! and MTIME the remote file as it was when the copy began. A later copy of the same
//! remote file finds it and resumes where it stops; a copy of a file that changed
//! since starts over.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Longest part of the target's name kept in the partial file's name.
const NAME_KEEP: usize = 100;

/// A partial file found beside the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub path: PathBuf,
    pub size: u64,
    pub mtime_ms: u64,
    /// Bytes it holds.
    pub len: u64,
}

/// The name every partial file of (`node`, `remote`) into `target` starts with.
fn prefix(target_name: &str, node: &str, remote: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(node.as_bytes());
    hasher.update([0]);
    hasher.update(remote.as_bytes());
    let key = hex::encode(&hasher.finalize()[..8]);
    let mut name = target_name;
    if name.len() > NAME_KEEP {
        let mut cut = NAME_KEEP;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name = &name[..cut];
    }
    format!(".{name}.gsv-part-{key}-")
}

/// The partial file for a copy of the remote file (`size`, `mtime_ms`) into `target`.
pub(crate) fn path_for(
    target: &Path,
    node: &str,
    remote: &str,
    size: u64,
    mtime_ms: u64,
) -> PathBuf {
    let name = target_name(target);
    let p = prefix(&name, node, remote);
    dir_of(target).join(format!("{p}{size}-{mtime_ms}"))
}

/// The partial files of earlier copies of (`node`, `remote`) into `target`.
pub(crate) fn find(target: &Path, node: &str, remote: &str) -> Vec<Found> {
    let name = target_name(target);
    let p = prefix(&name, node, remote);
    let Ok(entries) = std::fs::read_dir(dir_of(target)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&p)) else {
            continue;
        };
        let Some((size, mtime)) = rest.split_once('-') else {
            continue;
        };
        let (Ok(size), Ok(mtime_ms)) = (size.parse(), mtime.parse()) else {
            continue;
        };
        let Ok(md) = entry.metadata() else { continue };
        if md.is_file() {
            found.push(Found {
                path: entry.path(),
                size,
                mtime_ms,
                len: md.len(),
            });
        }
    }
    found
}

/// The directory a target is in (`.` for a bare name).
pub(crate) fn dir_of(target: &Path) -> &Path {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn target_name(target: &Path) -> String {
    target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_file_is_found_again_by_node_path_size_and_mtime() {
        let dir = std::env::temp_dir().join(format!("gsv-partial-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let target = dir.join("big.bin");
        let p = path_for(&target, "box", "data/big.bin", 100, 5);
        assert!(p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(".big.bin.gsv-part-") && n.ends_with("-100-5")));
        std::fs::write(&p, b"0123").expect("write");
        let found = find(&target, "box", "data/big.bin");
        assert_eq!(
            found,
            vec![Found {
                path: p.clone(),
                size: 100,
                mtime_ms: 5,
                len: 4
            }]
        );
        // Another node or path: not this copy's.
        assert!(find(&target, "nas", "data/big.bin").is_empty());
        assert!(find(&target, "box", "data/other.bin").is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_bare_name_is_in_the_current_directory() {
        assert_eq!(dir_of(Path::new("a.txt")), Path::new("."));
        assert_eq!(dir_of(Path::new("d/a.txt")), Path::new("d"));
    }
}
