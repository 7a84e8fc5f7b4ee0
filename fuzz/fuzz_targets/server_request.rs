#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| wire::fuzzing::server_request(data));
