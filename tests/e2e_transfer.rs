//! End to end: the `transfer.*` protocol against a real gateway and node on loopback,
//! spoken by hand (binary chunk frames, credits, finish): a put and a get with their
//! hashes, the window respected, the token's Read/Write policy, a corrupt put caught,
//! and another connection unable to write into a transfer it did not open.

mod common;

use common::fake::{agent_connect, Raw};
use common::{Gateway, TempDir};
use futures_util::{SinkExt, StreamExt};
use gsv_protocol::transfer::{Chunk, CHUNK_BYTES, WINDOW_BYTES};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// An agent connection spoken by hand.
struct Agent {
    raw: Raw,
    next: u64,
    /// Chunks that came before the answer being waited for (a get's first chunks may
    /// overtake the answer to its `transfer.open`), handed out first by `got`.
    early: std::collections::VecDeque<Vec<u8>>,
}

/// What the gateway sent an agent.
enum Got {
    Json(Value),
    Chunk(Vec<u8>),
}

impl Agent {
    async fn connect(gw: &Gateway, token: &str) -> Agent {
        let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
        raw.handshake(|nonce| agent_connect(token, &nonce))
            .await
            .expect("agent connects");
        Agent {
            raw,
            next: 0,
            early: Default::default(),
        }
    }

    async fn got(&mut self) -> Got {
        if let Some(chunk) = self.early.pop_front() {
            return Got::Chunk(chunk);
        }
        loop {
            let m = tokio::time::timeout(Duration::from_secs(20), self.raw.ws.next())
                .await
                .expect("a frame within 20 s")
                .expect("open")
                .expect("frame");
            match m {
                Message::Text(t) => {
                    return Got::Json(serde_json::from_str(t.as_str()).expect("json"))
                }
                Message::Binary(b) => return Got::Chunk(b.to_vec()),
                Message::Close(f) => panic!("closed: {f:?}"),
                _ => continue,
            }
        }
    }

    /// Sends a request; returns its id.
    async fn req(&mut self, method: &str, params: Value) -> String {
        self.next += 1;
        let id = format!("r{}", self.next);
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        self.raw.send(&frame.to_string()).await;
        id
    }

    /// Waits for the answer to `id` (skipping events, which `seen` collects).
    async fn answer(&mut self, id: &str, seen: &mut Vec<Value>) -> Value {
        loop {
            match self.got().await {
                Got::Json(v) if v["type"] == "res" && v["id"] == id => return v,
                Got::Json(v) => seen.push(v),
                Got::Chunk(c) => self.early.push_back(c),
            }
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.req(method, params).await;
        self.answer(&id, &mut Vec::new()).await
    }

    async fn chunk(&mut self, id: uuid::Uuid, offset: u64, data: &[u8]) {
        let frame = Chunk { id, offset, data }.encode();
        self.raw
            .ws
            .send(Message::Binary(frame.into()))
            .await
            .expect("send chunk");
    }

    /// Puts `data` as `path` on `node`, keeping to the window; the finish answer.
    async fn put(&mut self, node: &str, path: &str, data: &[u8], sha: &str) -> Value {
        let open = self
            .call(
                "transfer.open",
                json!({"node": node, "path": path, "direction": "put",
                       "meta": {"size": data.len(), "mode": 0o640, "mtimeMs": 1_700_000_000_000u64}}),
            )
            .await;
        assert_eq!(open["ok"], true, "{open}");
        let id: uuid::Uuid = serde_json::from_value(open["result"]["id"].clone()).expect("id");
        let mut sent = open["result"]["offset"].as_u64().expect("offset");
        let mut credited = sent;
        let total = data.len() as u64;
        while credited < total {
            while sent < total && sent - credited < WINDOW_BYTES {
                let end = (sent as usize + CHUNK_BYTES).min(data.len());
                self.chunk(id, sent, &data[sent as usize..end]).await;
                sent = end as u64;
            }
            match self.got().await {
                Got::Json(v) if v["event"] == "transfer.credit" => {
                    credited += v["payload"]["bytes"].as_u64().expect("bytes");
                    assert!(sent - credited <= WINDOW_BYTES);
                }
                Got::Json(v) => panic!("unexpected {v}"),
                Got::Chunk(_) => panic!("a chunk during a put"),
            }
        }
        self.call("transfer.finish", json!({"id": id, "sha256": sha}))
            .await
    }
}

fn hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7919) % 253) as u8).collect()
}

#[tokio::test]
async fn a_put_and_a_get_cross_whole_and_keep_to_the_window() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("transfer-ws");
    let _node = gw.node("box", ws.path()).await;
    let mut agent = Agent::connect(&gw, &gw.agent_token()).await;
    let data = content(20 * 1024 * 1024 + 123);
    let sha = hex(&data);

    let done = agent.put("box", "in/big.bin", &data, &sha).await;
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(done["result"]["sha256"], sha.as_str());
    assert_eq!(done["result"]["bytes"], data.len() as u64);
    let on_node = ws.path().join("in/big.bin");
    assert_eq!(std::fs::read(&on_node).expect("placed"), data);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&on_node)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o640
    );

    // And back.
    let open = agent
        .call(
            "transfer.open",
            json!({"node": "box", "path": "in/big.bin", "direction": "get"}),
        )
        .await;
    assert_eq!(open["ok"], true, "{open}");
    assert_eq!(open["result"]["meta"]["size"], data.len() as u64);
    let id: uuid::Uuid = serde_json::from_value(open["result"]["id"].clone()).expect("id");
    let mut got = Vec::new();
    let end = loop {
        match agent.got().await {
            Got::Chunk(frame) => {
                let c = Chunk::decode(&frame).expect("a chunk");
                assert_eq!(c.id, id);
                assert_eq!(c.offset, got.len() as u64, "in order");
                got.extend_from_slice(c.data);
                let n = c.data.len();
                agent
                    .req("transfer.credit", json!({"id": id, "bytes": n}))
                    .await;
            }
            Got::Json(v) if v["event"] == "transfer.end" => break v,
            Got::Json(v) if v["type"] == "res" => assert_eq!(v["ok"], true, "{v}"),
            Got::Json(v) => panic!("unexpected {v}"),
        }
    };
    assert_eq!(got, data);
    assert_eq!(end["payload"]["sha256"], sha.as_str());

    // Each transfer is on the audit record.
    let (code, out, err) = gw.cli(&["audit", "tail", "--lines", "50", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for tool in ["Write", "Read"] {
        assert!(
            rows.iter()
                .any(|r| r["kind"] == "transfer" && r["tool"] == tool && r["outcome"] == "ok"),
            "no {tool} transfer row in {out}"
        );
    }
}

#[tokio::test]
async fn the_policy_decides_and_corrupt_or_foreign_bytes_never_land() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("transfer-ws");
    let _node = gw.node("box", ws.path()).await;
    std::fs::write(ws.path().join("kept.txt"), b"the old content").expect("old");

    // A token allowed only Read gets but cannot put; one allowed neither cannot get.
    let reader = gw.token(&["agent", "reader", "--allow", "box__Read"]);
    let mut r = Agent::connect(&gw, &reader).await;
    let v = r
        .call(
            "transfer.open",
            json!({"node": "box", "path": "x", "direction": "put", "meta": {"size": 1}}),
        )
        .await;
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
    // A refused transfer is on the record, like a refused call.
    let (code, out, err) = gw.cli(&["audit", "tail", "--lines", "50", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|r| r["kind"] == "transfer"
                && r["actor"] == "agent:reader"
                && r["tool"] == "Write"
                && r["outcome"] == "forbidden"),
        "no refused transfer row in {out}"
    );
    let nobody = gw.token(&["agent", "nobody", "--allow", "box__Echo"]);
    let mut n = Agent::connect(&gw, &nobody).await;
    let v = n
        .call(
            "transfer.open",
            json!({"node": "box", "path": "kept.txt", "direction": "get"}),
        )
        .await;
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
    let v = r
        .call(
            "transfer.open",
            json!({"node": "box", "path": "missing", "direction": "get"}),
        )
        .await;
    assert_eq!(v["error"]["code"], "not_found", "{v}");

    // Corrupt bytes: the hash check refuses them and the old file stays.
    let mut agent = Agent::connect(&gw, &gw.agent_token()).await;
    let good = content(3 * 1024 * 1024);
    let mut bad = good.clone();
    bad[1_000_000] ^= 0x55;
    let v = agent.put("box", "kept.txt", &bad, &hex(&good)).await;
    assert_eq!(v["error"]["code"], "invalid_args", "{v}");
    assert_eq!(
        std::fs::read(ws.path().join("kept.txt")).expect("old"),
        b"the old content"
    );

    // Another connection's chunks do not reach a transfer it did not open.
    let open = agent
        .call(
            "transfer.open",
            json!({"node": "box", "path": "kept.txt", "direction": "put",
                   "meta": {"size": good.len()}}),
        )
        .await;
    let id: uuid::Uuid = serde_json::from_value(open["result"]["id"].clone()).expect("id");
    let mut intruder = Agent::connect(&gw, &gw.agent_token()).await;
    intruder.chunk(id, 0, &bad[..CHUNK_BYTES]).await;
    let v = intruder
        .call("transfer.finish", json!({"id": id, "sha256": hex(&bad)}))
        .await;
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    let v = agent
        .call("transfer.cancel", json!({"id": id, "discard": true}))
        .await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::read(ws.path().join("kept.txt")).expect("old"),
        b"the old content"
    );
    let parts: Vec<_> = std::fs::read_dir(ws.path())
        .expect("ls")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".gsv-part-"))
        .collect();
    assert!(parts.is_empty(), "a discarded put leaves no partial file");
}

#[tokio::test]
async fn a_sender_that_ignores_its_window_cannot_cut_the_node_off() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("transfer-ws");
    let _node = gw.node("box", ws.path()).await;
    std::fs::write(ws.path().join("still.txt"), b"here").expect("file");
    let mut agent = Agent::connect(&gw, &gw.agent_token()).await;
    let chunks = 48;
    let open = agent
        .call(
            "transfer.open",
            json!({"node": "box", "path": "flood.bin", "direction": "put",
                   "meta": {"size": chunks * CHUNK_BYTES}}),
        )
        .await;
    let id: uuid::Uuid = serde_json::from_value(open["result"]["id"].clone()).expect("id");
    // 48 MiB at once, never waiting for a credit: more than the node's connection
    // queue holds if the gateway relayed it all blindly.
    let chunk = vec![0u8; CHUNK_BYTES];
    for i in 0..chunks {
        agent.chunk(id, (i * CHUNK_BYTES) as u64, &chunk).await;
    }
    // Either the gateway ended the transfer for going over the window, or the node
    // kept up and credited everything; never a lost node.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut credited = 0u64;
    let mut failed = None;
    while credited < (chunks * CHUNK_BYTES) as u64 && failed.is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "neither failed nor credited"
        );
        match agent.got().await {
            Got::Json(v) if v["event"] == "transfer.failed" => failed = Some(v),
            Got::Json(v) if v["event"] == "transfer.credit" => {
                credited += v["payload"]["bytes"].as_u64().expect("bytes")
            }
            Got::Json(v) => panic!("unexpected {v}"),
            Got::Chunk(_) => panic!("a chunk during a put"),
        }
    }
    if let Some(v) = failed {
        assert_eq!(v["payload"]["error"]["code"], "invalid_frame", "{v}");
    }
    // The node is still connected and answers.
    let v = agent
        .call(
            "tools.call",
            json!({"name": "box__Read", "args": {"path": "still.txt"}}),
        )
        .await;
    assert_eq!(v["ok"], true, "{v}");
    assert!(v.to_string().contains("here"), "{v}");
}

#[tokio::test]
async fn one_token_cannot_take_a_nodes_whole_transfer_capacity() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("transfer-ws");
    let _node = gw.node("box", ws.path()).await;
    let greedy_token = gw.token(&["agent", "greedy", "--allow", "*"]);
    let mut greedy = Agent::connect(&gw, &greedy_token).await;
    let put = |i: usize| {
        json!({"node": "box", "path": format!("held-{i}.bin"), "direction": "put",
               "meta": {"size": 10}})
    };
    // Opened and left idle: each holds one of the node's transfer places.
    for i in 0..2 {
        let v = greedy.call("transfer.open", put(i)).await;
        assert_eq!(v["ok"], true, "{v}");
    }
    let v = greedy.call("transfer.open", put(2)).await;
    assert_eq!(v["error"]["code"], "overloaded", "{v}");
    // Another agent still gets its share of the node.
    let mut other = Agent::connect(&gw, &gw.agent_token()).await;
    let v = other.call("transfer.open", put(3)).await;
    assert_eq!(v["ok"], true, "{v}");
}

/// A hostile node cannot widen its own window: a credit it sends for a transfer it is
/// sending (a get) is dropped, so the gateway still ends the get once the node is a
/// window ahead of the agent's credits, and the agent never gets more than a window.
#[tokio::test]
async fn a_node_cannot_credit_itself_past_its_window() {
    let gw = Gateway::start().await;
    let token = gw.node_token("evil");
    let tools = json!([
        common::fake::tool("Read", "filesystem.read"),
        common::fake::tool("Write", "filesystem.write")
    ]);
    let (mut node, r) = Raw::node(&gw.addr, "evil", &token, tools).await;
    r.expect("the fake node connects");
    gw.wait_online("evil").await;
    let mut agent = Agent::connect(&gw, &gw.agent_token()).await;
    let req = agent
        .req(
            "transfer.open",
            json!({"node": "evil", "path": "x", "direction": "get"}),
        )
        .await;
    // The node answers the open, credits itself far beyond the window, then sends
    // twice a window of chunks.
    let asked = loop {
        let v = node.recv_json().await;
        if v["type"] == "req" && v["method"] == "transfer.open" {
            break v;
        }
    };
    let id: uuid::Uuid = serde_json::from_value(asked["params"]["id"].clone()).expect("id");
    let size = 64 * CHUNK_BYTES as u64;
    node.send(
        &json!({"type": "res", "id": asked["id"], "ok": true, "result": {
            "id": id, "path": "/x", "meta": {"size": size, "mode": 420, "mtimeMs": 0}, "offset": 0}})
        .to_string(),
    )
    .await;
    node.send(
        &json!({"type": "event", "event": "transfer.credit", "payload": {"id": id, "bytes": size}, "seq": 1})
            .to_string(),
    )
    .await;
    let data = vec![7u8; CHUNK_BYTES];
    let over = 2 * (WINDOW_BYTES as usize / CHUNK_BYTES);
    for i in 0..over {
        let frame = Chunk {
            id,
            offset: (i * CHUNK_BYTES) as u64,
            data: &data,
        }
        .encode();
        node.ws
            .send(Message::Binary(frame.into()))
            .await
            .expect("send chunk");
    }
    let mut seen = Vec::new();
    let open = agent.answer(&req, &mut seen).await;
    assert_eq!(open["ok"], true, "{open}");
    let mut chunks = agent.early.len();
    agent.early.clear();
    let failed = loop {
        match agent.got().await {
            Got::Chunk(_) => chunks += 1,
            Got::Json(v) if v["event"] == "transfer.failed" => break v,
            Got::Json(v) => panic!("unexpected {v}"),
        }
    };
    assert_eq!(
        failed["payload"]["error"]["code"], "invalid_frame",
        "{failed}"
    );
    assert!(
        chunks <= WINDOW_BYTES as usize / CHUNK_BYTES,
        "{chunks} chunks reached the agent without its credits"
    );
}
