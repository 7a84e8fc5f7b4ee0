//! `stratus`: the Stratus command line. See the `cli` crate docs for the formats and the
//! cluster file.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::output_format::Format;
use cli::sql_command::{self, SqlCommandError};

#[derive(Debug, Parser)]
#[command(name = "stratus", version, about = "The Stratus command line")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run SQL against a cluster.
    ///
    /// With -e, runs one statement. Without it, reads statements from stdin: a statement ends
    /// at a line whose last non-blank character is `;`; the first failing statement stops the
    /// run. There is no interactive prompt or history yet.
    ///
    /// Statements without a result set print `OK, N row(s) affected`; warnings go to stderr as
    /// `Warning: ...`; errors go to stderr as `Error: ...` with exit code 1 (usage errors: 2).
    #[command(after_help = CLUSTER_FILE_HELP)]
    Sql {
        /// The statement to run (otherwise statements are read from stdin).
        #[arg(short = 'e', long = "execute", value_name = "SQL")]
        execute: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// The cluster file (TOML client config).
        #[arg(long, value_name = "FILE")]
        cluster: PathBuf,
    },
}

const CLUSTER_FILE_HELP: &str = "\
The cluster file is a TOML client config (kebab-case keys); `servers` is required:

    servers = [\"http://127.0.0.1:7000\"]
    workers = [\"http://127.0.0.1:7100\"]   # optional
    labels = { zone = \"a\" }               # optional: this client's zone";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sql {
            execute,
            format,
            cluster,
        } => {
            let statements = match execute {
                Some(sql) => vec![sql],
                None => {
                    let mut input = String::new();
                    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
                        return fail(SqlCommandError::Stdin(e));
                    }
                    cli::statement_input::split(&input)
                }
            };
            let mut out = std::io::stdout().lock();
            let mut err = std::io::stderr();
            match sql_command::run(&cluster, &statements, format, &mut out, &mut err) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
    }
}

fn fail(e: SqlCommandError) -> ExitCode {
    eprintln!("Error: {e}");
    ExitCode::FAILURE
}
