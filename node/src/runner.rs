//! The node's main loop: dial, register, serve, and on any failure back off and dial
//! again, until shut down.
//!
//! Only a handful of failures stop the node (see [`NodeError`]); in particular a
//! refusal (or a rejected TLS certificate) is fatal only before the first successful
//! registration of the process, so a mistyped token or pin exits with a clear message
//! while a node that once worked rides out gateway restarts and maintenance forever. A
//! plain `ws://` gateway off loopback is refused before anything is dialled, unless
//! the node runs with `--insecure`.

use crate::backoff::Backoff;
use crate::config::{Backend, NodeConfig};
use crate::error::is_fatal_refusal;
use crate::events::EventSender;
use crate::login_profile::{self, LoginProfileCheck};
use crate::probe::Probe;
use crate::registered::{self, ConnectionEnd};
use crate::registry::Registry;
use crate::remote::ssh::SshMaster;
use crate::remote::{Reach, RemoteError, RemoteHost, SshTarget};
use crate::state::NodeState;
use gsv_protocol::endpoint::{Gateway, NODE_PATH};
use gsv_protocol::ErrorCode;
use gsv_transport::tls;
use gsv_transport::ConnectError;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, info_span, warn, Instrument};

pub use crate::error::NodeError;

/// Shortest heartbeat accepted (a zero interval would spin).
const MIN_HEARTBEAT: Duration = Duration::from_millis(50);

/// Runs a node with the standard tool set until `shutdown` is cancelled (then `Ok`) or
/// a fatal error occurs.
pub async fn run(config: NodeConfig, shutdown: CancellationToken) -> Result<(), NodeError> {
    match config.backend.clone() {
        Backend::Local => {
            let registry = Registry::standard(&config)?;
            run_with_registry(config, registry, shutdown).await
        }
        Backend::Ssh { target, options } => run_ssh(config, &target, &options, shutdown).await,
        Backend::Container { name, engine } => {
            run_container(config, &name, engine.as_deref(), shutdown).await
        }
    }
}

/// [`run`] for a node that works on another host over SSH.
async fn run_ssh(
    config: NodeConfig,
    target: &str,
    options: &[String],
    shutdown: CancellationToken,
) -> Result<(), NodeError> {
    let target = SshTarget::parse(target, options)?;
    let ssh = which::which("ssh").map_err(|_| {
        RemoteError::Unsupported("--ssh needs the OpenSSH client (`ssh`) on PATH".into())
    })?;
    let host = RemoteHost::new(
        Reach::Ssh(Box::new(SshMaster::new(target, ssh)?)),
        config.id.as_str(),
    )?;
    run_remote(config, host, shutdown).await
}

/// [`run`] for a node that works inside a container through its engine.
async fn run_container(
    config: NodeConfig,
    name: &str,
    engine: Option<&str>,
    shutdown: CancellationToken,
) -> Result<(), NodeError> {
    let engine = crate::remote::container::engine(engine)?;
    let name = crate::remote::container::check_name(name)?;
    let host = RemoteHost::new(
        Reach::Container {
            engine,
            name: name.to_owned(),
        },
        config.id.as_str(),
    )?;
    run_remote(config, host, shutdown).await
}

/// Reaches `host` once before anything else (an unknown or changed host key, or a
/// refused login, stops the node with a clear error; a host that cannot be reached
/// yet is waited for with backoff), takes its home as the workspace unless one was
/// given, and runs the node with the tools that work there.
async fn run_remote(
    mut config: NodeConfig,
    host: RemoteHost,
    shutdown: CancellationToken,
) -> Result<(), NodeError> {
    let span = info_span!("node", node_id = %config.id);
    let session = match config.remote_tmux.as_deref() {
        Some(s) => Some(crate::tools::term::on_host::check_session(s)?.to_owned()),
        None => None,
    };
    let host = Arc::new(host.with_tmux(session));
    let shown = host.shown();
    let reached = async {
        let mut backoff = Backoff::default();
        loop {
            match host.home().await {
                Ok(home) => {
                    info!(host = %shown, %home, "working on another host");
                    if config.workspace.as_os_str().is_empty() {
                        config.workspace = home.into();
                    }
                    return Ok(true);
                }
                Err(e @ (RemoteError::HostKey { .. } | RemoteError::Auth { .. })) => {
                    return Err(NodeError::Remote(e))
                }
                Err(e) => {
                    let delay = backoff.next_delay();
                    warn!(host = %shown, error = ?e, retry_in = ?delay, "the host cannot be reached yet");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(false),
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }
    .instrument(span.clone())
    .await?;
    if !reached {
        return Ok(());
    }
    let registry = Registry::remote(&config, Arc::clone(&host))?;
    let keep = config.keep_sessions_on_exit;
    let watching = CancellationToken::new();
    let watcher = tokio::spawn(crate::remote::watch::watch(
        Arc::clone(&host),
        registry.events().clone(),
        watching.clone(),
    ));
    let result = run_with_host(config, registry, Some(Arc::clone(&host)), shutdown).await;
    watching.cancel();
    let _ = watcher.await;
    if !keep {
        crate::remote::watch::end_all(&host).await;
    }
    host.disconnect().await;
    result
}

/// [`run`] with a caller-built tool set (custom tools, tests).
pub async fn run_with_registry(
    config: NodeConfig,
    registry: Registry,
    shutdown: CancellationToken,
) -> Result<(), NodeError> {
    run_with_host(config, registry, None, shutdown).await
}

/// [`run_with_registry`] for the tools of a node that work on `host` (`None`: this
/// machine).
async fn run_with_host(
    config: NodeConfig,
    mut registry: Registry,
    host: Option<Arc<RemoteHost>>,
    shutdown: CancellationToken,
) -> Result<(), NodeError> {
    // The owner's choices (`--tools`, `--without`, `--read-only`, `--no-approval`)
    // hold for a custom tool set too; the standard set has them applied already.
    registry.apply(&config)?;
    let span = info_span!("node", node_id = %config.id);
    async move {
        let Some(ready) = prepare(config, registry, host, &shutdown).await? else {
            return Ok(());
        };
        info!(url = %ready.url, tools = ?ready.node.registry.names(), "starting node");
        let result =
            reconnect_loop(Arc::clone(&ready.node), &ready.urls, ready.tls, &shutdown).await;
        ready.node.registry.shutdown().await;
        result
    }
    .instrument(span)
    .await
}

/// A node ready to dial: its shared state, the URL of the gateway's node endpoint and
/// the TLS trust for it.
pub(crate) struct Ready {
    pub node: Arc<NodeState>,
    /// The first gateway's node endpoint (what enrollment dials).
    pub url: String,
    /// Every gateway replica's node endpoint, in the order given (`--gateway
    /// URL1,URL2`): the node moves to the next one when its connection fails.
    pub urls: Vec<String>,
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// Everything before the first dial: checks the address (a plain `ws://` gateway off
/// loopback is refused here, unless `--insecure`), sets up TLS, probes the host and
/// its login profile, and builds the state every connection shares. `None`: shut down
/// meanwhile.
pub(crate) async fn prepare(
    mut config: NodeConfig,
    registry: Registry,
    host: Option<Arc<RemoteHost>>,
    shutdown: &CancellationToken,
) -> Result<Option<Ready>, NodeError> {
    // `--gateway URL1,URL2`: replicas of one cluster; each is checked like one.
    let gateways = config
        .gateway
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(Gateway::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let gateway = match gateways.first() {
        Some(g) => g.clone(),
        None => Gateway::parse(&config.gateway)?,
    };
    let urls: Vec<String> = gateways.iter().map(|g| g.ws_url(NODE_PATH)).collect();
    for other in gateways.iter().skip(1) {
        if !other.tls && !other.is_loopback() && !config.insecure {
            return Err(NodeError::Insecure {
                url: other.ws_url(NODE_PATH),
            });
        }
    }
    let any_tls = gateways.iter().any(|g| g.tls);
    let url = gateway.ws_url(NODE_PATH);
    // A remote host's workspace is a path there, checked there by every tool.
    if host.is_none() {
        if let Ok(absolute) = std::path::absolute(&config.workspace) {
            config.workspace = absolute;
        }
        if !config.workspace.is_dir() {
            warn!(workspace = %config.workspace.display(), "the workspace is not a directory");
        }
    }
    if config.heartbeat < MIN_HEARTBEAT {
        warn!(heartbeat = ?config.heartbeat, "heartbeat too short; using {MIN_HEARTBEAT:?}");
        config.heartbeat = MIN_HEARTBEAT;
    }
    // Refused before any connection attempt: the token must not leave in clear text.
    if !gateway.tls && !gateway.is_loopback() {
        if !config.insecure {
            return Err(NodeError::Insecure { url });
        }
        warn!(%url, "--insecure: the node token travels unencrypted");
    }
    if !any_tls && (config.ca.is_some() || config.pin.is_some()) {
        warn!(%url, "--ca / --pin are ignored: the gateway address is not https:// or wss://");
    }
    let tls = if any_tls {
        let (ca, pin) = (config.ca.clone(), config.pin.clone());
        let config =
            tokio::task::spawn_blocking(move || tls::client_config(ca.as_deref(), pin.as_deref()))
                .await
                .map_err(|e| tls::TlsError::Setup(e.to_string()))??;
        Some(config)
    } else {
        None
    };
    if let Some(host) = host {
        // The far host's facts and binaries; the login-profile check is about this
        // machine's shell, which runs none of the tools: it is not made.
        let probe = tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            probe = Probe::remote(host, registry.required_bins()) => probe,
        };
        let login_profile = LoginProfileCheck::off();
        return Ok(Some(ready(
            config,
            registry,
            probe,
            login_profile,
            (url, urls),
            tls,
        )));
    }
    // The profile files are fingerprinted before the login shell (which the probe
    // runs) reads them: a profile that rewrites itself as it runs is still caught.
    let places = login_profile::Places::of_process();
    let files = {
        let places = places.clone();
        match tokio::task::spawn_blocking(move || login_profile::snapshot_files(&places)).await {
            Ok(files) => files,
            Err(e) => return blocking_task_failed(e),
        }
    };
    let probe = tokio::select! {
        _ = shutdown.cancelled() => return Ok(None),
        probe = Probe::start(registry.required_bins()) => probe,
    };
    let login_profile = {
        let env = crate::probe::login_env().await;
        let file = config.login_profile_file();
        let accept = config.accept_login_profile;
        let span = tracing::Span::current();
        let check = tokio::task::spawn_blocking(move || {
            let _in_node = span.enter();
            LoginProfileCheck::start(file.as_deref(), accept, places, files, env)
        });
        match check.await {
            Ok(check) => check,
            Err(e) => return blocking_task_failed(e),
        }
    };
    Ok(Some(ready(
        config,
        registry,
        probe,
        login_profile,
        (url, urls),
        tls,
    )))
}

/// The shared state of a node whose host was probed, and what to dial.
fn ready(
    config: NodeConfig,
    registry: Registry,
    probe: Probe,
    login_profile: LoginProfileCheck,
    (url, urls): (String, Vec<String>),
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Ready {
    // The registry's sender: the tools (the session manager) already hold it.
    let events: EventSender = registry.events().clone();
    let protected = Arc::new(crate::protected::Protected::new(
        config.data_dir.iter().chain(&config.protect).cloned(),
    ));
    info!(paths = ?protected.paths(), "file tools never touch these (protected)");
    // The previous process's sessions are re-adopted before any call can arrive.
    let journal = crate::recover::open(&config, &registry);
    // After the journal made the data directory: other nodes on this host learn it is
    // gsv's from the marker.
    if let Some(dir) = config.data_dir.as_deref().filter(|d| d.is_dir()) {
        crate::protected::data_dirs::mark(dir);
    }
    let ledger =
        crate::ledger::Ledger::with_journal(journal.as_ref().map(|(j, _)| j.calls().clone()));
    let node = Arc::new(NodeState {
        credentials: crate::credential::Credentials::load(&config),
        protected,
        config,
        registry,
        probe,
        login_profile,
        events,
        ledger,
        instance: uuid::Uuid::new_v4().simple().to_string(),
    });
    if let Some((journal, adopted)) = journal {
        crate::recover::restore(&node, &journal, adopted);
    }
    Ready {
        node,
        url,
        urls,
        tls,
    }
}

/// A start-up task that did not finish: its panic goes on as if it had happened here;
/// a task cancelled because the runtime is shutting down stops the node quietly.
fn blocking_task_failed<T>(e: tokio::task::JoinError) -> Result<Option<T>, NodeError> {
    match e.try_into_panic() {
        Ok(panic) => std::panic::resume_unwind(panic),
        Err(_) => Ok(None),
    }
}

/// What one attempt came to.
enum Attempt {
    Failed(ConnectError),
    Served(ConnectionEnd),
    Shutdown,
}

async fn reconnect_loop(
    node: Arc<NodeState>,
    urls: &[String],
    tls: Option<Arc<rustls::ClientConfig>>,
    shutdown: &CancellationToken,
) -> Result<(), NodeError> {
    let mut backoff = Backoff::default();
    let mut registered_once = false;
    let mut failures: u32 = 0;
    // Which replica to dial: the next one after any connection that failed or ended.
    let mut turn: usize = 0;
    loop {
        let url = urls
            .get(turn % urls.len().max(1))
            .map(String::as_str)
            .unwrap_or_default();
        turn = turn.wrapping_add(1);
        let tls = if url.starts_with("wss://") {
            tls.clone()
        } else {
            None
        };
        if urls.len() > 1 {
            info!(%url, "dialling the gateway");
        }
        match attempt(&node, url, tls, shutdown).await {
            Attempt::Shutdown | Attempt::Served(ConnectionEnd::Shutdown) => {
                info!("node stopped");
                return Ok(());
            }
            Attempt::Served(ConnectionEnd::Evicted(reason)) => {
                error!(%reason, "the gateway closed this node's connection for good");
                return Err(NodeError::Evicted(reason));
            }
            Attempt::Served(ConnectionEnd::Lost(reason)) => {
                registered_once = true;
                failures = 0;
                backoff.reset();
                warn!(%reason, "lost the connection to the gateway");
            }
            Attempt::Failed(ConnectError::Refused(shape))
                if shape.code == ErrorCode::Unauthorized
                    && node.credentials.fall_back_to_join() =>
            {
                // Try the join token at once; it is not a failure of the given token.
                continue;
            }
            Attempt::Failed(ConnectError::Refused(shape)) => {
                failures = failures.saturating_add(1);
                error!(code = %shape.code, message = %shape.message, "the gateway refused this node");
                if !registered_once && is_fatal_refusal(shape.code) {
                    return Err(NodeError::Refused(shape));
                }
            }
            Attempt::Failed(ConnectError::Certificate(reason)) => {
                failures = failures.saturating_add(1);
                error!(%reason, "the gateway's TLS certificate was rejected");
                if !registered_once {
                    return Err(NodeError::Certificate(reason));
                }
            }
            Attempt::Failed(e) => {
                failures = failures.saturating_add(1);
                warn!(error = %e, failures, "could not register with the gateway");
            }
        }
        let delay = backoff.next_delay();
        info!(delay_ms = delay.as_millis() as u64, "reconnecting");
        tokio::select! {
            _ = shutdown.cancelled() => {
                info!("node stopped");
                return Ok(());
            }
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Dial, handshake and, once registered, serve until the connection ends.
async fn attempt(
    node: &Arc<NodeState>,
    url: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
    shutdown: &CancellationToken,
) -> Attempt {
    // A bulk lane dials the same gateway the same way.
    let lane = crate::transfer::LaneDial {
        url: url.to_owned(),
        tls: tls.clone(),
    };
    let dial = gsv_transport::dial(url, tls, node.config.connect_timeout);
    let mut ws = tokio::select! {
        _ = shutdown.cancelled() => return Attempt::Shutdown,
        r = dial => match r {
            Ok(ws) => ws,
            Err(e) => return Attempt::Failed(e),
        },
    };
    let handshake = gsv_transport::handshake(&mut ws, |nonce| node.connect_params(nonce));
    let hello = tokio::select! {
        _ = shutdown.cancelled() => return Attempt::Shutdown,
        r = handshake => match r {
            Ok(hello) => hello,
            Err(e) => return Attempt::Failed(e),
        },
    };
    info!(
        conn_id = %hello.conn_id,
        protocol = hello.protocol,
        limits = ?hello.limits,
        "registered with the gateway"
    );
    if let Some(credential) = hello.credential.clone() {
        node.credentials.adopt(credential);
    }
    Attempt::Served(registered::serve(ws, &hello, Arc::clone(node), shutdown, Some(lane)).await)
}
