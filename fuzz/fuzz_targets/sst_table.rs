#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sst::fuzzing::table(data));
