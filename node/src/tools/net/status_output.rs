//! `network_status`' structured content ([`super::status`]): five sections, each
//! naming its `source` (the program or file it read) and holding either what it
//! found or an `error`.

use super::parse::ip_addr::Interface;
use super::parse::ip_route::Route;
use super::parse::nmcli::Connection;
use super::parse::resolv_conf::ResolvConf;
use super::parse::resolvectl::ResolverScope;
use super::parse::sockets::Listener;
use serde::Serialize;

/// The whole snapshot.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusOutput {
    pub interfaces: Interfaces,
    pub routes: Routes,
    pub network_manager: NetworkManager,
    pub listening: Listening,
    pub dns: Dns,
    pub elapsed_ms: u64,
}

/// `interfaces`: `ip -br addr`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Interfaces {
    Found {
        source: &'static str,
        entries: Vec<Interface>,
    },
    Failed {
        source: &'static str,
        error: String,
    },
}

/// `routes`: `ip route` and `ip -6 route`, each table on its own.
#[derive(Debug, Serialize)]
pub struct Routes {
    pub source: &'static str,
    pub ipv4: RouteTable,
    pub ipv6: RouteTable,
    /// Present only when both tables failed: the IPv4 table's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One routing table: its routes (a JSON array), or `{error}`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum RouteTable {
    Routes(Vec<Route>),
    Failed { error: String },
}

/// `networkManager`: the active NetworkManager connections, when nmcli is installed.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum NetworkManager {
    /// nmcli is not installed (`available: false`): not an error.
    NotInstalled {
        source: &'static str,
        available: bool,
        note: &'static str,
    },
    Active {
        source: &'static str,
        available: bool,
        active: Vec<Connection>,
    },
    Failed {
        source: &'static str,
        available: bool,
        error: String,
    },
}

/// `listening`: `ss -tulpn`, or `netstat -tulpn` where ss is missing.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Listening {
    Found {
        source: &'static str,
        sockets: Vec<Listener>,
    },
    Failed {
        source: &'static str,
        error: String,
    },
}

/// `dns`: `resolvectl status`, or the resolver configuration file where resolvectl is
/// missing or fails (`source` is then the file's path).
#[derive(Debug, Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum Dns {
    Resolvectl {
        source: &'static str,
        scopes: Vec<ResolverScope>,
    },
    ResolvConf {
        source: String,
        resolv_conf: ResolvConf,
        /// Why resolvectl was not used, when it is installed but failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        resolvectl_error: Option<String>,
    },
    Failed {
        source: String,
        error: String,
    },
}
