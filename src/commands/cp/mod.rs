//! `gsv cp SRC DST`: copies a file (or, with `-r`, a directory tree) between this
//! machine and a node, or a file between two nodes, streamed in
//! binary frames and checked by SHA-256 (`docs/operations.md`, "Copying files").
//!
//! Single files, local ↔ node and node → node (the gateway passes the bytes from one
//! node to the other; they never come here); `-r` copies directory trees between this
//! machine and a node ([`tree`]). A single-file copy that fails on a dropped link, a
//! restarting gateway or a node that went away is tried again by itself ([`retry`]).

mod progress;
mod retry;
mod spec;
mod tree;

pub use retry::{DEFAULT_RETRY_FOR_SECS, FIRST_DELAY, MAX_DELAY};
pub use spec::{plan, Plan, Side};

use super::client::{client_error, print_json, Target};
use crate::exit;
use crate::terminal::safe;
use gsv_client::{AgentClient, ClientError};
use gsv_protocol::transfer::{Finished, Place};
use std::cell::RefCell;
use std::time::Duration;

/// What `--json` prints on success.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Copied<'a> {
    path: &'a str,
    bytes: u64,
    sha256: &'a str,
    direction: &'a str,
    /// Node → node: bytes the destination already held from an interrupted copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    resumed_from: Option<u64>,
    /// How many times the copy was tried again after a dropped link, a restarting
    /// gateway or a node that went away.
    retries: u32,
}

/// `gsv cp SRC DST [-r] [--json] [--retry-for SECS]`. The exit code.
pub async fn run(
    target: Target,
    src: &str,
    dst: &str,
    recursive: bool,
    json: bool,
    retry_for: Duration,
) -> u8 {
    if recursive {
        return tree::run(target, src, dst, json, retry_for).await;
    }
    let plan = match plan(src, dst) {
        Ok(p) => p,
        Err(message) => {
            eprintln!("error: invalid_args: {}", safe(&message));
            return exit::USAGE;
        }
    };
    let dialer = match target.resolve() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let on_terminal = progress::stderr_is_terminal();
    let bar = RefCell::new(progress::Progress::new(on_terminal));
    let outcome = retry::run(
        &dialer,
        retry_for,
        super::shutdown_signal(),
        async |client: &AgentClient, attempt: &retry::Attempt| {
            copy_once(client, &plan, |done, total| {
                attempt.at(done);
                bar.borrow_mut().update(done, total);
            })
            .await
        },
        |n: &retry::Notice<'_>| say_retry(&bar, n),
    )
    .await;
    match outcome {
        retry::Outcome::Cancelled => {
            progress::clear_line(on_terminal);
            eprintln!(
                "error: cancelled: interrupted; the copy was cancelled (run the same command again to resume it)"
            );
            exit::INTERRUPTED
        }
        retry::Outcome::Done {
            value: (done, resumed_from),
            retries,
        } => {
            bar.borrow_mut().finish();
            if json {
                print_json(&Copied {
                    path: &done.path,
                    bytes: done.bytes,
                    sha256: &done.sha256,
                    direction: plan.direction(),
                    resumed_from,
                    retries,
                });
            }
            exit::OK
        }
        retry::Outcome::Failed {
            error,
            retries,
            gave_up,
        } => failed(
            &bar,
            (&error, retries, gave_up),
            retry_for,
            "run the same command again to resume",
        ),
    }
}

/// A copy that failed for good: says so (and, when it gave up, `then`: what finishes
/// it); the exit code.
fn failed(
    bar: &RefCell<progress::Progress>,
    (error, retries, gave_up): (&ClientError, u32, bool),
    retry_for: Duration,
    then: &str,
) -> u8 {
    bar.borrow_mut().finish();
    if gave_up {
        eprintln!(
            "gsv cp: giving up after {retries} retries: no progress for {} s (--retry-for); {then}",
            retry_for.as_secs()
        );
    }
    copy_error(error)
}

/// Says on stderr that a try failed and how long until the next (cutting the progress
/// line first).
fn say_retry(bar: &RefCell<progress::Progress>, n: &retry::Notice<'_>) {
    bar.borrow_mut().interrupt();
    eprintln!(
        "gsv cp: {}: {}; trying again in {:.1} s (retry {})",
        retry::code_of(n.error),
        safe(&retry::message_of(n.error)),
        n.delay.as_secs_f64(),
        n.retry
    );
}

/// One try of the copy `plan` on a connected client, resuming from what the node (a
/// put, a node → node copy) or the local partial file (a get) holds; what it did and,
/// node → node, the bytes the destination already held.
async fn copy_once(
    client: &AgentClient,
    plan: &Plan,
    progress: impl FnMut(u64, u64),
) -> Result<(Finished, Option<u64>), ClientError> {
    match plan {
        Plan::Put {
            local,
            node,
            remote,
        } => client
            .put_file(node, local, remote, progress)
            .await
            .map(|f| (f, None)),
        Plan::Get {
            node,
            remote,
            local,
        } => client
            .get_file(node, remote, local, progress)
            .await
            .map(|f| (f, None)),
        Plan::Copy {
            from_node,
            from,
            to_node,
            to,
        } => {
            let place = |node: &String, path: &String| Place {
                node: node.clone(),
                path: path.clone(),
            };
            client
                .copy_file(place(from_node, from), place(to_node, to), progress)
                .await
                .map(|c| {
                    let done = Finished {
                        id: Default::default(),
                        path: format!("{}:{}", c.to.node, c.to.path),
                        bytes: c.bytes,
                        sha256: c.sha256,
                    };
                    (done, Some(c.resumed_from))
                })
        }
    }
}

/// Prints a failed copy's error; the exit code.
fn copy_error(e: &ClientError) -> u8 {
    client_error(e)
}
