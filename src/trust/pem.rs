//! Certificates out of real-world bundle files, fast: PEM with LF or CRLF line ends,
//! comments and free text between blocks (RHEL's bundle), OpenSSL's `TRUSTED
//! CERTIFICATE` blocks (certificate followed by auxiliary trust data), and bare DER files.
//!
//! Why not `rustls-pki-types`' PEM reader: it decodes base64 in constant time (right for
//! private keys, slow for public certificates) and cannot say which line a bad block is
//! on. Here, a clean block (lines of base64 up to its END marker, the common case) is
//! walked line by line once: the walk finds the END marker, counts lines and gathers the
//! base64, decoded in one `base64-simd` pass; no substring search runs over the body.
//! Anything else goes to a careful path that searches for markers and falls back to the
//! whitespace-tolerant decoder. Every problem names its block and line; one bad block
//! never stops the rest of the file from loading.

use rustls_pki_types::CertificateDer;

/// A certificate decoded from a file, with where it came from.
#[derive(Debug, Clone)]
pub struct DecodedCert {
    /// The certificate DER (for `TRUSTED CERTIFICATE` blocks: without the aux data).
    pub der: CertificateDer<'static>,
    /// 1-based line of the `-----BEGIN` marker (1 for a DER file).
    pub line: usize,
    /// 1-based block number in the file.
    pub block: usize,
}

/// A problem with one block (or the whole file), reported while the rest loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockProblem {
    /// 1-based line where the block starts (or where the problem is).
    pub line: usize,
    /// 1-based block number, when the problem belongs to a block.
    pub block: Option<usize>,
    /// Why it was skipped.
    pub reason: String,
    /// True for blocks deliberately ignored (e.g. a CRL or key in a bundle), false for
    /// damage.
    pub ignored: bool,
}

/// What [`decode`] found in one file.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Certificates, in file order.
    pub certs: Vec<DecodedCert>,
    /// Problems, in file order.
    pub problems: Vec<BlockProblem>,
}

const BEGIN: &[u8] = b"-----BEGIN ";
const END: &[u8] = b"-----END ";
const DASHES: &[u8] = b"-----";

/// Decodes every certificate in `data`: PEM blocks if the file has any `-----BEGIN`
/// marker, else one DER certificate if it looks like DER.
pub fn decode(data: &[u8]) -> Decoded {
    let mut out = Decoded::default();
    if !looks_like_pem(data) {
        decode_der_file(data, &mut out);
        return out;
    }
    let mut stream = PemStream::new();
    let mut certs = Vec::new();
    stream.feed(data, true, &mut |der, line, block| {
        certs.push(DecodedCert {
            der: CertificateDer::from(der.to_vec()),
            line,
            block,
        });
    });
    out.certs = certs;
    out.problems = stream.finish(data.len() as u64);
    out
}

/// True unless `data` starts like a DER certificate (SEQUENCE with a long-form length)
/// and has no PEM marker.
pub fn looks_like_pem(data: &[u8]) -> bool {
    let der_start = data.len() >= 2 && data[0] == 0x30 && matches!(data[1], 0x81..=0x83);
    !der_start || find_marker(data, BEGIN).is_some()
}

/// The first occurrence of `marker` (which starts with a dash) in `hay`. Markers are
/// rare and base64 has no dash, so jumping from dash to dash with `memchr` beats a
/// general substring search (and needs no searcher built first).
fn find_marker(hay: &[u8], marker: &[u8]) -> Option<usize> {
    debug_assert_eq!(marker.first(), Some(&b'-'));
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'-', &hay[from..]) {
        let at = from + i;
        if hay[at..].starts_with(marker) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// An incremental PEM decoder: feed it a file chunk by chunk (so a large bundle never
/// needs to sit in fresh memory whole); it hands each certificate's DER to a callback,
/// with its line and block number, and collects problems.
pub struct PemStream {
    /// Line number of the first byte of the next chunk.
    line: usize,
    block: usize,
    scratch: Vec<u8>,
    problems: Vec<BlockProblem>,
    certs: usize,
}

/// Where [`PemStream::feed`] goes on after one block.
enum Next {
    /// The block is incomplete: wait for more data, consuming nothing from its BEGIN.
    Wait,
    /// The rest of the buffer is consumed.
    Rest,
    /// Go on at the next BEGIN marker (if any), this much of the buffer consumed.
    At {
        begin: Option<usize>,
        consumed: usize,
    },
}

impl Default for PemStream {
    fn default() -> Self {
        Self::new()
    }
}

impl PemStream {
    /// A decoder at the start of a file.
    pub fn new() -> Self {
        PemStream {
            line: 1,
            block: 0,
            scratch: Vec::new(),
            problems: Vec::new(),
            certs: 0,
        }
    }

    /// Decodes the complete blocks in `buf` (the unconsumed rest of the file so far) and
    /// returns how many bytes were consumed; the caller keeps the rest and appends more.
    /// With `eof`, everything is consumed and incomplete blocks are reported.
    pub fn feed(
        &mut self,
        buf: &[u8],
        eof: bool,
        on_cert: &mut dyn FnMut(&[u8], usize, usize),
    ) -> usize {
        let mut lines = LineCounter::new(buf, self.line);
        let mut consumed = 0;
        let mut next_begin = find_begin(buf);
        while let Some(start) = next_begin {
            match self.one_block(buf, start, eof, &mut lines, on_cert) {
                Next::Wait => return self.stop(&mut lines, start),
                Next::Rest => {
                    consumed = buf.len();
                    break;
                }
                Next::At { begin, consumed: c } => {
                    next_begin = begin;
                    consumed = c;
                }
            }
        }
        if eof {
            consumed = buf.len();
        } else if next_begin.is_none() {
            // Keep a tail that could hold the start of a BEGIN marker split by the chunk.
            consumed = consumed.max(buf.len().saturating_sub(BEGIN.len()));
        }
        self.line = lines.line_at(consumed);
        consumed
    }

    /// Decodes the block whose BEGIN marker is at `start` in `buf`: a clean certificate
    /// block on the fast path, a damaged or incomplete one reported here, the rest by
    /// [`Self::careful_block`].
    fn one_block(
        &mut self,
        buf: &[u8],
        start: usize,
        eof: bool,
        lines: &mut LineCounter<'_>,
        on_cert: &mut dyn FnMut(&[u8], usize, usize),
    ) -> Next {
        let label_start = start + BEGIN.len();
        let Some(label_len) = find_marker(&buf[label_start..], DASHES) else {
            if !eof {
                return Next::Wait;
            }
            self.block += 1;
            let line = lines.line_at(start);
            self.problems.push(damage(
                line,
                self.block,
                "BEGIN marker without closing dashes",
            ));
            return Next::Rest;
        };
        let label = &buf[label_start..label_start + label_len];
        let body_start = label_start + label_len + DASHES.len();
        if label.contains(&b'\n') {
            self.block += 1;
            let line = lines.line_at(start);
            self.problems
                .push(damage(line, self.block, "BEGIN marker broken across lines"));
            let begin = find_begin(&buf[label_start..]).map(|p| label_start + p);
            return Next::At {
                begin,
                consumed: begin.unwrap_or(label_start),
            };
        }
        if let Some(label_kind) = certificate_label(label)
            && let Some(clean) = clean_block(buf, body_start, label, &mut self.scratch)
        {
            self.block += 1;
            let line = lines.line_at(start);
            lines.skip_to(clean.end_marker, line + clean.newlines);
            let consumed = clean.end_marker + END.len() + label.len() + DASHES.len();
            let begin = find_begin(&buf[consumed..]).map(|p| consumed + p);
            match certificate_prefix(&self.scratch[..clean.der_len], label_kind) {
                Ok(len) => {
                    on_cert(&self.scratch[..len], line, self.block);
                    self.certs += 1;
                }
                Err(why) => self.problems.push(damage(line, self.block, why)),
            }
            return Next::At { begin, consumed };
        }
        let end = find_marker(&buf[body_start..], END).map(|p| body_start + p);
        let complete = end.is_some_and(|e| e + END.len() + label.len() + DASHES.len() <= buf.len());
        let Some(end) = end.filter(|_| complete) else {
            let following = find_begin(&buf[body_start..]).map(|p| body_start + p);
            if !eof && following.is_none() {
                return Next::Wait;
            }
            self.block += 1;
            let line = lines.line_at(start);
            let label_text = String::from_utf8_lossy(label);
            let why = match following {
                Some(_) => {
                    format!("truncated: a new BEGIN starts before '-----END {label_text}-----'")
                }
                None => format!("truncated: no '-----END {label_text}-----' after this BEGIN"),
            };
            self.problems.push(damage(line, self.block, &why));
            return Next::At {
                begin: following,
                consumed: following.unwrap_or(buf.len()),
            };
        };
        self.block += 1;
        let line = lines.line_at(start);
        self.careful_block(buf, line, label, body_start..end, on_cert)
    }

    /// A complete block off the fast path, starting at `line`, its body at `body` in
    /// `buf` up to its END marker: an END that does not match, a label that is not a
    /// certificate's (ignored), base64 the fast path left, or a BEGIN inside (the block
    /// lost its END).
    fn careful_block(
        &mut self,
        buf: &[u8],
        line: usize,
        label: &[u8],
        body: std::ops::Range<usize>,
        on_cert: &mut dyn FnMut(&[u8], usize, usize),
    ) -> Next {
        let block = self.block;
        let (body_start, end) = (body.start, body.end);
        let body = &buf[body_start..end];
        let label_text = || String::from_utf8_lossy(label).into_owned();
        let end_label_start = end + END.len();
        let mut next_begin = find_begin(&buf[end_label_start..]).map(|p| end_label_start + p);
        let mut consumed = end_label_start;
        let end_matches = buf[end_label_start..].starts_with(label)
            && buf[end_label_start + label.len()..].starts_with(DASHES);
        // A BEGIN inside the body: this block lost its END (only looked for when
        // something is already wrong, so good bundles are scanned once).
        let truncated = |this: &mut Self, next: &mut Option<usize>, consumed: &mut usize| -> bool {
            match find_begin(body) {
                Some(p) => {
                    this.problems.push(damage(
                        line,
                        block,
                        &format!(
                            "truncated: a new BEGIN starts before '-----END {}-----'",
                            label_text()
                        ),
                    ));
                    *next = Some(body_start + p);
                    *consumed = body_start + p;
                    true
                }
                None => false,
            }
        };
        if !end_matches {
            if !truncated(self, &mut next_begin, &mut consumed) {
                self.problems.push(damage(
                    line,
                    block,
                    &format!(
                        "the END marker after this BEGIN does not match '-----END {}-----'",
                        label_text()
                    ),
                ));
            }
            return Next::At {
                begin: next_begin,
                consumed,
            };
        }
        consumed = end_label_start + label.len() + DASHES.len();
        let Some(trusted) = certificate_label(label) else {
            // A BEGIN inside a skipped block means it lost its END, as for a
            // certificate block (and as a streamed decode sees it when the END has not
            // arrived yet).
            if !truncated(self, &mut next_begin, &mut consumed) {
                self.problems.push(BlockProblem {
                    line,
                    block: Some(block),
                    reason: format!("not a certificate block ({}), ignored", label_text()),
                    ignored: true,
                });
            }
            return Next::At {
                begin: next_begin,
                consumed,
            };
        };
        let Some(der) = decode_body(body, &mut self.scratch) else {
            if !truncated(self, &mut next_begin, &mut consumed) {
                let bad = first_bad_base64_line(body).map_or(line, |l| line + l);
                self.problems.push(BlockProblem {
                    line: bad,
                    block: Some(block),
                    reason: format!(
                        "invalid base64 in the {} block starting at line {line}",
                        label_text()
                    ),
                    ignored: false,
                });
            }
            return Next::At {
                begin: next_begin,
                consumed,
            };
        };
        match certificate_prefix(der, trusted) {
            Ok(len) => {
                on_cert(&der[..len], line, block);
                self.certs += 1;
            }
            Err(why) => self.problems.push(damage(line, block, why)),
        }
        Next::At {
            begin: next_begin,
            consumed,
        }
    }

    fn stop(&mut self, lines: &mut LineCounter<'_>, at: usize) -> usize {
        self.line = lines.line_at(at);
        at
    }

    /// Ends a file of `total_bytes`: its problems, with one saying so when the file held
    /// no PEM block at all.
    pub fn finish(mut self, total_bytes: u64) -> Vec<BlockProblem> {
        if self.block == 0 {
            self.problems.push(BlockProblem {
                line: 1,
                block: None,
                reason: if total_bytes == 0 {
                    "empty file".into()
                } else {
                    "neither PEM (no -----BEGIN marker) nor a DER certificate".into()
                },
                ignored: false,
            });
        }
        self.problems
    }
}

/// For a certificate label, whether DER may be followed by trust data (OpenSSL's
/// `TRUSTED CERTIFICATE`); `None` for other labels.
fn certificate_label(label: &[u8]) -> Option<bool> {
    match label {
        b"CERTIFICATE" | b"X509 CERTIFICATE" => Some(false),
        b"TRUSTED CERTIFICATE" => Some(true),
        _ => None,
    }
}

fn find_begin(hay: &[u8]) -> Option<usize> {
    find_marker(hay, BEGIN)
}

/// A block read in one pass by [`clean_block`].
struct CleanBlock {
    /// Length of the DER left at the start of the scratch buffer.
    der_len: usize,
    /// Offset of the `-----END ` marker.
    end_marker: usize,
    /// Newlines between the BEGIN marker and the END marker.
    newlines: usize,
}

/// The common case in one pass: from the end of the BEGIN marker, every line up to one
/// that starts `-----END <label>-----` is base64 (ends trimmed); their base64 decodes in
/// one go into `scratch`. `None` (a dash elsewhere, a short buffer, bad base64…) sends
/// the block to the careful path, which finds the same block the same way or says
/// what is wrong with it: since decoded lines hold no dash, the END found here is the
/// first one after BEGIN, as the careful path would find.
fn clean_block(
    buf: &[u8],
    body_start: usize,
    label: &[u8],
    scratch: &mut Vec<u8>,
) -> Option<CleanBlock> {
    scratch.clear();
    let mut pos = body_start;
    let mut newlines = 0;
    loop {
        let rest = &buf[pos..];
        if rest.starts_with(DASHES) {
            let after = rest.strip_prefix(END)?.strip_prefix(label)?;
            if !after.starts_with(DASHES) {
                return None;
            }
            let der_len = base64_simd::STANDARD.decode_inplace(scratch).ok()?.len();
            return Some(CleanBlock {
                der_len,
                end_marker: pos,
                newlines,
            });
        }
        // Most PEM lines are 64 characters and a newline: copied as a fixed-size block
        // (untrimmed: whitespace there fails the decode and takes the careful path).
        let eol = if let (Some(line), Some(b'\n')) = (rest.first_chunk::<64>(), rest.get(64)) {
            scratch.extend_from_slice(line);
            64
        } else {
            let eol = memchr::memchr(b'\n', rest)?;
            scratch.extend_from_slice(rest[..eol].trim_ascii());
            eol
        };
        newlines += 1;
        pos += eol + 1;
    }
}

/// Decodes a PEM body. Fast path: copy the base64 of each line (ends trimmed) into
/// `scratch` and decode it in one SIMD pass; if that fails (spaces inside lines, missing
/// padding), the whitespace-forgiving decoder decides.
fn decode_body<'s>(body: &[u8], scratch: &'s mut Vec<u8>) -> Option<&'s [u8]> {
    scratch.clear();
    scratch.reserve(body.len());
    let mut pos = 0;
    while pos < body.len() {
        // Most PEM lines are 64 characters and a newline: check that before searching.
        let end = if body.get(pos + 64) == Some(&b'\n') {
            pos + 64
        } else {
            memchr::memchr(b'\n', &body[pos..]).map_or(body.len(), |i| pos + i)
        };
        scratch.extend_from_slice(body[pos..end].trim_ascii());
        pos = end + 1;
    }
    // Decoded in place: no allocation per certificate.
    if let Ok(der) = base64_simd::STANDARD.decode_inplace(scratch.as_mut_slice()) {
        let n = der.len();
        return Some(&scratch[..n]);
    }
    scratch.clear();
    scratch.extend_from_slice(body);
    let n = base64_simd::forgiving_decode_inplace(scratch.as_mut_slice())
        .ok()?
        .len();
    Some(&scratch[..n])
}

fn decode_der_file(data: &[u8], out: &mut Decoded) {
    match certificate_prefix(data, false) {
        Ok(len) if len == data.len() => out.certs.push(DecodedCert {
            der: CertificateDer::from(data.to_vec()),
            line: 1,
            block: 1,
        }),
        Ok(_) => out.problems.push(BlockProblem {
            line: 1,
            block: None,
            reason: "DER certificate followed by trailing data".into(),
            ignored: false,
        }),
        Err(_) => out.problems.push(BlockProblem {
            line: 1,
            block: None,
            reason: if data.is_empty() {
                "empty file".into()
            } else {
                "neither PEM (no -----BEGIN marker) nor a DER certificate".into()
            },
            ignored: false,
        }),
    }
}

fn damage(line: usize, block: usize, reason: &str) -> BlockProblem {
    BlockProblem {
        line,
        block: Some(block),
        reason: reason.to_string(),
        ignored: false,
    }
}

/// The length of the DER SEQUENCE at the start of `der`. A certificate block must hold
/// exactly one; a trusted-certificate block holds the certificate then aux data.
fn certificate_prefix(der: &[u8], trailing_allowed: bool) -> Result<usize, &'static str> {
    let len = der_tlv_len(der).ok_or("not DER: no complete ASN.1 SEQUENCE")?;
    if len < der.len() && !trailing_allowed {
        return Err("DER certificate followed by trailing bytes");
    }
    Ok(len)
}

/// Total length (header + content) of the DER SEQUENCE at the start of `der`, if `der`
/// holds it completely.
pub(crate) fn der_tlv_len(der: &[u8]) -> Option<usize> {
    crate::der::sequence_len(der)
}

/// 0-based line offset (from the BEGIN line) of the first line in `body` with a byte
/// that is neither base64 nor whitespace.
fn first_bad_base64_line(body: &[u8]) -> Option<usize> {
    let mut line = 0;
    for &b in body {
        match b {
            b'\n' => line += 1,
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' | b'\r' | b' ' | b'\t' => {
            }
            _ => return Some(line),
        }
    }
    None
}

/// Counts lines incrementally as the scanner moves forward.
struct LineCounter<'a> {
    data: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(data: &'a [u8], first_line: usize) -> Self {
        LineCounter {
            data,
            pos: 0,
            line: first_line,
        }
    }

    /// Records that `offset` (at or after the current position) is on `line`, counted by
    /// the caller.
    fn skip_to(&mut self, offset: usize, line: usize) {
        debug_assert!(offset >= self.pos);
        self.pos = offset;
        self.line = line;
    }

    fn line_at(&mut self, offset: usize) -> usize {
        if offset > self.pos {
            self.line += memchr::memchr_iter(b'\n', &self.data[self.pos..offset]).count();
            self.pos = offset;
        }
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{PkiOptions, TestPki};

    fn pki() -> TestPki {
        TestPki::generate(&PkiOptions::default()).unwrap()
    }

    #[test]
    fn plain_crlf_and_text_between_blocks() {
        let p = pki();
        let second = format!(
            "Bag Attributes\n  friendlyName: foo\n{}\ntrailing words\n",
            p.intermediate.pem
        );
        let text = format!(
            "# A comment\nSome text: x\n\n{}{second}",
            p.root.pem.replace('\n', "\r\n")
        );
        let d = decode(text.as_bytes());
        assert!(d.problems.is_empty(), "{:?}", d.problems);
        assert_eq!(d.certs.len(), 2);
        assert_eq!(d.certs[0].der, p.root.der);
        assert_eq!(d.certs[0].line, 4);
        assert_eq!(d.certs[1].der, p.intermediate.der);
        assert_eq!(d.certs[1].block, 2);
    }

    /// The one-pass path (clean blocks) and the careful path (anything odd) find the same
    /// certificates on the same lines.
    #[test]
    fn clean_and_careful_blocks_agree_on_lines() {
        let p = pki();
        // A space inside a base64 line, and an END marker glued to the last base64 line:
        // both legal enough to load, both only on the careful path.
        let spaced = p
            .intermediate
            .pem
            .replacen("\n", "\n ", 3)
            .replacen("MII", "MI I", 1);
        let glued = p.server.pem.replace("\n-----END", "-----END");
        let text = format!(
            "x\n{}{spaced}-- text with dashes --\n{glued}\n\n{}",
            p.root.pem.replace('\n', "\r\n"),
            p.client.pem
        );
        let d = decode(text.as_bytes());
        assert!(d.problems.is_empty(), "{:?}", d.problems);
        let begins: Vec<usize> = text
            .match_indices("-----BEGIN")
            .map(|(at, _)| text[..at].matches('\n').count() + 1)
            .collect();
        let lines: Vec<usize> = d.certs.iter().map(|c| c.line).collect();
        assert_eq!(lines, begins);
        let ders: Vec<_> = d.certs.iter().map(|c| c.der.clone()).collect();
        assert_eq!(
            ders,
            [
                &p.root.der,
                &p.intermediate.der,
                &p.server.der,
                &p.client.der
            ]
            .map(|d| d.clone())
        );
    }

    #[test]
    fn trusted_certificate_drops_aux_data() {
        let p = pki();
        let mut der = p.root.der.to_vec();
        // X509_CERT_AUX: SEQUENCE { trust SEQUENCE { OID serverAuth } }
        der.extend_from_slice(&[
            0x30, 0x0c, 0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01,
        ]);
        let b64 = base64_simd::STANDARD.encode_to_string(&der);
        let mut body = String::new();
        for chunk in b64.as_bytes().chunks(64) {
            body.push_str(std::str::from_utf8(chunk).unwrap());
            body.push('\n');
        }
        let text = format!(
            "-----BEGIN TRUSTED CERTIFICATE-----\n{body}-----END TRUSTED CERTIFICATE-----\n"
        );
        let d = decode(text.as_bytes());
        assert!(d.problems.is_empty(), "{:?}", d.problems);
        assert_eq!(d.certs[0].der, p.root.der);
    }

    #[test]
    fn der_file() {
        let p = pki();
        let d = decode(&p.root.der);
        assert_eq!(d.certs.len(), 1);
        let d = decode(b"\x30\x03\x02\x01");
        assert_eq!(d.certs.len(), 0);
        assert_eq!(d.problems.len(), 1);
    }

    #[test]
    fn damage_is_reported_per_block_and_the_rest_loads() {
        let p = pki();
        let bad_b64 = p.server.pem.replacen("MII", "M!I", 1);
        let not_cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let text = format!(
            "{}{bad_b64}{not_cert}{key}{}",
            p.root.pem, p.intermediate.pem
        );
        let d = decode(text.as_bytes());
        assert_eq!(d.certs.len(), 2, "{:?}", d.problems);
        assert_eq!(d.problems.len(), 3, "{:?}", d.problems);
        assert!(
            d.problems[0].reason.contains("invalid base64"),
            "{:?}",
            d.problems[0]
        );
        assert_eq!(d.problems[0].block, Some(2));
        assert!(d.problems[0].line > p.root.pem.lines().count());
        assert!(
            d.problems[1].reason.contains("not DER"),
            "{:?}",
            d.problems[1]
        );
        assert!(d.problems[2].ignored);
    }

    #[test]
    fn streamed_and_whole_decoding_agree_on_a_begin_inside_a_skipped_block() {
        // Found by fuzz/fuzz_targets/pem_bundle.rs: decoded whole, the first block (an
        // empty label) was skipped as "not a certificate"; streamed in 7-byte chunks, it
        // was truncated by the second BEGIN. Both now say truncated.
        let data = b"\x00-----BEGIN ----------BEGIN -----END -----";
        let whole = decode(data);
        let mut stream = PemStream::new();
        let mut pending: Vec<u8> = Vec::new();
        for part in data.chunks(7) {
            pending.extend_from_slice(part);
            let used = stream.feed(&pending, false, &mut |_, _, _| {});
            pending.drain(..used);
        }
        stream.feed(&pending, true, &mut |_, _, _| {});
        let chunked = stream.finish(data.len() as u64);
        let reasons = |p: &[BlockProblem]| p.iter().map(|p| p.reason.clone()).collect::<Vec<_>>();
        assert_eq!(reasons(&whole.problems), reasons(&chunked));
        assert!(
            whole.problems[0].reason.contains("truncated"),
            "{:?}",
            whole.problems
        );
    }

    #[test]
    fn truncated_pem() {
        let p = pki();
        let cut = &p.intermediate.pem[..p.intermediate.pem.len() / 2];
        let text = format!("{}{cut}", p.root.pem);
        let d = decode(text.as_bytes());
        assert_eq!(d.certs.len(), 1);
        assert!(
            d.problems[0].reason.contains("truncated"),
            "{:?}",
            d.problems
        );
        // Truncated block followed by a good one: the good one still loads.
        let text = format!("{cut}{}", p.root.pem);
        let d = decode(text.as_bytes());
        assert_eq!(d.certs.len(), 1, "{:?}", d.problems);
        assert!(
            d.problems[0].reason.contains("truncated"),
            "{:?}",
            d.problems
        );
    }

    #[test]
    fn garbage_and_empty() {
        let d = decode(b"hello world\n");
        assert!(d.certs.is_empty());
        assert!(!d.problems.is_empty());
        let d = decode(b"");
        assert_eq!(d.problems[0].reason, "empty file");
    }

    type Found = Vec<(Vec<u8>, usize, usize)>;

    /// Feeds `data` in chunks of `chunk` bytes as the loader does.
    fn feed_chunked(data: &[u8], chunk: usize) -> (Found, Vec<BlockProblem>) {
        let mut stream = PemStream::new();
        let mut certs = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut pos = 0;
        loop {
            let n = chunk.min(data.len() - pos);
            buf.extend_from_slice(&data[pos..pos + n]);
            pos += n;
            let eof = n == 0;
            let consumed = stream.feed(&buf, eof, &mut |der, line, block| {
                certs.push((der.to_vec(), line, block))
            });
            buf.drain(..consumed);
            if eof {
                break;
            }
        }
        (certs, stream.finish(data.len() as u64))
    }

    #[test]
    fn chunked_feeding_matches_whole_file() {
        let p = pki();
        let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let cut = &p.client.pem[..p.client.pem.len() / 2];
        let bad_b64 = p.server.pem.replacen("MII", "M!I", 1);
        let text = format!(
            "head\r\n{}{key}{bad_b64}{cut}{}\ntext\n{}",
            p.root.pem.replace('\n', "\r\n"),
            p.intermediate.pem,
            p.server.pem
        );
        let whole = decode(text.as_bytes());
        let whole_certs: Vec<_> = whole
            .certs
            .iter()
            .map(|c| (c.der.to_vec(), c.line, c.block))
            .collect();
        assert_eq!(whole_certs.len(), 3, "{:?}", whole.problems);
        assert_eq!(whole.problems.len(), 3, "{:?}", whole.problems);
        for chunk in [1, 7, 11, 64, 100, 999, 4096, 1 << 20] {
            let (certs, problems) = feed_chunked(text.as_bytes(), chunk);
            assert_eq!(certs, whole_certs, "chunk {chunk}");
            assert_eq!(problems, whole.problems, "chunk {chunk}");
        }
    }

    #[test]
    fn der_lengths() {
        assert_eq!(der_tlv_len(&[0x30, 0x00]), Some(2));
        assert_eq!(der_tlv_len(&[0x30, 0x81, 0x01, 0x00]), Some(4));
        assert_eq!(der_tlv_len(&[0x30, 0x82, 0x01]), None);
        assert_eq!(der_tlv_len(&[0x31, 0x00]), None);
        assert_eq!(der_tlv_len(&[0x30, 0x05, 0x00]), None);
    }
}
