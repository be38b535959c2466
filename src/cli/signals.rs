//! Stopping a run from the keyboard or a supervisor: the first SIGINT or SIGTERM asks the
//! run to stop and keep what it measured; a second one exits at once (130), for a run
//! that is stuck.

/// Resolves at the first SIGINT or SIGTERM, and from then on exits the process (status
/// 130) at the next one. Call inside a tokio runtime.
pub async fn first_then_exit() {
    one().await;
    tokio::spawn(async {
        one().await;
        anstream::eprintln!("interrupted again: exiting now");
        std::process::exit(130);
    });
}

/// The next SIGINT or SIGTERM (SIGINT only where SIGTERM cannot be watched).
async fn one() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
