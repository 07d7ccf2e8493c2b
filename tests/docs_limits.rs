//! The limits table of docs/operations.md ("## Limits") against the code.
//!
//! Every row whose "Flag or constant" cell names constants this test knows (in
//! backticks, as `MAX_PENDING_PER_NODE` or `glob::MAX_MATCHES`) must state their values
//! in its "Value" cell, in the order it names them, spelled the way the docs spell
//! numbers ("4 096", "16 MiB", "64 KiB", "30 s", "10 min", "0.5 s", "500 ms"). Each
//! known constant must be named by exactly one row; a constant-like name in that column
//! that this test does not know fails it, so a new row cannot go unchecked; and every
//! numeric `pub const` of `protocol/src/limits.rs` and `gateway/src/config.rs` must be
//! known. The values come from the crates; the few constants private to their module
//! are read from their declaration in the source (`Source` below).

use std::path::{Path, PathBuf};
use std::time::Duration;

use gsv_gateway::admission::METRICS_PORT_CAPS;
use gsv_node::sessions::Limits as SessionLimits;
use gsv_protocol::limits as pl;

/// A value and how the docs may spell it.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// A plain number: "4 096", "200 000".
    Count(u64),
    /// A size: "16 MiB", "64 KiB", or the number of bytes.
    Bytes(u64),
    /// A duration: "24 h", "10 min", "30 s", "0.5 s", "500 ms".
    Millis(u64),
}

fn count(n: usize) -> Value {
    Value::Count(n as u64)
}

fn bytes(n: usize) -> Value {
    Value::Bytes(n as u64)
}

fn dur(d: Duration) -> Value {
    Value::Millis(d.as_millis() as u64)
}

/// How the test reads a private constant: from its declaration in `file`.
struct Source {
    file: &'static str,
    ident: &'static str,
    kind: fn(u64) -> Value,
}

enum Expected {
    Values(Vec<Value>),
    Source(Source),
}

/// The constants the table must state, by the name the table gives them.
fn known() -> Vec<(&'static str, Expected)> {
    use Expected::Values as v;
    let src = |file, ident, kind| Expected::Source(Source { file, ident, kind });
    let config = gsv_gateway::GatewayConfig::new(
        "127.0.0.1:0".parse().expect("address"),
        PathBuf::from("unused"),
    );
    let sessions = SessionLimits::default();
    vec![
        // protocol/src/limits.rs
        (
            "PRE_AUTH_MAX_FRAME_BYTES",
            v(vec![bytes(pl::PRE_AUTH_MAX_FRAME_BYTES)]),
        ),
        (
            "HANDSHAKE_TIMEOUT_MS",
            v(vec![Value::Millis(pl::HANDSHAKE_TIMEOUT_MS)]),
        ),
        ("MAX_FRAME_BYTES", v(vec![bytes(pl::MAX_FRAME_BYTES)])),
        ("MAX_RESULT_BYTES", v(vec![bytes(pl::MAX_RESULT_BYTES)])),
        (
            "DEFAULT_HEARTBEAT_MS",
            v(vec![Value::Millis(pl::DEFAULT_HEARTBEAT_MS)]),
        ),
        (
            "DEFAULT_CALL_TIMEOUT_MS",
            v(vec![Value::Millis(pl::DEFAULT_CALL_TIMEOUT_MS)]),
        ),
        (
            "MAX_CALL_TIMEOUT_MS",
            v(vec![Value::Millis(pl::MAX_CALL_TIMEOUT_MS)]),
        ),
        (
            "MAX_IN_FLIGHT_PER_AGENT",
            v(vec![count(pl::MAX_IN_FLIGHT_PER_AGENT)]),
        ),
        (
            "MAX_PENDING_PER_NODE",
            v(vec![count(pl::MAX_PENDING_PER_NODE)]),
        ),
        ("MAX_STRAY_RESULTS", v(vec![count(pl::MAX_STRAY_RESULTS)])),
        ("SEND_QUEUE_FRAMES", v(vec![count(pl::SEND_QUEUE_FRAMES)])),
        ("SEND_QUEUE_BYTES", v(vec![bytes(pl::SEND_QUEUE_BYTES)])),
        ("MAX_ID_LEN", v(vec![count(pl::MAX_ID_LEN)])),
        ("MAX_TOOLS_PER_NODE", v(vec![count(pl::MAX_TOOLS_PER_NODE)])),
        (
            "DEFAULT_JOB_RETENTION",
            v(vec![dur(gsv_gateway::config::DEFAULT_JOB_RETENTION)]),
        ),
        (
            "jobs::MAX_JOBS",
            v(vec![count(gsv_gateway::jobs::MAX_JOBS)]),
        ),
        (
            "jobs::MAX_JOBS_PER_TOKEN",
            v(vec![count(gsv_gateway::jobs::MAX_JOBS_PER_TOKEN)]),
        ),
        (
            "jobs::MAX_STORED_RESULT",
            v(vec![bytes(gsv_gateway::jobs::MAX_STORED_RESULT)]),
        ),
        (
            "jobs::MAX_STORED_BYTES_PER_TOKEN",
            v(vec![bytes(gsv_gateway::jobs::MAX_STORED_BYTES_PER_TOKEN)]),
        ),
        (
            "jobs::MAX_STORED_BYTES",
            v(vec![bytes(gsv_gateway::jobs::MAX_STORED_BYTES)]),
        ),
        (
            "webhook::QUEUE",
            v(vec![count(gsv_gateway::webhook::QUEUE)]),
        ),
        (
            "webhook::QUEUE_PER_TOKEN",
            v(vec![count(gsv_gateway::webhook::QUEUE_PER_TOKEN)]),
        ),
        (
            "webhook::ATTEMPTS",
            v(vec![count(gsv_gateway::webhook::ATTEMPTS as usize)]),
        ),
        (
            "transfer::CHUNK_BYTES",
            v(vec![bytes(gsv_protocol::transfer::CHUNK_BYTES)]),
        ),
        (
            "transfer::WINDOW_BYTES",
            v(vec![bytes(gsv_protocol::transfer::WINDOW_BYTES as usize)]),
        ),
        (
            "transfer::MAX_PER_TOKEN",
            v(vec![count(gsv_gateway::transfer::MAX_PER_TOKEN)]),
        ),
        (
            "transfer::MAX_PER_NODE",
            v(vec![count(gsv_gateway::transfer::MAX_PER_NODE)]),
        ),
        (
            "transfer::MAX_PER_TOKEN_ON_NODE",
            v(vec![count(gsv_gateway::transfer::MAX_PER_TOKEN_ON_NODE)]),
        ),
        (
            "cp::FIRST_DELAY",
            v(vec![dur(gsv::commands::cp::FIRST_DELAY)]),
        ),
        ("cp::MAX_DELAY", v(vec![dur(gsv::commands::cp::MAX_DELAY)])),
        (
            "cp::DEFAULT_RETRY_FOR_SECS",
            v(vec![dur(Duration::from_secs(
                gsv::commands::cp::DEFAULT_RETRY_FOR_SECS,
            ))]),
        ),
        (
            "transfer::MAX_TRANSFERS",
            v(vec![count(gsv_node::transfer::MAX_TRANSFERS)]),
        ),
        (
            "DEFAULT_TRANSFER_IDLE",
            v(vec![dur(gsv_gateway::config::DEFAULT_TRANSFER_IDLE)]),
        ),
        (
            "transfer::GRANT_LIFE",
            v(vec![dur(gsv_gateway::transfer::GRANT_LIFE)]),
        ),
        (
            "transfer::MAX_GRANTS_PER_CONN",
            v(vec![count(gsv_gateway::transfer::MAX_GRANTS_PER_CONN)]),
        ),
        (
            "tree::MAX_TREE_ENTRIES",
            v(vec![count(gsv_protocol::transfer::tree::MAX_TREE_ENTRIES)]),
        ),
        (
            "tree::MAX_TREE_NAME_BYTES",
            v(vec![bytes(
                gsv_protocol::transfer::tree::MAX_TREE_NAME_BYTES,
            )]),
        ),
        (
            "tree::MAX_TREE_DEPTH",
            v(vec![count(gsv_protocol::transfer::tree::MAX_TREE_DEPTH)]),
        ),
        (
            "tree::MAX_PLACE_ENTRIES",
            v(vec![count(gsv_protocol::transfer::tree::MAX_PLACE_ENTRIES)]),
        ),
        (
            "DEFAULT_CONSOLE_CODE_TTL",
            v(vec![dur(gsv_gateway::config::DEFAULT_CONSOLE_CODE_TTL)]),
        ),
        (
            "console::MAX_CODES",
            v(vec![count(gsv_gateway::console::MAX_CODES)]),
        ),
        (
            "console::MAX_CODES_PER_TOKEN",
            v(vec![count(gsv_gateway::console::MAX_CODES_PER_TOKEN)]),
        ),
        (
            "console::MAX_SESSIONS_PER_TOKEN",
            v(vec![count(gsv_gateway::console::MAX_SESSIONS_PER_TOKEN)]),
        ),
        (
            "console::MAX_STREAMS_PER_TOKEN",
            v(vec![count(gsv_gateway::console::MAX_STREAMS_PER_TOKEN)]),
        ),
        (
            "console::MAX_SESSIONS",
            v(vec![count(gsv_gateway::console::MAX_SESSIONS)]),
        ),
        (
            "console::SESSION_IDLE",
            v(vec![dur(gsv_gateway::console::SESSION_IDLE)]),
        ),
        (
            "console::MAX_STREAMS",
            v(vec![count(gsv_gateway::console::MAX_STREAMS)]),
        ),
        (
            "reattach::REATTACH_WINDOW",
            v(vec![dur(gsv_gateway::reattach::REATTACH_WINDOW)]),
        ),
        (
            "fleet_run::NODE_TEXT_MAX",
            v(vec![count(gsv_gateway::mcp::fleet_run::NODE_TEXT_MAX)]),
        ),
        (
            "fleet_run::TEXT_MAX",
            v(vec![count(gsv_gateway::mcp::fleet_run::TEXT_MAX)]),
        ),
        (
            "MAX_APPROVAL_PLAN_BYTES",
            v(vec![bytes(pl::MAX_APPROVAL_PLAN_BYTES)]),
        ),
        (
            "MAX_AUDIT_PATH_BYTES",
            v(vec![bytes(pl::MAX_AUDIT_PATH_BYTES)]),
        ),
        (
            "posture::PLAN_TIMEOUT",
            v(vec![dur(gsv_node::guards::posture::PLAN_TIMEOUT)]),
        ),
        (
            "request::DEFAULT_MAX_BYTES",
            v(vec![Value::Bytes(
                gsv_node::tools::fetch::request::DEFAULT_MAX_BYTES,
            )]),
        ),
        (
            "request::MAX_BYTES",
            v(vec![Value::Bytes(
                gsv_node::tools::fetch::request::MAX_BYTES,
            )]),
        ),
        (
            "fetch::MAX_REDIRECTS",
            v(vec![count(gsv_node::tools::fetch::MAX_REDIRECTS)]),
        ),
        (
            "request::MAX_HEADERS",
            v(vec![count(gsv_node::tools::fetch::request::MAX_HEADERS)]),
        ),
        (
            "request::MAX_HEADER_LEN",
            v(vec![bytes(gsv_node::tools::fetch::request::MAX_HEADER_LEN)]),
        ),
        (
            "request::MAX_URL_LEN",
            v(vec![bytes(gsv_node::tools::fetch::request::MAX_URL_LEN)]),
        ),
        (
            "client::MAX_HEADER_VALUE",
            v(vec![bytes(
                gsv_node::tools::fetch::client::MAX_HEADER_VALUE,
            )]),
        ),
        (
            "client::CONNECT_TIMEOUT",
            v(vec![dur(gsv_node::tools::fetch::client::CONNECT_TIMEOUT)]),
        ),
        (
            "fetch::RESOLVE_TIMEOUT",
            v(vec![dur(gsv_node::tools::fetch::RESOLVE_TIMEOUT)]),
        ),
        // protocol/src/names.rs
        (
            "MAX_NAMESPACED_LEN",
            v(vec![count(gsv_protocol::names::MAX_NAMESPACED_LEN)]),
        ),
        (
            "MAX_NODE_ID_LEN",
            v(vec![count(gsv_protocol::names::MAX_NODE_ID_LEN)]),
        ),
        (
            "MAX_TOOL_NAME_LEN",
            v(vec![count(gsv_protocol::names::MAX_TOOL_NAME_LEN)]),
        ),
        // protocol/src/inventory.rs, protocol/src/selector.rs
        (
            "MAX_LABELS",
            v(vec![count(gsv_protocol::inventory::MAX_LABELS)]),
        ),
        (
            "MAX_LABEL_KEY",
            v(vec![bytes(gsv_protocol::inventory::MAX_LABEL_KEY)]),
        ),
        (
            "MAX_LABEL_VALUE",
            v(vec![bytes(gsv_protocol::inventory::MAX_LABEL_VALUE)]),
        ),
        (
            "MAX_FACT_TEXT",
            v(vec![bytes(gsv_protocol::inventory::MAX_FACT_TEXT)]),
        ),
        (
            "MAX_FANOUT_NODES",
            v(vec![count(gsv_protocol::fanout::MAX_FANOUT_NODES)]),
        ),
        (
            "fanout::MAX_FANOUTS_PER_TOKEN",
            v(vec![count(gsv_gateway::fanout::MAX_FANOUTS_PER_TOKEN)]),
        ),
        (
            "MAX_SELECTOR_LEN",
            v(vec![bytes(gsv_protocol::selector::MAX_SELECTOR_LEN)]),
        ),
        (
            "MAX_SELECTOR_TERMS",
            v(vec![count(gsv_protocol::selector::MAX_SELECTOR_TERMS)]),
        ),
        // gateway/src/config.rs
        (
            "DEFAULT_GRACE",
            v(vec![dur(gsv_gateway::config::DEFAULT_GRACE)]),
        ),
        (
            "DEFAULT_DRAIN",
            v(vec![dur(gsv_gateway::config::DEFAULT_DRAIN)]),
        ),
        (
            "DEFAULT_HEADER_TIMEOUT",
            v(vec![dur(gsv_gateway::config::DEFAULT_HEADER_TIMEOUT)]),
        ),
        (
            "DEFAULT_UNAUTH_TIMEOUT",
            v(vec![dur(gsv_gateway::config::DEFAULT_UNAUTH_TIMEOUT)]),
        ),
        (
            "DEFAULT_MCP_SESSIONS_PER_TOKEN",
            v(vec![count(
                gsv_gateway::config::DEFAULT_MCP_SESSIONS_PER_TOKEN,
            )]),
        ),
        (
            "DEFAULT_MCP_SESSIONS_MAX",
            v(vec![count(gsv_gateway::config::DEFAULT_MCP_SESSIONS_MAX)]),
        ),
        (
            "DEFAULT_MCP_SESSION_IDLE",
            v(vec![dur(gsv_gateway::config::DEFAULT_MCP_SESSION_IDLE)]),
        ),
        (
            "DEFAULT_PENDING_BYTES_PER_TOKEN",
            v(vec![bytes(
                gsv_gateway::config::DEFAULT_PENDING_BYTES_PER_TOKEN,
            )]),
        ),
        (
            "DEFAULT_PENDING_BYTES_MAX",
            v(vec![bytes(gsv_gateway::config::DEFAULT_PENDING_BYTES_MAX)]),
        ),
        (
            "DEFAULT_FANOUT_RESULT_BYTES_PER_TOKEN",
            v(vec![bytes(
                gsv_gateway::config::DEFAULT_FANOUT_RESULT_BYTES_PER_TOKEN,
            )]),
        ),
        (
            "DEFAULT_FANOUT_RESULT_BYTES_MAX",
            v(vec![bytes(
                gsv_gateway::config::DEFAULT_FANOUT_RESULT_BYTES_MAX,
            )]),
        ),
        (
            "DEFAULT_AGENT_CONNS_PER_TOKEN",
            v(vec![count(
                gsv_gateway::config::DEFAULT_AGENT_CONNS_PER_TOKEN,
            )]),
        ),
        (
            "DEFAULT_AGENT_CONNS_MAX",
            v(vec![count(gsv_gateway::config::DEFAULT_AGENT_CONNS_MAX)]),
        ),
        (
            "auth_failures_per_minute",
            v(vec![Value::Count(config.auth_failures_per_minute.into())]),
        ),
        // gateway/src/*.rs
        (
            "DEFAULT_MAX_UNAUTH",
            v(vec![count(gsv_gateway::admission::DEFAULT_MAX_UNAUTH)]),
        ),
        (
            "DEFAULT_MAX_UNAUTH_PER_SOURCE",
            v(vec![count(
                gsv_gateway::admission::DEFAULT_MAX_UNAUTH_PER_SOURCE,
            )]),
        ),
        (
            "METRICS_PORT_CAPS",
            v(vec![
                count(METRICS_PORT_CAPS.max_unauth),
                count(METRICS_PORT_CAPS.max_unauth_per_source),
            ]),
        ),
        (
            "DEFAULT_INTERVAL",
            v(vec![dur(gsv_gateway::refusals::DEFAULT_INTERVAL)]),
        ),
        (
            "refusals::MAX_KEYS",
            v(vec![count(gsv_gateway::refusals::MAX_KEYS)]),
        ),
        (
            "MAX_PENDING_PER_TOKEN",
            v(vec![count(gsv_gateway::registry::MAX_PENDING_PER_TOKEN)]),
        ),
        (
            "DEFAULT_PENDING_PER_TOKEN",
            v(vec![count(
                gsv_gateway::approvals::DEFAULT_PENDING_PER_TOKEN,
            )]),
        ),
        (
            "DEFAULT_TTL",
            v(vec![dur(gsv_gateway::approvals::DEFAULT_TTL)]),
        ),
        (
            "MAX_PAGE",
            v(vec![Value::Count(gsv_gateway::approvals::MAX_PAGE.into())]),
        ),
        (
            "DEFAULT_PAGE",
            v(vec![Value::Count(
                gsv_gateway::approvals::DEFAULT_PAGE.into(),
            )]),
        ),
        (
            "STORE_THREADS",
            v(vec![count(gsv_gateway::store::STORE_THREADS)]),
        ),
        ("LINGER", v(vec![dur(gsv_gateway::audit::LINGER)])),
        ("BATCH", src("gateway/src/audit.rs", "BATCH", Value::Count)),
        (
            "ASKS_PER_ASKER",
            src(
                "gateway/src/cluster/gather.rs",
                "ASKS_PER_ASKER",
                Value::Count,
            ),
        ),
        (
            "REPLAY_WINDOW",
            v(vec![dur(gsv_gateway::cluster::seal::REPLAY_WINDOW)]),
        ),
        (
            "MAX_SEEN",
            v(vec![count(gsv_gateway::cluster::seal::MAX_SEEN)]),
        ),
        (
            "KEY_MIN",
            v(vec![bytes(gsv_gateway::cluster::seal::KEY_MIN)]),
        ),
        (
            "KEY_MAX",
            v(vec![bytes(gsv_gateway::cluster::seal::KEY_MAX)]),
        ),
        (
            "OVERHEAD",
            v(vec![bytes(gsv_gateway::cluster::seal::OVERHEAD)]),
        ),
        (
            "ANSWERS_AT_ONCE",
            src(
                "gateway/src/cluster/listing.rs",
                "ANSWERS_AT_ONCE",
                Value::Count,
            ),
        ),
        (
            "SERVER_READ_BUFFER",
            src(
                "transport/src/config.rs",
                "SERVER_READ_BUFFER",
                Value::Bytes,
            ),
        ),
        (
            "SERVER_WRITE_BUFFER",
            src(
                "transport/src/config.rs",
                "SERVER_WRITE_BUFFER",
                Value::Bytes,
            ),
        ),
        (
            "CLIENT_READ_BUFFER",
            src(
                "transport/src/config.rs",
                "CLIENT_READ_BUFFER",
                Value::Bytes,
            ),
        ),
        (
            "READ_AHEAD_BYTES",
            v(vec![bytes(gsv_transport::read_ahead::READ_AHEAD_BYTES)]),
        ),
        (
            "DEADLINE_SLACK",
            src(
                "gateway/src/router/delivery.rs",
                "DEADLINE_SLACK",
                Value::Millis,
            ),
        ),
        (
            "STRAY_WINDOW",
            src("gateway/src/node_session.rs", "STRAY_WINDOW", Value::Millis),
        ),
        (
            "ABANDONED_MEMORY",
            src("gateway/src/registry.rs", "ABANDONED_MEMORY", Value::Count),
        ),
        (
            "revocation::POLL",
            src("gateway/src/revocation.rs", "POLL", Value::Millis),
        ),
        (
            "PROBE_TIMEOUT",
            src("gateway/src/probe.rs", "PROBE_TIMEOUT", Value::Millis),
        ),
        (
            "WINDOW",
            src("gateway/src/ratelimit.rs", "WINDOW", Value::Millis),
        ),
        (
            "listener::DRAIN_TIMEOUT",
            src("gateway/src/listener.rs", "DRAIN_TIMEOUT", Value::Millis),
        ),
        // node/src/*.rs
        (
            "DEFAULT_CONNECT_TIMEOUT",
            v(vec![dur(gsv_node::config::DEFAULT_CONNECT_TIMEOUT)]),
        ),
        (
            "Backoff::BASE",
            v(vec![dur(gsv_node::backoff::Backoff::BASE)]),
        ),
        (
            "Backoff::MAX",
            v(vec![dur(gsv_node::backoff::Backoff::MAX)]),
        ),
        (
            "MAX_QUEUED_EVENTS",
            v(vec![count(gsv_node::events::MAX_QUEUED_EVENTS)]),
        ),
        (
            "MAX_QUEUED_BYTES",
            v(vec![bytes(gsv_node::events::MAX_QUEUED_BYTES)]),
        ),
        (
            "MAX_KEPT_RESULTS",
            v(vec![count(gsv_node::ledger::MAX_KEPT_RESULTS)]),
        ),
        (
            "MAX_KEPT_BYTES",
            v(vec![bytes(gsv_node::ledger::MAX_KEPT_BYTES)]),
        ),
        ("RESULT_TTL", v(vec![dur(gsv_node::ledger::RESULT_TTL)])),
        (
            "MAX_REMEMBERED_IDS",
            v(vec![count(gsv_node::ledger::MAX_REMEMBERED_IDS)]),
        ),
        ("ID_TTL", v(vec![dur(gsv_node::ledger::ID_TTL)])),
        (
            "HAND_BACK_TIMEOUT",
            src("node/src/registered.rs", "HAND_BACK_TIMEOUT", Value::Millis),
        ),
        (
            "OUTGOING_FRAMES",
            src("node/src/registered.rs", "OUTGOING_FRAMES", Value::Count),
        ),
        (
            "MAX_TRACKED_BINS",
            v(vec![count(gsv_node::probe::MAX_TRACKED_BINS)]),
        ),
        (
            "LOGIN_SHELL_TIMEOUT",
            src("node/src/probe.rs", "LOGIN_SHELL_TIMEOUT", Value::Millis),
        ),
        ("Limits::max_running", v(vec![count(sessions.max_running)])),
        (
            "Limits::max_running_per_owner",
            v(vec![count(sessions.max_running_per_owner)]),
        ),
        (
            "Limits::max_finished",
            v(vec![count(sessions.max_finished)]),
        ),
        (
            "Limits::max_retained_bytes",
            v(vec![bytes(sessions.max_retained_bytes)]),
        ),
        ("Limits::retention", v(vec![dur(sessions.retention)])),
        (
            "MAX_OUTPUT_CHARS",
            v(vec![count(gsv_node::sessions::MAX_OUTPUT_CHARS)]),
        ),
        ("TAIL_CHARS", v(vec![count(gsv_node::sessions::TAIL_CHARS)])),
        (
            "RAW_RING_BYTES",
            v(vec![bytes(gsv_node::sessions::RAW_RING_BYTES)]),
        ),
        (
            "KILL_GRACE",
            v(vec![dur(gsv_node::sessions::group::KILL_GRACE)]),
        ),
        (
            "MIN_YIELD_MS",
            v(vec![Value::Millis(gsv_node::tools::bash::MIN_YIELD_MS)]),
        ),
        (
            "MAX_YIELD_MS",
            v(vec![Value::Millis(gsv_node::tools::bash::MAX_YIELD_MS)]),
        ),
        (
            "bash::DEFAULT_CALL_TIMEOUT_MS",
            v(vec![Value::Millis(
                gsv_node::tools::bash::DEFAULT_CALL_TIMEOUT_MS,
            )]),
        ),
        (
            "MAX_WAIT_MS",
            v(vec![Value::Millis(gsv_node::tools::process::MAX_WAIT_MS)]),
        ),
        (
            "MAX_DATA_BYTES",
            v(vec![bytes(gsv_node::tools::process::MAX_DATA_BYTES)]),
        ),
        (
            "process::MAX_KEYS",
            v(vec![count(gsv_node::tools::process::MAX_KEYS)]),
        ),
        (
            "MAX_TEXT_BYTES",
            v(vec![bytes(gsv_node::tools::read::MAX_TEXT_BYTES)]),
        ),
        (
            "MAX_IMAGE_BYTES",
            v(vec![Value::Bytes(gsv_node::tools::read::MAX_IMAGE_BYTES)]),
        ),
        (
            "MAX_EDIT_BYTES",
            v(vec![Value::Bytes(gsv_node::tools::edit::MAX_EDIT_BYTES)]),
        ),
        (
            "glob::MAX_MATCHES",
            v(vec![count(gsv_node::tools::glob::MAX_MATCHES)]),
        ),
        (
            "grep::MAX_MATCHES",
            v(vec![count(gsv_node::tools::grep::MAX_MATCHES)]),
        ),
        (
            "MAX_LINE_CHARS",
            v(vec![count(gsv_node::tools::grep::MAX_LINE_CHARS)]),
        ),
        (
            "COUNT_CAP",
            v(vec![count(gsv_node::tools::ignored::COUNT_CAP)]),
        ),
        (
            "MAX_BASE64_BYTES",
            v(vec![bytes(gsv_node::tools::encoding::MAX_BASE64_BYTES)]),
        ),
        (
            "fs_list::MAX_ENTRIES",
            v(vec![count(gsv_node::tools::fs_list::MAX_ENTRIES)]),
        ),
        (
            "MAX_DEPTH",
            v(vec![Value::Count(gsv_node::tools::fs_list::MAX_DEPTH)]),
        ),
        (
            "status::MAX_FILES",
            v(vec![count(gsv_node::tools::git::status::MAX_FILES)]),
        ),
        (
            "log::MAX_COUNT",
            v(vec![Value::Count(gsv_node::tools::git::log::MAX_COUNT)]),
        ),
        (
            "log::MAX_BODY",
            v(vec![bytes(gsv_node::tools::git::log::MAX_BODY)]),
        ),
        (
            "diff::MAX_FILES",
            v(vec![count(gsv_node::tools::git::diff::MAX_FILES)]),
        ),
        (
            "diff::MAX_PATCH",
            v(vec![bytes(gsv_node::tools::git::diff::MAX_PATCH)]),
        ),
        (
            "diff::MAX_PATCHES",
            v(vec![bytes(gsv_node::tools::git::diff::MAX_PATCHES)]),
        ),
        (
            "diff::MAX_CONTEXT",
            v(vec![Value::Count(gsv_node::tools::git::diff::MAX_CONTEXT)]),
        ),
        (
            "list::MAX_LIMIT",
            v(vec![Value::Count(gsv_node::tools::proc::list::MAX_LIMIT)]),
        ),
        (
            "list::DEFAULT_LIMIT",
            v(vec![Value::Count(
                gsv_node::tools::proc::list::DEFAULT_LIMIT,
            )]),
        ),
        (
            "table::MAX_COMMAND_BYTES",
            v(vec![bytes(gsv_node::tools::proc::table::MAX_COMMAND_BYTES)]),
        ),
        (
            "capture::MAX_LINES",
            v(vec![Value::Count(
                gsv_node::tools::term::capture::MAX_LINES,
            )]),
        ),
        (
            "capture::MAX_CAPTURE_BYTES",
            v(vec![bytes(
                gsv_node::tools::term::capture::MAX_CAPTURE_BYTES,
            )]),
        ),
        (
            "send::MAX_TEXT_BYTES",
            v(vec![bytes(gsv_node::tools::term::send::MAX_TEXT_BYTES)]),
        ),
        (
            "send::MAX_KEYS",
            v(vec![count(gsv_node::tools::term::send::MAX_KEYS)]),
        ),
        (
            "term::TMUX_TIMEOUT",
            v(vec![dur(gsv_node::tools::term::TMUX_TIMEOUT)]),
        ),
        (
            "term::MAX_TMUX_OUTPUT",
            v(vec![bytes(gsv_node::tools::term::MAX_TMUX_OUTPUT)]),
        ),
        (
            "write::MAX_NAME_LEN",
            v(vec![bytes(gsv_node::tools::git::write::MAX_NAME_LEN)]),
        ),
        (
            "commit::MAX_MESSAGE",
            v(vec![bytes(gsv_node::tools::git::commit::MAX_MESSAGE)]),
        ),
        (
            "commit::MAX_PATHS",
            v(vec![count(gsv_node::tools::git::commit::MAX_PATHS)]),
        ),
        (
            "write::MAX_FILES",
            v(vec![count(gsv_node::tools::git::write::MAX_FILES)]),
        ),
        (
            "pull::MAX_COMMITS",
            v(vec![count(gsv_node::tools::git::pull::MAX_COMMITS)]),
        ),
        (
            "clone::MAX_DEPTH",
            v(vec![Value::Count(gsv_node::tools::git::clone::MAX_DEPTH)]),
        ),
        (
            "run::MAX_OUTPUT",
            v(vec![bytes(gsv_node::tools::git::run::MAX_OUTPUT)]),
        ),
        // node/src/tools/container/ and node/src/tools/pkg/
        (
            "list::MAX_CONTAINERS",
            v(vec![count(
                gsv_node::tools::container::list::MAX_CONTAINERS,
            )]),
        ),
        (
            "list::MAX_PS_BYTES",
            v(vec![bytes(gsv_node::tools::container::list::MAX_PS_BYTES)]),
        ),
        (
            "logs::DEFAULT_TAIL",
            v(vec![Value::Count(
                gsv_node::tools::container::logs::DEFAULT_TAIL,
            )]),
        ),
        (
            "logs::MAX_TAIL",
            v(vec![Value::Count(
                gsv_node::tools::container::logs::MAX_TAIL,
            )]),
        ),
        (
            "logs::MAX_LOG_BYTES",
            v(vec![bytes(gsv_node::tools::container::logs::MAX_LOG_BYTES)]),
        ),
        (
            "MAX_EXEC_OUTPUT",
            v(vec![bytes(
                gsv_node::tools::container::exec::MAX_EXEC_OUTPUT,
            )]),
        ),
        (
            "MAX_EXEC_ARGS",
            v(vec![count(gsv_node::tools::container::exec::MAX_EXEC_ARGS)]),
        ),
        (
            "MAX_EXEC_ARGV_BYTES",
            v(vec![bytes(
                gsv_node::tools::container::exec::MAX_EXEC_ARGV_BYTES,
            )]),
        ),
        (
            "MAX_EXEC_ENV",
            v(vec![count(gsv_node::tools::container::exec::MAX_EXEC_ENV)]),
        ),
        (
            "search::DEFAULT_LIMIT",
            v(vec![Value::Count(
                gsv_node::tools::pkg::search::DEFAULT_LIMIT,
            )]),
        ),
        (
            "search::MAX_LIMIT",
            v(vec![Value::Count(gsv_node::tools::pkg::search::MAX_LIMIT)]),
        ),
        (
            "MAX_SEARCH_BYTES",
            v(vec![bytes(gsv_node::tools::pkg::search::MAX_SEARCH_BYTES)]),
        ),
        (
            "MAX_PACKAGES",
            v(vec![count(gsv_node::tools::pkg::install::MAX_PACKAGES)]),
        ),
        (
            "MAX_INSTALL_OUTPUT",
            v(vec![bytes(
                gsv_node::tools::pkg::install::MAX_INSTALL_OUTPUT,
            )]),
        ),
        (
            "OUTPUT_TAIL_BYTES",
            v(vec![bytes(
                gsv_node::tools::pkg::install::OUTPUT_TAIL_BYTES,
            )]),
        ),
    ]
}

/// Constant-like names in the table that are not gsv's (nothing to check).
const NOT_OURS: &[&str] = &["RLIMIT_NOFILE"];

/// Files whose every numeric `pub const` the table must name (bare).
const FULLY_COVERED: &[&str] = &["protocol/src/limits.rs", "gateway/src/config.rs"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

const SEPARATORS: &[char] = &[' ', '\u{2009}', '\u{202F}', '\u{A0}'];
/// Unit words a bare number may not be followed by (it would be a size or a duration).
const UNITS: &[&str] = &["KiB", "MiB", "GiB", "ms", "s", "min", "h"];

/// `n` with its digits grouped by three, `sep` between groups.
fn grouped(n: u64, sep: char) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

/// Every way the docs may write `n`: grouped with any separator, or not at all.
fn numbers(n: u64) -> Vec<String> {
    let mut all: Vec<String> = SEPARATORS.iter().map(|&s| grouped(n, s)).collect();
    all.push(n.to_string());
    all.dedup();
    all
}

/// `n` followed by a unit, with any separator between.
fn with_unit(n: u64, unit: &str) -> Vec<String> {
    let mut all = Vec::new();
    for number in numbers(n) {
        for sep in SEPARATORS {
            all.push(format!("{number}{sep}{unit}"));
        }
    }
    all
}

/// The spellings of a value, each with whether it is a bare number.
fn spellings(value: Value) -> Vec<(String, bool)> {
    let bare = |n: u64| {
        numbers(n)
            .into_iter()
            .map(|s| (s, true))
            .collect::<Vec<_>>()
    };
    let unit = |n: u64, u: &str| {
        with_unit(n, u)
            .into_iter()
            .map(|s| (s, false))
            .collect::<Vec<_>>()
    };
    let mut all = Vec::new();
    match value {
        Value::Count(n) => all.extend(bare(n)),
        Value::Bytes(n) => {
            for (size, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
                if n % size == 0 {
                    all.extend(unit(n / size, name));
                }
            }
            all.extend(bare(n));
        }
        Value::Millis(ms) => {
            for (size, name) in [(3_600_000u64, "h"), (60_000, "min"), (1_000, "s")] {
                if ms % size == 0 {
                    all.extend(unit(ms / size, name));
                }
            }
            if ms % 1_000 != 0 {
                // 500 ms as 0.5 s, 2 500 ms as 2.5 s.
                let secs = format!("{}.{:03}", ms / 1_000, ms % 1_000);
                let secs = secs.trim_end_matches('0');
                for sep in SEPARATORS {
                    all.push((format!("{secs}{sep}s"), false));
                }
            }
            all.extend(unit(ms, "ms"));
        }
    }
    all
}

/// Where `cell` states `spelling` as a whole number, at or after char `from`: the
/// char range of the first such place. Not inside a longer number ("4 096" is not in
/// "14 096" nor in "4 096 000"), and, for a bare number, not as the number of a size or
/// duration ("64" is not in "64 MiB").
fn find(cell: &str, spelling: &str, bare: bool, from: usize) -> Option<(usize, usize)> {
    let chars: Vec<char> = cell.chars().collect();
    let want: Vec<char> = spelling.chars().collect();
    let is_sep = |c: char| SEPARATORS.contains(&c);
    let fits = |start: usize| {
        let end = start + want.len();
        if end > chars.len() || chars[start..end] != want[..] {
            return false;
        }
        // Before: no digit, decimal point, or digit-and-separator.
        if let Some(&b) = start.checked_sub(1).map(|i| &chars[i]) {
            if b.is_ascii_digit() || b == '.' || b == ',' {
                return false;
            }
            if is_sep(b) && start >= 2 && chars[start - 2].is_ascii_digit() {
                return false;
            }
        }
        let rest = &chars[end..];
        if bare {
            // After: no digit, decimal part, or another group of digits.
            match rest {
                [c, ..] if c.is_ascii_digit() => return false,
                ['.' | ',', d, ..] if d.is_ascii_digit() => return false,
                [s, d, ..] if is_sep(*s) && d.is_ascii_digit() => return false,
                _ => {}
            }
            // Not followed by a unit.
            if let [s, ..] = rest {
                if is_sep(*s) {
                    let word: String = rest[1..].iter().take_while(|c| c.is_alphabetic()).collect();
                    if UNITS.contains(&word.as_str()) {
                        return false;
                    }
                }
            }
            true
        } else {
            // A unit ends a word: "10 s" is not in "10 sessions".
            !matches!(rest.first(), Some(c) if c.is_alphanumeric())
        }
    };
    (from..chars.len())
        .find(|&start| fits(start))
        .map(|start| (start, start + want.len()))
}

/// Whether `cell` states `spelling` anywhere (see [`find`]).
fn states(cell: &str, spelling: &str, bare: bool) -> bool {
    find(cell, spelling, bare, 0).is_some()
}

/// Where `cell` states `value` first, at or after char `from`, in any spelling.
fn find_value(cell: &str, value: Value, from: usize) -> Option<(usize, usize)> {
    spellings(value)
        .iter()
        .filter_map(|(s, bare)| find(cell, s, *bare, from))
        .min()
}

/// The value of `const IDENT: T = EXPR;` in `source`, for the simple expressions the
/// private constants use: integer literals and products, `Duration::from_secs(..)`,
/// `Duration::from_millis(..)`.
fn eval_const(source: &str, file: &str, ident: &str, kind: fn(u64) -> Value) -> Value {
    let needle = format!("const {ident}:");
    let start = source
        .find(&needle)
        .unwrap_or_else(|| panic!("{file}: no `{needle}`; update tests/docs_limits.rs"));
    let decl = &source[start..];
    let decl = &decl[..decl.find(';').expect("declaration ends with ;")];
    let expr = decl[decl.find('=').expect("const has =") + 1..].trim();
    let product = |e: &str| -> Option<u64> {
        e.split('*').try_fold(1u64, |acc, term| {
            let digits: String = term.trim().chars().filter(|&c| c != '_').collect();
            digits.parse::<u64>().ok().map(|n| acc * n)
        })
    };
    let call = |prefix: &str| {
        expr.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(product)
    };
    let value = if let Some(secs) = call("Duration::from_secs(") {
        Value::Millis(secs * 1_000)
    } else if let Some(ms) = call("Duration::from_millis(") {
        Value::Millis(ms)
    } else if let Some(n) = product(expr) {
        kind(n)
    } else {
        panic!("{file}: cannot evaluate `{ident} = {expr}`; update tests/docs_limits.rs")
    };
    match (kind(0), value) {
        (Value::Millis(_), Value::Millis(_))
        | (Value::Count(_), Value::Count(_))
        | (Value::Bytes(_), Value::Bytes(_)) => value,
        _ => panic!("{file}: `{ident}` is not of the kind the test expects"),
    }
}

/// The rows of the table right under `## Limits`, as cells.
fn limits_table(doc: &str) -> Vec<Vec<String>> {
    let mut lines = doc.lines().skip_while(|l| l.trim_end() != "## Limits");
    assert!(
        lines.next().is_some(),
        "docs/operations.md has no `## Limits` heading"
    );
    let mut lines = lines
        .take_while(|l| !l.starts_with("#"))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    let header = cells(lines.next().expect("a table under `## Limits`"));
    assert_eq!(
        header,
        ["Limit", "Value", "Flag or constant", "At the limit"],
        "the header of the limits table"
    );
    let rule = lines.next().expect("the table's separator row");
    assert!(
        rule.starts_with("|---"),
        "the table's separator row: {rule}"
    );
    let rows: Vec<Vec<String>> = lines.map(cells).collect();
    for row in &rows {
        assert_eq!(
            row.len(),
            4,
            "a row of the limits table with {} cells: {row:?}",
            row.len()
        );
    }
    assert!(
        rows.len() > 20,
        "the limits table has only {} rows",
        rows.len()
    );
    rows
}

/// The cells of one table row (`\|` is a `|` inside a cell).
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out.iter().map(|c| c.trim().to_owned()).collect()
}

/// The spans in backticks of a cell.
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// A name that looks like a constant (`MAX_FRAME_BYTES`, `glob::MAX_MATCHES`,
/// `Backoff::BASE`) or a field of the node's session `Limits`.
fn constant_like(span: &str) -> bool {
    let last = span.rsplit("::").next().unwrap_or(span);
    let screaming = last.len() > 1
        && last
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && last.chars().any(|c| c.is_ascii_uppercase());
    let prefix_ok = span
        .strip_suffix(last)
        .map(|p| {
            p.is_empty()
                || (p.ends_with("::")
                    && p[..p.len() - 2]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_'))
        })
        .unwrap_or(false);
    prefix_ok && (screaming || span.starts_with("Limits::"))
}

/// The numeric `pub const` names of a source file.
fn pub_consts(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| l.strip_prefix("pub const "))
        .filter_map(|rest| {
            let (name, ty) = rest.split_once(':')?;
            let ty = ty.split('=').next()?.trim();
            matches!(ty, "usize" | "u64" | "u32" | "Duration").then(|| name.trim().to_owned())
        })
        .collect()
}

#[test]
fn the_limits_table_states_the_values_in_the_code() {
    let doc = read("docs/operations.md");
    let rows = limits_table(&doc);
    let known = known();
    let mut errors = Vec::new();

    // Each known constant is named by exactly one row.
    for (name, _) in &known {
        let tag = format!("`{name}`");
        let naming: Vec<&str> = rows
            .iter()
            .filter(|r| r[2].contains(&tag))
            .map(|r| r[0].as_str())
            .collect();
        match naming.len() {
            1 => {}
            0 => errors.push(format!("{name}: no row of the limits table names it")),
            n => errors.push(format!("{name}: named by {n} rows (one only): {naming:?}")),
        }
    }

    // Each row states the values of the constants it names, in the order it names
    // them: in "2 KiB / 4 KiB" for `READ_BUFFER`, `WRITE_BUFFER`, the read buffer is
    // the first number, so a read buffer of 4 KiB fails the row.
    for row in &rows {
        let mut named: Vec<(usize, &str, &Expected)> = known
            .iter()
            .filter_map(|(name, expected)| {
                row[2]
                    .find(&format!("`{name}`"))
                    .map(|at| (at, *name, expected))
            })
            .collect();
        named.sort_by_key(|(at, _, _)| *at);
        let mut cursor = 0;
        for (_, name, expected) in named {
            let values = match expected {
                Expected::Values(v) => v.clone(),
                Expected::Source(s) => vec![eval_const(&read(s.file), s.file, s.ident, s.kind)],
            };
            for value in values {
                match find_value(&row[1], value, cursor) {
                    Some((_, end)) => cursor = end,
                    None => {
                        let some: Vec<String> = spellings(value)
                            .into_iter()
                            .map(|(s, _)| s)
                            .filter(|s| !s.contains(|c: char| c != ' ' && SEPARATORS.contains(&c)))
                            .take(3)
                            .collect();
                        errors.push(format!(
                            "{name} = {value:?}: the row \"{}\" does not state it (as {some:?}) \
                             in \"{}\"{}",
                            row[0],
                            row[1],
                            if cursor > 0 {
                                " after the values of the names before it"
                            } else {
                                ""
                            },
                        ));
                    }
                }
            }
        }
    }

    for row in &rows {
        for span in code_spans(&row[2]) {
            if constant_like(span)
                && !NOT_OURS.contains(&span)
                && !known.iter().any(|(n, _)| *n == span)
            {
                errors.push(format!(
                    "row \"{}\" names `{span}`, which tests/docs_limits.rs does not check: add it to known()",
                    row[0]
                ));
            }
        }
    }

    for file in FULLY_COVERED {
        for name in pub_consts(&read(file)) {
            if !known.iter().any(|(n, _)| *n == name) {
                errors.push(format!(
                    "{file}: `{name}` is not in the limits table's test (known())"
                ));
            }
        }
    }

    assert!(
        errors.is_empty(),
        "docs/operations.md, ## Limits:\n{}",
        errors.join("\n")
    );
}

#[test]
fn spellings_match_as_the_docs_write_them() {
    assert!(states("4 096 (then `overloaded`)", "4 096", true));
    assert!(states("4\u{2009}096", "4\u{2009}096", true));
    assert!(!states("14 096", "4 096", true));
    assert!(!states("4 096 000", "4 096", true));
    assert!(!states("64 MiB of output", "64", true));
    assert!(states("64 running, 64 MiB", "64", true));
    assert!(!states("100 000 entries", "100", true));
    assert!(states("1 000 paths / 100 lines", "100", true));
    assert!(!states("10 sessions", "10 s", false));
    assert!(!states("0.5 s", "5 s", false));
    assert!(states("0.5 s doubling to 30 s", "0.5 s", false));
    assert_eq!(find("2 KiB / 4 KiB", "4 KiB", false, 0), Some((8, 13)));
    assert_eq!(find("2 KiB / 4 KiB", "2 KiB", false, 1), None);
    let any = |v: Value, cell: &str| spellings(v).iter().any(|(s, b)| states(cell, s, *b));
    assert!(any(Value::Millis(500), "0.5 s doubling"));
    assert!(any(
        Value::Millis(86_400_000),
        "24 h (longer requests are clamped)"
    ));
    assert!(any(
        Value::Bytes(16 * 1024 * 1024 - 64 * 1024),
        "16 MiB − 64 KiB (16 711 680 bytes)"
    ));
    assert!(any(Value::Bytes(65_536), "64 KiB"));
    assert!(!any(Value::Bytes(65_536), "32 KiB"));
    assert!(any(Value::Count(128), "128 bytes"));
    assert_eq!(grouped(16_777_216, ' '), "16 777 216");
    assert_eq!(grouped(512, ' '), "512");
    assert!(constant_like("glob::MAX_MATCHES"));
    assert!(constant_like("Limits::max_running"));
    assert!(!constant_like("--grace-ms"));
    assert!(!constant_like("gateway/src/conn.rs"));
    assert!(!constant_like("overloaded"));
}
