#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| wire::fuzzing::offload_body(data));
