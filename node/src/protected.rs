//! The files no file tool may touch, whatever `--confine` says.
//!
//! A node always protects its own data directory (`--data`, which holds
//! `node-<ID>.credential`) and whatever else it is given (`gsv node --protect PATH`; the
//! gateway's data directory and TLS key under `gsv up`; the default gateway data
//! directory of the node's user when it exists). Read, Write and Edit refuse such a
//! file; Glob and Grep leave it out silently.
//!
//! The check is made on what was *opened*, not on the name asked for, so `..`,
//! symlinks, hard links and case-insensitive spellings do not get around it:
//!
//! - at check time a [`Snapshot`] records the device and inode of every protected
//!   file and directory (each protected directory's tree, read again for every call,
//!   since token files are replaced atomically and so change inode);
//! - an opened descriptor is refused when its device and inode are in the snapshot
//!   (a hard link elsewhere, another spelling of the name), or when the kernel's name
//!   for it (`/proc/self/fd/N`) lies inside a protected directory (a file created
//!   there after the snapshot).
//!
//! Walks (Glob, Grep) do not enter protected directories (device and inode, plus the
//! real path for a directory reached through a symlink) and check every file by
//! device and inode, and by real path too when the file itself is a symlink
//! ([`crate::tools::paths::WalkAccess`]): what lies below a directory the walk did
//! not enter cannot be reached without a symlink, and skipping the `/proc` lookup
//! for the rest keeps walks as cheap as before.
//!
//! Beyond what was configured, every snapshot also covers, for every node and
//! confined or not: gsv's own process state on procfs ([`own_processes`]: this
//! process, its threads and ancestors, any process of the same executable,
//! `/proc/kcore`), and every gsv data directory and secret file on the host
//! ([`data_dirs`]: the marker every gsv process leaves in its data directory, and
//! the names gsv gives its secret files).
//!
//! Not covered: a protected file copied elsewhere (a copy is a different file); a file
//! created in a protected directory after a call's snapshot and hard-linked elsewhere
//! before that call opens the link (the window is one call); and, without `/proc`, a
//! file created in a protected directory after the snapshot and reached by a symlink.

pub mod data_dirs;
pub mod own_processes;

use rustix::fd::AsFd;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Most entries read from one protected directory tree per snapshot (a data
/// directory holds a handful; this bounds a directory someone pointed `--protect` at).
const MAX_ENTRIES: usize = 10_000;

/// The protected paths of a node, as configured (files or directories).
#[derive(Debug, Clone, Default)]
pub struct Protected {
    paths: Vec<PathBuf>,
}

impl Protected {
    /// Protects `paths` (made absolute; duplicates and missing ones are fine).
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut out: Vec<PathBuf> = Vec::new();
        for p in paths {
            let p = std::path::absolute(&p).unwrap_or(p);
            if !out.contains(&p) {
                out.push(p);
            }
        }
        Protected { paths: out }
    }

    /// The configured paths.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// What is protected right now (blocking: reads the protected trees).
    pub fn snapshot(&self) -> Snapshot {
        use std::os::unix::fs::MetadataExt;
        let mut snap = Snapshot {
            proc_dev: std::fs::metadata("/proc").ok().map(|m| m.dev()),
            ..Snapshot::default()
        };
        for path in &self.paths {
            let Ok(real) = std::fs::canonicalize(path) else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(&real) else {
                continue;
            };
            snap.insert(&meta);
            if meta.is_dir() {
                snap.add_tree(&real);
            }
            snap.roots.push(real);
        }
        snap
    }
}

/// The protected files and directories at one moment.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// `(device, inode)` of every protected file and directory.
    ids: HashSet<(u64, u64)>,
    /// Canonical paths of the protected files and directories.
    roots: Vec<PathBuf>,
    /// The device of the procfs mounted at `/proc`, for walks (which see metadata,
    /// not descriptors).
    proc_dev: Option<u64>,
}

impl Snapshot {
    fn insert(&mut self, meta: &std::fs::Metadata) {
        use std::os::unix::fs::MetadataExt;
        self.ids.insert((meta.dev(), meta.ino()));
    }

    /// Adds everything below `dir` (without following symlinks), bounded.
    fn add_tree(&mut self, dir: &Path) {
        let mut stack = vec![dir.to_path_buf()];
        let mut seen = 0usize;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > MAX_ENTRIES {
                    tracing::warn!(dir = %dir.display(), "protected directory too large to list fully; hard links to files beyond the first {MAX_ENTRIES} are not recognised");
                    return;
                }
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                if meta.file_type().is_symlink() {
                    continue;
                }
                self.insert(&meta);
                if meta.is_dir() {
                    stack.push(entry.path());
                }
            }
        }
    }

    /// Whether no path was configured (gsv's own processes and data directories
    /// are covered all the same).
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// Whether `(dev, ino)` is a protected file or directory.
    pub fn covers_id(&self, dev: u64, ino: u64) -> bool {
        self.ids.contains(&(dev, ino))
    }

    /// Whether the file `st` describes is protected (by device and inode).
    pub fn covers_stat(&self, st: &rustix::fs::Stat) -> bool {
        self.covers_id(st.st_dev, st.st_ino)
    }

    /// Whether the path `real` (canonical) is a protected path or inside one.
    pub fn covers_real_path(&self, real: &Path) -> bool {
        self.roots.iter().any(|r| real.starts_with(r))
    }

    /// Whether the open descriptor `fd` is, or is inside, something protected: a
    /// configured path, gsv's own process state on procfs, a gsv data directory or
    /// secret file anywhere on the host.
    pub fn covers_fd(&self, fd: &impl AsFd) -> bool {
        match rustix::fs::fstat(fd) {
            Ok(st) if self.covers_id(st.st_dev, st.st_ino) => return true,
            Ok(_) => {}
            // A descriptor that cannot be inspected is not let through.
            Err(_) => return true,
        }
        let on_proc =
            rustix::fs::fstatfs(fd).map_or(true, |fs| fs.f_type == rustix::fs::PROC_SUPER_MAGIC);
        match crate::beneath::real_path(fd) {
            Some(real) if on_proc => own_processes::is_own_proc_path(&real),
            Some(real) => self.covers_real_path(&real) || data_dirs::is_gsv_path(&real),
            // procfs names every file it has; one without a name is not let through.
            None => on_proc,
        }
    }

    /// Whether a file a walk met at `path` (with metadata `st_dev`, `st_ino`) is
    /// protected: by device and inode, by its name (gsv's secret files), and on procfs
    /// by the process it belongs to.
    pub fn covers_walk_file(&self, path: &Path, dev: u64, ino: u64) -> bool {
        self.covers_id(dev, ino)
            || data_dirs::has_secret_name(path)
            || (self.proc_dev == Some(dev) && self.covers_proc(path))
    }

    /// Whether a walk must not enter the directory at `path` (metadata `meta`): a
    /// protected one by device and inode, a gsv data directory (it holds the marker),
    /// or gsv's own process directory on procfs.
    pub fn covers_walk_dir(&self, path: &Path, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.covers_id(meta.dev(), meta.ino())
            || data_dirs::holds_marker(path)
            || (self.proc_dev == Some(meta.dev()) && self.covers_proc(path))
    }

    /// Whether `path` on procfs is gsv's own process state (unresolvable: yes).
    fn covers_proc(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).map_or(true, |real| own_processes::is_own_proc_path(&real))
    }

    /// Whether `metadata` (of a file or directory met in a walk) is protected by
    /// device and inode.
    pub fn covers_meta(&self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.covers_id(meta.dev(), meta.ino())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn files_dirs_hard_links_and_new_files_are_covered() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        fs::create_dir_all(data.join("sub")).unwrap();
        fs::write(data.join("admin.token"), "secret").unwrap();
        fs::write(data.join("sub/deep"), "deep").unwrap();
        let key = tmp.path().join("key.pem");
        fs::write(&key, "key").unwrap();
        fs::write(tmp.path().join("free.txt"), "free").unwrap();
        fs::hard_link(data.join("admin.token"), tmp.path().join("link")).unwrap();
        let p = Protected::new([data.clone(), key.clone(), tmp.path().join("missing")]);
        let snap = p.snapshot();
        let open = |p: &Path| fs::File::open(p).unwrap();
        assert!(snap.covers_fd(&open(&data.join("admin.token"))));
        assert!(snap.covers_fd(&open(&data.join("sub/deep"))));
        assert!(snap.covers_fd(&open(&data)));
        assert!(snap.covers_fd(&open(&key)));
        assert!(snap.covers_fd(&open(&tmp.path().join("link"))));
        assert!(!snap.covers_fd(&open(&tmp.path().join("free.txt"))));
        assert!(!snap.covers_fd(&open(tmp.path())));
        // Created after the snapshot: caught by where it is.
        fs::write(data.join("new.token"), "n").unwrap();
        assert!(snap.covers_fd(&open(&data.join("new.token"))));
        assert!(Protected::default().snapshot().is_empty());
    }
}
