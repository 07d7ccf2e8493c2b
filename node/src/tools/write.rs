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
//! Result (`structuredContent`): `{"path": "<resolved absolute path>", "bytes": N}`.
//! Edit shares [`write_atomic`].

use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::paths::PathPolicy;
use gsv_protocol::{Capability, ContentBlock, ToolAnnotations, ToolDef, ToolResult};
use serde_json::{json, Value};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Longest part of the target's name kept in the temporary file's name, so the
/// temporary name stays under the usual 255-byte limit.
const TEMP_NAME_KEEP: usize = 100;

/// The Write tool.
pub struct Write;

#[async_trait::async_trait]
impl Tool for Write {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Write".to_owned(),
            description: "Write a file on this node, replacing it if it exists. The write is \
                          atomic (a temporary file renamed into place), missing parent \
                          directories are created, and an existing file keeps its permissions. \
                          Relative paths resolve against the node's workspace."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Path to the file; relative paths resolve against the node's workspace."
                    },
                    "content": {
                        "type": "string",
                        "description": "The whole new content of the file."
                    }
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            capability: Capability::FilesystemWrite.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Write file", false, true, true, false),
            default_timeout_ms: None,
            requires_bins: Vec::new(),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let (path, content) = match parse(&args) {
            Ok(parsed) => parsed,
            Err(message) => return ToolResult::error(format!("Write: {message}")),
        };
        let policy = PathPolicy::of(&ctx);
        match tokio::task::spawn_blocking(move || write(&policy, &path, content.as_bytes())).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Write failed: {e}")),
        }
    }
}

fn parse(args: &Value) -> Result<(String, String), String> {
    let args = Args::new(args, &["path", "content"])?;
    let path = args.required_str("path")?.to_owned();
    let content = args
        .str("content")?
        .ok_or("missing required argument \"content\"")?
        .to_owned();
    Ok((path, content))
}

/// Writes `content` to the file `arg` names (blocking).
fn write(policy: &PathPolicy, arg: &str, content: &[u8]) -> ToolResult {
    let path = match policy.resolve(arg) {
        Ok(path) => path,
        Err(message) => return ToolResult::error(message),
    };
    let shown = path.display().to_string();
    if let Err(message) = check_target(&path) {
        return ToolResult::error(message);
    }
    if let Some(parent) = path.parent() {
        if let Err(e) = fs::create_dir_all(parent) {
            return ToolResult::error(match e.kind() {
                io::ErrorKind::PermissionDenied => format!(
                    "Permission denied: cannot create the directory {}",
                    parent.display()
                ),
                _ => format!("Cannot create the directory {}: {e}", parent.display()),
            });
        }
    }
    if let Err(e) = write_atomic(&path, content) {
        return ToolResult::error(describe_write_error(&shown, &e));
    }
    let bytes = content.len();
    ToolResult {
        content: vec![ContentBlock::Text {
            text: format!("Wrote {bytes} bytes to {shown}"),
        }],
        structured_content: Some(json!({ "path": shown, "bytes": bytes })),
        is_error: false,
    }
}

/// Refuses targets that are not (or would not become) regular files.
fn check_target(path: &Path) -> Result<(), String> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(format!(
            "Is a directory, not a file: {} (Write only writes files)",
            path.display()
        )),
        Ok(meta) if !meta.is_file() => Err(format!(
            "Not a regular file: {} (devices, sockets and pipes are not written)",
            path.display()
        )),
        _ => Ok(()),
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

/// Replaces the file at `target` with `data` atomically (blocking): temporary file in
/// the same directory, `fsync`, rename. The parent directory must exist. An existing
/// file's permissions (and owner, when allowed) are kept; a symlink at `target` is
/// written through. On failure the temporary file is removed and `target` untouched.
pub(crate) fn write_atomic(target: &Path, data: &[u8]) -> io::Result<()> {
    write_atomic_with(target, |file| file.write_all(data))
}

/// [`write_atomic`] with the content written by `fill` (tests inject failures here).
fn write_atomic_with(
    target: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let target = follow_symlink(target);
    let existing = fs::metadata(&target).ok().filter(|m| m.is_file());
    let (dir, temp) = temp_path(&target)?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    let result = (|| {
        if let Some(meta) = &existing {
            keep_owner_and_mode(&file, meta)?;
        }
        fill(&mut file)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, &target)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    // Make the rename itself durable; a failure here does not undo the write.
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// The file a symlink at `target` points to (so the link survives), else `target`.
fn follow_symlink(target: &Path) -> PathBuf {
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf())
        }
        _ => target.to_path_buf(),
    }
}

/// The directory of `target` and a fresh temporary path beside it.
fn temp_path(target: &Path) -> io::Result<(&Path, PathBuf)> {
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path does not name a file in a directory",
        )
    };
    let dir = target.parent().ok_or_else(invalid)?;
    let name = target.file_name().ok_or_else(invalid)?.to_string_lossy();
    let kept: String = name
        .char_indices()
        .take_while(|(i, c)| i + c.len_utf8() <= TEMP_NAME_KEEP)
        .map(|(_, c)| c)
        .collect();
    let temp = dir.join(format!(".{kept}.gsv-tmp-{}", uuid::Uuid::new_v4().simple()));
    Ok((dir, temp))
}

#[cfg(unix)]
fn keep_owner_and_mode(file: &File, meta: &fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // Only a privileged node can give the file back to another owner; elsewhere the
    // new file is the node's, as any editor's would be.
    let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
    file.set_permissions(meta.permissions())
}

#[cfg(not(unix))]
fn keep_owner_and_mode(file: &File, meta: &fs::Metadata) -> io::Result<()> {
    file.set_permissions(meta.permissions())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".gsv-tmp-"))
            .collect()
    }

    #[test]
    fn a_failed_write_leaves_the_original_and_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("keep.txt");
        fs::write(&target, "original").unwrap();
        let err = write_atomic_with(&target, |file| {
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
        let target = dir.path().join(&name);
        write_atomic(&target, b"x").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"x");
        let (_, temp) = temp_path(&target).unwrap();
        assert!(temp.file_name().unwrap().len() < 255);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn symlinks_are_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }
}
