#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvengine::raft_log::fuzz_check(data));
