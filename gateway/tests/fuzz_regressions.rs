//! Replays the fuzzers' findings on the stable toolchain, in every `cargo test` run.
//!
//! `fuzz/src/lib.rs` (the code the `cargo fuzz` targets call) is included here as is, so
//! every file under `fuzz/regressions/<target>/` (inputs that once crashed a target) and
//! `fuzz/seeds/<target>/` (the starting corpus) goes through exactly the calls the
//! fuzzer made, plus hand-made nasty inputs: deep nesting, huge numbers, broken UTF-16
//! escapes, megabyte strings. Each must come out as a value (accepted or refused),
//! never as a panic. See docs/operations.md, "Fuzzing".

#[path = "../../fuzz/src/lib.rs"]
mod harness;

use harness::Verdict;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

type Target = fn(&[u8]) -> Verdict;

const TARGETS: [(&str, Target); 3] = [
    ("frame_decode", harness::frame_decode),
    ("handshake", harness::handshake),
    ("names", harness::names),
];

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files of `fuzz/<kind>/<target>/`, sorted (none if the directory is absent).
fn inputs(kind: &str, target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let mut out: Vec<(String, Vec<u8>)> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_file())
            .map(|e| {
                let name = format!("{kind}/{target}/{}", e.file_name().to_string_lossy());
                (name, std::fs::read(e.path()).expect("read fuzz input"))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

/// Runs `f` on every input; panics once, naming every input that panicked.
fn run_all(f: Target, inputs: &[(String, Vec<u8>)]) -> Vec<Verdict> {
    let mut panicked = Vec::new();
    let mut verdicts = Vec::new();
    for (name, data) in inputs {
        match catch_unwind(AssertUnwindSafe(|| f(data))) {
            Ok(v) => verdicts.push(v),
            Err(_) => panicked.push(name.clone()),
        }
    }
    assert!(panicked.is_empty(), "panicked on: {panicked:?}");
    verdicts
}

#[test]
fn regressions_replay_without_panic() {
    let mut total = 0;
    for (target, f) in TARGETS {
        let files = inputs("regressions", target);
        total += files.len();
        run_all(f, &files);
    }
    assert!(
        total > 0,
        "no regression files found under fuzz/regressions/"
    );
}

#[test]
fn seeds_are_accepted() {
    for (target, f) in TARGETS {
        let files = inputs("seeds", target);
        assert!(!files.is_empty(), "no seeds for {target}");
        let verdicts = run_all(f, &files);
        for ((name, _), v) in files.iter().zip(verdicts) {
            assert_eq!(v, Verdict::Ok, "{name} should be a valid input");
        }
    }
}

fn req(method: &str, params: &str) -> String {
    format!(r#"{{"type":"req","id":"1","method":"{method}","params":{params}}}"#)
}

fn connect(role: &str, node: &str) -> String {
    let nonce = harness::NONCE;
    req(
        "connect",
        &format!(
            r#"{{"minProtocol":1,"maxProtocol":1,"role":"{role}","auth":{{"token":"t","nonce":"{nonce}"}},"node":{node}}}"#
        ),
    )
}

fn node_with_tools(id: &str, tools: &str) -> String {
    connect(
        "node",
        &format!(
            r#"{{"id":"{id}","tools":{tools},"runtime":{{"hostOs":"linux","hostArch":"x86_64"}}}}"#
        ),
    )
}

fn tool_with_schema(name: &str, schema: &str) -> String {
    format!(r#"{{"name":"{name}","inputSchema":{schema},"capability":"diagnostics.echo"}}"#)
}

/// Hand-made inputs no fuzzer run is needed to think of.
fn nasty() -> Vec<(String, Vec<u8>)> {
    let deep_open = "[".repeat(100_000);
    let deep = format!("{}{}", "[".repeat(50_000), "]".repeat(50_000));
    let deep_obj = format!("{}1{}", r#"{"a":"#.repeat(20_000), "}".repeat(20_000));
    let just_deep = format!("{}{}", "[".repeat(126), "]".repeat(126));
    let mb = "x".repeat(1 << 20);
    let mb_escapes = "\\u0041".repeat(1 << 18);
    let long_digits = "9".repeat(100_000);
    let mut v: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("nul", "\0".into()),
        ("bom", "\u{feff}{}".into()),
        ("deep-open", deep_open.clone()),
        ("deep", deep.clone()),
        ("deep-object", deep_obj.clone()),
        ("deep-params", req("tools.call", &deep)),
        ("deep-args", req("tools.call", &format!(r#"{{"name":"a__B","args":{deep}}}"#))),
        ("deep-invoke", req("tool.invoke", &format!(r#"{{"tool":"B","args":{deep_obj},"timeoutMs":1}}"#))),
        ("nearly-deep-args", req("tools.call", &format!(r#"{{"name":"a__B","args":{just_deep}}}"#))),
        ("deep-result", format!(r#"{{"type":"res","id":"1","ok":true,"result":{deep}}}"#)),
        ("nearly-deep-result", format!(r#"{{"type":"res","id":"1","ok":true,"result":{{"content":[],"structuredContent":{just_deep}}}}}"#)),
        ("deep-payload", format!(r#"{{"type":"event","event":"call.progress","payload":{deep_obj}}}"#)),
        ("deep-error-details", format!(r#"{{"type":"res","id":"1","ok":false,"error":{{"code":"x","message":"m","details":{deep}}}}}"#)),
        ("seq-1e999", r#"{"type":"event","event":"x","seq":1e999}"#.into()),
        ("seq-2^64", r#"{"type":"event","event":"x","seq":18446744073709551616}"#.into()),
        ("seq-negative", r#"{"type":"event","event":"x","seq":-1}"#.into()),
        ("seq-long", format!(r#"{{"type":"event","event":"x","seq":{long_digits}}}"#)),
        ("timeout-huge", req("tools.call", r#"{"name":"a__B","timeoutMs":1e400}"#)),
        ("timeout-u64-max", req("tool.invoke", r#"{"tool":"B","timeoutMs":18446744073709551615}"#)),
        ("args-long-number", req("tools.call", &format!(r#"{{"name":"a__B","args":{{"n":{long_digits}}}}}"#))),
        ("args-exponent", req("tools.call", r#"{"name":"a__B","args":{"n":1e-99999999999999999999}}"#)),
        ("progress-inf", r#"{"type":"event","event":"call.progress","payload":{"callId":"1","progress":1e999,"total":-1e999}}"#.into()),
        ("id-lone-high", r#"{"type":"cancel","id":"\ud800"}"#.into()),
        ("id-lone-low", r#"{"type":"cancel","id":"\udc00"}"#.into()),
        ("id-swapped", r#"{"type":"cancel","id":"\udc00\ud800"}"#.into()),
        ("id-high-then-char", r#"{"type":"cancel","id":"\ud800\u0041"}"#.into()),
        ("id-bad-escape", r#"{"type":"cancel","id":"\u12"}"#.into()),
        ("method-surrogate", r#"{"type":"req","id":"1","method":"\ud83d\ude00"}"#.into()),
        ("args-surrogate", req("tools.call", r#"{"name":"a__B","args":{"t":"\ud800"}}"#)),
        ("result-surrogate", r#"{"type":"res","id":"1","ok":true,"result":{"content":[{"type":"text","text":"\udfff"}],"structuredContent":"\ud800"}}"#.into()),
        ("id-1mb", format!(r#"{{"type":"cancel","id":"{mb}"}}"#)),
        ("method-1mb", format!(r#"{{"type":"req","id":"1","method":"{mb}"}}"#)),
        ("type-1mb", format!(r#"{{"type":"{mb}"}}"#)),
        ("name-1mb", req("tools.call", &format!(r#"{{"name":"{mb}"}}"#))),
        ("escapes-1mb", req("tools.call", &format!(r#"{{"name":"{mb_escapes}"}}"#))),
        ("method-multibyte", format!(r#"{{"type":"req","id":"1","method":"{}"}}"#, "é".repeat(100))),
        ("type-multibyte", format!(r#"{{"type":"{}"}}"#, "😀".repeat(100))),
        ("wrong-types", r#"{"type":"req","id":1,"method":["connect"],"params":"x"}"#.into()),
        ("ok-string", r#"{"type":"res","id":"1","ok":"true"}"#.into()),
        ("dup-keys", r#"{"type":"req","type":"res","id":"1","id":"2","ok":true}"#.into()),
        ("connect-agent-huge-protocol", req("connect", r#"{"minProtocol":4294967296,"maxProtocol":1,"role":"agent","auth":{"token":"t","nonce":"fuzz-nonce"}}"#)),
        ("connect-agent-inverted", req("connect", r#"{"minProtocol":4294967295,"maxProtocol":0,"role":"agent","auth":{"token":"t","nonce":"fuzz-nonce"}}"#)),
        ("connect-nonce-1mb", req("connect", &format!(r#"{{"minProtocol":1,"maxProtocol":1,"role":"agent","auth":{{"token":"{mb}","nonce":"{mb}"}}}}"#))),
        ("connect-deep-node", connect("node", &deep)),
        ("connect-node-id-1mb", node_with_tools(&mb, "[]")),
        ("connect-node-no-tools", node_with_tools("n", "[]")),
        ("connect-node-300-tools", node_with_tools("n", &format!("[{}]", (0..300).map(|i| tool_with_schema(&format!("T{i}"), "{}")).collect::<Vec<_>>().join(",")))),
        ("schema-self-ref", node_with_tools("n", &format!("[{}]", tool_with_schema("A", r##"{"$ref":"#"}"##)))),
        ("schema-ref-loop", node_with_tools("n", &format!("[{}]", tool_with_schema("A", r##"{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}"##)))),
        ("schema-remote-ref", node_with_tools("n", &format!("[{}]", tool_with_schema("A", r#"{"$ref":"http://127.0.0.1:9/x.json"}"#)))),
        ("schema-file-ref", node_with_tools("n", &format!("[{}]", tool_with_schema("A", r#"{"$ref":"file:///etc/passwd"}"#)))),
        ("schema-bad-pattern", node_with_tools("n", &format!("[{}]", tool_with_schema("A", r#"{"pattern":"(unclosed"}"#)))),
        ("schema-evil-pattern", node_with_tools("n", &format!("[{}]", tool_with_schema("A", r#"{"properties":{"path":{"pattern":"^(a+)+$"}}}"#)))),
        ("schema-huge-numbers", node_with_tools("n", &format!("[{}]", tool_with_schema("A", r#"{"properties":{"n":{"minimum":1e308,"multipleOf":1e-308,"maxLength":18446744073709551615}}}"#)))),
        ("schema-zero-multiple", node_with_tools("n", &format!("[{}]", tool_with_schema("A", r#"{"properties":{"n":{"multipleOf":0}}}"#)))),
        ("schema-deep", node_with_tools("n", &format!("[{}]", tool_with_schema("A", &format!("{}{{}}{}", r#"{"not":"#.repeat(100), "}".repeat(100)))))),
        ("addr-1mb", mb.clone()),
        ("addr-ipv6-unclosed", "ws://[::1".into()),
        ("addr-only-scheme", "wss://".into()),
        ("addr-userinfo", "http://a@b@[::1]:1/".into()),
        ("addr-unicode", "http://ünï.example:8787".into()),
        ("addr-whitespace", " \t ws://x \n".into()),
        ("host-1mb", "-".repeat(1 << 20)),
    ];
    v.sort_by(|a, b| a.0.cmp(b.0));
    let mut out: Vec<(String, Vec<u8>)> = v
        .into_iter()
        .map(|(n, s)| (format!("nasty/{n}"), s.into_bytes()))
        .collect();
    out.push(("nasty/not-utf8".into(), vec![0xff, 0xfe, b'{', 0xc0, 0x80]));
    out.push((
        "nasty/overlong-nul".into(),
        b"{\"type\":\"cancel\",\"id\":\"\xc0\x80\"}".to_vec(),
    ));
    out
}

#[test]
fn nasty_inputs_are_refused_or_accepted_never_panic() {
    let inputs = nasty();
    for (target, f) in TARGETS {
        let verdicts = run_all(f, &inputs);
        assert_eq!(verdicts.len(), inputs.len(), "{target}");
    }
}

#[test]
fn nasty_frames_get_the_expected_verdicts() {
    let by_name = |name: &str| -> Vec<u8> {
        nasty()
            .into_iter()
            .find(|(n, _)| n == &format!("nasty/{name}"))
            .unwrap_or_else(|| panic!("no nasty input {name}"))
            .1
    };
    // Nesting deeper than serde_json's recursion limit is refused, not overflowed.
    assert_eq!(harness::frame_decode(&by_name("deep")), Verdict::Err);
    // ...but params, results and payloads stay raw: serde_json skips over a raw value
    // without recursing, so a deep one passes the frame and is refused (recursion limit)
    // by whoever decodes it.
    assert_eq!(harness::frame_decode(&by_name("deep-params")), Verdict::Ok);
    assert_eq!(harness::frame_decode(&by_name("deep-result")), Verdict::Ok);
    assert_eq!(harness::frame_decode(&by_name("id-1mb")), Verdict::Err);
    assert_eq!(harness::frame_decode(&by_name("seq-1e999")), Verdict::Err);
    assert_eq!(
        harness::frame_decode(&by_name("id-lone-high")),
        Verdict::Err
    );
    assert_eq!(
        harness::frame_decode(&by_name("not-utf8")),
        Verdict::NotText
    );
    // A 1 MB method name is decoded (as an unknown method), its echo is cut short.
    assert_eq!(harness::frame_decode(&by_name("method-1mb")), Verdict::Ok);
    assert_eq!(
        harness::handshake(&by_name("connect-node-no-tools")),
        Verdict::Ok
    );
    for refused in [
        "connect-node-300-tools",
        "connect-node-id-1mb",
        "connect-agent-inverted",
        "schema-remote-ref",
        "schema-file-ref",
        "schema-bad-pattern",
    ] {
        assert_eq!(
            harness::handshake(&by_name(refused)),
            Verdict::Err,
            "{refused}"
        );
    }
    assert_eq!(harness::names(&by_name("addr-1mb")), Verdict::Ok);
    assert_eq!(harness::names(&by_name("addr-only-scheme")), Verdict::Err);
}
