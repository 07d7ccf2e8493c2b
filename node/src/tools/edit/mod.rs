//! The Edit tool: replace an exact piece of text in a file.
//!
//! Matching is exact and byte for byte: no regex, no whitespace or line-ending
//! normalisation, so what the model quoted is what changes. Unless `replaceAll` is
//! set, `oldString` must occur exactly once; otherwise the call fails and says how
//! many times it occurs, so the model can add context or ask for all of them. An
//! `oldString` that is absent fails too (with a hint when the file uses CRLF line
//! endings and the string does not). The new content is written atomically like
//! Write's (`write::write_atomic_at`): temporary file, `fsync`, rename, with
//! the file's permissions kept.
//!
//! Files over [`MAX_EDIT_BYTES`] are refused (the whole file is held in memory).
//!
//! Result (`structuredContent`): `{"path": "<resolved absolute path>", "replacements": N}`.

pub mod on_host;

use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use crate::tools::paths::{AccessError, PathPolicy};
use crate::tools::write::{describe_write_error, write_atomic_at};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use memchr::memmem;
use rustix::fs::{AtFlags, OFlags};
use serde::Serialize;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{self, Read as _};
use std::os::unix::fs::MetadataExt;

/// Largest file Edit changes (64 MiB).
pub const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;

/// The Edit tool.
#[derive(Default)]
pub struct Edit {
    /// The far host the tool works on, or `None` for this machine.
    host: super::Host,
}

impl Edit {
    /// Edit on this machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Edit on the host of an SSH- or container-backed node ([`on_host`]).
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        Edit { host: Some(host) }
    }
}

/// Edit's structured content: `{path, replacements}`.
#[derive(Debug, Serialize)]
pub struct EditOutput {
    /// The file edited, resolved (absolute).
    pub path: String,
    /// How many occurrences of `oldString` were replaced.
    pub replacements: usize,
}

#[async_trait::async_trait]
impl Tool for Edit {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Edit".to_owned(),
            description: "Replace exact text in a file: `oldString` must match byte for \
                          byte and occur once (or set `replaceAll`); else nothing changes and \
                          the match count is said."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Relative to the workspace."
                    },
                    "oldString": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Text to replace."
                    },
                    "newString": {
                        "type": "string",
                        "description": "Replacement (empty deletes)."
                    },
                    "replaceAll": {
                        "type": "boolean",
                        "description": "Replace every occurrence."
                    }
                },
                "required": ["path", "oldString", "newString"],
                "additionalProperties": false
            }),
            capability: Capability::FilesystemEdit.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Edit file", false, true, false, false),
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
        let request = match EditRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Edit: {message}")),
        };
        let policy = PathPolicy::of(&ctx);
        match tokio::task::spawn_blocking(move || edit(&policy, &request)).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Edit failed: {e}")),
        }
    }
}

pub(crate) struct EditRequest {
    pub(crate) path: String,
    old: String,
    new: String,
    replace_all: bool,
}

impl EditRequest {
    pub(crate) fn parse(args: &Value) -> Result<EditRequest, String> {
        let args = Args::new(args, &["path", "oldString", "newString", "replaceAll"])?;
        let request = EditRequest {
            path: args.required_str("path")?.to_owned(),
            old: args.required_str("oldString")?.to_owned(),
            new: args
                .str("newString")?
                .ok_or("missing required argument \"newString\"")?
                .to_owned(),
            replace_all: args.bool("replaceAll")?.unwrap_or(false),
        };
        if request.old == request.new {
            return Err("oldString and newString are identical; there is nothing to change".into());
        }
        Ok(request)
    }
}

/// Applies `request` (blocking).
fn edit(policy: &PathPolicy, request: &EditRequest) -> ToolResult {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    let opened = match policy.open(&request.path, flags) {
        Ok(opened) => opened,
        Err(AccessError::Io { path, source }) => {
            return ToolResult::error(describe_read_error(&path.display().to_string(), &source))
        }
        Err(e) => return e.into_result(),
    };
    let shown = opened.path.display().to_string();
    let mut file = File::from(opened.fd);
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return ToolResult::error(describe_read_error(&shown, &e)),
    };
    if meta.is_dir() {
        return ToolResult::error(format!(
            "Is a directory, not a file: {shown} (Edit only edits files)"
        ));
    }
    if !meta.is_file() {
        return ToolResult::error(format!(
            "Not a regular file: {shown} (devices, sockets and pipes are not edited)"
        ));
    }
    if meta.len() > MAX_EDIT_BYTES {
        return ToolResult::error(format!(
            "File too large to edit: {shown} ({} bytes; the limit is {MAX_EDIT_BYTES} bytes)",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    // One byte past the cap, so a file that grew since `fstat` is still caught.
    match (&mut file).take(MAX_EDIT_BYTES + 1).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() as u64 > MAX_EDIT_BYTES => {
            return ToolResult::error(format!(
                "File too large to edit: {shown} (more than {MAX_EDIT_BYTES} bytes)"
            ))
        }
        Ok(_) => {}
        Err(e) => return ToolResult::error(describe_read_error(&shown, &e)),
    }
    // The directory the new content is renamed into, opened the same way; the name
    // in it must still be the file just read.
    let parent = match policy.open_parent(&opened.path) {
        Ok(parent) => parent,
        Err(AccessError::Io { path, source }) => {
            return ToolResult::error(describe_write_error(&path.display().to_string(), &source))
        }
        Err(e) => return e.into_result(),
    };
    let same = rustix::fs::statat(&parent.dir, &parent.name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| st.st_dev == meta.dev() && st.st_ino == meta.ino());
    if !same {
        return ToolResult::error(format!(
            "{shown} was replaced while it was being edited (the file was not changed); try again"
        ));
    }
    let (out, replacements) = match replaced(&shown, &bytes, request) {
        Ok(done) => done,
        Err(refused) => return refused,
    };
    if let Err(e) = write_atomic_at(&parent.dir, &parent.name, &out) {
        return ToolResult::error(describe_write_error(&shown, &e));
    }
    edited_result(shown, replacements)
}

/// `bytes` with the request's replacements made, and how many; or why none was.
pub(crate) fn replaced(
    shown: &str,
    bytes: &[u8],
    request: &EditRequest,
) -> Result<(Vec<u8>, usize), ToolResult> {
    let old = request.old.as_bytes();
    let found: Vec<usize> = memmem::find_iter(bytes, old).collect();
    match found.len() {
        0 => return Err(ToolResult::error(not_found(shown, bytes, &request.old))),
        1 => {}
        n if !request.replace_all => {
            return Err(ToolResult::error(format!(
                "Found {n} matches of oldString in {shown}; pass replaceAll: true to replace \
                 all of them, or add surrounding context to oldString so it matches exactly \
                 once (the file was not changed)"
            )))
        }
        _ => {}
    }
    let new = request.new.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + found.len() * new.len());
    let mut at = 0;
    for &start in &found {
        out.extend_from_slice(&bytes[at..start]);
        out.extend_from_slice(new);
        at = start + old.len();
    }
    out.extend_from_slice(&bytes[at..]);
    Ok((out, found.len()))
}

/// The result of an edit of `shown` that made `replacements` replacements.
pub(crate) fn edited_result(shown: String, replacements: usize) -> ToolResult {
    output::with_text(
        format!(
            "Replaced {replacements} occurrence{} in {shown}",
            if replacements == 1 { "" } else { "s" }
        ),
        &EditOutput {
            path: shown,
            replacements,
        },
    )
}

pub(crate) fn describe_read_error(shown: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("File not found: {shown}"),
        io::ErrorKind::PermissionDenied => format!("Permission denied: {shown}"),
        _ => format!("Cannot read {shown}: {e}"),
    }
}

/// The message for an `oldString` that does not occur, with a hint when line
/// endings are the likely reason.
fn not_found(shown: &str, bytes: &[u8], old: &str) -> String {
    let mut message = format!("oldString not found in {shown} (the file was not changed)");
    if old.contains('\n') && !old.contains('\r') && memmem::find(bytes, b"\r\n").is_some() {
        let crlf = old.replace('\n', "\r\n");
        if memmem::find(bytes, crlf.as_bytes()).is_some() {
            message.push_str(
                "; the file uses CRLF (\\r\\n) line endings: oldString matches once its \
                 line breaks are \\r\\n",
            );
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_hint() {
        let m = not_found("f", b"a\r\nb\r\n", "a\nb");
        assert!(m.contains("CRLF"), "{m}");
        let m = not_found("f", b"a\r\nb\r\n", "zz\nb");
        assert!(!m.contains("CRLF"), "{m}");
        assert_eq!(
            not_found("f", b"abc", "x"),
            "oldString not found in f (the file was not changed)"
        );
    }

    #[test]
    fn identical_strings_are_refused() {
        let err = EditRequest::parse(&json!({"path": "a", "oldString": "x", "newString": "x"}))
            .err()
            .unwrap();
        assert!(err.contains("identical"), "{err}");
        let ok =
            EditRequest::parse(&json!({"path": "a", "oldString": "x", "newString": ""})).unwrap();
        assert!(ok.new.is_empty() && !ok.replace_all);
    }
}
