//! The gateway's accept loop, for the main port (plain or TLS) and the metrics port.
//!
//! `axum::serve` reads request headers without any deadline, so a client that opens a
//! connection and never finishes its headers holds a file descriptor for ever. This
//! loop serves every port itself and bounds what an unauthenticated peer can hold:
//!
//! - each accepted connection must get a [`Ticket`](crate::admission::Ticket) under
//!   the caps on unauthenticated connections, or is closed at once, before TLS;
//! - the TLS handshake and every request head (also the wait for the next request on
//!   a kept-alive connection) must complete within `header_timeout`;
//! - a connection that is still unauthenticated `unauth_timeout` after accept is
//!   closed, whatever it is doing (a slowly sent body, say); a WebSocket upgrade hands
//!   over to the handshake deadline instead.
//!
//! Requests are served by hyper's HTTP/1.1 server with upgrades on (the WebSocket
//! endpoints), with `ConnectInfo<SocketAddr>` set like `axum::serve` does.

use crate::admission::{Admission, Ticket};
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// How long a stopping gateway waits for open HTTP requests to finish.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What one port serves and how.
#[derive(Clone)]
pub(crate) struct Port {
    pub router: Router,
    pub tls: Option<TlsAcceptor>,
    /// The caps this port's connections count against.
    pub admission: Admission,
    /// Whether requests on this port can authenticate (the main port; not metrics).
    pub authenticates: bool,
    /// The settings and counters the accept loop reads.
    pub fleet: crate::fleet::Fleet,
}

impl Port {
    fn header_timeout(&self) -> Duration {
        self.fleet.config().header_timeout
    }
}

/// Accepts connections on `listener` and serves `port` on each, until `shutdown`.
/// Then stops accepting and gives open HTTP requests a short time to finish
/// (WebSocket sessions close on the same token by themselves).
pub(crate) async fn serve(listener: TcpListener, port: Port, shutdown: CancellationToken) {
    let connections = TaskTracker::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::error!(error = %e, "accept failed");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_millis(250)) => continue,
                    }
                }
            },
        };
        let ticket = match port.admission.admit(peer, port.authenticates) {
            Ok(t) => t,
            Err(why) => {
                port.fleet.metrics().shed(why.as_str());
                port.admission.log_shed(peer, why);
                drop(tcp);
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        connections.spawn(serve_connection(
            tcp,
            peer,
            ticket,
            port.clone(),
            shutdown.clone(),
        ));
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(DRAIN_TIMEOUT, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("some HTTP connections were still open at shutdown");
    }
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    ticket: Arc<Ticket>,
    port: Port,
    shutdown: CancellationToken,
) {
    let unauth_deadline = tokio::time::Instant::now() + port.fleet.config().unauth_timeout;
    match port.tls.clone() {
        None => serve_http(tcp, peer, ticket, &port, unauth_deadline, shutdown).await,
        Some(acceptor) => {
            let stream = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = tokio::time::timeout(port.header_timeout(), crate::tls::accept(tcp, acceptor)) => match r {
                    Ok(Ok(Some(stream))) => stream,
                    Ok(Ok(None)) => {
                        tracing::debug!(%peer, "plain HTTP on the TLS port");
                        return;
                    }
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                },
            };
            serve_http(stream, peer, ticket, &port, unauth_deadline, shutdown).await
        }
    }
}

async fn serve_http<S>(
    io: S,
    peer: SocketAddr,
    ticket: Arc<Ticket>,
    port: &Port,
    unauth_deadline: tokio::time::Instant,
    shutdown: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let router = port.router.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(req)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(port.header_timeout());
    let conn = builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    let unauth_expired = tokio::time::sleep_until(unauth_deadline);
    tokio::pin!(unauth_expired);
    let mut watching = true;
    let result = loop {
        tokio::select! {
            r = conn.as_mut() => break r,
            _ = shutdown.cancelled() => {
                conn.as_mut().graceful_shutdown();
                break conn.await;
            }
            _ = unauth_expired.as_mut(), if watching => {
                if ticket.is_authenticated() {
                    watching = false;
                    continue;
                }
                tracing::debug!(%peer, timeout = ?port.fleet.config().unauth_timeout, "closing a connection still unauthenticated");
                return;
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "HTTP connection ended with an error");
    }
}
