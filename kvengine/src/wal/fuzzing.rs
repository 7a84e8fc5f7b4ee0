//! The entry point shared by the `wal_record` fuzz target and the corpus replay test.

use crate::wal::frame::{FrameLimits, FramesEnd, decode_frame};
use crate::wal::segment_codec::{
    RECORD_LIMITS, SEGMENT_HEADER_LEN, decode_segment, encode_record, encode_segment_header,
};

/// Decodes `data` as a segment file. Must return normally for every input; the asserts state
/// what every accepted input satisfies:
///
/// * re-encoding the header and the valid records gives back exactly the valid prefix (one
///   encoding per content, so replay after truncation sees the same bytes);
/// * the valid prefix alone decodes cleanly to the same records (truncating a torn tail loses
///   nothing else);
/// * corruption names a later offset where a valid record really starts;
/// * a record's payload that decodes as a write batch (what replay does with it) holds the ops
///   that, appended to a new batch, give back the payload byte for byte.
pub fn fuzz_check(data: &[u8]) {
    let Ok(segment) = decode_segment(data) else {
        return;
    };
    let valid_len = segment.valid_len(data.len()) as usize;
    assert!(
        (SEGMENT_HEADER_LEN..=data.len()).contains(&valid_len),
        "valid prefix out of bounds"
    );
    let mut encoded = encode_segment_header(segment.segment_seq).to_vec();
    for record in &segment.records {
        encode_record(
            record.shard_id,
            record.sequence,
            record.payload,
            &mut encoded,
        );
    }
    assert!(
        encoded == data[..valid_len],
        "re-encoding the valid records changed the bytes"
    );
    let prefix = decode_segment(&data[..valid_len]).expect("the valid prefix keeps its header");
    assert!(
        prefix.end == FramesEnd::Clean,
        "the valid prefix does not end cleanly"
    );
    assert!(
        prefix.records == segment.records,
        "the valid prefix decodes to other records"
    );
    check_resync_point(data, &segment.end, RECORD_LIMITS);
    for record in &segment.records {
        crate::write_batch::fuzz_check(record.payload);
    }
}

/// For a segment whose frames end in corruption: the valid frame that proves it (rather than
/// a torn tail) comes after the damage and really decodes there. Shared by both logs' fuzz
/// checks, since both read frames the same way.
pub(crate) fn check_resync_point(data: &[u8], end: &FramesEnd, limits: FrameLimits) {
    if let FramesEnd::Corrupt {
        offset, next_valid, ..
    } = *end
    {
        assert!(
            next_valid > offset,
            "the valid frame is not after the damage"
        );
        assert!(
            decode_frame(data, next_valid as usize, limits).is_ok(),
            "no valid frame where corruption says one starts"
        );
    }
}
