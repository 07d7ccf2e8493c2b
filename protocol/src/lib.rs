//! The gsv wire protocol, as plain data.
//!
//! Both the gateway and the node depend on this crate and on nothing of each other, so
//! every frame, name rule, error code, limit and capability id lives here exactly once.
//! It has no sockets and no async runtime: it turns text into typed frames and back.
//! `docs/protocol.md` is the normative description; this crate is its implementation.

pub mod capability;
pub mod display;
pub mod endpoint;
pub mod error;
pub mod event;
pub mod fanout;
pub mod file_mode;
pub mod frame;
pub mod gsv_files;
pub mod handshake;
pub mod inventory;
pub mod job;
pub mod limits;
pub mod method;
pub mod names;
pub mod offer;
pub mod resolve;
pub mod selector;
pub mod tool;
pub mod tool_class;
pub mod transfer;

pub use capability::{Capability, CapabilityError, CapabilityId};
pub use error::{ErrorCode, ErrorDetails, ErrorShape};
pub use event::EventName;
pub use frame::{Frame, FrameError};
pub use handshake::{
    ConnectParams, HelloOk, HostRole, LoginProfileChange, NodeInfo, Role, Runtime,
};
pub use inventory::{Facts, LabelError, Labels};
pub use limits::Limits;
pub use method::Method;
pub use names::{NameError, NamespacedName, NodeId, ToolName};
pub use selector::{Selector, SelectorError};
pub use tool::{ContentBlock, ToolAnnotations, ToolDef, ToolResult};

/// The protocol version this build speaks. A peer offers a `[minProtocol, maxProtocol]`
/// range in `connect`; the gateway picks the highest version both support.
pub const PROTOCOL_VERSION: u32 = 1;
/// The oldest protocol version this build still accepts.
pub const MIN_PROTOCOL_VERSION: u32 = 1;

/// Milliseconds since the Unix epoch, the one timestamp format on the wire.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
