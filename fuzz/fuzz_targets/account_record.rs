#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| client::sql::users::account_decode_check(data));
