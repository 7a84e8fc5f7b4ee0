#![no_main]

// The worker's whole path for an offload body: framing, request and ChangeSet decode, TopN
// paging, snapshot rebuild over real SST files, execution (`worker::fuzzing`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| worker::fuzzing::offload_body(data));
