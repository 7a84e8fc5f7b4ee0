#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvengine::manifest::fuzz_check(data));
