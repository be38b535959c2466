//! CLI conventions shared by every command: help, version, usage errors, completions.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use common::tlsperf;

#[test]
fn help_and_version_exit_0() {
    let run = tlsperf(["--help"]);
    assert_eq!(run.code, 0);
    for cmd in [
        "pki",
        "compare",
        "completions",
        "--json",
        "--color",
        "--quiet",
        "--verbose",
    ] {
        assert!(
            run.stdout.contains(cmd),
            "--help lacks {cmd}:\n{}",
            run.stdout
        );
    }
    let run = tlsperf(["--version"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.starts_with("tlsperf "), "{}", run.stdout);
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["--no-such-flag"],
        vec!["no-such-command"],
        vec!["pki"],
        vec!["compare", "only-one-file"],
        vec!["--color", "sometimes", "completions", "bash"],
        vec!["-q", "-v", "completions", "bash"],
    ] {
        let run = tlsperf(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(!run.stderr.is_empty(), "{args:?}: says why");
        assert!(run.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = tlsperf(["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains("tlsperf"), "{shell}");
        assert!(run.stdout.contains("compare"), "{shell}");
    }
    let run = tlsperf(["completions", "tcsh"]);
    assert_eq!(run.code, 2);
}

#[test]
fn bash_completion_script_is_valid_bash() {
    let run = tlsperf(["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("tlsperf.bash");
    std::fs::write(&script, &run.stdout).unwrap();
    match std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
    {
        Ok(s) => assert!(s.success(), "bash -n rejects the completion script"),
        Err(_) => eprintln!("SKIPPED: bash not found; not checking the completion script's syntax"),
    }
}

/// A writer tests can read back: what a command printed, in this process.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Runs a command line in this process: (outcome, stdout, stderr).
fn in_process(args: &[&str]) -> (Result<(), tlsperf::cli::CliError>, String, String) {
    use clap::Parser;
    let cli =
        tlsperf::cli::Cli::try_parse_from(std::iter::once("tlsperf").chain(args.iter().copied()))
            .unwrap();
    let (out, err) = (Captured::default(), Captured::default());
    let r = tlsperf::cli::run_to(cli, Box::new(out.clone()), Box::new(err.clone()));
    (r, out.text(), err.text())
}

#[test]
fn commands_run_in_process_with_their_output_captured() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.txt");
    let b = dir.path().join("b.txt");
    std::fs::write(&a, "10\n11\n12\n13\n14\n").unwrap();
    std::fs::write(&b, "20\n21\n22\n23\n24\n").unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());

    let (r, stdout, stderr) = in_process(&["compare", a, b]);
    assert!(r.is_ok(), "{:?}", r.err().map(|e| e.error));
    assert!(stdout.contains("Welch"), "{stdout}");
    assert!(stderr.is_empty(), "{stderr}");

    let (r, stdout, _) = in_process(&["--json", "compare", a, b]);
    assert!(r.is_ok());
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(v["schema"].as_str().is_some(), "{stdout}");

    // Bad input: the error's class, nothing printed.
    let missing = dir.path().join("missing.txt");
    let (r, stdout, _) = in_process(&["compare", a, missing.to_str().unwrap()]);
    let e = r.unwrap_err();
    assert_eq!(e.class, tlsperf::ErrorClass::Input, "{:#}", e.error);
    assert!(stdout.is_empty(), "{stdout}");
}

#[test]
fn man_writes_one_page_per_command_that_man_renders() {
    let dir = tempfile::tempdir().unwrap();
    // DIR is created when missing, parents too.
    let pages = dir.path().join("share/man/man1");
    let run = tlsperf(["man", pages.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for name in [
        "tlsperf.1",
        "tlsperf-load.1",
        "tlsperf-handshake.1",
        "tlsperf-pki-init.1",
    ] {
        assert!(pages.join(name).is_file(), "{name} not written");
    }
    let load = pages.join("tlsperf-load.1");
    let roff = std::fs::read_to_string(&load).unwrap();
    for flag in ["rate", "duration", "connections"] {
        assert!(
            roff.contains(&format!("\\-\\-{flag}")),
            "no --{flag}:\n{roff}"
        );
    }
    // No temporary file left behind.
    for entry in std::fs::read_dir(&pages).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(name.ends_with(".1"), "stray file {name}");
    }
    // Rendered as a reader sees it: by man, else by groff, else the roff above is all.
    let render = |program: &str, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .arg(&load)
            .env("LC_ALL", "C")
            .env("MANWIDTH", "100")
            .env("MANPAGER", "cat")
            .output()
            .ok()
    };
    let rendered = match render("man", &["-l"]) {
        Some(o) => Some(o),
        None => render("groff", &["-man", "-Tascii"]),
    };
    match rendered {
        Some(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains("--rate"), "{text}");
            assert!(text.contains("tlsperf-load"), "{text}");
        }
        None => eprintln!("SKIPPED: neither man nor groff is installed; checked the roff only"),
    }

    // A DIR that is a file: bad input, nothing written.
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let run = tlsperf(["man", file.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not a directory"), "{}", run.stderr);
    assert!(!run.stderr.contains("Os {"), "Debug text: {}", run.stderr);
    // One that cannot be created (under a file): bad input too, said plainly.
    let under = file.join("man1");
    let run = tlsperf(["man", under.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot create directory"),
        "{}",
        run.stderr
    );
}
