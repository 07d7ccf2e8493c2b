//! A raw WebSocket peer for protocol tests: it sends exactly the frames a test
//! writes (valid or not) and shows exactly what the gateway answers. As a fake node it
//! lets a test see the `tool.invoke` and `cancel` frames a real node would get.

use futures_util::{SinkExt, StreamExt};
use gsv_protocol::{ErrorShape, Frame};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

type Stream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What came off the wire.
#[derive(Debug)]
pub enum Incoming {
    Text(String),
    Close(Option<(u16, String)>),
}

pub struct Raw {
    pub ws: Stream,
}

impl Raw {
    /// Opens a WebSocket to `path` without any handshake.
    pub async fn open(addr: &str, path: &str) -> Raw {
        let url = format!("ws://{addr}{path}");
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(64 << 20))
            .max_frame_size(Some(64 << 20));
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true)
            .await
            .expect("websocket connects");
        Raw { ws }
    }

    pub async fn send(&mut self, text: &str) {
        self.ws
            .send(Message::Text(text.to_owned().into()))
            .await
            .expect("send");
    }

    /// Next text frame or close (pings skipped); `None` when the stream ends.
    pub async fn recv(&mut self) -> Option<Incoming> {
        loop {
            let m = tokio::time::timeout(Duration::from_secs(20), self.ws.next())
                .await
                .expect("a frame within 20 s");
            match m {
                Some(Ok(Message::Text(t))) => return Some(Incoming::Text(t.as_str().to_owned())),
                Some(Ok(Message::Close(f))) => {
                    return Some(Incoming::Close(
                        f.map(|f| (u16::from(f.code), f.reason.as_str().to_owned())),
                    ))
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return None,
            }
        }
    }

    /// Next text frame as JSON; panics on close.
    pub async fn recv_json(&mut self) -> Value {
        match self.recv().await {
            Some(Incoming::Text(t)) => serde_json::from_str(&t).expect("gateway sends JSON"),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    /// Reads until the connection closes; returns the close frame if one came.
    pub async fn closed(&mut self) -> Option<(u16, String)> {
        loop {
            match self.recv().await {
                Some(Incoming::Text(_)) => continue,
                Some(Incoming::Close(f)) => return f,
                None => return None,
            }
        }
    }

    /// Reads the challenge and returns its nonce.
    pub async fn challenge(&mut self) -> String {
        let v = self.recv_json().await;
        assert_eq!(v["type"], "event");
        assert_eq!(v["event"], "challenge");
        v["payload"]["nonce"].as_str().expect("nonce").to_owned()
    }

    /// Full handshake; returns the connect answer (`Ok(hello)` or the error).
    pub async fn handshake(
        &mut self,
        params: impl FnOnce(String) -> Value,
    ) -> Result<Value, ErrorShape> {
        let nonce = self.challenge().await;
        let req = json!({"type": "req", "id": "c1", "method": "connect", "params": params(nonce)});
        self.send(&req.to_string()).await;
        let v = self.recv_json().await;
        assert_eq!(v["type"], "res");
        if v["ok"] == true {
            Ok(v["result"].clone())
        } else {
            Err(serde_json::from_value(v["error"].clone()).expect("error shape"))
        }
    }

    /// Connects as a node declaring `tools`.
    pub async fn node(
        addr: &str,
        id: &str,
        token: &str,
        tools: Value,
    ) -> (Raw, Result<Value, ErrorShape>) {
        let mut raw = Raw::open(addr, "/v1/node").await;
        let r = raw
            .handshake(|nonce| node_connect(id, token, &nonce, tools))
            .await;
        (raw, r)
    }

    /// Next decoded frame (text only).
    pub async fn frame(&mut self) -> Frame {
        match self.recv().await {
            Some(Incoming::Text(t)) => Frame::decode(&t).expect("valid frame"),
            other => panic!("expected a frame, got {other:?}"),
        }
    }
}

/// Connect params of a node.
pub fn node_connect(id: &str, token: &str, nonce: &str, tools: Value) -> Value {
    let caps: Vec<Value> = tools
        .as_array()
        .map(|a| a.iter().map(|t| t["capability"].clone()).collect())
        .unwrap_or_default();
    json!({
        "minProtocol": 1, "maxProtocol": 1, "role": "node",
        "auth": {"token": token, "nonce": nonce},
        "client": {"name": "fake-node", "version": "0"},
        "node": {
            "id": id, "tools": tools, "capabilities": caps, "hostRole": "execution",
            "runtime": {"hostOs": "linux", "hostArch": "x86_64", "hostEnv": [], "hostBinStatus": {}, "hostBinStatusUpdatedAt": 0}
        }
    })
}

/// Connect params of an agent.
pub fn agent_connect(token: &str, nonce: &str) -> Value {
    json!({
        "minProtocol": 1, "maxProtocol": 1, "role": "agent",
        "auth": {"token": token, "nonce": nonce},
        "client": {"name": "raw-agent", "version": "0"}
    })
}

/// A tool declaration with a one-string-argument schema.
pub fn tool(name: &str, capability: &str) -> Value {
    json!({
        "name": name,
        "description": format!("fake {name}"),
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        },
        "capability": capability
    })
}
