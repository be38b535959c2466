//! Go binaries: where eBPF uprobes go in a program built by Go.
//!
//! This module owns reading a Go ELF executable (x86-64, Go 1.17 or newer, whose register
//! ABI the probes rely on) and answering one question: for a few named functions
//! (`crypto/tls.(*Conn).serverHandshake`, …), at which offsets *in the file* do their entry
//! and each of their `RET` instructions lie. uretprobes must never be used on Go (its
//! goroutine stacks move, and a uretprobe's rewritten return address crashes the program),
//! so a uprobe is attached at every return instruction instead.
//!
//! Function bounds come from the ELF `.symtab` when the binary has one, else from Go's own
//! function table, the pclntab (`.gopclntab`, or found by its magic number when even the
//! section headers are stripped), in the formats of Go 1.16/1.17, 1.18/1.19 and 1.20+. The
//! `RET`s are found by decoding the function's machine code, never by scanning for bytes.
//! The Go version comes from the `.go.buildinfo` blob.
//!
//! The file is mapped ([`FileBytes`]), never read whole, and refused beyond
//! [`MAX_FILE`]; every scan is bounded: the build info is looked for in the first
//! [`BUILDINFO_WINDOW`] bytes of each loaded segment (where Go's linker puts it), a
//! function name is read up to [`MAX_NAME`] bytes, and a function with more than
//! [`MAX_RETURNS`] return instructions is refused (each would be one uprobe).

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable, SymbolKind};

use crate::error::{Classify, ErrorClass, io_input_class};

/// The start of the `.go.buildinfo` blob (Go 1.13+).
const BUILDINFO_MAGIC: &[u8] = b"\xff Go buildinf:";
/// pclntab magic numbers (little-endian `uint32` at the table's start).
const PCLNTAB_GO12: u32 = 0xffff_fffb;
const PCLNTAB_GO116: u32 = 0xffff_fffa;
const PCLNTAB_GO118: u32 = 0xffff_fff0;
const PCLNTAB_GO120: u32 = 0xffff_fff1;
/// ELF `e_machine` of x86-64.
const EM_X86_64: u16 = 62;
/// Symbols only the Go runtime defines.
const GO_RUNTIME_SYMBOLS: [&str; 3] = ["runtime.main", "runtime.goexit", "runtime.text"];
/// The pclntab's section: its own, or (in a PIE) inside the relocated read-only data.
const PCLNTAB_SECTIONS: [&str; 2] = [".gopclntab", ".data.rel.ro.gopclntab"];
/// Sections only the Go linker writes.
const GO_SECTIONS: [&str; 4] = [
    ".go.buildinfo",
    ".gopclntab",
    ".data.rel.ro.gopclntab",
    ".note.go.buildid",
];

/// The largest executable or library tlsperf maps to look for a TLS library in: 4 GiB.
/// Go programs and libssl are far smaller (the largest Go programs in common use are a
/// few hundred MB); a file beyond is refused with a sentence before anything is read.
pub const MAX_FILE: u64 = 4 << 30;

/// Where the build-info blob is looked for: the first 64 KiB of each loaded segment (Go's
/// linker puts `.go.buildinfo` at the start of the data segment; Go's own
/// `debug/buildinfo` reads the same 64 KiB).
pub const BUILDINFO_WINDOW: usize = 64 << 10;

/// The longest function name read from a pclntab: 16 KiB (Go's longest names, generic
/// instantiations, are a few hundred bytes). A name without its NUL within it is not one.
pub const MAX_NAME: usize = 16 << 10;

/// The most return instructions a probed function may have: 64 (Go 1.19's
/// `serverHandshake` has 3, `clientHandshake` 11). Each is one uprobe, which the kernel
/// attaches and removes one at a time; a function with more is not a Go handshake as Go
/// builds it, and the file is refused ([`GoSymError::TooManyReturns`]).
pub const MAX_RETURNS: usize = 64;

/// A file's bytes, mapped read-only: only the pages looked at are read (a sparse file of
/// any size costs no memory), and the size is bounded by [`MAX_FILE`].
pub struct FileBytes {
    map: Option<memmap2::Mmap>,
}

impl FileBytes {
    /// Maps `path` (a regular file; an empty one maps to no bytes).
    pub fn open(path: &Path) -> Result<FileBytes, GoSymError> {
        let read_err = |source| GoSymError::Read {
            path: path.to_path_buf(),
            source,
        };
        let (file, meta) = crate::files::open_input(path).map_err(read_err)?;
        if meta.len() > MAX_FILE {
            return Err(GoSymError::TooLarge {
                path: path.to_path_buf(),
                size: meta.len(),
            });
        }
        if meta.len() == 0 {
            return Ok(FileBytes { map: None });
        }
        // Shared, not private: the kernel puts a uprobe's breakpoint into every private
        // mapping of the file that may execute (its `valid_vma`), so a private mapping
        // made while another run's probes are in place reads `int3` where the code has
        // its entry and `RET`s (seen: 0 return instructions found). A shared read-only
        // mapping shows the page cache, which uprobes never change: what `read` returns.
        // SAFETY: read-only; a file changed while mapped changes the bytes read, which
        // every reader here checks as it would a file's contents.
        let map = unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(read_err)?;
        Ok(FileBytes { map: Some(map) })
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// A file size in words: `53.7 GB`.
fn size_words(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// A Go function's attach points, as offsets into the ELF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoFunction {
    /// The function's Go name, e.g. `crypto/tls.(*Conn).serverHandshake`.
    pub name: String,
    /// File offset of its first instruction (where the entry uprobe goes).
    pub entry_offset: u64,
    /// File offsets of every `RET` instruction in its body, in address order (where the
    /// "return" uprobes go).
    pub return_offsets: Vec<u64>,
}

/// Where a binary's function names and bounds were read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolSource {
    /// The ELF symbol table (`.symtab`): start and size of each function.
    Symtab,
    /// Go's own function table (`.gopclntab`), which survives `-ldflags=-s -w` and `strip`:
    /// a function ends where the next one starts.
    Pclntab,
}

impl fmt::Display for SymbolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SymbolSource::Symtab => "the ELF symbol table",
            SymbolSource::Pclntab => "Go's pclntab",
        })
    }
}

/// What a Go binary offers: a checked x86-64 Go 1.17+ ELF file, mapped.
pub struct GoBinary {
    /// The file.
    pub path: PathBuf,
    /// The Go release that built it (`go1.21.5`), from `.go.buildinfo`; `None` when that
    /// could not be read.
    pub go_version: Option<String>,
    /// Where function bounds are read from.
    pub symbols_from: SymbolSource,
    /// The whole file, mapped.
    data: FileBytes,
}

impl fmt::Debug for GoBinary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoBinary")
            .field("path", &self.path)
            .field("go_version", &self.go_version)
            .field("symbols_from", &self.symbols_from)
            .field("len", &self.data.len())
            .finish()
    }
}

/// Why a Go binary's attach points cannot be found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GoSymError {
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_FILE`].
    #[error(
        "{} is {}, larger than the {} GiB tlsperf reads of a program or library; no Go \
         program or libssl is that large, so it is not read",
        path.display(), size_words(*size), MAX_FILE >> 30
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
    },
    /// A function has more return instructions than [`MAX_RETURNS`].
    #[error(
        "{}: function {function} has {returns} return instructions, more than the \
         {MAX_RETURNS} tlsperf attaches a probe to in one function (Go builds its \
         handshake functions with a few); it is not probed",
        path.display()
    )]
    TooManyReturns {
        /// The file.
        path: PathBuf,
        /// The function's Go name.
        function: String,
        /// How many it has.
        returns: usize,
    },
    /// The file is not an ELF file.
    #[error("{} is not an ELF executable; tlsperf can probe only Linux ELF binaries", path.display())]
    NotElf {
        /// The file.
        path: PathBuf,
    },
    /// The ELF headers are damaged.
    #[error("{}: its ELF headers cannot be read ({reason})", path.display())]
    BadElf {
        /// The file.
        path: PathBuf,
        /// What is wrong, as the ELF reader says it.
        reason: String,
    },
    /// The binary is for another processor.
    #[error("{} is a {arch} binary; tlsperf's Go probes support only x86-64", path.display())]
    WrongArch {
        /// The file.
        path: PathBuf,
        /// The processor it is built for, in words.
        arch: String,
    },
    /// Nothing in the file says Go built it.
    #[error(
        "{} was not built by Go (it has no .go.buildinfo, no .gopclntab and no Go runtime \
         symbols); tlsperf probes crypto/tls only in Go binaries",
        path.display()
    )]
    NotGo {
        /// The file.
        path: PathBuf,
    },
    /// Built by a Go that passes arguments on the stack.
    #[error(
        "{} was built by {version}, which passes arguments on the stack; tlsperf's Go probes \
         need a binary built by Go 1.17 or newer (register ABI)",
        path.display()
    )]
    TooOld {
        /// The file.
        path: PathBuf,
        /// The Go release, e.g. `go1.16.4` or `Go 1.15 or older`.
        version: String,
    },
    /// A Go binary without any function table.
    #[error(
        "{}: no symbol table and no Go pclntab; tlsperf cannot find crypto/tls in it \
         (was it built by Go?)",
        path.display()
    )]
    NoSymbols {
        /// The file.
        path: PathBuf,
    },
    /// The pclntab is there but cannot be read.
    #[error("{}: its Go pclntab cannot be read: {reason}", path.display())]
    BadPclntab {
        /// The file.
        path: PathBuf,
        /// What is wrong, as a sentence.
        reason: String,
    },
    /// A function's code is not in the file.
    #[error(
        "{}: function {function} at address {address:#x} is not in any segment loaded from \
         the file",
        path.display()
    )]
    OutsideFile {
        /// The file.
        path: PathBuf,
        /// The function's Go name.
        function: String,
        /// Its virtual address.
        address: u64,
    },
}

impl Classify for GoSymError {
    fn class(&self) -> ErrorClass {
        match self {
            GoSymError::Read { source, .. } => io_input_class(source),
            // Every other case is about the binary the user named.
            _ => ErrorClass::Input,
        }
    }
}

impl GoBinary {
    /// Opens and checks: an ELF x86-64 file built by Go (has `.go.buildinfo` or
    /// `.gopclntab` or the runtime symbols); refuses Go older than 1.17 (stack ABI) with a
    /// sentence when the version is known.
    ///
    /// Chooses the function table: `.symtab` when it holds Go's runtime symbols, else the
    /// pclntab; a Go binary with neither is an error.
    pub fn open(path: &Path) -> Result<GoBinary, GoSymError> {
        GoBinary::from_data(path, FileBytes::open(path)?)
    }

    /// [`GoBinary::open`] on the bytes of `path`, already mapped.
    pub fn from_data(path: &Path, data: FileBytes) -> Result<GoBinary, GoSymError> {
        let (go_version, symbols_from) = {
            let img = Image::parse(path, &data)?;
            img.require_x86_64()?;
            let version = buildinfo_version(&img);
            if let Some(v) = &version
                && go_minor(v).is_some_and(|minor| minor < 17)
            {
                return Err(GoSymError::TooOld {
                    path: path.to_path_buf(),
                    version: v.clone(),
                });
            }
            let source = if symtab_is_go(&img) {
                if version.is_none()
                    && let Some((table, _)) = img.pclntab_section()
                    && pclntab_magic(table) == Some(PCLNTAB_GO12)
                {
                    return Err(img.too_old_by_pclntab());
                }
                SymbolSource::Symtab
            } else {
                match locate_pclntab(&img)? {
                    Some(_) => SymbolSource::Pclntab,
                    None if version.is_some() || has_go_section(&img) => {
                        return Err(GoSymError::NoSymbols {
                            path: path.to_path_buf(),
                        });
                    }
                    None => {
                        return Err(GoSymError::NotGo {
                            path: path.to_path_buf(),
                        });
                    }
                }
            };
            (version, source)
        };
        Ok(GoBinary {
            path: path.to_path_buf(),
            go_version,
            symbols_from,
            data,
        })
    }

    /// The named functions that exist (e.g. `crypto/tls.(*Conn).serverHandshake`,
    /// `crypto/tls.(*Conn).clientHandshake`), each with entry and `RET` file offsets, in
    /// the order asked. A name absent from the binary is simply not returned.
    pub fn functions(&self, names: &[&str]) -> Result<Vec<GoFunction>, GoSymError> {
        self.functions_from(names, self.symbols_from)
    }

    /// [`GoBinary::functions`], with function bounds read from `source` (the pclntab can be
    /// read even when the symbol table is there).
    pub(crate) fn functions_from(
        &self,
        names: &[&str],
        source: SymbolSource,
    ) -> Result<Vec<GoFunction>, GoSymError> {
        let img = Image::parse(&self.path, &self.data)?;
        function_ranges(&img, names, source)?
            .iter()
            .map(|r| attach_points(&img, r))
            .collect()
    }
}

/// Is this file a Go binary at all (cheap check used to decide between OpenSSL and Go
/// probing)? True for an ELF file, of any processor, with Go's sections, runtime symbols,
/// build-info blob or pclntab; false for anything else, including a file that cannot be
/// read. [`GoBinary::open`] then says whether it can be probed.
pub fn is_go_binary(path: &Path) -> bool {
    FileBytes::open(path).is_ok_and(|data| is_go_data(path, &data))
}

/// [`is_go_binary`] on the bytes of `path`, already mapped.
pub fn is_go_data(path: &Path, data: &[u8]) -> bool {
    let Ok(img) = Image::parse(path, data) else {
        return false;
    };
    has_go_section(&img)
        || symtab_is_go(&img)
        || buildinfo_version(&img).is_some()
        || matches!(
            locate_pclntab(&img),
            Ok(Some(_)) | Err(GoSymError::TooOld { .. })
        )
}

/// A `PT_LOAD` segment.
#[derive(Debug, Clone, Copy)]
struct Load {
    vaddr: u64,
    offset: u64,
    filesz: u64,
    exec: bool,
}

/// A parsed ELF file and its loaded segments.
struct Image<'a> {
    path: &'a Path,
    data: &'a [u8],
    elf: object::File<'a>,
    loads: Vec<Load>,
}

impl<'a> Image<'a> {
    fn parse(path: &'a Path, data: &'a [u8]) -> Result<Image<'a>, GoSymError> {
        match object::FileKind::parse(data) {
            Ok(object::FileKind::Elf32 | object::FileKind::Elf64) => {}
            _ => {
                return Err(GoSymError::NotElf {
                    path: path.to_path_buf(),
                });
            }
        }
        let elf = object::File::parse(data).map_err(|e| GoSymError::BadElf {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let loads = elf
            .segments()
            .map(|s| {
                let (offset, filesz) = s.file_range();
                Load {
                    vaddr: s.address(),
                    offset,
                    filesz,
                    exec: s.permissions().executable(),
                }
            })
            .collect();
        Ok(Image {
            path,
            data,
            elf,
            loads,
        })
    }

    /// An error unless this is a 64-bit x86-64 ELF file.
    fn require_x86_64(&self) -> Result<(), GoSymError> {
        let machine = elf_machine(self.data);
        if self.elf.is_64() && machine == Some(EM_X86_64) {
            return Ok(());
        }
        Err(GoSymError::WrongArch {
            path: self.path.to_path_buf(),
            arch: machine_name(machine, self.elf.is_64()),
        })
    }

    fn too_old_by_pclntab(&self) -> GoSymError {
        GoSymError::TooOld {
            path: self.path.to_path_buf(),
            version: "Go 1.15 or older".to_string(),
        }
    }

    /// A section's file bytes and address.
    fn section(&self, name: &str) -> Option<(&'a [u8], u64)> {
        let s = self.elf.section_by_name(name)?;
        let data = s.data().ok()?;
        Some((data, s.address()))
    }

    /// The pclntab section's bytes and address, when section headers are there.
    fn pclntab_section(&self) -> Option<(&'a [u8], u64)> {
        PCLNTAB_SECTIONS.iter().find_map(|name| self.section(name))
    }

    /// The file offset of virtual address `va`, and how many file bytes its segment holds
    /// from there on.
    fn file_offset(&self, va: u64) -> Option<(u64, u64)> {
        self.loads.iter().find_map(|l| {
            let rel = va.checked_sub(l.vaddr)?;
            (rel < l.filesz).then(|| (l.offset + rel, l.filesz - rel))
        })
    }

    /// `len` file bytes at virtual address `va`, if the file holds them all.
    fn bytes_at(&self, va: u64, len: u64) -> Option<&'a [u8]> {
        let (off, avail) = self.file_offset(va)?;
        if len > avail {
            return None;
        }
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        self.data.get(start..end)
    }

    /// Whether the address range `[start, end]` lies in one executable segment.
    fn in_text(&self, start: u64, end: u64) -> bool {
        start <= end
            && self
                .loads
                .iter()
                .any(|l| l.exec && l.vaddr <= start && end <= l.vaddr.saturating_add(l.filesz))
    }

    /// A text symbol's address.
    fn symbol_address(&self, name: &str) -> Option<u64> {
        let table = self.elf.symbol_table()?;
        table
            .symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| s.address())
    }
}

/// The ELF header's `e_machine`.
fn elf_machine(data: &[u8]) -> Option<u16> {
    let bytes: [u8; 2] = data.get(18..20)?.try_into().ok()?;
    Some(match data.get(5) {
        Some(2) => u16::from_be_bytes(bytes),
        _ => u16::from_le_bytes(bytes),
    })
}

/// A processor, in words, from `e_machine`.
fn machine_name(machine: Option<u16>, is_64: bool) -> String {
    match machine {
        Some(3) => "32-bit x86 (386)".to_string(),
        Some(8) => "MIPS".to_string(),
        Some(20 | 21) => "PowerPC".to_string(),
        Some(22) => "s390x".to_string(),
        Some(40) => "32-bit ARM".to_string(),
        Some(EM_X86_64) if !is_64 => "32-bit x86-64 (x32)".to_string(),
        Some(EM_X86_64) => "x86-64".to_string(),
        Some(183) => "ARM64".to_string(),
        Some(243) => "RISC-V".to_string(),
        Some(258) => "LoongArch".to_string(),
        Some(other) => format!("machine type {other}"),
        None => "unknown-processor".to_string(),
    }
}

/// Whether the file has a section only the Go linker writes.
fn has_go_section(img: &Image<'_>) -> bool {
    GO_SECTIONS
        .iter()
        .any(|name| img.elf.section_by_name(name).is_some())
}

/// Whether `.symtab` is there and holds the Go runtime's functions.
fn symtab_is_go(img: &Image<'_>) -> bool {
    img.elf.symbol_table().is_some_and(|table| {
        table
            .symbols()
            .any(|s| s.name().is_ok_and(|n| GO_RUNTIME_SYMBOLS.contains(&n)))
    })
}

// ---------------------------------------------------------------------------------------
// Go version (.go.buildinfo)
// ---------------------------------------------------------------------------------------

/// The Go release that built the file, from its `.go.buildinfo` blob (by section, else by
/// its 16-byte-aligned magic in the first [`BUILDINFO_WINDOW`] bytes of a loaded segment,
/// where Go's linker puts it: never a scan of the whole file).
fn buildinfo_version(img: &Image<'_>) -> Option<String> {
    if let Some((blob, _)) = img.section(".go.buildinfo")
        && let Some(v) = parse_buildinfo(img, blob)
    {
        return Some(v);
    }
    img.loads.iter().take(MAX_SEGMENTS).find_map(|load| {
        let start = usize::try_from(load.offset).ok()?;
        let len = usize::try_from(load.filesz).ok()?.min(BUILDINFO_WINDOW);
        let window = img.data.get(start..start.checked_add(len)?)?;
        memchr::memmem::find_iter(window, BUILDINFO_MAGIC)
            .filter(|pos| (start + pos) % 16 == 0)
            .find_map(|pos| parse_buildinfo(img, img.data.get(start + pos..)?))
    })
}

/// The loaded segments looked at (a Go program has four or five).
const MAX_SEGMENTS: usize = 64;

/// The most places tried as a pclntab found by its magic number (section headers
/// stripped): a real one is the first or second.
const MAX_CANDIDATES: usize = 1024;

/// Reads the version string out of a build-info blob.
///
/// The blob is the 14-byte magic, the pointer size, a flags byte and padding to 16 bytes,
/// then two pointers (to `runtime.buildVersion` and `runtime.modinfo`, Go strings). With
/// flag bit 1 (Go 1.18+) the pointers are unused and the version follows at offset 32 as a
/// uvarint length and the bytes. Flag bit 0 means big-endian pointers.
fn parse_buildinfo(img: &Image<'_>, blob: &[u8]) -> Option<String> {
    if !blob.starts_with(BUILDINFO_MAGIC) {
        return None;
    }
    let ptr_size = usize::from(*blob.get(14)?);
    let flags = *blob.get(15)?;
    let version: &[u8] = if flags & 2 != 0 {
        let rest = blob.get(32..)?;
        let (len, used) = uvarint(rest)?;
        let len = usize::try_from(len).ok()?;
        rest.get(used..used.checked_add(len)?)?
    } else {
        if ptr_size != 4 && ptr_size != 8 {
            return None;
        }
        let big = flags & 1 != 0;
        let header_va = read_uint(blob, 16, ptr_size, big)?;
        let header = img.bytes_at(header_va, 2 * ptr_size as u64)?;
        let str_va = read_uint(header, 0, ptr_size, big)?;
        let str_len = read_uint(header, ptr_size, ptr_size, big)?;
        if str_len > 256 {
            return None;
        }
        img.bytes_at(str_va, str_len)?
    };
    let version = std::str::from_utf8(version).ok()?;
    let plausible = !version.is_empty()
        && version.len() <= 256
        && (version.starts_with("go") || version.starts_with("devel"));
    plausible.then(|| version.to_string())
}

/// The minor release number of a Go version string: 19 for `go1.19.8`, `go1.19rc1` or
/// `devel go1.19-abcdef`.
fn go_minor(version: &str) -> Option<u32> {
    let at = version.find("go1")?;
    let rest = &version[at + 3..];
    let Some(rest) = rest.strip_prefix('.') else {
        // "go1" itself: Go 1.0.
        return Some(0);
    };
    let digits: &str = &rest[..rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len())];
    digits.parse().ok()
}

/// A Go/protobuf unsigned varint: the value and the bytes it took.
fn uvarint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// An unsigned integer of `size` (4 or 8) bytes at `off`.
fn read_uint(bytes: &[u8], off: usize, size: usize, big: bool) -> Option<u64> {
    let b = bytes.get(off..off.checked_add(size)?)?;
    match size {
        4 => {
            let a: [u8; 4] = b.try_into().ok()?;
            Some(u64::from(if big {
                u32::from_be_bytes(a)
            } else {
                u32::from_le_bytes(a)
            }))
        }
        8 => {
            let a: [u8; 8] = b.try_into().ok()?;
            Some(if big {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            })
        }
        _ => None,
    }
}

fn u32_le(bytes: &[u8], off: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(off..off.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

// ---------------------------------------------------------------------------------------
// pclntab
// ---------------------------------------------------------------------------------------

/// The little-endian magic number at the start of a pclntab candidate.
fn pclntab_magic(data: &[u8]) -> Option<u32> {
    u32_le(data, 0)
}

/// Go's function table (little-endian, as on x86-64).
///
/// Header: magic `u32`, two zero bytes, the instruction quantum, the pointer size, then
/// pointer-sized words. Go 1.16/1.17 (`0xfffffffa`): nfunc, nfiles, then the offsets of
/// funcnametab, cutab, filetab, pctab and the functab. Go 1.18/1.19 (`0xfffffff0`) and
/// 1.20+ (`0xfffffff1`): nfunc, nfiles, textStart, then the same five offsets. Offsets are
/// from the table's start.
///
/// The functab holds `nfunc` (entry, funcoff) pairs sorted by entry, then one more entry:
/// the end of the last function. In Go 1.18+ both are `u32` and an entry is an offset from
/// textStart; before, both are pointer-sized and an entry is an address. `funcoff` is from
/// the functab's start, where the function's `_func` record begins: its entry (`u32` in
/// 1.18+, else a pointer), then `nameOff`, an `i32` offset into funcnametab of a
/// NUL-terminated name.
#[derive(Debug)]
struct Pclntab<'a> {
    data: &'a [u8],
    /// Go 1.18+ layout (`u32` functab fields relative to `text_start`).
    relative: bool,
    ptr_size: usize,
    nfunc: usize,
    text_start: u64,
    funcnametab: usize,
    functab: usize,
}

/// One function's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    name: String,
    start: u64,
    end: u64,
}

impl<'a> Pclntab<'a> {
    /// Reads the header of a Go 1.16+ table. `text_hint` is the address of `runtime.text`
    /// when known otherwise (the header's copy may be unrelocated in a PIE); the header's
    /// textStart, then `text_fallback` are used without it.
    fn parse(
        data: &'a [u8],
        text_hint: Option<u64>,
        text_fallback: Option<u64>,
    ) -> Result<Pclntab<'a>, String> {
        let magic = pclntab_magic(data).ok_or("it is shorter than its header")?;
        let relative = match magic {
            PCLNTAB_GO118 | PCLNTAB_GO120 => true,
            PCLNTAB_GO116 => false,
            other => return Err(format!("its magic number {other:#010x} is not a known one")),
        };
        let (pad, quantum, ptr_size) = (data.get(4..6), data.get(6), data.get(7));
        if pad != Some(&[0, 0][..]) || !matches!(quantum, Some(1 | 2 | 4)) {
            return Err("its header is malformed".to_string());
        }
        let ptr_size = match ptr_size {
            Some(4) => 4,
            Some(8) => 8,
            _ => return Err("its pointer size is neither 4 nor 8".to_string()),
        };
        let word = |i: usize| {
            read_uint(data, 8 + i * ptr_size, ptr_size, false)
                .ok_or_else(|| "its header is truncated".to_string())
        };
        let as_offset = |v: u64, what: &str| {
            usize::try_from(v)
                .ok()
                .filter(|&o| o < data.len())
                .ok_or_else(|| format!("its {what} offset {v:#x} is past its end"))
        };
        let nfunc = word(0)?;
        let (text_start, names_word, functab_word) = if relative {
            let header_text = word(2)?;
            let text = text_hint
                .or((header_text != 0).then_some(header_text))
                .or(text_fallback)
                .ok_or("it does not record where the code starts")?;
            (text, word(3)?, word(7)?)
        } else {
            (0, word(2)?, word(6)?)
        };
        let funcnametab = as_offset(names_word, "function-name table")?;
        let functab = as_offset(functab_word, "function table")?;
        let field = if relative { 4 } else { ptr_size };
        let needed = usize::try_from(nfunc)
            .ok()
            .and_then(|n| n.checked_mul(2)?.checked_add(1)?.checked_mul(field))
            .ok_or_else(|| format!("it claims {nfunc} functions"))?;
        if nfunc == 0 || needed > data.len() - functab {
            return Err(format!(
                "it claims {nfunc} functions, more than its {} bytes can hold",
                data.len()
            ));
        }
        Ok(Pclntab {
            data,
            relative,
            ptr_size,
            nfunc: usize::try_from(nfunc).map_err(|_| format!("it claims {nfunc} functions"))?,
            text_start,
            funcnametab,
            functab,
        })
    }

    fn field_size(&self) -> usize {
        if self.relative { 4 } else { self.ptr_size }
    }

    /// Functab field `i` (entries at even, funcoffs at odd indices).
    fn functab_field(&self, i: usize) -> Option<u64> {
        let size = self.field_size();
        read_uint(
            self.data,
            self.functab.checked_add(i.checked_mul(size)?)?,
            size,
            false,
        )
    }

    /// Entry address of function `i`; `i == nfunc` gives the end of the last one.
    fn entry(&self, i: usize) -> Option<u64> {
        let v = self.functab_field(2 * i)?;
        if self.relative {
            self.text_start.checked_add(v)
        } else {
            Some(v)
        }
    }

    /// The bytes where the name of function `i` begins (to its table's end).
    fn name_bytes(&self, i: usize) -> Option<&'a [u8]> {
        let funcoff = usize::try_from(self.functab_field(2 * i + 1)?).ok()?;
        let record = self.functab.checked_add(funcoff)?;
        let name_field = if self.relative { 4 } else { self.ptr_size };
        let name_off = usize::try_from(u32_le(self.data, record.checked_add(name_field)?)?).ok()?;
        self.data.get(self.funcnametab.checked_add(name_off)?..)
    }

    /// Name of function `i`: NUL-terminated within [`MAX_NAME`] bytes, else none.
    fn name(&self, i: usize) -> Option<&'a str> {
        let rest = self.name_bytes(i)?;
        let len = memchr::memchr(0, &rest[..rest.len().min(MAX_NAME)])?;
        std::str::from_utf8(rest.get(..len)?).ok()
    }

    /// The bounds of the named functions that exist. Each function's name is compared
    /// with the wanted ones where it begins (a wanted name, then its NUL), never searched
    /// for its end: the scan costs at most the wanted names' length per function, however
    /// the names run on (a crafted table of 100,000 names pointing into 20 MB without a
    /// NUL cost minutes when each was read to its end).
    fn ranges(&self, wanted: &HashSet<&str>) -> Vec<Range> {
        let mut found = Vec::new();
        for i in 0..self.nfunc {
            let Some(rest) = self.name_bytes(i) else {
                continue;
            };
            let Some(name) = wanted.iter().copied().find(|w| {
                rest.strip_prefix(w.as_bytes())
                    .is_some_and(|after| after.first() == Some(&0))
            }) else {
                continue;
            };
            if let (Some(start), Some(end)) = (self.entry(i), self.entry(i + 1)) {
                found.push(Range {
                    name: name.to_string(),
                    start,
                    end: end.max(start),
                });
            }
        }
        found
    }
}

/// Finds and reads the pclntab: the `.gopclntab` section, else (section headers stripped)
/// a table found by its magic number in a loaded segment. `Ok(None)` when there is none; a
/// Go 1.2–1.15 table is [`GoSymError::TooOld`].
fn locate_pclntab<'a>(img: &Image<'a>) -> Result<Option<Pclntab<'a>>, GoSymError> {
    let text_hint = img.symbol_address("runtime.text");
    let text_fallback = img.section(".text").map(|(_, addr)| addr);
    let fits = |t: &Pclntab<'_>| match (t.entry(0), t.entry(t.nfunc)) {
        (Some(start), Some(end)) => img.in_text(start, end),
        _ => false,
    };
    if let Some((table, _)) = img.pclntab_section() {
        if pclntab_magic(table) == Some(PCLNTAB_GO12) {
            return Err(img.too_old_by_pclntab());
        }
        let bad = |reason: String| GoSymError::BadPclntab {
            path: img.path.to_path_buf(),
            reason,
        };
        let parsed = Pclntab::parse(table, text_hint, text_fallback).map_err(bad)?;
        if !fits(&parsed) {
            return Err(bad(
                "the functions it lists are not in the file's code segment".to_string(),
            ));
        }
        return Ok(Some(parsed));
    }
    // No section: look for "magic, 0, 0, quantum 1, pointer size 8" in the loaded bytes,
    // trying at most MAX_CANDIDATES places (a file made of the magic number would
    // otherwise have each of its millions tried).
    let mut saw_go12 = false;
    let mut tried = 0usize;
    for load in img.loads.iter().take(MAX_SEGMENTS) {
        let (Ok(start), Ok(len)) = (usize::try_from(load.offset), usize::try_from(load.filesz))
        else {
            continue;
        };
        let Some(segment) = start
            .checked_add(len)
            .and_then(|end| img.data.get(start..end))
        else {
            continue;
        };
        for magic in [PCLNTAB_GO120, PCLNTAB_GO118, PCLNTAB_GO116, PCLNTAB_GO12] {
            let mut needle = magic.to_le_bytes().to_vec();
            needle.extend_from_slice(&[0, 0, 1, 8]);
            for pos in memchr::memmem::find_iter(segment, &needle) {
                let Some(candidate) = segment.get(pos..) else {
                    continue;
                };
                if magic == PCLNTAB_GO12 {
                    saw_go12 = true;
                    continue;
                }
                tried += 1;
                if tried > MAX_CANDIDATES {
                    return Err(GoSymError::BadPclntab {
                        path: img.path.to_path_buf(),
                        reason: format!(
                            "more than {MAX_CANDIDATES} places look like its start and none \
                             is one"
                        ),
                    });
                }
                if let Ok(t) = Pclntab::parse(candidate, text_hint, text_fallback)
                    && fits(&t)
                    && t.name(0).is_some()
                {
                    return Ok(Some(t));
                }
            }
        }
    }
    if saw_go12 && (has_go_section(img) || buildinfo_version(img).is_some() || symtab_is_go(img)) {
        return Err(img.too_old_by_pclntab());
    }
    Ok(None)
}

// ---------------------------------------------------------------------------------------
// Function bounds and RETs
// ---------------------------------------------------------------------------------------

/// The bounds of the named functions that exist, in the order asked, read from `source`.
fn function_ranges(
    img: &Image<'_>,
    names: &[&str],
    source: SymbolSource,
) -> Result<Vec<Range>, GoSymError> {
    let wanted: HashSet<&str> = names.iter().copied().collect();
    let found = match source {
        SymbolSource::Symtab => symtab_ranges(img, &wanted),
        SymbolSource::Pclntab => locate_pclntab(img)?
            .ok_or_else(|| GoSymError::NoSymbols {
                path: img.path.to_path_buf(),
            })?
            .ranges(&wanted),
    };
    let mut seen = HashSet::new();
    Ok(names
        .iter()
        .filter(|n| seen.insert(**n))
        .filter_map(|n| found.iter().find(|r| r.name == *n).cloned())
        .collect())
}

/// Function bounds from `.symtab`: `st_value` and `st_size` (a symbol without a size ends
/// where the next function starts).
fn symtab_ranges(img: &Image<'_>, wanted: &HashSet<&str>) -> Vec<Range> {
    let Some(table) = img.elf.symbol_table() else {
        return Vec::new();
    };
    let mut found: Vec<Range> = Vec::new();
    for sym in table.symbols() {
        if sym.kind() != SymbolKind::Text || sym.is_undefined() {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        if wanted.contains(name) && !found.iter().any(|r| r.name == name) {
            found.push(Range {
                name: name.to_string(),
                start: sym.address(),
                end: sym.address().saturating_add(sym.size()),
            });
        }
    }
    if found.iter().any(|r| r.end == r.start) {
        let mut starts: Vec<u64> = table
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined())
            .map(|s| s.address())
            .collect();
        starts.sort_unstable();
        for r in found.iter_mut().filter(|r| r.end == r.start) {
            if let Some(&next) = starts.iter().find(|&&a| a > r.start) {
                r.end = next;
            }
        }
    }
    found
}

/// A function's entry and `RET` file offsets, by decoding its code.
fn attach_points(img: &Image<'_>, r: &Range) -> Result<GoFunction, GoSymError> {
    let outside = || GoSymError::OutsideFile {
        path: img.path.to_path_buf(),
        function: r.name.clone(),
        address: r.start,
    };
    let (entry_offset, avail) = img.file_offset(r.start).ok_or_else(outside)?;
    let len = (r.end - r.start).min(avail);
    let code = img.bytes_at(r.start, len).ok_or_else(outside)?;
    let mut decoder = Decoder::with_ip(64, code, r.start, DecoderOptions::NONE);
    let mut instruction = Instruction::default();
    let mut return_offsets = Vec::new();
    while decoder.can_decode() {
        decoder.decode_out(&mut instruction);
        if instruction.mnemonic() == Mnemonic::Ret {
            return_offsets.push(entry_offset + (instruction.ip() - r.start));
        }
    }
    if return_offsets.len() > MAX_RETURNS {
        return Err(GoSymError::TooManyReturns {
            path: img.path.to_path_buf(),
            function: r.name.clone(),
            returns: return_offsets.len(),
        });
    }
    Ok(GoFunction {
        name: r.name.clone(),
        entry_offset,
        return_offsets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const SERVER: &str = "crypto/tls.(*Conn).serverHandshake";
    const CLIENT: &str = "crypto/tls.(*Conn).clientHandshake";
    const ABSENT: &str = "crypto/tls.noSuchFunction";

    /// Links both handshakes: a server handshake on an accepted connection, or a client
    /// one with an argument.
    const PROGRAM: &str = r#"package main

import (
	"crypto/tls"
	"net"
	"os"
)

func main() {
	if len(os.Args) > 1 {
		c, err := tls.Dial("tcp", os.Args[1], &tls.Config{})
		if err == nil {
			c.Close()
		}
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	conn, err := ln.Accept()
	if err != nil {
		return
	}
	_ = tls.Server(conn, &tls.Config{}).Handshake()
}
"#;

    /// Skips (or, with `TLSPERF_TEST_PEERS=required`, fails) a test that needs `go`.
    fn go_missing(what: &str) {
        if std::env::var("TLSPERF_TEST_PEERS").as_deref() == Ok("required") {
            panic!("go is missing, but TLSPERF_TEST_PEERS=required ({what})");
        }
        eprintln!("SKIPPED: go is not installed; {what}");
    }

    fn have_go() -> bool {
        Command::new("go")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn go_build(dir: &Path, out: &str, ldflags: Option<&str>) -> PathBuf {
        let path = dir.join(out);
        let mut cmd = Command::new("go");
        cmd.current_dir(dir)
            .env("CGO_ENABLED", "0")
            .env("GOOS", "linux")
            .env("GOARCH", "amd64")
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "")
            .arg("build")
            .arg("-o")
            .arg(&path);
        if let Some(flags) = ldflags {
            cmd.arg(format!("-ldflags={flags}"));
        }
        if std::env::var_os("HOME").is_none() && std::env::var_os("GOCACHE").is_none() {
            cmd.env("GOCACHE", std::env::temp_dir().join("tlsperf-go-cache"));
        }
        let output = cmd.arg("main.go").output().unwrap();
        assert!(
            output.status.success(),
            "go build failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        path
    }

    /// Checks one binary's answer against its bytes; returns it.
    fn check(bin: &GoBinary, source: SymbolSource) -> Vec<GoFunction> {
        let funcs = bin
            .functions_from(&[SERVER, ABSENT, CLIENT, SERVER], source)
            .unwrap();
        let names: Vec<&str> = funcs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, [SERVER, CLIENT], "{source}");
        let data = std::fs::read(&bin.path).unwrap();
        let img = Image::parse(&bin.path, &data).unwrap();
        let ranges = function_ranges(&img, &[SERVER, CLIENT], source).unwrap();
        for (f, r) in funcs.iter().zip(&ranges) {
            assert_eq!(f.name, r.name);
            assert!(r.end > r.start + 16, "{}: {r:?}", f.name);
            assert_eq!(Some(f.entry_offset), img.file_offset(r.start).map(|x| x.0));
            assert!(!f.return_offsets.is_empty(), "{} has no RET", f.name);
            let end = f.entry_offset + (r.end - r.start);
            for &ret in &f.return_offsets {
                assert!(
                    (f.entry_offset..end).contains(&ret),
                    "{}: RET at {ret:#x} outside {:#x}..{end:#x}",
                    f.name,
                    f.entry_offset
                );
                assert!(
                    matches!(data[ret as usize], 0xc3 | 0xc2),
                    "{}: byte {:#x} at {ret:#x}",
                    f.name,
                    data[ret as usize]
                );
            }
        }
        funcs
    }

    /// The RET addresses `go tool objdump` prints for one function.
    fn objdump_rets(bin: &Path, name: &str) -> Vec<u64> {
        let pattern = format!(
            "^{}$",
            name.replace('(', r"\(")
                .replace(')', r"\)")
                .replace('*', r"\*")
        );
        let output = Command::new("go")
            .args(["tool", "objdump", "-s", &pattern])
            .arg(bin)
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|l| l.split_whitespace().any(|t| t == "RET"))
            .filter_map(|l| l.split_whitespace().find(|t| t.starts_with("0x")))
            .map(|t| u64::from_str_radix(&t[2..], 16).unwrap())
            .collect()
    }

    #[test]
    fn go_tls_binaries_normal_stripped_and_without_section_headers() {
        if !have_go() {
            go_missing("not checking Go uprobe offsets");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.go"), PROGRAM).unwrap();
        let normal = go_build(dir.path(), "normal", None);
        let stripped = go_build(dir.path(), "stripped", Some("-s -w"));
        let go_version = Command::new("go")
            .args(["env", "GOVERSION"])
            .output()
            .unwrap();
        let go_version = String::from_utf8(go_version.stdout)
            .unwrap()
            .trim()
            .to_string();

        assert!(is_go_binary(&normal) && is_go_binary(&stripped));

        // Normal build: .symtab, and the pclntab says the same.
        let bin = GoBinary::open(&normal).unwrap();
        assert_eq!(bin.symbols_from, SymbolSource::Symtab);
        assert_eq!(bin.go_version.as_deref(), Some(go_version.as_str()));
        let by_symtab = check(&bin, SymbolSource::Symtab);
        let by_pclntab = check(&bin, SymbolSource::Pclntab);
        assert_eq!(by_symtab, by_pclntab);
        assert_eq!(bin.functions(&[SERVER, CLIENT]).unwrap(), by_symtab);

        // The same RETs as Go's own disassembler finds (converted back to addresses).
        let data = std::fs::read(&normal).unwrap();
        let img = Image::parse(&normal, &data).unwrap();
        let ranges = function_ranges(&img, &[SERVER, CLIENT], SymbolSource::Symtab).unwrap();
        for (f, r) in by_symtab.iter().zip(&ranges) {
            let ours: Vec<u64> = f
                .return_offsets
                .iter()
                .map(|o| r.start + (o - f.entry_offset))
                .collect();
            assert_eq!(ours, objdump_rets(&normal, &f.name), "{}", f.name);
        }

        // -s -w: no .symtab, the pclntab is read.
        let bin = GoBinary::open(&stripped).unwrap();
        assert_eq!(bin.symbols_from, SymbolSource::Pclntab);
        assert_eq!(bin.go_version.as_deref(), Some(go_version.as_str()));
        let stripped_funcs = check(&bin, SymbolSource::Pclntab);
        assert_eq!(bin.functions(&[SERVER, CLIENT]).unwrap(), stripped_funcs);
        assert!(matches!(
            bin.functions_from(&[SERVER], SymbolSource::Symtab),
            Ok(v) if v.is_empty()
        ));

        // Section headers gone too: pclntab and build info are found by their magic.
        let mut bytes = std::fs::read(&stripped).unwrap();
        bytes[0x28..0x30].fill(0); // e_shoff
        bytes[0x3c..0x40].fill(0); // e_shnum, e_shstrndx
        let headerless = dir.path().join("headerless");
        std::fs::write(&headerless, &bytes).unwrap();
        assert!(is_go_binary(&headerless));
        let bin = GoBinary::open(&headerless).unwrap();
        assert_eq!(bin.symbols_from, SymbolSource::Pclntab);
        assert_eq!(bin.go_version.as_deref(), Some(go_version.as_str()));
        assert_eq!(bin.functions(&[SERVER, CLIENT]).unwrap(), stripped_funcs);
    }

    #[test]
    fn non_elf_c_and_missing_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "not a program\n").unwrap();
        assert!(!is_go_binary(&text));
        let err = GoBinary::open(&text).unwrap_err();
        assert!(matches!(err, GoSymError::NotElf { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "{} is not an ELF executable; tlsperf can probe only Linux ELF binaries",
                text.display()
            )
        );

        let missing = dir.path().join("missing");
        assert!(!is_go_binary(&missing));
        let err = GoBinary::open(&missing).unwrap_err();
        assert!(matches!(err, GoSymError::Read { .. }), "{err}");
        assert_eq!(err.class(), ErrorClass::Input);

        let c = Path::new("/bin/true");
        let Ok(data) = std::fs::read(c) else {
            eprintln!("SKIPPED: no /bin/true to check a C binary with");
            return;
        };
        assert!(!is_go_binary(c));
        let err = GoBinary::open(c).unwrap_err();
        if elf_machine(&data) == Some(EM_X86_64) {
            assert!(matches!(err, GoSymError::NotGo { .. }), "{err}");
            assert!(
                err.to_string().starts_with("/bin/true was not built by Go"),
                "{err}"
            );
        } else {
            assert!(matches!(err, GoSymError::WrongArch { .. }), "{err}");
        }
    }

    #[test]
    fn go_versions() {
        assert_eq!(go_minor("go1.19.8"), Some(19));
        assert_eq!(go_minor("go1.21rc2"), Some(21));
        assert_eq!(go_minor("go1.16"), Some(16));
        assert_eq!(go_minor("devel go1.23-4f9c1ae Tue"), Some(23));
        assert_eq!(go_minor("go1"), Some(0));
        assert_eq!(go_minor("weird"), None);
        assert_eq!(uvarint(&[0x08]), Some((8, 1)));
        assert_eq!(uvarint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(uvarint(&[0x80]), None);
    }

    /// A synthetic pclntab with two functions, `a` at 0x1000..0x1010 and `b` at
    /// 0x1010..0x1040, in the given format.
    fn synthetic_pclntab(magic: u32) -> Vec<u8> {
        let relative = magic != PCLNTAB_GO116;
        let words = if relative { 8 } else { 7 };
        let header = 8 + words * 8;
        let names = b"a\0b\0";
        let funcnametab = header;
        let functab = funcnametab + names.len();
        let field = if relative { 4 } else { 8 };
        let functab_len = 5 * field;
        let rec = if relative { 8 } else { 12 }; // entry + nameOff
        let mut t = Vec::new();
        t.extend_from_slice(&magic.to_le_bytes());
        t.extend_from_slice(&[0, 0, 1, 8]);
        let mut header_words = vec![2u64, 0];
        if relative {
            header_words.push(0x1000); // textStart
        }
        header_words.extend([funcnametab as u64, 0, 0, 0, functab as u64]);
        for w in header_words {
            t.extend_from_slice(&w.to_le_bytes());
        }
        t.extend_from_slice(names);
        let push = |t: &mut Vec<u8>, v: u64| {
            if relative {
                t.extend_from_slice(&(v as u32).to_le_bytes());
            } else {
                t.extend_from_slice(&v.to_le_bytes());
            }
        };
        let base = if relative { 0 } else { 0x1000 };
        let (f0, f1) = (functab_len as u64, (functab_len + rec) as u64);
        for v in [base, f0, base + 0x10, f1, base + 0x40] {
            push(&mut t, v);
        }
        // The _func records: entry, nameOff.
        for (entry, name_off) in [(base, 0u32), (base + 0x10, 2)] {
            push(&mut t, entry);
            t.extend_from_slice(&name_off.to_le_bytes());
        }
        t
    }

    #[test]
    fn pclntab_formats() {
        for magic in [PCLNTAB_GO116, PCLNTAB_GO118, PCLNTAB_GO120] {
            let bytes = synthetic_pclntab(magic);
            let t = Pclntab::parse(&bytes, None, None).unwrap();
            assert_eq!(t.nfunc, 2);
            let ranges = t.ranges(&HashSet::from(["b", "a", "c"]));
            let expect =
                [("a", 0x1000, 0x1010), ("b", 0x1010, 0x1040)].map(|(name, start, end)| Range {
                    name: name.to_string(),
                    start,
                    end,
                });
            assert_eq!(ranges, expect, "{magic:#x}");
        }
        let mut old = synthetic_pclntab(PCLNTAB_GO118);
        old[..4].copy_from_slice(&PCLNTAB_GO12.to_le_bytes());
        assert!(Pclntab::parse(&old, None, None).is_err());
        let bytes = synthetic_pclntab(PCLNTAB_GO120);
        assert!(Pclntab::parse(&bytes[..40], None, None).is_err());
    }
}
