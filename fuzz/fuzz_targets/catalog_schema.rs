#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| client::sql::catalog::schema_decode_check(data));
