//! Host processes: proc_list (read-only) and proc_kill (one signal, with an
//! operator's approval by default), both over the `/proc` reader in [`table`].
//!
//! Unlike Process, which manages the sessions Bash started for a caller, these see
//! every process on the host; that is their purpose (issue 19's structured operations:
//! find the runaway process, stop it) and why proc_kill needs an operator by default.

pub mod kill;
pub mod list;
pub mod table;

pub use kill::ProcKill;
pub use list::ProcList;
