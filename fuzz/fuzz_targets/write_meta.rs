#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvengine::mvcc::fuzzing::write_meta_check(data));
