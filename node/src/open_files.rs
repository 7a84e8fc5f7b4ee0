//! The process's limit on open files, against what a node's config lets it hold open.
//!
//! A node holds descriptors for its connections (`[http] max-connections`) and, on a worker,
//! for the tables it keeps open (`worker.table-cache-size`). Past the soft `RLIMIT_NOFILE`
//! every `open` and `accept` fails with EMFILE: rebuilds fail as store errors and clients see
//! refused connections, far from the cause. So a node compares its config with the limit at
//! start and says so in its log, as TiKV checks `max-open-files` against the limit before it
//! starts. It only warns: the config is valid, the limit is the machine's.

/// Descriptors a node needs besides its connections and kept files: its listener, logs, the
/// store's directory handles, the runtime's own (epoll, eventfds), etc.
pub const BASE_FILES: u64 = 64;

/// The soft limit on open files of this process (`Max open files` in `/proc/self/limits`);
/// `None` when it cannot be read or is unlimited.
pub fn soft_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_soft_limit(&text)
}

/// The soft limit from the text of `/proc/<pid>/limits`: the first number after `Max open
/// files`; `None` for `unlimited` or a text without the line.
pub fn parse_soft_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The warning to log when `needed` descriptors (what the config allows, plus [`BASE_FILES`])
/// exceed the soft `limit`; `None` when they fit or the limit is unknown.
pub fn warning(limit: Option<u64>, needed: u64, what: &str) -> Option<String> {
    let limit = limit?;
    let needed = needed.saturating_add(BASE_FILES);
    (needed > limit).then(|| {
        format!(
            "the open-file limit is {limit}, below the {needed} descriptors {what} may hold \
             ({BASE_FILES} of them the process's own); raise it (ulimit -n, LimitNOFILE=) or \
             lower those settings, or opens and accepts past it fail with EMFILE"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max cpu time              unlimited            unlimited            seconds   \n\
        Max open files            1024                 524288               files     \n\
        Max locked memory         8388608              8388608              bytes     \n";

    #[test]
    fn the_soft_limit_is_read_from_the_open_files_line() {
        assert_eq!(parse_soft_limit(LIMITS), Some(1024));
        assert_eq!(
            parse_soft_limit(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(parse_soft_limit("Max cpu time 10 10 seconds\n"), None);
        assert_eq!(parse_soft_limit(""), None);
    }

    #[test]
    fn this_process_has_a_readable_limit() {
        assert!(soft_limit().is_some_and(|l| l > 0));
    }

    #[test]
    fn a_config_past_the_limit_is_named_with_both_numbers() {
        let w = warning(
            Some(1024),
            1024 + 256,
            "1024 connections and 256 kept tables",
        )
        .unwrap();
        assert!(w.contains("limit is 1024"), "{w}");
        assert!(w.contains("the 1344 descriptors"), "{w}");
        assert!(w.contains("1024 connections and 256 kept tables"), "{w}");
        assert_eq!(warning(Some(20_000), 1024 + 256, "x"), None);
        assert_eq!(warning(None, u64::MAX, "x"), None);
        assert!(warning(Some(100), 37, "x").is_some(), "37 + 64 > 100");
        assert_eq!(warning(Some(101), 37, "x"), None);
    }
}
