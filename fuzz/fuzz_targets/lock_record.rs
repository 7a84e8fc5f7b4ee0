#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvengine::mvcc::fuzzing::lock_record_check(data));
