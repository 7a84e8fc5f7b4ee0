#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| changeset::fuzzing::memtable_data_decode(data));
