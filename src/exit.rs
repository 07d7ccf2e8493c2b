//! Exit codes of the CLI (DESIGN §4), and the mapping from protocol error codes.

use gsv_protocol::ErrorCode;

pub const OK: u8 = 0;
/// The tool ran and reported an error.
pub const TOOL_ERROR: u8 = 1;
/// Bad usage: flags, JSON arguments, unknown tool.
pub const USAGE: u8 = 2;
/// Authentication failed.
pub const AUTH: u8 = 3;
/// Gateway unreachable, or node offline / disconnected / too slow.
pub const UNREACHABLE: u8 = 4;
/// Denied by policy or by an approval decision.
pub const DENIED: u8 = 5;
/// Interrupted (Ctrl-C or SIGTERM) while a call ran: the call was cancelled.
pub const INTERRUPTED: u8 = 130;

/// The exit code for an error the gateway returned.
pub fn for_code(code: ErrorCode) -> u8 {
    match code {
        ErrorCode::Unauthorized => AUTH,
        ErrorCode::Forbidden | ErrorCode::ApprovalRequired | ErrorCode::Denied => DENIED,
        ErrorCode::NodeOffline
        | ErrorCode::NodeDisconnected
        | ErrorCode::Timeout
        | ErrorCode::RateLimited
        | ErrorCode::Overloaded => UNREACHABLE,
        ErrorCode::InvalidArgs
        | ErrorCode::NotFound
        | ErrorCode::InvalidFrame
        | ErrorCode::UnsupportedProtocol => USAGE,
        _ => TOOL_ERROR,
    }
}
