#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftstore::fuzzing::raft_batch(data));
