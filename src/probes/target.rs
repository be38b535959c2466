//! What to probe: the TLS libraries that given processes run (their memory maps and
//! executables, descendants included) or that given files are, told apart as OpenSSL
//! (libssl's exported calls, dynamic or static) or Go (`crypto/tls`, see
//! [`super::gosym`]).

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol};

use super::ProbeError;
use super::gosym::{FileBytes, GoBinary, GoFunction, GoSymError, is_go_data};

/// The calls tlsperf probes in an OpenSSL-compatible library; `SSL_do_handshake` must be
/// among a file's symbols for it to count as one.
pub const OPENSSL_SYMBOLS: [&str; 14] = [
    "SSL_set_fd",
    "SSL_set_accept_state",
    "SSL_set_connect_state",
    "SSL_do_handshake",
    "SSL_accept",
    "SSL_connect",
    "SSL_read_early_data",
    "SSL_write_early_data",
    "SSL_read",
    "SSL_write",
    "SSL_read_ex",
    "SSL_write_ex",
    "SSL_peek",
    "SSL_free",
];

/// Go's handshake functions.
pub const GO_FUNCTIONS: [&str; 2] = [
    "crypto/tls.(*Conn).serverHandshake",
    "crypto/tls.(*Conn).clientHandshake",
];

/// The Go runtime's scheduler points that time a goroutine's running (on CPU): where it
/// is put on a thread, and where it parks (probed with `--probe-go-on-cpu`). A program
/// without both has its handshakes' on-CPU time unmeasured.
pub const GO_SCHEDULER: [&str; 2] = ["runtime.execute", "runtime.gopark"];

/// Go's functions timed as parts of a handshake's work, on its goroutine (entry and every
/// return instruction): (function, part). Looked up by name; the names are Go 1.19's (the
/// tests build with it), with 1.20's key-exchange functions beside them. A part is
/// measured when every Go program probed has one of its functions; one without any
/// (inlined or absent) has it unmeasured, said in `attached`.
/// - `callback`: the certificate's selection, `(*Config).getCertificate`, which calls
///   `GetCertificate` when the program set one.
/// - `verification`: `(*x509.Certificate).Verify` (the peer's chain, either side).
/// - `signature`: the signing methods `crypto/tls` calls through `crypto.Signer`, one per
///   key kind (which one ran names the kind); Ed25519's by value and its pointer wrapper.
/// - `key_exchange`: the key share's generation (its group from its `CurveID` argument)
///   and the shared key: Go 1.19's `generateECDHEParameters` and `SharedKey` methods,
///   1.20's `generateECDHEKey` and `(*ecdh.PrivateKey).ECDH`.
/// - `trust_load`: `(*CertPool).AppendCertsFromPEM` and `loadSystemRoots`, timed on any
///   goroutine (see `trust_load_before` in docs/probes.md).
pub const GO_PARTS: [(&str, &str); 13] = [
    ("crypto/tls.(*Config).getCertificate", "callback"),
    ("crypto/x509.(*Certificate).Verify", "verification"),
    ("crypto/ecdsa.(*PrivateKey).Sign", "signature"),
    ("crypto/rsa.(*PrivateKey).Sign", "signature"),
    ("crypto/ed25519.PrivateKey.Sign", "signature"),
    ("crypto/ed25519.(*PrivateKey).Sign", "signature"),
    ("crypto/tls.generateECDHEParameters", "key_exchange"),
    ("crypto/tls.(*x25519Parameters).SharedKey", "key_exchange"),
    ("crypto/tls.(*nistParameters).SharedKey", "key_exchange"),
    ("crypto/tls.generateECDHEKey", "key_exchange"),
    ("crypto/ecdh.(*PrivateKey).ECDH", "key_exchange"),
    ("crypto/x509.(*CertPool).AppendCertsFromPEM", "trust_load"),
    ("crypto/x509.loadSystemRoots", "trust_load"),
];

/// OpenSSL's libcrypto functions timed as parts of a handshake's work, on the thread inside
/// a handshake call (entry uprobe → uretprobe, the outermost of nested calls): (symbol,
/// part). Chosen from what OpenSSL 3's libssl calls in a TLS 1.3 handshake (checked with
/// uprobes on 3.0): `X509_verify_cert` verifies the peer's chain (and builds the server's
/// own when it has none configured); `EVP_DigestSign` signs the CertificateVerify (TLS 1.2:
/// the ServerKeyExchange); `EVP_PKEY_generate` makes the key share (from
/// `EVP_PKEY_keygen`) and the peer's key object (from `EVP_PKEY_paramgen`),
/// `EVP_PKEY_derive` the shared secret (`EVP_PKEY_keygen`, `EVP_PKEY_paramgen` and
/// `EVP_PKEY_set1_encoded_public_key` begin with an instruction the kernel single-steps at
/// a uprobe, ~18 µs a hit on this kind of VM: not probed);
/// `X509_load_cert_crl_file_ex` (a PEM file) and `X509_load_cert_file_ex` (DER) are where
/// every `X509_STORE_load_file`/`_locations`, `SSL_CTX_load_verify_*` and
/// `*_set_default_verify_paths` reads a file of certificates (OpenSSL 1.1: the names
/// without `_ex`; timed in handshakes or not: see `trust_load` in docs/probes.md).
pub const OPENSSL_PARTS: [(&str, &str); 8] = [
    ("X509_verify_cert", "verification"),
    ("EVP_DigestSign", "signature"),
    ("EVP_PKEY_generate", "key_exchange"),
    ("EVP_PKEY_derive", "key_exchange"),
    ("X509_load_cert_crl_file_ex", "trust_load"),
    ("X509_load_cert_file_ex", "trust_load"),
    ("X509_load_cert_crl_file", "trust_load"),
    ("X509_load_cert_file", "trust_load"),
];

/// The libcrypto beside each of [`SYSTEM_LIBSSL`].
pub const SYSTEM_LIBCRYPTO: [&str; 6] = [
    "/lib/x86_64-linux-gnu/libcrypto.so.3",
    "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
    "/usr/lib64/libcrypto.so.3",
    "/usr/lib/libcrypto.so.3",
    "/lib/x86_64-linux-gnu/libcrypto.so.1.1",
    "/usr/lib64/libcrypto.so.1.1",
];

/// The libssl a dynamically linked program uses on this kind of system, where
/// `--interface` is given with neither `--pid` nor `--exe`.
pub const SYSTEM_LIBSSL: [&str; 6] = [
    "/lib/x86_64-linux-gnu/libssl.so.3",
    "/usr/lib/x86_64-linux-gnu/libssl.so.3",
    "/usr/lib64/libssl.so.3",
    "/usr/lib/libssl.so.3",
    "/lib/x86_64-linux-gnu/libssl.so.1.1",
    "/usr/lib64/libssl.so.1.1",
];

/// What kind of TLS library a target is.
#[derive(Debug, Clone)]
pub enum TargetKind {
    /// OpenSSL-compatible: probed at these of its exported calls ([`OPENSSL_SYMBOLS`] in
    /// that order), each with where its entry probe goes, in bytes past the symbol (0 but
    /// for [`ENTRY_ONLY`] calls, which go on the first instruction the kernel emulates),
    /// then at these functions of [`OPENSSL_PARTS`] (a libcrypto, or a program linked
    /// with OpenSSL statically), each with its entry's offset in the file: a libcrypto
    /// has no calls of its own.
    OpenSsl(Vec<(&'static str, u64)>),
    /// Go: probed at these functions' entries and return instructions.
    Go(Vec<GoFunction>),
}

/// The entry-only calls (no return probe): they may be probed a few instructions in.
pub const ENTRY_ONLY: [&str; 4] = [
    "SSL_set_fd",
    "SSL_set_accept_state",
    "SSL_set_connect_state",
    "SSL_free",
];

/// Where in `symbol` an entry probe is cheap: the kernel emulates a `push`, a jump, a
/// call or a `nop` at a uprobe, and single-steps anything else, a trap that costs about
/// 18 µs per hit on this kind of VM against 0.5 µs (docs/benchmarks.md). The first such
/// instruction of the straight-line prologue is taken when every instruction before it
/// only sets flags (`test`, `cmp`), so the argument registers are still the call's;
/// else the entry itself (offset 0).
fn cheap_entry_offset(file: &object::File<'_>, symbol: &str) -> u64 {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind};
    let Some(sym) = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| !s.is_undefined() && s.name() == Ok(symbol))
    else {
        return 0;
    };
    let va = sym.address();
    let Some(bytes) = file.sections().find_map(|sec| {
        use object::{ObjectSection, SectionKind};
        if sec.kind() != SectionKind::Text || va < sec.address() || va >= sec.address() + sec.size()
        {
            return None;
        }
        let d = sec.data().ok()?;
        let start = usize::try_from(va - sec.address()).ok()?;
        d.get(start..(start + 64).min(d.len()))
    }) else {
        return 0;
    };
    let mut decoder = Decoder::with_ip(64, bytes, va, DecoderOptions::NONE);
    for _ in 0..4 {
        if !decoder.can_decode() {
            break;
        }
        let insn = decoder.decode();
        // push reg, nop, and relative jmp/call/jcc: what arch/x86/kernel/uprobes.c
        // emulates.
        let emulated = (insn.mnemonic() == Mnemonic::Push && insn.op0_kind() == OpKind::Register)
            || insn.mnemonic() == Mnemonic::Nop
            || matches!(insn.op0_kind(), OpKind::NearBranch64 | OpKind::NearBranch32);
        if emulated {
            return insn.ip() - va;
        }
        if !matches!(insn.mnemonic(), Mnemonic::Test | Mnemonic::Cmp) {
            break;
        }
    }
    0
}

/// One file to attach to.
#[derive(Debug, Clone)]
pub struct Target {
    /// The file (a shared library or an executable).
    pub path: PathBuf,
    /// What it is.
    pub kind: TargetKind,
}

impl Target {
    /// It drives handshakes (Go, or OpenSSL with `SSL_do_handshake`), not only parts of
    /// them (a libcrypto).
    pub fn has_calls(&self) -> bool {
        match &self.kind {
            TargetKind::Go(_) => true,
            TargetKind::OpenSsl(symbols) => symbols.iter().any(|(s, _)| *s == "SSL_do_handshake"),
        }
    }

    /// OpenSSL: the [`OPENSSL_PARTS`] functions it has.
    pub fn openssl_parts(&self) -> Vec<&'static str> {
        match &self.kind {
            TargetKind::Go(_) => Vec::new(),
            TargetKind::OpenSsl(symbols) => symbols
                .iter()
                .filter(|(s, _)| OPENSSL_PARTS.iter().any(|(p, _)| p == s))
                .map(|(s, _)| *s)
                .collect(),
        }
    }
}

/// The symbols of [`OPENSSL_SYMBOLS`] that `file` defines (dynamic or static table), each
/// with where its entry probe goes.
fn openssl_symbols(file: &object::File<'_>) -> Vec<(&'static str, u64)> {
    let mut found = BTreeSet::new();
    for sym in file.dynamic_symbols().chain(file.symbols()) {
        if sym.is_undefined() {
            continue;
        }
        if let Ok(name) = sym.name()
            && let Some(s) = OPENSSL_SYMBOLS.iter().find(|s| **s == name)
        {
            found.insert(s.to_string());
        }
    }
    let mut out: Vec<(&'static str, u64)> = OPENSSL_SYMBOLS
        .iter()
        .filter(|s| found.contains(**s))
        .map(|s| {
            let at = if ENTRY_ONLY.contains(s) {
                cheap_entry_offset(file, s)
            } else {
                0
            };
            (*s, at)
        })
        .collect();
    let parts = openssl_part_symbols(file);
    out.extend(
        parts
            .into_iter()
            .filter_map(|s| Some((s, file_offset(file, s)?))),
    );
    out
}

/// Where `symbol`'s code begins in the file, in bytes: the offset a probe is attached at
/// (aya, given a symbol, parses the whole file again for each attachment: for libcrypto's
/// functions that is most of the time attaching takes).
fn file_offset(file: &object::File<'_>, symbol: &str) -> Option<u64> {
    use object::ObjectSection;
    let sym = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| !s.is_undefined() && s.name() == Ok(symbol))?;
    let va = sym.address();
    file.sections().find_map(|sec| {
        let (offset, size) = sec.file_range()?;
        (va >= sec.address() && va < sec.address() + size).then(|| va - sec.address() + offset)
    })
}

/// The functions of [`OPENSSL_PARTS`] that `file` defines; a loader without `_ex` only
/// where its `_ex` form is not (OpenSSL 1.1: in 3.x the one calls the other).
fn openssl_part_symbols(file: &object::File<'_>) -> Vec<&'static str> {
    let mut found = BTreeSet::new();
    for sym in file.dynamic_symbols().chain(file.symbols()) {
        if sym.is_undefined() || sym.kind() != object::SymbolKind::Text {
            continue;
        }
        if let Ok(name) = sym.name()
            && let Some((s, _)) = OPENSSL_PARTS.iter().find(|(s, _)| *s == name)
        {
            found.insert(*s);
        }
    }
    OPENSSL_PARTS
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| found.contains(s))
        .filter(|s| s.ends_with("_ex") || !found.contains(format!("{s}_ex").as_str()))
        .collect()
}

/// Whether `path` is named as a libcrypto (`libcrypto.so…`).
fn is_libcrypto(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("libcrypto.so"))
}

/// The libcrypto beside a libssl (`…/libssl.so.3` → `…/libcrypto.so.3`), when there is one.
pub fn libcrypto_beside(libssl: &Path) -> Option<PathBuf> {
    let name = libssl.file_name()?.to_str()?;
    let rest = name.strip_prefix("libssl.so")?;
    let p = libssl.with_file_name(format!("libcrypto.so{rest}"));
    p.is_file().then_some(p)
}

/// `path` as a target, or why not (`None`: no TLS library in it; a file that cannot be
/// read has none). The file is mapped, never read whole; one larger than
/// [`super::gosym::MAX_FILE`] is an error that says so.
pub fn file_target(path: &Path) -> Result<Option<Target>, ProbeError> {
    let data = match FileBytes::open(path) {
        Ok(data) => data,
        Err(e @ GoSymError::TooLarge { .. }) => return Err(ProbeError::Target(e.to_string())),
        Err(_) => return Ok(None),
    };
    if is_go_data(path, &data) {
        let bin = GoBinary::from_data(path, data).map_err(|e| ProbeError::Target(e.to_string()))?;
        let functions = bin
            .functions(
                &[
                    GO_FUNCTIONS.as_slice(),
                    GO_SCHEDULER.as_slice(),
                    &GO_PARTS.map(|(f, _)| f),
                ]
                .concat(),
            )
            .map_err(|e| ProbeError::Target(e.to_string()))?;
        if !functions
            .iter()
            .any(|f| GO_FUNCTIONS.contains(&f.name.as_str()))
        {
            return Ok(None);
        }
        return Ok(Some(Target {
            path: path.to_path_buf(),
            kind: TargetKind::Go(functions),
        }));
    }
    let file = match object::File::parse(&*data) {
        Ok(file) => file,
        // An ELF file whose headers or tables cannot be read (truncated, offsets past its
        // end, a symbol table larger than the file) says so, not "no TLS library".
        Err(e) if data.starts_with(b"\x7fELF") => {
            let bad = GoSymError::BadElf {
                path: path.to_path_buf(),
                reason: e.to_string(),
            };
            return Err(ProbeError::Target(bad.to_string()));
        }
        Err(_) => return Ok(None),
    };
    let symbols = openssl_symbols(&file);
    let parts_only = is_libcrypto(path)
        && symbols
            .iter()
            .any(|(s, _)| OPENSSL_PARTS.iter().any(|(p, _)| p == s));
    if !symbols.iter().any(|(s, _)| *s == "SSL_do_handshake") && !parts_only {
        return Ok(None);
    }
    Ok(Some(Target {
        path: path.to_path_buf(),
        kind: TargetKind::OpenSsl(symbols),
    }))
}

/// The `--exe` paths made absolute with their links followed (the eBPF library would
/// look a bare name up in the loader's cache, another file than the one read here), one
/// per file: the same file named twice (`go/x`, `./go/x`, a link to it) is probed once.
pub fn exe_paths(exes: &[PathBuf]) -> Result<Vec<PathBuf>, ProbeError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for exe in exes {
        let path = fs::canonicalize(exe).map_err(|e| {
            ProbeError::Target(format!(
                "--exe {}: {}",
                exe.display(),
                crate::error::sentence(&e)
            ))
        })?;
        if inode(&path).is_none_or(|id| seen.insert(id)) {
            out.push(path);
        }
    }
    Ok(out)
}

/// `--exe PATH` (absolute: see [`exe_paths`]): the file must be a Go program with
/// crypto/tls or carry OpenSSL.
pub fn exe_target(path: &Path) -> Result<Target, ProbeError> {
    let meta = fs::metadata(path)
        .map_err(|e| ProbeError::Target(format!("--exe {}: {}", path.display(), e)))?;
    if !meta.is_file() {
        return Err(ProbeError::Target(format!(
            "--exe {}: not a regular file",
            path.display()
        )));
    }
    file_target(path)?.filter(Target::has_calls).ok_or_else(|| {
        ProbeError::Target(format!(
            "--exe {}: no TLS library tlsperf can probe in it (neither Go's crypto/tls nor \
             OpenSSL's SSL_do_handshake); for a program linked with libssl.so, give the \
             library's path (e.g. /lib/x86_64-linux-gnu/libssl.so.3) or --pid",
            path.display()
        ))
    })
}

/// What `/proc/PID/stat` tells of a process that tlsperf uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Its parent.
    pub ppid: u32,
    /// When it started, in clock ticks after boot: with the pid, it names one process
    /// even when the pid is used again.
    pub start: u64,
}

/// `proc_root`/PID/stat, read (`None`: no such process).
pub fn stat(proc_root: &Path, pid: u32) -> Option<ProcStat> {
    let text = fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    // "pid (comm) state ppid …": comm may hold spaces and parentheses; the fields after
    // it begin at field 3 (state).
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    let num = |field: usize| -> Option<u64> { fields.get(field - 3)?.parse().ok() };
    Some(ProcStat {
        ppid: u32::try_from(num(4)?).ok()?,
        start: num(22)?,
    })
}

/// A process's children, grandchildren…, from /proc (for finding their libraries; the
/// kernel side follows forks itself).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(s) = stat(Path::new("/proc"), p) {
                parent_of.push((p, s.ppid));
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (child, parent) in &parent_of {
            if *parent == p && !out.contains(child) && out.len() < 65_536 {
                out.push(*child);
                frontier.push(*child);
            }
        }
    }
    out
}

/// The process's name, for messages.
pub fn comm(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string())
}

/// The files a process and its descendants run that may hold a TLS library: their
/// executables and the `libssl.so*` and `libcrypto.so*` in their memory maps, as this
/// process can open them.
pub fn pid_files(pid: u32) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for p in std::iter::once(pid).chain(descendants(pid)) {
        if let Ok(exe) = fs::read_link(format!("/proc/{p}/exe")) {
            files.push(in_root(p, &exe));
        }
        if let Ok(maps) = fs::read_to_string(format!("/proc/{p}/maps")) {
            for line in maps.lines() {
                if let Some(path) = line.split_whitespace().nth(5)
                    && path.starts_with('/')
                    && Path::new(path)
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| {
                            n.starts_with("libssl.so") || n.starts_with("libcrypto.so")
                        })
                {
                    files.push(in_root(p, Path::new(path)));
                }
            }
        }
    }
    files
}

/// A file's identity: (device, inode).
pub fn inode(path: &Path) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// `--pid PID`: the libraries the process and its descendants run (none: an empty list).
pub fn pid_targets(pid: u32) -> Result<Vec<Target>, ProbeError> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(ProbeError::Target(format!("--pid {pid}: no such process")));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for f in pid_files(pid) {
        let Some(id) = inode(&f) else { continue };
        if !seen.insert(id) {
            continue;
        }
        if let Some(t) = file_target(&f)? {
            out.push(t);
        }
    }
    Ok(out)
}

/// `--pid PID` names a process without any TLS library (and no `--exe` names one).
pub fn no_library(pid: u32) -> ProbeError {
    ProbeError::Target(format!(
        "--pid {pid} ({}): no TLS library tlsperf can probe: no libssl.so in its memory map \
         or its children's, and its executable is neither a Go program with crypto/tls nor \
         linked with OpenSSL statically (for one that starts such programs later, name their \
         library or executable with --exe too)",
        comm(pid).unwrap_or_else(|| "?".into())
    ))
}

/// A path from a process's view (its mount namespace) as this process can open it.
fn in_root(pid: u32, path: &Path) -> PathBuf {
    let rooted =
        Path::new(&format!("/proc/{pid}/root")).join(path.strip_prefix("/").unwrap_or(path));
    if path.exists() {
        // The same file when both name one inode; else the process's own.
        match (fs::metadata(path), fs::metadata(&rooted)) {
            (Ok(a), Ok(b)) if a.dev() == b.dev() && a.ino() == b.ino() => path.to_path_buf(),
            (_, Ok(_)) => rooted,
            _ => path.to_path_buf(),
        }
    } else {
        rooted
    }
}

/// The system's libssl (`--interface` alone): every process using it is probed.
pub fn system_targets() -> Result<Vec<Target>, ProbeError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for p in SYSTEM_LIBSSL.iter().chain(&SYSTEM_LIBCRYPTO) {
        let Ok(meta) = fs::metadata(p) else { continue };
        if !seen.insert((meta.dev(), meta.ino())) {
            continue;
        }
        if let Some(t) = file_target(Path::new(p))? {
            out.push(t);
        }
    }
    if !out.iter().any(|t| t.has_calls()) {
        return Err(ProbeError::Target(format!(
            "no system libssl found ({}); name what to probe with --pid PID or --exe PATH",
            SYSTEM_LIBSSL[..4].join(", ")
        )));
    }
    Ok(out)
}
