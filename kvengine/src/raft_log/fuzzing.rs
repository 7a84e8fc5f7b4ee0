//! The entry point shared by the `raft_log_segment` fuzz target and the corpus replay test.

use crate::raft_log::record_codec::{
    RAFT_RECORD_LIMITS, RaftRecord, decode_raft_segment, encode_batch_record,
    encode_checkpoint_record, encode_segment_header,
};
use crate::raft_log::region_log::RegionLogs;
use crate::wal::frame::FramesEnd;
use crate::wal::segment_codec::SEGMENT_HEADER_LEN;

/// Decodes `data` as a Raft log segment and replays it into region logs. Must return normally
/// for every input; the asserts state what every accepted input satisfies:
///
/// * re-encoding the header and the decoded records gives back exactly the valid prefix (one
///   encoding per content, so replay after truncation sees the same bytes);
/// * the valid prefix alone decodes cleanly to the same records;
/// * corruption names a later offset where a valid frame really starts;
/// * applying the records by the replay rules, then reading every region back, stays within
///   what the region says it holds.
pub fn fuzz_check(data: &[u8]) {
    let Ok(segment) = decode_raft_segment(data) else {
        return;
    };
    let valid_len = segment.end.valid_len(data.len()) as usize;
    assert!(
        (SEGMENT_HEADER_LEN..=data.len()).contains(&valid_len),
        "valid prefix out of bounds"
    );
    let mut encoded = encode_segment_header(segment.segment_seq).to_vec();
    for (_, record) in &segment.records {
        let fits = match record {
            RaftRecord::Batch(batch) => encode_batch_record(batch, &mut encoded),
            RaftRecord::Checkpoint(regions) => encode_checkpoint_record(regions, &mut encoded),
        };
        assert!(fits.is_ok(), "a decoded record does not re-encode");
    }
    assert!(
        encoded == data[..valid_len],
        "re-encoding the valid records changed the bytes"
    );
    let prefix =
        decode_raft_segment(&data[..valid_len]).expect("the valid prefix keeps its header");
    assert!(
        prefix.end == FramesEnd::Clean,
        "the valid prefix does not end cleanly"
    );
    assert!(
        prefix.records == segment.records,
        "the valid prefix decodes to other records"
    );
    crate::wal::fuzzing::check_resync_point(data, &segment.end, RAFT_RECORD_LIMITS);
    replay_records(&segment.records);
}

/// Applies the records as replay does (skipping operations that do not fit, to go on), then
/// reads every region back.
fn replay_records(records: &[(u64, RaftRecord)]) {
    let mut logs = RegionLogs::default();
    for (_, record) in records {
        match record {
            RaftRecord::Checkpoint(regions) => logs.apply_checkpoint(regions),
            RaftRecord::Batch(batch) => {
                for op in batch.ops() {
                    let _ = logs.apply(op.region_id, &op.op);
                }
            }
        }
    }
    for region_id in logs.regions() {
        let state = logs.state(region_id).expect("a listed region has a state");
        assert!(
            state.last_index >= state.truncated_index,
            "last index below truncated index"
        );
        assert_eq!(
            logs.term(region_id, state.truncated_index).ok(),
            Some(state.truncated_term),
            "the truncated index does not answer its term"
        );
        let Some(low) = state.truncated_index.checked_add(1) else {
            continue;
        };
        let high = state.last_index.saturating_add(1);
        if let Ok(entries) = logs.entries(region_id, low, high, None) {
            assert_eq!(
                entries.len() as u64,
                high - low,
                "a read of the whole log returned another count"
            );
            for (entry, index) in entries.iter().zip(low..) {
                assert_eq!(entry.index, index, "entries out of order");
                assert_eq!(logs.term(region_id, index).ok(), Some(entry.term));
            }
        }
    }
}
