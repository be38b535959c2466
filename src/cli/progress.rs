//! Progress on stderr while a command runs: one bar (hidden with `--json` or `-q`) and one
//! ticker that redraws it from the engine's counters.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Output;

/// A bar of `len` steps drawn with `template` (indicatif's syntax) on stderr; hidden with
/// `--json` or `-q`.
pub fn bar(out: &Output, len: u64, template: &str) -> ProgressBar {
    if out.json() || out.quiet() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

/// Calls `update` on the bar every 100 ms until dropped. Must be made inside a tokio
/// runtime.
pub struct Ticker(tokio::task::JoinHandle<()>);

impl Ticker {
    /// Starts ticking `bar`.
    pub fn start(bar: &ProgressBar, update: impl Fn(&ProgressBar) + Send + 'static) -> Ticker {
        let bar = bar.clone();
        Ticker(tokio::spawn(async move {
            loop {
                update(&bar);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }))
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.abort();
    }
}
