//! What fs_list and fs_stat say about one directory entry, in one shape.
//!
//! Both report an entry as it is, without following it ([`crate::tools::paths::Entry`]):
//! its kind, size, modification time (RFC 3339, UTC), permission bits (octal text,
//! e.g. `"0644"`, with set-id and sticky bits when present) and, for a symlink, its
//! target as written in the link. fs_stat adds the owner and the MIME type
//! ([`mime_of`]).

use crate::tools::paths::Entry;
use chrono::{DateTime, SecondsFormat, Utc};
use rustix::fd::OwnedFd;
use rustix::fs::{FileType, Stat};
use serde::Serialize;
use std::fs::File;
use std::io::Read as _;

/// Bytes read to recognise a file's type.
pub const SNIFF_BYTES: u64 = 8 * 1024;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    /// A character device.
    Char,
    /// A block device.
    Block,
    Unknown,
}

impl Kind {
    pub fn of(stat: &Stat) -> Kind {
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Fifo,
            FileType::Socket => Kind::Socket,
            FileType::CharacterDevice => Kind::Char,
            FileType::BlockDevice => Kind::Block,
            FileType::Unknown => Kind::Unknown,
        }
    }
}

/// The fields every listed or stat'ed entry has.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    pub kind: Kind,
    /// Bytes (of the link itself for a symlink).
    pub size: u64,
    /// Last modification, RFC 3339 in UTC with nanoseconds when not whole seconds.
    pub mtime: String,
    /// Permission bits in octal, e.g. `"0644"` or `"4755"`.
    pub mode: String,
    /// A symlink's target, as written in the link (not resolved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

impl FileInfo {
    pub fn of(entry: &Entry) -> FileInfo {
        let st = &entry.stat;
        FileInfo {
            kind: Kind::of(st),
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime: rfc3339(st.st_mtime, st.st_mtime_nsec),
            mode: format!("{:04o}", st.st_mode & 0o7777),
            link_target: entry
                .link_target
                .as_ref()
                .map(|t| t.to_string_lossy().into_owned()),
        }
    }
}

/// A time stamp (seconds and nanoseconds since the epoch) in RFC 3339, UTC.
pub fn rfc3339(secs: i64, nanos: impl TryInto<u32>) -> String {
    let nanos = nanos.try_into().unwrap_or(0);
    match DateTime::<Utc>::from_timestamp(secs, nanos) {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        None => String::new(),
    }
}

/// The MIME type of an entry: from the file's magic bytes (`infer`) for a regular
/// file, else `text/plain` for UTF-8 text without NUL bytes, `inode/x-empty` for an
/// empty file and `application/octet-stream` for other content; `inode/directory`,
/// `inode/symlink` and so on for what is not a regular file (the names `file
/// --mime-type` uses); `None` for a regular file that could not be read.
pub fn mime_of(kind: Kind, file: Option<OwnedFd>) -> Option<String> {
    let fixed = match kind {
        Kind::File => None,
        Kind::Dir => Some("inode/directory"),
        Kind::Symlink => Some("inode/symlink"),
        Kind::Fifo => Some("inode/fifo"),
        Kind::Socket => Some("inode/socket"),
        Kind::Char => Some("inode/chardevice"),
        Kind::Block => Some("inode/blockdevice"),
        Kind::Unknown => Some("application/octet-stream"),
    };
    if let Some(mime) = fixed {
        return Some(mime.to_owned());
    }
    let mut head = Vec::new();
    File::from(file?)
        .take(SNIFF_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    Some(mime_of_head(&head))
}

/// The MIME type of a regular file whose first bytes (at most [`SNIFF_BYTES`]) are
/// `head` (see [`mime_of`]).
pub fn mime_of_head(head: &[u8]) -> String {
    let head = &head[..head.len().min(SNIFF_BYTES as usize)];
    if head.is_empty() {
        return "inode/x-empty".to_owned();
    }
    if let Some(kind) = infer::get(head) {
        return kind.mime_type().to_owned();
    }
    let complete = (head.len() as u64) < SNIFF_BYTES;
    let text = !head.contains(&0)
        && match std::str::from_utf8(head) {
            Ok(_) => true,
            // A character cut at the end of a partial read is not held against it.
            Err(e) => !complete && e.error_len().is_none(),
        };
    if text {
        "text/plain"
    } else {
        "application/octet-stream"
    }
    .to_owned()
}

/// The kind of an entry from its `find -printf %y` letter.
pub fn kind_of_letter(letter: &str) -> Kind {
    match letter {
        "f" => Kind::File,
        "d" => Kind::Dir,
        "l" => Kind::Symlink,
        "p" => Kind::Fifo,
        "s" => Kind::Socket,
        "c" => Kind::Char,
        "b" => Kind::Block,
        _ => Kind::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_stamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0, 0u32), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(1_700_000_000, 500_000_000i64),
            "2023-11-14T22:13:20.500Z"
        );
    }

    #[test]
    fn mime_types() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            Some(OwnedFd::from(File::open(&p).unwrap()))
        };
        let png = [
            0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d,
        ];
        assert_eq!(
            mime_of(Kind::File, open("a.png", &png)).as_deref(),
            Some("image/png")
        );
        assert_eq!(
            mime_of(Kind::File, open("a.txt", b"hi\n")).as_deref(),
            Some("text/plain")
        );
        assert_eq!(
            mime_of(Kind::File, open("a.bin", &[1, 0, 0xff])).as_deref(),
            Some("application/octet-stream")
        );
        assert_eq!(
            mime_of(Kind::File, open("e", b"")).as_deref(),
            Some("inode/x-empty")
        );
        assert_eq!(mime_of(Kind::File, None), None);
        assert_eq!(mime_of(Kind::Dir, None).as_deref(), Some("inode/directory"));
    }
}
