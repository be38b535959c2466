//! The examples that end every command's `--help`: [`block`] formats them, and a test
//! parses every example line of the whole command tree with the real parser, so an
//! example with a flag that no longer exists fails the build's tests; tests/help_examples.rs
//! runs every one of them against local servers.

/// The `Examples:` paragraph of a help: one command line per entry, indented.
pub fn block(lines: &[&str]) -> String {
    let mut text = String::from("Examples:");
    for line in lines {
        text.push_str("\n  ");
        text.push_str(line);
    }
    text
}

/// `after` (a paragraph of its own, such as exit codes), then the examples.
pub fn after(paragraph: &str, lines: &[&str]) -> String {
    format!("{paragraph}\n\n{}", block(lines))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::super::Cli;

    /// Splits a shell command line into words: single and double quotes group, and the
    /// line ends at a redirection or a pipe (what follows is the shell's, not tlsperf's).
    fn words(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut in_word = false;
        let mut quote: Option<char> = None;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    in_word = true;
                }
                (None, c) if c.is_whitespace() => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                (None, '>' | '|' | '<' | ';' | '&') if !in_word => return words,
                (None, c) => {
                    word.push(c);
                    in_word = true;
                }
            }
        }
        assert!(quote.is_none(), "unbalanced quote in {line}");
        if in_word {
            words.push(word);
        }
        words
    }

    /// Every command's examples: (the command's path, e.g. `tlsperf pki init`, its
    /// example lines).
    fn examples() -> Vec<(String, Vec<String>)> {
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, Vec<String>)>) {
            let help = cmd
                .get_after_long_help()
                .or(cmd.get_after_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            let lines = help
                .split_once("Examples:")
                .map(|(_, tail)| {
                    tail.lines()
                        .skip(1)
                        .take_while(|l| l.starts_with("  "))
                        .map(|l| l.trim().to_string())
                        .collect()
                })
                .unwrap_or_default();
            out.push((path.to_string(), lines));
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), "tlsperf", &mut out);
        out
    }

    #[test]
    fn every_command_ends_its_help_with_examples_that_parse() {
        let all = examples();
        assert!(all.len() > 20, "{all:?}");
        for (path, lines) in &all {
            assert!(
                (1..=3).contains(&lines.len()),
                "`{path} --help` should end with one to three examples, has {lines:?}"
            );
            assert!(
                lines.iter().any(|l| l.starts_with(path.as_str())),
                "`{path} --help`: no example of {path} itself in {lines:?}"
            );
            for line in lines {
                assert!(line.starts_with("tlsperf"), "{path}: {line}");
                assert!(line.len() <= 96, "{path}: too long to read: {line}");
                let words = words(line);
                if let Err(e) = Cli::try_parse_from(&words) {
                    panic!("`{path} --help` example does not parse: {line}\n{e}");
                }
            }
        }
    }

    #[test]
    fn example_lines_split_as_a_shell_does() {
        assert_eq!(
            words("tlsperf link rtt=60ms -- curl -w '%{time_connect}\\n' https://x/"),
            [
                "tlsperf",
                "link",
                "rtt=60ms",
                "--",
                "curl",
                "-w",
                "%{time_connect}\\n",
                "https://x/"
            ]
        );
        assert_eq!(
            words("tlsperf completions bash > tlsperf.bash"),
            ["tlsperf", "completions", "bash"]
        );
        // A wrong flag is caught.
        assert!(Cli::try_parse_from(words("tlsperf load https://x/ --no-such-flag")).is_err());
    }
}
