//! The fs_stat tool: what a path is, without reading it — kind, size, modification
//! time, permission bits, owner, symlink target and MIME type.
//!
//! It describes the entry itself, like `stat` (lstat): a symlink is reported as a
//! symlink with its target as written (`linkTarget`), not followed; stat the target
//! to learn about it. The MIME type comes from the file's first 8 KiB (magic bytes
//! with `infer`, else text or binary; see [`crate::tools::file_info::mime_of`]).
//!
//! It goes through the same path rules as Read ([`crate::tools::paths`]): confined to
//! the workspace with `--confine` (the entry's directory must be inside it; a link
//! pointing out is shown as a link and never followed) and refusing protected files,
//! so it tells a limited token nothing Read and Glob would not.
//!
//! Result (`structuredContent`): `{path, kind, size, mtime, mode, linkTarget?, owner:
//! {uid, gid, user?, group?}, mime}` ([`FsStatOutput`]).

pub mod on_host;

use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::file_info::{mime_of, FileInfo};
use crate::tools::output;
use crate::tools::paths::{AccessError, PathPolicy};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use nix::unistd::{Gid, Group, Uid, User};
use serde::Serialize;
use serde_json::{json, Value};

/// The fs_stat tool.
#[derive(Default)]
pub struct FsStat {
    /// The far host the tool works on, or `None` for this machine.
    host: super::Host,
}

impl FsStat {
    /// FsStat on this machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// FsStat on the host of an SSH- or container-backed node ([`on_host`]).
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        FsStat { host: Some(host) }
    }
}

/// fs_stat's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStatOutput {
    /// The entry, resolved (absolute; its directory canonical when confined).
    pub path: String,
    #[serde(flatten)]
    pub info: FileInfo,
    pub owner: Owner,
    /// MIME type; absent when a regular file could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
}

/// Who owns an entry: ids, and names when the node's user database knows them.
#[derive(Debug, Serialize)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl Owner {
    fn of(uid: u32, gid: u32) -> Owner {
        Owner {
            uid,
            gid,
            user: User::from_uid(Uid::from_raw(uid))
                .ok()
                .flatten()
                .map(|u| u.name),
            group: Group::from_gid(Gid::from_raw(gid))
                .ok()
                .flatten()
                .map(|g| g.name),
        }
    }
}

#[async_trait::async_trait]
impl Tool for FsStat {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "fs_stat".to_owned(),
            description: "Describe a path without reading it: kind, size, modification \
                          time, mode, owner, symlink target (not followed), MIME type."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Relative to the workspace."
                    }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            capability: Capability::FilesystemStat.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("Describe a path"),
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
        let path = match Args::new(&args, &["path"])
            .and_then(|a| a.required_str("path").map(str::to_owned))
        {
            Ok(path) => path,
            Err(message) => return ToolResult::error(format!("fs_stat: {message}")),
        };
        let policy = PathPolicy::of(&ctx);
        match tokio::task::spawn_blocking(move || stat(&policy, &path)).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("fs_stat failed: {e}")),
        }
    }
}

/// Describes what `arg` names (blocking).
fn stat(policy: &PathPolicy, arg: &str) -> ToolResult {
    let entry = match policy.entry(arg) {
        Ok(entry) => entry,
        Err(AccessError::Io { path, source }) => {
            let shown = path.display();
            return ToolResult::error(match source.kind() {
                std::io::ErrorKind::NotFound => format!("Not found: {shown}"),
                std::io::ErrorKind::PermissionDenied => format!("Permission denied: {shown}"),
                _ => format!("Cannot stat {shown}: {source}"),
            });
        }
        Err(e) => return e.into_result(),
    };
    let info = FileInfo::of(&entry);
    let owner = Owner::of(entry.stat.st_uid, entry.stat.st_gid);
    let mime = mime_of(info.kind, entry.file);
    output::structured(&FsStatOutput {
        path: entry.path.display().to_string(),
        info,
        owner,
        mime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    async fn call(ws: &std::path::Path, confine: bool, path: &str) -> ToolResult {
        let mut ctx = ToolContext::new(ws, "1");
        ctx.confine = confine;
        FsStat::new().execute(json!({ "path": path }), ctx).await
    }

    #[tokio::test]
    async fn files_links_and_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
        symlink("a.txt", ws.join("link")).unwrap();
        symlink("/etc/passwd", ws.join("out")).unwrap();
        let r = call(&ws, false, "a.txt").await;
        let v = r.structured_content.unwrap();
        assert_eq!(
            (v["kind"].as_str(), v["size"].as_u64()),
            (Some("file"), Some(6))
        );
        assert_eq!(v["mime"], "text/plain");
        assert_eq!(v["mode"].as_str().map(str::len), Some(4));
        assert!(v["owner"]["uid"].is_u64());
        let v = call(&ws, false, "link").await.structured_content.unwrap();
        assert_eq!(
            (v["kind"].as_str(), v["linkTarget"].as_str()),
            (Some("symlink"), Some("a.txt"))
        );
        assert_eq!(v["mime"], "inode/symlink");
        // Confined: a link pointing out is shown as a link, never followed.
        let v = call(&ws, true, "out").await.structured_content.unwrap();
        assert_eq!(v["linkTarget"], "/etc/passwd");
        assert_eq!(v["size"].as_u64(), Some("/etc/passwd".len() as u64));
        // The workspace itself, and `.`.
        let v = call(&ws, true, ".").await.structured_content.unwrap();
        assert_eq!(v["kind"], "dir");
        // Outside, by `..` or by absolute path, is refused when confined.
        for out in ["../ws/../x", "/etc/passwd", "out/x"] {
            let r = call(&ws, true, out).await;
            assert!(r.is_error, "{out}: {}", r.joined_text());
        }
        let r = call(&ws, false, "missing").await;
        assert!(
            r.is_error && r.joined_text().starts_with("Not found"),
            "{}",
            r.joined_text()
        );
    }
}
