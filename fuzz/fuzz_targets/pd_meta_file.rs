#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pd::meta::embedded::fuzz_decode(data));
