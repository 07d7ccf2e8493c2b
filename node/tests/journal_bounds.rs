//! The node's journal on its own: bounded like the in-memory ledger across a restart,
//! private (0700 directories, 0600 files, symlinks refused), and tolerant of corrupt
//! or foreign entries (skipped with a warning and removed, never a panic).

use gsv_node::journal::{Journal, LoadedCall};
use gsv_node::ledger::{Ledger, Seen, MAX_KEPT_RESULTS};
use gsv_node::sessions::SessionManager;
use gsv_node::EventSender;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

fn count(dir: &Path, ext: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == ext))
        .count()
}

#[test]
fn results_past_the_cap_keep_only_the_newest_across_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let journal = Journal::open(data.path(), "n1").unwrap();
    let ledger = Ledger::with_journal(Some(journal.calls().clone()));
    assert!(ledger.journaled());
    let root = CancellationToken::new();
    let (tx, _rx) = mpsc::channel(1);
    let total = MAX_KEPT_RESULTS + 20;
    for i in 0..total {
        let id = format!("c{i}");
        assert!(matches!(ledger.begin(&id, &root, &tx), Seen::New(_)));
        ledger.record_begun(&id, "Echo", Some("tok-a"));
        ledger.finish(&id, &format!("frame-{i}"));
    }
    let calls = journal.root().join("calls");
    assert_eq!(count(&calls, "done"), MAX_KEPT_RESULTS);
    assert_eq!(count(&calls, "call"), MAX_KEPT_RESULTS);
    // The dropped ones leave only their id behind.
    assert_eq!(count(&calls, "gone"), 20);

    // While this process holds it, another cannot use it.
    assert!(Journal::open(data.path(), "n1").is_err());
    // A new process of the same node.
    drop((ledger, journal));
    let journal = Journal::open(data.path(), "n1").unwrap();
    let loaded = journal.calls().load();
    assert_eq!(loaded.len(), MAX_KEPT_RESULTS + 20);
    let ledger = Ledger::with_journal(Some(journal.calls().clone()));
    for call in loaded {
        match call {
            LoadedCall::Done { id, frame, done_at } => ledger.restore_done(&id, frame, done_at),
            LoadedCall::Forgotten { id } => ledger.restore_forgotten(&id),
            other => panic!("{other:?}"),
        }
    }
    let last = format!("c{}", total - 1);
    match ledger.begin(&last, &root, &tx) {
        Seen::Done(frame) => assert_eq!(frame, format!("frame-{}", total - 1)),
        other => panic!("{other:?}"),
    }
    // The oldest results were dropped, but their ids are remembered: a resume of one
    // is answered "no longer kept", never run a second time.
    assert!(matches!(ledger.begin("c0", &root, &tx), Seen::Forgotten));
}

#[test]
fn a_begun_call_without_a_result_loads_as_pending() {
    let data = tempfile::tempdir().unwrap();
    let journal = Journal::open(data.path(), "n1").unwrap();
    journal.calls().begun("p-1", "Read", Some("tok-a"));
    let loaded = journal.calls().load();
    assert_eq!(
        loaded,
        vec![LoadedCall::Pending {
            id: "p-1".into(),
            tool: "Read".into(),
            caller: Some("tok-a".into())
        }]
    );
}

#[test]
fn corrupt_and_foreign_entries_are_skipped_and_removed() {
    let data = tempfile::tempdir().unwrap();
    let journal = Journal::open(data.path(), "n1").unwrap();
    journal.calls().begun("good", "Bash", None);
    journal.calls().finished("good", "frame");
    let calls = journal.root().join("calls");
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    std::fs::write(calls.join(format!("{}.call", hex("torn"))), b"{\"id\":\"to").unwrap();
    std::fs::write(
        calls.join(format!("{}.call", hex("liar"))),
        br#"{"id":"other","tool":"x","caller":null,"begun_at":1}"#,
    )
    .unwrap();
    std::fs::write(calls.join(format!("{}.done", hex("orphan"))), b"x").unwrap();
    std::fs::write(calls.join("notes.txt"), b"hello").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", calls.join(format!("{}.call", hex("link")))).unwrap();

    let loaded = journal.calls().load();
    assert_eq!(loaded.len(), 1, "{loaded:?}");
    assert!(
        matches!(&loaded[0], LoadedCall::Done { id, frame, .. } if id == "good" && frame == "frame")
    );
    let left: Vec<String> = std::fs::read_dir(&calls)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left.len(),
        2,
        "only the good call's two files stay: {left:?}"
    );

    // Sessions: a corrupt record and a stray file are dropped, nothing adopted.
    let sessions = journal.sessions_dir();
    let bad = sessions.join("0b1d7a52-0c9e-4c55-9d1e-2a3b4c5d6e7f");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("record.json"), b"not json").unwrap();
    std::fs::write(sessions.join("stray"), b"x").unwrap();
    let manager = SessionManager::new(EventSender::detached());
    manager.attach_journal(sessions.to_owned());
    assert!(manager.adopt().is_empty());
    assert!(manager.is_empty());
    assert_eq!(std::fs::read_dir(sessions).unwrap().count(), 0);
}

#[test]
fn the_journal_is_private_and_refuses_symlinks() {
    let data = tempfile::tempdir().unwrap();
    // A journal directory someone widened is narrowed again.
    std::fs::create_dir(data.path().join("journal")).unwrap();
    std::fs::set_permissions(
        data.path().join("journal"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let journal = Journal::open(data.path(), "n1").unwrap();
    for dir in [
        data.path().join("journal"),
        journal.root().to_owned(),
        journal.root().join("calls"),
        journal.sessions_dir().to_owned(),
    ] {
        assert_eq!(mode(&dir), 0o700, "{dir:?}");
    }
    journal.calls().begun("c", "Bash", None);
    journal.calls().finished("c", "frame");
    for entry in std::fs::read_dir(journal.root().join("calls")).unwrap() {
        assert_eq!(mode(&entry.unwrap().path()), 0o600);
    }

    // A symlink where a journal directory belongs is refused, not followed.
    let elsewhere = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), data.path().join("journal")).unwrap();
    assert!(Journal::open(data.path(), "n1").is_err());
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}
