//! Which MCP view is asked for (`flat`, `fleet` or `auto`): a token's stored setting
//! (`--mcp-view`) as much as a URL's (`?view=`), so it lives with the policy it is kept
//! in; `mcp::view` decides what a session then shows.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// A view as asked for: by the token (`--mcp-view`), the URL (`?view=`) or `gsv mcp
/// --view`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpView {
    /// Every `{node}__{tool}` the token may call.
    Flat,
    /// The constant set of `fleet_*` gateway tools.
    Fleet,
    /// Flat up to `mcp::view::AUTO_MAX_BYTES` of definitions, else fleet.
    #[default]
    Auto,
}

impl McpView {
    /// Whether this is the default (`auto`), which a stored policy leaves out.
    pub fn is_auto(&self) -> bool {
        *self == McpView::Auto
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            McpView::Flat => "flat",
            McpView::Fleet => "fleet",
            McpView::Auto => "auto",
        }
    }
}

impl fmt::Display for McpView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A view name that is none of `flat`, `fleet`, `auto`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown view {0:?}: use flat, fleet or auto")]
pub struct BadView(pub String);

impl FromStr for McpView {
    type Err = BadView;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "flat" => Ok(McpView::Flat),
            "fleet" => Ok(McpView::Fleet),
            "auto" => Ok(McpView::Auto),
            other => Err(BadView(other.to_owned())),
        }
    }
}
