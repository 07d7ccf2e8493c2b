//! Why a routed call failed: every way a `tools.call` can end other than with the
//! node's result, from the name check to the last wait for a reconnecting node.
//!
//! Agents branch on the codes (and read the details: which node, which approval,
//! which limit), so each variant carries what its message and details need, and this
//! file is the one place that says which code and details each gets. A node's own
//! error answer passes through unchanged ([`RouteError::Node`]).

use crate::approvals::ApprovalError;
use crate::budget::BudgetError;
use crate::error::{shape, WireError};
use crate::registry::Disconnected;
use crate::toolset::ArgsError;
use gsv_protocol::limits::{MAX_FRAME_BYTES, MAX_PENDING_PER_NODE};
use gsv_protocol::names::NameError;
use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape};
use thiserror::Error;

/// A call that ended without the node's result.
#[derive(Debug, Error)]
pub enum RouteError {
    /// The gateway drains: new calls go to its successor.
    #[error("the gateway is shutting down; retry on its successor")]
    ShuttingDown,
    #[error("no tool {name:?}: {reason}")]
    BadName { name: String, reason: NameError },
    /// Outside the token's policy.
    #[error("this token may not call {name}")]
    NotAllowed { name: String },
    /// Text typed into a terminal (`term_send`) by a token that may not run the node's
    /// Bash: typing into a shell is running commands.
    #[error("this token may not call {bash}, so it may not type into the node's terminals ({name}) either")]
    ShellInputNotAllowed { name: String, bash: String },
    /// The arguments do not fit in the token's (or the gateway's) bytes in flight.
    #[error("{0}; retry when some of its calls finish")]
    Budget(BudgetError),
    #[error("node {node} is offline since {}", crate::time::rfc3339(*.since))]
    NodeOffline { node: String, since: u64 },
    #[error("no node named {node} is connected")]
    NoNode { node: String },
    #[error("node {node} has no tool named {tool}")]
    NoTool { node: String, tool: String },
    #[error("args are not valid JSON: {0}")]
    ArgsNotJson(serde_json::Error),
    #[error(transparent)]
    Args(#[from] ArgsError),
    /// The node left while an operator decided on its guard's question.
    #[error("node {node} went away while the call waited for approval")]
    GoneDuringApproval { node: String },

    /// The approval queue refused the request.
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    #[error("an operator denied approval request {approval}")]
    Denied { approval: String },
    #[error("approval queue dropped the request")]
    ApprovalDropped,
    #[error("approval request {approval} was not decided in time")]
    ApprovalTimedOut { approval: String },
    #[error("cancelled by the caller while waiting for approval")]
    CancelledAwaitingApproval,
    /// The caller's own user (MCP elicitation) did not answer in time.
    #[error("nobody answered whether {name} may run in time")]
    NobodyAnswered { name: String },
    /// The caller's own user said no.
    #[error("the user declined to run {name} when asked")]
    UserDeclined { name: String },

    #[error("node {node} has too many calls pending")]
    NodeFull { node: String },
    #[error("this token already has {share} calls pending on node {node}, its share of the node's {MAX_PENDING_PER_NODE}; retry when some finish")]
    TokenShare { node: String, share: usize },
    #[error("node {node} is disconnecting")]
    NodeClosing { node: String },
    #[error("the deadline passed before dispatch")]
    DeadlineBeforeDispatch,
    #[error("the call's arguments do not fit in one {MAX_FRAME_BYTES}-byte frame")]
    ArgsTooLarge,
    /// The connection closed before the call went out: it did not run.
    #[error("node {node} closed before the call could be sent")]
    NotSent { node: String },
    #[error("no result before the call's deadline; the call was cancelled on the node")]
    Deadline,
    #[error("cancelled by the caller")]
    Cancelled,
    /// The node came back as a new process: the call's result is lost.
    #[error("node {node} restarted while the call was running; it may have run")]
    Restarted { node: String },
    #[error(
        "node {node} came back with too many calls pending to take this one again; it may have run"
    )]
    BackTooBusy { node: String },
    #[error(transparent)]
    Disconnected(#[from] Disconnected),
    #[error("cancelled by the caller while its node was disconnected")]
    CancelledWhileDisconnected,

    /// The node's own error answer, passed on as it came.
    #[error("{}", .0.message)]
    Node(ErrorShape),

    /// The one approval decision of the fan-out this call is part of refused it (denied,
    /// expired, cancelled …): the error every node of the fan-out gets, as it came.
    #[error("{}", .0.message)]
    FanoutApproval(ErrorShape),
}

impl WireError for RouteError {
    fn code(&self) -> ErrorCode {
        use RouteError::*;
        match self {
            ShuttingDown | Budget(_) | NodeFull { .. } | TokenShare { .. } => ErrorCode::Overloaded,
            BadName { .. } | NoNode { .. } | NoTool { .. } => ErrorCode::NotFound,
            NotAllowed { .. } | ShellInputNotAllowed { .. } => ErrorCode::Forbidden,
            NodeOffline { .. } | GoneDuringApproval { .. } | NodeClosing { .. } => {
                ErrorCode::NodeOffline
            }
            ArgsNotJson(_) => ErrorCode::InvalidArgs,
            Args(e) => e.code(),
            Approval(e) => e.code(),
            Denied { .. } | UserDeclined { .. } => ErrorCode::Denied,
            ApprovalDropped => ErrorCode::Internal,
            ApprovalTimedOut { .. } | NobodyAnswered { .. } | DeadlineBeforeDispatch | Deadline => {
                ErrorCode::Timeout
            }
            CancelledAwaitingApproval | Cancelled | CancelledWhileDisconnected => {
                ErrorCode::Cancelled
            }
            ArgsTooLarge => ErrorCode::TooLarge,
            NotSent { .. } | Restarted { .. } | BackTooBusy { .. } => ErrorCode::NodeDisconnected,
            Disconnected(e) => e.code(),
            Node(e) | FanoutApproval(e) => e.code,
        }
    }

    fn details(&self) -> Option<ErrorDetails> {
        use RouteError::*;
        match self {
            ShuttingDown => Some(ErrorDetails::Shutdown { shutdown: true }),
            Budget(e) => Some(ErrorDetails::limit(e.limit(), e.max())),
            NodeOffline { node, since } => Some(ErrorDetails::Node {
                node: node.clone(),
                since: Some(*since),
            }),
            GoneDuringApproval { node } => Some(ErrorDetails::Node {
                node: node.clone(),
                since: None,
            }),
            Args(e) => e.details(),
            Approval(e) => e.details(),
            Denied { approval } | ApprovalTimedOut { approval } => Some(ErrorDetails::Approval {
                approval: approval.clone(),
            }),
            UserDeclined { .. } => Some(ErrorDetails::Via {
                via: "caller".to_owned(),
            }),
            TokenShare { share, .. } => {
                Some(ErrorDetails::limit("pending_calls_per_token", *share))
            }
            NotSent { node } => Some(ErrorDetails::disconnected(false, node.as_str())),
            Restarted { node } => Some(ErrorDetails::NodeDisconnected {
                dispatched: true,
                node: node.clone(),
                restarted: Some(true),
            }),
            BackTooBusy { node } => Some(ErrorDetails::disconnected(true, node.as_str())),
            Disconnected(e) => e.details(),
            _ => None,
        }
    }

    /// The node's own answer goes on exactly as it came (its `retryable` and
    /// `details` included); every other variant is built from its code and details.
    fn to_shape(&self) -> ErrorShape {
        match self {
            RouteError::Node(e) | RouteError::FanoutApproval(e) => e.clone(),
            other => shape(other.code(), other.to_string(), other.details()),
        }
    }
}

impl From<RouteError> for ErrorShape {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::Node(shape) | RouteError::FanoutApproval(shape) => shape,
            other => other.to_shape(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::http_status;
    use gsv_protocol::NodeId;

    fn wire(e: RouteError) -> String {
        serde_json::to_string(&ErrorShape::from(e)).expect("shape")
    }

    #[test]
    fn each_variant_has_its_code_and_message() {
        use RouteError::*;
        let bad_json = || serde_json::from_str::<u8>("{").expect_err("not JSON");
        let why = bad_json().to_string();
        let name = || "lab__Bash".to_owned();
        let node = || "lab".to_owned();
        let cases: Vec<(RouteError, ErrorCode, String)> = vec![
            (
                ShuttingDown,
                ErrorCode::Overloaded,
                "the gateway is shutting down; retry on its successor".into(),
            ),
            (
                BadName {
                    name: "x".into(),
                    reason: NameError::Namespaced("x".into()),
                },
                ErrorCode::NotFound,
                format!("no tool \"x\": {}", NameError::Namespaced("x".into())),
            ),
            (
                NotAllowed { name: name() },
                ErrorCode::Forbidden,
                "this token may not call lab__Bash".into(),
            ),
            (
                ShellInputNotAllowed {
                    name: "lab__term_send".into(),
                    bash: "lab__Bash".into(),
                },
                ErrorCode::Forbidden,
                "this token may not call lab__Bash, so it may not type into the node's terminals (lab__term_send) either".into(),
            ),
            (
                Budget(BudgetError::Full { max: 10 }),
                ErrorCode::Overloaded,
                "the gateway already holds 10 bytes of call arguments in flight; retry when some of its calls finish".into(),
            ),
            (
                NodeOffline {
                    node: node(),
                    since: 951_782_400_000,
                },
                ErrorCode::NodeOffline,
                "node lab is offline since 2000-02-29T00:00:00Z".into(),
            ),
            (
                NoNode { node: node() },
                ErrorCode::NotFound,
                "no node named lab is connected".into(),
            ),
            (
                NoTool {
                    node: node(),
                    tool: "Nope".into(),
                },
                ErrorCode::NotFound,
                "node lab has no tool named Nope".into(),
            ),
            (
                ArgsNotJson(bad_json()),
                ErrorCode::InvalidArgs,
                format!("args are not valid JSON: {why}"),
            ),
            (
                Args(ArgsError {
                    tool: "Read".into(),
                    path: "/".into(),
                    reason: "r".into(),
                }),
                ErrorCode::InvalidArgs,
                "arguments of Read are invalid at /: r".into(),
            ),
            (
                GoneDuringApproval { node: node() },
                ErrorCode::NodeOffline,
                "node lab went away while the call waited for approval".into(),
            ),
            (
                Approval(ApprovalError::TooManyPending { per_token: 3 }),
                ErrorCode::Overloaded,
                "this token already has 3 approval requests waiting for an operator, its share; retry when some are decided".into(),
            ),
            (
                Denied {
                    approval: "ab12".into(),
                },
                ErrorCode::Denied,
                "an operator denied approval request ab12".into(),
            ),
            (
                ApprovalDropped,
                ErrorCode::Internal,
                "approval queue dropped the request".into(),
            ),
            (
                ApprovalTimedOut {
                    approval: "ab12".into(),
                },
                ErrorCode::Timeout,
                "approval request ab12 was not decided in time".into(),
            ),
            (
                CancelledAwaitingApproval,
                ErrorCode::Cancelled,
                "cancelled by the caller while waiting for approval".into(),
            ),
            (
                NobodyAnswered { name: name() },
                ErrorCode::Timeout,
                "nobody answered whether lab__Bash may run in time".into(),
            ),
            (
                UserDeclined { name: name() },
                ErrorCode::Denied,
                "the user declined to run lab__Bash when asked".into(),
            ),
            (
                NodeFull { node: node() },
                ErrorCode::Overloaded,
                "node lab has too many calls pending".into(),
            ),
            (
                TokenShare {
                    node: node(),
                    share: 4,
                },
                ErrorCode::Overloaded,
                format!("this token already has 4 calls pending on node lab, its share of the node's {MAX_PENDING_PER_NODE}; retry when some finish"),
            ),
            (
                NodeClosing { node: node() },
                ErrorCode::NodeOffline,
                "node lab is disconnecting".into(),
            ),
            (
                DeadlineBeforeDispatch,
                ErrorCode::Timeout,
                "the deadline passed before dispatch".into(),
            ),
            (
                ArgsTooLarge,
                ErrorCode::TooLarge,
                format!("the call's arguments do not fit in one {MAX_FRAME_BYTES}-byte frame"),
            ),
            (
                NotSent { node: node() },
                ErrorCode::NodeDisconnected,
                "node lab closed before the call could be sent".into(),
            ),
            (
                Deadline,
                ErrorCode::Timeout,
                "no result before the call's deadline; the call was cancelled on the node".into(),
            ),
            (Cancelled, ErrorCode::Cancelled, "cancelled by the caller".into()),
            (
                Restarted { node: node() },
                ErrorCode::NodeDisconnected,
                "node lab restarted while the call was running; it may have run".into(),
            ),
            (
                BackTooBusy { node: node() },
                ErrorCode::NodeDisconnected,
                "node lab came back with too many calls pending to take this one again; it may have run".into(),
            ),
            (
                Disconnected(crate::registry::Disconnected {
                    node: NodeId::parse("lab").expect("id"),
                }),
                ErrorCode::NodeDisconnected,
                "node lab disconnected while the call was running; it may have run".into(),
            ),
            (
                CancelledWhileDisconnected,
                ErrorCode::Cancelled,
                "cancelled by the caller while its node was disconnected".into(),
            ),
        ];
        for (e, code, message) in cases {
            assert_eq!(e.status(), http_status(code), "{e}");
            let shape = ErrorShape::from(e);
            assert_eq!(
                (shape.code, shape.message.as_str()),
                (code, message.as_str())
            );
            assert_eq!(shape.retryable, code.default_retryable());
        }
    }

    #[test]
    fn details_are_the_documented_shapes() {
        assert_eq!(
            wire(RouteError::ShuttingDown),
            r#"{"code":"overloaded","message":"the gateway is shutting down; retry on its successor","retryable":true,"details":{"shutdown":true}}"#
        );
        assert_eq!(
            wire(RouteError::Budget(BudgetError::TokenShare {
                held: 5,
                max: 4
            })),
            r#"{"code":"overloaded","message":"this token already has 5 bytes of call arguments in flight, over its share of 4; retry when some of its calls finish","retryable":true,"details":{"limit":"pending_bytes_per_token","max":4}}"#
        );
        assert_eq!(
            wire(RouteError::NodeOffline {
                node: "lab".into(),
                since: 0
            }),
            r#"{"code":"node_offline","message":"node lab is offline since 1970-01-01T00:00:00Z","retryable":true,"details":{"node":"lab","since":0}}"#
        );
        assert_eq!(
            wire(RouteError::GoneDuringApproval { node: "lab".into() }),
            r#"{"code":"node_offline","message":"node lab went away while the call waited for approval","retryable":true,"details":{"node":"lab"}}"#
        );
        assert_eq!(
            wire(RouteError::Denied {
                approval: "ab12".into()
            }),
            r#"{"code":"denied","message":"an operator denied approval request ab12","retryable":false,"details":{"approval":"ab12"}}"#
        );
        assert_eq!(
            wire(RouteError::UserDeclined {
                name: "lab__Bash".into()
            }),
            r#"{"code":"denied","message":"the user declined to run lab__Bash when asked","retryable":false,"details":{"via":"caller"}}"#
        );
        assert_eq!(
            wire(RouteError::TokenShare {
                node: "lab".into(),
                share: 4
            }),
            format!(
                r#"{{"code":"overloaded","message":"this token already has 4 calls pending on node lab, its share of the node's {MAX_PENDING_PER_NODE}; retry when some finish","retryable":true,"details":{{"limit":"pending_calls_per_token","max":4}}}}"#
            )
        );
        assert_eq!(
            wire(RouteError::NotSent { node: "lab".into() }),
            r#"{"code":"node_disconnected","message":"node lab closed before the call could be sent","retryable":true,"details":{"dispatched":false,"node":"lab"}}"#
        );
        assert_eq!(
            wire(RouteError::Restarted { node: "lab".into() }),
            r#"{"code":"node_disconnected","message":"node lab restarted while the call was running; it may have run","retryable":true,"details":{"dispatched":true,"node":"lab","restarted":true}}"#
        );
        assert_eq!(
            wire(RouteError::BackTooBusy { node: "lab".into() }),
            r#"{"code":"node_disconnected","message":"node lab came back with too many calls pending to take this one again; it may have run","retryable":true,"details":{"dispatched":true,"node":"lab"}}"#
        );
    }

    #[test]
    fn a_nodes_own_error_passes_through_unchanged() {
        let mut from_node = ErrorShape::new(ErrorCode::ApprovalRequired, "ask first");
        from_node.retryable = true;
        from_node.details = Some(serde_json::json!({"reason": "r", "summary": "s", "x": 1}));
        let e = RouteError::Node(from_node.clone());
        assert_eq!(e.code(), ErrorCode::ApprovalRequired);
        assert_eq!(e.to_string(), "ask first");
        assert_eq!(e.to_shape(), from_node);
        assert_eq!(ErrorShape::from(e), from_node);
    }
}
