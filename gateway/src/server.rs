//! Starting and stopping a gateway.
//!
//! `start` opens the store, makes sure an admin token exists, loads or makes the TLS
//! certificate when configured, binds the port(s), records the address in the data
//! directory (`https://ADDR` when TLS is on), and serves until `shutdown`. It returns
//! the bound address, so tests and `gsv up` can listen on port 0.

use crate::config::GatewayConfig;
use crate::datadir;
use crate::http;
use crate::state::Shared;
use crate::store::{Store, StoreError};
use crate::token::TokenKind;
use std::net::SocketAddr;
use std::sync::Arc;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Why a gateway could not start.
#[derive(Debug, Error)]
pub enum GatewayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error(transparent)]
    Webhook(#[from] crate::webhook::WebhookError),
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
}

/// A gateway that is serving.
pub struct RunningGateway {
    /// The address it listens on (the real port when configured with port 0).
    pub addr: SocketAddr,
    /// Where `/metrics` is served when it has its own address.
    pub metrics_addr: Option<SocketAddr>,
    /// The admin token (also in `admin.token` in the data directory).
    pub admin_token: String,
    /// SHA-256 of the TLS leaf certificate (64 lowercase hex digits) when the port is
    /// served over TLS: what `gsv node --pin` takes.
    pub tls_fingerprint: Option<String>,
    shared: Arc<Shared>,
    console: Arc<crate::console::Console>,
    tasks: Vec<JoinHandle<()>>,
}

/// Reads `admin.token` if it is still valid, else issues (and audits) a new one and
/// writes it.
fn ensure_admin_token(store: &Store, config: &GatewayConfig) -> Result<String, GatewayError> {
    let path = config.data_dir.join(datadir::ADMIN_TOKEN_FILE);
    crate::tokens::reuse_or_issue(
        store,
        &path,
        crate::tokens::Issuer::Gateway,
        TokenKind::Admin,
        "admin",
        None,
    )
    .map_err(|e| match e {
        crate::tokens::TokenFileError::Store(e) => e.into(),
        crate::tokens::TokenFileError::Write { path, source } => {
            GatewayError::Write { path, source }
        }
    })
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, GatewayError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| GatewayError::Bind { addr, source })
}

/// Starts a gateway.
pub async fn start(config: GatewayConfig) -> Result<RunningGateway, GatewayError> {
    let store = Arc::new(Store::open(&config.data_dir)?);
    let admin_token = ensure_admin_token(&store, &config)?;
    let tls = match &config.tls {
        Some(setup) => Some(crate::tls::load(setup, &config.data_dir, config.listen)?),
        None => None,
    };
    let listener = bind(config.listen).await?;
    let addr = listener.local_addr().map_err(|source| GatewayError::Bind {
        addr: config.listen,
        source,
    })?;
    let metrics_listener = match config.metrics_listen {
        Some(a) => Some(bind(a).await?),
        None => None,
    };
    let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
    if config.write_addr_file {
        let path = config.data_dir.join(datadir::ADDR_FILE);
        std::fs::write(&path, format!("{}\n", addr_line(addr, tls.is_some())))
            .map_err(|source| GatewayError::Write { path, source })?;
    }
    let audit = crate::audit::AuditLog::start(&config.data_dir, config.audit_args)?;
    let offers = crate::offers::Offers::load(&store)?;
    let labels = crate::labels::LabelBook::load(&store)?;
    let mut shared = Shared::new(config, store, audit);
    shared.offers = offers;
    shared.labels = labels;
    let console = Arc::new(crate::console::Console::for_addr(
        addr,
        tls.is_some(),
        shared.config.console_code_ttl,
    ));
    shared.token_holders.add(console.clone());
    if let Some(url) = shared.config.approval_webhook.clone() {
        let hook = crate::webhook::Webhook::start(
            &url,
            &shared.config.data_dir,
            &console.approval_link_prefix(),
            shared.shutdown.clone(),
        )?;
        shared.webhook = Some(hook);
    }
    let cluster = match shared.config.cluster.clone() {
        Some(config) => Some(
            crate::cluster::join(
                &config,
                &shared.config.data_dir,
                addr,
                tls.as_ref().map(|t| t.fingerprint.as_str()),
                shared.registry.call_ids.clone(),
            )
            .await?,
        ),
        None => None,
    };
    if let Some(cluster) = &cluster {
        shared.peers = Arc::new(crate::cluster::peers::ClusterPeers(cluster.clone()));
    }
    let shared = Arc::new(shared);
    if let Some(cluster) = &cluster {
        crate::cluster::run(&shared, cluster);
    }
    shared
        .background
        .spawn(crate::revocation::watch(shared.clone()));
    shared.background.spawn(crate::jobs::keep(shared.clone()));
    shared
        .background
        .spawn(crate::transfer::sweep(shared.clone()));
    let mut tasks = Vec::new();
    let installer = Arc::new(crate::install::Installer::new(&shared.config, tls.as_ref()));
    let fleet = crate::fleet::Fleet::new(shared.clone());
    let mut router = http::router(fleet.clone(), metrics_listener.is_none())
        .merge(crate::mcp::router(fleet.clone()))
        .merge(crate::install::router(installer))
        .merge(crate::console::router(fleet.clone(), console.clone()));
    if let Some(cluster) = cluster {
        // The way in of the other replicas' calls (`GET /v1/replica`).
        router = router.merge(crate::cluster::link::router(shared.clone(), cluster));
    }
    let stop = shared.shutdown.clone();
    let tls_fingerprint = tls.as_ref().map(|t| t.fingerprint.clone());
    let main_port = crate::listener::Port {
        router,
        tls: tls
            .as_ref()
            .map(|t| tokio_rustls::TlsAcceptor::from(t.config.clone())),
        admission: shared.admission.clone(),
        authenticates: true,
        fleet: fleet.clone(),
    };
    tasks.push(tokio::spawn(crate::listener::serve(
        listener,
        main_port,
        stop.clone(),
    )));
    if let Some(ml) = metrics_listener {
        let metrics_port = crate::listener::Port {
            router: http::metrics_router(fleet.clone()),
            tls: None,
            // Its own caps, so a flood of the main port does not hide the metrics
            // that show it (and the other way round).
            admission: crate::admission::Admission::new(crate::admission::METRICS_PORT_CAPS),
            authenticates: false,
            fleet: fleet.clone(),
        };
        tasks.push(tokio::spawn(crate::listener::serve(
            ml,
            metrics_port,
            stop.clone(),
        )));
    }
    let refusals = shared.clone();
    shared.background.spawn(async move {
        crate::refusals::run(&refusals.refusals, refusals.shutdown.clone()).await
    });
    tracing::info!(
        %addr,
        tls = tls_fingerprint.is_some(),
        data = %shared.config.data_dir.display(),
        "gateway listening"
    );
    Ok(RunningGateway {
        addr,
        metrics_addr,
        admin_token,
        tls_fingerprint,
        shared,
        console,
        tasks,
    })
}

/// What `gateway.addr` holds: the bare address for plain TCP (as before TLS existed),
/// `https://ADDR` when TLS is on.
fn addr_line(addr: SocketAddr, tls: bool) -> String {
    if tls {
        format!("https://{addr}")
    } else {
        addr.to_string()
    }
}

impl RunningGateway {
    /// The URL nodes, agents and the CLI use: `http://ADDR` or `https://ADDR`.
    pub fn url(&self) -> String {
        let scheme = if self.tls_fingerprint.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// A one-time console login link for the admin token (`gsv up`'s banner).
    pub fn console_login(&self) -> Result<crate::console::LoginLink, crate::console::ConsoleError> {
        let token_id = crate::token::parse(&self.admin_token)
            .map(|t| t.id.to_owned())
            .unwrap_or_default();
        self.console
            .mint_login_code(crate::console::Role::Admin, &token_id, "admin")
    }

    /// How many nodes are connected now.
    pub fn connected_nodes(&self) -> usize {
        self.shared.registry.online_count()
    }

    /// Stops gracefully: refuses new agents and calls, tells agents, lets calls in
    /// flight finish for up to `config.drain`, then closes every connection and waits
    /// for the servers to end. Calls still running then fail with `node_disconnected`.
    pub async fn stop(self) {
        let drain = self.shared.config.drain;
        self.shared.draining.cancel();
        let bye = gsv_protocol::event::Shutdown {
            reason: "gateway shutting down".to_owned(),
            drain_ms: drain.as_millis() as u64,
        };
        for a in self.shared.agents.iter() {
            a.send_event(gsv_protocol::EventName::Shutdown, &bye);
        }
        let calls = &self.shared.in_flight;
        calls.close();
        if !calls.is_empty() {
            tracing::info!(
                calls = calls.len(),
                ?drain,
                "shutting down: letting calls in flight finish"
            );
        }
        if tokio::time::timeout(drain, calls.wait()).await.is_err() {
            tracing::warn!(
                calls = calls.len(),
                "shutting down with calls still in flight"
            );
        }
        for h in self.shared.registry.all() {
            let _ = h.out.send(gsv_protocol::frame::encode_event(
                gsv_protocol::EventName::Shutdown,
                &bye,
                0,
            ));
        }
        self.shared.shutdown.cancel();
        for h in self.shared.registry.all() {
            h.fail_all_pending();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        if !self
            .shared
            .background
            .finish(std::time::Duration::from_secs(2))
            .await
        {
            tracing::warn!(
                tasks = self.shared.background.len(),
                "shutting down with background tasks still running"
            );
        }
        // Each connection's last frames (results, the shutdown notice) go out before the
        // process ends; each such delivery is bounded to a second.
        self.shared.closing.close();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            self.shared.closing.wait(),
        )
        .await;
        self.shared.refusals.flush();
        self.shared.audit.flush().await;
        if self.shared.config.write_addr_file {
            let path = self.shared.config.data_dir.join(datadir::ADDR_FILE);
            let ours = addr_line(self.addr, self.tls_fingerprint.is_some());
            if datadir::read_line(&path).as_deref() == Some(ours.as_str()) {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// The gateway's shared state (tests and embedding).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Waits until the gateway stops (after `stop` from elsewhere, or forever).
    pub async fn wait(self, until: impl std::future::Future<Output = ()>) {
        until.await;
        self.stop().await;
    }
}
