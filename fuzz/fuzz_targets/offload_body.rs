#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvproto::fuzzing::offload_body(data));
