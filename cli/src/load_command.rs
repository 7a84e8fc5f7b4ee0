//! `stratus load --table T --rows N [--batch B]`: creates the sample table if it is missing
//! and loads N rows into it ([`crate::sample_table`]), with a progress bar on stderr (rows,
//! rows/s, ETA; drawn only when stderr is a terminal) and a final line on stdout:
//! `loaded N rows into T in S s (R rows/s)`.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::sample_table::{self, LoadError};
use crate::sql_command::{SqlCommandError, connect};

/// The default rows per transaction.
pub const DEFAULT_BATCH: usize = 5000;

#[derive(Debug, thiserror::Error)]
pub enum LoadCommandError {
    #[error(transparent)]
    Connect(#[from] SqlCommandError),
    #[error("load into {table} failed after {done} rows: {source}")]
    Load {
        table: String,
        done: u64,
        source: LoadError,
    },
    #[error("cannot write output: {0}")]
    Output(std::io::Error),
}

/// Loads `rows` sample rows into `table` of the cluster of `cluster_file`; the final line
/// goes to `out`.
pub fn run(
    cluster_file: &Path,
    table: &str,
    rows: u64,
    batch: usize,
    out: &mut dyn Write,
) -> Result<(), LoadCommandError> {
    let (rt, client) = connect(cluster_file)?;
    let failed = |done: u64| {
        let table = table.to_string();
        move |source: LoadError| LoadCommandError::Load {
            table,
            done,
            source,
        }
    };
    let schema = rt
        .block_on(sample_table::ensure_table(client, table))
        .map_err(failed(0))?;
    let bar = ProgressBar::new(rows);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {human_pos}/{human_len} rows  {per_sec:>14}  ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let started = Instant::now();
    let mut done = 0;
    let loaded = rt.block_on(sample_table::load(client, &schema, rows, batch, &mut |n| {
        done = n;
        bar.set_position(n);
    }));
    bar.finish_and_clear();
    loaded.map_err(failed(done))?;
    let secs = started.elapsed().as_secs_f64();
    writeln!(
        out,
        "loaded {rows} rows into {table} in {secs:.1} s ({:.0} rows/s)",
        rows as f64 / secs.max(1e-9)
    )
    .map_err(LoadCommandError::Output)
}
