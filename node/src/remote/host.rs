//! The host an SSH- or container-backed node works on: how to reach a shell there,
//! and a small pool of shells kept open so a call costs a fork on the host, not a
//! new session.
//!
//! Sharing: at most [`MAX_CHANNELS`] shells are open; one more is kept for control
//! requests (stopping a command whose own call holds a shell), so a kill always gets
//! through. One caller (token) holds at most half of the shells at once: a caller
//! with many long commands cannot take the whole host from the others.

use super::channel::{Channel, Reply};
use super::error::RemoteError;
use super::quote::quote;
use super::ssh::SshMaster;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::Command;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Shells open at once for calls (OpenSSH allows 10 sessions per connection by
/// default; two stay free for control requests and a reconnecting master).
pub const MAX_CHANNELS: usize = 8;
/// Longest wait for a new shell to answer.
const OPEN_WAIT: Duration = Duration::from_secs(20);
/// Largest reply of one request (the largest read a tool makes, with room).
pub const MAX_REPLY: usize = 80 * 1024 * 1024;

/// How to reach the host.
pub enum Reach {
    Ssh(Box<SshMaster>),
    Container { engine: PathBuf, name: String },
}

/// Which shells a request may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// A tool's work.
    Work,
    /// Stopping or inspecting work that holds a shell (a kill).
    Control,
}

/// The far host and its shells.
pub struct RemoteHost {
    reach: Reach,
    /// The node's private directory on the host (a shell expression).
    state_dir: String,
    idle: Mutex<Vec<Channel>>,
    work: Arc<Semaphore>,
    control: Arc<Semaphore>,
    per_owner: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// `PATH` of the host user's login shell, found once; put in every shell.
    login_path: tokio::sync::OnceCell<Option<String>>,
    /// A container's last known state and when it was looked at.
    container_seen: Mutex<Option<(std::time::Instant, Result<(), String>)>>,
    /// `--tmux SESSION`: the session whose pane waiting Bash commands are typed into.
    tmux: Option<String>,
    /// One command at a time in that pane.
    pane: tokio::sync::Mutex<()>,
    /// Woken when a job starts, for the watcher ([`super::watch`]).
    job_started: tokio::sync::Notify,
    /// Things found once about the host (its git is recent enough).
    notes: Mutex<std::collections::HashSet<&'static str>>,
}

/// How long a container's state, once looked at, is taken as it was.
const CONTAINER_STATE_TTL: Duration = Duration::from_secs(2);

impl RemoteHost {
    /// A host reached by `reach`, whose private directory for node `id` is
    /// `$HOME/.local/state/gsv/ID` there.
    pub fn new(reach: Reach, id: &str) -> Result<RemoteHost, RemoteError> {
        // Node ids are `[a-z0-9-]` already; checked again because the directory is
        // written into shell words unquoted-safe.
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(RemoteError::BadTarget(format!("bad node id {id:?}")));
        }
        Ok(RemoteHost {
            reach,
            state_dir: format!("\"${{HOME:-/tmp}}/.local/state/gsv/{id}\""),
            idle: Mutex::new(Vec::new()),
            work: Arc::new(Semaphore::new(MAX_CHANNELS)),
            control: Arc::new(Semaphore::new(1)),
            per_owner: Mutex::new(HashMap::new()),
            login_path: tokio::sync::OnceCell::new(),
            container_seen: Mutex::new(None),
            tmux: None,
            pane: tokio::sync::Mutex::new(()),
            job_started: tokio::sync::Notify::new(),
            notes: Mutex::new(Default::default()),
        })
    }

    /// Waiting Bash commands go to the pane of tmux session `session` on the host
    /// (`--tmux`); the window and its script are the term tools' far-host body
    /// (`tools/term/on_host.rs`).
    pub fn with_tmux(mut self, session: Option<String>) -> Self {
        self.tmux = session;
        self
    }

    /// The `--tmux` session, if any.
    pub fn tmux_session(&self) -> Option<&str> {
        self.tmux.as_deref()
    }

    /// Whether `what` was noted about the host ([`RemoteHost::note`]).
    pub fn noted(&self, what: &'static str) -> bool {
        self.notes.lock().is_ok_and(|n| n.contains(what))
    }

    /// Notes `what` about the host, for as long as the node runs.
    pub fn note(&self, what: &'static str) {
        if let Ok(mut n) = self.notes.lock() {
            n.insert(what);
        }
    }

    /// Notified when a job starts on the host.
    pub fn job_started(&self) -> &tokio::sync::Notify {
        &self.job_started
    }

    /// The lock that keeps the `--tmux` pane to one command at a time.
    pub fn pane(&self) -> &tokio::sync::Mutex<()> {
        &self.pane
    }

    /// How people name the host in messages.
    pub fn shown(&self) -> String {
        match &self.reach {
            Reach::Ssh(m) => m.target().shown(),
            Reach::Container { name, .. } => format!("container {name}"),
        }
    }

    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// Runs `script` on the host for `owner` (see [`Channel::run`]); the reply is at
    /// most `limit` bytes. A shell that went out of step is dropped, never reused.
    pub async fn run(
        &self,
        lane: Lane,
        owner: Option<&str>,
        script: &str,
        limit: usize,
    ) -> Result<Reply, RemoteError> {
        let _owner_permit = match (lane, owner) {
            (Lane::Work, Some(o)) => Some(self.owner_permit(o).await?),
            _ => None,
        };
        let sem = match lane {
            Lane::Work => &self.work,
            Lane::Control => &self.control,
        };
        let _permit = Arc::clone(sem)
            .acquire_owned()
            .await
            .map_err(|_| RemoteError::Cancelled)?;
        // A shell that died while idle (its connection dropped) fails before the
        // request reaches it: then, and only then, a fresh shell gets the request.
        let mut tries = 0;
        loop {
            tries += 1;
            let mut lease = Lease {
                host: self,
                chan: Some(self.checkout().await?),
            };
            let Some(chan) = lease.chan.as_mut() else {
                return Err(RemoteError::Cancelled);
            };
            match chan.run(script, limit).await {
                Err(RemoteError::Gone(_)) if tries < 3 => continue,
                other => return other,
            }
        }
    }

    /// Checks the host can be reached now (opens a shell if none is open).
    pub async fn check(&self) -> Result<(), RemoteError> {
        self.run(Lane::Control, None, ":", 1024).await.map(|_| ())
    }

    /// The host user's home directory (the default workspace). Also checks the host
    /// has what every tool needs (`head -c`, `realpath` or `readlink -f`) and says
    /// so in the log when it does not.
    pub async fn home(&self) -> Result<String, RemoteError> {
        let script = "gsv_text home \"$HOME\"\n\
                      gsv_text headc \"$(printf abc | head -c 2 2>/dev/null)\"\n\
                      if gsv_real /; then gsv_text real yes; fi";
        let reply = self.run(Lane::Control, None, script, 64 * 1024).await?;
        if reply.text("headc").as_deref() != Some("ab") {
            return Err(RemoteError::Unsupported(format!(
                "{}: its `head` has no -c option, which the node needs to read files",
                self.shown()
            )));
        }
        if reply.text("real").is_none() {
            tracing::warn!(host = %self.shown(), "the host has neither realpath nor readlink -f: file tools cannot check paths there and will refuse them");
        }
        match reply.text("home") {
            Some(h) if h.starts_with('/') => Ok(h),
            _ => Ok("/".to_owned()),
        }
    }

    /// Whether calls can go to the host now, cheaply: the SSH master is up (started
    /// again if it dropped, within its backoff). A tool's `check` asks this, so a
    /// host that cannot be reached answers `node_offline` before anything runs.
    pub async fn ready(&self) -> Result<(), RemoteError> {
        match &self.reach {
            Reach::Ssh(m) => {
                if m.ensure().await? {
                    self.forget_idle();
                }
                Ok(())
            }
            Reach::Container { engine, name } => {
                let cached = self
                    .container_seen
                    .lock()
                    .ok()
                    .and_then(|seen| seen.clone())
                    .filter(|(at, _)| at.elapsed() < CONTAINER_STATE_TTL);
                let state = match cached {
                    Some((_, state)) => state,
                    None => {
                        let state = container_state(engine, name).await;
                        if let Ok(mut seen) = self.container_seen.lock() {
                            *seen = Some((std::time::Instant::now(), state.clone()));
                        }
                        state
                    }
                };
                state.map_err(|detail| RemoteError::ContainerDown {
                    name: name.clone(),
                    detail,
                })
            }
        }
    }

    /// `ssh` or `container`: the `backend` fact.
    pub fn backend(&self) -> &'static str {
        match &self.reach {
            Reach::Ssh(_) => "ssh",
            Reach::Container { .. } => "container",
        }
    }

    /// The `backendState` fact for a host that answered (`up`) or not.
    pub fn state_word(&self, up: bool) -> &'static str {
        match (&self.reach, up) {
            (Reach::Ssh(_), true) => "reachable",
            (Reach::Ssh(_), false) => "unreachable",
            (Reach::Container { .. }, true) => "running",
            (Reach::Container { .. }, false) => "not running",
        }
    }

    /// Puts `data` in a new private file on the host and returns its name in the
    /// node's directory there (`$GSV_D/NAME` in scripts). One session of its own:
    /// large content never goes through a shell's parser.
    pub async fn upload(&self, data: &[u8]) -> Result<String, RemoteError> {
        use tokio::io::AsyncWriteExt;
        let name = format!("in.{}", uuid::Uuid::new_v4().simple());
        let script = format!("umask 077; cat > {}/{name}", self.state_dir);
        let mut cmd = match &self.reach {
            Reach::Ssh(master) => {
                master.ensure().await?;
                let mut cmd = master.shell_command_for(&format!(
                    "exec /bin/sh -c {}",
                    quote(&script).unwrap_or_default()
                ));
                cmd.kill_on_drop(true);
                cmd
            }
            Reach::Container {
                engine,
                name: container,
            } => {
                let mut cmd = Command::new(engine);
                cmd.args(["exec", "-i", container.as_str(), "/bin/sh", "-c", &script]);
                cmd
            }
        };
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| RemoteError::io("starting an upload to the host", e))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(data)
                .await
                .map_err(|e| RemoteError::io("uploading to the host", e))?;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| RemoteError::io("uploading to the host", e))?;
        if !out.status.success() {
            return Err(RemoteError::Protocol(format!(
                "the upload to the host failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(name)
    }

    async fn owner_permit(&self, owner: &str) -> Result<OwnedSemaphorePermit, RemoteError> {
        let sem = {
            let mut map = self
                .per_owner
                .lock()
                .map_err(|_| RemoteError::Protocol("owner table poisoned".into()))?;
            // Forget owners that hold nothing, so the table stays small.
            map.retain(|_, s| s.available_permits() < MAX_CHANNELS / 2);
            Arc::clone(
                map.entry(owner.to_owned())
                    .or_insert_with(|| Arc::new(Semaphore::new(MAX_CHANNELS / 2))),
            )
        };
        sem.acquire_owned()
            .await
            .map_err(|_| RemoteError::Cancelled)
    }

    /// An idle shell that still works, or a new one.
    async fn checkout(&self) -> Result<Channel, RemoteError> {
        loop {
            let next = self.idle.lock().ok().and_then(|mut v| v.pop());
            match next {
                Some(mut c) => {
                    if c.usable() {
                        return Ok(c);
                    }
                }
                None => break,
            }
        }
        self.open().await
    }

    async fn open(&self) -> Result<Channel, RemoteError> {
        let cmd = match &self.reach {
            Reach::Ssh(master) => {
                if master.ensure().await? {
                    self.forget_idle();
                }
                master.shell_command()
            }
            Reach::Container { engine, name } => {
                let mut cmd = Command::new(engine);
                cmd.args(["exec", "-i", name.as_str(), "/bin/sh"]);
                cmd
            }
        };
        let path = self.login_path.get().cloned().flatten();
        let prelude = self.prelude(path.as_deref());
        let opened = Channel::open(cmd, &prelude, OPEN_WAIT).await;
        let mut chan = match opened {
            Ok(c) => c,
            Err(RemoteError::Protocol(said) | RemoteError::Gone(said)) => {
                return Err(self.unreachable(said))
            }
            Err(e) => return Err(e),
        };
        if self.login_path.get().is_none() {
            let found = find_login_path(&mut chan).await;
            let _ = self.login_path.set(found.clone());
            if let Some(p) = found.and_then(|p| quote(&p)) {
                chan.run(&format!("PATH={p}; export PATH"), 1024).await?;
            }
        }
        Ok(chan)
    }

    /// What a shell that could not be opened means for this kind of host.
    fn unreachable(&self, said: String) -> RemoteError {
        match &self.reach {
            Reach::Ssh(m) => RemoteError::Unreachable {
                host: m.target().shown(),
                detail: said,
            },
            Reach::Container { name, .. } => RemoteError::ContainerDown {
                name: name.clone(),
                detail: said,
            },
        }
    }

    fn prelude(&self, path: Option<&str>) -> String {
        // The login's umask is kept for the commands and files the tools make; the
        // channel's own files (job output) are private.
        // SHLVL: bash counts a shell started under sshd with SHLVL below 2 as the
        // remote shell itself and reads ~/.bashrc; the commands' `$SHELL -c` must not
        // pay for that on every call, as a local node's do not.
        let mut p = format!(
            "gsv_umask=$(umask)\numask 077\nGSV_D={}\nmkdir -p \"$GSV_D/jobs\" || exit 97\ncd / || exit 97\n\
             [ \"${{SHLVL:-0}}\" -ge 1 ] 2>/dev/null || SHLVL=1; export SHLVL\n",
            self.state_dir
        );
        if let Some(q) = path.and_then(quote) {
            p.push_str(&format!("PATH={q}; export PATH\n"));
        }
        p
    }

    /// Drops the idle shells (those of a master connection that is gone).
    fn forget_idle(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }

    /// Drops every idle shell and, for SSH, stops the master (the next call starts
    /// it again). Used on shutdown, and by tests that cut the connection.
    pub async fn disconnect(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
        if let Reach::Ssh(m) = &self.reach {
            m.stop().await;
        }
    }
}

/// A shell taken from the pool; goes back when dropped, if it is still in step.
struct Lease<'a> {
    host: &'a RemoteHost,
    chan: Option<Channel>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(mut c) = self.chan.take() {
            if c.usable() {
                if let Ok(mut idle) = self.host.idle.lock() {
                    idle.push(c);
                }
            }
        }
    }
}

/// Whether the container runs (`ENGINE inspect -f {{.State.Running}} NAME`), or
/// what the engine said.
async fn container_state(engine: &std::path::Path, name: &str) -> Result<(), String> {
    let mut cmd = Command::new(engine);
    cmd.args(["inspect", "-f", "{{.State.Running}}", name])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(10), cmd.output()).await {
        Err(_) => Err(format!(
            "{} inspect did not answer within 10 s",
            engine.display()
        )),
        Ok(Err(e)) => Err(format!("{}: {e}", engine.display())),
        Ok(Ok(out)) if out.status.success() => match String::from_utf8_lossy(&out.stdout).trim() {
            "true" => Ok(()),
            _ => Err("it exists but is not running".into()),
        },
        Ok(Ok(out)) => {
            let said: String = String::from_utf8_lossy(&out.stderr)
                .trim()
                .chars()
                .take(300)
                .collect();
            Err(if said.is_empty() {
                "the engine does not know it".into()
            } else {
                said
            })
        }
    }
}

/// The host user's login `PATH` (`$SHELL -lc`), so commands find what an
/// interactive login would; `None` if the login shell fails or says nothing.
async fn find_login_path(chan: &mut Channel) -> Option<String> {
    let script = "gsv_p=$( (\"${SHELL:-/bin/sh}\" -lc 'printf %s \"$PATH\"') 2>/dev/null </dev/null ) || gsv_p=\n\
                  gsv_text path \"$gsv_p\"";
    let reply = tokio::time::timeout(Duration::from_secs(10), chan.run(script, 64 * 1024))
        .await
        .ok()?
        .ok()?;
    reply
        .text("path")
        .filter(|p| !p.is_empty() && !p.contains('\n'))
}
