//! The `stratus` command line: one executable for the whole product.
//!
//! ```text
//! stratus up                                   # a local cluster in the foreground (Ctrl-C stops it)
//! stratus load --table t --rows 200000         # the sample table, with a progress bar
//! stratus sql                                  # interactive prompt
//! stratus sql -e "SELECT grp, COUNT(*) FROM t GROUP BY grp"
//! stratus sql --cluster cluster.toml --format csv < statements.sql
//! stratus demo | stratus bench                 # the guided tour and the SQL benchmark
//! stratus server --config server.toml          # exactly `stratus-server`
//! stratus worker --config worker.toml          # exactly `stratus-worker`
//! ```
//!
//! Modules, in the order a user meets them: [`state_dir`] (where state lives, which cluster
//! `sql` and `load` use), [`local_cluster`] (the nodes of `up`, `demo` and `bench`, run by the
//! `harness` crate's supervisor, as the end-to-end tests run theirs; [`leader_placement`] moves
//! its region leaders where it wants them) and [`up_command`];
//! [`sample_table`] and [`load_command`]; [`sql_command`] with [`statement_input`] (stdin) and
//! [`sql_prompt`] (the terminal), printing through [`output_format`]; [`demo`] and [`bench`](mod@bench), which share [`loaded_cluster`] (a started
//! cluster with the sample table loaded), [`explain_rows`] (where each region ran, from the
//! client's typed EXPLAIN) and [`decision_metrics`] (the servers' offload decision counters);
//! the demo's steps of their own are [`failover_step`] and [`zone_step`].
//!
//! `stratus sql`:
//!
//! * `-e SQL` runs one statement. Without `-e` and with stdin a terminal, an interactive
//!   prompt ([`sql_prompt`]). Without `-e` and stdin not a terminal, statements are read from
//!   stdin: a statement ends at a line whose last non-blank character is `;` (text after the
//!   last such line is one more statement). The first failing statement stops the run.
//! * `--format table` (default): aligned columns under a header, a column of numbers
//!   right-aligned, NULL shown as `NULL`, and a `(N rows)` footer. `--format csv`: RFC 4180 with a header line;
//!   NULL is an empty unquoted field and the empty string is `""`, so the two stay
//!   distinguishable. `--format json`: one JSON array of objects, one object per row with keys
//!   in column order; NULL is `null`, numbers are JSON numbers, strings are JSON strings.
//! * A statement without a result set (CREATE TABLE, INSERT) prints `OK, N row(s) affected`.
//!   Warnings go to stderr as `Warning: ...`.
//! * Exit codes: 0 success, 1 an error (printed on stderr as `Error: ...`, including a cluster
//!   file that is missing, unreadable or invalid), 2 a usage error.
//!
//! The cluster file (`--cluster FILE`, else `$STRATUS_CLUSTER`, else the one `stratus up` wrote in
//! the state dir: see [`state_dir`]) is a TOML [`client::ClientConfig`] (kebab-case keys,
//! every key optional except that `servers` must not be empty), for example:
//!
//! ```toml
//! servers = ["http://127.0.0.1:7000"]
//! workers = ["http://127.0.0.1:7100"]
//! labels = { zone = "a" }
//! ```

pub mod bench;
pub mod cluster_file;
pub mod csv_format;
pub mod ctl_command;
pub mod decision_metrics;
pub mod demo;
pub mod explain_rows;
pub mod failover_step;
pub mod json_format;
pub mod leader_placement;
pub mod load_command;
pub mod loaded_cluster;
pub mod local_cluster;
pub mod output_format;
pub mod sample_table;
pub mod sql_command;
pub mod sql_prompt;
pub mod sql_server;
pub mod state_dir;
pub mod statement_input;
pub mod table_format;
pub mod up_command;
pub mod zone_bench;
pub mod zone_step;
