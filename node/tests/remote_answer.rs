//! The stamp a result computed on a shipped snapshot gets before it goes back to a client
//! (`node::remote_answer`): the origin's data version, never a hit, and cacheability lost
//! only when the origin says so.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use node::remote_answer::stamp_remote_answer;
use wire::coprocessor::Response;
use wire::placement::Location;

#[test]
fn a_remote_answer_is_stamped_with_the_origin_version_and_loses_cacheability_only_when_told() {
    let computed = Response {
        can_be_cached: true,
        is_cache_hit: true,
        cache_last_version: 0,
        ..Response::default()
    };
    let mut clean = computed.clone();
    assert!(!stamp_remote_answer(
        &mut clean,
        42,
        false,
        Location::Remote,
        "w:1",
        "blocks_size"
    ));
    assert!(clean.can_be_cached && !clean.is_cache_hit);
    assert_eq!(clean.cache_last_version, 42);
    let d = clean.exec_details.expect("exec details");
    assert_eq!(
        (
            d.location.as_str(),
            d.remote_addr.as_str(),
            d.reason.as_str()
        ),
        ("remote", "w:1", "blocks_size")
    );
    let mut locked = computed.clone();
    assert!(stamp_remote_answer(
        &mut locked,
        42,
        true,
        Location::Delegate,
        "s:1",
        "x"
    ));
    assert!(!locked.can_be_cached);
    let mut already = Response::default();
    assert!(
        !stamp_remote_answer(&mut already, 42, true, Location::Delegate, "s:1", "x"),
        "an uncacheable result is not counted as vetoed"
    );
}
