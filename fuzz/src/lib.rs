//! The code under fuzz, shared by the `cargo fuzz` targets in `fuzz_targets/` and by the
//! stable-toolchain replay test `gateway/tests/fuzz_regressions.rs` (which includes this
//! file with `#[path]`), so a crash found by the fuzzer is replayed through exactly the
//! same calls in CI.
//!
//! Every function takes untrusted bytes, runs them through the decoding and validation
//! the gateway and the node apply to what arrives on a socket, and returns what came of
//! it. A panic, or a broken round-trip property (checked with `assert!`), is a bug.

use gsv_gateway::approvals::Verdict as ApprovalVerdict;
use gsv_gateway::handshake::parse_connect;
use gsv_gateway::mcp::result::call_result;
use gsv_gateway::toolset::Interner;
use gsv_protocol::endpoint::{Gateway, AGENT_PATH, NODE_PATH};
use gsv_protocol::event::{CallProgress, NodeEvent, ToolsChanged};
use gsv_protocol::frame::{encode_cancel, encode_err, encode_event, encode_ok, encode_req};
use gsv_protocol::handshake::Challenge;
use gsv_protocol::method::{ProbeParams, ProbeResult, ToolInvokeParams, ToolsCallParams};
use gsv_protocol::{
    Capability, ConnectParams, Frame, HelloOk, Method, NamespacedName, NodeId, Role, ToolName,
    ToolResult,
};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::OnceLock;

/// What one input came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not UTF-8: a WebSocket text frame cannot carry it, nothing was decoded.
    NotText,
    /// Decoded and accepted.
    Ok,
    /// Refused with an error value (the expected outcome for garbage).
    Err,
}

fn verdict<T, E>(r: &Result<T, E>) -> Verdict {
    if r.is_ok() {
        Verdict::Ok
    } else {
        Verdict::Err
    }
}

/// The nonce the `handshake` target's challenge "sent"; seeds echo it.
pub const NONCE: &str = "fuzz-nonce";

/// Decodes params the way both sides do: absent params are `null`.
fn params<T: DeserializeOwned>(raw: Option<&RawValue>) -> Result<T, serde_json::Error> {
    serde_json::from_str(raw.map(RawValue::get).unwrap_or("null"))
}

/// Mirror of the gateway's private `approvals.decide` params.
#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct DecideParams {
    id: String,
    decision: ApprovalVerdict,
}

/// `frame_decode`: one WebSocket text frame as either side receives it. Decodes the
/// frame, then whatever each side decodes next for that kind of frame: the params of
/// every method, the payload of every event, every shape of result. Checks that a
/// decoded frame re-encodes to text that decodes again to the same id.
pub fn frame_decode(data: &[u8]) -> Verdict {
    let Ok(text) = std::str::from_utf8(data) else {
        return Verdict::NotText;
    };
    let frame = Frame::decode(text);
    let v = verdict(&frame);
    match frame {
        Err(e) => {
            // The gateway answers every undecodable frame with this.
            let _ = encode_err("", &e.to_shape());
        }
        Ok(Frame::Req {
            id,
            method,
            params: p,
            ..
        }) => {
            let raw = p.as_deref();
            match method {
                Method::Connect => {
                    let _ = params::<ConnectParams>(raw);
                }
                Method::ToolsCall => {
                    if let Ok(call) = params::<ToolsCallParams>(raw) {
                        let _ = NamespacedName::parse(&call.name);
                        let _ = serde_json::from_str::<Value>(call.args.get());
                    }
                }
                Method::ToolsFanout => {
                    if let Ok(f) = params::<gsv_protocol::fanout::ToolsFanoutParams>(raw) {
                        let _ = ToolName::parse(&f.tool);
                        let _ = gsv_protocol::selector::Selector::parse(&f.select);
                        let _ = f.batch.map(|b| b.size(100));
                    }
                }
                Method::ApprovalsList => {
                    let _ = serde_json::from_str::<gsv_gateway::approvals::ListQuery>(
                        raw.map_or("{}", RawValue::get),
                    );
                }
                Method::ApprovalsDecide => {
                    let _ = serde_json::from_str::<DecideParams>(raw.map_or("{}", RawValue::get));
                }
                Method::ToolInvoke => {
                    if let Ok(inv) = params::<ToolInvokeParams>(raw) {
                        let _ = ToolName::parse(&inv.tool);
                    }
                }
                Method::NodeProbe => {
                    let _ = params::<ProbeParams>(raw);
                }
                Method::SessionsEnd => {
                    let _ = params::<gsv_protocol::method::SessionsEndParams>(raw);
                }
                Method::PathsResolve => {
                    let _ = params::<gsv_protocol::resolve::ResolveParams>(raw);
                }
                Method::TransferOpen => {
                    use gsv_protocol::transfer::{AgentOpenParams, OpenParams};
                    if let Ok(open) = params::<AgentOpenParams>(raw) {
                        let _ = gsv_protocol::NodeId::parse(&open.node);
                    }
                    let _ = params::<OpenParams>(raw);
                }
                Method::TransferFinish => {
                    let _ = params::<gsv_protocol::transfer::FinishParams>(raw);
                }
                Method::TransferCancel => {
                    let _ = params::<gsv_protocol::transfer::CancelParams>(raw);
                }
                Method::TransferCredit => {
                    let _ = params::<gsv_protocol::transfer::Credit>(raw);
                }
                Method::TransferCopy => {
                    if let Ok(copy) = params::<gsv_protocol::transfer::CopyParams>(raw) {
                        let _ = gsv_protocol::NodeId::parse(&copy.from.node);
                        let _ = gsv_protocol::NodeId::parse(&copy.to.node);
                    }
                }
                Method::TransferList => {
                    use gsv_protocol::transfer::tree::{AgentListParams, ListParams};
                    let _ = params::<AgentListParams>(raw);
                    let _ = params::<ListParams>(raw);
                }
                Method::TransferPlace => {
                    use gsv_protocol::transfer::tree::{check_step, AgentPlaceParams, PlaceParams};
                    if let Ok(p) = params::<PlaceParams>(raw) {
                        let _ = check_step(p.step, &p.entries);
                    }
                    let _ = params::<AgentPlaceParams>(raw);
                }
                Method::JobsList => {
                    let _ = serde_json::from_str::<gsv_protocol::job::JobsListParams>(
                        raw.map_or("{}", RawValue::get),
                    );
                }
                Method::JobsGet | Method::JobsCancel => {
                    let _ = params::<gsv_protocol::job::JobsGetParams>(raw);
                }
                Method::NodesLabel => {
                    if let Ok(p) = serde_json::from_str::<gsv_protocol::method::NodesLabelParams>(
                        raw.map_or("{}", RawValue::get),
                    ) {
                        let _ = gsv_protocol::inventory::check_labels(&p.set);
                    }
                }
                Method::NodesList => {
                    if let Ok(p) = serde_json::from_str::<gsv_protocol::method::NodesListParams>(
                        raw.map_or("{}", RawValue::get),
                    ) {
                        if let Some(s) = p.select {
                            let _ = gsv_protocol::selector::Selector::parse(&s);
                        }
                    }
                }
                Method::NodesShow | Method::NodesAcceptTools => {
                    let _ = serde_json::from_str::<gsv_protocol::offer::NodeIdParams>(
                        raw.map_or("{}", RawValue::get),
                    );
                }
                Method::ToolsList | Method::Unknown => {}
            }
            let null = RawValue::from_string("null".to_owned()).expect("null is JSON");
            let again = encode_req(&id, method, raw.unwrap_or(&null));
            assert_id(&again, &id);
        }
        Ok(Frame::Res { id, outcome }) => {
            match &outcome {
                Ok(result) => {
                    let raw = result.get();
                    let _ = serde_json::from_str::<HelloOk>(raw);
                    let _ = serde_json::from_str::<ProbeResult>(raw);
                    let _ = serde_json::from_str::<ToolResult>(raw);
                    let _ = call_result(raw);
                    assert_id(&encode_ok(&id, result), &id);
                }
                Err(e) => {
                    let _ = e.to_string();
                    assert_id(&encode_err(&id, e), &id);
                }
            }
            // The gateway matches a node's result to a call by its numeric id.
            let _ = id.parse::<u64>();
        }
        Ok(Frame::Event {
            event,
            payload,
            seq,
        }) => {
            if let Some(p) = &payload {
                let raw = p.get();
                let _ = serde_json::from_str::<Challenge>(raw);
                let _ = serde_json::from_str::<CallProgress>(raw);
                let _ = serde_json::from_str::<ToolsChanged>(raw);
                let _ = serde_json::from_str::<NodeEvent>(raw);
                let _ = serde_json::from_str::<Value>(raw);
            }
            let null = RawValue::from_string("null".to_owned()).expect("null is JSON");
            let again = encode_event(event, payload.as_deref().unwrap_or(&null), seq);
            assert!(Frame::decode(&again).is_ok(), "re-encoded event: {again}");
        }
        Ok(Frame::Cancel { id }) => assert_id(&encode_cancel(&id), &id),
    }
    v
}

/// A frame we encoded must decode again, with the same id.
fn assert_id(text: &str, id: &str) {
    match Frame::decode(text) {
        Ok(Frame::Req { id: got, .. } | Frame::Res { id: got, .. } | Frame::Cancel { id: got }) => {
            assert_eq!(got, id, "re-encoded frame {text}")
        }
        other => panic!("re-encoded frame {text} decodes to {other:?}"),
    }
}

fn interner() -> &'static Interner {
    static INTERNER: OnceLock<Interner> = OnceLock::new();
    INTERNER.get_or_init(Interner::default)
}

/// `handshake`: a connection's first frame as the gateway reads it, on both endpoints
/// (`gsv_gateway::handshake::parse_connect`, everything before the token lookup), then,
/// for a node, the declaration checks `node_session::register` runs: the node id, and
/// the tool set (names, capabilities, JSON Schemas compiled by the interner, twice so the
/// cached path runs too), and each compiled schema against a few argument values.
pub fn handshake(data: &[u8]) -> Verdict {
    let Ok(text) = std::str::from_utf8(data) else {
        return Verdict::NotText;
    };
    let mut v = Verdict::Err;
    for role in [Role::Node, Role::Agent] {
        let Ok((_id, params, protocol)) = parse_connect(text, role, NONCE) else {
            continue;
        };
        assert_eq!(params.role, role);
        assert!(protocol >= gsv_protocol::MIN_PROTOCOL_VERSION);
        v = Verdict::Ok;
        if role == Role::Node {
            v = node_declaration(params);
        }
    }
    v
}

fn node_declaration(params: ConnectParams) -> Verdict {
    // Stand-ins for an agent's call arguments, from the same input, so the fuzzer
    // controls both a schema and the values checked against it.
    let client = params.client.clone();
    let Some(info) = params.node else {
        return Verdict::Err;
    };
    let Ok(id) = NodeId::parse(&info.id) else {
        return Verdict::Err;
    };
    let interner = interner();
    let first = interner.intern(&id, info.tools.clone(), info.capabilities.clone());
    let second = interner.intern(&id, info.tools.clone(), info.capabilities.clone());
    assert_eq!(
        first.is_ok(),
        second.is_ok(),
        "the interner's cache changed the verdict"
    );
    let Ok(set) = first else {
        return Verdict::Err;
    };
    for spec in &set.tools {
        let full = NamespacedName::join(id.as_str(), &spec.def.name);
        assert!(
            NamespacedName::parse(&full).is_ok(),
            "accepted tool {full} cannot be called by name"
        );
        for args in [
            Value::Null,
            serde_json::json!({}),
            serde_json::json!({"text": "x", "path": "/", "n": 1e308}),
            serde_json::json!({"text": client.name, "path": client.version}),
            Value::from(client.name.as_str()),
            spec.def.input_schema.clone(),
        ] {
            let _ = spec.validate_args(&args);
        }
    }
    drop(set);
    interner.sweep();
    Verdict::Ok
}

/// `names`: node ids, tool names, namespaced names, capability ids and gateway
/// addresses, as the gateway, the node and the CLI parse them from user input. Checks
/// that what parses prints back to itself and that a derived URL parses to the same
/// gateway.
pub fn names(data: &[u8]) -> Verdict {
    let Ok(s) = std::str::from_utf8(data) else {
        return Verdict::NotText;
    };
    let mut ok = false;
    if let Ok(id) = NodeId::parse(s) {
        assert_eq!(id.as_str(), s);
        ok = true;
    }
    if let Ok(t) = ToolName::parse(s) {
        assert_eq!(t.as_str(), s);
        ok = true;
    }
    if let Ok(n) = NamespacedName::parse(s) {
        assert_eq!(n.to_string(), s);
        ok = true;
    }
    if let Some(c) = Capability::parse(s) {
        assert_eq!(c.as_str(), s);
        ok = true;
    }
    let derived = NodeId::from_hostname(s);
    assert!(
        NodeId::parse(derived.as_str()).is_ok(),
        "from_hostname({s:?}) = {derived} is not a valid id"
    );
    if let Ok(g) = Gateway::parse(s) {
        ok = true;
        let _ = (g.host(), g.is_loopback(), g.http_url("/healthz"));
        for path in [NODE_PATH, AGENT_PATH] {
            let url = g.ws_url(path);
            assert_eq!(Gateway::parse(&url).as_ref(), Ok(&g), "{url}");
        }
    }
    if ok {
        Verdict::Ok
    } else {
        Verdict::Err
    }
}
