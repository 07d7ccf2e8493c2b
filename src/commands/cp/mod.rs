//! `gsv cp SRC DST`: copies one file between this machine and a node, streamed in
//! binary frames and checked by SHA-256 (`docs/operations.md`, "Copying files").
//!
//! Single files here, local ↔ node; `-r` copies directory trees ([`tree`]); node →
//! node is refused with a usage error that says so.

mod progress;
mod spec;
mod tree;

pub use spec::{plan, Plan, Side};

use super::agent::{client_error, connect, print_json, Target};
use crate::exit;
use crate::terminal::safe;
use gsv_client::ClientError;
use std::time::Duration;

/// What `--json` prints on success.
#[derive(serde::Serialize)]
struct Copied<'a> {
    path: &'a str,
    bytes: u64,
    sha256: &'a str,
    direction: &'a str,
}

/// `gsv cp SRC DST [-r] [--json]`. The exit code.
pub async fn run(target: Target, src: &str, dst: &str, recursive: bool, json: bool) -> u8 {
    if recursive {
        return tree::run(target, src, dst, json).await;
    }
    let plan = match plan(src, dst, recursive) {
        Ok(p) => p,
        Err(message) => {
            eprintln!("error: invalid_args: {}", safe(&message));
            return exit::USAGE;
        }
    };
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut bar = progress::Progress::new(progress::stderr_is_terminal());
    let copy = async {
        match &plan {
            Plan::Put {
                local,
                node,
                remote,
            } => {
                client
                    .put_file(node, local, remote, |d, t| bar.update(d, t))
                    .await
            }
            Plan::Get {
                node,
                remote,
                local,
            } => {
                client
                    .get_file(node, remote, local, |d, t| bar.update(d, t))
                    .await
            }
        }
    };
    let outcome = tokio::select! {
        biased;
        outcome = copy => outcome,
        _ = super::shutdown_signal() => {
            // The copy's future is dropped: it queued its cancel. Let it go out.
            client.flush(Duration::from_secs(3)).await;
            progress::clear_line(progress::stderr_is_terminal());
            eprintln!(
                "error: cancelled: interrupted; the copy was cancelled (run the same command again to resume it)"
            );
            return exit::INTERRUPTED;
        }
    };
    bar.finish();
    match outcome {
        Ok(done) => {
            if json {
                print_json(&Copied {
                    path: &done.path,
                    bytes: done.bytes,
                    sha256: &done.sha256,
                    direction: plan.direction(),
                });
            }
            exit::OK
        }
        Err(e) => copy_error(&e),
    }
}

/// Prints a failed copy's error; the exit code.
fn copy_error(e: &ClientError) -> u8 {
    client_error(e)
}
