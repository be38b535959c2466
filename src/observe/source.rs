//! Capture sources: the frames of a capture file (pcap or pcapng, told apart by their
//! first four bytes and read by `pcap-file`), each with its capture time in nanoseconds
//! since the Unix epoch and its link layer.
//!
//! Both formats are parsed in place from a small window of the file ([`CHUNK`]):
//! `pcap-file`'s parsers frame the records and read the headers (pcap's file header,
//! pcapng's section headers and interface descriptions); the fields of a pcap record and
//! of a pcapng enhanced packet block are read here, which is what lets a pcap frame longer
//! than the snap length through, and skips the option lists of packet blocks that
//! `pcap-file`'s typed blocks collect in a vector per packet.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::PcapNgParser;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::blocks::{
    ENHANCED_PACKET_BLOCK, INTERFACE_DESCRIPTION_BLOCK, SECTION_HEADER_BLOCK,
};
use pcap_file::{Endianness, PcapError, TsResolution};

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
    /// A pcapng file: its parser (the first section header read; it keeps the current
    /// section's byte order and interfaces), the bytes read and not parsed yet.
    Ng(PcapNgParser, Box<Window>),
}

/// How much of the file one read brings in: small enough that the frames it holds are
/// still in the CPU's cache when they are analyzed. pcap-file's readers ask for as much
/// as their 8 MB buffer holds: filled 8 MB at a time, the buffer's bytes had left the
/// cache by the time their frames were decoded, and the first look at each frame was a
/// cache miss (measured: docs/benchmarks/history/2026-12-02-observe-reading.md).
const CHUNK: usize = 128 * 1024;

/// The bytes of a capture file read and not parsed yet, read [`CHUNK`] at a time into a
/// buffer of twice that, which grows only for a record longer than it (up to
/// [`MAX_RECORD`]). pcap-file's parser reads the records from it in place.
struct Window {
    file: File,
    buf: Vec<u8>,
    /// `buf[pos..len]` is read and not parsed.
    pos: usize,
    len: usize,
}

/// The longest pcap record or pcapng block read (pcap-file's readers took no longer ones
/// either: their buffer was 8 MB). One claiming more ends the reading as a cut-short
/// file does.
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

/// A pcapng interface as its packets need it: its link layer (or its unsupported
/// linktype) and its clock (nanoseconds per unit, as a fraction).
type Interface = (Result<Link, u32>, (u64, u64));

/// The interfaces of the parser's current section, in the order their packets name them.
fn interfaces(parser: &PcapNgParser) -> Vec<Interface> {
    parser
        .interfaces()
        .iter()
        .map(|idb| {
            let lt = u32::from(idb.linktype);
            (Link::from_linktype(lt).ok_or(lt), ng_units(&idb.options))
        })
        .collect()
}

/// Nanoseconds since the epoch of a pcapng timestamp of `units`, `(num, den)` the
/// interface's nanoseconds per unit (saturating).
fn ng_nanos(units: u64, (num, den): (u64, u64)) -> u64 {
    if den == 1 {
        units.saturating_mul(num)
    } else {
        u64::try_from(u128::from(units) * u128::from(num) / u128::from(den)).unwrap_or(u64::MAX)
    }
}

/// The fields of an enhanced packet block's body that a frame needs: the interface, the
/// timestamp (units), the captured bytes and the length on the wire. The options after
/// the data are not read.
fn enhanced_packet(body: &[u8], big: bool) -> Result<(u32, u64, &[u8], u32), PcapError> {
    let word = |i: usize| {
        let b = [body[i], body[i + 1], body[i + 2], body[i + 3]];
        if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    if body.len() < 20 {
        return Err(PcapError::InvalidField(
            "EnhancedPacketBlock: block length < 20",
        ));
    }
    let interface = word(0);
    let units = (u64::from(word(4)) << 32) | u64::from(word(8));
    let captured = word(12) as usize;
    let original = word(16);
    // The data, padded to 32 bits, must fit in the block.
    if captured.div_ceil(4) * 4 > body.len() - 20 {
        return Err(PcapError::InvalidField(
            "EnhancedPacketBlock: captured_len + padding > block length",
        ));
    }
    Ok((interface, units, &body[20..20 + captured], original))
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

/// A capture's header (`what`, for messages) parsed by `parse` from the start of the
/// window, reading more of the file while it is incomplete; the window is left after it.
fn header<T>(
    w: &mut Window,
    path: &Path,
    what: &str,
    parse: impl Fn(&[u8]) -> Result<(&[u8], T), PcapError>,
) -> Result<T, ObserveError> {
    let not_capture = |e: PcapError| ObserveError::NotACapture {
        path: path.to_path_buf(),
        reason: header_reason(what, e),
    };
    loop {
        match parse(w.unparsed()) {
            Ok((rem, parsed)) => {
                let used = w.unparsed().len() - rem.len();
                w.consume(used);
                return Ok(parsed);
            }
            Err(PcapError::IncompleteBuffer) => match w.more() {
                Ok(More::Read) => {}
                Ok(More::End | More::Full) => {
                    return Err(not_capture(PcapError::IncompleteBuffer));
                }
                Err(source) => {
                    return Err(ObserveError::Open {
                        path: path.to_path_buf(),
                        source,
                    });
                }
            },
            Err(e) => return Err(not_capture(e)),
        }
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
                let mut w = Box::new(Window::new(file));
                let parser = header(&mut w, path, "pcapng section header", PcapNgParser::new)?;
                Reader::Ng(parser, w)
            }
            [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0xc3, 0xd4]
            | [0x4d, 0x3c, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d] => {
                let mut w = Box::new(Window::new(file));
                let parser = header(&mut w, path, "pcap header", PcapParser::new)?;
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
            Reader::Ng(parser, w) => {
                let mut ifaces = interfaces(parser);
                let mut big = parser.section().endianness == Endianness::Big;
                loop {
                    let used = match parser.next_raw_block(w.unparsed()) {
                        Ok((rem, block)) => {
                            match block.type_ {
                                // The parser has taken the section's byte order and
                                // interfaces from it.
                                SECTION_HEADER_BLOCK | INTERFACE_DESCRIPTION_BLOCK => {
                                    ifaces = interfaces(parser);
                                    big = parser.section().endianness == Endianness::Big;
                                }
                                ENHANCED_PACKET_BLOCK => {
                                    let (id, units, data, original) =
                                        match enhanced_packet(&block.body, big) {
                                            Ok(p) => p,
                                            Err(e) => return corrupt(index, e),
                                        };
                                    index += 1;
                                    let Some((link, clock)) = ifaces.get(id as usize) else {
                                        return Err(ObserveError::Corrupt {
                                            path: path.clone(),
                                            frame: index,
                                            reason: format!(
                                                "packet of interface {id} that was not described"
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
                                    let wire = (original as usize).max(data.len());
                                    f(ng_nanos(units, *clock), link, data, wire);
                                }
                                // Packet blocks without an interface's clock (simple,
                                // obsolete), statistics, names: nothing a flow needs.
                                _ => {}
                            }
                            w.unparsed().len() - rem.len()
                        }
                        Err(PcapError::IncompleteBuffer) => match w.more() {
                            Ok(More::Read) => continue,
                            Ok(More::End) if w.unparsed().is_empty() => break,
                            Ok(More::End | More::Full) => return Ok(End::Truncated),
                            Err(source) => {
                                return Err(ObserveError::Open {
                                    path: path.clone(),
                                    source,
                                });
                            }
                        },
                        Err(e) => return corrupt(index, e),
                    };
                    w.consume(used);
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

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::DataLink;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    use pcap_file::pcapng::blocks::interface_statistics::InterfaceStatisticsBlock;
    use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
    use std::borrow::Cow;
    use std::time::Duration;

    /// A pcapng file in `order`: one Ethernet interface counting nanoseconds (then
    /// `extra` more, microseconds), then packets `(interface, units, data, wire length)`
    /// with an option each, a statistics block between them.
    fn pcapng(
        order: Endianness,
        extra: usize,
        packets: &[(u32, u64, &[u8], u32)],
    ) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let section = SectionHeaderBlock {
            endianness: order,
            ..SectionHeaderBlock::default()
        };
        let mut w = PcapNgWriter::with_section_header(file.reopen().unwrap(), section).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 65535,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        })
        .unwrap();
        for _ in 0..extra {
            w.write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: 65535,
                options: vec![],
            })
            .unwrap();
        }
        for &(interface_id, units, data, wire) in packets {
            w.write_pcapng_block(EnhancedPacketBlock {
                interface_id,
                timestamp: Duration::from_nanos(units),
                original_len: wire,
                data: Cow::Borrowed(data),
                options: vec![EnhancedPacketOption::Flags(1)],
            })
            .unwrap();
            w.write_pcapng_block(InterfaceStatisticsBlock {
                interface_id: 0,
                timestamp: 0,
                options: vec![],
            })
            .unwrap();
        }
        drop(w);
        file
    }

    /// A frame as read: capture ns, bytes, length on the wire.
    type Frame = (u64, Vec<u8>, usize);

    fn frames(path: &Path) -> Result<(Vec<Frame>, End), ObserveError> {
        let mut out = Vec::new();
        let end = CaptureFile::open(path)?.for_each(|ns, link, data, wire| {
            assert_eq!(link, Link::Ethernet);
            out.push((ns, data.to_vec(), wire));
        })?;
        Ok((out, end))
    }

    #[test]
    fn pcapng_packets_read_in_either_byte_order() {
        let ns = 1_700_000_000_123_456_789;
        for order in [Endianness::Little, Endianness::Big] {
            // Lengths that need padding (5) and none (8); one cut by the snap length.
            let file = pcapng(
                order,
                1,
                &[(0, ns, b"abcde", 5), (1, 7_000_001, b"12345678", 60)],
            );
            let (got, end) = frames(file.path()).unwrap();
            assert_eq!(end, End::Complete);
            assert_eq!(
                got,
                vec![
                    (ns, b"abcde".to_vec(), 5),
                    // Interface 1 counts microseconds (no if_tsresol).
                    (7_000_001_000, b"12345678".to_vec(), 60),
                ],
                "{order:?}"
            );
        }
    }

    /// Each block's offset and type in a pcapng file of byte order `order`.
    fn blocks(bytes: &[u8], order: Endianness) -> Vec<(usize, u32)> {
        let word = |o: usize| {
            let b: [u8; 4] = bytes[o..o + 4].try_into().unwrap();
            match order {
                Endianness::Big => u32::from_be_bytes(b),
                Endianness::Little => u32::from_le_bytes(b),
            }
        };
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            out.push((at, word(at)));
            at += word(at + 4) as usize;
        }
        out
    }

    /// The offset of the last enhanced packet block.
    fn last_packet(bytes: &[u8], order: Endianness) -> usize {
        blocks(bytes, order)
            .into_iter()
            .rev()
            .find(|b| b.1 == ENHANCED_PACKET_BLOCK)
            .unwrap()
            .0
    }

    fn rewritten(bytes: &[u8]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        file
    }

    #[test]
    fn a_damaged_or_cut_pcapng_packet_is_said_to_be_one() {
        let le = Endianness::Little;
        let two = pcapng(le, 0, &[(0, 1, b"ab", 2), (0, 2, b"cd", 2)]);
        let bytes = std::fs::read(two.path()).unwrap();
        let at = last_packet(&bytes, le);

        // The second packet names interface 3, which was never described.
        let mut undescribed = bytes.clone();
        undescribed[at + 8..at + 12].copy_from_slice(&3u32.to_le_bytes());
        let err = frames(rewritten(&undescribed).path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("frame 2") && err.contains("packet of interface 3 that was not described"),
            "{err}"
        );

        // Its captured length runs past its block: damaged.
        let mut damaged = bytes.clone();
        damaged[at + 20..at + 24].copy_from_slice(&400u32.to_le_bytes());
        let err = frames(rewritten(&damaged).path()).unwrap_err().to_string();
        assert!(
            err.contains("frame 2") && err.contains("a packet block's length field is invalid"),
            "{err}"
        );

        // Cut inside the second packet block: the first frame, and "truncated".
        for order in [Endianness::Little, Endianness::Big] {
            let two = pcapng(order, 0, &[(0, 1, b"ab", 2), (0, 2, b"cd", 2)]);
            let bytes = std::fs::read(two.path()).unwrap();
            let at = last_packet(&bytes, order);
            let (got, end) = frames(rewritten(&bytes[..at + 20]).path()).unwrap();
            assert_eq!(end, End::Truncated, "{order:?}");
            assert_eq!(got, vec![(1, b"ab".to_vec(), 2)], "{order:?}");
        }

        assert!(enhanced_packet(&[0; 19], false).is_err());
        assert!(enhanced_packet(&[0; 20], true).is_ok());
    }
}
