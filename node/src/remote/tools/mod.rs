//! The standard tools, done on the far host: the same names, parameters and result
//! shapes as a local node's (each borrows its declaration and its result builders
//! from [`crate::tools`]), with the work done by scripts in the host's shell.

mod bash;
mod edit;
mod files;
mod fs;
mod process;
mod read;
mod search;
mod time;
mod write;

pub use bash::RemoteBash;
pub use edit::RemoteEdit;
pub use files::{check_line, printf_lines};
pub use fs::{RemoteFsList, RemoteFsStat};
pub use process::RemoteProcess;
pub use read::RemoteRead;
pub use search::{RemoteGlob, RemoteGrep};
pub use time::RemoteTime;
pub use write::RemoteWrite;
