//! `gsv token create|list|revoke`: writes the store directly, so it works whether or
//! not the gateway runs (the gateway reads tokens at each authentication). Tokens are
//! issued and revoked through [`gsv_gateway::tokens`], which records each in the audit
//! log in the same transaction.

use crate::exit;
use gsv_gateway::operator::OperatorRole;
use gsv_gateway::tokens::{self, Issued, Issuer};
use gsv_gateway::{Policy, PolicySpec, Store, TokenKind};
use gsv_protocol::inventory::{check_labels, parse_label, Labels};
use gsv_protocol::NodeId;
use std::path::Path;

fn open(data: &Path) -> Result<Store, u8> {
    Store::open(data).map_err(|e| {
        eprintln!("error: internal: {e}");
        exit::TOOL_ERROR
    })
}

/// `gsv token create node ID`: prints a one-time join token alone on stdout. The node
/// exchanges it at its first connect for its own credential. With `install`
/// (`--install [--gateway URL]`) it prints the one-line installer instead, the token
/// inside it ([`super::install_line`]).
pub fn create_node(data: &Path, id: &str, labels: &[String], install: Option<Option<&str>>) -> u8 {
    let id = match NodeId::parse(id) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("error: invalid_args: {e}");
            return exit::USAGE;
        }
    };
    // Checked before any token exists: a bad label leaves nothing behind.
    let labels = match parse_labels(labels) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: invalid_args: {e}");
            return exit::USAGE;
        }
    };
    // Checked before the token exists, so a refused --install leaves none behind.
    let installer = match install.map(|gateway| super::install_line::prepare(data, gateway, &id)) {
        None => None,
        Some(Ok(i)) => Some(i),
        Some(Err(e)) => {
            eprintln!("error: {}: {e}", e.code());
            return e.exit_code();
        }
    };
    let store = match open(data) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match tokens::issue_with_labels(
        &store,
        Issuer::Cli,
        TokenKind::Join,
        id.as_str(),
        None,
        labels.as_ref(),
    ) {
        Ok(Issued {
            token,
            id: token_id,
        }) => {
            if let Some(l) = labels.as_ref().filter(|l| !l.is_empty()) {
                eprintln!("node {id} labels: {}", super::nodes::compact_labels(l));
            }
            match installer {
                None => {
                    println!("{token}");
                    eprintln!(
                        "join token {token_id} for node {id}: one use; the node exchanges it for its own credential at its first connect (shown once; stored hashed)"
                    );
                }
                Some(installer) => {
                    println!("{}", installer.line(&token));
                    eprintln!(
                        "join token {token_id} for node {id} (one use; shown once, inside the line above)."
                    );
                    eprintln!(
                        "Run the line on the new machine: as root for a system service, or as the user the node should run as (add --user, --workspace DIR, --read-only ... after the token)."
                    );
                    for note in &installer.notes {
                        eprintln!("note: {note}");
                    }
                }
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("error: internal: {e}");
            exit::TOOL_ERROR
        }
    }
}

/// The labels of `--label K=V` (repeated): `None` when none were given (the node id
/// keeps the labels it has), else the whole set, checked. A key given twice is an
/// error, not a silent choice.
pub fn parse_labels(args: &[String]) -> Result<Option<Labels>, String> {
    if args.is_empty() {
        return Ok(None);
    }
    let mut labels = Labels::new();
    for arg in args {
        let (k, v) = parse_label(arg).map_err(|e| e.to_string())?;
        if labels.insert(k.clone(), v).is_some() {
            return Err(format!("label key {k:?} is given twice"));
        }
    }
    check_labels(&labels).map_err(|e| e.to_string())?;
    Ok(Some(labels))
}

/// `gsv token create agent NAME --allow/--deny/--confirm`: prints the token alone.
pub fn create_agent(data: &Path, name: &str, spec: PolicySpec) -> u8 {
    if name.trim().is_empty() || name.len() > 64 {
        eprintln!("error: invalid_args: agent name must be 1-64 characters");
        return exit::USAGE;
    }
    if let Err(e) = Policy::compile(&spec) {
        eprintln!("error: invalid_args: {e}");
        return exit::USAGE;
    }
    if spec.allow.is_empty() {
        eprintln!("warning: no --allow given: this token can see and call nothing (default deny)");
    }
    let standard = gsv_node::tools::STANDARD_TOOLS;
    for w in gsv_gateway::policy::lint(&spec, &gsv_node::tools::standard_names())
        .into_iter()
        .chain(gsv_gateway::policy::lint_classes(&spec, standard))
    {
        eprintln!("warning: {w}");
    }
    let store = match open(data) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match tokens::issue(&store, Issuer::Cli, TokenKind::Agent, name, Some(&spec)) {
        Ok(Issued {
            token,
            id: token_id,
        }) => {
            println!("{token}");
            eprintln!("agent token {token_id} for {name} (shown once; stored hashed)");
            exit::OK
        }
        Err(e) => {
            eprintln!("error: internal: {e}");
            exit::TOOL_ERROR
        }
    }
}

/// `gsv token create operator NAME --role approver|viewer`: prints the token alone.
pub fn create_operator(data: &Path, name: &str, role: OperatorRole) -> u8 {
    if name.trim().is_empty() || name.len() > 64 {
        eprintln!("error: invalid_args: operator name must be 1-64 characters");
        return exit::USAGE;
    }
    let store = match open(data) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match tokens::issue_operator(&store, Issuer::Cli, name, role) {
        Ok(Issued {
            token,
            id: token_id,
        }) => {
            println!("{token}");
            eprintln!(
                "operator token {token_id} for {name}, role {role} (shown once; stored hashed)"
            );
            exit::OK
        }
        Err(e) => {
            eprintln!("error: internal: {e}");
            exit::TOOL_ERROR
        }
    }
}

/// `gsv token list`.
pub fn list(data: &Path, json: bool) -> u8 {
    let store = match open(data) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match store.list_tokens() {
        Ok(tokens) => {
            if json {
                crate::commands::client::print_json(&tokens);
            } else {
                for t in tokens {
                    let state = if t.revoked_at.is_some() {
                        "revoked"
                    } else {
                        "active"
                    };
                    let policy = t
                        .policy
                        .map(|p| {
                            format!(
                                "allow={} deny={} confirm={}{}{}{}",
                                p.allow.join(","),
                                p.deny.join(","),
                                p.confirm.join(","),
                                if p.self_confirm { " self-confirm" } else { "" },
                                if p.mcp_view.is_auto() {
                                    String::new()
                                } else {
                                    format!(" mcp-view={}", p.mcp_view)
                                },
                                p.mcp_tools
                                    .as_deref()
                                    .map(|t| format!(" mcp-tools={t}"))
                                    .unwrap_or_default()
                            )
                        })
                        .or_else(|| t.role.map(|r| format!("role={r}")))
                        .unwrap_or_default();
                    println!(
                        "{}  {:<6} {:<24} {:<8} {}  {}",
                        t.id,
                        t.kind,
                        crate::terminal::safe(&t.subject),
                        state,
                        gsv_gateway::time::rfc3339(t.created_at),
                        policy
                    );
                }
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("error: internal: {e}");
            exit::TOOL_ERROR
        }
    }
}

/// `gsv token revoke ID`.
pub fn revoke(data: &Path, id: &str) -> u8 {
    let store = match open(data) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match tokens::revoke(&store, Issuer::Cli, id) {
        Ok(true) => {
            eprintln!("revoked {id} (open connections using it close within a second)");
            exit::OK
        }
        Ok(false) => {
            eprintln!("error: not_found: no active token with id {id}");
            exit::USAGE
        }
        Err(e) => {
            eprintln!("error: internal: {e}");
            exit::TOOL_ERROR
        }
    }
}
