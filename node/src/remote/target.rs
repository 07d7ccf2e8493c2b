//! `--ssh USER@HOST[:PORT]` and `--ssh-option K=V`: which host an SSH-backed node works
//! on, and the ssh options it adds to its own.
//!
//! The node's own options come last and cannot be overridden: batch mode (no prompt
//! ever waits on a terminal nobody watches), strict host-key checking (an unknown or
//! changed key is an error, never accepted), and its own control socket. Options that
//! would weaken that or run local commands are refused when the node starts.

use super::error::RemoteError;

/// Options the node sets itself or that would undo its guarantees (lower case).
const REFUSED_OPTIONS: &[&str] = &[
    "stricthostkeychecking",
    "batchmode",
    "controlmaster",
    "controlpath",
    "controlpersist",
    "permitlocalcommand",
    "localcommand",
    "remotecommand",
    "requesttty",
    "forwardagent",
    "forwardx11",
    "forwardx11trusted",
    "sessiontype",
    "stdinnull",
    "forkafterauthentication",
    "escapechar",
    // Run a local command, or load local code.
    "proxycommand",
    "knownhostscommand",
    "pkcs11provider",
    "securitykeyprovider",
    "include",
    // Forward ports: the far host could reach the node's own network.
    "localforward",
    "remoteforward",
    "dynamicforward",
    "gatewayports",
    "tunnel",
    "tunneldevice",
];

/// Where an SSH-backed node works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// `None`: the user ssh picks (its config, else the local user name).
    pub user: Option<String>,
    /// A name, an IPv4 address or an IPv6 address (without brackets).
    pub host: String,
    pub port: Option<u16>,
    /// `-o K=V` options, validated.
    pub options: Vec<String>,
}

impl SshTarget {
    /// Parses `USER@HOST[:PORT]` (IPv6 as `[ADDR]:PORT`) and the extra options.
    pub fn parse(spec: &str, options: &[String]) -> Result<SshTarget, RemoteError> {
        let bad = |why: &str| RemoteError::BadTarget(format!("--ssh {spec:?}: {why}"));
        let (user, rest) = match spec.rsplit_once('@') {
            Some((u, r)) => (Some(u), r),
            None => (None, spec),
        };
        if let Some(u) = user {
            if u.is_empty() || !u.chars().all(is_name_char) {
                return Err(bad(
                    "the user name may hold letters, digits, '.', '_' and '-'",
                ));
            }
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (addr, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address needs its closing ']'"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("text after ']'"))?),
            };
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(bad("not an IPv6 address between '[' and ']'"));
            }
            (addr, port)
        } else {
            match rest.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        if host.is_empty()
            || host.starts_with('-')
            || !host.chars().all(|c| is_name_char(c) || c == ':')
        {
            return Err(bad("the host must be a name or an address"));
        }
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad("the port must be 1-65535"))?,
            ),
        };
        for o in options {
            check_option(o)?;
        }
        Ok(SshTarget {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
            options: options.to_vec(),
        })
    }

    /// `user@host` (or `host`) as people write it, for messages.
    pub fn shown(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
        match &self.user {
            Some(u) => format!("{u}@{host}{port}"),
            None => format!("{host}{port}"),
        }
    }

    /// The arguments every ssh the node runs gets before its own (`-M`, `-T`…) and
    /// the destination: the owner's options, then the node's, which win (ssh keeps
    /// the first value of an option, so the node's come first on the command line).
    pub fn base_args(&self, control: &std::path::Path) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        let mut opt = |o: String| {
            args.push("-o".into());
            args.push(o.into());
        };
        opt("BatchMode=yes".into());
        opt("StrictHostKeyChecking=yes".into());
        opt(format!("ControlPath={}", control.display()));
        opt("ServerAliveInterval=10".into());
        opt("ServerAliveCountMax=3".into());
        opt("ConnectTimeout=15".into());
        opt("ForwardAgent=no".into());
        opt("ForwardX11=no".into());
        opt("PermitLocalCommand=no".into());
        opt("LogLevel=ERROR".into());
        for o in &self.options {
            opt(o.clone());
        }
        if let Some(p) = self.port {
            args.push("-p".into());
            args.push(p.to_string().into());
        }
        if let Some(u) = &self.user {
            args.push("-l".into());
            args.push(u.into());
        }
        args
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// An `--ssh-option`: `Key=Value`, a known-safe key, no control characters.
fn check_option(o: &str) -> Result<(), RemoteError> {
    let bad = |why: String| RemoteError::BadTarget(format!("--ssh-option {o:?}: {why}"));
    let (key, value) = o
        .split_once('=')
        .ok_or_else(|| bad("write it as Key=Value".into()))?;
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(bad(
            "the key is an ssh_config keyword (letters and digits)".into()
        ));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(bad("the value holds control characters".into()));
    }
    if REFUSED_OPTIONS.contains(&key.to_ascii_lowercase().as_str()) {
        return Err(bad(format!(
            "{key} is set by the node itself (batch mode, strict host-key checking, its own \
             control socket, no forwarding, no local commands or code: ProxyCommand, \
             KnownHostsCommand, Include and providers are refused) and cannot be changed"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        let t = SshTarget::parse("ops@nas.lan:2222", &[]).unwrap();
        assert_eq!(t.user.as_deref(), Some("ops"));
        assert_eq!(t.host, "nas.lan");
        assert_eq!(t.port, Some(2222));
        assert_eq!(t.shown(), "ops@nas.lan:2222");
        let t = SshTarget::parse("[::1]:22", &[]).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.user.as_deref()),
            ("::1", Some(22), None)
        );
        assert_eq!(t.shown(), "[::1]:22");
        assert_eq!(SshTarget::parse("box", &[]).unwrap().port, None);
        for bad in [
            "",
            "@h",
            "u@",
            "u@h:0",
            "u@h:x",
            "-oProxyCommand=x",
            "u@h;id",
            "[::1",
            "[zz]:1",
            "a b@h",
        ] {
            assert!(SshTarget::parse(bad, &[]).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_that_weaken_the_node_are_refused() {
        let ok = vec![
            "UserKnownHostsFile=/tmp/kh".to_owned(),
            "ProxyJump=bastion".to_owned(),
        ];
        assert!(SshTarget::parse("h", &ok).is_ok());
        for bad in [
            "StrictHostKeyChecking=no",
            "stricthostkeychecking=accept-new",
            "ControlPath=/tmp/x",
            "LocalCommand=id",
            "ForwardAgent=yes",
            "ProxyCommand=sh -c id",
            "proxycommand=nc %h %p",
            "KnownHostsCommand=/tmp/x",
            "PKCS11Provider=/tmp/evil.so",
            "SecurityKeyProvider=/tmp/evil.so",
            "Include=/tmp/other_config",
            "LocalForward=8080 127.0.0.1:80",
            "RemoteForward=9000 127.0.0.1:22",
            "DynamicForward=1080",
            "NoEquals",
            "Bad-Key=1",
            "IdentityFile=/a\nb",
        ] {
            assert!(SshTarget::parse("h", &[bad.to_owned()]).is_err(), "{bad}");
        }
    }
}
