//! Raw session-less (2026-07-28) MCP requests for the tests that read the wire
//! themselves: a long-lived `subscriptions/listen` stream, a refusal on it.

use super::Gateway;
use serde_json::json;
use std::time::Duration;

/// Sends one session-less (2026-07-28) MCP request to `gw`'s `/mcp{query}` on a new
/// connection (closed after the answer when `close`); the connection, to read the
/// answer from.
pub async fn send_mcp(
    gw: &Gateway,
    token: &str,
    query: &str,
    method: &str,
    params: serde_json::Value,
    close: bool,
) -> tokio::net::TcpStream {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let name = params["name"].as_str().map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let name_header = name
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let connection = if close { "Connection: close\r\n" } else { "" };
    let req = format!(
        "POST /mcp{query} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name_header}\
         Content-Length: {}\r\n{connection}\r\n{body}",
        gw.addr,
        body.len()
    );
    use tokio::io::AsyncWriteExt;
    let mut s = tokio::net::TcpStream::connect(&gw.addr)
        .await
        .expect("connect");
    s.write_all(req.as_bytes()).await.expect("write");
    s
}

/// Whether `what` comes on `stream` within `within`.
pub async fn heard(stream: &mut tokio::net::TcpStream, what: &str, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    seen.extend_from_slice(&buf[..n]);
                    if String::from_utf8_lossy(&seen).contains(what) {
                        return true;
                    }
                }
            }
        }
    };
    tokio::time::timeout(within, read).await.unwrap_or(false)
}
