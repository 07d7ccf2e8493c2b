//! End to end: what an operator approves about a copy is what runs (issue 43).
//!
//! Through a real gateway and real `gsv node` processes on loopback, with `confirm`
//! rules on the file tools: the approval question of a put, a get and a node → node
//! copy names the file as the node resolved it when the transfer opened (a symlink
//! the agent planted in the path is resolved, `..` collapsed), says whether a put
//! replaces a file, and gives the agent's own name for it only as a quoted, cut and
//! escaped value; a denied copy leaves nothing behind, not even its partial file, and
//! an approved one writes to exactly the file the question named.

mod common;

use common::{eventually, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::transfer::Place;
use gsv_protocol::{ErrorCode, EventName};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The next `approval.requested` an operator connection hears.
async fn next_request(operator: &AgentClient) -> Value {
    eventually("approval.requested", Duration::from_secs(20), || async {
        let e = operator.next_event(Duration::from_millis(100)).await?;
        (e.event == EventName::ApprovalRequested).then_some(e.payload)
    })
    .await
}

fn summary(req: &Value) -> String {
    req["summary"].as_str().unwrap_or_default().to_owned()
}

fn decide(gw: &Gateway, req: &Value, verdict: &str) {
    let id = req["id"].as_str().expect("id");
    let (code, _, err) = gw.cli(&["approvals", verdict, id]);
    assert_eq!(code, 0, "{err}");
}

/// Names in `dir` (none expected after a refused copy: no partial file either).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A base directory holding the node's workspace `ws` (with `docs` a symlink the agent
/// planted to `outside`) and `outside`, all canonical.
struct Layout {
    _base: TempDir,
    base: std::path::PathBuf,
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn layout(tag: &str) -> Layout {
    let base_dir = TempDir::new(tag);
    let base = std::fs::canonicalize(base_dir.path()).expect("canonical");
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&outside).expect("outside");
    std::os::unix::fs::symlink(&outside, ws.join("docs")).expect("symlink");
    Layout {
        _base: base_dir,
        base,
        ws,
        outside,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_puts_question_names_the_file_the_node_resolved_and_a_denied_one_leaves_nothing() {
    let gw = Gateway::start().await;
    let l = layout("shows-put");
    let _node = gw.node("box", &l.ws).await;
    let local = TempDir::new("shows-put-local");
    let token = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "box__Write",
    ]);
    let agent = Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;
    let src = local.path().join("up.txt");
    std::fs::write(&src, b"approved bytes").expect("write");
    let real = l.outside.join("notes.txt");

    let put = |agent: &Arc<AgentClient>, remote: &str| {
        let (a, src, remote) = (agent.clone(), src.clone(), remote.to_owned());
        tokio::spawn(async move { a.put_file("box", &src, &remote, |_, _| {}).await })
    };

    // The question names the real destination, not `docs/notes.txt`.
    let call = put(&agent, "docs/notes.txt");
    let req = next_request(&operator).await;
    let s = summary(&req);
    assert!(
        s.contains(&format!("box:\"{}\"", real.display())),
        "the node's resolved destination is named: {s}"
    );
    assert!(s.contains("a new file"), "{s}");
    assert!(s.contains("the agent named it \"docs/notes.txt\""), "{s}");
    assert!(s.contains("up.txt\" (agent \"careful\")"), "{s}");
    let args: Value = serde_json::from_str(req["args"].as_str().unwrap_or("{}")).expect("args");
    assert_eq!(args["resolved"], true, "{args}");
    assert_eq!(args["replaces"], false, "{args}");
    decide(&gw, &req, "deny");
    let e = call.await.expect("join").expect_err("denied");
    assert_eq!(e.remote().map(|r| r.code), Some(ErrorCode::Denied), "{e}");
    // Nothing behind: neither the file nor the partial file its open made.
    eventually(
        "the partial file removed",
        Duration::from_secs(10),
        || async { names(&l.outside).is_empty().then_some(()) },
    )
    .await;

    // Approved: the bytes land in the file the question named.
    let call = put(&agent, "docs/notes.txt");
    let req = next_request(&operator).await;
    decide(&gw, &req, "approve");
    call.await.expect("join").expect("put");
    assert_eq!(std::fs::read(&real).expect("landed"), b"approved bytes");

    // Again: the question says a file stands there and will be replaced.
    let call = put(&agent, "docs/notes.txt");
    let req = next_request(&operator).await;
    assert!(summary(&req).contains("replaces the file there"), "{req}");
    decide(&gw, &req, "deny");
    call.await.expect("join").expect_err("denied");
    eventually(
        "only the approved file",
        Duration::from_secs(10),
        || async { (names(&l.outside) == vec!["notes.txt".to_owned()]).then_some(()) },
    )
    .await;
    assert_eq!(std::fs::read(&real).expect("kept"), b"approved bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_or_hidden_name_in_a_copys_question_is_cut_escaped_and_quoted() {
    let gw = Gateway::start().await;
    let l = layout("shows-long");
    let _node = gw.node("box", &l.ws).await;
    let local = TempDir::new("shows-long-local");
    let token = gw.token(&["agent", "sly", "--allow", "*", "--confirm", "box__Write"]);
    let agent = Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;

    // A source name that reverses what follows it, drawn raw.
    let sly = "notes\u{202E}txt.exe\u{2066} → box:docs\u{2215}harmless.txt";
    let src = local.path().join(sly);
    std::fs::write(&src, b"x").expect("write");
    // A 200,000-character destination whose `..` tail leaves the workspace (through
    // the planted symlink: `docs/..` is `outside`'s parent, not `ws`).
    let long = format!("docs/{}../escape.txt", "./".repeat(100_000));
    assert!(long.len() > 200_000);
    let (a, s2, l2) = (agent.clone(), src.clone(), long.clone());
    let call = tokio::spawn(async move { a.put_file("box", &s2, &l2, |_, _| {}).await });
    let req = next_request(&operator).await;
    let s = summary(&req);
    assert!(s.chars().count() < 2_000, "cut: {} characters", s.len());
    assert!(
        !s.chars()
            .any(|c| matches!(c, '\u{202E}' | '\u{2066}' | '\u{2069}')),
        "no raw bidi control: {s}"
    );
    assert!(
        s.contains("\\u{202e}") && s.contains("\\u{2066}"),
        "escaped: {s}"
    );
    assert!(s.contains("more characters)"), "a visible cut: {s}");
    // What runs, in full: the node resolved `..` through the planted symlink.
    let real = l.base.join("escape.txt");
    assert!(
        s.contains(&format!("box:\"{}\"", real.display())),
        "the real destination is named: {s}"
    );
    // The agent's text sits in quotes: the arrow it wrote is inside them.
    assert_eq!(s.matches(" → box:\"").count(), 1, "{s}");
    decide(&gw, &req, "deny");
    call.await.expect("join").expect_err("denied");
    assert!(!real.exists());
    eventually("no partial file", Duration::from_secs(10), || async {
        (names(&l.base) == vec!["outside".to_owned(), "ws".to_owned()]).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gets_and_node_to_node_copies_name_what_the_nodes_resolved() {
    let gw = Gateway::start().await;
    let la = layout("shows-a");
    let lb = layout("shows-b");
    let _a = gw.node("alpha", &la.ws).await;
    let _b = gw.node("beta", &lb.ws).await;
    std::fs::write(la.outside.join("conf.txt"), b"conf").expect("write");
    let local = TempDir::new("shows-get-local");
    let token = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "alpha__Read",
        "--confirm",
        "beta__Write",
    ]);
    let agent = Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;

    // A get: the file read is named as alpha resolved it.
    let target = local.path().join("got.txt");
    let (a, t) = (agent.clone(), target.clone());
    let get =
        tokio::spawn(async move { a.get_file("alpha", "docs/conf.txt", &t, |_, _| {}).await });
    let req = next_request(&operator).await;
    let s = summary(&req);
    let real = la.outside.join("conf.txt");
    assert!(s.contains(&format!("alpha:\"{}\"", real.display())), "{s}");
    assert!(s.contains("the agent named it \"docs/conf.txt\""), "{s}");
    decide(&gw, &req, "approve");
    get.await.expect("join").expect("got");
    assert_eq!(std::fs::read(&target).expect("read"), b"conf");

    // A node → node copy: the destination as beta resolved it when it opened.
    let a = agent.clone();
    let copy = tokio::spawn(async move {
        a.copy_file(
            Place {
                node: "alpha".into(),
                path: "docs/conf.txt".into(),
            },
            Place {
                node: "beta".into(),
                path: "docs/conf.txt".into(),
            },
            |_, _| {},
        )
        .await
    });
    let req = next_request(&operator).await;
    let s = summary(&req);
    let to = lb.outside.join("conf.txt");
    assert!(s.contains(&format!("alpha:\"{}\"", real.display())), "{s}");
    assert!(s.contains(&format!("beta:\"{}\"", to.display())), "{s}");
    assert!(s.contains("a new file"), "{s}");
    decide(&gw, &req, "deny");
    copy.await.expect("join").expect_err("denied");
    eventually(
        "no partial file on beta",
        Duration::from_secs(10),
        || async { names(&lb.outside).is_empty().then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_tools_question_shows_what_its_path_names_and_the_call_writes_exactly_there() {
    let gw = Gateway::start().await;
    let l = layout("shows-write");
    let _node = gw.node("box", &l.ws).await;
    let elsewhere = l.base.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("elsewhere");
    let token = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "box__Write",
        "--confirm",
        "box__Bash",
    ]);
    let agent = Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;

    let (a, args) = (
        agent.clone(),
        serde_json::json!({"path": "docs/notes.txt", "content": "approved text"}),
    );
    let call = tokio::spawn(async move { a.call("box__Write", args, Some(60_000)).await });
    let req = next_request(&operator).await;
    let plan = req["plan"].as_str().unwrap_or_default().to_owned();
    let real = l.outside.join("notes.txt");
    assert!(
        plan.contains(&format!(
            "path \"docs/notes.txt\" is \"{}\" on the node: nothing there yet",
            real.display()
        )),
        "the node's resolution is on the question: {req}"
    );
    // While the operator reads, the agent points `docs` somewhere else.
    std::fs::remove_file(l.ws.join("docs")).expect("unlink");
    std::os::unix::fs::symlink(&elsewhere, l.ws.join("docs")).expect("relink");
    decide(&gw, &req, "approve");
    let done = call.await.expect("join").expect("written");
    assert!(!done.is_error, "{done:?}");
    assert_eq!(
        std::fs::read_to_string(&real).expect("what was approved"),
        "approved text"
    );
    assert!(
        names(&elsewhere).is_empty(),
        "nothing where the link now points"
    );

    // A Bash `workdir` is resolved the same way.
    let (a, args) = (
        agent.clone(),
        serde_json::json!({"command": "pwd", "workdir": "docs"}),
    );
    let call = tokio::spawn(async move { a.call("box__Bash", args, Some(60_000)).await });
    let req = next_request(&operator).await;
    let plan = req["plan"].as_str().unwrap_or_default().to_owned();
    assert!(
        plan.contains(&format!(
            "workdir \"docs\" is \"{}\" on the node: a directory",
            elsewhere.display()
        )),
        "{req}"
    );
    decide(&gw, &req, "approve");
    let done = call.await.expect("join").expect("ran");
    let text = serde_json::to_string(&done.content).unwrap_or_default();
    assert!(text.contains(&elsewhere.display().to_string()), "{text}");
}

/// A directory copy (`gsv cp -r`) to `docs`, a directory the agent reached through a
/// planted symlink: the question names the directory the node resolved (into
/// `outside/tree`, since `docs` is a directory), and the approved tree lands under it
/// even though the link is re-pointed while the operator reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_copys_question_names_the_directory_the_node_resolved() {
    let gw = Gateway::start().await;
    let l = layout("shows-tree");
    let _node = gw.node("box", &l.ws).await;
    let local = TempDir::new("shows-tree-local");
    let tree = local.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).expect("tree");
    std::fs::write(tree.join("a.txt"), b"a").expect("a");
    std::fs::write(tree.join("sub/b.txt"), b"b").expect("b");
    let token = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "box__Write",
    ]);
    let agent = Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;
    let elsewhere = l.base.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("elsewhere");

    let call = {
        let (a, tree) = (agent.clone(), tree.clone());
        tokio::spawn(async move {
            let mut top = None;
            a.put_tree("box", &tree, "docs", &mut top, |_, _| {}).await
        })
    };
    let req = next_request(&operator).await;
    let s = summary(&req);
    let real = l.outside.join("tree");
    assert!(
        s.contains(&format!("box:\"{}\" (a new directory", real.display())),
        "the node's resolved top is named: {s}"
    );
    assert!(s.contains("the agent named it \"docs/tree\""), "{s}");
    // The agent re-points its link while the operator reads.
    std::fs::remove_file(l.ws.join("docs")).expect("rm link");
    std::os::unix::fs::symlink(&elsewhere, l.ws.join("docs")).expect("re-point");
    decide(&gw, &req, "approve");
    let copied = call.await.expect("join").expect("tree copied");
    assert_eq!(copied.root, real.display().to_string());
    assert_eq!(std::fs::read(real.join("sub/b.txt")).expect("landed"), b"b");
    assert!(names(&elsewhere).is_empty(), "{:?}", names(&elsewhere));
}
