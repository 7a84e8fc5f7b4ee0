//! `stratus-pd [--config path]`: one placement-driver instance (see `pd::config` for every key
//! and `pd::launch` for the exit codes).

fn main() -> std::process::ExitCode {
    pd::launch::main(std::env::args().skip(1))
}
