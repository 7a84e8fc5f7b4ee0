//! raft-rs logs through `slog`; every other line of a Stratus process goes through `tracing`
//! (`node::logging`, filtered by `STRATUS_LOG`). [`TracingDrain`] forwards each slog record
//! as a `tracing` event with target `raft` and the same level, its message followed by its
//! key-values (`region_id=3 term=5`), so raft-rs's lines land in the same stream and can be
//! filtered alone (`STRATUS_LOG=info,raft=warn`).
//!
//! Levels: `Critical` and `Error` are errors, `Warning` warnings, `Info`, `Debug` and `Trace`
//! themselves.

use std::fmt::{self, Write as _};

use slog::{Drain, KV, Level, OwnedKVList, Record, Serializer};

/// The logger to hand raft-rs (`RawNode::new(&config, storage, &logger)`); add per-group
/// values with `logger.new(slog::o!("region_id" => id))`.
pub fn logger() -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!())
}

/// A slog drain that emits `tracing` events (target `raft`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingDrain;

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        let level = tracing_level(record.level());
        if !tracing_enabled(level) {
            return Ok(());
        }
        let mut line = KeyValues(record.msg().to_string());
        // The record's own values first, then the logger's (`region_id`, ...); a value that
        // cannot be rendered is left out rather than losing the line.
        let _ = record.kv().serialize(record, &mut line);
        let _ = values.serialize(record, &mut line);
        let line = line.0;
        match level {
            tracing::Level::ERROR => tracing::error!(target: "raft", "{line}"),
            tracing::Level::WARN => tracing::warn!(target: "raft", "{line}"),
            tracing::Level::INFO => tracing::info!(target: "raft", "{line}"),
            tracing::Level::DEBUG => tracing::debug!(target: "raft", "{line}"),
            _ => tracing::trace!(target: "raft", "{line}"),
        }
        Ok(())
    }
}

/// The `tracing` level of a slog level.
pub fn tracing_level(level: Level) -> tracing::Level {
    match level {
        Level::Critical | Level::Error => tracing::Level::ERROR,
        Level::Warning => tracing::Level::WARN,
        Level::Info => tracing::Level::INFO,
        Level::Debug => tracing::Level::DEBUG,
        Level::Trace => tracing::Level::TRACE,
    }
}

/// Whether a `raft` event at `level` would be recorded: formatting is skipped otherwise
/// (raft-rs logs a line per election and per rejected append, in every group).
fn tracing_enabled(level: tracing::Level) -> bool {
    match level {
        tracing::Level::ERROR => tracing::enabled!(target: "raft", tracing::Level::ERROR),
        tracing::Level::WARN => tracing::enabled!(target: "raft", tracing::Level::WARN),
        tracing::Level::INFO => tracing::enabled!(target: "raft", tracing::Level::INFO),
        tracing::Level::DEBUG => tracing::enabled!(target: "raft", tracing::Level::DEBUG),
        _ => tracing::enabled!(target: "raft", tracing::Level::TRACE),
    }
}

/// Appends ` key=value` for each slog value.
struct KeyValues(String);

impl Serializer for KeyValues {
    fn emit_arguments(&mut self, key: slog::Key, val: &fmt::Arguments<'_>) -> slog::Result {
        write!(self.0, " {key}={val}").map_err(|_| slog::Error::Other)
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Captures what a `tracing` fmt subscriber prints.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn capture(max: tracing::Level, log: impl FnOnce(&slog::Logger)) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(max)
            .with_writer(move || writer.clone())
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || log(&logger()));
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn records_become_raft_events_with_their_values() {
        let text = capture(tracing::Level::TRACE, |log| {
            let log = log.new(slog::o!("region_id" => 7));
            slog::info!(log, "became leader at term {term}", term = 5; "raft_id" => 2);
        });
        assert!(text.contains("INFO"), "{text}");
        assert!(text.contains("raft:"), "{text}");
        assert!(
            text.contains("became leader at term 5 raft_id=2 term=5 region_id=7"),
            "{text}"
        );
    }

    /// Sends one record of `level` through the drain (slog's macros drop `Trace` in debug
    /// builds before any drain sees it; raft-rs may be built otherwise).
    fn emit(level: Level, msg: &str) {
        static LOCATION: slog::RecordLocation = slog::RecordLocation {
            file: "",
            line: 0,
            column: 0,
            function: "",
            module: "",
        };
        let statics = slog::RecordStatic {
            location: &LOCATION,
            level,
            tag: "",
        };
        let values = OwnedKVList::from(slog::o!());
        let _ = TracingDrain.log(
            &Record::new(&statics, &format_args!("{msg}"), slog::BorrowedKV(&())),
            &values,
        );
    }

    #[test]
    fn each_slog_level_maps_to_its_tracing_level() {
        let text = capture(tracing::Level::TRACE, |_| {
            for level in [
                Level::Critical,
                Level::Error,
                Level::Warning,
                Level::Info,
                Level::Debug,
                Level::Trace,
            ] {
                emit(level, level.as_str());
            }
        });
        let lines: Vec<(&str, &str)> = text
            .lines()
            .map(|l| {
                let mut words = l.split_whitespace();
                (words.next().unwrap_or(""), words.last().unwrap_or(""))
            })
            .collect();
        assert_eq!(
            lines,
            [
                ("ERROR", "CRITICAL"),
                ("ERROR", "ERROR"),
                ("WARN", "WARNING"),
                ("INFO", "INFO"),
                ("DEBUG", "DEBUG"),
                ("TRACE", "TRACE")
            ],
            "{text}"
        );
    }

    #[test]
    fn records_below_the_subscribers_level_are_not_emitted() {
        let text = capture(tracing::Level::WARN, |log| {
            slog::info!(log, "hidden");
            slog::warn!(log, "shown");
        });
        assert!(!text.contains("hidden"), "{text}");
        assert!(text.contains("shown"), "{text}");
    }
}
