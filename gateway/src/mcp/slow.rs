//! Long session-less MCP calls: an SSE stream once the answer takes a while.
//!
//! A 2026-07-28 request has no session, and rmcp answers it once the handler's first
//! message exists: as plain `application/json` when that message is the result (one
//! write, the quick call's fast path), as an SSE stream when progress or a question
//! comes first. Until then nothing is written, so a call that runs for minutes without
//! progress would leave its HTTP connection silent, and the idle timeouts of clients
//! and proxies in between would cut it. So when no answer has come within
//! [`FIRST_ANSWER_WAIT`], this layer answers itself: an SSE stream with a comment at
//! once and every 15 s (as on rmcp's own streams), into which rmcp's answer is
//! relayed when it comes (a JSON answer becomes one `data:` event; an SSE answer is
//! passed on as it streams).
//! When the client goes away the pending answer is dropped, which cancels the call, as
//! closing the stream means on 2026-07-28. Requests answered in time pass through
//! untouched, and session requests (rmcp opens their SSE stream at once) skip the wait.
//! So does a 2025 `initialize` (no session yet either): its answer's `Mcp-Session-Id`
//! header must reach the client however long the answer takes, and a stream opened
//! here would already have sent its headers. It is told by its `Mcp-Method` header,
//! or, when a 2025 client sends none, by the request body's `method`.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a request's answer may take before the stream is opened.
pub const FIRST_ANSWER_WAIT: Duration = Duration::from_secs(1);
/// The comment that keeps the stream alive.
const COMMENT: &[u8] = b": gsv: call running\n\n";

/// Middleware on `/mcp`: passes the answer through when it comes within
/// [`FIRST_ANSWER_WAIT`], else answers with an SSE stream that carries it later.
pub async fn stream_when_slow(request: Request, next: Next) -> Response {
    // Session requests get their SSE stream from rmcp at once: nothing to wait for.
    if request.method() != Method::POST || request.headers().contains_key(HEADER_SESSION_ID) {
        return next.run(request).await;
    }
    let request = match request.headers().get(HEADER_METHOD) {
        Some(method) if method.as_bytes() == INITIALIZE.as_bytes() => {
            return next.run(request).await
        }
        Some(_) => request,
        None => {
            let (parts, body) = request.into_parts();
            let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
                return too_large();
            };
            if is_initialize(&bytes) {
                return next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await;
            }
            Request::from_parts(parts, Body::from(bytes))
        }
    };
    let mut answer = Box::pin(next.run(request));
    tokio::select! {
        response = &mut answer => return response,
        _ = tokio::time::sleep(FIRST_ANSWER_WAIT) => {}
    }
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    tokio::spawn(relay(answer, tx));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((Ok::<_, Infallible>(chunk), rx))
    });
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Sends comments until `answer` is ready, then its body as SSE. Returns as soon as the
/// client is gone (the stream's receiver dropped), dropping what is pending.
async fn relay(answer: impl Future<Output = Response>, tx: mpsc::Sender<Bytes>) {
    tokio::pin!(answer);
    // The first tick is immediate: the stream's headers and a first comment go now.
    let mut tick = tokio::time::interval(super::SSE_KEEP_ALIVE);
    let response = loop {
        tokio::select! {
            response = &mut answer => break response,
            _ = tx.closed() => return,
            _ = tick.tick() => {
                if tx.send(Bytes::from_static(COMMENT)).await.is_err() {
                    return;
                }
            }
        }
    };
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let mut body = response.into_body().into_data_stream();
    let mut message = Vec::new();
    loop {
        let chunk = tokio::select! {
            chunk = body.next() => chunk,
            _ = tx.closed() => return,
        };
        let chunk = match chunk {
            Some(Ok(chunk)) => chunk,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "MCP answer body failed");
                return;
            }
            None => break,
        };
        if json {
            message.extend_from_slice(&chunk);
        } else if tx.send(chunk).await.is_err() {
            return;
        }
    }
    if json {
        let _ = tx.send(sse_event(&message)).await;
    }
}

/// The header a 2026-07-28 request names its method in.
const HEADER_METHOD: &str = "mcp-method";
/// The method that opens a 2025 session.
const INITIALIZE: &str = "initialize";
/// The largest request body read here: what rmcp itself takes.
const MAX_BODY_BYTES: usize = gsv_protocol::limits::MAX_FRAME_BYTES;

/// Whether a request body is a JSON-RPC `initialize` (anything else, a batch or bytes
/// that are no JSON included, is not).
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Peek>(body).is_ok_and(|p| p.method.as_deref() == Some(INITIALIZE))
}

/// The answer to a body over [`MAX_BODY_BYTES`] (or one that broke off while read).
fn too_large() -> Response {
    let mut response = Response::new(Body::from(format!(
        "the request body is over {MAX_BODY_BYTES} bytes or broke off"
    )));
    *response.status_mut() = axum::http::StatusCode::PAYLOAD_TOO_LARGE;
    response
}

/// One SSE `data:` event carrying a JSON message. A serialized JSON message has no raw
/// line breaks (they are escaped inside strings), but any there are kept valid by
/// starting a `data:` line after each.
fn sse_event(json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 16);
    out.extend_from_slice(b"data: ");
    for &b in json {
        match b {
            b'\n' => out.extend_from_slice(b"\ndata: "),
            b'\r' => {}
            _ => out.push(b),
        }
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;
    use axum::Router;
    use tower::ServiceExt;

    /// A route that answers after 1.2 s (past [`FIRST_ANSWER_WAIT`]) with a new
    /// session's header, as rmcp answers an `initialize`.
    fn slow_route() -> Router {
        Router::new()
            .route(
                "/mcp",
                post(|| async {
                    tokio::time::sleep(FIRST_ANSWER_WAIT + Duration::from_millis(200)).await;
                    let mut r =
                        Response::new(Body::from(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#));
                    r.headers_mut()
                        .insert(HEADER_SESSION_ID, HeaderValue::from_static("s-1"));
                    r.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    r
                }),
            )
            .layer(axum::middleware::from_fn(stream_when_slow))
    }

    fn post_of(body: &str, method_header: Option<&str>) -> Request {
        let mut b =
            axum::http::Request::post("/mcp").header(header::CONTENT_TYPE, "application/json");
        if let Some(m) = method_header {
            b = b.header(HEADER_METHOD, m);
        }
        b.body(Body::from(body.to_owned())).unwrap()
    }

    #[tokio::test]
    async fn a_slow_initialize_keeps_its_session_header() {
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#;
        for header in [None, Some("initialize")] {
            let r = slow_route().oneshot(post_of(init, header)).await.unwrap();
            assert_eq!(
                r.headers().get(HEADER_SESSION_ID).unwrap(),
                "s-1",
                "{header:?}"
            );
            assert_eq!(
                r.headers().get(header::CONTENT_TYPE).unwrap(),
                "application/json"
            );
        }
        // A slow session-less call is streamed as before.
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#;
        for header in [None, Some("tools/call")] {
            let r = slow_route().oneshot(post_of(call, header)).await.unwrap();
            assert_eq!(
                r.headers().get(header::CONTENT_TYPE).unwrap(),
                "text/event-stream"
            );
            let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
            let text = String::from_utf8_lossy(&body);
            assert!(
                text.ends_with("data: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n\n"),
                "{text}"
            );
        }
    }

    #[test]
    fn initialize_is_told_from_the_body() {
        assert!(is_initialize(
            br#"{"method":"initialize","id":0,"jsonrpc":"2.0"}"#
        ));
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","params":{"method":"x"},"method":"initialize"}"#
        ));
        for other in [
            &br#"{"method":"tools/call"}"#[..],
            br#"[{"method":"initialize"}]"#,
            br#"{"method":5}"#,
            b"not json",
            b"",
        ] {
            assert!(!is_initialize(other), "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn json_becomes_one_data_event() {
        let e = sse_event(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(
            &e[..],
            b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
        );
        let e = sse_event(b"{\n\"a\":1\r\n}");
        assert_eq!(&e[..], b"data: {\ndata: \"a\":1\ndata: }\n\n");
    }
}
