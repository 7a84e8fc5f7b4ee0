#![no_main]

// A body POSTed to the server endpoint its first byte selects, through the server's router to
// a node with a small engine (`server::fuzzing`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some((path, body)) = server::fuzzing::selected(data) {
        server::fuzzing::request(path, body);
    }
});
