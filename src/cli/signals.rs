//! Stopping a run from the keyboard or a supervisor: the first SIGINT or SIGTERM asks the
//! run to stop and keep what it measured; a second one exits at once (130), for a run
//! that is stuck.

use std::future::Future;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGINT and SIGTERM, registered when made (so that no signal between the start of a
/// run and the first poll is lost to the default action).
struct Signals {
    int: Option<Signal>,
    term: Option<Signal>,
}

impl Signals {
    /// Must be called inside a tokio runtime.
    fn install() -> Signals {
        Signals {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
        }
    }

    /// The next SIGINT or SIGTERM (never, if neither could be registered).
    async fn next(&mut self) {
        async fn recv(s: &mut Option<Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = recv(&mut self.int) => {}
            () = recv(&mut self.term) => {}
        }
    }
}

/// Registers SIGINT and SIGTERM now (call inside a tokio runtime) and returns a future
/// that resolves at the first of them; from then on the next one exits the process
/// (status 130).
pub fn first_then_exit() -> impl Future<Output = ()> + Send + 'static {
    first_then_exit_after(|| {})
}

/// As [`first_then_exit`], running `cleanup` (removing what the run made) before the
/// exit at the second signal: `exit` runs no destructors.
pub fn first_then_exit_after(
    cleanup: impl FnOnce() + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let mut signals = Signals::install();
    async move {
        signals.next().await;
        tokio::spawn(async move {
            signals.next().await;
            anstream::eprintln!("interrupted again: exiting now");
            cleanup();
            std::process::exit(130);
        });
    }
}
