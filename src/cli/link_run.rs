//! `tlsperf link SPEC -- PROGRAM [ARGS…]`: any program behind an emulated link, as
//! mahimahi's `mm-delay 50 -- cmd`. The program runs in the link's network namespace
//! (the client's side); the servers stay on this machine, reached at its IPv4 addresses
//! (127.0.0.1 included). Its exit code is passed through, the link's counters are
//! printed on stderr at its end, and everything the link made goes on every exit path.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::time::Duration;

use clap::Args;

use super::{CliError, Output};
use crate::error::ErrorClass;
use crate::link::{Link, LinkSpec};

/// Arguments of `tlsperf link`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "The program runs in a network namespace of its own whose only way out \
is the emulated link; its far end is this machine's network stack. It reaches servers at \
this machine's IPv4 addresses: 127.0.0.1 (the namespace's own loopback is down, so \
127.0.0.0/8 goes over the link to the host's) or any other IPv4 address the host holds; \
`localhost` works where it resolves to 127.0.0.1. Nothing else is reachable (no IPv6, no \
other machine; names resolve only through a resolver on this machine). Servers must listen \
on the host (e.g. `tlsperf serve --listen 127.0.0.1:8443`), not behind the link.\n\n\
The counters go to stderr when the program ends (with --json, as one JSON document on \
stderr: stdout is the program's).\n\n\
Exit code: the program's own (128 + N when signal N ended it); 2 when the link spec is bad, \
the program cannot be run, or root and /dev/net/tun are missing; 1 when the link cannot be \
set up. Ctrl-C reaches the program (as the terminal's foreground group); a SIGTERM, SIGINT \
or SIGHUP sent to tlsperf alone is passed on to it, and tlsperf waits for it to end. If \
tlsperf itself is killed, the program gets SIGKILL.\n\n\
Examples:\n  \
tlsperf link rtt=60ms -- curl -sko /dev/null -w '%{time_connect}\\n' https://127.0.0.1:8443/\n  \
tlsperf link lte,loss=1% -- tlsperf handshake https://127.0.0.1:8443/ --cacert ca.pem",
    after_help = super::examples::block(&[
        "tlsperf link rtt=60ms -- curl -sko /dev/null -w '%{time_connect}\\n' https://127.0.0.1:8443/",
        "tlsperf link lte,loss=1% -- tlsperf handshake https://127.0.0.1:8443/ --cacert ca.pem",
    ])
)]
pub struct LinkRunArgs {
    /// The link: rtt=DUR[,jitter=DUR][,reorder=on|off][,down=RATE][,up=RATE][,loss=PCT][,queue=SIZE][,cc=NAME]
    /// or a profile (with fields overriding it: lte,loss=1%), as --link takes it (see
    /// `tlsperf handshake --help`).
    #[arg(value_name = "SPEC", value_parser = parse_spec)]
    spec: LinkSpec,
    /// The program to run behind the link, and its arguments (after `--`).
    #[arg(
        value_name = "PROGRAM",
        last = true,
        required = true,
        num_args = 1..,
        allow_hyphen_values = true
    )]
    command: Vec<OsString>,
}

fn parse_spec(s: &str) -> Result<LinkSpec, String> {
    s.parse::<LinkSpec>().map_err(|e| e.to_string())
}

/// The signals passed on to the program (and that must not end tlsperf while it runs).
const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The JSON printed on stderr at the end with `--json`.
#[derive(serde::Serialize)]
struct LinkRunReport<'a> {
    /// The program and its arguments.
    command: Vec<String>,
    /// Its exit code (128 + N for signal N).
    exit_code: i32,
    /// What the link carried.
    link_counters: &'a crate::link::LinkCounters,
    /// What makes the figures doubtful, in words. Here and not as `warning:` lines
    /// after the document, which would leave stderr no longer one JSON document.
    warnings: Vec<String>,
}

/// Runs `tlsperf link`.
pub fn exec(args: LinkRunArgs, out: &Output) -> Result<(), CliError> {
    let name = args.command[0].to_string_lossy().into_owned();
    // Before the link's threads start, so that they inherit it: these signals are taken
    // by `sigtimedwait` below, never by their default action (which would end tlsperf
    // before the program and leave it without its link).
    let set = signal_set();
    // SAFETY: changes this thread's signal mask with a valid set.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let result = run(&args, &name, &set, out);
    // SAFETY: as above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    result
}

fn run(args: &LinkRunArgs, name: &str, set: &libc::sigset_t, out: &Output) -> Result<(), CliError> {
    let link = Link::start(&args.spec)?;
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    let parent = std::process::id() as libc::pid_t;
    let child_set = *set;
    // SAFETY: the closure runs in the child between fork and exec and only makes
    // async-signal-safe calls (sigprocmask, prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            // The program starts with the signals tlsperf blocked for itself unblocked.
            libc::sigprocmask(libc::SIG_UNBLOCK, &child_set, std::ptr::null_mut());
            // The program dies with tlsperf: a SIGKILLed tlsperf cannot remove the link,
            // and the program would hold its namespace.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::_exit(129);
            }
            Ok(())
        });
    }
    // The child is made on this thread, in the client's namespace, and stays there.
    let child = {
        let _inside = link.enter()?;
        cmd.spawn()
    };
    let mut child = child.map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such program (not found in PATH)".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        CliError::input(format!("cannot run '{name}' behind the link: {why}"))
    })?;
    let pid = child.id() as libc::pid_t;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        // SAFETY: siginfo_t is plain data; all zeroes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: Duration::from_millis(10).as_nanos() as libc::c_long,
        };
        // SAFETY: a valid set, a live siginfo and timespec.
        let sig = unsafe { libc::sigtimedwait(set, &mut info, &ts) };
        // A signal sent to tlsperf alone (kill, a supervisor) goes on to the program; one
        // from the terminal (si_code > 0: the kernel's) reached the whole foreground
        // group, the program included, already.
        if sig > 0 && info.si_code <= 0 {
            // SAFETY: signals our own child.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    };
    let counters = link.counters();
    drop(link);
    let code = match status {
        Some(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        None => 1,
    };
    if out.json() {
        let report = LinkRunReport {
            command: args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            exit_code: code,
            link_counters: &counters,
            warnings: counters.warnings(),
        };
        if let Ok(text) = serde_json::to_string_pretty(&report) {
            out.note(text);
        }
    } else {
        if !out.quiet() {
            out.note(format!("\ntlsperf: {name} exited with {code}"));
            out.note(counters.text().trim_end());
        }
        for w in counters.warnings() {
            out.warn(w);
        }
    }
    match code {
        0 => Ok(()),
        c => Err(CliError {
            class: ErrorClass::Program(u8::try_from(c).unwrap_or(1)),
            error: anyhow::anyhow!("{name} exited with {c}"),
        }),
    }
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset and sigaddset initialise and fill it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}
