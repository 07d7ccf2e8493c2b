//! Fuzz target `frame_decode`: arbitrary bytes as one WebSocket text frame, through
//! `Frame::decode` and the decoding of every method's params, every event payload and
//! every result shape (see `gsv_fuzz::frame_decode`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gsv_fuzz::frame_decode(data);
});
