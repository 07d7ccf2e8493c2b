//! Why a connection was refused before `hello-ok`: everything `challenge` → `connect`
//! can go wrong with, from a frame that is not a `connect` to a token that is not
//! valid, and the checks each session runs after authentication (a node's
//! declaration and enrollment, an agent's stored policy).
//!
//! A refusal is answered once, closes the connection and is counted and audited by
//! its code (`crate::refusals`), so the code each variant gets is decided here, in
//! one place; the message is what the peer (and the operator reading the audit log)
//! sees.

use super::role_str;
use crate::error::WireError;
use crate::policy::PolicyError;
use crate::store::StoreError;
use crate::token::TokenKind;
use crate::toolset::DeclarationError;
use gsv_protocol::frame::FrameError;
use gsv_protocol::names::NameError;
use gsv_protocol::{ErrorCode, ErrorDetails, NodeId, Role, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};
use thiserror::Error;
use tokio_tungstenite::tungstenite::Error as WsError;

/// A refused connect.
#[derive(Debug, Error)]
pub enum HandshakeError {
    /// No authenticated `connect` within the handshake timeout.
    #[error("handshake not completed within {ms} ms")]
    Timeout { ms: u128 },
    /// The `challenge` could not be sent.
    #[error("{0}")]
    ChallengeNotSent(WsError),
    #[error("binary frames are not part of the protocol")]
    BinaryFrame,
    #[error("connection closed during the handshake")]
    Closed,
    #[error("frame of {size} bytes exceeds the {max_size}-byte limit before hello-ok")]
    FrameTooLarge { size: usize, max_size: usize },
    #[error("WebSocket error: {0}")]
    WebSocket(WsError),
    /// The first frame does not decode.
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("the first frame must be a connect request")]
    NotARequest,
    #[error("expected connect before anything else, got {method}")]
    NotConnect { method: String },
    #[error("connect params: {0}")]
    BadParams(serde_json::Error),
    #[error("connect needs params")]
    NoParams,
    /// The client's range (`min..=max`) and the gateway's do not overlap.
    #[error("no common protocol version: client offers {min}..={max}, gateway speaks {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}")]
    NoCommonProtocol { min: u32, max: u32 },
    /// A node dialled `/v1/agent` or the reverse.
    #[error("role {} does not match this endpoint (/v1/{})", role_str(*.offered), role_str(*.endpoint))]
    WrongRole { offered: Role, endpoint: Role },
    #[error("auth.nonce does not echo this connection's challenge")]
    NonceMismatch,
    /// The store's blocking task failed.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
    /// Too many failed authentications from this address.
    #[error("too many failed authentications from this address; wait a minute")]
    RateLimited,
    #[error("invalid or revoked token")]
    InvalidToken,
    /// The token lookup failed (the store error is logged, not sent).
    #[error("token store unavailable")]
    TokenStore(#[source] StoreError),

    /// An agent token whose stored policy does not compile.
    #[error("stored policy: {0}")]
    StoredPolicy(PolicyError),
    #[error("a node token cannot connect as an agent")]
    NodeTokenAsAgent,
    /// The token holds its share of agent connections, or the gateway its total.
    #[error("too many agent connections open ({limit} = {max}); close one, then retry")]
    TooManyConnections { limit: &'static str, max: usize },
    #[error("a node's connect needs a node object")]
    NoNodeObject,
    #[error(transparent)]
    BadNodeId(NameError),
    /// An admin or agent token on `/v1/node`.
    #[error("{0} tokens cannot connect as nodes")]
    NotANodeToken(TokenKind),
    #[error("this token is bound to node {bound}, not {claimed}")]
    BoundToOtherNode { bound: String, claimed: NodeId },
    /// The node's tool declaration is refused.
    #[error(transparent)]
    Declaration(#[from] DeclarationError),
    /// Redeeming a join token failed in the store.
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("node {node} is already enrolled with another credential; revoke it (gsv token list / revoke) to enroll again")]
    AlreadyEnrolled { node: NodeId },
    #[error("this join token was already used")]
    JoinTokenUsed,
    /// Comparing the node's offer with its accepted one failed (store).
    #[error(transparent)]
    Offer(#[from] crate::offers::OfferError),
    /// A node's bulk lane opened with a join token, or without the instance it joins.
    #[error("a node's bulk lane needs the node's credential and the instance of its connection")]
    LaneNeedsConnection,
    /// A node's bulk lane for a connection this gateway does not hold.
    #[error("node {node} has no connection of this instance here for a bulk lane to join")]
    LaneWithoutConnection { node: String },
}

impl WireError for HandshakeError {
    fn code(&self) -> ErrorCode {
        use HandshakeError::*;
        match self {
            Timeout { .. } => ErrorCode::Timeout,
            ChallengeNotSent(_) | Task(_) | TokenStore(_) | StoredPolicy(_) | Store(_) => {
                ErrorCode::Internal
            }
            BinaryFrame | Closed | WebSocket(_) | Frame(_) | NotARequest | NotConnect { .. } => {
                ErrorCode::InvalidFrame
            }
            FrameTooLarge { .. } => ErrorCode::TooLarge,
            BadParams(_) | NoParams | WrongRole { .. } | NoNodeObject | BadNodeId(_) => {
                ErrorCode::InvalidArgs
            }
            NoCommonProtocol { .. } => ErrorCode::UnsupportedProtocol,
            NonceMismatch | InvalidToken | JoinTokenUsed => ErrorCode::Unauthorized,
            RateLimited => ErrorCode::RateLimited,
            TooManyConnections { .. } => ErrorCode::Overloaded,
            NodeTokenAsAgent
            | NotANodeToken(_)
            | BoundToOtherNode { .. }
            | AlreadyEnrolled { .. } => ErrorCode::Forbidden,
            LaneNeedsConnection => ErrorCode::InvalidArgs,
            LaneWithoutConnection { .. } => ErrorCode::NodeOffline,
            Declaration(e) => e.code(),
            Offer(e) => e.code(),
        }
    }

    fn details(&self) -> Option<ErrorDetails> {
        match self {
            HandshakeError::NoCommonProtocol { .. } => Some(ErrorDetails::Protocol {
                max: PROTOCOL_VERSION,
                min: MIN_PROTOCOL_VERSION,
            }),
            HandshakeError::Declaration(e) => e.details(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_code_and_message() {
        use HandshakeError::*;
        let node = || NodeId::parse("lab").expect("id");
        let bad_json = || serde_json::from_str::<u8>("{").expect_err("not JSON");
        let why = bad_json().to_string();
        let cases: Vec<(HandshakeError, ErrorCode, String)> = vec![
            (
                Timeout { ms: 10_000 },
                ErrorCode::Timeout,
                "handshake not completed within 10000 ms".into(),
            ),
            (
                ChallengeNotSent(WsError::ConnectionClosed),
                ErrorCode::Internal,
                WsError::ConnectionClosed.to_string(),
            ),
            (
                BinaryFrame,
                ErrorCode::InvalidFrame,
                "binary frames are not part of the protocol".into(),
            ),
            (
                Closed,
                ErrorCode::InvalidFrame,
                "connection closed during the handshake".into(),
            ),
            (
                FrameTooLarge {
                    size: 70_000,
                    max_size: 65_536,
                },
                ErrorCode::TooLarge,
                "frame of 70000 bytes exceeds the 65536-byte limit before hello-ok".into(),
            ),
            (
                WebSocket(WsError::ConnectionClosed),
                ErrorCode::InvalidFrame,
                format!("WebSocket error: {}", WsError::ConnectionClosed),
            ),
            (
                Frame(FrameError::IdTooLong),
                ErrorCode::InvalidFrame,
                FrameError::IdTooLong.to_string(),
            ),
            (
                NotARequest,
                ErrorCode::InvalidFrame,
                "the first frame must be a connect request".into(),
            ),
            (
                NotConnect {
                    method: "tools.list".into(),
                },
                ErrorCode::InvalidFrame,
                "expected connect before anything else, got tools.list".into(),
            ),
            (
                BadParams(bad_json()),
                ErrorCode::InvalidArgs,
                format!("connect params: {why}"),
            ),
            (
                NoParams,
                ErrorCode::InvalidArgs,
                "connect needs params".into(),
            ),
            (
                WrongRole {
                    offered: Role::Agent,
                    endpoint: Role::Node,
                },
                ErrorCode::InvalidArgs,
                "role agent does not match this endpoint (/v1/node)".into(),
            ),
            (
                NonceMismatch,
                ErrorCode::Unauthorized,
                "auth.nonce does not echo this connection's challenge".into(),
            ),
            (
                RateLimited,
                ErrorCode::RateLimited,
                "too many failed authentications from this address; wait a minute".into(),
            ),
            (
                InvalidToken,
                ErrorCode::Unauthorized,
                "invalid or revoked token".into(),
            ),
            (
                TokenStore(StoreError::TooNew(7)),
                ErrorCode::Internal,
                "token store unavailable".into(),
            ),
            (
                StoredPolicy(PolicyError {
                    glob: "[".into(),
                    reason: "unclosed".into(),
                }),
                ErrorCode::Internal,
                "stored policy: invalid glob \"[\": unclosed".into(),
            ),
            (
                NodeTokenAsAgent,
                ErrorCode::Forbidden,
                "a node token cannot connect as an agent".into(),
            ),
            (
                NoNodeObject,
                ErrorCode::InvalidArgs,
                "a node's connect needs a node object".into(),
            ),
            (
                BadNodeId(NameError::NodeId("X".into())),
                ErrorCode::InvalidArgs,
                NameError::NodeId("X".into()).to_string(),
            ),
            (
                NotANodeToken(TokenKind::Admin),
                ErrorCode::Forbidden,
                "admin tokens cannot connect as nodes".into(),
            ),
            (
                BoundToOtherNode {
                    bound: "a".into(),
                    claimed: node(),
                },
                ErrorCode::Forbidden,
                "this token is bound to node a, not lab".into(),
            ),
            (
                Declaration(DeclarationError::Duplicate { tool: "T".into() }),
                ErrorCode::InvalidArgs,
                "tool T is declared twice".into(),
            ),
            (
                Store(StoreError::TooNew(7)),
                ErrorCode::Internal,
                "database schema version 7 is newer than this gsv understands".into(),
            ),
            (
                AlreadyEnrolled { node: node() },
                ErrorCode::Forbidden,
                "node lab is already enrolled with another credential; revoke it (gsv token list / revoke) to enroll again".into(),
            ),
            (
                JoinTokenUsed,
                ErrorCode::Unauthorized,
                "this join token was already used".into(),
            ),
            (
                Offer(crate::offers::OfferError::Store(StoreError::TooNew(7))),
                ErrorCode::Internal,
                "store of accepted offers: database schema version 7 is newer than this gsv understands".into(),
            ),
            (
                LaneNeedsConnection,
                ErrorCode::InvalidArgs,
                "a node's bulk lane needs the node's credential and the instance of its connection".into(),
            ),
            (
                LaneWithoutConnection { node: "lab".into() },
                ErrorCode::NodeOffline,
                "node lab has no connection of this instance here for a bulk lane to join".into(),
            ),
        ];
        for (e, code, message) in cases {
            let shape = e.to_shape();
            assert_eq!(
                (shape.code, shape.message.as_str()),
                (code, message.as_str())
            );
        }
    }

    #[test]
    fn details_are_the_documented_shapes() {
        let e = HandshakeError::NoCommonProtocol { min: 90, max: 99 };
        let shape = e.to_shape();
        assert_eq!(
            shape.message,
            format!(
                "no common protocol version: client offers 90..=99, gateway speaks {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}"
            )
        );
        assert_eq!(
            serde_json::to_string(&shape.details).expect("details"),
            format!(r#"{{"max":{PROTOCOL_VERSION},"min":{MIN_PROTOCOL_VERSION}}}"#)
        );
        let e = HandshakeError::Declaration(DeclarationError::TooManyTools { count: 999 });
        assert_eq!(
            serde_json::to_string(&e.to_shape().details).expect("details"),
            r#"{"count":999}"#
        );
    }
}
