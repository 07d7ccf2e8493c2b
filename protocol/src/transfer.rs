//! File transfers (`gsv cp`): the JSON requests that open, finish and cancel one, and
//! the binary frame that carries its bytes.
//!
//! A file's bytes never travel as JSON: base64 costs a third more on the wire and a
//! decode at each end. They go in binary WebSocket frames of their own on the same
//! connections as everything else, each [`Chunk`] naming its transfer and offset, so
//! the gateway relays them between an agent and a node (or two nodes) by looking at a
//! 25-byte header only, never at the data. The receiver grants the sender
//! [`WINDOW_BYTES`] of credit at a time (`transfer.credit`), so a transfer holds at
//! most that much in any queue and other calls on the connection keep flowing.
//! SHA-256 of the whole file is checked where it lands, before it is renamed into
//! place.

pub mod tree;

use serde::{Deserialize, Serialize};

/// Most data bytes in one chunk frame (1 MiB).
pub const CHUNK_BYTES: usize = 1024 * 1024;
/// Bytes a sender may have sent and not yet had credited back (4 MiB): the most a
/// transfer holds in any queue. The gateway enforces it, and caps transfers per node
/// and per token so their windows together stay within a connection's send queue.
pub const WINDOW_BYTES: u64 = 4 * 1024 * 1024;
/// The first byte of a chunk frame: its kind and version.
pub const CHUNK_KIND: u8 = 1;
/// Bytes of a chunk frame before its data: kind, transfer id, offset.
pub const HEADER_BYTES: usize = 1 + 16 + 8;

/// One binary frame of a transfer: `data` belongs at `offset` of the file of transfer
/// `id`. On the wire: the kind byte [`CHUNK_KIND`], the 16 bytes of the transfer's
/// UUID, the offset as a big-endian u64, then the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk<'a> {
    pub id: uuid::Uuid,
    pub offset: u64,
    pub data: &'a [u8],
}

/// Why a binary frame is not a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("binary frame of {0} bytes is shorter than a chunk header")]
    Short(usize),
    #[error("binary frame of unknown kind {0}")]
    Kind(u8),
    #[error("chunk of {0} bytes is over the {CHUNK_BYTES}-byte limit")]
    TooLarge(usize),
    #[error("chunk at offset {0} runs past the largest file offset")]
    Offset(u64),
}

impl<'a> Chunk<'a> {
    /// Reads a binary frame.
    pub fn decode(frame: &'a [u8]) -> Result<Chunk<'a>, ChunkError> {
        if frame.len() < HEADER_BYTES {
            return Err(ChunkError::Short(frame.len()));
        }
        if frame[0] != CHUNK_KIND {
            return Err(ChunkError::Kind(frame[0]));
        }
        let data = &frame[HEADER_BYTES..];
        if data.len() > CHUNK_BYTES {
            return Err(ChunkError::TooLarge(data.len()));
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&frame[1..17]);
        let mut off = [0u8; 8];
        off.copy_from_slice(&frame[17..HEADER_BYTES]);
        let offset = u64::from_be_bytes(off);
        if offset.checked_add(data.len() as u64).is_none() {
            return Err(ChunkError::Offset(offset));
        }
        Ok(Chunk {
            id: uuid::Uuid::from_bytes(id),
            offset,
            data,
        })
    }

    /// The frame's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.data.len());
        out.extend_from_slice(&Chunk::header(self.id, self.offset));
        out.extend_from_slice(self.data);
        out
    }

    /// The header of a chunk of transfer `id` at `offset`: a sender that reads the
    /// data in right behind it builds the frame without copying the data again.
    pub fn header(id: uuid::Uuid, offset: u64) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        out[0] = CHUNK_KIND;
        out[1..17].copy_from_slice(id.as_bytes());
        out[17..].copy_from_slice(&offset.to_be_bytes());
        out
    }

    /// The transfer id of a binary frame, read from its header alone (what a relay
    /// needs), without checking the rest.
    pub fn peek_id(frame: &[u8]) -> Option<uuid::Uuid> {
        (frame.len() >= HEADER_BYTES && frame[0] == CHUNK_KIND).then(|| {
            let mut id = [0u8; 16];
            id.copy_from_slice(&frame[1..17]);
            uuid::Uuid::from_bytes(id)
        })
    }
}

/// Which way a transfer's bytes go, seen from the node that holds `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The node reads its file and sends it.
    Get,
    /// The node receives the bytes and writes its file.
    Put,
}

/// What a file is besides its bytes, kept across a copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileMeta {
    /// Size in bytes.
    pub size: u64,
    /// Permission bits (`0o644`), without the file type.
    #[serde(default)]
    pub mode: u32,
    /// Modification time, ms since the epoch.
    #[serde(default)]
    pub mtime_ms: u64,
}

/// Params of `transfer.open` to a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenParams {
    /// Chosen by whoever opens it (the gateway): the id chunks carry.
    pub id: uuid::Uuid,
    pub direction: Direction,
    /// The file on the node (relative paths resolve against its workspace).
    pub path: String,
    /// `put`: the file that is coming (its size, mode and mtime are kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<FileMeta>,
    /// `put`: the SHA-256 (hex) the whole file must have, when the sender knows it
    /// up front; else it comes with `transfer.finish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// `get`: send from this offset (a resumed copy); `put`: ignored, the node says
    /// where to resume in its answer.
    #[serde(default)]
    pub offset: u64,
    /// `get`: send nothing until the first `transfer.credit` (of any size, 0
    /// included) comes: the gateway learns the file's size first (a node → node copy).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold: bool,
}

/// Result of `transfer.open`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenResult {
    pub id: uuid::Uuid,
    /// The file resolved on the node (absolute): where the bytes are read from or
    /// written to, every symlink resolved and `..` collapsed when `resolved`.
    pub path: String,
    /// The node resolved `path` from the open file itself (its descriptor's real
    /// path); `false`: `path` is the node's lexical resolution (no `/proc`, or an older
    /// node). Approvals say which.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resolved: bool,
    /// `put`: a file already stands at `path` and will be replaced. `None` on a get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<bool>,
    /// `get`: the file as it is now; `put`: what was announced.
    pub meta: FileMeta,
    /// `put`: bytes the node already holds of this file from an earlier, interrupted
    /// copy (verified): send from here. `get`: the offset sending starts at.
    pub offset: u64,
    /// Node → gateway only: this transfer's chunks travel on the node's bulk lane
    /// (`connect.lane`), both ways. The gateway never passes it on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lane: bool,
}

/// Params of `transfer.finish` (`put`): every byte was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishParams {
    pub id: uuid::Uuid,
    /// SHA-256 (hex) of the whole file as the sender read it.
    pub sha256: String,
}

/// Result of `transfer.finish`, and the payload of `transfer.end` (`get`: the node
/// sent its last byte).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    pub id: uuid::Uuid,
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// Payload of `transfer.credit`: the receiver may take `bytes` more of transfer `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credit {
    pub id: uuid::Uuid,
    pub bytes: u64,
}

/// Params of `transfer.cancel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelParams {
    pub id: uuid::Uuid,
    /// `put`: remove the partial file too (else it is kept for a resumed copy).
    #[serde(default)]
    pub discard: bool,
}

/// Params of `transfer.open` from an agent to the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentOpenParams {
    pub node: String,
    pub path: String,
    pub direction: Direction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<FileMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default)]
    pub offset: u64,
    /// The other end of the copy as the agent names it (its local path), shown to an
    /// operator asked to approve the transfer; the gateway cuts it to
    /// [`MAX_SOURCE_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Most characters of [`AgentOpenParams::source`] an operator is shown.
pub const MAX_SOURCE_CHARS: usize = 1024;

/// One end of a node → node copy: a file on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Place {
    pub node: String,
    pub path: String,
}

/// Params of `transfer.copy` (agent → gateway): copy the file `from` names to `to`,
/// node to node, through the gateway and never onto its disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyParams {
    pub from: Place,
    pub to: Place,
}

/// Result of `transfer.copy`: the file as it was placed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Copied {
    /// The source file, resolved on its node.
    pub from: Place,
    /// The placed file, resolved on its node.
    pub to: Place,
    pub bytes: u64,
    pub sha256: String,
    /// Bytes the destination already held from an earlier, interrupted copy of the
    /// same file (verified), which were not sent again.
    pub resumed_from: u64,
}

/// Payload of `transfer.progress` (gateway → agent, during a `transfer.copy`): `bytes`
/// of `size` are in place. `request` is the id of the `transfer.copy` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub request: String,
    pub bytes: u64,
    pub size: u64,
}

/// Payload of `transfer.failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    pub id: uuid::Uuid,
    pub error: crate::ErrorShape,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_round_trips_and_its_id_is_read_from_the_header() {
        let id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let data = vec![7u8; 1000];
        let frame = Chunk {
            id,
            offset: 1 << 40,
            data: &data,
        }
        .encode();
        assert_eq!(frame.len(), HEADER_BYTES + 1000);
        assert_eq!(Chunk::peek_id(&frame), Some(id));
        let back = Chunk::decode(&frame).expect("decodes");
        assert_eq!((back.id, back.offset, back.data), (id, 1 << 40, &data[..]));
    }

    #[test]
    fn bad_frames_are_refused() {
        assert_eq!(Chunk::decode(&[1u8; 10]), Err(ChunkError::Short(10)));
        let mut frame = Chunk {
            id: uuid::Uuid::nil(),
            offset: 0,
            data: b"x",
        }
        .encode();
        frame[0] = 9;
        assert_eq!(Chunk::decode(&frame), Err(ChunkError::Kind(9)));
        assert_eq!(Chunk::peek_id(&frame), None);
        let big = vec![0u8; CHUNK_BYTES + 1];
        let frame = Chunk {
            id: uuid::Uuid::nil(),
            offset: 0,
            data: &big,
        }
        .encode();
        assert_eq!(
            Chunk::decode(&frame),
            Err(ChunkError::TooLarge(CHUNK_BYTES + 1))
        );
        let frame = Chunk {
            id: uuid::Uuid::nil(),
            offset: u64::MAX,
            data: b"xy",
        }
        .encode();
        assert_eq!(Chunk::decode(&frame), Err(ChunkError::Offset(u64::MAX)));
    }

    #[test]
    fn open_params_use_the_wire_names() {
        let p = OpenParams {
            id: uuid::Uuid::nil(),
            direction: Direction::Put,
            path: "a/b".into(),
            meta: Some(FileMeta {
                size: 3,
                mode: 0o644,
                mtime_ms: 5,
            }),
            sha256: None,
            offset: 0,
            hold: false,
        };
        let text = serde_json::to_string(&p).expect("json");
        assert_eq!(
            text,
            r#"{"id":"00000000-0000-0000-0000-000000000000","direction":"put","path":"a/b","meta":{"size":3,"mode":420,"mtimeMs":5},"offset":0}"#
        );
        assert_eq!(serde_json::from_str::<OpenParams>(&text).expect("back"), p);
    }
}
