//! `stratus-worker [--config path]`: a stateless remote coprocessor (see `worker::config` for
//! every key and `worker::launch` for the exit codes).

fn main() -> std::process::ExitCode {
    worker::launch::main(std::env::args().skip(1))
}
