//! The set of tools a node offers, validated once when it is built.
//!
//! The registry checks each declaration against the protocol's rules (tool name,
//! closed capability set, object schema, binary names) before the node ever connects,
//! so a bad tool is a startup error with a precise message instead of a refused
//! connect. Adding a tool to the standard set is one line in [`Registry::standard`].
//!
//! `--read-only` is applied here, from the tools' own declarations: a read-only node
//! offers only the tools whose `annotations.readOnlyHint` is `true`, so a tool that
//! forgets the hint is left out rather than let in.

use crate::config::NodeConfig;
use crate::events::EventSender;
use crate::guards::posture::Posture;
use crate::guards::{ApproveExec, ApproveExecError, GuardError, ShellGuard};
use crate::probe::valid_bin_name;
use crate::selection::{Selection, SelectionError};
use crate::sessions::{Limits, SessionManager};
use crate::tool::Tool;
use crate::tools;
use gsv_protocol::limits::MAX_TOOLS_PER_NODE;
use gsv_protocol::{capability, CapabilityError, NameError, ToolDef, ToolName};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use thiserror::Error;

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegistryError {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("tool {0} is registered twice")]
    Duplicate(String),
    #[error("a node may offer at most {MAX_TOOLS_PER_NODE} tools")]
    TooMany,
    #[error("tool {0}: inputSchema must be a JSON object schema (\"type\": \"object\")")]
    Schema(String),
    #[error("tool {tool}: required binary name {bin:?} is invalid")]
    Bin { tool: String, bin: String },
    /// The node-side guards could not be set up (a bad `--approve-shell` pattern).
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// A bad `--approve-exec` entry.
    #[error(transparent)]
    ApproveExec(#[from] ApproveExecError),
    /// A bad `--fetch-allow` glob.
    #[error(transparent)]
    FetchAllow(#[from] tools::fetch::policy::FetchAllowError),
    /// The owner's choice of tools cannot be applied (a bad or unmatched glob).
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// A tool declares an unknown or malformed capability id.
    #[error("tool {tool}: {reason}")]
    BadCapability {
        tool: String,
        reason: CapabilityError,
    },
}

struct Entry {
    def: ToolDef,
    tool: Arc<dyn Tool>,
}

/// The tools of one node, by name.
#[derive(Default)]
pub struct Registry {
    tools: BTreeMap<String, Entry>,
    /// The node's event sender, shared with tools that report outside a call (the
    /// session manager); the runner attaches it to each connection.
    events: EventSender,
    /// The session manager of Bash and Process, ended when the node stops.
    sessions: Option<Arc<SessionManager>>,
    /// The owner's choices, once [`Registry::apply`] ran: tools registered after it
    /// go through them too.
    applied: Option<Choices>,
}

/// The node owner's choices ([`Registry::apply`]).
struct Choices {
    selection: Selection,
    posture: Posture,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// The standard tool set for `config`, with the owner's choices applied
    /// ([`Registry::apply`]: `--tools`, `--without`, `--read-only`, `--no-approval`);
    /// Bash with the node's shell guard (`approve_shell`).
    pub fn standard(config: &NodeConfig) -> Result<Self, RegistryError> {
        let allow = ApproveExec::new(&config.approve_exec)?;
        let guard = if allow.is_on() {
            for entry in allow.entries() {
                tracing::info!(program = %entry.program.display(), "--approve-exec entry resolved");
            }
            ShellGuard::for_approve_exec(&config.approve_shell)?
        } else {
            ShellGuard::with_approve_shell(&config.approve_shell)?
        };
        let mut registry = Registry::new();
        registry.register(tools::read::Read::new())?;
        registry.register(tools::write::Write::new())?;
        registry.register(tools::edit::Edit::new())?;
        registry.register(tools::glob::Glob::new())?;
        registry.register(tools::grep::Grep::new())?;
        registry.register(tools::fs_list::FsList::new())?;
        registry.register(tools::fs_stat::FsStat::new())?;
        registry.register(tools::time::Time::new())?;
        registry.register(tools::git::status::GitStatus::default())?;
        registry.register(tools::git::log::GitLog::default())?;
        registry.register(tools::git::diff::GitDiff::default())?;
        registry.register(tools::git::show::GitShow::default())?;
        registry.register(tools::git::clone::GitClone)?;
        registry.register(tools::git::commit::GitCommit)?;
        registry.register(tools::git::push::GitPush)?;
        registry.register(tools::git::pull::GitPull)?;
        let defaults = Limits::default();
        let limits = Limits {
            max_running_per_owner: config.sessions_per_token.clamp(1, defaults.max_running),
            ..defaults
        };
        let sessions = SessionManager::with_limits(registry.events.clone(), limits);
        sessions.keep_on_exit(config.keep_sessions_on_exit);
        registry.sessions = Some(Arc::clone(&sessions));
        let bash = tools::bash::Bash::with_guard(Arc::clone(&sessions), guard.clone());
        registry.register(bash)?;
        registry.register(tools::exec::Exec::with_allowlist(
            Arc::clone(&sessions),
            allow,
        ))?;
        registry.register(tools::proc::ProcList::new(Arc::clone(&sessions)))?;
        registry.register(tools::proc::ProcKill::new(Arc::clone(&sessions)))?;
        let process = tools::process::Process::with_guard(sessions, guard.clone());
        registry.register(process)?;
        registry.register(tools::term::TermCapture::local())?;
        registry.register(tools::term::TermSend::with_guard(guard))?;
        let net = tools::net::NetEnv::system();
        registry.register(tools::net::NetDiagnose::new(net.clone()))?;
        registry.register(tools::net::NetDiscover::new(net.clone()))?;
        registry.register(tools::net::NetServices::new(net.clone()))?;
        registry.register(tools::net::NetworkStatus::new(net))?;
        registry.register(tools::net::DnsLookup)?;
        registry.register(tools::container::ContainerList)?;
        registry.register(tools::container::ContainerLogs)?;
        registry.register(tools::container::ContainerExec)?;
        registry.register(tools::pkg::PkgSearch)?;
        registry.register(tools::pkg::PkgInstall)?;
        let fetch = tools::fetch::policy::FetchPolicy::new(&config.fetch_allow)?;
        registry.register(tools::fetch::FetchUrl::new(fetch))?;
        if config.echo_tool {
            registry.register(tools::echo::Echo::new(config.echo_needs_approval))?;
        }
        registry.apply(config)?;
        Ok(registry)
    }

    /// The tools of a node that works on `host` (SSH, container): each made with
    /// `X::on(host, ..)` so it works there (the file, search, time, read-only git,
    /// Bash, Process and term tools), with the same guards and
    /// the owner's choices applied as for [`Registry::standard`].
    pub fn remote(
        config: &NodeConfig,
        host: Arc<crate::remote::RemoteHost>,
    ) -> Result<Self, RegistryError> {
        // exec is not offered there; with `--approve-exec` entries Bash still waits
        // for an operator as on a local node (it is no way around the allowlist).
        let guard = if config.approve_exec.is_empty() {
            ShellGuard::with_approve_shell(&config.approve_shell)?
        } else {
            tracing::warn!("--approve-exec: exec is not offered on a node that works on another host; Bash commands wait for an operator as they do with it");
            ShellGuard::for_approve_exec(&config.approve_shell)?
        };
        for (flag, given) in [
            ("--fetch-allow", !config.fetch_allow.is_empty()),
            ("--protect", !config.protect.is_empty()),
        ] {
            if given {
                tracing::warn!(flag, "has no effect on a node that works on another host (the tool it shapes is not offered, or the path is on this machine)");
            }
        }
        let per_token = config
            .sessions_per_token
            .clamp(1, crate::sessions::Limits::default().max_running);
        let mut registry = Registry::new();
        registry.register(tools::read::Read::on(Arc::clone(&host)))?;
        registry.register(tools::write::Write::on(Arc::clone(&host)))?;
        registry.register(tools::edit::Edit::on(Arc::clone(&host)))?;
        registry.register(tools::glob::Glob::on(Arc::clone(&host)))?;
        registry.register(tools::grep::Grep::on(Arc::clone(&host)))?;
        registry.register(tools::fs_list::FsList::on(Arc::clone(&host)))?;
        registry.register(tools::fs_stat::FsStat::on(Arc::clone(&host)))?;
        registry.register(tools::time::Time::on(Arc::clone(&host)))?;
        registry.register(tools::git::status::GitStatus::on(Arc::clone(&host)))?;
        registry.register(tools::git::log::GitLog::on(Arc::clone(&host)))?;
        registry.register(tools::git::diff::GitDiff::on(Arc::clone(&host)))?;
        registry.register(tools::git::show::GitShow::on(Arc::clone(&host)))?;
        registry.register(tools::bash::Bash::on(
            Arc::clone(&host),
            guard.clone(),
            per_token,
        ))?;
        registry.register(tools::process::Process::on(
            Arc::clone(&host),
            guard.clone(),
        ))?;
        registry.register(tools::term::TermCapture::on(Arc::clone(&host)))?;
        registry.register(tools::term::TermSend::on(host, guard))?;
        if config.echo_tool {
            registry.register(tools::echo::Echo::new(config.echo_needs_approval))?;
        }
        registry.apply(config)?;
        Ok(registry)
    }

    /// Applies the node owner's choices to the tools registered so far, once (later
    /// calls change nothing; tools registered later go through the same choices):
    /// leaves out the tools `--tools`, `--without` and `--read-only` do not offer
    /// ([`crate::selection`]), and declares the rest with their approval posture
    /// after `--no-approval` ([`crate::guards::posture`]). [`crate::run_with_registry`]
    /// calls it, so a custom tool set gets the same.
    pub fn apply(&mut self, config: &NodeConfig) -> Result<(), RegistryError> {
        if self.applied.is_some() {
            return Ok(());
        }
        let mut selection = Selection::new(&config.tools, &config.without, config.read_only)?;
        let known: Vec<String> = self.tools.keys().cloned().collect();
        self.tools.retain(|_, e| selection.offers(&e.def));
        let known: Vec<&str> = known.iter().map(String::as_str).collect();
        selection.unmatched(&known)?;
        let posture = Posture::new(&config.no_approval);
        let defs: Vec<&ToolDef> = self.tools.values().map(|e| &e.def).collect();
        for name in posture.unused(&defs) {
            tracing::warn!(
                tool = name,
                "--no-approval names no tool of this node that needs approval; ignored"
            );
        }
        for entry in self.tools.values_mut() {
            entry.def = posture.declare(entry.def.clone());
        }
        self.applied = Some(Choices { selection, posture });
        Ok(())
    }

    /// Validates `tool`'s declaration and adds it.
    pub fn register(&mut self, tool: impl Tool) -> Result<(), RegistryError> {
        self.register_arc(Arc::new(tool))
    }

    /// [`Registry::register`] for a tool that is already shared. After
    /// [`Registry::apply`], a tool the owner's choices leave out is skipped (`Ok`).
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let mut def = tool.def();
        validate(&def)?;
        if let Some(choices) = &mut self.applied {
            if !choices.selection.offers(&def) {
                return Ok(());
            }
            def = choices.posture.declare(def);
        }
        if self.tools.contains_key(&def.name) {
            return Err(RegistryError::Duplicate(def.name));
        }
        if self.tools.len() >= MAX_TOOLS_PER_NODE {
            return Err(RegistryError::TooMany);
        }
        self.tools.insert(def.name.clone(), Entry { def, tool });
        Ok(())
    }

    /// The event sender the tools were given; the runner sends the node's events
    /// through it.
    /// Ends the running process sessions (node shutdown): SIGTERM, grace, SIGKILL.
    pub async fn shutdown(&self) {
        if let Some(sessions) = &self.sessions {
            sessions.shutdown().await;
        }
    }

    /// Ends the running sessions started by any of `token_ids` (revoked tokens);
    /// returns how many were told to stop.
    pub fn end_sessions_of(&self, token_ids: &[String]) -> u64 {
        self.sessions
            .as_ref()
            .map_or(0, |s| s.end_owned_by(token_ids))
    }

    /// The session manager of the standard tool set, if this registry has one.
    pub fn sessions(&self) -> Option<&Arc<SessionManager>> {
        self.sessions.as_ref()
    }

    pub fn events(&self) -> &EventSender {
        &self.events
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name).map(|e| Arc::clone(&e.tool))
    }

    /// The declaration of the tool called `name`.
    pub fn def(&self, name: &str) -> Option<&ToolDef> {
        self.tools.get(name).map(|e| &e.def)
    }

    /// Every declaration, sorted by name (what `connect` sends).
    pub fn defs(&self) -> Vec<ToolDef> {
        self.tools.values().map(|e| e.def.clone()).collect()
    }

    /// The capability ids of all tools, sorted and without duplicates.
    pub fn capabilities(&self) -> Vec<String> {
        let set: BTreeSet<&str> = self
            .tools
            .values()
            .map(|e| e.def.capability.as_str())
            .collect();
        set.into_iter().map(str::to_owned).collect()
    }

    /// The union of the tools' `requiresBins`.
    pub fn required_bins(&self) -> BTreeSet<String> {
        self.tools
            .values()
            .flat_map(|e| e.def.requires_bins.iter().cloned())
            .collect()
    }

    /// Tool names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

fn validate(def: &ToolDef) -> Result<(), RegistryError> {
    ToolName::parse(&def.name)?;
    if let Err(reason) = capability::check(&def.capability) {
        return Err(RegistryError::BadCapability {
            tool: def.name.clone(),
            reason,
        });
    }
    if def.input_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Err(RegistryError::Schema(def.name.clone()));
    }
    if let Some(bin) = def.requires_bins.iter().find(|b| !valid_bin_name(b)) {
        return Err(RegistryError::Bin {
            tool: def.name.clone(),
            bin: bin.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolContext;
    use gsv_protocol::{NodeId, ToolAnnotations, ToolResult};
    use serde_json::{json, Value};

    struct Fake(ToolDef);

    #[async_trait::async_trait]
    impl Tool for Fake {
        fn def(&self) -> ToolDef {
            self.0.clone()
        }
        async fn execute(&self, _args: Value, _ctx: ToolContext) -> ToolResult {
            ToolResult::text("ok")
        }
    }

    fn def(name: &str, capability: &str) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
            capability: capability.into(),
            annotations: ToolAnnotations::default(),
            default_timeout_ms: None,
            requires_bins: vec![],
            requires_approval: false,
        }
    }

    fn config(echo: bool) -> NodeConfig {
        let mut c = NodeConfig::new(
            "ws://127.0.0.1:1".into(),
            NodeId::parse("n").unwrap(),
            "t".into(),
            "/".into(),
        );
        c.echo_tool = echo;
        c
    }

    #[tokio::test]
    async fn standard_names_list_every_standard_tool() {
        let r = Registry::standard(&config(true)).unwrap();
        let mut names = r.names();
        names.sort_unstable();
        let mut listed = crate::tools::standard_names();
        listed.sort_unstable();
        assert_eq!(names, listed);
        for (name, capability) in crate::tools::STANDARD_TOOLS {
            assert_eq!(
                r.def(name).map(|d| d.capability.as_str()),
                Some(capability.as_str()),
                "{name}"
            );
        }
    }

    #[test]
    fn standard_set() {
        let r = Registry::standard(&config(false)).unwrap();
        assert!(r.get("Echo").is_none());
        // The file tools, with the reference's capability ids.
        for (name, capability) in [
            ("Read", "filesystem.read"),
            ("Write", "filesystem.write"),
            ("Edit", "filesystem.edit"),
            ("Glob", "filesystem.list"),
            ("Grep", "text.search"),
            ("Bash", "shell.exec"),
            ("Process", "process.manage"),
        ] {
            assert_eq!(r.def(name).map(|d| d.capability.as_str()), Some(capability));
        }
        let r = Registry::standard(&config(true)).unwrap();
        assert!(r.names().contains(&"Echo"));
        assert!(r.capabilities().contains(&"diagnostics.echo".to_owned()));
        assert!(r.get("Echo").is_some());
        assert!(r.get("echo").is_none());
        // Every standard declaration serialises to what the gateway expects.
        for d in r.defs() {
            let v = serde_json::to_value(&d).unwrap();
            assert_eq!(v["inputSchema"]["additionalProperties"], json!(false));
            assert!(!d.description.is_empty());
        }
    }

    #[test]
    fn read_only_nodes_offer_only_read_only_tools() {
        let mut c = config(true);
        c.read_only = true;
        let r = Registry::standard(&c).unwrap();
        assert_eq!(
            r.names(),
            [
                "Echo",
                "Glob",
                "Grep",
                "Read",
                "container_list",
                "container_logs",
                "dns_lookup",
                "fetch_url",
                "fs_list",
                "fs_stat",
                "git_diff",
                "git_log",
                "git_show",
                "git_status",
                "net_diagnose",
                "net_discover",
                "net_services",
                "network_status",
                "pkg_search",
                "proc_list",
                "term_capture",
                "time"
            ]
        );
        for d in r.defs() {
            assert_eq!(d.annotations.read_only_hint, Some(true), "{}", d.name);
        }
        assert!(!r.capabilities().contains(&"shell.exec".to_owned()));
    }

    #[test]
    fn the_owner_picks_the_tools_and_the_node_keeps_to_them() {
        let mut c = config(true);
        c.tools = vec!["Read".into(), "Gl*".into(), "Echo".into(), "Bash".into()];
        c.without = vec!["Bash".into()];
        let mut r = Registry::standard(&c).unwrap();
        assert_eq!(r.names(), ["Echo", "Glob", "Read"]);
        assert!(r.get("Bash").is_none() && r.get("Write").is_none());
        // A tool registered afterwards goes through the same choice.
        r.register(Fake(def("Custom", "x.acme.custom"))).unwrap();
        assert!(r.get("Custom").is_none());
        // A glob that matches nothing is a startup error, naming it.
        c.without = vec!["Bahs".into()];
        let e = Registry::standard(&c).err().unwrap();
        assert!(matches!(e, RegistryError::Selection(_)), "{e}");
        assert!(e.to_string().contains("Bahs"), "{e}");
    }

    #[test]
    fn approval_posture_is_declared_and_can_be_waived() {
        let mut c = config(true);
        c.echo_needs_approval = true;
        let r = Registry::standard(&c).unwrap();
        let echo = r.def("Echo").unwrap();
        assert!(echo.requires_approval);
        assert!(
            echo.description.starts_with("[needs approval] "),
            "{}",
            echo.description
        );
        let gated: Vec<String> = r
            .defs()
            .into_iter()
            .filter(|d| d.requires_approval)
            .map(|d| d.name)
            .collect();
        assert_eq!(
            gated,
            [
                "Echo",
                "container_exec",
                "git_clone",
                "git_commit",
                "git_pull",
                "git_push",
                "pkg_install",
                "proc_kill"
            ]
        );
        c.no_approval = vec!["Echo".into()];
        let r = Registry::standard(&c).unwrap();
        let echo = r.def("Echo").unwrap();
        assert!(!echo.requires_approval);
        assert!(!echo.description.starts_with("[needs approval]"));
    }

    #[test]
    fn a_bad_approve_shell_pattern_is_a_startup_error() {
        let mut c = config(false);
        c.approve_shell = vec!["^git status$".into()];
        assert!(Registry::standard(&c).is_ok());
        c.approve_shell.push("(unclosed".into());
        let e = Registry::standard(&c).err().unwrap();
        assert!(matches!(e, RegistryError::Guard(_)), "{e}");
        assert!(e.to_string().contains("(unclosed"), "{e}");
    }

    #[test]
    fn bad_declarations_are_refused() {
        let mut r = Registry::new();
        assert!(matches!(
            r.register(Fake(def("a__b", "filesystem.read"))),
            Err(RegistryError::Name(_))
        ));
        assert!(matches!(
            r.register(Fake(def("Tool", "filesystem.delete"))),
            Err(RegistryError::BadCapability { .. })
        ));
        assert!(matches!(
            r.register(Fake(def("Tool", "x.Acme.deploy"))),
            Err(RegistryError::BadCapability {
                reason: CapabilityError::Vendor { .. },
                ..
            })
        ));
        r.register(Fake(def("Vendor", "x.acme.deploy"))).unwrap();
        assert_eq!(r.capabilities(), ["x.acme.deploy"]);
        r = Registry::new();
        let mut no_object = def("Tool", "filesystem.read");
        no_object.input_schema = json!({"type": "string"});
        assert_eq!(
            r.register(Fake(no_object)),
            Err(RegistryError::Schema("Tool".into()))
        );
        let mut bad_bin = def("Tool", "filesystem.read");
        bad_bin.requires_bins = vec!["../sh".into()];
        assert!(matches!(
            r.register(Fake(bad_bin)),
            Err(RegistryError::Bin { .. })
        ));
        r.register(Fake(def("Tool", "shell.exec"))).unwrap();
        assert_eq!(
            r.register(Fake(def("Tool", "shell.exec"))),
            Err(RegistryError::Duplicate("Tool".into()))
        );
        assert!(!r.is_empty());
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn capabilities_are_deduplicated_and_bins_unioned() {
        let mut r = Registry::new();
        let mut a = def("A", "shell.exec");
        a.requires_bins = vec!["bash".into()];
        let mut b = def("B", "shell.exec");
        b.requires_bins = vec!["bash".into(), "git".into()];
        r.register(Fake(a)).unwrap();
        r.register(Fake(b)).unwrap();
        r.register(Fake(def("C", "dns.query"))).unwrap();
        assert_eq!(r.capabilities(), ["dns.query", "shell.exec"]);
        assert_eq!(
            r.required_bins().into_iter().collect::<Vec<_>>(),
            ["bash", "git"]
        );
    }

    #[test]
    fn too_many_tools() {
        let mut r = Registry::new();
        for i in 0..MAX_TOOLS_PER_NODE {
            r.register(Fake(def(&format!("T{i}"), "shell.exec")))
                .unwrap();
        }
        assert_eq!(
            r.register(Fake(def("Last", "shell.exec"))),
            Err(RegistryError::TooMany)
        );
    }

    #[tokio::test]
    async fn a_remote_nodes_bash_keeps_the_approve_exec_posture() {
        use crate::remote::{Reach, RemoteHost};
        use crate::tool::ToolContext;
        let mut config = NodeConfig::new(
            "http://127.0.0.1:1".into(),
            gsv_protocol::NodeId::parse("far").unwrap(),
            "t".into(),
            "/".into(),
        );
        // No engine is run: the guard answers before the host is asked anything.
        let host = || {
            Arc::new(
                RemoteHost::new(
                    Reach::Container {
                        engine: "/nonexistent/engine".into(),
                        name: "c".into(),
                    },
                    "far",
                )
                .unwrap(),
            )
        };
        let ctx = ToolContext::new("/", "1");
        let args = serde_json::json!({"command": "true"});
        let plain = Registry::remote(&config, host()).unwrap();
        let bash = plain.get("Bash").unwrap();
        let e = bash.check(&args, &ctx).await.unwrap_err();
        assert_ne!(e.code, gsv_protocol::ErrorCode::ApprovalRequired, "{e:?}");
        config.approve_exec = vec!["/usr/bin/true".into()];
        let strict = Registry::remote(&config, host()).unwrap();
        let e = strict
            .get("Bash")
            .unwrap()
            .check(&args, &ctx)
            .await
            .unwrap_err();
        assert_eq!(e.code, gsv_protocol::ErrorCode::ApprovalRequired, "{e:?}");
        assert!(strict.get("exec").is_none());
    }

    #[test]
    fn a_far_host_node_declares_its_tools_exactly_as_a_local_one() {
        use crate::remote::{Reach, RemoteHost};
        let config = NodeConfig::new(
            "http://127.0.0.1:1".into(),
            gsv_protocol::NodeId::parse("far").unwrap(),
            "t".into(),
            "/".into(),
        );
        let host = Arc::new(
            RemoteHost::new(
                Reach::Container {
                    engine: "/nonexistent/engine".into(),
                    name: "c".into(),
                },
                "far",
            )
            .unwrap(),
        );
        let local = Registry::standard(&config).unwrap();
        let far = Registry::remote(&config, host).unwrap();
        let far_defs = far.defs();
        assert_eq!(far_defs.len(), 16, "{:?}", far.names());
        let local_defs = local.defs();
        for def in far_defs {
            let here = local_defs
                .iter()
                .find(|d| d.name == def.name)
                .expect("a local tool of that name");
            assert_eq!(
                serde_json::to_value(&def).unwrap(),
                serde_json::to_value(here).unwrap(),
                "{}",
                def.name
            );
        }
    }
}
