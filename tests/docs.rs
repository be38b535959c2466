//! The examples of README.md and docs/guide/*.md, run.
//!
//! A block fenced ```` ```console ```` holds commands, each a line `$ COMMAND` (a line
//! ending in `\` continues on the next), followed by the output it prints (stdout and
//! stderr together, as a terminal shows them). Each page runs in a temporary directory of
//! its own, its blocks in order, sharing that directory (a file one block writes, the next
//! reads), with `tlsperf` on `PATH` as this build's binary. A command is run with `bash -c`
//! there, with a limit of [`LIMIT`]; a command ending in `&` runs in the background until
//! the page ends, and the harness waits until the file of its `--write-ca` exists (else
//! until its `--listen` address accepts connections) and its `--metrics` address does.
//!
//! The output is compared after normalising both sides ([`normalise`]): every number —
//! integers, decimals, `10,000`, and hex words such as a key id — becomes `N` (units
//! glued to a number stay: `12.5ms` is `Nms`), runs of spaces collapse to one, lines are
//! trimmed, trailing blank lines dropped. A line `...` in the expected output matches any
//! number of lines, none included. The command must exit 0, or the code of a last
//! expected line `[exit status: N]` (`[exit status: 3 or 4]`: either).
//!
//! Other fences: ```` ```console,no-run ```` is a recorded run shown, not run (minutes
//! long, another machine, Kubernetes); ```` ```console,root ```` runs only as root with
//! `/dev/net/tun` present (live capture, `--link`), and is skipped with a printed reason
//! otherwise. Pages run one after the other in one test: the examples' server listens on
//! the fixed port 127.0.0.1:8443 (other tests use ephemeral ports).
//!
//! `TLSPERF_DOCS_PAGE=handshake` runs only the pages whose file name contains that text.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a command (or a background server's start) may take.
const LIMIT: Duration = Duration::from_secs(60);

/// One fenced block to run.
struct Block {
    /// The 1-based line of its opening fence.
    line: usize,
    /// Runs only as root with /dev/net/tun.
    root: bool,
    commands: Vec<Step>,
}

/// One `$` command and the output it should print.
struct Step {
    /// The 1-based line of its `$`.
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The console blocks of a Markdown page, other fences skipped.
fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = markdown.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let info = info.trim();
        let run = match info {
            "console" => Some(false),
            "console,root" => Some(true),
            _ => None,
        };
        // Collect the block's lines up to its closing fence.
        let mut body = Vec::new();
        for (j, l) in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            body.push((j + 1, l));
        }
        let Some(root) = run else { continue };
        let mut commands: Vec<Step> = Vec::new();
        let mut k = 0;
        while k < body.len() {
            let (n, l) = body[k];
            if let Some(cmd) = l.strip_prefix("$ ") {
                let mut command = cmd.to_string();
                while command.ends_with('\\') && k + 1 < body.len() {
                    k += 1;
                    command.push('\n');
                    command.push_str(body[k].1);
                }
                commands.push(Step {
                    line: n,
                    command,
                    expected: Vec::new(),
                });
            } else {
                let step = commands
                    .last_mut()
                    .unwrap_or_else(|| panic!("line {n}: output before any `$` command"));
                step.expected.push(l.to_string());
            }
            k += 1;
        }
        out.push(Block {
            line: i + 1,
            root,
            commands,
        });
    }
    out
}

/// Every number becomes `N`, spaces collapse, lines are trimmed, trailing blank lines go.
fn normalise(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| {
            let words = numbers(l);
            words.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// Replaces numbers in one line by `N`: a word (a run of ASCII letters and digits) made of
/// hex digits only, with at least one digit or six long, is one `N` (an id, `7a86b3`); otherwise
/// each run of digits is; then `N.N`, `N,N` (a decimal, thousands), a sign and an
/// exponent (`-N`, `+N`: `3.4e-09` is `N`) fold into one `N`, and a duration's unit,
/// chosen by its size, becomes `s` (`N ms`, `N µs` → `N s`).
fn numbers(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_alphanumeric() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let word = &chars[start..i];
        let hex = word.iter().all(|c| c.is_ascii_hexdigit());
        // Six hex letters with no digit are an id too (1 in 360 of them): `CA fbdcea`.
        if hex && (word.len() == 6 || word.iter().any(|c| c.is_ascii_digit())) {
            out.push('N');
            continue;
        }
        let mut in_digits = false;
        for &c in word {
            if c.is_ascii_digit() {
                if !in_digits {
                    out.push('N');
                }
                in_digits = true;
            } else {
                out.push(c);
                in_digits = false;
            }
        }
    }
    // N.N (decimals), N,N (thousands), signs and exponents, repeatedly: 1,234.5 and
    // -3.4e-09 are one number each.
    let mut prev = String::new();
    while prev != out {
        prev = out.clone();
        out = out
            .replace("N.N", "N")
            .replace("N,N", "N")
            .replace("-N", "N")
            .replace("+N", "N")
            .replace("NN", "N");
    }
    // A duration's unit follows its size (2.5 ms, 950 µs): one unit for all.
    out.replace("N ns", "N s")
        .replace("N µs", "N s")
        .replace("N ms", "N s")
}

/// Whether `actual` matches `expected`, whose `...` lines match any number of lines.
fn matches(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => {
            (0..=actual.len()).any(|skip| matches(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| a == first && matches(rest, more)),
    }
}

/// A page's working directory and the background processes it started: all killed (their
/// process groups) and removed however the page ends, a failed assertion included.
struct Page {
    dir: tempfile::TempDir,
    background: Vec<(Child, PathBuf)>,
}

impl Drop for Page {
    fn drop(&mut self) {
        for (child, _) in &mut self.background {
            stop(child);
        }
    }
}

/// Stops a child started in a process group of its own, and everything in that group.
fn stop(child: &mut Child) {
    let group = child.id() as libc::pid_t;
    // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
    unsafe { libc::kill(-group, libc::SIGTERM) };
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            // The leader is gone; anything it left in the group goes too.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
}

/// A directory holding `tlsperf`, this build's binary, to put first on `PATH`.
fn bin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(common::bin(), dir.path().join("tlsperf")).unwrap();
    dir
}

/// `bash -c COMMAND` in `dir`, in a process group of its own.
fn bash(command: &str, dir: &Path, path: &str) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("TLSPERF_LOG")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .stdin(Stdio::null())
        .process_group(0);
    cmd
}

/// The value following `flag` in a command line, if any.
fn flag_value<'a>(command: &'a str, flag: &str) -> Option<&'a str> {
    let mut words = command.split_whitespace();
    while let Some(w) = words.next() {
        if w == flag {
            return words.next();
        }
        if let Some(v) = w.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
            return Some(v);
        }
    }
    None
}

/// Starts a background command and waits until it serves what it says it serves.
fn start_background(page: &mut Page, step: &Step, path: &str, label: &str) {
    let command = step.command.trim_end().trim_end_matches('&').trim_end();
    let log = page
        .dir
        .path()
        .join(format!(".background-{}.log", step.line));
    let file = std::fs::File::create(&log).unwrap();
    // `bash -c` with one simple command execs it: the server is the process itself, not
    // a shell above it (a `pgrep -f` for its command line finds it alone).
    let child = bash(command, page.dir.path(), path)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    page.background.push((child, log.clone()));
    // `tlsperf serve` writes --write-ca once it listens: then the file says it is ready,
    // and a probe connection (which the server would count as a failed handshake) is not
    // made to --listen.
    let ca = flag_value(command, "--write-ca").map(|f| page.dir.path().join(f));
    let flags: &[&str] = if ca.is_some() {
        &["--metrics"]
    } else {
        &["--listen", "--metrics"]
    };
    let addrs: Vec<&str> = flags
        .iter()
        .filter_map(|f| flag_value(command, f))
        .collect();
    let until = Instant::now() + LIMIT;
    loop {
        let listening = addrs.iter().all(|a| {
            use std::net::ToSocketAddrs;
            a.to_socket_addrs()
                .ok()
                .and_then(|mut s| s.next())
                .is_some_and(|s| {
                    std::net::TcpStream::connect_timeout(&s, Duration::from_millis(200)).is_ok()
                })
        });
        let written = ca.as_ref().is_none_or(|f| f.exists());
        if listening && written {
            return;
        }
        let (child, _) = page.background.last_mut().unwrap();
        let exited = child.try_wait().unwrap();
        if exited.is_some() || Instant::now() > until {
            panic!(
                "{label}:{}: `{command}` did not start ({}): {}",
                step.line,
                match exited {
                    Some(status) => format!("it exited, {status}"),
                    None => format!("not serving after {LIMIT:?}"),
                },
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a foreground command; returns its exit code and output.
fn run(step: &Step, dir: &Path, path: &str, label: &str) -> (i32, String) {
    // stderr into stdout, as a terminal shows them.
    let mut child = bash(&format!("exec 2>&1\n{}", step.command), dir, path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stdout.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let until = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            stop(&mut child);
            panic!(
                "{label}:{}: `{}` still running after {LIMIT:?}",
                step.line, step.command
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Anything the command left in its group (a pipe's writer) goes now, so the reader ends.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    let output = reader.join().unwrap();
    (status.code().unwrap_or(-1), output)
}

/// Whether this process can run the `console,root` blocks.
fn can_run_root_blocks() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Path::new("/dev/net/tun").exists()
}

/// Runs every console block of one page; returns the number of commands run.
fn run_page(file: &Path, path: &str) -> usize {
    let label = file
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(file)
        .display()
        .to_string();
    let markdown = std::fs::read_to_string(file).unwrap();
    let mut page = Page {
        dir: tempfile::tempdir().unwrap(),
        background: Vec::new(),
    };
    let mut ran = 0;
    for block in blocks(&markdown) {
        if block.root && !can_run_root_blocks() {
            eprintln!(
                "SKIPPED: {label}:{}: needs root and /dev/net/tun",
                block.line
            );
            continue;
        }
        for step in &block.commands {
            if step.command.trim_end().ends_with('&') {
                start_background(&mut page, step, path, &label);
                continue;
            }
            let started = Instant::now();
            let (code, output) = run(step, page.dir.path(), path, &label);
            ran += 1;
            let mut expected = step.expected.clone();
            let mut want_codes = vec![0];
            if let Some(last) = expected.iter().rposition(|l| !l.trim().is_empty())
                && let Some(n) = expected[last]
                    .trim()
                    .strip_prefix("[exit status: ")
                    .and_then(|s| s.strip_suffix(']'))
            {
                want_codes = n.split(" or ").map(|c| c.parse().unwrap()).collect();
                expected.truncate(last);
            }
            let want = normalise(&expected.join("\n"));
            let got = normalise(&output);
            assert!(
                want_codes.contains(&code) && matches(&want, &got),
                "{label}:{}: `{}` (exit {code}, expected {want_codes:?}, {:.1} s) printed:\n{output}\n\
                 --- normalised, expected:\n{}\n--- normalised, got:\n{}\n",
                step.line,
                step.command,
                started.elapsed().as_secs_f64(),
                want.join("\n"),
                got.join("\n"),
            );
        }
    }
    ran
}

/// The pages whose examples run: README.md, then docs/guide/*.md in name order.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root.join("docs/guide"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    let mut all = vec![root.join("README.md")];
    all.extend(guide);
    all
}

#[test]
fn the_examples_of_the_readme_and_the_guide_print_what_they_show() {
    let bin = bin_dir();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let only = std::env::var("TLSPERF_DOCS_PAGE").ok();
    let mut total = 0;
    for file in pages() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let started = Instant::now();
        let n = run_page(&file, &path);
        eprintln!(
            "{}: {n} commands in {:.1} s",
            file.display(),
            started.elapsed().as_secs_f64()
        );
        total += n;
    }
    assert!(
        only.is_some() || total > 0,
        "no console block ran: the pages lost their examples"
    );
}

#[test]
fn normalising_makes_numbers_one_token_and_dots_match_lines() {
    assert_eq!(
        normalise(
            "  dns    0.341   1,234.5 ms  12ms  CA 7a86b3 fbdcea  x25519 p = 3.4e-09 -0.004\n\n"
        ),
        vec!["dns N N s Nms CA N N xN p = N N"]
    );
    let want = normalise("a 1\n...\nz 2");
    assert!(matches(&want, &normalise("a 3\nb\nc\nz 4")));
    assert!(matches(&want, &normalise("a 3\nz 4")));
    assert!(!matches(&want, &normalise("a 3\nb\ny 4")));
    assert!(!matches(&normalise("one word"), &normalise("one other")));
}

#[test]
fn console_blocks_are_parsed_with_their_fences() {
    let md = "text\n```console\n$ tlsperf a \\\n  --b\nout 1\n\n$ tlsperf c &\n```\n\
              ```console,no-run\n$ tlsperf skipped\n```\n```sh\ntlsperf x\n```\n\
              ```console,root\n$ tlsperf d\n[exit status: 4]\n```\n";
    let b = blocks(md);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].line, 2);
    assert_eq!(b[0].commands.len(), 2);
    assert_eq!(b[0].commands[0].command, "tlsperf a \\\n  --b");
    assert_eq!(b[0].commands[0].expected, vec!["out 1", ""]);
    assert_eq!(b[0].commands[1].command, "tlsperf c &");
    assert!(b[1].root);
    assert_eq!(b[1].commands[0].expected, vec!["[exit status: 4]"]);
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation other than `-`
/// and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside fenced blocks).
fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The relative links of a Markdown text, `[text](target)`, outside fenced blocks.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let Some(end) = tail.find(')') else { break };
            let target = &tail[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push((i + 1, target.to_string()));
            }
            rest = &tail[end..];
        }
    }
    out
}

#[test]
fn the_links_of_the_readme_and_the_guide_lead_somewhere() {
    let mut broken = Vec::new();
    for file in pages() {
        let text = std::fs::read_to_string(&file).unwrap();
        let dir = file.parent().unwrap();
        for (line, target) in links(&text) {
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let to = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path)
            };
            if !to.exists() {
                broken.push(format!("{}:{line}: {target}: no such file", file.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let heads = anchors(&std::fs::read_to_string(&to).unwrap_or_default());
                if !heads.iter().any(|h| h == anchor) {
                    broken.push(format!(
                        "{}:{line}: {target}: no such heading",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
