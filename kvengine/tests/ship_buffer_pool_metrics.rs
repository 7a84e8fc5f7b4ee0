//! The shipping-buffer pool's metrics report what the process's pool holds, and its bound is
//! the one set. In a process of its own: the pool is process-wide.

use changeset::ship_buffers::{MIN_POOLED, SHIP_BUFFERS};

/// The value of `name` (with `state`, when given) in the default registry.
fn gauge(name: &str, state: Option<&str>) -> i64 {
    let families = prometheus::default_registry().gather();
    let family = families
        .iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("{name} is not registered"));
    let metric = family
        .get_metric()
        .iter()
        .find(|m| {
            state.is_none_or(|s| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == "state" && l.value() == s)
            })
        })
        .unwrap_or_else(|| panic!("{name} has no series state={state:?}"));
    metric.get_gauge().get_value() as i64
}

#[test]
fn the_pool_metrics_follow_idle_and_lent_buffers_and_the_bound() {
    kvengine::metrics::set_ship_buffer_pool_size(64 << 20);
    assert_eq!(
        gauge("stratus_ship_buffer_pool_limit_bytes", None),
        64 << 20
    );
    assert_eq!(gauge("stratus_ship_buffer_pool_bytes", Some("idle")), 0);

    // A new buffer handed back is kept idle.
    let fresh = SHIP_BUFFERS.take(4 * MIN_POOLED);
    let capacity = fresh.capacity() as i64;
    drop(fresh);
    assert_eq!(
        gauge("stratus_ship_buffer_pool_bytes", Some("idle")),
        capacity
    );
    assert_eq!(gauge("stratus_ship_buffer_pool_bytes", Some("lent")), 0);

    // Taken again, it is lent.
    let lent = SHIP_BUFFERS.take(MIN_POOLED);
    assert_eq!(lent.capacity() as i64, capacity);
    assert_eq!(gauge("stratus_ship_buffer_pool_bytes", Some("idle")), 0);
    assert_eq!(
        gauge("stratus_ship_buffer_pool_bytes", Some("lent")),
        capacity
    );

    // A bound of 0 frees it on its return, and the gauges say so.
    kvengine::metrics::set_ship_buffer_pool_size(0);
    drop(lent);
    assert_eq!(gauge("stratus_ship_buffer_pool_limit_bytes", None), 0);
    assert_eq!(gauge("stratus_ship_buffer_pool_bytes", Some("idle")), 0);
    assert_eq!(gauge("stratus_ship_buffer_pool_bytes", Some("lent")), 0);
}
