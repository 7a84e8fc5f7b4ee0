#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvproto::fuzzing::server_request(data));
