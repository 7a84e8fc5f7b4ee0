//! The `stratus` command line.
//!
//! This slice has one command, `stratus sql`, which runs SQL against a cluster through the
//! client library's SQL front ([`client::sql::Engine`]):
//!
//! ```text
//! stratus sql --cluster cluster.toml -e "SELECT id, name FROM t WHERE id < 10"
//! stratus sql --cluster cluster.toml --format csv -e "SELECT * FROM t"
//! stratus sql --cluster cluster.toml < statements.sql
//! ```
//!
//! * `-e SQL` runs one statement. Without `-e`, statements are read from stdin: a statement
//!   ends at a line whose last non-blank character is `;` (text after the last such line is one
//!   more statement). The first failing statement stops the run. There is no interactive
//!   prompt or history yet.
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
//! The cluster file (`--cluster FILE`) is a TOML [`client::ClientConfig`] (kebab-case keys,
//! every key optional except that `servers` must not be empty), for example:
//!
//! ```toml
//! servers = ["http://127.0.0.1:7000"]
//! workers = ["http://127.0.0.1:7100"]
//! labels = { zone = "a" }
//! ```

pub mod cluster_file;
pub mod csv_format;
pub mod json_format;
pub mod output_format;
pub mod sql_command;
pub mod statement_input;
pub mod table_format;
