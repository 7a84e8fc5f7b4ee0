#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvengine::wal::fuzz_check(data));
