#![no_main]

// A body POSTed to the placement-driver endpoint its first byte selects, through its router to
// a leading instance over an in-memory store (`pd::fuzzing`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some((path, body)) = pd::fuzzing::selected(data) {
        pd::fuzzing::request(path, body);
    }
});
