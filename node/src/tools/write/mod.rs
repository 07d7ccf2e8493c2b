//! The Write tool: put a whole file on disk, atomically.
//!
//! The content goes to a temporary file beside the target (`.NAME.gsv-tmp-<uuid>`,
//! same directory, so the same file system), is flushed with `fsync`, and then
//! renamed over the target. A reader therefore sees the old file or the new one,
//! never half of either, and a failed write (disk full, permission denied, a crash)
//! leaves the old file as it was and removes the temporary one. Missing parent
//! directories are created.
//!
//! When a file is overwritten its permission bits are kept (and, where the node may,
//! its owner), and a symlink at the target is written through, not replaced. A
//! directory, device or other non-regular file at the target is refused. Renaming
//! gives the file a new inode, so hard links to the old file keep the old content.
//!
//! With `encoding: "base64"`, `content` is the file's bytes in base64 (any binary
//! file, byte for byte; at most 4 MiB; [`crate::tools::encoding`]).
//!
//! Result (`structuredContent`): `{"path": "<resolved absolute path>", "bytes": N}`.
//! Edit shares `write_atomic_at`.

pub mod on_host;

use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::encoding::{self, Encoding};
use crate::tools::output;
use crate::tools::paths::{AccessError, Parent, PathPolicy};
use gsv_protocol::file_mode::safe_mode;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::Serialize;
use serde_json::{json, Value};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write as _};

/// Longest part of the target's name kept in the temporary file's name, so the
/// temporary name stays under the usual 255-byte limit.
const TEMP_NAME_KEEP: usize = 100;

/// The Write tool.
#[derive(Default)]
pub struct Write {
    /// The far host the tool works on, or `None` for this machine.
    host: super::Host,
}

impl Write {
    /// Write on this machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Write on the host of an SSH- or container-backed node ([`on_host`]).
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        Write { host: Some(host) }
    }
}

/// Write's structured content: `{path, bytes}`.
#[derive(Debug, Serialize)]
pub struct WriteOutput {
    /// The file written, resolved (absolute).
    pub path: String,
    /// Bytes written: the whole new content.
    pub bytes: usize,
}

#[async_trait::async_trait]
impl Tool for Write {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Write".to_owned(),
            description: "Write a whole file, atomically, making missing directories; an \
                          existing file is replaced and keeps its permissions."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Relative to the workspace."
                    },
                    "content": {
                        "type": "string",
                        "description": "The new content."
                    },
                    "encoding": Encoding::schema("`content` is")
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            capability: Capability::FilesystemWrite.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Write file", false, true, true, false),
            default_timeout_ms: None,
            requires_bins: Vec::new(),
            requires_approval: false,
        }
    }

    async fn check(
        &self,
        _args: &Value,
        _ctx: &ToolContext,
    ) -> Result<(), gsv_protocol::ErrorShape> {
        crate::tools::host_ready(&self.host).await
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        if let Some(host) = &self.host {
            return on_host::OnHost::new(std::sync::Arc::clone(host))
                .execute(args, ctx)
                .await;
        }
        let (path, content) = match parse(&args) {
            Ok(parsed) => parsed,
            Err(message) => return ToolResult::error(format!("Write: {message}")),
        };
        let policy = PathPolicy::of(&ctx);
        match tokio::task::spawn_blocking(move || write(&policy, &path, &content)).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Write failed: {e}")),
        }
    }
}

pub(crate) fn parse(args: &Value) -> Result<(String, Vec<u8>), String> {
    let args = Args::new(args, &["path", "content", "encoding"])?;
    let path = args.required_str("path")?.to_owned();
    let content = args
        .str("content")?
        .ok_or("missing required argument \"content\"")?;
    let content = match Encoding::parse(args.str("encoding")?)? {
        Encoding::Utf8 => content.as_bytes().to_vec(),
        Encoding::Base64 => encoding::decode(content)?,
    };
    Ok((path, content))
}

/// Writes `content` to the file `arg` names (blocking).
fn write(policy: &PathPolicy, arg: &str, content: &[u8]) -> ToolResult {
    let parent = match policy.open_parent(arg) {
        Ok(parent) => parent,
        Err(AccessError::Io { path, source }) => {
            return ToolResult::error(describe_write_error(&path.display().to_string(), &source))
        }
        Err(e) => return e.into_result(),
    };
    let shown = parent.path.display().to_string();
    if let Err(message) = check_target(&parent) {
        return ToolResult::error(message);
    }
    if let Err(e) = write_atomic_at(&parent.dir, &parent.name, content) {
        return ToolResult::error(describe_write_error(&shown, &e));
    }
    written_result(shown, content.len())
}

/// The result of writing `bytes` bytes to `shown`.
pub(crate) fn written_result(shown: String, bytes: usize) -> ToolResult {
    output::with_text(
        format!("Wrote {bytes} bytes to {shown}"),
        &WriteOutput { path: shown, bytes },
    )
}

/// Refuses targets that are not (or would not become) regular files.
fn check_target(parent: &Parent) -> Result<(), String> {
    let Ok(st) = rustix::fs::statat(&parent.dir, &parent.name, AtFlags::empty()) else {
        return Ok(());
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Err(format!(
            "Is a directory, not a file: {} (Write only writes files)",
            parent.path.display()
        )),
        FileType::RegularFile => Ok(()),
        _ => Err(format!(
            "Not a regular file: {} (devices, sockets and pipes are not written)",
            parent.path.display()
        )),
    }
}

/// The message for a failed write of `shown`.
pub(crate) fn describe_write_error(shown: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => format!("Permission denied: {shown}"),
        io::ErrorKind::StorageFull => format!("Cannot write {shown}: the disk is full"),
        _ => format!("Cannot write {shown}: {e}"),
    }
}

/// Replaces the file `name` in the directory `dir` with `data` atomically (blocking):
/// temporary file in the same directory, `fsync`, rename, all relative to `dir`, so
/// nothing is resolved by path again. An existing file's permissions (and owner, when
/// allowed) are kept. On failure the temporary file is removed and the target untouched.
pub(crate) fn write_atomic_at(dir: &OwnedFd, name: &OsStr, data: &[u8]) -> io::Result<()> {
    write_atomic_with(dir, name, |file| file.write_all(data))
}

/// [`write_atomic_at`] with the content written by `fill` (tests inject failures here).
fn write_atomic_with(
    dir: &OwnedFd,
    name: &OsStr,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let existing = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .filter(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile);
    let temp = temp_name(name);
    let fd = rustix::fs::openat(
        dir,
        temp.as_os_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )?;
    let mut file = File::from(fd);
    let result = (|| {
        if let Some(st) = &existing {
            keep_owner_and_mode(&file, st)?;
        }
        fill(&mut file)?;
        file.sync_all()?;
        drop(file);
        rustix::fs::renameat(dir, temp.as_os_str(), dir, name)?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = rustix::fs::unlinkat(dir, temp.as_os_str(), AtFlags::empty());
        return Err(e);
    }
    // Make the rename itself durable; a failure here (an `O_PATH` descriptor of an
    // unreadable directory) does not undo the write.
    let _ = rustix::fs::fsync(dir);
    Ok(())
}

/// A fresh temporary name beside `name`.
fn temp_name(name: &OsStr) -> OsString {
    let name = name.to_string_lossy();
    let kept: String = name
        .char_indices()
        .take_while(|(i, c)| i + c.len_utf8() <= TEMP_NAME_KEEP)
        .map(|(_, c)| c)
        .collect();
    OsString::from(format!(".{kept}.gsv-tmp-{}", uuid::Uuid::new_v4().simple()))
}

fn keep_owner_and_mode(file: &File, st: &rustix::fs::Stat) -> io::Result<()> {
    // Only a privileged node can give the file back to another owner; elsewhere the
    // new file is the node's, as any editor's would be.
    let _ = rustix::fs::fchown(
        file,
        Some(rustix::fs::Uid::from_raw(st.st_uid)),
        Some(rustix::fs::Gid::from_raw(st.st_gid)),
    );
    rustix::fs::fchmod(file, Mode::from_raw_mode(safe_mode(st.st_mode, false)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".gsv-tmp-"))
            .collect()
    }

    fn open_dir(dir: &Path) -> OwnedFd {
        rustix::fs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    #[test]
    fn a_failed_write_leaves_the_original_and_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("keep.txt");
        fs::write(&target, "original").unwrap();
        let err = write_atomic_with(&open_dir(dir.path()), OsStr::new("keep.txt"), |file| {
            file.write_all(b"half of the new")?;
            Err(io::Error::new(io::ErrorKind::StorageFull, "no space"))
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(fs::read_to_string(&target).unwrap(), "original");
        assert!(leftovers(dir.path()).is_empty());
        assert_eq!(
            describe_write_error("f", &err),
            "Cannot write f: the disk is full"
        );
    }

    #[test]
    fn long_names_get_short_temp_names() {
        let dir = tempfile::tempdir().unwrap();
        let name = "é".repeat(120); // 240 bytes
        write_atomic_at(&open_dir(dir.path()), OsStr::new(&name), b"x").unwrap();
        assert_eq!(fs::read(dir.path().join(&name)).unwrap(), b"x");
        assert!(temp_name(OsStr::new(&name)).len() < 255);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn modes_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("script.sh");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o750)).unwrap();
        write_atomic_at(&open_dir(dir.path()), OsStr::new("script.sh"), b"new").unwrap();
        let mode = fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o750);
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    }

    #[tokio::test]
    async fn symlinks_are_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let policy = PathPolicy::new(dir.path(), false);
        let r = write(&policy, "link.txt", b"new");
        assert!(!r.is_error, "{}", r.joined_text());
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }
}
