//! CLI conventions shared by every command: help, version, usage errors, completions.

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
