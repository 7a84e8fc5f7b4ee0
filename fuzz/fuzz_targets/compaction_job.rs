#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| changeset::fuzzing::compaction_job_decode(data));
