//! The operator console: a small single-page app served at `/ui/`, with its JSON API
//! under `/ui/api/` and live updates over Server-Sent Events.
//!
//! Nothing here decides anything new: every page reads and acts through the same
//! functions as the CLI and the admin API (inventory, approvals, jobs, tokens, audit,
//! the router for `Process` calls). What the console adds is the browser's side of
//! safety: one-time login codes instead of a token in a URL ([`codes`]), redeemed only
//! by a `POST` from the gateway's own page ([`pages`]: no GET signs anyone in), cookie
//! sessions under a per-gateway cookie name with a CSRF token each ([`sessions`]),
//! proof of origin on every API request, reads included ([`guard`]), a strict
//! Content-Security-Policy on every response, and a page that renders every string it
//! gets as text, through the one display rule of [`gsv_protocol::display`].

mod actions;
mod codes;
mod error;
mod events;
mod guard;
mod pages;
mod reads;
mod role;
mod sessions;

use crate::changes::Topic;
use crate::token_holders::TokenHolder;
pub use codes::{MAX_CODES, MAX_CODES_PER_TOKEN};
pub use error::ConsoleError;
pub use events::{MAX_STREAMS, MAX_STREAMS_PER_TOKEN};
pub use role::Role;
pub use sessions::{IDLE as SESSION_IDLE, MAX_SESSIONS, MAX_SESSIONS_PER_TOKEN};

use crate::fleet::Fleet;
use axum::routing::{get, post};
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;

/// The console's own state: its login codes, sessions and live streams. The gateway's
/// start makes it and hands it to the console's routes; it hears of revoked tokens as a
/// [`TokenHolder`].
pub struct Console {
    /// `http(s)://ADDR` of the gateway: where login links and webhook links point.
    base: String,
    /// The gateway serves TLS: cookies are `Secure`.
    secure: bool,
    /// The session cookie's name: `gsv_console_` and 128 random bits, new each start
    /// (sessions live in memory and end with the process anyway).
    cookie: String,
    codes: codes::Codes,
    sessions: sessions::Sessions,
    events: events::Events,
}

impl Console {
    /// The console of a gateway reached at `base` (`http(s)://ADDR`), its login codes
    /// valid `code_ttl`.
    pub fn new(base: String, secure: bool, code_ttl: std::time::Duration) -> Console {
        let bytes: [u8; 16] = rand::RngExt::random(&mut rand::rng());
        let cookie = format!("{}_{}", guard::COOKIE_PREFIX, hex::encode(bytes));
        Console {
            base,
            secure,
            cookie,
            codes: codes::Codes::new(code_ttl),
            sessions: Default::default(),
            events: events::Events::new(),
        }
    }

    /// The console of a gateway listening on `addr` (an unspecified address is
    /// reached on loopback).
    pub fn for_addr(addr: SocketAddr, tls: bool, code_ttl: std::time::Duration) -> Console {
        Console::new(base_url(addr, tls), tls, code_ttl)
    }

    /// `http(s)://ADDR`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The name of the cookie that carries a console session on this gateway.
    pub fn cookie_name(&self) -> &str {
        &self.cookie
    }

    /// The console's page of approval request `id`.
    pub fn approval_url(&self, id: &str) -> String {
        approval_url(&self.base, id)
    }

    /// The prefix of every link to one approval request's page (what the webhook
    /// completes with an id).
    pub fn approval_link_prefix(&self) -> String {
        self.approval_url("")
    }

    /// Mints a one-time login code for a session of `role` tied to `token_id`, as a
    /// link on the gateway's own address.
    pub fn mint_login_code(
        &self,
        role: Role,
        token_id: &str,
        name: &str,
    ) -> Result<LoginLink, ConsoleError> {
        self.mint_at(&self.base, role, token_id, name)
    }

    /// [`Console::mint_login_code`] with a link on `base` (the address the caller
    /// reached).
    fn mint_at(
        &self,
        base: &str,
        role: Role,
        token_id: &str,
        name: &str,
    ) -> Result<LoginLink, ConsoleError> {
        let code = self
            .codes
            .mint(codes::Grant {
                role,
                token_id: token_id.to_owned(),
                name: name.to_owned(),
            })
            .ok_or(ConsoleError::TooManyCodes)?;
        tracing::info!(token_id, role = ?role, "console login code minted");
        Ok(LoginLink {
            url: format!("{base}/ui/login?code={code}"),
            expires_at: gsv_protocol::now_ms() + self.codes.ttl.as_millis() as u64,
        })
    }

    /// Ends the console sessions minted by `token_id` (it was revoked).
    pub fn drop_token(&self, token_id: &str) {
        let n = self.sessions.drop_token(token_id);
        if n > 0 {
            tracing::info!(
                token_id,
                sessions = n,
                "token revoked: console sessions ended"
            );
        }
    }
}

impl TokenHolder for Console {
    fn token_revoked(&self, token_id: &str) {
        self.drop_token(token_id);
    }
}

/// The console's page of approval request `id` on the gateway at `base`.
pub fn approval_url(base: &str, id: &str) -> String {
    format!("{base}/ui/#/approvals/{id}")
}

/// `http(s)://ADDR` for a listening address.
pub fn base_url(addr: SocketAddr, tls: bool) -> String {
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("{}://{addr}", if tls { "https" } else { "http" })
}

/// A one-time login link.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginLink {
    /// `http(s)://ADDR/ui/login?code=...`
    pub url: String,
    /// When the code stops working (ms since the epoch).
    pub expires_at: u64,
}

/// The console's routes: `POST /v1/ui/login-codes` (Bearer) and everything under
/// `/ui` (cookie), the latter with the console's security headers.
pub fn router(fleet: Fleet, console: Arc<Console>) -> Router {
    let ui_state = Ui { fleet, console };
    let ui = Router::new()
        .route("/ui", get(pages::to_index))
        .route("/ui/", get(pages::index))
        .route("/ui/login", get(pages::login_page).post(pages::login))
        .route("/ui/logout", post(pages::logout))
        .route("/ui/app.js", get(pages::script))
        .route("/ui/app.css", get(pages::style))
        .route("/ui/api/me", get(reads::me))
        .route("/ui/api/nodes", get(reads::nodes))
        .route("/ui/api/nodes/{id}", get(reads::node))
        .route("/ui/api/approvals", get(reads::approvals))
        .route("/ui/api/approvals/{id}", post(actions::decide))
        .route("/ui/api/approvals/{id}/args", get(reads::approval_args))
        .route("/ui/api/sessions", get(reads::sessions))
        .route("/ui/api/sessions/{node}/{id}/log", get(reads::session_log))
        .route("/ui/api/sessions/{node}/{id}/kill", post(actions::kill))
        .route("/ui/api/audit", get(reads::audit))
        .route(
            "/ui/api/tokens",
            get(reads::tokens).post(actions::create_token),
        )
        .route("/ui/api/tokens/{id}/revoke", post(actions::revoke_token))
        .route("/ui/api/jobs", get(reads::jobs))
        .route("/ui/api/jobs/{id}", get(reads::job))
        .route("/ui/api/events", get(events::stream))
        .layer(axum::middleware::from_fn_with_state(
            ui_state.clone(),
            guard::security_headers,
        ));
    Router::new()
        .route("/v1/ui/login-codes", post(pages::login_codes))
        .merge(ui)
        .with_state(ui_state)
}

/// What the console's handlers are given: the fleet, and the console's own state
/// (which the gateway's core does not hold).
#[derive(Clone)]
pub struct Ui {
    fleet: Fleet,
    console: Arc<Console>,
}
