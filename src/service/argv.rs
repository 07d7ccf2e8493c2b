//! `gsv node`'s flags turned back into the command line a service runs.
//!
//! The unit runs `gsv node` with every flag the operator gave `gsv node install`,
//! spelled out explicitly (no environment variable is needed at run time), with
//! paths made absolute, and with the token replaced by `--token-file` and the data
//! directory given: a unit file is readable by every local user, so the token is
//! never on it. The flags are taken apart field by field, without a catch-all, so
//! a flag added to `gsv node` does not compile until it is handled here.

use super::spec::text;
use super::ServiceError;
use crate::cli::{NodeArgs, NodeGuardArgs, RoleArg, TrustArgs};
use std::path::Path;

/// The arguments after the executable: `node --gateway URL --id ID --token-file F
/// --data D --workspace W [flags...]`.
pub fn node_argv(
    args: &NodeArgs,
    gateway: &str,
    id: &str,
    token_file: &Path,
    data: &Path,
    workspace: &Path,
) -> Result<Vec<String>, ServiceError> {
    let NodeArgs {
        // Given explicitly by the caller: resolved (gateway, id, workspace, data) or
        // replaced (the token, by its file).
        gateway: _,
        id: _,
        token: _,
        token_file: _,
        workspace: given_workspace,
        ssh,
        ssh_option,
        container,
        engine,
        tmux,
        node_data: _,
        echo_tool,
        echo_needs_approval,
        confine,
        protect,
        guards:
            NodeGuardArgs {
                read_only,
                tools,
                without,
                no_approval,
                approve_shell,
                approve_exec,
                fetch_allow,
                sessions_per_token,
                accept_login_profile,
            },
        role,
        heartbeat_ms,
        trust: TrustArgs { ca, pin },
        insecure,
        keep_sessions_on_exit,
    } = args;
    if *accept_login_profile {
        return Err(ServiceError::Usage(
            "--accept-login-profile is a one-time decision, not for a service: run `gsv node ... --accept-login-profile` once by hand".into(),
        ));
    }
    let mut argv: Vec<String> = vec!["node".into()];
    let mut flag = |name: &str, value: Option<&str>| {
        argv.push(name.to_owned());
        if let Some(v) = value {
            argv.push(v.to_owned());
        }
    };
    flag("--gateway", Some(gateway));
    flag("--id", Some(id));
    flag("--token-file", Some(text(&absolute(token_file)?)?));
    flag("--data", Some(text(&absolute(data)?)?));
    if let Some(session) = tmux {
        flag("--tmux", Some(session));
    }
    match ssh {
        // A path on that host, as given; none: the home there.
        Some(target) => {
            flag("--ssh", Some(target));
            for o in ssh_option {
                flag("--ssh-option", Some(o));
            }
            if let Some(w) = given_workspace {
                flag("--workspace", Some(text(w)?));
            }
        }
        None => match container {
            Some(name) => {
                flag("--container", Some(name));
                if let Some(e) = engine {
                    flag("--engine", Some(e));
                }
                if let Some(w) = given_workspace {
                    flag("--workspace", Some(text(w)?));
                }
            }
            None => flag("--workspace", Some(text(&absolute(workspace)?)?)),
        },
    }
    if *echo_tool {
        flag("--echo-tool", None);
    }
    if *echo_needs_approval {
        flag("--echo-needs-approval", None);
    }
    if *confine {
        flag("--confine", None);
    }
    for p in protect {
        flag("--protect", Some(text(&absolute(p)?)?));
    }
    if *read_only {
        flag("--read-only", None);
    }
    for glob in tools {
        flag("--tools", Some(glob));
    }
    for glob in without {
        flag("--without", Some(glob));
    }
    for name in no_approval {
        flag("--no-approval", Some(name));
    }
    for re in approve_shell {
        flag("--approve-shell", Some(re));
    }
    for entry in approve_exec {
        flag("--approve-exec", Some(entry));
    }
    for glob in fetch_allow {
        flag("--fetch-allow", Some(glob));
    }
    let default_sessions = gsv_node::sessions::Limits::default().max_running_per_owner;
    if *sessions_per_token != default_sessions {
        flag(
            "--sessions-per-token",
            Some(&sessions_per_token.to_string()),
        );
    }
    if *role != RoleArg::Execution {
        flag("--role", Some("specialized"));
    }
    if *heartbeat_ms != gsv_protocol::limits::DEFAULT_HEARTBEAT_MS {
        flag("--heartbeat-ms", Some(&heartbeat_ms.to_string()));
    }
    if let Some(ca) = ca {
        flag("--ca", Some(text(&absolute(ca)?)?));
    }
    if let Some(pin) = pin {
        flag("--pin", Some(pin));
    }
    if *insecure {
        flag("--insecure", None);
    }
    if *keep_sessions_on_exit {
        flag("--keep-sessions-on-exit", None);
    }
    for a in &argv {
        if a.chars().any(char::is_control) {
            return Err(ServiceError::ControlCharacter(a.clone()));
        }
    }
    Ok(argv)
}

/// `p` made absolute against the current directory (not resolving symlinks).
pub fn absolute(p: &Path) -> Result<std::path::PathBuf, ServiceError> {
    std::path::absolute(p).map_err(ServiceError::io("resolve", p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command, NodeServiceCommand};
    use clap::Parser;

    fn install_args(extra: &[&str]) -> NodeArgs {
        let argv = [
            "gsv",
            "node",
            "install",
            "--gateway",
            "https://gw:8787",
            "--id",
            "web1",
            "--token",
            "t",
        ];
        let cli = Cli::try_parse_from(argv.iter().chain(extra)).expect("parses");
        match cli.command {
            Command::Node(n) => match n.service {
                Some(NodeServiceCommand::Install(i)) => i.node,
                _ => panic!("not install"),
            },
            _ => panic!("not node"),
        }
    }

    #[test]
    fn every_flag_comes_back_with_absolute_paths_and_no_token() {
        let args = install_args(&[
            "--echo-tool",
            "--confine",
            "--protect",
            "secrets",
            "--read-only",
            "--tools",
            "Read,fs_*",
            "--without",
            "fs_stat",
            "--no-approval",
            "Echo",
            "--echo-needs-approval",
            "--approve-shell",
            "^ls( -l)?$",
            "--sessions-per-token",
            "3",
            "--role",
            "specialized",
            "--heartbeat-ms",
            "500",
            "--pin",
            "ab:cd",
            "--insecure",
            "--keep-sessions-on-exit",
        ]);
        let argv = node_argv(
            &args,
            "https://gw:8787",
            "web1",
            Path::new("/d/node-web1.token"),
            Path::new("/d"),
            Path::new("/w"),
        )
        .unwrap();
        let cwd = std::env::current_dir().unwrap();
        let protect = cwd.join("secrets").to_str().unwrap().to_owned();
        assert_eq!(
            argv,
            [
                "node",
                "--gateway",
                "https://gw:8787",
                "--id",
                "web1",
                "--token-file",
                "/d/node-web1.token",
                "--data",
                "/d",
                "--workspace",
                "/w",
                "--echo-tool",
                "--echo-needs-approval",
                "--confine",
                "--protect",
                &protect,
                "--read-only",
                "--tools",
                "Read",
                "--tools",
                "fs_*",
                "--without",
                "fs_stat",
                "--no-approval",
                "Echo",
                "--approve-shell",
                "^ls( -l)?$",
                "--sessions-per-token",
                "3",
                "--role",
                "specialized",
                "--heartbeat-ms",
                "500",
                "--pin",
                "ab:cd",
                "--insecure",
                "--keep-sessions-on-exit",
            ]
        );
        assert!(!argv.iter().any(|a| a == "t"), "the token never appears");
        // What comes back parses as `gsv node` again.
        let again =
            Cli::try_parse_from(std::iter::once("gsv").chain(argv.iter().map(|s| s.as_str())));
        assert!(again.is_ok());
    }

    #[test]
    fn defaults_are_left_out_and_one_time_flags_refused() {
        let argv = node_argv(
            &install_args(&[]),
            "https://gw:8787",
            "web1",
            Path::new("/d/t"),
            Path::new("/d"),
            Path::new("/w"),
        )
        .unwrap();
        assert_eq!(argv.len(), 11, "{argv:?}");
        let e = node_argv(
            &install_args(&["--accept-login-profile"]),
            "https://gw:8787",
            "web1",
            Path::new("/d/t"),
            Path::new("/d"),
            Path::new("/w"),
        )
        .unwrap_err();
        assert_eq!(e.code(), "invalid_args");
        let e = node_argv(
            &install_args(&["--approve-shell", "a\nb"]),
            "https://gw:8787",
            "web1",
            Path::new("/d/t"),
            Path::new("/d"),
            Path::new("/w"),
        )
        .unwrap_err();
        assert!(matches!(e, ServiceError::ControlCharacter(_)), "{e}");
    }
}
