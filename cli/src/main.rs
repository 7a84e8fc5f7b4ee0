//! `stratus`: the Stratus command line. See the `cli` crate docs for the commands, the formats
//! and the cluster file.

use std::fmt::Display;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::output_format::Format;
use cli::sql_command::{self, SqlCommandError};
use cli::state_dir;
use cli::up_command::{self, UpOptions};

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
    /// With -e, runs one statement. Without it and with stdin a terminal, an interactive
    /// prompt: statements end at `;`, `exit`, `quit` or Ctrl-D leave, history is kept in the
    /// state dir. Without -e and stdin not a terminal, reads statements from stdin: a statement
    /// ends at a line whose last non-blank character is `;`; the first failing statement stops
    /// the run.
    ///
    /// Statements without a result set print `OK, N row(s) affected`; warnings go to stderr as
    /// `Warning: ...`; errors go to stderr as `Error: ...` with exit code 1 (usage errors: 2).
    #[command(after_help = CLUSTER_FILE_HELP)]
    Sql {
        /// The statement to run (otherwise statements are read from stdin or the prompt).
        #[arg(short = 'e', long = "execute", value_name = "SQL")]
        execute: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// The cluster file (TOML client config); default: $STRATUS_CLUSTER, else the one
        /// `stratus up` wrote.
        #[arg(long, value_name = "FILE")]
        cluster: Option<PathBuf>,
    },
    /// Create the sample table if it is missing and load rows into it.
    ///
    /// Columns: id BIGINT PRIMARY KEY, k INT, grp INT, v DOUBLE, s VARCHAR(16). Row i has
    /// id = i - N/2, k = i % 1000, grp = i % 16, v = (i % 10007) / 10, s = 's{i % 97}'.
    #[command(after_help = CLUSTER_FILE_HELP)]
    Load {
        /// The table to load.
        #[arg(long)]
        table: String,
        /// How many rows.
        #[arg(long)]
        rows: u64,
        /// Rows per transaction.
        #[arg(long, default_value_t = cli::load_command::DEFAULT_BATCH,
              value_parser = clap::value_parser!(usize))]
        batch: usize,
        /// The cluster file; default: $STRATUS_CLUSTER, else the one `stratus up` wrote.
        #[arg(long, value_name = "FILE")]
        cluster: Option<PathBuf>,
    },
    /// Start a local cluster (a server and two workers in each of zones a, b and c, a whole
    /// replica of every region in each zone) in the foreground.
    ///
    /// Prints the nodes and writes the cluster file to the state dir ($STRATUS_HOME, else
    /// ~/.stratus), where `stratus sql` and `stratus load` find it. Ctrl-C or SIGTERM stops
    /// every node and removes the cluster file.
    Up {
        /// Where the nodes keep their data and logs (default: <state dir>/data).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// An S3 endpoint for the object store (credentials from the AWS_* variables);
        /// default: a local directory under the data dir.
        #[arg(long, value_name = "ENDPOINT")]
        s3: Option<String>,
        /// The S3 bucket.
        #[arg(long, value_name = "BUCKET", default_value = "stratus")]
        s3_bucket: String,
        /// server-a listens on P, server-b on P+1, the workers on P+2..=P+5, server-c on P+6,
        /// the placement driver on P+7, the zone-c workers on P+8 and P+9; 0 = free ports.
        #[arg(long, value_name = "P", default_value_t = up_command::DEFAULT_BASE_PORT)]
        base_port: u16,
        /// etcd client URLs (comma-separated) for the placement driver's metadata; default:
        /// its embedded store under the data dir (nothing to install).
        #[arg(long, value_name = "URLS", value_delimiter = ',')]
        etcd: Vec<String>,
        /// The port of the SQL endpoint (MySQL protocol) on 127.0.0.1; default 4000, or a
        /// free port when --base-port is 0.
        #[arg(long, value_name = "PORT")]
        sql_port: Option<u16>,
        /// Mutual TLS on every connection between nodes and clients: a throwaway CA under
        /// <data dir>/tls signs a certificate per node role and an admin one for the cluster
        /// file's clients (`stratus sql`, `stratus load`).
        #[arg(long)]
        tls: bool,
        /// A file whose first line is the SQL user root's password on a fresh cluster
        /// (refused when every user may read it); default: a random password, printed once.
        #[arg(long, value_name = "FILE")]
        root_password_file: Option<PathBuf>,
    },
    /// Serve SQL over the MySQL protocol (any MySQL client or driver) in the foreground.
    ///
    /// Queries are planned and run by DataFusion with filters, projections and limits pushed
    /// into the coprocessor of each region; each connection has its own session (variables,
    /// warnings). Clients log in as the cluster's SQL users (mysql_native_password); a fresh
    /// cluster gets a root user first.
    #[command(name = "sql-server", after_help = CLUSTER_FILE_HELP)]
    SqlServer {
        /// The cluster file (TOML client config); default: $STRATUS_CLUSTER, else the one
        /// `stratus up` wrote.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The address to listen on.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4000")]
        listen: String,
        /// Serve the endpoint's metrics (`GET /metrics`) on this address, as TiDB's status
        /// port; default: not served.
        #[arg(long, value_name = "ADDR")]
        status_listen: Option<String>,
        /// Connections served at once; the next waits in the kernel's accept queue (MySQL's
        /// `max_connections`).
        #[arg(long, value_name = "N", default_value_t = 151)]
        max_connections: usize,
        /// Silence allowed before a connection has logged in (MySQL's `connect_timeout`).
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        connect_timeout: types::ReadableDuration,
        /// Silence allowed between statements (MySQL's `wait_timeout`).
        #[arg(long, value_name = "DURATION", default_value = "8h")]
        wait_timeout: types::ReadableDuration,
        /// Failed logins from one address within --failed-login-window before it is refused
        /// at connect (error 1129) until the window ends.
        #[arg(long, value_name = "N", default_value_t = 10)]
        max_failed_logins: u32,
        /// The window of --max-failed-logins, counted from an address's first failure.
        #[arg(long, value_name = "DURATION", default_value = "60s")]
        failed_login_window: types::ReadableDuration,
        /// The endpoint's TLS certificate chain (PEM), offered to clients that ask for TLS
        /// (MySQL's ssl-cert); with --ssl-key.
        #[arg(long, value_name = "FILE")]
        ssl_cert: Option<PathBuf>,
        /// The key of --ssl-cert (PEM; refused when every user may read it).
        #[arg(long, value_name = "FILE")]
        ssl_key: Option<PathBuf>,
        /// Refuse a client that logs in without TLS (error 3159, MySQL's
        /// require_secure_transport).
        #[arg(long)]
        require_secure_transport: bool,
        /// A file whose first line is the SQL user root's password on a fresh cluster
        /// (refused when every user may read it); default: a random password, printed once.
        #[arg(long, value_name = "FILE")]
        root_password_file: Option<PathBuf>,
    },
    /// The guided tour: a local cluster, the sample table, and what runs where and why.
    Demo {
        /// Rows of the sample table.
        #[arg(long)]
        rows: Option<u64>,
    },
    /// The end-to-end SQL benchmark on a local cluster.
    Bench {
        /// Rows of the sample table.
        #[arg(long)]
        rows: Option<u64>,
        /// Repeats of each query per configuration.
        #[arg(long)]
        runs: Option<u32>,
        /// Also write the markdown report to this file.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Instead: zone-local reads per node-selection policy, with a whole replica per
        /// zone and with one replica per region (cross-zone bytes against bytes scanned).
        #[arg(long)]
        zones: bool,
    },
    /// Run a storage server in the foreground: exactly `stratus-server` (same arguments,
    /// output and exit codes).
    #[command(disable_help_flag = true)]
    Server {
        /// Passed to the server: `--config FILE`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a worker in the foreground: exactly `stratus-worker` (same arguments, output and
    /// exit codes).
    #[command(disable_help_flag = true)]
    Worker {
        /// Passed to the worker: `--config FILE`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Show the cluster as the placement driver knows it: servers, workers, regions, the
    /// placement-driver members, or a fresh timestamp (like pd-ctl).
    #[command(after_help = CLUSTER_FILE_HELP)]
    Ctl {
        /// What to show (or `server`, to drain a server or take it back; `rules`, to set or
        /// delete a placement rule).
        #[arg(value_enum)]
        target: cli::ctl_command::CtlTarget,
        /// For `server`: `drain ID` or `up ID`. For `rules`: nothing (a listing),
        /// `set ID ZONES [table:N | START END]` (a whole replica of the range in each of the
        /// comma-separated zones) or `delete ID`.
        words: Vec<String>,
        /// Placement-driver URLs (comma-separated); default: the cluster file's pd-endpoints.
        #[arg(long, value_name = "URLS", value_delimiter = ',')]
        pd: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// The cluster file, when --pd is not given.
        #[arg(long, value_name = "FILE")]
        cluster: Option<PathBuf>,
    },
    /// Run a placement-driver instance in the foreground: exactly `stratus-pd` (same
    /// arguments, output and exit codes).
    #[command(disable_help_flag = true)]
    Pd {
        /// Passed to the placement driver: `--config FILE`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

const CLUSTER_FILE_HELP: &str = "\
Without --cluster, the cluster file is $STRATUS_CLUSTER, else the one `stratus up` wrote
(<state dir>/cluster.toml; the state dir is $STRATUS_HOME, else ~/.stratus).

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
        } => sql(execute, format, cluster),
        Command::Load {
            table,
            rows,
            batch,
            cluster,
        } => {
            let cluster = match state_dir::find_cluster_file(cluster.as_deref()) {
                Ok(path) => path,
                Err(e) => return fail(e),
            };
            let mut out = std::io::stdout().lock();
            exit(cli::load_command::run(
                &cluster, &table, rows, batch, &mut out,
            ))
        }
        Command::Up {
            data_dir,
            s3,
            s3_bucket,
            base_port,
            etcd,
            sql_port,
            tls,
            root_password_file,
        } => {
            let mut out = std::io::stdout();
            let sql_port = sql_port.unwrap_or(if base_port == 0 {
                0
            } else {
                cli::sql_server::DEFAULT_SQL_PORT
            });
            exit(up_command::run(
                UpOptions {
                    data_dir,
                    s3,
                    s3_bucket,
                    base_port,
                    etcd,
                    sql_port,
                    tls,
                    root_password_file,
                },
                &mut out,
            ))
        }
        Command::Demo { rows } => {
            let mut opts = cli::demo::DemoOptions::default();
            opts.rows = rows.unwrap_or(opts.rows);
            exit(cli::demo::run(opts))
        }
        Command::Bench {
            rows,
            runs,
            zones: true,
            ..
        } => {
            let mut out = std::io::stdout().lock();
            let mut log = std::io::stderr();
            let rows = rows.unwrap_or(200_000);
            exit(cli::zone_bench::run_to(
                rows,
                runs.unwrap_or(5),
                &mut out,
                &mut log,
            ))
        }
        Command::Bench {
            rows, runs, output, ..
        } => {
            let mut opts = cli::bench::BenchOptions::default();
            opts.rows = rows.unwrap_or(opts.rows);
            opts.runs = runs.unwrap_or(opts.runs);
            opts.output = output;
            exit(cli::bench::run(opts))
        }
        Command::SqlServer {
            config,
            listen,
            status_listen,
            max_connections,
            connect_timeout,
            wait_timeout,
            max_failed_logins,
            failed_login_window,
            ssl_cert,
            ssl_key,
            require_secure_transport,
            root_password_file,
        } => {
            let ssl = cli::sql_server::SslOptions {
                cert: ssl_cert,
                key: ssl_key,
                require_secure_transport,
            };
            let limits = sqlfront::mysql::MysqlLimits {
                max_connections,
                connect_timeout: connect_timeout.duration(),
                wait_timeout: wait_timeout.duration(),
                max_failed_logins,
                failed_login_window: failed_login_window.duration(),
            };
            if let Err(e) = limits.validate() {
                return fail(e);
            }
            let cluster = match state_dir::find_cluster_file(config.as_deref()) {
                Ok(path) => path,
                Err(e) => return fail(e),
            };
            let mut out = std::io::stdout();
            exit(cli::sql_server::run(
                &cluster,
                &listen,
                status_listen.as_deref(),
                limits,
                &ssl,
                root_password_file.as_deref(),
                &mut out,
            ))
        }
        Command::Server { args } => server::launch::main(args.into_iter()),
        Command::Worker { args } => worker::launch::main(args.into_iter()),
        Command::Pd { args } => pd::launch::main(args.into_iter()),
        Command::Ctl {
            target,
            words,
            pd,
            format,
            cluster,
        } => ctl(target, &words, pd, format, cluster),
    }
}

fn sql(execute: Option<String>, format: Format, cluster: Option<PathBuf>) -> ExitCode {
    let cluster = match state_dir::find_cluster_file(cluster.as_deref()) {
        Ok(path) => path,
        Err(e) => return fail(SqlCommandError::from(e)),
    };
    let statements = match execute {
        Some(sql) => vec![sql],
        None if std::io::stdin().is_terminal() => {
            let history = state_dir::state_dir()
                .ok()
                .map(|d| state_dir::history_file_in(&d));
            return exit(cli::sql_prompt::run(&cluster, format, history.as_deref()));
        }
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
    exit(sql_command::run(
        &cluster,
        &statements,
        format,
        &mut out,
        &mut err,
    ))
}

fn ctl(
    target: cli::ctl_command::CtlTarget,
    words: &[String],
    pd: Vec<String>,
    format: Format,
    cluster: Option<PathBuf>,
) -> ExitCode {
    let (endpoints, security) = if pd.is_empty() {
        let loaded = state_dir::find_cluster_file(cluster.as_deref())
            .map_err(|e| e.to_string())
            .and_then(|path| cli::cluster_file::load(&path).map_err(|e| e.to_string()));
        match loaded {
            Ok(cfg) => (cfg.pd_endpoints, cfg.security),
            Err(e) => return fail(e),
        }
    } else {
        (pd, node::tls::SecurityConfig::default())
    };
    match cli::ctl_command::run(&endpoints, &security, target, words, format) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn exit<E: Display>(result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(e: impl Display) -> ExitCode {
    eprintln!("Error: {e}");
    ExitCode::FAILURE
}
