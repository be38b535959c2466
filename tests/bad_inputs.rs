//! Bad input, command by command: malformed and truncated PEM and DER, a certificate with
//! the wrong key, encrypted and empty keys, directories and a 100 MB file where a small
//! file is expected, a symbolic-link loop, unknown flags and values, refused and wrong
//! hosts, expired and untrusted certificates, a server that hangs up mid-handshake, plain
//! HTTP on the TLS port, invalid URLs, broken ticket-key files, bad JSON for merge and
//! compare. For each: the exit code (2 for input, 1 for run-time failures), a message
//! naming the file, line or host and the cause, no panic, and no output file left behind.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use common::{closed_port, expired_cert, plain_http_server, tlsperf, write};

/// One bad input.
struct Case {
    name: &'static str,
    args: Vec<String>,
    code: i32,
    /// Every one of these appears in stderr.
    says: Vec<String>,
    /// Must not exist afterwards (an output the command was asked to write).
    absent: Option<PathBuf>,
    /// Extra environment variables.
    env: Vec<(&'static str, String)>,
}

fn case(name: &'static str, args: &[&str], code: i32, says: &[&str]) -> Case {
    Case {
        name,
        args: args.iter().map(|s| s.to_string()).collect(),
        code,
        says: says.iter().map(|s| s.to_string()).collect(),
        absent: None,
        env: Vec::new(),
    }
}

fn with_env(mut c: Case, key: &'static str, value: &str) -> Case {
    c.env.push((key, value.to_string()));
    c
}

fn writes(mut c: Case, path: &Path) -> Case {
    c.absent = Some(path.to_path_buf());
    c
}

/// A loopback port that accepts and immediately closes every connection it gets after
/// reading a little (a server that hangs up mid-handshake), for `n` connections.
fn hang_up_server(n: usize) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().take(n).flatten() {
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
        }
    });
    port
}

#[test]
fn every_bad_input_gets_a_clear_error_and_the_right_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = |p: &Path| p.to_str().unwrap().to_string();

    // A good PKI to break.
    let pki = d.join("pki");
    let run = tlsperf(["pki", "init", pki.to_str().unwrap(), "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let good_chain = std::fs::read_to_string(pki.join("server-chain.pem")).unwrap();
    let good_key = s(&pki.join("server.key"));
    let good_chain_path = s(&pki.join("server-chain.pem"));
    let root = s(&pki.join("root.pem"));
    let other = d.join("other");
    assert_eq!(
        tlsperf(["pki", "init", other.to_str().unwrap(), "-q"]).code,
        0
    );
    let other_key = s(&other.join("server.key"));

    // Broken files.
    let garbage_pem = write(
        d,
        "garbage.pem",
        "-----BEGIN CERTIFICATE-----\nthis is not base64 !!!\n-----END CERTIFICATE-----\n",
    );
    // Cut inside the second block (the intermediate).
    let truncated_pem = write(
        d,
        "truncated.pem",
        &good_chain[..good_chain.len() / 2 + 100],
    );
    let der = std::fs::read(pki.join("server.pem")).ok().map(|_| ());
    assert!(der.is_some());
    let truncated_der = d.join("truncated.der");
    std::fs::write(&truncated_der, [0x30, 0x82, 0x05, 0x00, 0x01, 0x02]).unwrap();
    let empty = write(d, "empty.pem", "");
    let no_pem = write(d, "text.pem", "just some text\nno PEM blocks here\n");
    let encrypted_key = write(
        d,
        "encrypted.key",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n",
    );
    let a_dir = d.join("a-directory");
    std::fs::create_dir(&a_dir).unwrap();
    let big = d.join("big.pem");
    {
        let mut f = std::fs::File::create(&big).unwrap();
        let line = [b'A'; 1023];
        for _ in 0..(100 * 1024) {
            f.write_all(&line).unwrap();
            f.write_all(b"\n").unwrap();
        }
    }
    let loop_a = d.join("loop-a.pem");
    let loop_b = d.join("loop-b.pem");
    std::os::unix::fs::symlink(&loop_b, &loop_a).unwrap();
    std::os::unix::fs::symlink(&loop_a, &loop_b).unwrap();
    let missing = s(&d.join("does-not-exist.pem"));
    let bad_json = write(
        d,
        "bad.json",
        "{\n  \"schema\": \"tlsperf-load/1\",\n  \"requests\": oops\n}\n",
    );
    let other_schema = write(d, "other.json", "{\"schema\": \"something-else/3\"}\n");
    // The same documents again as files of their own (`merge` refuses one file twice).
    let bad_copy = write(
        d,
        "bad-copy.json",
        &std::fs::read_to_string(&bad_json).unwrap(),
    );
    let other_copy = write(
        d,
        "other-copy.json",
        &std::fs::read_to_string(&other_schema).unwrap(),
    );
    let bad_ring = write(d, "ring.json", "{\"keys\": 42}\n");
    let (expired_pem, expired_key) = expired_cert(d);
    // A FIFO nobody writes to (opening it blocking would wait forever) and a device that
    // never ends (reading it whole would exhaust memory).
    let fifo = d.join("cert-fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = s(&fifo);
    let zero = "/dev/zero".to_string();
    let good_ring = s(&d.join("good-ring.json"));
    assert_eq!(tlsperf(["tickets", "init", &good_ring, "-q"]).code, 0);
    let open_ring = d.join("open-ring.json");
    std::fs::copy(&good_ring, &open_ring).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&open_ring, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let open_ring = s(&open_ring);
    // OCSP responses: one for another PKI's leaf (pki init --ocsp), and a certificate.
    let ocsp_pki = d.join("ocsp-pki");
    assert_eq!(
        tlsperf(["pki", "init", ocsp_pki.to_str().unwrap(), "--ocsp", "-q"]).code,
        0
    );
    let foreign_ocsp = s(&ocsp_pki.join("ocsp.der"));

    // Servers: ours with the good and the expired certificate, and broken peers.
    let good = common::Serve::start(&["--cert", &good_chain_path, "--key", &good_key]);
    let expired = common::Serve::start(&["--cert", &expired_pem, "--key", &expired_key]);
    let hang_up = hang_up_server(4);
    let plain = plain_http_server(4);
    let closed = closed_port();
    let url = |port: u16| format!("https://localhost:{port}/");

    let out = |name: &str| d.join(name);
    // Accepts connections (the kernel's backlog does) and never says a word.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let cases = vec![
        // pki
        case(
            "pki: unknown key type",
            &["pki", "init", &s(&out("x")), "--key", "dsa-512"],
            2,
            &["dsa-512"],
        ),
        case(
            "pki: a file where the directory goes",
            &["pki", "init", &good_key],
            2,
            &[&good_key],
        ),
        case(
            "pki: bad SAN",
            &["pki", "init", &s(&out("y")), "--san", "not a name!"],
            2,
            &["not a name!"],
        ),
        writes(
            case(
                "pki bundle: zero CAs",
                &["pki", "bundle", "--count", "0", "--out", &s(&out("b.pem"))],
                2,
                &["--count"],
            ),
            &out("b.pem"),
        ),
        case(
            "pki: unknown flag",
            &["pki", "init", &s(&out("z")), "--frobnicate"],
            2,
            &["--frobnicate"],
        ),
        // trust
        case(
            "trust analyze: missing file",
            &["trust", "analyze", &missing],
            2,
            &["does-not-exist.pem"],
        ),
        case(
            "trust analyze: empty file",
            &["trust", "analyze", &empty],
            2,
            &["empty.pem"],
        ),
        case(
            "trust analyze: no PEM block",
            &["trust", "analyze", &no_pem],
            2,
            &["text.pem"],
        ),
        case(
            "trust analyze: garbage base64",
            &["trust", "analyze", &garbage_pem],
            2,
            &["garbage.pem", "line"],
        ),
        case(
            "trust analyze: truncated PEM",
            &["trust", "analyze", &truncated_pem],
            2,
            &["truncated.pem"],
        ),
        case(
            "trust analyze: truncated DER",
            &["trust", "analyze", &s(&truncated_der)],
            2,
            &["truncated.der"],
        ),
        case(
            "trust analyze: 100 MB of junk",
            &["trust", "analyze", &s(&big)],
            2,
            &["big.pem"],
        ),
        case(
            "trust analyze: symlink loop",
            &["trust", "analyze", &s(&loop_a)],
            2,
            &["loop-a.pem"],
        ),
        // A symbolic-link loop (ELOOP) is bad input in every command, as it is above.
        writes(
            case(
                "merge: symlink loop",
                &[
                    "merge",
                    &s(&loop_a),
                    &s(&loop_b),
                    "--out",
                    &s(&out("loop-m.json")),
                ],
                2,
                &["loop-a.pem", "symbolic links"],
            ),
            &out("loop-m.json"),
        ),
        case(
            "compare: symlink loop",
            &["compare", &s(&loop_a), &s(&loop_b)],
            2,
            &["loop-a.pem", "symbolic links"],
        ),
        case(
            "verify: chain is a symlink loop",
            &["verify", "--chain", &s(&loop_a), "--host", "localhost"],
            2,
            &["loop-a.pem"],
        ),
        case(
            "serve: certificate is a symlink loop",
            &[
                "serve",
                "--cert",
                &s(&loop_a),
                "--key",
                &good_key,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["loop-a.pem"],
        ),
        case(
            "tickets show: symlink loop",
            &["tickets", "show", &s(&loop_a)],
            2,
            &["loop-a.pem"],
        ),
        case(
            "observe: capture is a symlink loop",
            &["observe", "--pcap", &s(&loop_a)],
            2,
            &["loop-a.pem"],
        ),
        case(
            "trust load: a directory as the bundle",
            &["trust", "load", "--bundle", &s(&a_dir)],
            2,
            &["a-directory"],
        ),
        writes(
            case(
                "trust trim: unreadable chain",
                &[
                    "trust",
                    "trim",
                    "--keep-for",
                    &missing,
                    "--out",
                    &s(&out("t.pem")),
                    "--source",
                    &root,
                ],
                2,
                &["does-not-exist.pem"],
            ),
            &out("t.pem"),
        ),
        writes(
            case(
                "trust trim: chain of garbage",
                &[
                    "trust",
                    "trim",
                    "--keep-for",
                    &garbage_pem,
                    "--out",
                    &s(&out("t2.pem")),
                    "--source",
                    &root,
                ],
                2,
                &["garbage.pem"],
            ),
            &out("t2.pem"),
        ),
        // verify
        case(
            "verify: chain missing",
            &["verify", "--chain", &missing, "--host", "localhost"],
            2,
            &["does-not-exist.pem"],
        ),
        case(
            "verify: chain truncated",
            &[
                "verify",
                "--chain",
                &truncated_pem,
                "--host",
                "localhost",
                "--roots",
                &root,
            ],
            2,
            &["truncated.pem"],
        ),
        case(
            "verify: bad --at",
            &[
                "verify",
                "--chain",
                &good_chain_path,
                "--host",
                "localhost",
                "--at",
                "yesterday-ish",
            ],
            2,
            &["yesterday-ish"],
        ),
        case(
            "verify: wrong host name is a verdict",
            &[
                "verify",
                "--chain",
                &good_chain_path,
                "--host",
                "wrong.example",
                "--roots",
                &root,
            ],
            1,
            &[
                "is not valid: the certificate is not valid for wrong.example: it is for \
                 localhost, 127.0.0.1",
            ],
        ),
        case(
            "verify: expired at --at, in dates",
            &[
                "verify",
                "--chain",
                &good_chain_path,
                "--host",
                "localhost",
                "--roots",
                &root,
                "--at",
                "2300-01-01T00:00:00Z",
            ],
            1,
            &["expired at 2", "(checked at 2300-01-01T00:00:00Z)"],
        ),
        // serve
        case(
            "serve: certificate file missing",
            &[
                "serve",
                "--cert",
                &missing,
                "--key",
                &good_key,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["does-not-exist.pem"],
        ),
        case(
            "serve: key does not match the certificate",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &other_key,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &[
                &other_key,
                "not the private key of the certificate in",
                &good_chain_path,
            ],
        ),
        case(
            "serve: encrypted key",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &encrypted_key,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["encrypted.key"],
        ),
        case(
            "serve: empty key file",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &empty,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["empty.pem"],
        ),
        case(
            "serve: a directory as the key",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &s(&a_dir),
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["a-directory"],
        ),
        case(
            "serve: invalid ticket-key file",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &good_key,
                "--resumption",
                "tickets",
                "--ticket-keys",
                &bad_ring,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["ring.json"],
        ),
        case(
            "serve: bad listen address",
            &["serve", "--listen", "localhost:notaport"],
            2,
            &["notaport"],
        ),
        case(
            "serve: unknown group",
            &["serve", "--groups", "x448", "--listen", "127.0.0.1:0"],
            2,
            &["x448"],
        ),
        // tickets
        case(
            "tickets show: invalid key ring",
            &["tickets", "show", &bad_ring],
            2,
            &["ring.json"],
        ),
        case(
            "tickets show: bad JSON",
            &["tickets", "show", &bad_json],
            2,
            &["bad.json"],
        ),
        // handshake against bad peers
        case(
            "handshake: invalid URL",
            &["handshake", "ftp://localhost/"],
            2,
            &["ftp"],
        ),
        case(
            "handshake: URL with credentials",
            &["handshake", "https://user:pw@localhost/"],
            2,
            &["user"],
        ),
        case(
            "handshake: closed port",
            &["handshake", &url(closed), "--cacert", &root],
            1,
            &["refused"],
        ),
        case(
            "handshake: a port out of range is not replaced by 443",
            &["handshake", "https://127.0.0.1:65536/", "--cacert", &root],
            2,
            &["invalid URL", "port 65536 is not in 1..=65535"],
        ),
        case(
            "handshake: 0-RTT without resumption",
            &[
                "handshake",
                &good.url(),
                "--cacert",
                &root,
                "--early-data",
                "--resume",
                "off",
            ],
            2,
            &["--early-data needs a session to resume"],
        ),
        case(
            "handshake: 0-RTT over TLS 1.2",
            &[
                "handshake",
                &good.url(),
                "--cacert",
                &root,
                "--early-data",
                "--tls",
                "1.2",
            ],
            2,
            &["--early-data needs TLS 1.3"],
        ),
        case(
            "handshake: an --sni that is no name is blamed on --sni",
            &["handshake", &good.url(), "--cacert", &root, "--sni", "a b"],
            2,
            &["invalid --sni 'a b'"],
        ),
        case(
            "handshake: TLS 1.3 suites with --tls 1.2",
            &[
                "handshake",
                &good.url(),
                "--cacert",
                &root,
                "--tls",
                "1.2",
                "--ciphers",
                "TLS13_AES_128_GCM_SHA256",
            ],
            2,
            &["--ciphers: none of the cipher suites given is for a TLS version allowed"],
        ),
        case(
            "handshake: a certificate given as the client key",
            &[
                "handshake",
                &good.url(),
                "--cacert",
                &root,
                "--cert",
                &good_chain_path,
                "--key",
                &good_chain_path,
            ],
            2,
            &["it holds a certificate, not a private key"],
        ),
        case(
            "handshake: wrong host name",
            &[
                "handshake",
                &format!("https://127.0.0.1:{}/", good.port),
                "--cacert",
                &root,
                "--sni",
                "wrong.example",
            ],
            1,
            &["wrong.example"],
        ),
        case(
            "handshake: untrusted CA",
            &["handshake", &good.url()],
            1,
            &["certificate is not accepted: no trusted root issued its chain"],
        ),
        case(
            "handshake: expired certificate",
            &["handshake", &url(expired.port), "--cacert", &expired_pem],
            1,
            &["expired"],
        ),
        case(
            "handshake: server hangs up mid-handshake",
            &["handshake", &url(hang_up), "--cacert", &root],
            1,
            &["closed"],
        ),
        case(
            "handshake: plain HTTP on the TLS port",
            &["handshake", &url(plain), "--cacert", &root],
            1,
            &["TLS"],
        ),
        case(
            "handshake: roots file is garbage",
            &["handshake", &good.url(), "--roots", &garbage_pem],
            2,
            &["garbage.pem"],
        ),
        case(
            "handshake: client key mismatch",
            &[
                "handshake",
                &good.url(),
                "--cacert",
                &root,
                "--cert",
                &good_chain_path,
                "--key",
                &other_key,
            ],
            2,
            &[&other_key, "not the private key of the certificate in"],
        ),
        case(
            "handshake: --cacert file missing says why",
            &["handshake", &good.url(), "--cacert", &missing],
            2,
            &["does-not-exist.pem", "No such file or directory"],
        ),
        case(
            "trust trim: a silent host times out in words",
            &[
                "trust",
                "trim",
                "--keep-for",
                &format!("127.0.0.1:{silent_port}"),
                "--timeout",
                "1s",
                "--out",
                &s(&out("trimmed.pem")),
            ],
            1,
            &[
                "no answer from 127.0.0.1",
                "within 1s during the TLS handshake",
            ],
        ),
        case(
            "trust trim: a timeout without a unit",
            &[
                "trust",
                "trim",
                "--keep-for",
                &good_chain_path,
                "--timeout",
                "10",
            ],
            2,
            &["--timeout", "'10' has no unit"],
        ),
        case(
            "load: --out where nothing can be written is refused before the run",
            &[
                "load",
                &good.url(),
                "--cacert",
                &root,
                "-d",
                "30s",
                "--out",
                "/proc/tlsperf-load.json",
            ],
            2,
            &["/proc/tlsperf-load.json"],
        ),
        case(
            "load: a duration that overflows the clock",
            &[
                "load",
                &good.url(),
                "--cacert",
                &root,
                "-d",
                "300000000000y",
            ],
            2,
            &["--duration", "365 days"],
        ),
        case(
            "handshake: conflicting flags",
            &["handshake", &good.url(), "--insecure", "--cacert", &root],
            2,
            &["--insecure"],
        ),
        // load
        writes(
            case(
                "load: no bound",
                &["load", &good.url(), "--out", &s(&out("l.json"))],
                2,
                &["--requests"],
            ),
            &out("l.json"),
        ),
        writes(
            case(
                "load: every request refused",
                &[
                    "load",
                    &url(closed),
                    "-n",
                    "3",
                    "--cacert",
                    &root,
                    "--out",
                    &s(&out("l2.json")),
                ],
                1,
                &["refused"],
            ),
            &PathBuf::new(),
        ),
        case(
            "load: no requests",
            &["load", &good.url(), "-n", "0"],
            2,
            &["'0'", "--requests", "must be 1 or more"],
        ),
        case(
            "capacity: a count past u64",
            &[
                "capacity",
                &good.url(),
                "--slo",
                "p99=30ms",
                "--requests-per-conn",
                "18446744073709551616",
            ],
            2,
            &["--requests-per-conn", "is too large"],
        ),
        // Each bad --plan item said in words (was "--plan inf", "invalid float
        // literal", "cannot parse float from empty string"); --factor 1e300 as given
        // (was 301 digits).
        case(
            "capacity: a plan rate too large to hold",
            &[
                "capacity",
                &good.url(),
                "--slo",
                "p99=30ms",
                "--plan",
                "1e400",
            ],
            2,
            &["--plan", "1e400 is too large a rate"],
        ),
        case(
            "capacity: a plan rate that is text",
            &[
                "capacity",
                &good.url(),
                "--slo",
                "p99=30ms",
                "--plan",
                "abc",
            ],
            2,
            &["--plan", "abc is not a rate in requests/s"],
        ),
        case(
            "capacity: a plan with a comma too many",
            &[
                "capacity",
                &good.url(),
                "--slo",
                "p99=30ms",
                "--plan",
                "50,",
            ],
            2,
            &["--plan", "an empty rate (a comma too many?)"],
        ),
        case(
            "capacity: a factor of 1e300",
            &[
                "capacity",
                &good.url(),
                "--slo",
                "p99=30ms",
                "--factor",
                "1e300",
            ],
            2,
            &["--factor 1e300: must be above 1 and at most 10"],
        ),
        case(
            "load: bad rate",
            &["load", &good.url(), "-n", "1", "--rate", "0"],
            2,
            &["--rate"],
        ),
        case(
            "load: unknown value",
            &["load", &good.url(), "-n", "1", "--resume", "sometimes"],
            2,
            &["sometimes"],
        ),
        // merge and compare
        writes(
            case(
                "merge: bad JSON",
                &["merge", &bad_json, &bad_copy, "--out", &s(&out("m.json"))],
                2,
                &["bad.json", ":3:"],
            ),
            &out("m.json"),
        ),
        // One file given twice: refused (its counts would be added twice), before it
        // is read.
        writes(
            case(
                "merge: the same file twice",
                &[
                    "merge",
                    &other_schema,
                    &other_schema,
                    "--out",
                    &s(&out("m1.json")),
                ],
                2,
                &["other.json", "are the same file", "give each result once"],
            ),
            &out("m1.json"),
        ),
        writes(
            case(
                "merge: another schema",
                &[
                    "merge",
                    &other_schema,
                    &other_copy,
                    "--out",
                    &s(&out("m2.json")),
                ],
                2,
                &["other.json", "something-else/3"],
            ),
            &out("m2.json"),
        ),
        case(
            "compare: bad JSON",
            &["compare", &bad_json, &bad_json],
            2,
            &["bad.json"],
        ),
        case(
            "compare: empty sample file",
            &["compare", &empty, &empty],
            2,
            &["empty.pem"],
        ),
        case(
            "compare: non-numeric sample",
            &["compare", &no_pem, &no_pem],
            2,
            &["text.pem:1:", "not a number"],
        ),
        // crypto and lab
        case(
            "crypto: zero duration",
            &["crypto", "sign", "--duration", "0s"],
            2,
            &["--duration", "longer than zero"],
        ),
        case(
            "crypto: group a provider lacks",
            &[
                "crypto",
                "kx",
                "--provider",
                "ring",
                "--group",
                "x25519mlkem768",
            ],
            2,
            &["ring"],
        ),
        writes(
            case(
                "crypto: --flamegraph in a missing directory",
                &[
                    "crypto",
                    "sign",
                    "--alg",
                    "ed25519",
                    "--flamegraph",
                    &s(&out("no-such-dir/f.svg")),
                ],
                2,
                &[
                    "--flamegraph",
                    &s(&out("no-such-dir/f.svg")),
                    "does not exist",
                ],
            ),
            &out("no-such-dir/f.svg"),
        ),
        case(
            "crypto: --flamegraph names a directory",
            &["crypto", "kx", "--flamegraph", &s(d)],
            2,
            &["--flamegraph", &s(d), "is a directory"],
        ),
        case(
            "lab: too few rounds",
            &["lab", "--rounds", "1", "--out", &s(&out("lab"))],
            2,
            &["--rounds"],
        ),
        // Numbers serve cannot honour: refused before anything is allocated or started
        // (--duration: a server that does start stops by itself).
        case(
            "serve: --body-size of 2^64 - 1",
            &[
                "serve",
                "--body-size",
                "18446744073709551615",
                "--duration",
                "2s",
            ],
            2,
            &["--body-size", "0..=67108864"],
        ),
        case(
            "serve: a timeout with no unit, as every duration flag says it",
            &["serve", "--handshake-timeout", "5", "--duration", "2s"],
            2,
            &["--handshake-timeout", "'5' has no unit"],
        ),
        case(
            "serve: --duration past every duration flag's limit",
            &["serve", "--duration", "400d"],
            2,
            &["--duration", "365 days"],
        ),
        case(
            "serve: --body-size of 100 GB",
            &["serve", "--body-size", "100000000000", "--duration", "2s"],
            2,
            &["--body-size", "0..=67108864"],
        ),
        case(
            "serve: --session-cache of a billion",
            &["serve", "--session-cache", "1000000000", "--duration", "2s"],
            2,
            &["--session-cache", "1..=1000000"],
        ),
        case(
            "serve: --tickets-per-handshake of a million",
            &[
                "serve",
                "--tickets-per-handshake",
                "1000000",
                "--duration",
                "2s",
            ],
            2,
            &["--tickets-per-handshake", "0..=16"],
        ),
        case(
            "serve: --rotate-every 0s",
            &[
                "serve",
                "--resumption",
                "tickets",
                "--ticket-keys",
                &good_ring,
                "--rotate-every",
                "0s",
                "--duration",
                "2s",
            ],
            2,
            &["--rotate-every", "at least 1s"],
        ),
        case(
            "serve: --rotate-every 1ns",
            &[
                "serve",
                "--resumption",
                "tickets",
                "--ticket-keys",
                &good_ring,
                "--rotate-every",
                "1ns",
                "--duration",
                "2s",
            ],
            2,
            &["--rotate-every", "at least 1s"],
        ),
        // Nothing written before the server is bound: a server already running on the
        // address keeps its clients' CA file.
        writes(
            case(
                "serve: --write-ca with a busy port",
                &[
                    "serve",
                    "--listen",
                    &format!("127.0.0.1:{}", good.port),
                    "--write-ca",
                    &s(&out("ca-busy.pem")),
                ],
                2,
                &[&format!("127.0.0.1:{}", good.port)],
            ),
            &out("ca-busy.pem"),
        ),
        writes(
            case(
                "serve: --write-ca with a bad --sni",
                &[
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--sni",
                    "no-equals-sign",
                    "--write-ca",
                    &s(&out("ca-sni.pem")),
                ],
                2,
                &["--sni"],
            ),
            &out("ca-sni.pem"),
        ),
        // Security: a key ring others can read, OCSP responses clients cannot use.
        case(
            "serve: a world-readable ticket key file",
            &[
                "serve",
                "--resumption",
                "tickets",
                "--ticket-keys",
                &open_ring,
                "--duration",
                "2s",
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["open-ring.json", "readable by others", "chmod 600"],
        ),
        case(
            "serve: --ocsp is a PEM certificate",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &good_key,
                "--ocsp",
                &good_chain_path,
                "--duration",
                "2s",
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["--ocsp", "server-chain.pem", "PEM"],
        ),
        case(
            "serve: --ocsp for another certificate",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &good_key,
                "--ocsp",
                &foreign_ocsp,
                "--duration",
                "2s",
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["--ocsp", "ocsp.der", "not for this certificate"],
        ),
        // Non-regular files as inputs: refused before they are opened or read.
        case(
            "serve: a FIFO as the certificate",
            &[
                "serve",
                "--cert",
                &fifo,
                "--key",
                &good_key,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "serve: /dev/zero as the certificate",
            &[
                "serve",
                "--cert",
                &zero,
                "--key",
                &good_key,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["/dev/zero", "character device"],
        ),
        case(
            "serve: /dev/zero as the key",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &zero,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["/dev/zero", "character device"],
        ),
        case(
            "serve: /dev/zero as the OCSP response",
            &[
                "serve",
                "--cert",
                &good_chain_path,
                "--key",
                &good_key,
                "--ocsp",
                &zero,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["/dev/zero", "character device"],
        ),
        case(
            "serve: a FIFO as the ticket key ring",
            &[
                "serve",
                "--resumption",
                "tickets",
                "--ticket-keys",
                &fifo,
                "--listen",
                "127.0.0.1:0",
            ],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "tickets show: a FIFO",
            &["tickets", "show", &fifo],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "tickets show: /dev/zero",
            &["tickets", "show", &zero],
            2,
            &["/dev/zero", "character device"],
        ),
        writes(
            case(
                "merge: /dev/zero",
                &["merge", &zero, &bad_json, "--out", &s(&out("mz.json"))],
                2,
                &["/dev/zero", "character device"],
            ),
            &out("mz.json"),
        ),
        case(
            "merge: a FIFO",
            &["merge", &fifo, &bad_json, "--out", &s(&out("mf.json"))],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "compare: /dev/zero",
            &["compare", &zero, &zero],
            2,
            &["/dev/zero", "character device"],
        ),
        case(
            "compare: a FIFO",
            &["compare", &fifo, &fifo],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "verify: /dev/zero as the chain",
            &[
                "verify",
                "--chain",
                &zero,
                "--host",
                "localhost",
                "--roots",
                &root,
            ],
            2,
            &["/dev/zero", "character device"],
        ),
        case(
            "verify: a FIFO as the chain",
            &[
                "verify",
                "--chain",
                &fifo,
                "--host",
                "localhost",
                "--roots",
                &root,
            ],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "verify: a FIFO as the roots",
            &[
                "verify",
                "--chain",
                &good_chain_path,
                "--host",
                "localhost",
                "--roots",
                &fifo,
            ],
            2,
            &["cert-fifo", "FIFO"],
        ),
        writes(
            case(
                "trust trim: /dev/zero as --keep-for",
                &[
                    "trust",
                    "trim",
                    "--keep-for",
                    &zero,
                    "--out",
                    &s(&out("tz.pem")),
                    "--source",
                    &root,
                ],
                2,
                &["/dev/zero", "character device"],
            ),
            &out("tz.pem"),
        ),
        case(
            "trust load: a FIFO as the bundle",
            &["trust", "load", "--bundle", &fifo],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "trust load: a FIFO as the bundle, baselines first",
            &["trust", "load", "--baselines-first", "--bundle", &fifo],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "trust analyze: a FIFO",
            &["trust", "analyze", &fifo],
            2,
            &["cert-fifo", "FIFO"],
        ),
        with_env(
            case(
                "trust load: SSL_CERT_FILE is a FIFO",
                &["trust", "load"],
                2,
                &["SSL_CERT_FILE", "cert-fifo", "FIFO"],
            ),
            "SSL_CERT_FILE",
            &fifo,
        ),
        case(
            "handshake: /dev/zero as the client certificate",
            &[
                "handshake",
                &good.url(),
                "--cacert",
                &root,
                "--cert",
                &zero,
                "--key",
                &good_key,
            ],
            2,
            &["/dev/zero", "character device"],
        ),
        case(
            "handshake: a FIFO as --cacert",
            &["handshake", &good.url(), "--cacert", &fifo],
            2,
            &["cert-fifo", "FIFO"],
        ),
        case(
            "completions: unknown shell",
            &["completions", "tcsh"],
            2,
            &["tcsh"],
        ),
    ];
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let env: Vec<(&str, &str)> = c.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        // Bounded: an input that blocks must fail the case, not hang the suite.
        let run = common::tlsperf_env(&c.args, &env, std::time::Duration::from_secs(60));
        let mut why = Vec::new();
        if run.code != c.code {
            why.push(format!("exit {} (want {})", run.code, c.code));
        }
        for needle in &c.says {
            if !run.stderr.contains(needle.as_str()) {
                why.push(format!("stderr lacks {needle:?}"));
            }
        }
        if run.stderr.contains("panicked") || run.stderr.contains("RUST_BACKTRACE") {
            why.push("panicked".into());
        }
        if !run.stderr.trim_start().starts_with("error") && !run.stderr.contains("error") {
            why.push("no error line".into());
        }
        if let Some(p) = &c.absent
            && !p.as_os_str().is_empty()
            && p.exists()
        {
            why.push(format!("{} was written", p.display()));
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n    stderr: {}",
                c.name,
                why.join("; "),
                run.stderr.trim()
            ));
        }
    }
    // No temporary files left in the output directory either.
    let leftovers: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| {
            let n = e.ok()?.file_name().to_string_lossy().into_owned();
            (n.starts_with('.') && n.contains("tmp")).then_some(n)
        })
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs mishandled:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// `pki init <non-UTF-8 dir> --json`: refused before anything is written (it used to
/// write every file, then fail to encode the JSON report, and refuse the retry).
#[cfg(unix)]
#[test]
fn json_report_of_a_non_utf8_path_is_refused_before_writing() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join(std::ffi::OsStr::from_bytes(b"pki-\xff"));
    let run = tlsperf([
        std::ffi::OsStr::new("--json"),
        std::ffi::OsStr::new("pki"),
        std::ffi::OsStr::new("init"),
        bad.as_os_str(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not valid UTF-8"), "{}", run.stderr);
    assert!(!bad.exists(), "nothing is written");
    let out = dir.path().join(std::ffi::OsStr::from_bytes(b"b-\xff.pem"));
    let run = tlsperf([
        std::ffi::OsStr::new("--json"),
        std::ffi::OsStr::new("pki"),
        std::ffi::OsStr::new("bundle"),
        std::ffi::OsStr::new("--count"),
        std::ffi::OsStr::new("2"),
        std::ffi::OsStr::new("--out"),
        out.as_os_str(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(!out.exists(), "nothing is written");
}

/// A valid capacity result of one process (`share` of `n`), built as a search writes it:
/// a ramp step at 50/s, then steps passing up to 100/s and failing from 105/s, twice
/// each (a capacity near 100/s).
fn capacity_doc(share: Option<(u32, u32)>) -> serde_json::Value {
    use tlsperf::capacity::result::{Outcome, Rules, Step, StepCpu, StepKind, Verdict, conclude};
    use tlsperf::capacity::{CapacityResult, Slo};
    use tlsperf::load::result::Dist;
    use tlsperf::stats::LatencyHistogram;
    let slo: Slo = "p90=10ms".parse().unwrap();
    let rules = Rules {
        samples_needed: slo.samples_needed(),
        step_min_s: 1.0,
        step_max_s: 10.0,
        generator_cpu_max: 0.9,
        resolution: 0.2,
        start_rate: 100.0,
        factor: 2.0,
        max_rate: 10_000.0,
        min_rate: 1.0,
        warmup_s: 0.0,
    };
    let part = share.map_or(1.0, |(_, n)| 1.0 / f64::from(n));
    let step = |index: u32, kind: StepKind, rate: f64, ms: u64| {
        let n = 200;
        let mut h = LatencyHistogram::new();
        for _ in 0..n {
            h.record_ns(ms * 1_000_000).unwrap();
        }
        let mut s = Step {
            index,
            kind,
            started: "2026-01-01T00:00:00Z".into(),
            offered_per_s: rate,
            share: part,
            machines: 1,
            length_s: 2.0,
            warmup_s: 0.0,
            duration_s: 2.0,
            connections: 4,
            attempted: n,
            unsent: 0,
            completed: n,
            failed: 0,
            achieved_per_s: 0.0,
            error_rate: 0.0,
            p50_ms: None,
            p99_ms: None,
            p999_ms: None,
            latency_corrected: Some(Dist::of(h.clone())),
            pacing_lateness: Some(Dist::of(LatencyHistogram::new())),
            latency_from_send: Some(Dist::of(h)),
            body_bytes: 0,
            upload_bytes: 0,
            goodput: Default::default(),
            generator: StepCpu {
                threads: 1,
                cpu_seconds: 0.1,
                utilization: 0.1,
                cpus: 1.0,
                runqueue_wait_s: None,
                apart_from_server: None,
            },
            server_cpu_seconds: None,
            server_runqueue_wait_s: None,
            server_cpu_us_per_request: None,
            server_cpus: None,
            steal: None,
            late_start_s: None,
            verdict: Verdict::Pass,
            why: String::new(),
            enough_samples: true,
        };
        s.judge(&slo, &rules);
        s
    };
    let mut steps = vec![step(1, StepKind::Ramp, 50.0, 2)];
    for _ in 0..2 {
        for f in [0.8, 0.9, 0.95, 1.0] {
            let i = steps.len() as u32 + 1;
            steps.push(step(i, StepKind::Probe, 100.0 * f, 2));
            steps.push(step(i + 1, StepKind::Probe, 105.0 / f, 50));
        }
    }
    let c = conclude(&steps, &rules, Outcome::TimeLimit);
    assert_eq!(c.outcome, Outcome::Capacity, "{}", c.message);
    let mut r = CapacityResult {
        schema: tlsperf::capacity::SCHEMA.into(),
        target: "https://localhost/".into(),
        started: "2026-01-01T00:00:00Z".into(),
        slo,
        rules,
        options: Default::default(),
        rate_share: share.map(|(i, n)| format!("{i}/{n}")),
        machines: 1,
        outcome: Outcome::TimeLimit,
        capacity_per_s: None,
        interval_per_s: None,
        best_pass_per_s: None,
        generator_bound_at_per_s: None,
        disputed_per_s: None,
        knee_spread: None,
        message: String::new(),
        steps,
        warnings: vec![],
        link_counters: None,
    };
    r.set_conclusion(c);
    serde_json::to_value(&r).unwrap()
}

/// Capacity documents no search can have written (issue 37, item 3), and cut or
/// ambiguous documents (item 4): `merge` and `compare` refuse each with exit 2, the file
/// and a plain sentence, instead of wrapping counts, printing "+inf%" or a 300-digit
/// percentage, or calling a cut document a sample file.
#[test]
fn hostile_capacity_documents_are_refused() {
    use serde_json::{Value, json};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let save = |name: &str, v: &Value| {
        let p = d.join(name);
        std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (a, b) = (capacity_doc(Some((1, 2))), capacity_doc(Some((2, 2))));
    let (pa, pb) = (save("a.json", &a), save("b.json", &b));
    let whole = save("whole.json", &capacity_doc(None));
    let out = d.join("m.json").to_str().unwrap().to_string();

    // The real documents pass: a merge and a comparison.
    let run = tlsperf(["merge", &pa, &pb, "--out", &out, "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = tlsperf(["compare", &whole, &whole]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("no difference"), "{}", run.stdout);
    std::fs::remove_file(&out).unwrap();

    // Edits of A: (name, edit, what stderr says).
    type Edit = Box<dyn Fn(&mut Value)>;
    let steps = |f: fn(&mut Value)| -> Edit {
        Box::new(move |v: &mut Value| v["steps"].as_array_mut().unwrap().iter_mut().for_each(f))
    };
    let merges: Vec<(&str, Edit, &str)> = vec![
        (
            "counts that would wrap",
            steps(|s| {
                s["attempted"] = json!(u64::MAX);
                s["completed"] = json!(u64::MAX);
            }),
            "my0.json: the merged requests attempted would be more than a count holds",
        ),
        (
            "machines that would wrap",
            Box::new(|v| {
                v["machines"] = json!(u32::MAX);
                for s in v["steps"].as_array_mut().unwrap() {
                    s["machines"] = json!(u32::MAX);
                }
            }),
            "my1.json: the merged machines would be more than a count holds",
        ),
        (
            "completed > attempted",
            Box::new(|v| v["steps"][1]["completed"] = json!(5000)),
            "step 2 of 17: 5000 completed + 0 failed is not the 200 attempted",
        ),
        (
            "a negative share",
            steps(|s| s["share"] = json!(-6.5)),
            "share -6.5 of the offered rate",
        ),
        (
            "a negative duration",
            Box::new(|v| v["steps"][0]["duration_s"] = json!(-3.0)),
            "duration_s -3 s is not a duration",
        ),
        (
            "a factor of 0",
            Box::new(|v| v["rules"]["factor"] = json!(0.0)),
            "rules: factor 0: must be above 1 and at most 10",
        ),
        (
            "an objective of p250 ≤ −30 ms",
            Box::new(|v| v["slo"]["latency"][0] = json!({"percentile": 250.0, "max_ms": -30.0})),
            "slo: percentile 250: a percentile is between p0 and p100",
        ),
        (
            "a bound of −30 ms",
            Box::new(|v| v["slo"]["latency"][0]["max_ms"] = json!(-30.0)),
            "slo: p90 ≤ -30 ms: a bound must be above zero",
        ),
        (
            "more steps than a search runs",
            Box::new(|v| {
                let one = v["steps"][0].clone();
                v["steps"] = Value::Array(vec![one; 2001]);
            }),
            "more than 2000 steps",
        ),
    ];
    let compares: Vec<(&str, Edit, &str)> = vec![
        (
            "capacity 0",
            Box::new(|v| v["capacity_per_s"] = json!(0.0)),
            "capacity_per_s 0/s is not a rate a search can have tried",
        ),
        (
            "capacity 1e308",
            Box::new(|v| v["capacity_per_s"] = json!(1e308)),
            "capacity_per_s 1e308/s is not a rate",
        ),
        (
            "capacity −500/s",
            Box::new(|v| v["capacity_per_s"] = json!(-500.0)),
            "capacity_per_s -500/s is not a rate",
        ),
        (
            "a capacity outside its own interval",
            Box::new(|v| v["capacity_per_s"] = json!(500.0)),
            "capacity_per_s 500 is outside its own interval_per_s",
        ),
        (
            "an objective of p250 ≤ −30 ms",
            Box::new(|v| v["slo"]["latency"][0] = json!({"percentile": 250.0, "max_ms": -30.0})),
            "slo: percentile 250",
        ),
    ];
    let mut failures = Vec::new();
    let check = |name: String, run: common::Run, says: &[&str], file: &str| {
        let mut why = Vec::new();
        if run.code != 2 {
            why.push(format!("exit {} (want 2)", run.code));
        }
        for s in says.iter().chain([&file]) {
            if !run.stderr.contains(s) {
                why.push(format!("stderr lacks {s:?}"));
            }
        }
        for bad in ["panicked", "Some(", "Error {", "inf%", "sample file"] {
            if run.stderr.contains(bad) || run.stdout.contains(bad) {
                why.push(format!("output holds {bad:?}"));
            }
        }
        (!why.is_empty()).then(|| {
            format!(
                "{name}: {}\n    stdout: {}\n    stderr: {}",
                why.join("; "),
                run.stdout.trim(),
                run.stderr.trim()
            )
        })
    };
    for (i, (name, edit, says)) in merges.iter().enumerate() {
        let (mut x, mut y) = (a.clone(), b.clone());
        edit(&mut x);
        edit(&mut y);
        let (px, py) = (
            save(&format!("mx{i}.json"), &x),
            save(&format!("my{i}.json"), &y),
        );
        let run = tlsperf(["merge", &px, &py, "--out", &out, "-q"]);
        // A value out of range is the first file's; a sum is refused at the second.
        let file = if says.starts_with("my") { &py } else { &px };
        failures.extend(check(format!("merge: {name}"), run, &[says], file));
        if Path::new(&out).exists() {
            failures.push(format!("merge: {name}: {out} was written"));
            std::fs::remove_file(&out).unwrap();
        }
    }
    for (i, (name, edit, says)) in compares.iter().enumerate() {
        let mut x = capacity_doc(None);
        edit(&mut x);
        let px = save(&format!("cx{i}.json"), &x);
        let run = tlsperf(["compare", &whole, &px]);
        failures.extend(check(format!("compare: {name}"), run, &[says], &px));
    }

    // Cut short: not valid JSON, where it breaks, not "a sample file".
    let text = std::fs::read_to_string(&whole).unwrap();
    let mut at = text.len() / 2;
    while !text.is_char_boundary(at) || text[..at].ends_with('\n') {
        at -= 1;
    }
    let cut = write(d, "cut.json", &text[..at]);
    let line = text[..at].lines().count();
    let run = tlsperf(["compare", &whole, &cut]);
    failures.extend(check(
        "compare: a cut document".into(),
        run,
        &[
            &format!("cut.json:{line}:"),
            "not a valid JSON document: EOF while parsing",
        ],
        &cut,
    ));
    let run = tlsperf(["merge", &pa, &cut, "--out", &out]);
    failures.extend(check(
        "merge: a cut document".into(),
        run,
        &[&format!("cut.json:{line}:"), "EOF while parsing"],
        &cut,
    ));
    // Its schema twice: said so, not "schema missing".
    let key = "\n  \"schema\": \"tlsperf-capacity/1\",";
    let at = text.find(key).unwrap();
    // The second one's line: the first's, plus one.
    let line = text[..at].lines().count() + 2;
    let twice = write(
        d,
        "twice.json",
        &format!("{}{key}{}", &text[..at], &text[at..]),
    );
    let twice_at = format!("twice.json:{line}:");
    for args in [
        vec!["compare", &whole, &twice],
        vec!["merge", &pa, &twice, "--out", &out],
    ] {
        let run = tlsperf(&args);
        if run.stderr.contains("missing") {
            failures.push(format!(
                "{}: says the schema is missing: {}",
                args[0], run.stderr
            ));
        }
        failures.extend(check(
            format!("{}: schema given twice", args[0]),
            run,
            &[&twice_at, "the key \"schema\" is given twice"],
            &twice,
        ));
    }
    assert!(
        failures.is_empty(),
        "{} capacity documents mishandled:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
