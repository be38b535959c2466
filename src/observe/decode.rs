//! Packet decode: one captured frame (link layer, IPv4/IPv6, TCP) → a TCP segment with
//! its addresses, sequence numbers, flags and payload; a frame that is not one, → a UDP
//! datagram ([`decode_udp`], for QUIC). Headers are read by `etherparse`:
//! a frame without VLAN or MACsec tags layer by layer with its IP and TCP slicers, one
//! with them through its whole-packet slicer (`SlicedPacket`, which carries every layer
//! it might meet by value through each step: a tenth of `observe --pcap`'s time when it
//! read every frame); both give the same segment. Anything that is not a TCP segment (ARP, UDP, IP fragments, a frame cut short before
//! the end of its TCP header) is `None`, counted by the caller. A frame cut short by the
//! snap length after its TCP header is a segment with part of its payload.

use std::net::{IpAddr, SocketAddr};

use etherparse::{
    EtherType, Ethernet2Slice, IpNumber, IpPayloadSlice, IpSlice, Ipv4Slice, Ipv6Slice,
    LaxNetSlice, LaxSlicedPacket, NetSlice, SlicedPacket, TcpSlice, TransportSlice,
};

/// The link layers tlsperf reads (pcap `LINKTYPE_*` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Ethernet II (what `tcpdump -i lo` and `-i eth0` write on Linux).
    Ethernet,
    /// Linux cooked capture v1 (`tcpdump -i any`).
    LinuxSll,
    /// Linux cooked capture v2.
    LinuxSll2,
    /// Raw IPv4 or IPv6, no link header.
    RawIp,
    /// BSD loopback: a 4-byte address family, then IP.
    Null,
}

impl Link {
    /// Its name and pcap `LINKTYPE_*` number (the main one of those it covers).
    pub fn name(self) -> &'static str {
        match self {
            Link::Ethernet => "Ethernet (link type 1)",
            Link::LinuxSll => "Linux cooked v1 (link type 113)",
            Link::LinuxSll2 => "Linux cooked v2 (link type 276)",
            Link::RawIp => "raw IP (link type 101)",
            Link::Null => "BSD loopback (link type 0)",
        }
    }

    /// The link layer of a pcap `LINKTYPE_*` number; `None` for one tlsperf does not read.
    pub fn from_linktype(n: u32) -> Option<Link> {
        match n {
            1 => Some(Link::Ethernet),
            113 => Some(Link::LinuxSll),
            276 => Some(Link::LinuxSll2),
            // LINKTYPE_RAW, and DLT_RAW's platform values, LINKTYPE_IPV4, LINKTYPE_IPV6.
            101 | 12 | 14 | 228 | 229 => Some(Link::RawIp),
            0 | 108 => Some(Link::Null),
            _ => None,
        }
    }
}

/// ARPHRD_NETLINK: an SLL frame of a netlink socket (its protocol type is not an
/// EtherType).
const ARPHRD_NETLINK: u16 = 824;

/// TCP flags that matter to the flow tracker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    /// SYN.
    pub syn: bool,
    /// ACK.
    pub ack: bool,
    /// FIN.
    pub fin: bool,
    /// RST.
    pub rst: bool,
}

/// One TCP segment.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (meaningful with `flags.ack`).
    pub ack: u32,
    /// Flags.
    pub flags: Flags,
    /// The TCP payload (as captured).
    pub payload: &'a [u8],
    /// The TCP payload's length on the wire: beyond `payload.len()` when the frame was
    /// cut short by the capture's snap length (the sequence space still covers it).
    pub payload_len: usize,
}

/// Where a frame's network layer starts, past its link header.
enum Net<'a> {
    /// An Ethernet II frame (etherparse reads its header, VLAN tags included).
    Ethernet(&'a [u8]),
    /// A frame of this EtherType after a cooked header.
    EtherType(EtherType, &'a [u8]),
    /// IPv4 or IPv6 straight away.
    Ip(&'a [u8]),
}

fn net(link: Link, data: &[u8]) -> Option<Net<'_>> {
    Some(match link {
        Link::Ethernet => Net::Ethernet(data),
        Link::LinuxSll => {
            // SLL: packet type, ARPHRD type, address length, 8 address bytes, then the
            // protocol type (2 bytes): 16 bytes of header in all. etherparse's own
            // `from_linux_sll` refuses every ARPHRD type but a handful (loopback, 772, is
            // not one of them, nor raw-IP tunnels), so the header is read here: for every
            // device but a netlink one the protocol type is an EtherType.
            let arphrd = u16::from_be_bytes([*data.get(2)?, *data.get(3)?]);
            if arphrd == ARPHRD_NETLINK {
                return None;
            }
            let proto = u16::from_be_bytes([*data.get(14)?, *data.get(15)?]);
            Net::EtherType(EtherType(proto), data.get(16..)?)
        }
        Link::LinuxSll2 => {
            // SLL2: protocol type (2 bytes) first, 20 bytes of header in all.
            let proto = u16::from_be_bytes([*data.first()?, *data.get(1)?]);
            Net::EtherType(EtherType(proto), data.get(20..)?)
        }
        Link::RawIp => Net::Ip(data),
        Link::Null => Net::Ip(data.get(4..)?),
    })
}

/// Decodes a frame of link layer `link` that was `wire_len` bytes long on the wire;
/// `None` when it is not a TCP segment. A frame captured whole must be a whole segment;
/// one cut short by the capture's snap length (`wire_len` beyond `data`) is decoded as
/// far as it goes: its TCP header must be there, its payload is what was captured and
/// [`Segment::payload_len`] says how long it was.
pub fn decode(link: Link, data: &[u8], wire_len: usize) -> Option<Segment<'_>> {
    if wire_len > data.len() {
        return decode_cut(link, data, wire_len - data.len());
    }
    let net = net(link, data)?;
    decode_untagged(&net).unwrap_or_else(|| decode_sliced(net))
}

/// One UDP datagram.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// Decodes a frame of link layer `link` that was `wire_len` bytes long on the wire as a
/// UDP datagram (any frame, tagged or not, through `SlicedPacket`); `None` when it is
/// not one, an IP fragment, or cut short by the capture's snap length (a QUIC packet
/// cut short cannot be opened).
pub fn decode_udp(link: Link, data: &[u8], wire_len: usize) -> Option<Datagram<'_>> {
    if wire_len > data.len() {
        return None;
    }
    let (src_ip, dst_ip, sliced) = sliced(net(link, data)?)?;
    let TransportSlice::Udp(udp) = sliced.transport.as_ref()? else {
        return None;
    };
    Some(Datagram {
        src: SocketAddr::new(src_ip, udp.source_port()),
        dst: SocketAddr::new(dst_ip, udp.destination_port()),
        payload: udp.payload(),
    })
}

/// [`decode`] of a whole frame by `SlicedPacket` (any frame; used for tagged ones).
fn decode_sliced(net: Net<'_>) -> Option<Segment<'_>> {
    let (src_ip, dst_ip, sliced) = sliced(net)?;
    let TransportSlice::Tcp(tcp) = sliced.transport.as_ref()? else {
        return None;
    };
    Some(segment(src_ip, dst_ip, tcp, 0))
}

/// A whole frame read by `SlicedPacket` (any frame, tagged or not): its IP addresses
/// (source, destination) and its layers; `None` when it is not IP.
fn sliced(net: Net<'_>) -> Option<(IpAddr, IpAddr, SlicedPacket<'_>)> {
    let sliced = match net {
        Net::Ethernet(d) => SlicedPacket::from_ethernet(d).ok()?,
        Net::EtherType(t, d) => SlicedPacket::from_ether_type(t, d).ok()?,
        Net::Ip(d) => SlicedPacket::from_ip(d).ok()?,
    };
    let (src_ip, dst_ip): (IpAddr, IpAddr) = match sliced.net.as_ref()? {
        NetSlice::Ipv4(v4) => {
            let h = v4.header();
            (h.source_addr().into(), h.destination_addr().into())
        }
        NetSlice::Ipv6(v6) => {
            let h = v6.header();
            (h.source_addr().into(), h.destination_addr().into())
        }
        NetSlice::Arp(_) => return None,
    };
    Some((src_ip, dst_ip, sliced))
}

/// [`decode`] of a whole frame without VLAN or MACsec tags, layer by layer as
/// `SlicedPacket` reads it (the same checks, in the same order); `None` for a tagged
/// frame, which is left to `SlicedPacket`.
fn decode_untagged<'a>(net: &Net<'a>) -> Option<Option<Segment<'a>>> {
    let tagged = |t: EtherType| {
        matches!(
            t,
            EtherType::VLAN_TAGGED_FRAME
                | EtherType::PROVIDER_BRIDGING
                | EtherType::VLAN_DOUBLE_TAGGED_FRAME
                | EtherType::MACSEC
        )
    };
    let by_type = |t: EtherType, d: &'a [u8]| -> Option<(IpAddr, IpAddr, IpPayloadSlice<'a>)> {
        match t {
            EtherType::IPV4 => {
                let ip = Ipv4Slice::from_slice(d).ok()?;
                let h = ip.header();
                Some((
                    h.source_addr().into(),
                    h.destination_addr().into(),
                    ip.payload().clone(),
                ))
            }
            EtherType::IPV6 => {
                let ip = Ipv6Slice::from_slice(d).ok()?;
                let h = ip.header();
                Some((
                    h.source_addr().into(),
                    h.destination_addr().into(),
                    ip.payload().clone(),
                ))
            }
            // ARP and every other EtherType: not TCP.
            _ => None,
        }
    };
    let ip = match *net {
        Net::Ethernet(d) => {
            let Ok(eth) = Ethernet2Slice::from_slice_without_fcs(d) else {
                return Some(None);
            };
            if tagged(eth.ether_type()) {
                return None;
            }
            by_type(eth.ether_type(), eth.payload_slice())
        }
        Net::EtherType(t, _) if tagged(t) => return None,
        Net::EtherType(t, d) => by_type(t, d),
        Net::Ip(d) => IpSlice::from_slice(d).ok().map(|ip| {
            (
                ip.source_addr(),
                ip.destination_addr(),
                ip.payload().clone(),
            )
        }),
    };
    Some(ip.and_then(|(src, dst, payload)| {
        if payload.fragmented || payload.ip_number != IpNumber::TCP {
            return None;
        }
        let tcp = TcpSlice::from_slice(payload.payload).ok()?;
        Some(segment(src, dst, &tcp, 0))
    }))
}

/// [`decode`] of a frame whose last `missing` bytes were not captured.
fn decode_cut(link: Link, data: &[u8], missing: usize) -> Option<Segment<'_>> {
    let sliced = match net(link, data)? {
        Net::Ethernet(d) => LaxSlicedPacket::from_ethernet(d).ok()?,
        Net::EtherType(t, d) => LaxSlicedPacket::from_ether_type(t, d),
        Net::Ip(d) => LaxSlicedPacket::from_ip(d).ok()?,
    };
    // Bytes missing from the IP payload: the frame's missing tail, unless the IP packet
    // was captured whole (only a link trailer was cut).
    let (src_ip, dst_ip, incomplete): (IpAddr, IpAddr, bool) = match sliced.net.as_ref()? {
        LaxNetSlice::Ipv4(v4) => {
            let h = v4.header();
            (
                h.source_addr().into(),
                h.destination_addr().into(),
                v4.payload().incomplete,
            )
        }
        LaxNetSlice::Ipv6(v6) => {
            let h = v6.header();
            (
                h.source_addr().into(),
                h.destination_addr().into(),
                v6.payload().incomplete,
            )
        }
        LaxNetSlice::Arp(_) => return None,
    };
    let TransportSlice::Tcp(tcp) = sliced.transport.as_ref()? else {
        return None;
    };
    // An IP packet is at most 64 KiB: a record header claiming more (a damaged or
    // crafted file) does not make a stream hole of gigabytes.
    let missing = if incomplete {
        missing.min(MAX_MISSING)
    } else {
        0
    };
    Some(segment(src_ip, dst_ip, tcp, missing))
}

/// The most payload bytes a cut frame is taken to miss (an IP packet's largest size).
const MAX_MISSING: usize = 65_535;

fn segment<'a>(src: IpAddr, dst: IpAddr, tcp: &TcpSlice<'a>, missing: usize) -> Segment<'a> {
    let payload = tcp.payload();
    Segment {
        src: SocketAddr::new(src, tcp.source_port()),
        dst: SocketAddr::new(dst, tcp.destination_port()),
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        flags: Flags {
            syn: tcp.syn(),
            ack: tcp.ack(),
            fin: tcp.fin(),
            rst: tcp.rst(),
        },
        payload,
        payload_len: payload.len().saturating_add(missing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([0; 6], [0; 6])
            .ipv4([127, 0, 0, 1], [127, 0, 0, 2], 64)
            .tcp(40000, 443, 1000, 65535)
            .ack(77)
            .psh();
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    #[test]
    fn decodes_an_ethernet_tcp_segment() {
        let f = frame(b"hello");
        let s = decode(Link::Ethernet, &f, f.len()).unwrap();
        assert_eq!(s.src, "127.0.0.1:40000".parse().unwrap());
        assert_eq!(s.dst, "127.0.0.2:443".parse().unwrap());
        assert_eq!((s.seq, s.ack), (1000, 77));
        assert!(s.flags.ack && !s.flags.syn);
        assert_eq!(s.payload, b"hello");
        // Raw IP: the same frame without its 14-byte Ethernet header.
        assert_eq!(
            decode(Link::RawIp, &f[14..], f.len() - 14).unwrap().payload,
            b"hello"
        );
    }

    /// `tcpdump -i any -y LINUX_SLL` on loopback: ARPHRD 772, which etherparse's SLL
    /// reader refuses; SLL2 (`tcpdump -i any`'s default) likewise.
    #[test]
    fn decodes_linux_cooked_frames_of_any_device() {
        let f = frame(b"hello");
        let ip = &f[14..];
        for arphrd in [772u16, 1, 65534] {
            let mut sll = vec![0, 0];
            sll.extend(arphrd.to_be_bytes());
            sll.extend([0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00]);
            sll.extend(ip);
            let s = decode(Link::LinuxSll, &sll, sll.len())
                .unwrap_or_else(|| panic!("SLL, ARPHRD {arphrd}"));
            assert_eq!(s.payload, b"hello");
            let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 1];
            sll2.extend(arphrd.to_be_bytes());
            sll2.extend([0, 6, 0, 0, 0, 0, 0, 0, 0, 0]);
            sll2.extend(ip);
            let s = decode(Link::LinuxSll2, &sll2, sll2.len())
                .unwrap_or_else(|| panic!("SLL2, ARPHRD {arphrd}"));
            assert_eq!(s.payload, b"hello");
        }
        // A netlink frame is not IP, whatever its protocol field.
        let mut nl = vec![0, 4, 0x03, 0x38, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00];
        nl.extend(ip);
        assert!(decode(Link::LinuxSll, &nl, nl.len()).is_none());
    }

    /// A frame cut by the snap length after its TCP header: the captured part of its
    /// payload and the length it had (it was "not TCP").
    #[test]
    fn a_frame_cut_by_the_snap_length_is_a_segment_with_part_of_its_payload() {
        let f = frame(&[7; 1000]);
        for keep in [54, 100, 500] {
            let s = decode(Link::Ethernet, &f[..keep], f.len()).unwrap();
            assert_eq!(s.payload, &[7; 1000][..keep - 54]);
            assert_eq!(s.payload_len, 1000);
            assert_eq!(s.seq, 1000);
            let s = decode(Link::RawIp, &f[14..keep], f.len() - 14).unwrap();
            assert_eq!(s.payload_len, 1000);
        }
        // A record claiming a frame of 4 GiB: no more than an IP packet missing.
        let s = decode(Link::Ethernet, &f[..100], u32::MAX as usize).unwrap();
        assert_eq!(s.payload_len, 46 + 65_535);
        // Cut inside its TCP header: nothing to read.
        assert!(decode(Link::Ethernet, &f[..50], f.len()).is_none());
        // Only a link trailer cut: the payload is whole.
        let mut padded = f.clone();
        padded.extend([0; 4]);
        let s = decode(Link::Ethernet, &f, padded.len()).unwrap();
        assert_eq!((s.payload.len(), s.payload_len), (1000, 1000));
    }

    /// The layer-by-layer path gives what `SlicedPacket` gives, frame for frame: IPv4
    /// with and without options, IPv6 with and without an extension header, Ethernet
    /// padding after the IP packet, fragments, UDP, ARP-like and other EtherTypes,
    /// VLAN tags (left to `SlicedPacket`), cut and random bytes, on every link layer.
    #[test]
    fn the_untagged_path_agrees_with_sliced_packet() {
        fn same(a: Option<Segment<'_>>, b: Option<Segment<'_>>) -> bool {
            match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => {
                    (
                        a.src,
                        a.dst,
                        a.seq,
                        a.ack,
                        a.flags,
                        a.payload,
                        a.payload_len,
                    ) == (
                        b.src,
                        b.dst,
                        b.seq,
                        b.ack,
                        b.flags,
                        b.payload,
                        b.payload_len,
                    )
                }
                _ => false,
            }
        }
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let tcp4 = frame(b"hello");
        // An untagged frame is read layer by layer, not left to SlicedPacket.
        let n = net(Link::Ethernet, &tcp4).unwrap();
        assert_eq!(decode_untagged(&n).unwrap().unwrap().payload, b"hello");
        frames.push(tcp4.clone());
        // Ethernet padding past the IP packet's total length.
        let mut padded = tcp4.clone();
        padded.extend([0xee; 9]);
        frames.push(padded);
        let mut out = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv6([1; 16], [2; 16], 64)
            .tcp(443, 40000, 7, 100)
            .syn()
            .write(&mut out, b"data")
            .unwrap();
        frames.push(out.clone());
        // An IPv6 hop-by-hop extension header (next header 0) before TCP.
        let mut ext = out[..14 + 40].to_vec();
        ext[14 + 6] = 0;
        let plen = u16::from_be_bytes([ext[14 + 4], ext[14 + 5]]) + 8;
        ext[14 + 4..14 + 6].copy_from_slice(&plen.to_be_bytes());
        ext.extend([6, 0, 1, 4, 0, 0, 0, 0]);
        ext.extend(&out[14 + 40..]);
        frames.push(ext);
        let mut out = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .single_vlan(7.try_into().unwrap())
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1, 2, 3, 4)
            .write(&mut out, b"tagged")
            .unwrap();
        frames.push(out);
        let mut out = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1, 2)
            .write(&mut out, b"udp")
            .unwrap();
        frames.push(out);
        // IPv4 options (IHL 6), a fragment (more fragments set), a total length beyond
        // the frame, one below the header, and an EtherType that is neither IP nor a tag.
        let mut opts = tcp4[..14].to_vec();
        opts.push(0x46);
        opts.extend(&tcp4[15..34]);
        opts.extend([1, 1, 1, 0]);
        opts.extend(&tcp4[34..]);
        let total = u16::from_be_bytes([opts[16], opts[17]]) + 4;
        opts[16..18].copy_from_slice(&total.to_be_bytes());
        frames.push(opts);
        for (at, byte) in [(20, 0x20), (16, 0xff), (17, 0x00), (12, 0x88)] {
            let mut f = tcp4.clone();
            f[at] = byte;
            frames.push(f);
        }
        let mut rng = crate::observe::xorshift::XorShift::new(0x2545_f491_4f6c_dd1d);
        for len in 0..200 {
            let mut f: Vec<u8> = rng.bytes(len);
            // Half of them with a real Ethernet/IPv4 or IPv6 start, so that they get
            // past the first checks.
            if len > 40 && len % 2 == 0 {
                f[12..14].copy_from_slice(if len % 4 == 0 { &[8, 0] } else { &[0x86, 0xdd] });
                f[14] = if len % 4 == 0 { 0x45 } else { 0x60 };
            }
            frames.push(f);
        }
        for f in &frames {
            for link in [
                Link::Ethernet,
                Link::LinuxSll,
                Link::LinuxSll2,
                Link::RawIp,
                Link::Null,
            ] {
                for cut in [0, 1, 14, 20, 34] {
                    let d = &f[cut.min(f.len())..];
                    let Some(n) = net(link, d) else { continue };
                    let general = decode_sliced(net(link, d).unwrap());
                    let untagged = decode_untagged(&n);
                    match untagged {
                        Some(u) => assert!(same(u, general), "{link:?} {d:02x?}"),
                        // Left to SlicedPacket only when tagged.
                        None => assert!(
                            matches!(link, Link::Ethernet | Link::LinuxSll | Link::LinuxSll2),
                            "{link:?} {d:02x?}"
                        ),
                    }
                    assert!(same(decode(link, d, d.len()), general));
                }
            }
        }
    }

    #[test]
    fn cut_and_random_frames_are_none_never_a_panic() {
        let f = frame(b"hello");
        for n in 0..f.len() - 5 {
            assert!(decode(Link::Ethernet, &f[..n], n).is_none(), "{n}");
        }
        let mut rng = crate::observe::xorshift::XorShift::new(0x9e37_79b9_7f4a_7c15);
        for len in 0..300 {
            let bytes: Vec<u8> = rng.bytes(len);
            for link in [
                Link::Ethernet,
                Link::LinuxSll,
                Link::LinuxSll2,
                Link::RawIp,
                Link::Null,
            ] {
                let _ = decode(link, &bytes, bytes.len());
                let _ = decode(link, &bytes, bytes.len() + 100);
            }
        }
    }
}
