//! `stratus-server --config server.toml`: a storage server (see `server::config` for every key
//! and `server::launch` for the exit codes).

fn main() -> std::process::ExitCode {
    server::launch::main(std::env::args().skip(1))
}
