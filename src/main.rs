//! The `tlsperf` binary: everything lives in the library; see `tlsperf --help`.

fn main() -> std::process::ExitCode {
    tlsperf::cli::main()
}
