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
        let _ = crate::coprocessor::Request::decode(body.request.as_ref());
    }
}

/// Seeds for the corpus: real bodies around a real cop request.
pub fn offload_body_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let req = crate::coprocessor::Request {
        tp: crate::coprocessor::REQ_TYPE_DAG,
        start_ts: 42,
        ranges: vec![crate::coprocessor::KeyRange::new(
            b"t1".to_vec(),
            b"t2".to_vec(),
        )],
        is_cache_enabled: true,
        ..Default::default()
    }
    .encode_to_vec();
    vec![
        ("empty_sections", crate::offload::encode(b"", b"", b"")),
        ("request_only", crate::offload::encode(&req, b"", b"")),
        (
            "all_sections",
            crate::offload::encode(&req, b"\x01rows", b"\x08\x01"),
        ),
    ]
}

/// The bodies a storage server or a worker decodes, selected by the first byte: must never panic,
/// and whatever decodes re-encodes to a message that decodes to the same value.
pub fn server_request(data: &[u8]) {
    use crate::{delegate, region, txn};
    fn check<M: Message + Default + PartialEq + std::fmt::Debug>(body: &[u8]) {
        if let Ok(m) = M::decode(body) {
            let again =
                M::decode(m.encode_to_vec().as_slice()).expect("re-encoded message decodes");
            assert_eq!(again, m, "re-encoded message decodes to the same value");
        }
    }
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 16 {
        0 => check::<region::TsoRequest>(body),
        1 => check::<region::SplitRequest>(body),
        2 => check::<region::RawLoadRequest>(body),
        3 => check::<txn::PrewriteRequest>(body),
        4 => check::<txn::CommitRequest>(body),
        5 => check::<txn::RollbackRequest>(body),
        6 => check::<txn::CheckTxnStatusRequest>(body),
        7 => check::<txn::CheckSecondaryLocksRequest>(body),
        8 => check::<txn::ResolveLockRequest>(body),
        9 => check::<txn::ScanLockRequest>(body),
        10 => check::<txn::GetRequest>(body),
        11 => check::<txn::ScanRequest>(body),
        12 => check::<crate::coprocessor::Request>(body),
        13 => check::<crate::coprocessor::Response>(body),
        14 => check::<delegate::DelegateRequest>(body),
        _ => check::<delegate::DelegateResponse>(body),
    }
}

/// Seeds for `server_request`: one real message of each kind, behind its selector byte.
pub fn server_request_seeds() -> Vec<(String, Vec<u8>)> {
    use crate::{delegate, region, txn};
    let with = |sel: u8, m: Vec<u8>| {
        let mut v = vec![sel];
        v.extend_from_slice(&m);
        v
    };
    let mutation = txn::Mutation {
        op: txn::Op::Put as i32,
        key: b"t\x80\x00\x00\x00\x00\x00\x00\x01_r\x80\x00\x00\x00\x00\x00\x00\x07".to_vec(),
        value: b"\x80\x00\x02\x00\x00\x00\x01\x02\x05\x00hello".to_vec(),
    };
    let msgs: Vec<(&str, u8, Vec<u8>)> = vec![
        ("tso", 0, region::TsoRequest { count: 3 }.encode_to_vec()),
        (
            "split",
            1,
            region::SplitRequest {
                region_id: 7,
                split_key: b"t\x80".to_vec(),
            }
            .encode_to_vec(),
        ),
        (
            "raw_load",
            2,
            region::RawLoadRequest {
                pairs: vec![region::KvPair {
                    key: b"k".to_vec(),
                    value: b"v".to_vec(),
                }],
            }
            .encode_to_vec(),
        ),
        (
            "prewrite",
            3,
            txn::PrewriteRequest {
                mutations: vec![mutation],
                primary: b"k".to_vec(),
                start_ts: 100,
                lock_ttl_ms: 3000,
                txn_size: 1,
                use_async_commit: true,
                secondaries: vec![b"k2".to_vec()],
                try_one_pc: true,
            }
            .encode_to_vec(),
        ),
        (
            "commit",
            4,
            txn::CommitRequest {
                keys: vec![b"k".to_vec()],
                start_ts: 100,
                commit_ts: 101,
            }
            .encode_to_vec(),
        ),
        (
            "rollback",
            5,
            txn::RollbackRequest {
                keys: vec![b"k".to_vec()],
                start_ts: 100,
            }
            .encode_to_vec(),
        ),
        (
            "check_txn_status",
            6,
            txn::CheckTxnStatusRequest {
                primary: b"k".to_vec(),
                lock_ts: 100,
                current_ts: 200,
                rollback_if_not_exist: true,
                caller_start_ts: 150,
            }
            .encode_to_vec(),
        ),
        (
            "check_secondary_locks",
            7,
            txn::CheckSecondaryLocksRequest {
                keys: vec![b"k2".to_vec()],
                start_ts: 100,
            }
            .encode_to_vec(),
        ),
        (
            "resolve_lock",
            8,
            txn::ResolveLockRequest {
                start_ts: 100,
                commit_ts: 101,
                keys: vec![],
                start: b"a".to_vec(),
                end: b"z".to_vec(),
            }
            .encode_to_vec(),
        ),
        (
            "scan_lock",
            9,
            txn::ScanLockRequest {
                start: vec![],
                end: vec![],
                max_ts: 300,
                limit: 10,
            }
            .encode_to_vec(),
        ),
        (
            "get",
            10,
            txn::GetRequest {
                key: b"k".to_vec(),
                start_ts: 300,
                bypass_locks: vec![100],
            }
            .encode_to_vec(),
        ),
        (
            "scan",
            11,
            txn::ScanRequest {
                start: b"a".to_vec(),
                end: b"z".to_vec(),
                limit: 5,
                start_ts: 300,
                reverse: true,
            }
            .encode_to_vec(),
        ),
        (
            "cop_request",
            12,
            crate::coprocessor::Request {
                context: Some(crate::coprocessor::Context {
                    region_id: 7,
                    region_ver: 2,
                    keyspace_id: 0,
                    deadline_ms: 1,
                }),
                tp: crate::coprocessor::REQ_TYPE_DAG,
                data: vec![0x0a, 0x02, 0x08, 0x01],
                start_ts: 300,
                ranges: vec![crate::coprocessor::KeyRange::new(
                    b"a".to_vec(),
                    b"z".to_vec(),
                )],
                is_cache_enabled: true,
                cache_if_match_version: 9,
                paging_size: 128,
            }
            .encode_to_vec(),
        ),
        (
            "cop_response",
            13,
            crate::coprocessor::Response {
                data: vec![1, 2, 3],
                can_be_cached: true,
                cache_last_version: 9,
                range: Some(crate::coprocessor::KeyRange::new(
                    b"a".to_vec(),
                    b"m".to_vec(),
                )),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "delegate_request",
            14,
            delegate::DelegateRequest {
                request: Some(crate::coprocessor::Request {
                    tp: crate::coprocessor::REQ_TYPE_DAG,
                    start_ts: 300,
                    ranges: vec![crate::coprocessor::KeyRange::new(
                        b"a".to_vec(),
                        b"z".to_vec(),
                    )],
                    ..Default::default()
                }),
                worker_zone: "b".into(),
            }
            .encode_to_vec(),
        ),
        (
            "delegate_response",
            15,
            delegate::DelegateResponse {
                memtable_data: bytes::Bytes::from_static(b"\x01rows"),
                changeset: bytes::Bytes::from_static(b"\x08\x01"),
                data_version: 9,
                newer_versions_seen: true,
                server_zone: "a".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
    ];
    msgs.into_iter()
        .map(|(name, sel, m)| (name.to_string(), with(sel, m)))
        .collect()
}
