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
