//! The `tlsperf` binary: everything lives in the library; see `tlsperf --help`.

// mimalloc: the server's per-connection allocations (rustls, hyper, tokio) cost
// noticeably less than with glibc's malloc (bench/serve.sh). The counting wrapper gives
// `tlsperf crypto` its bytes per operation; it only counts while a measurement asks.
#[global_allocator]
static GLOBAL: tlsperf::crypto::alloc::Counting<mimalloc::MiMalloc> =
    tlsperf::crypto::alloc::Counting::new(mimalloc::MiMalloc);

fn main() -> std::process::ExitCode {
    tlsperf::cli::main()
}
