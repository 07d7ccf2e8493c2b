//! Fuzz target `handshake`: arbitrary bytes as a connection's first frame, through the
//! gateway's `parse_connect` on both endpoints and, for nodes, the declaration checks
//! (node id, tool set, JSON Schemas) (see `gsv_fuzz::handshake`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gsv_fuzz::handshake(data);
});
