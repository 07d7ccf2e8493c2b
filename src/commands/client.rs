//! What every command that talks to a gateway as an agent shares: where to connect and
//! as whom ([`Target`], [`Dialer`]), one request with its result decoded, and how errors
//! and results are printed and turned into exit codes.

use crate::exit;
use crate::resolve;
use crate::terminal::safe;
use gsv_client::{AgentClient, ClientError};
use gsv_protocol::{ErrorCode, ErrorShape};
use std::path::PathBuf;

/// Where to connect and as whom.
pub struct Target {
    pub gateway: Option<String>,
    pub token: Option<String>,
    pub data: Option<PathBuf>,
    /// `--ca` / `$GSV_CA`: the only trusted roots for a TLS gateway.
    pub ca: Option<PathBuf>,
    /// `--pin` / `$GSV_PIN`: the gateway certificate's SHA-256 fingerprint.
    pub pin: Option<String>,
}

pub(crate) fn fail(code: &str, message: impl std::fmt::Display, exit: u8) -> u8 {
    eprintln!("error: {code}: {}", safe(&message.to_string()));
    exit
}

pub(crate) fn client_error(e: &ClientError) -> u8 {
    match e {
        ClientError::Remote(ErrorShape { code, message, .. }) => {
            fail(code.as_str(), message, exit::for_code(*code))
        }
        ClientError::Url(e) => fail("invalid_args", e, exit::USAGE),
        ClientError::Tls(e) => fail("invalid_args", e, exit::USAGE),
        ClientError::Certificate { .. } => fail("certificate", e, exit::AUTH),
        ClientError::Unreachable { .. } | ClientError::Closed => {
            fail("unreachable", e, exit::UNREACHABLE)
        }
        ClientError::Protocol(m) => fail("protocol", m, exit::UNREACHABLE),
        ClientError::Io { .. } => fail("io", e, exit::TOOL_ERROR),
        ClientError::Integrity(m) => fail("integrity", m, exit::TOOL_ERROR),
    }
}

/// Sends one request and decodes its result as `T`; on failure prints the error (the
/// gateway's, or `protocol` for a result that does not decode) and gives the exit code.
pub(crate) async fn request_as<T: serde::de::DeserializeOwned>(
    client: &AgentClient,
    method: gsv_protocol::Method,
    params: &impl serde::Serialize,
) -> Result<T, u8> {
    let raw = client
        .request(method, params)
        .await
        .map_err(|e| client_error(&e))?;
    serde_json::from_str(raw.get()).map_err(|e| fail("protocol", e, exit::UNREACHABLE))
}

/// Prints `value` as pretty JSON on stdout (`--json`).
pub(crate) fn print_json(value: &impl serde::Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

pub(crate) async fn connect(target: &Target) -> Result<AgentClient, u8> {
    target
        .resolve()?
        .connect()
        .await
        .map_err(|e| client_error(&e))
}

/// Where an agent command connects, resolved once (a command that reconnects, like
/// `gsv cp` retrying, dials the same gateway with the same token every time).
pub(crate) struct Dialer {
    gateway: String,
    token: String,
    tls: gsv_client::TlsOptions,
}

impl Dialer {
    /// Dials and authenticates.
    pub async fn connect(&self) -> Result<AgentClient, ClientError> {
        AgentClient::connect_with(&self.gateway, &self.token, &self.tls).await
    }

    /// Dials and authenticates as a bulk lane (`gsv cp`: served below calls).
    pub async fn connect_bulk(&self) -> Result<AgentClient, ClientError> {
        AgentClient::connect_bulk(&self.gateway, &self.token, &self.tls).await
    }
}

impl Target {
    /// The gateway, token and TLS trust to use; with no token, prints why and gives
    /// the exit code.
    pub(crate) fn resolve(&self) -> Result<Dialer, u8> {
        let data = resolve::data_dir(self.data.as_deref());
        let gateway = resolve::gateway(self.gateway.as_deref(), &data);
        let Some(token) = resolve::agent_token(self.token.as_deref(), &data) else {
            return Err(fail(
                ErrorCode::Unauthorized.as_str(),
                format!(
                    "no token: pass --token, set GSV_AGENT_TOKEN, or run `gsv up` (it writes {})",
                    data.join(gsv_gateway::datadir::AGENT_TOKEN_FILE).display()
                ),
                exit::AUTH,
            ));
        };
        let tls = resolve::tls(self.ca.clone(), self.pin.clone(), &gateway, &data);
        Ok(Dialer {
            gateway,
            token,
            tls,
        })
    }
}

/// A tool result's text as `gsv call` prints it: the tool's output as it is on stdout,
/// a tool error on stderr, escaped.
pub(crate) fn print_text(result: &gsv_protocol::ToolResult) {
    let text = result.joined_text();
    if result.is_error {
        eprintln!("error: tool_error: {}", safe(&text));
    } else if text.ends_with('\n') {
        print!("{text}");
    } else {
        println!("{text}");
    }
}

/// The exit code of a tool result: 1 for a tool error.
pub(crate) fn result_exit(result: &gsv_protocol::ToolResult) -> u8 {
    if result.is_error {
        exit::TOOL_ERROR
    } else {
        exit::OK
    }
}

/// A call's arguments from the command line (`JSON`, `-`, `@FILE`), or the usage
/// error already printed.
pub(crate) fn call_args(args: &str) -> Result<serde_json::Value, u8> {
    let text = crate::commands::call_args::read(args)
        .map_err(|e| fail("invalid_args", e.to_string(), exit::USAGE))?;
    serde_json::from_str(&text).map_err(|e| {
        fail(
            "invalid_args",
            format!("arguments are not valid JSON: {e}"),
            exit::USAGE,
        )
    })
}
