//! Fuzz entry points, shared by `fuzz/fuzz_targets/offload_body.rs` and the corpus replay test.

use bytes::Bytes;
use prost::Message;

/// Decodes an offload body and, when the framing holds, its cop request: must never panic.
/// A body that decodes re-encodes to the same bytes.
pub fn offload_body(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    if let Ok(body) = crate::offload::decode(&bytes) {
        let again = crate::offload::encode(&body.request, &body.memtable_data, &body.changeset);
        assert_eq!(again, data, "offload body re-encodes to the same bytes");
        let _ = cop::proto::Request::decode(body.request.as_ref());
    }
}

/// Seeds for the corpus: real bodies around a real cop request.
pub fn offload_body_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let req = cop::proto::Request {
        tp: cop::proto::REQ_TYPE_DAG,
        start_ts: 42,
        ranges: vec![cop::proto::KeyRange::new(b"t1".to_vec(), b"t2".to_vec())],
        is_cache_enabled: true,
        ..Default::default()
    }
    .encode_to_vec();
    vec![
        ("empty_sections", crate::offload::encode(b"", b"", b"")),
        ("request_only", crate::offload::encode(&req, b"", b"")),
        ("all_sections", crate::offload::encode(&req, b"\x01rows", b"\x08\x01")),
    ]
}
