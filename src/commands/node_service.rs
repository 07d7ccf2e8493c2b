//! `gsv node install` and `gsv node uninstall`: a node as a service on this machine.
//!
//! Install, in this order, so that a failure leaves nothing behind until the gateway
//! has accepted the node:
//!
//! 1. check every flag (and that the chosen service manager can run here);
//! 2. enroll: one connect that exchanges the join token for the node's credential,
//!    stored in the node's data directory — skipped when a credential is there
//!    already, so a second run never enrolls twice (the join token is spent anyway);
//! 3. with `--bin-dir`, copy this executable there (only if it differs);
//! 4. keep the token in `node-<id>.token` (0600) for `--token-file`;
//! 5. write the unit (or plist) and start the service, restarting it when the unit,
//!    the executable or the token changed; with no service manager, start the node
//!    in the background and say so.
//!
//! `--print` does none of it: it prints the unit and what would happen.

use crate::cli::{NodeInstallArgs, NodeUninstallArgs, ServiceArg};
use crate::exit;
use crate::service::exe::{self, ExeChange};
use crate::service::spec::{self, Scope, ServiceSpec};
use crate::service::{argv, background, launchd, systemd, Manager, ServiceError};
use gsv_node::enroll::{EnrollError, Enrollment};
use gsv_protocol::NodeId;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

/// Why `gsv node install` stopped.
#[derive(Debug, Error)]
enum InstallError {
    /// `gsv node`'s own flag check, already worded as `error: CODE: message`.
    #[error("{0}")]
    Flags(String),
    #[error(transparent)]
    Enroll(#[from] EnrollError),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl InstallError {
    fn report(&self) -> u8 {
        match self {
            InstallError::Flags(m) => {
                eprintln!("{m}");
                exit::USAGE
            }
            InstallError::Enroll(e) => {
                eprintln!(
                    "error: {}: {}",
                    e.code(),
                    crate::terminal::safe(&e.to_string())
                );
                eprintln!("nothing was installed");
                e.exit_code()
            }
            InstallError::Service(e) => {
                eprintln!(
                    "error: {}: {}",
                    e.code(),
                    crate::terminal::safe(&e.to_string())
                );
                e.exit_code()
            }
        }
    }
}

/// `gsv node install`.
pub async fn install(args: NodeInstallArgs) -> u8 {
    match install_steps(args).await {
        Ok(()) => exit::OK,
        Err(e) => e.report(),
    }
}

async fn install_steps(a: NodeInstallArgs) -> Result<(), InstallError> {
    let scope = Scope::choose(a.scope.system, a.scope.user);
    let node = a.node;
    let mut config = node.clone().config().map_err(InstallError::Flags)?;
    let id = config.id.clone();
    let gateway = config.gateway.clone();
    let data = argv::absolute(&spec::default_data(scope, node.node_data.as_deref()))?;
    let workspace = argv::absolute(&node.workspace.clone().unwrap_or_else(crate::service::home))?;
    let token_file = ServiceSpec::token_file(&data, &id);
    let args = argv::node_argv(&node, &gateway, id.as_str(), &token_file, &data, &workspace)?;
    let asked = match a.service {
        ServiceArg::Auto => None,
        ServiceArg::Systemd => Some(Manager::Systemd),
        ServiceArg::Launchd => Some(Manager::Launchd),
        ServiceArg::Background => Some(Manager::Background),
    };
    let (manager, fallback) = Manager::choose(asked, scope, a.print)?;
    let exe_path = match &a.bin_dir {
        Some(dir) => argv::absolute(&dir.join("gsv"))?,
        None => std::env::current_exe().map_err(ServiceError::io(
            "find",
            std::path::Path::new("this executable"),
        ))?,
    };
    let spec = ServiceSpec {
        id: id.clone(),
        scope,
        exe: exe_path,
        args,
        data: data.clone(),
        keep_sessions: node.keep_sessions_on_exit,
    };
    let credential = data.join(format!("node-{id}.credential"));
    let enrolled = credential.exists();
    if a.print {
        print_plan(
            &spec,
            manager,
            fallback.as_deref(),
            enrolled,
            a.bin_dir.is_some(),
        )?;
        return Ok(());
    }

    eprintln!(
        "installing node {id} ({} service, {}) for gateway {gateway}",
        scope.as_str(),
        manager.as_str()
    );
    if enrolled {
        eprintln!(
            "already enrolled: {} (the token is not used again)",
            credential.display()
        );
    } else {
        config.data_dir = Some(data.clone());
        config.workspace = workspace.clone();
        match gsv_node::enroll::enroll(config, CancellationToken::new()).await? {
            Enrollment::Enrolled { .. } => {
                eprintln!(
                    "enrolled as {id}: credential stored in {}",
                    credential.display()
                )
            }
            Enrollment::Accepted => eprintln!("the gateway accepted the node's credential"),
        }
    }
    let exe_changed = match &a.bin_dir {
        Some(dir) => {
            let (path, change) = exe::install(dir)?;
            match change {
                ExeChange::Installed => eprintln!("installed {}", path.display()),
                ExeChange::Replaced => eprintln!("upgraded {}", path.display()),
                ExeChange::Unchanged => eprintln!("{} is up to date", path.display()),
            }
            if !on_path(dir) {
                eprintln!("note: {} is not on your PATH", dir.display());
            }
            change != ExeChange::Unchanged
        }
        None => false,
    };
    let token = gsv_gateway::datadir::read_line(&token_file);
    let token_changed = token.as_deref() != Some(config_token(&node)?.as_str());
    if token_changed {
        gsv_gateway::datadir::ensure_dir(&data).map_err(ServiceError::io("create", &data))?;
        crate::service::write_file(
            &token_file,
            format!("{}\n", config_token(&node)?).as_bytes(),
            0o600,
        )?;
        eprintln!("token kept in {} (0600)", token_file.display());
    }
    if let Some(why) = &fallback {
        eprintln!("note: {why}: starting the node in the background instead");
        eprintln!(
            "  to run it in the foreground yourself: {}",
            spec.foreground_command()
        );
    }
    let changed = manager.apply(&spec, exe_changed || token_changed)?;
    if changed.0 {
        eprintln!("node {id} installed");
    } else {
        eprintln!("node {id} was installed already: nothing changed");
    }
    Ok(())
}

/// The token as given (`--token`, `$GSV_TOKEN` or the first line of `--token-file`).
fn config_token(node: &crate::cli::NodeArgs) -> Result<String, InstallError> {
    node.clone()
        .config()
        .map(|c| c.token)
        .map_err(InstallError::Flags)
}

/// Whether `dir` is one of `$PATH`'s directories.
fn on_path(dir: &std::path::Path) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    std::env::split_paths(&path).any(|p| p == dir)
}

/// `--print`: the definition on stdout, the steps on stderr.
fn print_plan(
    spec: &ServiceSpec,
    manager: Manager,
    fallback: Option<&str>,
    enrolled: bool,
    copy: bool,
) -> Result<(), ServiceError> {
    let id = &spec.id;
    if enrolled {
        eprintln!("would not enroll: node {id} is enrolled already");
    } else {
        eprintln!("would enroll node {id} with the token");
    }
    if copy {
        eprintln!("would copy this executable to {}", spec.exe.display());
    }
    eprintln!(
        "would keep the token in {} (0600)",
        ServiceSpec::token_file(&spec.data, id).display()
    );
    if let Some(why) = fallback {
        eprintln!("note: {why}: the node would run in the background");
    }
    match manager {
        Manager::Background => eprintln!(
            "would start in the background (pid file {}):",
            manager.definition_path(spec).display()
        ),
        _ => eprintln!(
            "would write {}, enable and start it:",
            manager.definition_path(spec).display()
        ),
    }
    print!("{}", manager.definition(spec)?);
    Ok(())
}

/// `gsv node uninstall`.
pub fn uninstall(a: NodeUninstallArgs) -> u8 {
    match uninstall_steps(a) {
        Ok(()) => exit::OK,
        Err(e) => InstallError::Service(e).report(),
    }
}

fn uninstall_steps(a: NodeUninstallArgs) -> Result<(), ServiceError> {
    let scope = Scope::choose(a.scope.system, a.scope.user);
    let data = argv::absolute(&spec::default_data(scope, a.node_data.as_deref()))?;
    let id = match a.id {
        Some(id) => NodeId::parse(&id).map_err(|e| ServiceError::Usage(e.to_string()))?,
        None => the_installed_node(scope, &data)?,
    };
    let mut removed = systemd::remove(scope, id.as_str())?;
    removed |= launchd::remove(scope, id.as_str())?;
    removed |= background::remove(&data, &id)?;
    let token_file = ServiceSpec::token_file(&data, &id);
    if token_file.exists() {
        std::fs::remove_file(&token_file).map_err(ServiceError::io("remove", &token_file))?;
        eprintln!("removed {}", token_file.display());
        removed = true;
    }
    if !removed {
        eprintln!(
            "nothing is installed for node {id} ({} service, data {})",
            scope.as_str(),
            data.display()
        );
        return Ok(());
    }
    eprintln!(
        "node {id} uninstalled. Kept: the gsv executable and the credential in {}; to retire the node, revoke it on the gateway (gsv token list, gsv token revoke ID)",
        data.join(format!("node-{id}.credential")).display()
    );
    Ok(())
}

/// The one node installed in `scope` (or with files in `data`), for `uninstall`
/// without `--id`.
fn the_installed_node(scope: Scope, data: &std::path::Path) -> Result<NodeId, ServiceError> {
    let mut ids = systemd::installed(scope);
    ids.extend(launchd::installed(scope));
    ids.extend(background::installed(data));
    ids.extend(crate::service::ids_in(data, "node-", ".token"));
    ids.sort();
    ids.dedup();
    match ids.as_slice() {
        [one] => NodeId::parse(one).map_err(|e| ServiceError::Usage(e.to_string())),
        [] => Err(ServiceError::Usage(format!(
            "no node is installed here ({} service, data {}); give --id ID",
            scope.as_str(),
            data.display()
        ))),
        many => Err(ServiceError::Usage(format!(
            "several nodes are installed here ({}): give --id ID",
            many.join(", ")
        ))),
    }
}
