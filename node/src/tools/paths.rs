//! Where a file tool's path argument points, and whether the tool may go there.
//!
//! Every file tool (Read, Write, Edit, Glob, Grep, and any later one) resolves and
//! opens its paths here, so the workspace rule and the protected files live in one
//! place:
//!
//! - **Not confined** (the default): relative paths are joined to the workspace,
//!   absolute ones are used as given (made absolute, `.` dropped, `..` left to the
//!   kernel). Nothing is refused but protected files (below).
//! - **Confined** (`gsv node --confine`, [`crate::NodeConfig::confine`]): the path is
//!   first canonicalised and checked by name, for a clear message: it must end up
//!   inside the canonical workspace. A path that does not exist yet (a Write target,
//!   a new directory) is checked through its nearest existing ancestor, and the
//!   missing rest may not contain `..` nor start at a dangling symlink. Then the
//!   file is *opened* relative to a descriptor of the workspace with
//!   `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` ([`crate::beneath`]), so a
//!   directory swapped for a symlink between the check and the open cannot lead out:
//!   the kernel refuses, and the tool reports the path as leading outside. Write and
//!   Edit open the parent directory that way (creating missing directories one
//!   `mkdirat` at a time beneath the workspace) and create, fill and rename their
//!   temporary file relative to that directory descriptor. On systems or kernels
//!   without `openat2` the open is by name and checked afterwards, which is racy.
//! - **Protected** ([`crate::protected`]), confined or not: after opening, the
//!   descriptor's device and inode and its real path are compared with the node's
//!   protected files (its data directory, the gateway's data directory and TLS key);
//!   Read, Write and Edit refuse them, Glob and Grep leave them out.
//!
//! fs_stat and fs_list look at entries without following them ([`Entry`]): through
//! their parent directory, opened by these same rules, and then by name only.
//!
//! Walks (Glob, Grep, fs_list) start from a checked directory, use [`WalkGuard`] on every
//! symlink they meet (a link inside the workspace that points outside is not
//! followed), skip protected directories, and open every file they report or read
//! through [`WalkAccess`], beneath the workspace when confined: a path whose file is
//! not beneath the workspace at that moment is left out.

mod entry;
mod named;
pub mod on_host;

pub use entry::Entry;

use crate::beneath::{self, BeneathError, Root};
use crate::protected::{data_dirs, Protected, Snapshot};
use crate::tool::ToolContext;
use crate::tools::output;
use gsv_protocol::ToolResult;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde::Serialize;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Why a file tool may not use a path, or could not open it.
#[derive(Debug, Error)]
pub enum AccessError {
    /// Outside the workspace of a confined node (the message says how).
    #[error("{0}")]
    Outside(String),
    /// Something changed under a confined path between its check and its open, and it
    /// now leads outside the workspace.
    #[error(
        "Refused: {path} leads outside the workspace {workspace} when opened (it changed \
         while being checked, or a symlink points out; this node is confined to its workspace)"
    )]
    Escaped { path: String, workspace: String },
    /// A protected file or directory (the node's or the gateway's data, the TLS key).
    #[error(
        "Refused: {path} is protected: the node's and the gateway's data directories and \
         the gateway's TLS key are never read or written by file tools"
    )]
    Protected { path: String },
    /// Not a regular file or a directory (a FIFO, a device, a socket): file tools and
    /// copies read and write files, and opening these can block or reach hardware.
    #[error(
        "Refused: {path} is a {kind}, not a regular file; file tools and copies only \
         open regular files and directories"
    )]
    Special { path: String, kind: &'static str },
    /// The path cannot be resolved or checked (the message says why).
    #[error("{0}")]
    Unresolvable(String),
    /// A directory on the way to a Write target could not be created.
    #[error("{}", describe_mkdir(.path, .source))]
    CreateDir { path: PathBuf, source: io::Error },
    /// The kernel's answer for `path` (not found, permission denied, ...).
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

fn describe_mkdir(path: &Path, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => format!(
            "Permission denied: cannot create the directory {}",
            path.display()
        ),
        _ => format!("Cannot create the directory {}: {e}", path.display()),
    }
}

impl AccessError {
    /// The stable code of a refusal (`denied`), `None` for other failures.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            AccessError::Outside(_)
            | AccessError::Escaped { .. }
            | AccessError::Protected { .. }
            | AccessError::Special { .. } => Some("denied"),
            _ => None,
        }
    }

    /// Why it was refused, next to the code: `outside_workspace` or `protected`.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            AccessError::Outside(_) | AccessError::Escaped { .. } => Some("outside_workspace"),
            AccessError::Protected { .. } => Some("protected"),
            AccessError::Special { .. } => Some("special_file"),
            _ => None,
        }
    }

    /// The error result of a tool call: the message, and for refusals
    /// `structuredContent: {"code": "denied", "reason": ...}` ([`Refusal`]).
    pub fn into_result(self) -> ToolResult {
        match (self.code(), self.reason()) {
            (Some(code), Some(reason)) => {
                output::error_with(self.to_string(), &Refusal { code, reason })
            }
            _ => ToolResult::error(self.to_string()),
        }
    }
}

/// The structured content of a refused file-tool call, so a client can tell a
/// refusal from other failures without reading the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// Always `denied` ([`AccessError::code`]).
    pub code: &'static str,
    /// `outside_workspace` or `protected` ([`AccessError::reason`]).
    pub reason: &'static str,
}

/// How path arguments are resolved for one call: the workspace, whether the tools
/// are confined to it, and what is protected. Cheap to clone and `Send`, so it moves
/// into blocking tasks.
#[derive(Debug, Clone)]
pub struct PathPolicy {
    workspace: PathBuf,
    confine: bool,
    protected: Arc<Protected>,
}

/// A file or directory opened for a tool, with the path it was asked for as.
#[derive(Debug)]
pub struct Opened {
    pub fd: OwnedFd,
    /// The resolved path (canonical when confined).
    pub path: PathBuf,
}

impl Opened {
    /// Where the opened file really is, as the kernel names it (every symlink
    /// resolved, `..` collapsed), and whether that is known: `(path, false)` where
    /// there is no `/proc` to ask.
    pub fn canonical(&self) -> (PathBuf, bool) {
        match beneath::real_path(&self.fd) {
            Some(p) => (p, true),
            None => (self.path.clone(), false),
        }
    }
}

/// The directory a Write or Edit target lives in, opened, and the target's name in it.
#[derive(Debug)]
pub struct Parent {
    /// The directory (read-only descriptor when allowed, so it can be `fsync`ed).
    pub dir: OwnedFd,
    /// The target's name in `dir`.
    pub name: OsString,
    /// The target's resolved path (canonical when confined).
    pub path: PathBuf,
}

impl Parent {
    /// Where the target really is: the opened directory as the kernel names it (every
    /// symlink resolved, `..` collapsed) joined with the target's name, and whether
    /// that is known: `(path, false)` where there is no `/proc` to ask.
    pub fn canonical(&self) -> (PathBuf, bool) {
        match beneath::real_path(&self.dir) {
            Some(d) => (d.join(&self.name), true),
            None => (self.path.clone(), false),
        }
    }
}

impl PathPolicy {
    pub fn new(workspace: impl Into<PathBuf>, confine: bool) -> Self {
        PathPolicy {
            workspace: workspace.into(),
            confine,
            protected: Arc::new(Protected::default()),
        }
    }

    /// The same policy, protecting `protected`.
    pub fn with_protected(mut self, protected: Arc<Protected>) -> Self {
        self.protected = protected;
        self
    }

    /// The policy of the call `ctx` describes.
    pub fn of(ctx: &ToolContext) -> Self {
        PathPolicy::new(ctx.workspace.clone(), ctx.confine)
            .with_protected(Arc::clone(&ctx.protected))
    }

    /// Whether paths are confined to the workspace.
    pub fn is_confined(&self) -> bool {
        self.confine
    }

    /// The path `arg` names, absolute. Blocking when confined (it reads the file
    /// system). This is a check by name, for messages: tools open through
    /// [`PathPolicy::open`] and friends, which enforce it.
    pub fn resolve(&self, arg: impl AsRef<Path>) -> Result<PathBuf, AccessError> {
        let arg = arg.as_ref();
        let joined = self.workspace.join(arg);
        let lexical = std::path::absolute(&joined).unwrap_or(joined);
        if !self.confine {
            return Ok(lexical);
        }
        let workspace = self.canonical_workspace()?;
        let shown = arg.display();
        let mut existing = lexical.clone();
        let mut missing: Vec<OsString> = Vec::new();
        let canonical = loop {
            match std::fs::canonicalize(&existing) {
                Ok(canonical) => break canonical,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if std::fs::symlink_metadata(&existing).is_ok() {
                        return Err(AccessError::Outside(format!(
                            "Refused: {} is a symlink whose target does not exist, so it cannot \
                             be checked against the workspace {} (this node is confined to its \
                             workspace)",
                            existing.display(),
                            workspace.display()
                        )));
                    }
                    match (existing.parent(), existing.file_name()) {
                        (Some(parent), Some(name)) => {
                            missing.push(name.to_owned());
                            existing = parent.to_path_buf();
                        }
                        _ => {
                            return Err(AccessError::Outside(format!(
                                "Refused: {shown} uses `..` after a directory that does not \
                                 exist; give a path inside the workspace {} (this node is \
                                 confined to its workspace)",
                                workspace.display()
                            )))
                        }
                    }
                }
                Err(e) => {
                    return Err(AccessError::Unresolvable(format!(
                        "Cannot resolve {}: {e}",
                        lexical.display()
                    )))
                }
            }
        };
        let mut resolved = canonical;
        resolved.extend(missing.iter().rev());
        if resolved.starts_with(&workspace) {
            return Ok(resolved);
        }
        let how = if lexical
            .components()
            .all(|c| !matches!(c, Component::ParentDir))
            && std::path::absolute(&self.workspace).is_ok_and(|ws| lexical.starts_with(ws))
        {
            " through a symlink"
        } else {
            ""
        };
        Err(AccessError::Outside(format!(
            "Refused: {shown} resolves{how} to {}, outside the workspace {} (this node is \
             confined to its workspace)",
            resolved.display(),
            workspace.display()
        )))
    }

    /// Opens what `arg` names with `flags` (following symlinks; beneath the workspace
    /// when confined) and refuses it if it is protected (blocking). Unless `flags`
    /// asks for `O_PATH` (a look at the entry, nothing read), the open never blocks
    /// (`O_NONBLOCK`: a FIFO with no writer cannot strand the thread), never takes a
    /// controlling terminal, and anything but a regular file or a directory is
    /// refused ([`AccessError::Special`]).
    pub fn open(&self, arg: impl AsRef<Path>, flags: OFlags) -> Result<Opened, AccessError> {
        let path = self.resolve(arg)?;
        let reads = !flags.contains(OFlags::PATH);
        let flags = if reads {
            flags | OFlags::NONBLOCK | OFlags::NOCTTY
        } else {
            flags
        };
        let snapshot = self.protected.snapshot();
        let fd =
            match self.root()? {
                Some(root) => {
                    let relative = root.relative(&path).ok_or_else(|| self.escaped(&path))?;
                    root.open_beneath(relative, flags, Mode::empty())
                        .map_err(|e| self.beneath_error(&path, e))?
                }
                None => rustix::fs::open(&path, flags | OFlags::CLOEXEC, Mode::empty()).map_err(
                    |e| AccessError::Io {
                        path: path.clone(),
                        source: e.into(),
                    },
                )?,
            };
        if snapshot.covers_fd(&fd) {
            return Err(self.protected_error(&path));
        }
        if reads {
            refuse_special(&fd, &path)?;
        }
        Ok(Opened { fd, path })
    }

    /// Opens the directory a file `arg` names would live in, creating missing
    /// directories (beneath the workspace when confined), and refuses it when the
    /// directory or an existing target is protected (blocking). A symlink at the
    /// target is resolved, so the file it points to is the one replaced.
    pub fn open_parent(&self, arg: impl AsRef<Path>) -> Result<Parent, AccessError> {
        let path = self.resolve(arg)?;
        let path = if self.confine {
            path
        } else {
            follow_symlink(&path)
        };
        let (Some(dir_path), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(AccessError::Io {
                path: path.clone(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the path does not name a file in a directory",
                ),
            });
        };
        if data_dirs::refuses_new_name(name) {
            return Err(self.protected_error(&path));
        }
        let snapshot = self.protected.snapshot();
        let dir = match self.root()? {
            Some(root) => {
                let relative = root.relative(dir_path).ok_or_else(|| self.escaped(&path))?;
                self.open_dir_creating(root.fd(), root.path(), relative, true, &snapshot, &path)?
            }
            None => {
                let slash = Path::new("/");
                let top = rustix::fs::open(
                    slash,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| AccessError::Io {
                    path: slash.to_path_buf(),
                    source: e.into(),
                })?;
                let relative = dir_path.strip_prefix(slash).unwrap_or(dir_path);
                self.open_dir_creating(&top, slash, relative, false, &snapshot, &path)?
            }
        };
        if snapshot.covers_fd(&dir) {
            return Err(self.protected_error(&path));
        }
        if let Ok(st) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            if snapshot.covers_id(st.st_dev, st.st_ino) {
                return Err(self.protected_error(&path));
            }
        }
        Ok(Parent {
            dir,
            name: name.to_owned(),
            path,
        })
    }

    /// Opens `relative` below `base` as a directory, creating what is missing one
    /// component at a time (never inside a protected directory).
    fn open_dir_creating(
        &self,
        base: &OwnedFd,
        base_path: &Path,
        relative: &Path,
        beneath: bool,
        snapshot: &Snapshot,
        target: &Path,
    ) -> Result<OwnedFd, AccessError> {
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        let open = |at: &OwnedFd, at_path: &Path, p: &Path| -> Result<OwnedFd, BeneathError> {
            if beneath {
                beneath::open_beneath_fd(at, at_path, p, flags, Mode::empty())
            } else {
                let p = if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                };
                rustix::fs::openat(at, p, flags | OFlags::CLOEXEC, Mode::empty())
                    .map_err(|e| BeneathError::Io(e.into()))
            }
        };
        // A file where a directory should be: the directory cannot be created.
        let create_error = |e: BeneathError| match e {
            BeneathError::Io(io) if io.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) => {
                AccessError::CreateDir {
                    path: base_path.join(relative),
                    source: io,
                }
            }
            e => self.beneath_error(&base_path.join(relative), e),
        };
        let found = match open(base, base_path, relative) {
            Ok(fd) => fd,
            Err(e) if beneath::is_not_found(&e) => {
                let mut cur = open(base, base_path, Path::new(""))
                    .map_err(|e| self.beneath_error(base_path, e))?;
                let mut cur_path = base_path.to_path_buf();
                for component in relative.components() {
                    let name: &OsStr = match component {
                        Component::CurDir => continue,
                        other => other.as_os_str(),
                    };
                    let next = cur_path.join(name);
                    cur = match open(&cur, &cur_path, Path::new(name)) {
                        Ok(fd) => fd,
                        Err(e) if beneath::is_not_found(&e) => {
                            if snapshot.covers_fd(&cur) || data_dirs::refuses_new_name(name) {
                                return Err(self.protected_error(target));
                            }
                            match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o775)) {
                                Ok(()) | Err(Errno::EXIST) => {}
                                Err(e) => {
                                    return Err(AccessError::CreateDir {
                                        path: next,
                                        source: e.into(),
                                    })
                                }
                            }
                            open(&cur, &cur_path, Path::new(name))
                                .map_err(|e| self.beneath_error(&next, e))?
                        }
                        Err(e) => return Err(create_error(e)),
                    };
                    cur_path = next;
                }
                cur
            }
            Err(e) => return Err(create_error(e)),
        };
        // A readable descriptor, so the rename can be made durable; `O_PATH` will do
        // where the directory is not readable.
        match rustix::fs::openat(
            &found,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(fd),
            Err(_) => Ok(found),
        }
    }

    /// What a walk (Glob, Grep) opens its files and checks its directories with.
    pub fn walk_access(&self) -> Result<WalkAccess, AccessError> {
        Ok(WalkAccess {
            root: self.root()?.map(Arc::new),
            snapshot: Arc::new(self.protected.snapshot()),
        })
    }

    /// What a walk checks its symlinks with: `None` when not confined.
    pub fn walk_guard(&self) -> Result<Option<WalkGuard>, AccessError> {
        if !self.confine {
            return Ok(None);
        }
        Ok(Some(WalkGuard {
            root: self.canonical_workspace()?,
        }))
    }

    /// What is protected now, for code that goes on below a directory it opened
    /// through these rules by itself (directory copies, `transfer.list`/`place`).
    pub(crate) fn protected_snapshot(&self) -> Snapshot {
        self.protected.snapshot()
    }

    /// The workspace opened as the root to resolve beneath, when confined.
    fn root(&self) -> Result<Option<Root>, AccessError> {
        if !self.confine {
            return Ok(None);
        }
        let canonical = self.canonical_workspace()?;
        Root::open(&canonical).map(Some).map_err(|e| {
            AccessError::Unresolvable(format!(
                "The workspace {} cannot be opened ({e}), and this node is confined to it",
                canonical.display()
            ))
        })
    }

    fn canonical_workspace(&self) -> Result<PathBuf, AccessError> {
        std::fs::canonicalize(&self.workspace).map_err(|e| {
            AccessError::Unresolvable(format!(
                "The workspace {} cannot be resolved ({e}), and this node is confined to it",
                self.workspace.display()
            ))
        })
    }

    /// The refusal for a confined path that leads outside when opened.
    pub(crate) fn escaped(&self, path: &Path) -> AccessError {
        AccessError::Escaped {
            path: path.display().to_string(),
            workspace: self.workspace.display().to_string(),
        }
    }

    fn protected_error(&self, path: &Path) -> AccessError {
        AccessError::Protected {
            path: path.display().to_string(),
        }
    }

    fn beneath_error(&self, path: &Path, e: BeneathError) -> AccessError {
        match e {
            BeneathError::Escapes => self.escaped(path),
            BeneathError::Io(source) => AccessError::Io {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

/// Refuses a descriptor that is neither a regular file nor a directory.
pub(crate) fn refuse_special(fd: &OwnedFd, path: &Path) -> Result<(), AccessError> {
    use rustix::fs::FileType;
    let st = rustix::fs::fstat(fd).map_err(|e| AccessError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile | FileType::Directory => return Ok(()),
        FileType::Fifo => "FIFO",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Socket => "socket",
        _ => "special file",
    };
    Err(AccessError::Special {
        path: path.display().to_string(),
        kind,
    })
}

/// The file a symlink at `target` points to (so the link survives a Write), else
/// `target`.
fn follow_symlink(target: &Path) -> PathBuf {
    match std::fs::symlink_metadata(target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf())
        }
        _ => target.to_path_buf(),
    }
}

/// How a walk (Glob, Grep) opens the files it meets: beneath the workspace when
/// confined, and never a protected one. Cheap to clone into walker threads.
#[derive(Debug, Clone)]
pub struct WalkAccess {
    root: Option<Arc<Root>>,
    snapshot: Arc<Snapshot>,
}

impl WalkAccess {
    /// Opens `path` (following symlinks) with `flags`; `None` when it is not beneath
    /// the workspace (confined), is protected, or cannot be opened. `via_symlink`
    /// says whether the walk reached it through a symlink: only then can it lie in a
    /// protected directory the walk did not enter, so only then is its real path
    /// checked as well as its device and inode (which keeps walks cheap).
    pub fn open(&self, path: &Path, flags: OFlags, via_symlink: bool) -> Option<OwnedFd> {
        let fd = self.open_unchecked(path, flags).ok()?;
        let protected = if via_symlink {
            self.snapshot.covers_fd(&fd)
        } else {
            rustix::fs::fstat(&fd).map_or(true, |st| {
                self.snapshot.covers_walk_file(path, st.st_dev, st.st_ino)
            })
        };
        (!protected).then_some(fd)
    }

    /// What a walk lists at `path` (following a symlink; a dangling one, unconfined,
    /// as itself): `None` when it is not beneath the workspace at this moment
    /// (confined: opened `O_PATH` beneath it), is protected, or is gone.
    pub fn listing(&self, path: &Path, is_symlink: bool) -> Option<rustix::fs::Stat> {
        if self.root.is_some() {
            let fd = self.open(path, OFlags::PATH, is_symlink)?;
            return rustix::fs::fstat(&fd).ok();
        }
        let st = match rustix::fs::stat(path) {
            Ok(st) => st,
            Err(Errno::NOENT) if is_symlink => rustix::fs::lstat(path).ok()?,
            Err(_) => return None,
        };
        if self.snapshot.covers_walk_file(path, st.st_dev, st.st_ino) {
            return None;
        }
        if is_symlink
            && std::fs::canonicalize(path).is_ok_and(|real| {
                self.snapshot.covers_real_path(&real) || data_dirs::is_gsv_path(&real)
            })
        {
            return None;
        }
        Some(st)
    }

    /// [`WalkAccess::open`] that reports why it failed, without the protected check.
    pub fn open_unchecked(&self, path: &Path, flags: OFlags) -> Result<OwnedFd, BeneathError> {
        match &self.root {
            Some(root) => {
                let relative = root.relative(path).ok_or(BeneathError::Escapes)?;
                root.open_beneath(relative, flags, Mode::empty())
            }
            None => rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::empty())
                .map_err(|e| BeneathError::Io(e.into())),
        }
    }

    /// Where a walk starts: `Ok(None)` when `path` is protected (the walk then finds
    /// nothing), else what `path` is (following symlinks).
    pub fn base(&self, path: &Path) -> Result<Option<rustix::fs::Stat>, BeneathError> {
        let fd = self.open_unchecked(path, OFlags::PATH)?;
        if self.snapshot.covers_fd(&fd) {
            return Ok(None);
        }
        rustix::fs::fstat(&fd)
            .map(Some)
            .map_err(|e| BeneathError::Io(e.into()))
    }

    /// Whether a directory met in a walk at `path` is protected, so the walk must not
    /// enter it: by device and inode, and, when it was reached through a symlink, by
    /// its real path too (a directory made in a protected one after the snapshot).
    pub fn skips_dir(&self, path: &Path, meta: &std::fs::Metadata, via_symlink: bool) -> bool {
        self.snapshot.covers_walk_dir(path, meta)
            || (via_symlink
                && std::fs::canonicalize(path).is_ok_and(|real| {
                    self.snapshot.covers_real_path(&real) || data_dirs::is_gsv_path(&real)
                }))
    }

    /// Whether the walk is confined.
    pub fn is_confined(&self) -> bool {
        self.root.is_some()
    }
}

/// Checks paths met during a confined walk.
#[derive(Debug, Clone)]
pub struct WalkGuard {
    root: PathBuf,
}

impl WalkGuard {
    /// Whether `path` (typically a symlink) resolves to somewhere inside the
    /// workspace. Paths that cannot be resolved (dangling links) are not allowed.
    pub fn allows(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|real| real.starts_with(&self.root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::write(ws.join("sub/a.txt"), "a").unwrap();
        fs::write(tmp.path().join("outside.txt"), "o").unwrap();
        (tmp, ws)
    }

    #[test]
    fn refusals_carry_code_and_reason() {
        let structured = |e: AccessError| {
            let r = e.into_result();
            assert!(r.is_error);
            r.structured_content
        };
        assert_eq!(
            structured(AccessError::Outside("Refused: out".to_owned())),
            Some(serde_json::json!({"code": "denied", "reason": "outside_workspace"}))
        );
        assert_eq!(
            structured(AccessError::Escaped {
                path: "a".to_owned(),
                workspace: "/ws".to_owned()
            }),
            Some(serde_json::json!({"code": "denied", "reason": "outside_workspace"}))
        );
        assert_eq!(
            structured(AccessError::Protected {
                path: "/data".to_owned()
            }),
            Some(serde_json::json!({"code": "denied", "reason": "protected"}))
        );
        assert_eq!(
            structured(AccessError::Unresolvable("bad".to_owned())),
            None
        );
        assert_eq!(
            structured(AccessError::Io {
                path: PathBuf::from("/x"),
                source: io::Error::from(io::ErrorKind::NotFound)
            }),
            None
        );
    }

    #[test]
    fn unconfined_paths_are_lexical() {
        let p = PathPolicy::new("/srv/ws", false);
        assert_eq!(p.resolve("a/b").unwrap(), Path::new("/srv/ws/a/b"));
        assert_eq!(p.resolve("../x").unwrap(), Path::new("/srv/ws/../x"));
        assert_eq!(p.resolve("/etc/hosts").unwrap(), Path::new("/etc/hosts"));
        assert!(p.walk_guard().unwrap().is_none());
    }

    #[test]
    fn confined_paths_inside_are_canonical() {
        let (_tmp, ws) = setup();
        let real = fs::canonicalize(&ws).unwrap();
        let p = PathPolicy::new(&ws, true);
        assert_eq!(p.resolve("sub/a.txt").unwrap(), real.join("sub/a.txt"));
        assert_eq!(
            p.resolve("sub/../sub/a.txt").unwrap(),
            real.join("sub/a.txt")
        );
        assert_eq!(p.resolve(".").unwrap(), real);
        assert_eq!(
            p.resolve("new/dir/f.txt").unwrap(),
            real.join("new/dir/f.txt")
        );
        // A symlink inside pointing inside is fine and resolved.
        symlink(ws.join("sub"), ws.join("alias")).unwrap();
        assert_eq!(p.resolve("alias/a.txt").unwrap(), real.join("sub/a.txt"));
    }

    #[test]
    fn confined_escapes_are_refused() {
        let (tmp, ws) = setup();
        let p = PathPolicy::new(&ws, true);
        let err = p.resolve("../outside.txt").unwrap_err().to_string();
        assert!(err.contains("outside the workspace"), "{err}");
        assert!(err.contains("../outside.txt"), "{err}");
        assert!(p
            .resolve("../x")
            .unwrap_err()
            .to_string()
            .contains("outside"));
        assert!(p
            .resolve("/etc/hosts")
            .unwrap_err()
            .to_string()
            .contains("outside"));
        assert!(p
            .resolve("nope/../../x")
            .unwrap_err()
            .to_string()
            .contains("`..`"));
        symlink("/etc", ws.join("etc")).unwrap();
        let err = p.resolve("etc/hosts").unwrap_err().to_string();
        assert!(err.contains("through a symlink"), "{err}");
        assert!(p
            .resolve("etc/new-file")
            .unwrap_err()
            .to_string()
            .contains("outside"));
        symlink(tmp.path().join("gone"), ws.join("dangling")).unwrap();
        assert!(p
            .resolve("dangling")
            .unwrap_err()
            .to_string()
            .contains("symlink"));
        assert!(p
            .resolve("dangling/x")
            .unwrap_err()
            .to_string()
            .contains("symlink"));
        let guard = p.walk_guard().unwrap().unwrap();
        assert!(!guard.allows(&ws.join("etc")));
        assert!(guard.allows(&ws.join("sub")));
        assert!(!guard.allows(&ws.join("dangling")));
    }

    #[test]
    fn missing_workspace_is_an_error_when_confined() {
        let p = PathPolicy::new("/definitely/not/here", true);
        assert!(p
            .resolve("a")
            .unwrap_err()
            .to_string()
            .contains("workspace"));
        assert!(p.walk_guard().is_err());
    }
}
