//! Frames: the four message kinds on every gsv WebSocket, and their exact JSON.
//!
//! Decoding goes through one flat envelope so that `params`, `result` and `payload`
//! stay raw JSON (`RawValue`): the gateway routes a call by its id and forwards the
//! arguments and results byte for byte, never re-serialising them. Encoding writes the
//! same shapes from borrowed parts.

use crate::error::{ErrorCode, ErrorShape};
use crate::event::EventName;
use crate::limits::MAX_ID_LEN;
use crate::method::Method;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use thiserror::Error;

/// Why a text could not be decoded as a frame. Each maps to `invalid_frame`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("frame is not valid JSON: {0}")]
    Json(String),
    #[error("unknown frame type {0:?}; expected req, res, event or cancel")]
    UnknownType(String),
    #[error("{kind} frame is missing field {field:?}")]
    Missing {
        kind: &'static str,
        field: &'static str,
    },
    #[error("frame id is longer than {MAX_ID_LEN} characters")]
    IdTooLong,
}

impl FrameError {
    /// The error object to send back for this decoding failure.
    pub fn to_shape(&self) -> ErrorShape {
        ErrorShape::new(ErrorCode::InvalidFrame, self.to_string())
    }
}

/// A decoded frame.
#[derive(Debug)]
pub enum Frame {
    Req {
        id: String,
        method: Method,
        /// The method string as sent, for error messages only (never for dispatch).
        method_name: String,
        params: Option<Box<RawValue>>,
    },
    Res {
        id: String,
        outcome: Result<Box<RawValue>, ErrorShape>,
    },
    Event {
        event: EventName,
        payload: Option<Box<RawValue>>,
        seq: u64,
    },
    Cancel {
        id: String,
    },
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    method: Option<String>,
    params: Option<Box<RawValue>>,
    ok: Option<bool>,
    result: Option<Box<RawValue>>,
    error: Option<ErrorShape>,
    event: Option<String>,
    payload: Option<Box<RawValue>>,
    seq: Option<u64>,
}

impl Frame {
    /// Decodes one text frame.
    pub fn decode(text: &str) -> Result<Frame, FrameError> {
        let env: Envelope =
            serde_json::from_str(text).map_err(|e| FrameError::Json(e.to_string()))?;
        let kind: &'static str = match env.kind.as_str() {
            "req" => "req",
            "res" => "res",
            "event" => "event",
            "cancel" => "cancel",
            other => return Err(FrameError::UnknownType(other.chars().take(64).collect())),
        };
        let id = match env.id {
            Some(id) if id.len() > MAX_ID_LEN => return Err(FrameError::IdTooLong),
            other => other,
        };
        let need_id = || FrameError::Missing { kind, field: "id" };
        match kind {
            "req" => {
                let id = id.ok_or_else(need_id)?;
                let method_name = env.method.ok_or(FrameError::Missing {
                    kind,
                    field: "method",
                })?;
                let method = method_from_str(&method_name);
                Ok(Frame::Req {
                    id,
                    method,
                    method_name: method_name.chars().take(64).collect(),
                    params: env.params,
                })
            }
            "res" => {
                let id = id.ok_or_else(need_id)?;
                let ok = env.ok.ok_or(FrameError::Missing { kind, field: "ok" })?;
                let outcome = if ok {
                    Ok(env.result.unwrap_or_else(null_raw))
                } else {
                    Err(env.error.ok_or(FrameError::Missing {
                        kind,
                        field: "error",
                    })?)
                };
                Ok(Frame::Res { id, outcome })
            }
            "event" => {
                let name = env.event.ok_or(FrameError::Missing {
                    kind,
                    field: "event",
                })?;
                Ok(Frame::Event {
                    event: event_from_str(&name),
                    payload: env.payload,
                    seq: env.seq.unwrap_or(0),
                })
            }
            _ => Ok(Frame::Cancel {
                id: id.ok_or_else(need_id)?,
            }),
        }
    }
}

fn method_from_str(s: &str) -> Method {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).unwrap_or(Method::Unknown)
}

fn event_from_str(s: &str) -> EventName {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).unwrap_or(EventName::Unknown)
}

fn null_raw() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("`null` is valid JSON")
}

#[derive(Serialize)]
struct ReqOut<'a, P: Serialize + ?Sized> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    method: &'static str,
    params: &'a P,
}

#[derive(Serialize)]
struct ResOkOut<'a, R: Serialize + ?Sized> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    ok: bool,
    result: &'a R,
}

#[derive(Serialize)]
struct ResErrOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    ok: bool,
    error: &'a ErrorShape,
}

#[derive(Serialize)]
struct EventOut<'a, P: Serialize + ?Sized> {
    #[serde(rename = "type")]
    kind: &'static str,
    event: &'static str,
    payload: &'a P,
    seq: u64,
}

#[derive(Serialize)]
struct CancelOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
}

fn to_text<T: Serialize>(value: &T) -> String {
    // Serialising these shapes cannot fail: every field is a string, number, bool or
    // already-valid JSON, and maps have string keys.
    serde_json::to_string(value).unwrap_or_else(|e| {
        format!(
            r#"{{"type":"event","event":"encode-error","payload":{{"message":{:?}}},"seq":0}}"#,
            e.to_string()
        )
    })
}

/// `{"type":"req","id":…,"method":…,"params":…}`
pub fn encode_req<P: Serialize + ?Sized>(id: &str, method: Method, params: &P) -> String {
    to_text(&ReqOut {
        kind: "req",
        id,
        method: method.as_str(),
        params,
    })
}

/// `{"type":"res","id":…,"ok":true,"result":…}`
pub fn encode_ok<R: Serialize + ?Sized>(id: &str, result: &R) -> String {
    to_text(&ResOkOut {
        kind: "res",
        id,
        ok: true,
        result,
    })
}

/// `{"type":"res","id":…,"ok":false,"error":{…}}`
pub fn encode_err(id: &str, error: &ErrorShape) -> String {
    to_text(&ResErrOut {
        kind: "res",
        id,
        ok: false,
        error,
    })
}

/// `{"type":"event","event":…,"payload":…,"seq":…}`
pub fn encode_event<P: Serialize + ?Sized>(event: EventName, payload: &P, seq: u64) -> String {
    to_text(&EventOut {
        kind: "event",
        event: event.as_str(),
        payload,
        seq,
    })
}

/// `{"type":"cancel","id":…}`
pub fn encode_cancel(id: &str) -> String {
    to_text(&CancelOut { kind: "cancel", id })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn req_round_trip_keeps_params_raw() {
        let text = encode_req("7", Method::ToolsCall, &json!({"name": "a__B"}));
        assert_eq!(
            text,
            r#"{"type":"req","id":"7","method":"tools.call","params":{"name":"a__B"}}"#
        );
        match Frame::decode(&text).unwrap() {
            Frame::Req {
                id, method, params, ..
            } => {
                assert_eq!(id, "7");
                assert_eq!(method, Method::ToolsCall);
                assert_eq!(params.unwrap().get(), r#"{"name":"a__B"}"#);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn res_ok_and_err() {
        let raw = RawValue::from_string(r#"{"content":[] }"#.into()).unwrap();
        let text = encode_ok("1", &raw);
        assert_eq!(
            text,
            r#"{"type":"res","id":"1","ok":true,"result":{"content":[] }}"#
        );
        match Frame::decode(&text).unwrap() {
            Frame::Res { outcome: Ok(r), .. } => assert_eq!(r.get(), r#"{"content":[] }"#),
            other => panic!("{other:?}"),
        }
        let err = ErrorShape::new(ErrorCode::NotFound, "no such tool");
        let text = encode_err("2", &err);
        match Frame::decode(&text).unwrap() {
            Frame::Res {
                outcome: Err(e), ..
            } => assert_eq!(e, err),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn event_and_cancel() {
        let text = encode_event(EventName::Challenge, &json!({"nonce": "n"}), 0);
        match Frame::decode(&text).unwrap() {
            Frame::Event { event, payload, .. } => {
                assert_eq!(event, EventName::Challenge);
                assert_eq!(payload.unwrap().get(), r#"{"nonce":"n"}"#);
            }
            other => panic!("{other:?}"),
        }
        match Frame::decode(&encode_cancel("9")).unwrap() {
            Frame::Cancel { id } => assert_eq!(id, "9"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        assert!(matches!(Frame::decode("{"), Err(FrameError::Json(_))));
        assert!(matches!(Frame::decode("[]"), Err(FrameError::Json(_))));
        assert!(matches!(Frame::decode("{}"), Err(FrameError::Json(_))));
        assert!(matches!(
            Frame::decode(r#"{"type":"rpc"}"#),
            Err(FrameError::UnknownType(_))
        ));
        assert!(matches!(
            Frame::decode(r#"{"type":"req","method":"x"}"#),
            Err(FrameError::Missing { field: "id", .. })
        ));
        assert!(matches!(
            Frame::decode(r#"{"type":"res","id":"1"}"#),
            Err(FrameError::Missing { field: "ok", .. })
        ));
        assert!(matches!(
            Frame::decode(r#"{"type":"res","id":"1","ok":false}"#),
            Err(FrameError::Missing { field: "error", .. })
        ));
        let long = format!(r#"{{"type":"cancel","id":"{}"}}"#, "x".repeat(200));
        assert_eq!(Frame::decode(&long).unwrap_err(), FrameError::IdTooLong);
        match Frame::decode(r#"{"type":"req","id":"1","method":"no.such"}"#).unwrap() {
            Frame::Req { method, .. } => assert_eq!(method, Method::Unknown),
            other => panic!("{other:?}"),
        }
    }
}
