//! Files named on the command line as an attacker would name them: outputs that are
//! devices, FIFOs or links to another program's descriptors (written to, never replaced,
//! checked inside a private mount namespace with its own `/dev`), and executables handed
//! to the probes that are huge, sparse or crafted to cost time (`--exe`).

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::path::Path;
use std::process::Command;

/// A pcap file with its header only (no packet): `observe --pcap` reads it at once.
fn empty_pcap(path: &Path) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&0i32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    std::fs::write(path, b).unwrap();
}

/// Runs `script` with `sh` in a mount namespace of its own, whose `/dev` is a fresh tmpfs
/// holding only what the script makes there: the machine's devices are never touched.
/// `None` (with the reason printed) where no such namespace can be made.
fn in_private_dev(script: &str) -> Option<String> {
    if !common::root("outputs that are devices (a private /dev needs root)") {
        return None;
    }
    let full = format!(
        "set -e\nmount --make-rprivate / 2>/dev/null || true\nmount -t tmpfs tmpfs /dev\n\
         mknod -m 666 /dev/null c 1 3\nmknod -m 666 /dev/full c 1 7\n\
         mknod -m 666 /dev/urandom c 1 9\nmknod -m 666 /dev/zero c 1 5\nln -s /proc/self/fd /dev/fd\n\
         ln -s /proc/self/fd/1 /dev/stdout\nln -s /proc/self/fd/2 /dev/stderr\nset +e\n{script}"
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &full])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        if why.contains("unshare failed") || why.contains("mount:") {
            common::missing(
                "a private mount namespace",
                &format!("not checking ({why})"),
            );
            return None;
        }
        panic!(
            "the script failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            why
        );
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every file tlsperf writes follows one rule: a character device, a FIFO, a link to one,
/// or a path through a process's descriptors (`/dev/stdout` redirected to a log with
/// `>>`) is written to where it is, never renamed over, and needs no `--force`. Before,
/// `--out /dev/stdout >> log` replaced the log by a new file holding only the result,
/// and `--connections /dev/stdout >> log` truncated it.
#[test]
fn outputs_never_replace_devices_fifos_or_another_programs_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    empty_pcap(&dir.path().join("empty.pcap"));
    let bin = common::bin().display().to_string();
    let script = format!(
        r#"
cd {d}
obs() {{ "{bin}" observe --pcap empty.pcap --port 443 "$@"; }}
kind() {{ stat -c %F "$1"; }}
obs --connections /dev/null > /dev/null 2> err1; echo "conn-null rc=$? $(kind /dev/null)"
obs --out /dev/null > /dev/null 2> err2; echo "out-null rc=$? $(kind /dev/null)"
ln -s /dev/null link
obs --connections link > /dev/null 2> err3; echo "conn-link rc=$? $(kind link) $(kind /dev/null)"
obs --out /dev/full > /dev/null 2> err4; echo "out-full rc=$? $(kind /dev/full)"; tr '\n' ' ' < err4; echo
mkfifo /dev/fifo
cat /dev/fifo > fifo.out & reader=$!
obs --connections /dev/fifo > /dev/null 2> err5; echo "conn-fifo rc=$? $(kind /dev/fifo)"
wait $reader
echo earlier > log1; before=$(stat -c %i log1)
obs --out /dev/stdout >> log1 2> err6; echo "out-stdout rc=$? same-inode=$([ "$before" = "$(stat -c %i log1)" ] && echo yes || echo no) first=$(head -n1 log1) schema=$(grep -c tlsperf-observe log1)"
echo earlier > log2; before=$(stat -c %i log2)
obs --connections /dev/stdout >> log2 2> err7; echo "conn-stdout rc=$? same-inode=$([ "$before" = "$(stat -c %i log2)" ] && echo yes || echo no) first=$(head -n1 log2) table=$(grep -c 'Handshakes observed' log2)"
obs --connections /dev/fd/1 --json >> log2 2> err8; echo "conn-fd rc=$? first=$(head -n1 log2) lines=$(wc -l < log2)"
"#
    );
    let Some(said) = in_private_dev(&script) else {
        return;
    };
    let line = |name: &str| -> &str {
        said.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line in:\n{said}"))
    };
    assert_eq!(line("conn-null"), "conn-null rc=0 character special file");
    assert_eq!(line("out-null"), "out-null rc=0 character special file");
    assert_eq!(
        line("conn-link"),
        "conn-link rc=0 symbolic link character special file"
    );
    // A full device: the write fails, said with the path in plain words, the device stays.
    let full = line("out-full");
    assert!(
        full.starts_with("out-full rc=1 character special file"),
        "{said}"
    );
    let err4 = said
        .lines()
        .skip_while(|l| !l.starts_with("out-full"))
        .nth(1)
        .unwrap();
    assert!(
        err4.contains("cannot write /dev/full") && err4.contains("No space left"),
        "{err4}"
    );
    assert!(!err4.contains("Os {") && !err4.contains("\"/dev"), "{err4}");
    assert_eq!(line("conn-fifo"), "conn-fifo rc=0 fifo");
    assert_eq!(
        line("out-stdout"),
        "out-stdout rc=0 same-inode=yes first=earlier schema=1",
        "{said}"
    );
    assert_eq!(
        line("conn-stdout"),
        "conn-stdout rc=0 same-inode=yes first=earlier table=1",
        "{said}"
    );
    assert!(
        line("conn-fd").starts_with("conn-fd rc=0 first=earlier"),
        "{said}"
    );
}

/// A section of a crafted ELF file.
struct Section {
    name: &'static str,
    /// `SHT_*`.
    kind: u32,
    /// `SHF_*`.
    flags: u64,
    data: Vec<u8>,
    /// `sh_link`, `sh_info`, `sh_entsize`.
    link: u32,
    info: u32,
    entsize: u64,
}

/// Where a crafted file's code is loaded.
const BASE: u64 = 0x40_0000;

/// An x86-64 ELF executable of `sections` (the first is `.text`, at file offset 0x1000),
/// one executable `PT_LOAD` segment mapping the whole file at [`BASE`], the section
/// headers last.
fn elf(sections: Vec<Section>) -> Vec<u8> {
    let mut out = vec![0u8; 0x1000];
    let mut placed = Vec::new();
    for s in &sections {
        while !out.len().is_multiple_of(16) {
            out.push(0);
        }
        placed.push(out.len() as u64);
        out.extend_from_slice(&s.data);
    }
    let mut shstrtab = vec![0u8];
    let mut names = Vec::new();
    for s in &sections {
        names.push(shstrtab.len() as u32);
        shstrtab.extend_from_slice(s.name.as_bytes());
        shstrtab.push(0);
    }
    names.push(shstrtab.len() as u32);
    shstrtab.extend_from_slice(b".shstrtab\0");
    while !out.len().is_multiple_of(16) {
        out.push(0);
    }
    let shstr_at = out.len() as u64;
    out.extend_from_slice(&shstrtab);
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    let shoff = out.len() as u64;
    let total = shoff + 64 * (sections.len() as u64 + 2);
    let mut sh = vec![0u8; 64];
    let header = |name: u32,
                  kind: u32,
                  flags: u64,
                  addr: u64,
                  off: u64,
                  size: u64,
                  link: u32,
                  info: u32,
                  align: u64,
                  entsize: u64| {
        let mut h = Vec::with_capacity(64);
        h.extend_from_slice(&name.to_le_bytes());
        h.extend_from_slice(&kind.to_le_bytes());
        h.extend_from_slice(&flags.to_le_bytes());
        h.extend_from_slice(&addr.to_le_bytes());
        h.extend_from_slice(&off.to_le_bytes());
        h.extend_from_slice(&size.to_le_bytes());
        h.extend_from_slice(&link.to_le_bytes());
        h.extend_from_slice(&info.to_le_bytes());
        h.extend_from_slice(&align.to_le_bytes());
        h.extend_from_slice(&entsize.to_le_bytes());
        h
    };
    for (i, s) in sections.iter().enumerate() {
        let addr = if s.flags & 2 != 0 {
            BASE + placed[i]
        } else {
            0
        };
        sh.extend(header(
            names[i],
            s.kind,
            s.flags,
            addr,
            placed[i],
            s.data.len() as u64,
            s.link,
            s.info,
            if s.entsize > 0 { 8 } else { 16 },
            s.entsize,
        ));
    }
    let shstrndx = sections.len() as u16 + 1;
    sh.extend(header(
        names[sections.len()],
        3,
        0,
        0,
        shstr_at,
        shstrtab.len() as u64,
        0,
        0,
        1,
        0,
    ));
    out.extend_from_slice(&sh);
    assert_eq!(out.len() as u64, total);
    // The ELF header.
    let mut e = Vec::with_capacity(64);
    e.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    e.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    e.extend_from_slice(&62u16.to_le_bytes()); // x86-64
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&(BASE + 0x1000).to_le_bytes()); // entry
    e.extend_from_slice(&64u64.to_le_bytes()); // phoff
    e.extend_from_slice(&shoff.to_le_bytes());
    e.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 1, 64, sections.len() as u16 + 2, shstrndx] {
        e.extend_from_slice(&v.to_le_bytes());
    }
    out[..64].copy_from_slice(&e);
    // One PT_LOAD, R+X, the whole file.
    let mut p = Vec::with_capacity(56);
    p.extend_from_slice(&1u32.to_le_bytes());
    p.extend_from_slice(&5u32.to_le_bytes());
    p.extend_from_slice(&0u64.to_le_bytes());
    p.extend_from_slice(&BASE.to_le_bytes());
    p.extend_from_slice(&BASE.to_le_bytes());
    p.extend_from_slice(&total.to_le_bytes());
    p.extend_from_slice(&total.to_le_bytes());
    p.extend_from_slice(&0x1000u64.to_le_bytes());
    out[64..120].copy_from_slice(&p);
    out
}

/// `.text` of `len` bytes of `byte`, flagged alloc + exec.
fn text(len: usize, byte: u8) -> Section {
    Section {
        name: ".text",
        kind: 1,
        flags: 2 | 4,
        data: vec![byte; len],
        link: 0,
        info: 0,
        entsize: 0,
    }
}

/// A "Go program" whose symbol table holds `runtime.main` and, when `handshake_len` is
/// given, `crypto/tls.(*Conn).serverHandshake` over that many bytes of `RET` (0xc3).
fn go_symtab_program(handshake_len: Option<usize>) -> Vec<u8> {
    let len = 16 + handshake_len.unwrap_or(0);
    let mut strtab = b"\0runtime.main\0".to_vec();
    let mut symtab = vec![0u8; 24];
    let mut sym = |name: u32, value: u64, size: u64| {
        symtab.extend_from_slice(&name.to_le_bytes());
        symtab.push(0x12); // STB_GLOBAL, STT_FUNC
        symtab.push(0);
        symtab.extend_from_slice(&1u16.to_le_bytes()); // .text
        symtab.extend_from_slice(&value.to_le_bytes());
        symtab.extend_from_slice(&size.to_le_bytes());
    };
    let text_at = BASE + 0x1000;
    sym(1, text_at, 1);
    if let Some(n) = handshake_len {
        let name = strtab.len() as u32;
        strtab.extend_from_slice(b"crypto/tls.(*Conn).serverHandshake\0");
        sym(name, text_at + 16, n as u64);
    }
    elf(vec![
        text(len, 0xc3),
        Section {
            name: ".symtab",
            kind: 2,
            flags: 0,
            data: symtab,
            link: 3,
            info: 1,
            entsize: 24,
        },
        Section {
            name: ".strtab",
            kind: 3,
            flags: 0,
            data: strtab,
            link: 0,
            info: 0,
            entsize: 0,
        },
    ])
}

/// A Go 1.20 `.gopclntab` of `nfunc` functions whose names all point into `names_len`
/// bytes without a NUL (and one `.text` of 16 bytes they all start in).
fn go_pclntab_program(nfunc: usize, names_len: usize) -> Vec<u8> {
    let text_at = BASE + 0x1000;
    let header = 8 + 8 * 8;
    let names_at = header;
    let functab_at = names_at + names_len;
    let functab_len = (2 * nfunc + 1) * 4;
    let mut t = Vec::with_capacity(functab_at + functab_len + 8 * nfunc);
    t.extend_from_slice(&0xffff_fff1u32.to_le_bytes());
    t.extend_from_slice(&[0, 0, 1, 8]);
    for w in [
        nfunc as u64,
        0,
        text_at,
        names_at as u64,
        0,
        0,
        0,
        functab_at as u64,
    ] {
        t.extend_from_slice(&w.to_le_bytes());
    }
    t.resize(functab_at, b'a');
    for i in 0..nfunc {
        t.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(&((functab_len + 8 * i) as u32).to_le_bytes());
    }
    t.extend_from_slice(&16u32.to_le_bytes());
    for i in 0..nfunc {
        t.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(&((i * 200) as u32 % names_len as u32).to_le_bytes());
    }
    elf(vec![
        text(16, 0xc3),
        Section {
            name: ".gopclntab",
            kind: 1,
            flags: 2,
            data: t,
            link: 0,
            info: 0,
            entsize: 0,
        },
    ])
}

/// `observe --probes --exe FILE -d 1s` (killed after `limit`).
fn probe_exe(file: &Path, limit: std::time::Duration) -> common::Run {
    common::tlsperf_env(
        [
            "observe",
            "--probes",
            "--exe",
            file.to_str().unwrap(),
            "-d",
            "1s",
        ],
        &[],
        limit,
    )
}

/// A 1,600-byte kind of file: a handshake function of 1,000 `RET`s was 1,000 uprobes
/// (`-d 1s` took 188–280 s). Now a function with more than 64 is refused, at once, with
/// the bound and the count in words.
#[test]
fn a_function_of_a_thousand_returns_is_refused_with_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rets");
    std::fs::write(&file, go_symtab_program(Some(1000))).unwrap();
    let started = std::time::Instant::now();
    let run = probe_exe(&file, std::time::Duration::from_secs(60));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("crypto/tls.(*Conn).serverHandshake has 1000 return instructions")
            && run.stderr.contains("more than the 64"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(file.to_str().unwrap()),
        "{}",
        run.stderr
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

/// 100,000 function names pointing into 20 MB without a NUL cost 87–109 s of CPU, each
/// name searched for its end; now each is compared where it starts, and the file is
/// found to hold no TLS library at once.
#[test]
fn a_pclntab_of_endless_names_is_read_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("names");
    std::fs::write(&file, go_pclntab_program(100_000, 20 << 20)).unwrap();
    let run = probe_exe(&file, std::time::Duration::from_secs(30));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("no TLS library"), "{}", run.stderr);
}

/// The same file named twice (`dir/x`, `dir/./x`, a link to it) is one target, and a
/// bare name is the file in the current directory (the eBPF library looked a bare name
/// up in the loader's cache): with a file that holds no TLS library, each says so with
/// its absolute path; with one that does not exist, the name given is said.
#[test]
fn exe_paths_are_made_absolute_and_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, go_symtab_program(None)).unwrap();
    std::os::unix::fs::symlink(&file, dir.path().join("link")).unwrap();
    let canonical = std::fs::canonicalize(&file).unwrap();
    let out = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["observe", "--probes", "--exe", "plain", "--exe", "./plain"])
        .args(["--exe", "link", "-d", "1s"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("--exe {}: no TLS library", canonical.display())),
        "{err}"
    );
    // A program the probes attach to, named three ways: attached to once.
    if common::probes::root() {
        let go = dir.path().join("go");
        std::fs::create_dir(&go).unwrap();
        std::fs::write(go.join("x"), go_symtab_program(Some(3))).unwrap();
        let out = Command::new(common::bin())
            .current_dir(dir.path())
            .args(["observe", "--probes", "--exe", "go/x", "--exe", "./go/x"])
            .args(["--exe", "go/../go/x", "-d", "1s", "--json"])
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let x = std::fs::canonicalize(go.join("x")).unwrap();
        let attached: Vec<&str> = v["probes"]["attached"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_str())
            .filter(|a| a.contains("serverHandshake in"))
            .collect();
        assert_eq!(
            attached,
            [format!(
                "go: crypto/tls.(*Conn).serverHandshake in {} (entry and 3 return instructions)",
                x.display()
            )],
            "{err}"
        );
    }
    let out = Command::new(common::bin())
        .current_dir(dir.path())
        .args(["observe", "--probes", "--exe", "absent", "-d", "1s"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--exe absent: No such file or directory"),
        "{err}"
    );
}

/// A memory cgroup (v1 `memory`, else v2) holding a command to `bytes`, removed when
/// dropped; `None` (with the reason printed) where this machine cannot make one.
struct MemCgroup {
    dir: std::path::PathBuf,
}

impl MemCgroup {
    fn new(bytes: u64) -> Option<MemCgroup> {
        if !common::root("a memory limit (a cgroup needs root)") {
            return None;
        }
        let name = format!("tlsperf-test-mem-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let (dir, file) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.join(&name), "memory.limit_in_bytes")
        } else {
            (Path::new("/sys/fs/cgroup").join(&name), "memory.max")
        };
        let made = std::fs::create_dir(&dir)
            .and_then(|()| std::fs::write(dir.join(file), bytes.to_string()));
        match made {
            Ok(()) => Some(MemCgroup { dir }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                common::missing(
                    "a memory cgroup",
                    &format!("cannot make one here ({e}); not checking a memory bound"),
                );
                None
            }
        }
    }

    /// Runs tlsperf with `args` inside the cgroup (killed after 120 s).
    fn tlsperf(&self, args: &[&str]) -> (Option<i32>, String) {
        let procs = self.dir.join("cgroup.procs");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"echo $$ > "$0" && exec timeout -s KILL 120 "$@""#)
            .arg(&procs)
            .arg(common::bin())
            .args(args)
            .env("NO_COLOR", "1");
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// `--exe` files were read whole: a 3 GB sparse file took 3 GB of memory, a 50 GB one
/// the machine's. Under a 512 MiB memory limit, a sparse 3 GB program (a small ELF file
/// and a hole) is looked into and found to hold no TLS library (it was killed by the
/// limit), and a 50 GB one is refused at once with the bound in words.
#[test]
fn huge_sparse_executables_cost_no_memory() {
    let Some(cgroup) = MemCgroup::new(512 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sparse = |name: &str, len: u64| {
        let path = dir.path().join(name);
        std::fs::write(&path, go_symtab_program(None)).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len)
            .unwrap();
        path
    };
    let three = sparse("three", 3 << 30);
    let (code, err) = cgroup.tlsperf(&["observe", "--probes", "--exe", three.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no TLS library"), "{err}");
    let fifty = sparse("fifty", 50_000_000_000);
    let (code, err) = cgroup.tlsperf(&["observe", "--probes", "--exe", fifty.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{} is 50.0 GB, larger than the 4 GiB tlsperf reads of a program or library",
            fifty.display()
        )),
        "{err}"
    );
}

/// A capture of two handshakes with `tlsperf serve` (`tcpdump -i lo`), and its port;
/// `None` (with the reason printed) without tcpdump.
fn capture_two_handshakes(dir: &Path) -> Option<(std::path::PathBuf, u16)> {
    use std::io::BufRead;
    if !common::have(
        "tcpdump",
        "a capture with handshakes (apt-get install tcpdump)",
    ) {
        return None;
    }
    let ca = dir.join("ca.pem");
    let serve = common::Serve::ecdsa_writing_ca(&ca, &[]);
    let pcap = dir.join("two.pcap");
    let mut tcpdump = Command::new("tcpdump")
        .args([
            "-i",
            "lo",
            "-B",
            "65536",
            "--immediate-mode",
            "-U",
            "-n",
            "-w",
        ])
        .arg(&pcap)
        .args(["tcp", "port", &serve.port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(tcpdump.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening on") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "tcpdump exited");
    }
    let run = common::tlsperf([
        "handshake",
        &format!("https://localhost:{}/", serve.port),
        "-n",
        "2",
        "--cacert",
        ca.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::thread::sleep(std::time::Duration::from_secs(1));
    let _ = Command::new("/bin/kill")
        .args(["-INT", &tcpdump.id().to_string()])
        .status();
    tcpdump.wait().unwrap();
    Some((pcap, serve.port))
}

/// A `--connections` file that cannot be written lost the whole run (a full disk: exit
/// 1, no table, no `--out`), and its error was classed apart from `--out`'s. Now the
/// result is written first (the table, or `--out`; the whole table on stdout when `--out`
/// itself fails), every output that failed is said with its path in plain words, and the
/// exit follows one rule: 2 when a path cannot be written (read-only), else 1.
#[test]
fn a_failing_output_loses_neither_the_result_nor_the_other_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let Some((pcap, port)) = capture_two_handshakes(dir.path()) else {
        return;
    };
    let d = dir.path().display().to_string();
    let bin = common::bin().display().to_string();
    let script = format!(
        r#"
cd {d}
mkdir full ro
mount -t tmpfs -o size=64k tmpfs full
dd if=/dev/zero of=full/fill bs=4k 2> /dev/null
mount -t tmpfs -o ro tmpfs ro
obs() {{ "{bin}" observe --pcap {pcap} --port {port} "$@"; }}
obs --connections /dev/full > t1 2> e1; echo "conn-full rc=$? table=$(grep -c '^handshakes: 2' t1)"; echo "e1 $(tr '\n' ' ' < e1)"
obs --connections /dev/full --out full/r.json > t2 2> e2; echo "both rc=$? table=$(grep -c '^handshakes: 2' t2)"; echo "e2 $(tr '\n' ' ' < e2)"
obs --out ro/r.json > t3 2> e3; echo "out-ro rc=$? table=$(grep -c '^handshakes: 2' t3)"; echo "e3 $(tr '\n' ' ' < e3)"
obs --connections ro/c.jsonl > t4 2> e4; echo "conn-ro rc=$?"; echo "e4 $(tr '\n' ' ' < e4)"
"#,
        pcap = pcap.display()
    );
    let Some(said) = in_private_dev(&script) else {
        return;
    };
    let line = |name: &str| -> &str {
        said.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line in:\n{said}"))
    };
    for e in ["e1", "e2", "e3", "e4"] {
        assert!(
            !line(e).contains("Os {") && !line(e).contains("\"/") && !line(e).contains("panicked"),
            "{said}"
        );
    }
    assert_eq!(line("conn-full"), "conn-full rc=1 table=1", "{said}");
    assert!(
        line("e1").contains("cannot write /dev/full: No space left on device"),
        "{said}"
    );
    assert_eq!(line("both"), "both rc=1 table=1", "{said}");
    assert!(
        line("e2").contains("warning: cannot write full/r.json")
            && line("e2").contains("warning: cannot write /dev/full")
            && line("e2").contains("2 outputs could not be written"),
        "{said}"
    );
    assert_eq!(line("out-ro"), "out-ro rc=2 table=1", "{said}");
    assert!(
        line("e3").contains("cannot write ro/r.json") && line("e3").contains("Read-only"),
        "{said}"
    );
    assert_eq!(line("conn-ro"), "conn-ro rc=2", "{said}");
    assert!(
        line("e4").contains("cannot write ro/c.jsonl") && line("e4").contains("Read-only"),
        "{said}"
    );
}

/// A truncated program (its section headers cut off) said "no TLS library" instead of
/// what is wrong with it; now the ELF reader's reason, with the path.
#[test]
fn a_truncated_program_is_said_to_be_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut");
    let whole = go_symtab_program(Some(3));
    std::fs::write(&file, &whole[..whole.len() - 100]).unwrap();
    let run = probe_exe(&file, std::time::Duration::from_secs(60));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "{}: its ELF headers cannot be read",
            file.display()
        )),
        "{}",
        run.stderr
    );
}

/// The attachments (BPF links, perf events) process `pid` holds.
fn attachments(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path()).is_ok_and(|t| {
                        matches!(
                            t.to_str(),
                            Some("anon_inode:bpf_link" | "anon_inode:[perf_event]")
                        )
                    })
                })
                .count()
        })
        .unwrap_or(0)
}

/// `tlsperf observe --probes -d 600s --exe P…` for each of `exes`, its output piped.
fn observe_probing(exes: &[std::path::PathBuf]) -> std::process::Child {
    let mut cmd = Command::new(common::bin());
    cmd.args(["observe", "--probes", "-d", "600s"]);
    for p in exes {
        cmd.arg("--exe").arg(p);
    }
    cmd.env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether process `pid` held `at_least` attachments within 120 s (looked at every
/// `every`).
fn attached_within(pid: u32, at_least: usize, every: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while attachments(pid) < at_least {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(every);
    }
    true
}

/// Ctrl-C while the probes are being attached killed tlsperf, whose exit then waited for
/// the kernel to remove each probe attached so far (over a minute for 1,000). Now the
/// attachment stops before the next probe, what was attached is handed to a process of
/// its own to remove, and tlsperf says so and exits 130. Twelve programs of 64 returns
/// each (780 probes) make the attachment long enough to be interrupted in its middle.
#[test]
fn ctrl_c_while_attaching_stops_the_attachment() {
    if !common::probes::root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exes: Vec<std::path::PathBuf> = (0..12)
        .map(|i| {
            let p = dir.path().join(format!("p{i}"));
            std::fs::write(&p, go_symtab_program(Some(64))).unwrap();
            p
        })
        .collect();
    let child = observe_probing(&exes);
    // Past the five tracepoints: uprobes are being attached.
    assert!(
        attached_within(child.id(), 40, std::time::Duration::from_millis(5)),
        "no uprobe attached within 120 s"
    );
    let out = common::interrupt_and_wait(child, std::time::Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted while attaching the probes")
            && err.contains("now removed): nothing was observed"),
        "{err}"
    );
}

/// A signal at any moment from the first attachment on stops the run in words and exits
/// 130 (or 0, when the run had begun and kept what it saw), never by the signal's default
/// action: the handlers are registered before the probes are attached. Before, a SIGINT
/// between the end of the attachment and the start of the run killed tlsperf outright
/// (a fresh-clone CI met it under load).
#[test]
fn a_signal_from_the_first_attachment_on_is_always_handled() {
    if !common::probes::root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    std::fs::write(&p, go_symtab_program(Some(8))).unwrap();
    for i in 0..8u64 {
        let child = observe_probing(std::slice::from_ref(&p));
        assert!(
            attached_within(child.id(), 1, std::time::Duration::from_micros(500)),
            "nothing attached in 120 s"
        );
        // Staggered over the attachment, the gap after it and the run's start.
        std::thread::sleep(std::time::Duration::from_millis(i * 20));
        let out = common::interrupt_and_wait(child, std::time::Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(130) | Some(0)),
            "run {i}: {:?}: {err}",
            out.status
        );
        assert!(err.contains("interrupted"), "run {i}: {err}");
    }
}

/// A file is read as it is on disk while another run's probes are in it: the kernel puts
/// a uprobe's breakpoint into every private mapping of the file that may execute, so a
/// privately mapped file read `int3` at the probed entry and `RET`s (a second run found
/// "0 return instructions" and timed nothing).
#[test]
fn a_file_already_probed_is_read_as_it_is_on_disk() {
    if !common::probes::root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x");
    std::fs::write(&x, go_symtab_program(Some(3))).unwrap();
    let first = Command::new(common::bin())
        .args([
            "observe",
            "--probes",
            "--exe",
            x.to_str().unwrap(),
            "-d",
            "120s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Five tracepoints, then the entry and three returns.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while attachments(first.id()) < 9 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first run attached nothing"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = Command::new(common::bin())
        .args([
            "observe",
            "--probes",
            "--exe",
            x.to_str().unwrap(),
            "-d",
            "100ms",
        ])
        .arg("--json")
        .output()
        .unwrap();
    let out = common::interrupt_and_wait(first, std::time::Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(130));
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    let attached = v["probes"]["attached"].to_string();
    assert!(
        attached.contains("serverHandshake in")
            && attached.contains("(entry and 3 return instructions)"),
        "{attached}"
    );
}
