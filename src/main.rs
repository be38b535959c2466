//! The `tlsperf` binary: everything lives in the library; see `tlsperf --help`.

// mimalloc: the server's per-connection allocations (rustls, hyper, tokio) cost
// noticeably less than with glibc's malloc (bench/serve.sh). The counting wrapper gives
// `tlsperf crypto` its bytes per operation; it only counts while a measurement asks.
#[global_allocator]
static GLOBAL: tlsperf::crypto::alloc::Counting<mimalloc::MiMalloc> =
    tlsperf::crypto::alloc::Counting::new(mimalloc::MiMalloc);

fn main() -> std::process::ExitCode {
    // No transparent huge pages for this process (and the `tlsperf serve` children the lab
    // starts, which inherit it): where the kernel backs every anonymous mapping with
    // them, each fresh 2 MiB that mimalloc touches is zeroed at once. That was 8–10% of
    // `tlsperf load`'s CPU during a run (perf: clear_page_erms), 1% with 4 KiB pages.
    // SAFETY: PR_SET_THP_DISABLE only reads its integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    tlsperf::cli::main()
}
