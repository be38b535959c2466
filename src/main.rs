//! The `tlsperf` binary: everything lives in the library; see `tlsperf --help`.

// mimalloc: the server's per-connection allocations (rustls, hyper, tokio) cost
// noticeably less than with glibc's malloc (bench/serve.sh).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tlsperf::cli::main()
}
