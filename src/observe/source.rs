//! Capture sources: the frames of a capture file (pcap or pcapng, told apart by their
//! first four bytes and read by `pcap-file`), each with its capture time in nanoseconds
//! since the Unix epoch and its link layer.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::PcapNgReader;
use pcap_file::pcapng::blocks::Block;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::{PcapError, TsResolution};

use super::ObserveError;
use super::decode::Link;

/// How a capture file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// At a frame boundary.
    Complete,
    /// In the middle of a frame (a capture cut short: the frames before it are kept).
    Truncated,
}

enum Reader {
    /// A pcap file: its parser (the header read), the bytes read and not parsed yet,
    /// its link layer.
    Pcap(PcapParser, Box<Window>, Link),
    /// A pcapng file, through pcap-file's reader.
    Ng(Box<PcapNgReader<Chunks>>),
}

/// How much of the file one read brings in: small enough that the frames it holds are
/// still in the CPU's cache when they are analyzed. pcap-file's readers ask for as much
/// as their 8 MB buffer holds: filled 8 MB at a time, the buffer's bytes had left the
/// cache by the time their frames were decoded, and the first look at each frame was a
/// cache miss (measured: docs/benchmarks/history/2026-12-02-observe-reading.md).
const CHUNK: usize = 128 * 1024;

/// A file read at most [`CHUNK`] bytes at a time (for pcap-file's pcapng reader, whose
/// 8 MB buffer is still allocated, but only its start used).
struct Chunks(File);

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(CHUNK);
        self.0.read(&mut buf[..n])
    }
}

/// The bytes of a pcap file read and not parsed yet, read [`CHUNK`] at a time into a
/// buffer of twice that, which grows only for a record longer than it (up to
/// [`MAX_RECORD`]). pcap-file's parser reads the records from it in place.
struct Window {
    file: File,
    buf: Vec<u8>,
    /// `buf[pos..len]` is read and not parsed.
    pos: usize,
    len: usize,
}

/// The longest pcap record read (pcap-file's reader took no longer ones either: its
/// buffer was 8 MB). A record claiming more ends the reading as a cut-short file does.
const MAX_RECORD: usize = 8_000_000;

/// What [`Window::more`] did.
enum More {
    /// Read more bytes.
    Read,
    /// The file ended.
    End,
    /// The unparsed bytes fill [`MAX_RECORD`]: no room for more.
    Full,
}

impl Window {
    fn new(file: File) -> Window {
        Window {
            file,
            buf: vec![0; 2 * CHUNK],
            pos: 0,
            len: 0,
        }
    }

    /// The bytes read and not parsed.
    fn unparsed(&self) -> &[u8] {
        &self.buf[self.pos..self.len]
    }

    /// Marks `n` bytes parsed.
    fn consume(&mut self, n: usize) {
        self.pos += n;
    }

    /// Reads up to [`CHUNK`] more bytes after the unparsed ones, which are moved to the
    /// buffer's start first (the buffer doubles when they fill it).
    fn more(&mut self) -> std::io::Result<More> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.len, 0);
            self.len -= self.pos;
            self.pos = 0;
        }
        if self.len == self.buf.len() {
            if self.len >= MAX_RECORD {
                return Ok(More::Full);
            }
            let grown = (self.buf.len() * 2).min(MAX_RECORD);
            self.buf.resize(grown, 0);
        }
        let end = (self.len + CHUNK).min(self.buf.len());
        loop {
            match self.file.read(&mut self.buf[self.len..end]) {
                Ok(0) => return Ok(More::End),
                Ok(n) => {
                    self.len += n;
                    return Ok(More::Read);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// An open capture file.
pub struct CaptureFile {
    path: PathBuf,
    reader: Reader,
}

fn link_of(path: &Path, linktype: u32) -> Result<Link, ObserveError> {
    Link::from_linktype(linktype).ok_or_else(|| ObserveError::UnsupportedLink {
        path: path.to_path_buf(),
        linktype,
    })
}

/// Nanoseconds per unit for a pcapng `if_tsresol` (default: microseconds).
fn ng_units(options: &[InterfaceDescriptionOption<'_>]) -> (u64, u64) {
    let resol = options.iter().find_map(|o| match o {
        InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
        _ => None,
    });
    // (numerator, denominator): ns = units × num / den.
    match resol.unwrap_or(6) {
        r if r & 0x80 != 0 => {
            let bits = u32::from(r & 0x7f).min(63);
            (1_000_000_000, 1u64 << bits)
        }
        r if r <= 9 => (10u64.pow(9 - u32::from(r)), 1),
        r => (1, 10u64.pow(u32::from(r - 9).min(19))),
    }
}

/// Why a capture's header could not be read, in words: a file that ends inside it says so
/// (pcap-file's own text for that is "Error reading bytes").
fn header_reason(what: &str, e: PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => format!("the file ends inside its {what}"),
        PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            format!("the file ends inside its {what}")
        }
        other => format!("bad {what}: {}", damage(&other)),
    }
}

/// What pcap-file found wrong in a record, in words (its own texts name its structs and
/// fields: "Invalid field value: PacketHeader incl_len > snap_len").
fn damage(e: &PcapError) -> String {
    match e {
        PcapError::InvalidField(field) => {
            let part = match field.split(':').next().unwrap_or_default().trim() {
                p if p.starts_with("PacketHeader") || p.starts_with("PcapPacket") => {
                    "a record header's length or timestamp field"
                }
                p if p.starts_with("SectionHeader") || p.starts_with("PcapNg") => {
                    "the section header"
                }
                p if p.starts_with("InterfaceDescription") => "an interface description",
                p if p.starts_with("EnhancedPacket")
                    || p.starts_with("SimplePacket")
                    || p.starts_with("Packet") =>
                {
                    "a packet block's length field"
                }
                p if p.starts_with("NameResolution") => "a name-resolution block",
                p if p.contains("Option") => "a block's options",
                _ => "a block's length field",
            };
            format!("{part} is invalid: the file is damaged")
        }
        PcapError::Utf8Error(_) | PcapError::FromUtf8Error(_) => {
            "a text field is not UTF-8 (the file is damaged)".into()
        }
        PcapError::InvalidInterfaceId(id) => {
            format!("a packet names interface {id}, which the file never describes")
        }
        PcapError::IncompleteBuffer => "the file ends inside a record".into(),
        PcapError::IoError(e) => e.to_string(),
    }
}

impl CaptureFile {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path) -> Result<CaptureFile, ObserveError> {
        let open_err = |source| ObserveError::Open {
            path: path.to_path_buf(),
            source,
        };
        let (mut file, _) = crate::files::open_input(path).map_err(open_err)?;
        let mut magic = [0u8; 4];
        let n = read_up_to(&mut file, &mut magic).map_err(open_err)?;
        let not_capture = |reason: String| ObserveError::NotACapture {
            path: path.to_path_buf(),
            reason,
        };
        if n < 4 {
            return Err(not_capture(format!("it holds {n} bytes")));
        }
        file.seek(SeekFrom::Start(0)).map_err(open_err)?;
        let reader = match magic {
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                let r = PcapNgReader::new(Chunks(file))
                    .map_err(|e| not_capture(header_reason("pcapng section header", e)))?;
                Reader::Ng(Box::new(r))
            }
            [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0xc3, 0xd4]
            | [0x4d, 0x3c, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d] => {
                let mut w = Box::new(Window::new(file));
                let parser = loop {
                    match PcapParser::new(w.unparsed()) {
                        Ok((rem, parser)) => {
                            let used = w.unparsed().len() - rem.len();
                            w.consume(used);
                            break parser;
                        }
                        Err(PcapError::IncompleteBuffer) => match w.more().map_err(open_err)? {
                            More::Read => {}
                            More::End | More::Full => {
                                return Err(not_capture(header_reason(
                                    "pcap header",
                                    PcapError::IncompleteBuffer,
                                )));
                            }
                        },
                        Err(e) => return Err(not_capture(header_reason("pcap header", e))),
                    }
                };
                let link = link_of(path, u32::from(parser.header().datalink))?;
                Reader::Pcap(parser, w, link)
            }
            m => {
                return Err(not_capture(format!(
                    "it starts with {:02x} {:02x} {:02x} {:02x}, not a pcap or pcapng magic \
                     number",
                    m[0], m[1], m[2], m[3]
                )));
            }
        };
        Ok(CaptureFile {
            path: path.to_path_buf(),
            reader,
        })
    }

    /// Calls `f(capture ns, link, frame bytes, frame length on the wire)` for every
    /// frame, in file order. A frame longer on the wire than the capture's snap length
    /// (`tcpdump -s`) is given cut short, as captured: pcap-file refuses a pcap record
    /// whose original length is beyond the snap length ("damaged"), so pcap records are
    /// read raw and checked here.
    pub fn for_each(
        &mut self,
        mut f: impl FnMut(u64, Link, &[u8], usize),
    ) -> Result<End, ObserveError> {
        let mut index: u64 = 0;
        let path = self.path.clone();
        let corrupt = |index: u64, e: PcapError| match e {
            PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                Ok(End::Truncated)
            }
            PcapError::IncompleteBuffer => Ok(End::Truncated),
            PcapError::IoError(source) => Err(ObserveError::Open {
                path: path.clone(),
                source,
            }),
            other => Err(ObserveError::Corrupt {
                path: path.clone(),
                frame: index + 1,
                reason: damage(&other),
            }),
        };
        match &mut self.reader {
            Reader::Pcap(parser, w, link) => {
                let header = parser.header();
                let nanos = header.ts_resolution == TsResolution::NanoSecond;
                loop {
                    let used = match parser.next_raw_packet(w.unparsed()) {
                        Ok((rem, p)) => {
                            // What pcap-file checks, but the original length against the
                            // snap length: a frame cut by the snap length is what a snap
                            // length is for.
                            let frac_ns = if nanos {
                                Some(p.ts_frac)
                            } else {
                                p.ts_frac.checked_mul(1000)
                            };
                            let bad = match frac_ns {
                                Some(ns) if ns < 1_000_000_000 => {
                                    if p.incl_len > header.snaplen {
                                        Some("PacketHeader incl_len > snap_len")
                                    } else if p.incl_len > p.orig_len {
                                        Some("PacketHeader incl_len > orig_len")
                                    } else {
                                        None
                                    }
                                }
                                _ => Some("PacketHeader ts_nanosecond is invalid"),
                            };
                            if let Some(field) = bad {
                                return corrupt(index, PcapError::InvalidField(field));
                            }
                            let ns = u64::from(p.ts_sec) * 1_000_000_000
                                + u64::from(frac_ns.unwrap_or(0));
                            f(ns, *link, &p.data, p.orig_len as usize);
                            index += 1;
                            w.unparsed().len() - rem.len()
                        }
                        Err(PcapError::IncompleteBuffer) => {
                            match w.more() {
                                Ok(More::Read) => continue,
                                // The file ends at a record's boundary, or inside one.
                                Ok(More::End) if w.unparsed().is_empty() => break,
                                Ok(More::End | More::Full) => return Ok(End::Truncated),
                                Err(source) => {
                                    return Err(ObserveError::Open {
                                        path: path.clone(),
                                        source,
                                    });
                                }
                            }
                        }
                        Err(e) => return corrupt(index, e),
                    };
                    w.consume(used);
                }
            }
            Reader::Ng(r) => {
                // Per interface: its link layer (or its unsupported linktype) and clock.
                let mut ifaces: Vec<(Result<Link, u32>, (u64, u64))> = Vec::new();
                while let Some(b) = r.next_block() {
                    let block = match b {
                        Ok(b) => b,
                        Err(e) => return corrupt(index, e),
                    };
                    match block {
                        Block::SectionHeader(_) => ifaces.clear(),
                        Block::InterfaceDescription(idb) => {
                            let lt = u32::from(idb.linktype);
                            ifaces
                                .push((Link::from_linktype(lt).ok_or(lt), ng_units(&idb.options)));
                        }
                        Block::EnhancedPacket(epb) => {
                            index += 1;
                            let Some((link, (num, den))) = ifaces.get(epb.interface_id as usize)
                            else {
                                return Err(ObserveError::Corrupt {
                                    path: path.clone(),
                                    frame: index,
                                    reason: format!(
                                        "packet of interface {} that was not described",
                                        epb.interface_id
                                    ),
                                });
                            };
                            let link = match link {
                                Ok(l) => *l,
                                Err(lt) => {
                                    return Err(ObserveError::UnsupportedLink {
                                        path: path.clone(),
                                        linktype: *lt,
                                    });
                                }
                            };
                            let units = epb.timestamp.as_nanos();
                            let ns = units.saturating_mul(u128::from(*num)) / u128::from(*den);
                            let wire = (epb.original_len as usize).max(epb.data.len());
                            f(u64::try_from(ns).unwrap_or(u64::MAX), link, &epb.data, wire);
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(End::Complete)
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
