//! The `gsv` command line. Thin: it sets up the allocator, parses the flags and hands
//! the command to [`dispatch`].

mod dispatch;

use clap::Parser;
use gsv::cli::Cli;
use std::process::ExitCode;

/// mimalloc, tuned in [`gsv::allocator`].
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs [`gsv::allocator::tune`] while the process loads, before mimalloc's own
/// constructor (priority 101) reserves its first arena: constructors run in ascending
/// priority order.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array.00100"]
static TUNE_ALLOCATOR: extern "C" fn() = gsv::allocator::tune;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.prints_and_exits() {
        #[cfg(unix)]
        // SAFETY: called before any thread starts (parsing starts none); SIG_DFL is a
        // valid disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    ExitCode::from(dispatch::run(cli.command))
}
