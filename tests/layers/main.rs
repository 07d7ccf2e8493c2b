//! The floors of the gateway and of the node, held against their sources.
//!
//! Every module of `gateway/src` stands on one floor (see `gateway/src/lib.rs`):
//!
//! - **core**: what the gateway is, whoever asks (router, registry, toolset, policy,
//!   approvals, audit, budget, jobs, transfer relay, store, settings);
//! - **cluster**: the NATS backend of cluster mode, standing on core;
//! - **fleet**: operations over the whole fleet (local, then peers, then merge, then
//!   policy), standing on cluster and core;
//! - **door**: the ways in (agent and node WebSockets, HTTP, MCP, the console, the
//!   installer's route, the accept loop);
//! - **assembly**: `lib.rs` and `server.rs`, which put the floors together.
//!
//! The core's state (`state::Shared`) is named by every floor but the doors: a door
//! holds a `fleet::Fleet`, whose state is private to the fleet floor, and does what
//! `Fleet` offers.
//!
//! The node's floors are [`NODE_FLOORS`] (ground, guards, remote, tools, serving,
//! connection).
//!
//! A file may name (`crate::…`, in code, not in comments or unit tests) only modules
//! on its own floor or the floors it stands on. This test reads every source file and
//! fails on an import against the floors that the crate's known list
//! ([`GATEWAY_KNOWN`], [`NODE_KNOWN`]) does not hold, and on an entry of it that no
//! longer happens: the lists only shrink, and with them the work left. A module
//! without a floor fails it too, so no new module goes unplaced. The checker's own
//! tests plant forbidden imports and see them caught.
//!
//! Every crate of the workspace is held to one more rule ([`circles`]): no import
//! circle of more than three files, floors or not.

mod circles;
mod reader;

use reader::{code_of, named_modules};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One import against the floors: the file (under `gateway/src`) and the module.
type Breach = (String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Floor {
    Core,
    Cluster,
    Fleet,
    Door,
    Assembly,
    /// The core's state (`state::Shared`): the floors under the doors hold it; a
    /// door holds a `fleet::Fleet` instead.
    State,
}

impl Floor {
    /// Whether a file on this floor may name a module on `other`.
    fn may_use(self, other: Floor) -> bool {
        use Floor::*;
        match self {
            Core | State => matches!(other, Core | State),
            Cluster => matches!(other, Core | State | Cluster),
            Fleet => matches!(other, Core | State | Cluster | Fleet),
            // The ways in reach the cluster, and the state, only through the fleet
            // floor.
            Door => matches!(other, Core | Fleet | Door),
            Assembly => true,
        }
    }
}

/// Each top-level module of `gateway/src` and its floor.
const GATEWAY_FLOORS: &[(&str, Floor)] = &[
    ("admission", Floor::Core),
    ("agent_conns", Floor::Core),
    ("approvals", Floor::Core),
    ("audit", Floor::Core),
    ("auth", Floor::Core),
    ("budget", Floor::Core),
    ("bulk", Floor::Core),
    ("changes", Floor::Core),
    ("config", Floor::Core),
    ("conn", Floor::Core),
    ("datadir", Floor::Core),
    ("error", Floor::Core),
    ("handshake", Floor::Core),
    ("inventory", Floor::Core),
    ("jobs", Floor::Core),
    ("labels", Floor::Core),
    ("lane", Floor::Core),
    ("mcp_view", Floor::Core),
    ("metrics", Floor::Core),
    ("offers", Floor::Core),
    ("operator", Floor::Core),
    ("peers", Floor::Core),
    ("policy", Floor::Core),
    ("probe", Floor::Core),
    ("process_sessions", Floor::Core),
    ("ratelimit", Floor::Core),
    ("reattach", Floor::Core),
    ("recent_revocations", Floor::Core),
    ("refusals", Floor::Core),
    ("registry", Floor::Core),
    ("replica", Floor::Core),
    ("revocation", Floor::Core),
    ("router", Floor::Core),
    ("session_end", Floor::Core),
    ("session_error", Floor::Core),
    ("state", Floor::State),
    ("store", Floor::Core),
    ("summary", Floor::Core),
    ("time", Floor::Core),
    ("tls", Floor::Core),
    ("token", Floor::Core),
    ("tokens", Floor::Core),
    ("toolset", Floor::Core),
    ("transfer", Floor::Core),
    ("upgrade", Floor::Core),
    // Approval notifications to an operator's URL: sent by the core, reads nothing
    // of the gateway.
    ("webhook", Floor::Core),
    ("background", Floor::Core),
    ("token_holders", Floor::Core),
    ("agent_handle", Floor::Core),
    ("cluster", Floor::Cluster),
    ("fanout", Floor::Fleet),
    ("fleet", Floor::Fleet),
    ("agent_session", Floor::Door),
    ("console", Floor::Door),
    ("http", Floor::Door),
    ("install", Floor::Door),
    ("listener", Floor::Door),
    ("mcp", Floor::Door),
    ("node_session", Floor::Door),
    ("lib", Floor::Assembly),
    ("server", Floor::Assembly),
];

/// Imports against the floors that are still there: (file under `gateway/src`, the
/// module it names). Each goes when the code it names moves to its floor; none may
/// be added.
const GATEWAY_KNOWN: &[(&str, &str)] = &[];

/// Items `lib.rs` itself holds or re-exports, by the module they come from (`None`:
/// defined in `lib.rs`, named by every floor).
const GATEWAY_ROOT_ITEMS: &[(&str, Option<&str>)] = &[
    ("VERSION", None),
    ("GatewayConfig", Some("config")),
    ("Policy", Some("policy")),
    ("PolicySpec", Some("policy")),
    ("start", Some("server")),
    ("GatewayError", Some("server")),
    ("RunningGateway", Some("server")),
    ("Store", Some("store")),
    ("StoreError", Some("store")),
    ("TokenInfo", Some("store")),
    ("TlsSetup", Some("tls")),
    ("TokenKind", Some("token")),
];

/// The gateway's floor of what `crate::NAME` names: a module's, or a root item's
/// module's.
fn gateway_floor(name: &str) -> Option<u8> {
    let of = |m: &str| {
        GATEWAY_FLOORS
            .iter()
            .find(|(n, _)| *n == m)
            .map(|(_, f)| *f as u8)
    };
    match GATEWAY_ROOT_ITEMS.iter().find(|(n, _)| *n == name) {
        Some((_, None)) => Some(Floor::Core as u8),
        Some((_, Some(module))) => of(module),
        None => of(name),
    }
}

fn gateway_may_use(from: u8, to: u8) -> bool {
    let floor = |n: u8| match n {
        0 => Floor::Core,
        1 => Floor::Cluster,
        2 => Floor::Fleet,
        3 => Floor::Door,
        5 => Floor::State,
        _ => Floor::Assembly,
    };
    floor(from).may_use(floor(to))
}

/// The node's floors, from the ground up: each may name its own and those below.
///
/// - **ground**: host facts and primitives (backoff, events, facts, probe, ledger,
///   journal, selection, login profile, the `Tool` trait);
/// - **guards**: what no gateway can switch off, and the process sessions (guards,
///   sessions, the settings);
/// - **remote**: the transport to another host (`remote`: the shells kept open on an
///   SSH or container host, its jobs, facts and quoting), naming no tool;
/// - **tools**: the tools, each with its far-host body beside the local one
///   (`tools`, `X::on(host)` and `on_host.rs`);
/// - **serving**: the tool set offered, the node's credential, transfers, the state
///   of one run;
/// - **connection**: the dial, the handshake, dispatch, recovery, the reconnect loop,
///   enrollment, the run's error, and `lib.rs`.
const NODE_FLOORS: &[(&str, u8)] = &[
    ("backoff", 0),
    ("beneath", 0),
    ("events", 0),
    ("facts", 0),
    ("journal", 0),
    ("ledger", 0),
    ("login_profile", 0),
    ("private_file", 0),
    ("probe", 0),
    ("protected", 0),
    ("selection", 0),
    ("tool", 0),
    ("config", 1),
    ("guards", 1),
    ("sessions", 1),
    ("remote", 2),
    ("tools", 3),
    ("credential", 4),
    ("registry", 4),
    ("state", 4),
    ("transfer", 4),
    ("dispatch", 5),
    ("enroll", 5),
    ("error", 5),
    ("lib", 5),
    ("recover", 5),
    ("registered", 5),
    ("runner", 5),
];

/// The node's imports against its floors that are still there.
const NODE_KNOWN: &[(&str, &str)] = &[];

/// Items the node's `lib.rs` re-exports, by the module they come from.
const NODE_ROOT_ITEMS: &[(&str, &str)] = &[
    ("NodeConfig", "config"),
    ("NodeError", "error"),
    ("EventError", "events"),
    ("EventSender", "events"),
    ("Registry", "registry"),
];

fn node_floor(name: &str) -> Option<u8> {
    let module = NODE_ROOT_ITEMS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(name, |(_, m)| *m);
    NODE_FLOORS
        .iter()
        .find(|(n, _)| *n == module)
        .map(|(_, f)| *f)
}

/// One crate's floor plan.
struct Plan {
    /// Its source folder, under the workspace.
    src: &'static str,
    /// The floor of what `crate::NAME` names (`None`: nothing placed).
    floor: fn(&str) -> Option<u8>,
    may_use: fn(u8, u8) -> bool,
    /// Its modules and their floors (for the check of lib.rs's list).
    modules: fn() -> Vec<&'static str>,
    known: &'static [(&'static str, &'static str)],
}

const GATEWAY: Plan = Plan {
    src: "gateway/src",
    floor: gateway_floor,
    may_use: gateway_may_use,
    modules: || GATEWAY_FLOORS.iter().map(|(m, _)| *m).collect(),
    known: GATEWAY_KNOWN,
};

const NODE: Plan = Plan {
    src: "node/src",
    floor: node_floor,
    may_use: |from, to| to <= from,
    modules: || NODE_FLOORS.iter().map(|(m, _)| *m).collect(),
    known: NODE_KNOWN,
};

/// The top-level module a file under `gateway/src` belongs to.
fn module_of(rel: &str) -> &str {
    let first = rel.split('/').next().unwrap_or(rel);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// The breaches of one file of `plan`'s crate, given its path under the crate's
/// source folder and its source.
fn breaches_in(plan: &Plan, rel: &str, src: &str) -> Result<Vec<Breach>, String> {
    let module = module_of(rel);
    let floor = (plan.floor)(module)
        .ok_or_else(|| format!("{rel}: module {module} has no floor in {}", plan.src))?;
    let mut out = Vec::new();
    for named in named_modules(&code_of(src)) {
        if named == module {
            continue;
        }
        // A name that is neither a module nor a known root item is judged the top
        // floor's (so it fails everywhere below it until it is placed).
        let other = (plan.floor)(&named).unwrap_or(u8::MAX);
        if !(plan.may_use)(floor, other) {
            out.push((rel.to_owned(), named));
        }
    }
    Ok(out)
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn src_of(plan: &Plan) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(plan.src)
}

/// Reads every source file of `plan`'s crate and holds it to the plan.
fn check(plan: &Plan) {
    let root = src_of(plan);
    let mut files = Vec::new();
    rs_files(&root, &mut files);
    assert!(
        files.len() > 50,
        "read {} files under {}",
        files.len(),
        root.display()
    );
    let mut found = BTreeSet::new();
    let mut unplaced = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .expect("under the source folder")
            .to_string_lossy()
            .replace('\\', "/");
        let src = std::fs::read_to_string(path).expect("read a source file");
        match breaches_in(plan, &rel, &src) {
            Ok(b) => found.extend(b),
            Err(e) => unplaced.push(e),
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules without a floor:\n{}",
        unplaced.join("\n")
    );
    let known: BTreeSet<Breach> = plan
        .known
        .iter()
        .map(|(f, m)| ((*f).to_owned(), (*m).to_owned()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "imports against the floors (file under {}, module it names): {new:?}; \
         move the code to its floor (tests/layers/main.rs says which may use which)",
        plan.src
    );
    assert!(
        gone.is_empty(),
        "these imports against the floors of {} are gone: take them out of its known \
         list: {gone:?}",
        plan.src
    );
}

/// Every module `lib.rs` declares has a floor, and every floor entry is a module.
fn check_modules(plan: &Plan) {
    let lib = std::fs::read_to_string(src_of(plan).join("lib.rs")).expect("lib.rs");
    let declared: BTreeSet<String> = code_of(&lib)
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
                .or_else(|| l.strip_prefix("mod "))?;
            Some(l.trim_end_matches(';').to_owned())
        })
        .collect();
    let placed: BTreeSet<String> = (plan.modules)()
        .into_iter()
        .filter(|m| *m != "lib")
        .map(str::to_owned)
        .collect();
    assert_eq!(
        declared, placed,
        "{}/lib.rs's modules against its floors",
        plan.src
    );
}

#[test]
fn the_gateway_keeps_to_its_floors() {
    check(&GATEWAY);
}

#[test]
fn the_node_keeps_to_its_floors() {
    check(&NODE);
}

#[test]
fn every_module_has_a_floor_and_every_floor_entry_is_a_module() {
    check_modules(&GATEWAY);
    check_modules(&NODE);
}

/// `src`, as `file` of `plan`'s crate, is found to name `module` against the floors.
fn caught(plan: &Plan, file: &str, src: &str, module: &str) {
    let got = breaches_in(plan, file, src).expect("placed");
    assert_eq!(
        got,
        vec![(file.to_owned(), module.to_owned())],
        "{file}: {src}"
    );
}

/// `src`, as `file` of `plan`'s crate, keeps to the floors.
fn quiet(plan: &Plan, file: &str, src: &str) {
    assert_eq!(
        breaches_in(plan, file, src).expect("placed"),
        vec![],
        "{file}: {src}"
    );
}

#[test]
fn a_planted_import_against_the_floors_is_caught() {
    // The core naming a door, the cluster, or the fleet.
    for (file, src, module) in [
        ("policy.rs", "pub use crate::mcp::view::McpView;\n", "mcp"),
        (
            "jobs.rs",
            "fn f() { crate::cluster::jobs::cancel_at(); }\n",
            "cluster",
        ),
        (
            "store/labels.rs",
            "use crate::{time, fanout::Run};\n",
            "fanout",
        ),
        (
            "router/mod.rs",
            "use crate::{\n    agent_session::{viewer, show_node},\n};\n",
            "agent_session",
        ),
        (
            "cluster/listing.rs",
            "let v = crate::console::Topic::Nodes;\n",
            "console",
        ),
        (
            "mcp/nodes.rs",
            "crate::cluster::listing::gather(&s);\n",
            "cluster",
        ),
        // A door holding the state instead of the fleet.
        (
            "mcp/nodes.rs",
            "use crate::{policy::Policy, state::Shared};\n",
            "state",
        ),
        (
            "console/reads.rs",
            "fn f(s: &crate::state::Shared) {}\n",
            "state",
        ),
    ] {
        caught(&GATEWAY, file, src, module);
    }
    // What is allowed stays quiet.
    for (file, src) in [
        (
            "mcp/nodes.rs",
            "use crate::{policy::Policy, fleet::Fleet};\n",
        ),
        ("fleet/mod.rs", "use crate::state::Shared;\n"),
        ("jobs.rs", "use crate::state::Shared;\n"),
        ("cluster/calls.rs", "use crate::router::call;\n"),
        ("fanout.rs", "crate::cluster::listing::gather(&s);\n"),
        ("server.rs", "use crate::mcp;\n"),
    ] {
        quiet(&GATEWAY, file, src);
    }
    assert!(breaches_in(&GATEWAY, "brand_new.rs", "use crate::time;\n").is_err());
    // The node: a lower floor naming a higher one is caught, the other way is not.
    for (file, src, module) in [
        (
            "sessions/spawn.rs",
            "use crate::tools::bash::KillOnDrop;\n",
            "tools",
        ),
        (
            "tools/read.rs",
            "fn f(r: &crate::Registry) {}\n",
            "Registry",
        ),
        (
            "facts.rs",
            "use crate::{backoff, guards::shell};\n",
            "guards",
        ),
        // The transport naming a tool.
        (
            "remote/jobs.rs",
            "use crate::tools::paths::on_host::printf_lines;\n",
            "tools",
        ),
        (
            "probe.rs",
            "fn f(h: &crate::remote::RemoteHost) {}\n",
            "remote",
        ),
    ] {
        caught(&NODE, file, src, module);
    }
    for (file, src) in [
        ("tools/read.rs", "use crate::guards::ShellGuard;\n"),
        (
            "tools/read/on_host.rs",
            "use crate::remote::{Lane, RemoteHost};\n",
        ),
        ("remote/facts.rs", "use crate::probe::FarHost;\n"),
        ("runner.rs", "use crate::{registry::Registry, tools};\n"),
    ] {
        quiet(&NODE, file, src);
    }
}

#[test]
fn comments_strings_and_unit_tests_are_not_imports() {
    let src = r##"
//! Doc: see `crate::mcp::view` and [`crate::cluster::slot`].
/// Also [`crate::console::Topic`].
fn f() -> &'static str {
    let c = '"';
    let url = "nats://x crate::mcp::y";
    let raw = r#"crate::cluster "quoted" "#;
    /* crate::console /* nested */ crate::http */
    let q = '\'';
    url
}
fn g<'a>(s: &'a str) -> &'a str { s }
use crate::time::rfc3339;
#[cfg(test)]
mod tests {
    use crate::mcp::view::McpView;
    fn h() { let _ = { crate::cluster::x() }; }
}
"##;
    assert_eq!(
        breaches_in(&GATEWAY, "policy.rs", src).expect("placed"),
        vec![]
    );
    let names = named_modules(&code_of(src));
    assert_eq!(names, BTreeSet::from(["time".to_owned()]));
    // Code after a gated item still counts.
    let src = "#[cfg(test)]\nuse crate::mcp::x;\nfn f() { crate::console::y(); }\n";
    assert_eq!(
        breaches_in(&GATEWAY, "jobs.rs", src).expect("placed"),
        vec![("jobs.rs".to_owned(), "console".to_owned())]
    );
}

/// Every source file under `dir` (relative to the workspace), by its path there.
fn sources(dir: &str) -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rs_files(&root, &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .expect("under the source folder")
                .to_string_lossy()
                .replace('\\', "/");
            let src = std::fs::read_to_string(&p).expect("read a source file");
            (rel, src)
        })
        .collect()
}

#[test]
fn no_import_circle_holds_more_than_three_files() {
    let crates = [
        "gateway/src",
        "node/src",
        "src",
        "client/src",
        "transport/src",
        "files/src",
        "protocol/src",
        "bench/src",
    ];
    let mut found = Vec::new();
    for dir in crates {
        let files = sources(dir);
        assert!(!files.is_empty(), "no sources under {dir}");
        for circle in circles::too_large(&files) {
            found.push(format!("{dir}: {circle}"));
        }
    }
    assert!(
        found.is_empty(),
        "import circles of more than {} files (move what ties them to a file of its own):\n{}",
        circles::MAX_CIRCLE,
        found.join("\n")
    );
}

#[test]
fn a_planted_circle_of_four_files_is_caught_and_one_of_three_is_not() {
    let files = |srcs: &[(&str, &str)]| -> BTreeMap<String, String> {
        srcs.iter()
            .map(|(f, s)| ((*f).to_owned(), (*s).to_owned()))
            .collect()
    };
    // a → b (grouped use), b → c/mod (super path), c/mod → e (its sibling through
    // super), e → a (crate path): four files. c/mod naming its child c/d is its own
    // make-up, not an arrow.
    let four = files(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod e;\n"),
        ("a.rs", "use crate::{b::{self, B}, x};\nfn f() {}\n"),
        ("b.rs", "fn g() { super::c::h(); }\n"),
        (
            "c/mod.rs",
            "mod d;\npub fn h() { super::e::k(); self::d::j(); }\n",
        ),
        ("c/d.rs", "pub fn j() {}\n"),
        ("e.rs", "pub fn k() { crate::a::f(); }\n"),
    ]);
    let caught = circles::too_large(&four);
    assert_eq!(caught.len(), 1, "{caught:?}");
    assert!(caught[0].starts_with("4 files"), "{caught:?}");
    // e naming nothing (a comment still names a), c/d naming its parent: no circle.
    let mut none = four.clone();
    none.insert("e.rs".into(), "pub fn k() {}\n// crate::a::f()\n".into());
    none.insert("c/d.rs".into(), "pub fn j() { super::h(); }\n".into());
    assert!(circles::too_large(&none).is_empty());
    assert_eq!(
        circles::circles(&circles::graph(&none)),
        Vec::<Vec<String>>::new()
    );
    // Two siblings naming each other are a circle of two.
    let mut two = none.clone();
    two.insert("b.rs".into(), "fn g() { crate::e::k(); }\n".into());
    two.insert("e.rs".into(), "pub fn k() { crate::b::g(); }\n".into());
    assert_eq!(
        circles::circles(&circles::graph(&two)),
        vec![vec!["b.rs".to_owned(), "e.rs".to_owned()]]
    );
    // Three files in a circle are allowed.
    let three = files(&[
        ("a.rs", "use crate::b::B;\n"),
        ("b.rs", "use crate::c::C;\n"),
        ("c.rs", "fn f() { crate::a::g(); }\n"),
    ]);
    assert!(circles::too_large(&three).is_empty());
    assert_eq!(circles::circles(&circles::graph(&three))[0].len(), 3);
}
