//! The tools a node can offer, one file each.
//!
//! A new tool is a file here implementing [`crate::Tool`] plus one line in
//! [`crate::Registry::standard`]. Shared helpers for tools live beside them
//! ([`args`] for validating untrusted arguments).

pub mod args;
pub mod echo;
pub mod read;
