//! Human-readable renderings: aligned tables and one-line verdicts. Styling (outside
//! tables, whose widths must not count escape codes) is emitted as ANSI sequences; the
//! CLI's output stream strips them when color is off.

use std::path::Path;

use anstyle::{AnsiColor, Style};
use comfy_table::{CellAlignment, Table, presets};

use std::time::Duration;

use crate::pki::{Bundle, CertSummary, WrittenFile};
use crate::trust::Probe;
use crate::trust::discover::Kind;
use crate::trust::measure::LoadMeasurement;

pub(crate) const BOLD: Style = Style::new().bold();
const GOOD: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)))
    .bold();
pub(crate) const BAD: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)))
    .bold();

pub(crate) fn styled(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

pub(crate) fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().map(|h| h.to_string()));
    t
}

/// Renders a table without the padding comfy-table leaves at line ends.
pub(crate) fn render(t: &Table) -> String {
    t.lines()
        .map(|l| l.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Formats a number with about four significant digits, without exponent for ordinary
/// magnitudes.
pub fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-4..=9).contains(&mag) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - mag).clamp(0, 9) as usize;
    format!("{x:.decimals$}")
}

/// The files and certificates of a freshly written PKI.
pub fn pki_init(dir: &Path, files: &[WrittenFile], certs: &[CertSummary]) -> String {
    let mut t = table(&["file", "mode", "contents"]);
    for f in files {
        let name = f
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        t.add_row(vec![name, f.mode.clone(), f.contents.to_string()]);
    }
    let mut c = table(&[
        "certificate",
        "key",
        "subject CN",
        "EKU / SANs",
        "not after",
    ]);
    for s in certs {
        let mut usage = s.eku.join(",");
        if !s.sans.is_empty() {
            usage.push_str(&format!(" {}", s.sans.join(",")));
        }
        c.add_row(vec![
            s.role.to_string(),
            s.key.to_string(),
            s.subject.clone(),
            if usage.is_empty() { "CA".into() } else { usage },
            s.not_after.clone(),
        ]);
    }
    format!(
        "{} {}\n{}\n\n{}\n",
        styled(BOLD, "wrote test PKI in"),
        dir.display(),
        render(&t),
        render(&c)
    )
}

/// A freshly written synthetic bundle.
pub fn bundle(path: &Path, b: &Bundle) -> String {
    format!(
        "{} {}: {} certificates ({} CAs, {} cross-signed twins), {} keys from a pool of {} distinct, {} bytes, in {:.2} s\n",
        styled(BOLD, "wrote bundle"),
        path.display(),
        b.certificates,
        b.cas,
        b.twins,
        b.key,
        b.distinct_keys,
        b.pem.len(),
        b.elapsed.as_secs_f64()
    )
}

/// A duration with a unit that keeps three or four significant digits.
pub fn dur(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{} µs", num(ns / 1e3))
    } else if ns < 1e9 {
        format!("{} ms", num(ns / 1e6))
    } else {
        format!("{} s", num(ns / 1e9))
    }
}

/// The probe chain.
pub fn trust_probe(p: &Probe) -> String {
    let mut t = table(&["", "kind", "path", "status", "size", "time", "why probed"]);
    for (i, e) in p.entries.iter().enumerate() {
        let mark = if Some(i) == p.chosen_file || p.chosen_dirs.contains(&i) {
            "→"
        } else {
            ""
        };
        let size = match (e.kind, e.size) {
            (Kind::File, Some(s)) => format!("{s} B"),
            (Kind::Dir, Some(n)) => format!("{n} entries"),
            _ => String::new(),
        };
        let status = e.status.label();
        t.add_row(vec![
            mark.to_string(),
            format!("{:?}", e.kind).to_lowercase(),
            e.path.display().to_string(),
            status,
            size,
            dur(e.elapsed),
            e.origin.clone(),
        ]);
    }
    let mut out = format!(
        "{} {}\n{}\n",
        styled(BOLD, "probe chain under"),
        p.root.display(),
        render(&t)
    );
    match p.chosen_file {
        Some(i) => out.push_str(&format!("a client loads {}", p.entries[i].path.display())),
        None if !p.chosen_dirs.is_empty() => {
            out.push_str("no bundle file: a client reads the directories marked →")
        }
        None => out.push_str(&styled(
            BAD,
            "no CA bundle or directory found: clients relying on the system store will fail",
        )),
    }
    if !p.deferred_dirs.is_empty() {
        let dirs: Vec<String> = p
            .deferred_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        out.push_str(&format!(" (some clients also read {})", dirs.join(", ")));
    }
    out.push_str(&format!("\nprobe time {}\n", dur(p.elapsed)));
    out
}

/// The layered load, cold and warm, with comparison rows.
pub fn trust_load(m: &LoadMeasurement) -> String {
    let s = &m.stats;
    let mut out = format!("{} {}\n", styled(BOLD, "loaded"), m.source);
    out.push_str(&format!(
        "{} anchors from {} certificates decoded ({} duplicates dropped: {}); {} file-opening syscalls, {} bytes read",
        s.anchors,
        s.certs_decoded,
        s.duplicate_certs,
        if m.cold.x509.is_some() { "identical certificates" } else { "same trust anchor (subject, key, name constraints)" },
        s.files_opened,
        s.bytes_read
    ));
    if s.dir_entries > 0 {
        out.push_str(&format!(
            "; {} directory entries, {} leading to a file already read (not opened)",
            s.dir_entries, s.same_file_skipped
        ));
    }
    out.push('\n');
    let mut t = table(&[
        "layer",
        "cold (1st load)",
        &format!("warm (median of {})", m.iterations - 1),
    ]);
    let rows: [(&str, Duration, Duration); 4] = [
        ("0 probe", m.cold.probe, m.warm.probe),
        ("1 I/O", m.cold.io, m.warm.io),
        ("2 PEM → DER", m.cold.pem, m.warm.pem),
        ("3 DER → trust anchor", m.cold.anchors, m.warm.anchors),
    ];
    for (name, c, w) in rows {
        t.add_row(vec![name.to_string(), dur(c), dur(w)]);
    }
    t.add_row(vec![
        styled(BOLD, "total"),
        styled(BOLD, &dur(m.cold.total)),
        styled(BOLD, &dur(m.warm.total)),
    ]);
    if let (Some(c), Some(w)) = (m.cold.x509, m.warm.x509) {
        t.add_row(vec![
            "4 full X.509 parse (analysis only)".into(),
            dur(c),
            dur(w),
        ]);
    }
    right_align(&mut t, &[1, 2]);
    out.push_str(&render(&t));
    out.push('\n');
    if !m.baselines.is_empty() {
        let mut b = table(&[
            "same run, for comparison",
            "cold",
            "warm",
            "certs",
            "ours ÷ it (cold)",
            "ours ÷ it (warm)",
        ]);
        for row in &m.baselines {
            let ratio = |ours: Duration, theirs: Duration| {
                if theirs.is_zero() {
                    "-".to_string()
                } else {
                    format!("{:.3}×", ours.as_secs_f64() / theirs.as_secs_f64())
                }
            };
            b.add_row(vec![
                row.name.clone(),
                dur(row.cold),
                dur(row.warm),
                row.certs.to_string(),
                ratio(m.cold.total, row.cold),
                ratio(m.warm.total, row.warm),
            ]);
        }
        right_align(&mut b, &[1, 2, 3, 4, 5]);
        out.push('\n');
        out.push_str(&render(&b));
        out.push('\n');
    }
    if let Some(w) = m.shared_warm {
        out.push_str(&format!(
            "\nshared store (TrustStore::system_shared) once loaded: {} per access, no I/O\n",
            dur(w)
        ));
    }
    for d in &m.deferred_dirs {
        out.push_str(&format!(
            "\nnot read: {} — {} entries → {} distinct files → {} certificates, {} already in the store ({} file reads and parses avoided), {} only in the directory\n",
            d.dir.display(),
            d.entries,
            d.distinct_files,
            d.certs,
            d.already_loaded,
            d.distinct_files,
            d.only_in_dir
        ));
        if !d.only_in_dir_subjects.is_empty() {
            out.push_str(&format!(
                "  only in the directory: {}\n",
                d.only_in_dir_subjects.join("; ")
            ));
        }
    }
    out.push_str(&problems(&s.problems));
    out
}

/// The analysis of a store.
pub fn trust_analysis(a: &crate::trust::analyze::Analysis) -> String {
    let mut out = format!(
        "{} {} (validity at {})\n",
        styled(BOLD, "analysis of"),
        a.source,
        a.at
    );
    let mut t = table(&["", "count"]);
    let warn = |n: usize| n.to_string();
    let rows: Vec<(&str, String)> = vec![
        ("certificates found", a.count.to_string()),
        ("unique", a.unique.to_string()),
        ("exact duplicates", warn(a.exact_duplicates)),
        (
            "twins (same subject and key, other certificate)",
            format!("{} in {} groups", a.twins, a.twin_groups),
        ),
        ("expired", warn(a.expired)),
        ("not yet valid", warn(a.not_yet_valid)),
        ("weak keys (RSA < 2048)", warn(a.weak_keys)),
        ("SHA-1 signatures", warn(a.sha1_signatures)),
        ("MD5/MD2 signatures", warn(a.md5_signatures)),
        ("not a CA", warn(a.not_ca)),
        ("self-signed", a.self_signed.to_string()),
        ("issued by another CA", a.not_self_signed.to_string()),
        ("DER bytes (unique)", a.der_bytes.to_string()),
        ("file bytes read", a.file_bytes.to_string()),
    ];
    for (k, v) in rows {
        t.add_row(vec![k.to_string(), v]);
    }
    right_align(&mut t, &[1]);
    out.push_str(&render(&t));
    let mut k = table(&["key type", "count"]);
    for (key, n) in &a.key_types {
        k.add_row(vec![key.clone(), n.to_string()]);
    }
    right_align(&mut k, &[1]);
    out.push_str("\n\n");
    out.push_str(&render(&k));
    out.push('\n');
    if let Some(list) = &a.certificates {
        let mut l = table(&["subject CN", "SHA-256", "not after", "key", "flags"]);
        for c in list {
            let flags: Vec<&str> = c.flags.iter().map(|f| f.label()).collect();
            l.add_row(vec![
                c.subject_cn.clone(),
                c.sha256.clone(),
                c.not_after.clone(),
                c.key.clone(),
                flags.join(","),
            ]);
        }
        out.push('\n');
        out.push_str(&render(&l));
        out.push('\n');
    }
    out.push_str(&problems(&a.problems));
    out
}

/// The result of a trim.
pub fn trust_trim(t: &crate::trust::trim::Trimmed, path: &Path) -> String {
    let mut out = format!(
        "{} {}: kept {} of {} anchors ({} certificates) from {}\n",
        styled(BOLD, "wrote"),
        path.display(),
        t.kept.len(),
        t.source_anchors,
        t.source_certificates,
        t.source
    );
    let mut k = table(&["kept", "SHA-256", "verifies"]);
    for r in &t.kept {
        let why = if r.also_kept && r.verifies.is_empty() {
            "(--also-keep)".to_string()
        } else {
            r.verifies.join(", ")
        };
        k.add_row(vec![r.subject_cn.clone(), r.sha256.clone(), why]);
    }
    out.push_str(&render(&k));
    out.push('\n');
    let mut c = table(&[
        "chain",
        "leaf",
        "certs",
        "anchors in the source that verify it",
    ]);
    for ch in &t.chains {
        c.add_row(vec![
            ch.name.clone(),
            ch.leaf.clone(),
            ch.length.to_string(),
            ch.verified_by.len().to_string(),
        ]);
    }
    out.push('\n');
    out.push_str(&render(&c));
    out.push('\n');
    if !t.removed.is_empty() {
        const SHOWN: usize = 8;
        let names: Vec<&str> = t
            .removed
            .iter()
            .take(SHOWN)
            .map(|r| r.subject_cn.as_str())
            .collect();
        let more = if t.removed.len() > SHOWN {
            format!(
                "; … and {} more (--json lists all)",
                t.removed.len() - SHOWN
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "\nremoved {}: {}{more}\n",
            t.removed.len(),
            names.join("; ")
        ));
    }
    out.push_str("every chain verified against the trimmed set before writing\n");
    out
}

/// One detailed verification.
pub fn verify_report(
    chain: &Path,
    host: &str,
    roots: &str,
    r: &crate::verify::VerifyReport,
) -> String {
    let verdict = if r.valid {
        styled(GOOD, "VALID")
    } else {
        styled(
            BAD,
            &format!("INVALID: {}", r.reason.clone().unwrap_or_default()),
        )
    };
    let mut out = format!(
        "{} for {host} against {roots}: {verdict}\n",
        chain.display()
    );
    if !r.path.is_empty() {
        out.push_str(&format!("path: {}\n", r.path.join(" → ")));
    }
    out.push_str(&format!(
        "anchors: {} in the store, {} candidate(s) handed to webpki ({} matched by key identifier)\n",
        r.anchors_in_store, r.candidate_anchors, r.candidates_by_key_id
    ));
    out.push_str(&format!("signature checks: {}\n", r.signature_checks));
    let mut t = table(&["phase", "time"]);
    for (name, ns) in [
        ("anchor lookup (index)", r.lookup_ns),
        ("signature checks", r.signatures_ns),
        ("path building and policy", r.policy_ns),
        ("server name", r.name_ns),
        ("total", r.total_ns),
    ] {
        t.add_row(vec![name.to_string(), dur(Duration::from_nanos(ns))]);
    }
    right_align(&mut t, &[1]);
    out.push_str(&render(&t));
    out.push('\n');
    out
}

/// The verification benchmark.
pub fn verify_bench(b: &crate::verify::bench::BenchResult) -> String {
    let mut out = format!(
        "{} chain of {} for {}\n",
        styled(BOLD, "verify bench:"),
        b.chain,
        b.host
    );
    let mut t = table(&[
        "store",
        "anchors",
        "(a) indexed",
        "(b) rustls default",
        "(c) reload each time",
        "(d) trimmed",
        "sig checks a/b",
        "c ÷ a",
        "b ÷ a",
    ]);
    let d = |ns: u64| dur(Duration::from_nanos(ns));
    for r in &b.sizes {
        let ratio = |x: u64| {
            if r.indexed_ns == 0 {
                "-".into()
            } else {
                format!("{:.1}×", x as f64 / r.indexed_ns as f64)
            }
        };
        t.add_row(vec![
            r.size.clone(),
            r.anchors.to_string(),
            d(r.indexed_ns),
            d(r.default_ns),
            d(r.reload_ns),
            format!(
                "{} ({} anchor{})",
                d(r.trimmed_ns),
                r.trimmed_anchors,
                if r.trimmed_anchors == 1 { "" } else { "s" }
            ),
            format!(
                "{}/{}",
                r.indexed_signature_checks, r.default_signature_checks
            ),
            ratio(r.reload_ns),
            ratio(r.default_ns),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6, 7, 8]);
    out.push_str(&render(&t));
    let e = &b.growth_exponent;
    out.push_str(&format!(
        "\ngrowth exponent (slope of log time over log anchors): indexed {:.3}, default {:.3}, reload {:.3}, trimmed {:.3}\n",
        e.indexed, e.default, e.reload, e.trimmed
    ));
    out.push_str(&format!(
        "indexed, largest store ÷ smallest: {:.3}×\n",
        b.indexed_largest_over_smallest
    ));
    if !b.threads.is_empty() {
        let mut th = table(&[
            "threads sharing one verifier",
            "verifications/s",
            "per thread",
        ]);
        for r in &b.threads {
            th.add_row(vec![
                r.threads.to_string(),
                format!("{:.0}", r.total_per_s),
                format!("{:.0}", r.per_thread_per_s),
            ]);
        }
        right_align(&mut th, &[1, 2]);
        out.push('\n');
        out.push_str(&render(&th));
        out.push_str(&format!(
            "\n({} cores here: per-thread throughput can only stay flat up to that many threads)\n",
            b.cores
        ));
    }
    out
}

/// The line `serve` prints once listening.
pub fn serve_listening(url: &str, metrics: Option<std::net::SocketAddr>) -> String {
    let mut out = format!("listening on {url} (h2, http/1.1)");
    if let Some(m) = metrics {
        out.push_str(&format!("; metrics on http://{m}/metrics and /stats"));
    }
    out.push('\n');
    out
}

/// The summary `serve` prints at shutdown.
pub fn serve_summary(s: &crate::server::ServeSummary) -> String {
    let mut out = format!("{} after {:.1} s\n", styled(BOLD, "stopped"), s.seconds);
    let mut t = table(&["handshakes", "count", "p50", "p90", "p99", "p99.9", "max"]);
    for (kind, q) in &s.stats.handshakes {
        let d = |ns: u64| dur(Duration::from_nanos(ns));
        t.add_row(vec![
            kind.clone(),
            q.count.to_string(),
            d(q.p50_ns),
            d(q.p90_ns),
            d(q.p99_ns),
            d(q.p999_ns),
            d(q.max_ns),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6]);
    out.push_str(&render(&t));
    out.push_str(&format!("\nrequests: {}\n", s.stats.requests));
    if !s.stats.failures.is_empty() {
        let f: Vec<String> = s
            .stats
            .failures
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!("failed handshakes: {}\n", f.join(", ")));
    }
    if let Some(k) = &s.kx_pool {
        out.push_str(&format!(
            "key-share pool: {} handshakes used a pre-generated share, {} generated one\n",
            k.hits, k.misses
        ));
    }
    if s.unfinished_connections > 0 {
        out.push_str(&format!(
            "connections cut at the shutdown deadline: {}\n",
            s.unfinished_connections
        ));
    }
    out
}

/// The summary `serve --stack actix` prints at shutdown: what it can count, and what it
/// cannot.
pub fn serve_summary_actix(s: &crate::server::actix_stack::ActixSummary) -> String {
    let mut out = format!(
        "{} after {:.1} s (actix-web)\n",
        styled(BOLD, "stopped"),
        s.seconds
    );
    out.push_str(&format!("requests: {}\n", s.requests));
    if let Some(k) = &s.kx_pool {
        out.push_str(&format!(
            "key-share pool: {} handshakes used a pre-generated share, {} generated one\n",
            k.hits, k.misses
        ));
    }
    out.push_str(&format!(
        "not available with actix-web (tlsperf's accept loop measures them): {}\n",
        s.not_available.join(", ").replace('_', " ")
    ));
    out
}

/// A ticket key ring (ids and states only).
pub fn ticket_ring(verb: &str, r: &crate::tls::tickets::RingInfo) -> String {
    let mut t = table(&["key id", "state"]);
    for k in &r.keys {
        let state = match k.state {
            crate::tls::tickets::KeyState::Active => "active (encrypts and decrypts)",
            crate::tls::tickets::KeyState::Standby => {
                "standby (decrypts; active after the next rotation)"
            }
            crate::tls::tickets::KeyState::DecryptOnly => {
                "decrypt-only (destroyed at the next rotation)"
            }
        };
        t.add_row(vec![k.id.clone(), state.to_string()]);
    }
    format!(
        "{} {} (rotated {})\n{}\n",
        styled(BOLD, verb),
        r.path.display(),
        r.rotated_at,
        render(&t)
    )
}

/// Problems, one a line (damage first, then what was deliberately ignored).
pub fn problems(list: &[crate::trust::FileProblem]) -> String {
    let mut out = String::new();
    let damage: Vec<_> = list.iter().filter(|p| !p.ignored).collect();
    let ignored: Vec<_> = list.iter().filter(|p| p.ignored).collect();
    if !damage.is_empty() {
        out.push_str(&format!(
            "\n{} ({}):\n",
            styled(BAD, "problems"),
            damage.len()
        ));
        for p in damage {
            out.push_str(&format!("  {p}\n"));
        }
    }
    if !ignored.is_empty() {
        out.push_str(&format!("\nignored ({}):\n", ignored.len()));
        for p in ignored {
            out.push_str(&format!("  {p}\n"));
        }
    }
    out
}

pub(crate) fn right_align(t: &mut Table, cols: &[usize]) {
    for &c in cols {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// `tlsperf handshake`.
pub fn handshake_run(r: &crate::handshake::HandshakeRun) -> String {
    use crate::client::Phase;
    let n = &r.negotiated;
    let mut s = format!(
        "{}\n\n",
        styled(BOLD, &format!("Handshakes with {}", r.target))
    );
    s += &format!(
        "negotiated: {} {} group {} signature {} ALPN {}\n",
        n.version,
        n.cipher_suite,
        n.group.as_deref().unwrap_or("-"),
        n.signature_scheme.as_deref().unwrap_or("-"),
        n.alpn.as_deref().unwrap_or("-")
    );
    s += &format!(
        "OCSP: {}\nroots: {} (loaded in {:.3} ms, before the first connection)\ncrypto provider first use: {:.3} ms (before the first connection)\nClientHello: {} bytes\n\n",
        match n.ocsp_stapled_bytes {
            Some(b) => format!("stapled ({b} bytes)"),
            None => "not stapled".into(),
        },
        r.roots,
        r.roots_ms,
        r.provider_init_ms,
        r.client_hello_bytes
    );
    let mut t = table(&["depth", "bytes", "subject", "not after"]);
    for c in &r.chain {
        t.add_row(vec![
            c.depth.to_string(),
            c.bytes.to_string(),
            c.subject.clone(),
            c.not_after.clone(),
        ]);
    }
    right_align(&mut t, &[0, 1]);
    s += &format!(
        "server chain ({} certificates, {} bytes):\n{}\n\n",
        r.chain.len(),
        r.chain.iter().map(|c| c.bytes).sum::<usize>(),
        render(&t)
    );
    let mut header = vec!["phase (ms)", "cold"];
    if r.warm.is_some() {
        header.extend(["warm p50", "p90", "p99", "max"]);
    }
    let mut t = table(&header);
    for p in Phase::ALL {
        let mut row = vec![
            p.name().to_string(),
            format!(
                "{:.3}",
                r.cold.phases_ms.get(p.name()).copied().unwrap_or(0.0)
            ),
        ];
        if let Some(w) = &r.warm
            && let Some(q) = w.phases.get(p.name())
        {
            for v in [q.p50_ns, q.p90_ns, q.p99_ns, q.max_ns] {
                row.push(format!("{:.3}", v as f64 / 1e6));
            }
        }
        t.add_row(row);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5]);
    s += &render(&t);
    s += &format!(
        "\n\ncold: {} handshake, HTTP {}{}\n",
        r.cold.kind,
        r.cold.status,
        match r.cold.early_data {
            crate::client::EarlyData::NotSent => String::new(),
            crate::client::EarlyData::Accepted => ", 0-RTT data accepted".into(),
            crate::client::EarlyData::Rejected => ", 0-RTT data rejected (sent again)".into(),
        }
    );
    if let Some(w) = &r.warm {
        let kinds: Vec<String> = w.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        s += &format!(
            "warm: {} connection{}: {}; resumption rate {:.1}%",
            w.count,
            if w.count == 1 { "" } else { "s" },
            kinds.join(", "),
            w.resumption_rate * 100.0
        );
        if w.early_data_accepted + w.early_data_rejected > 0 {
            s += &format!(
                "; 0-RTT accepted {} rejected {}",
                w.early_data_accepted, w.early_data_rejected
            );
        }
        s.push('\n');
        for (k, n) in &w.errors {
            s += &format!(
                "{} {k}: {n} (e.g. {})\n",
                styled(BAD, "failed"),
                w.error_examples.get(k).map(String::as_str).unwrap_or("")
            );
        }
    }
    s
}

/// `tlsperf load` (and `merge`).
pub fn load_result(r: &crate::load::LoadResult) -> String {
    let ms = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    let mut s = format!(
        "{}\n\n",
        styled(
            BOLD,
            &format!(
                "Load on {}: {:.2} s{}{}",
                r.target,
                r.duration_s,
                if r.machines > 1 {
                    format!(", {} machines", r.machines)
                } else {
                    String::new()
                },
                if r.interrupted {
                    " (interrupted: partial result)"
                } else {
                    ""
                }
            )
        )
    );
    s += &format!(
        "requests: {} completed, {} failed — {} req/s; body {} bytes\n",
        r.requests.completed,
        r.requests.failed,
        num(r.requests.per_second),
        r.body_bytes
    );
    let kinds: Vec<String> = r
        .handshakes
        .kinds
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    s += &format!(
        "handshakes: {} ({}) — {} /s; resumption rate {:.1}%\n",
        r.handshakes.total,
        if kinds.is_empty() {
            "none".into()
        } else {
            kinds.join(", ")
        },
        num(r.handshakes.per_second),
        r.handshakes.resumption_rate * 100.0
    );
    if !r.handshakes.early_data.is_empty() {
        let e: Vec<String> = r
            .handshakes
            .early_data
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        s += &format!("0-RTT requests: {}\n", e.join(", "));
    }
    if r.handshakes.chains_from_cache > 0 {
        s += &format!(
            "certificate chains: {} verified in full, {} accepted from the verdict cache (same chain and name; --no-verify-cache verifies each)\n",
            r.handshakes.chains_verified, r.handshakes.chains_from_cache
        );
    }
    let status: Vec<String> = r.status.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    if !status.is_empty() {
        s += &format!("status: {}\n", status.join(", "));
    }
    s.push('\n');
    let mut t = table(&["latency (ms)", "count", "p50", "p90", "p99", "p99.9", "max"]);
    let mut row = |name: &str, d: &crate::load::result::Dist| {
        let q = &d.quantiles;
        t.add_row(vec![
            name.to_string(),
            q.count.to_string(),
            ms(q.p50_ns),
            ms(q.p90_ns),
            ms(q.p99_ns),
            ms(q.p999_ns),
            ms(q.max_ns),
        ]);
    };
    row("request", &r.latency);
    if let Some(d) = &r.latency_corrected {
        row("request (from intended send)", d);
    }
    if let Some(d) = &r.handshake_full {
        row("TLS handshake, full", d);
    }
    if let Some(d) = &r.handshake_resumed {
        row("TLS handshake, resumed", d);
    }
    for p in crate::client::Phase::ALL {
        if let Some(d) = r.phases.get(p.name()) {
            row(&format!("  phase {}", p.name()), d);
        }
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6]);
    s += &render(&t);
    s.push('\n');
    if let Some(d) = &r.send_lateness {
        let q = &d.quantiles;
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1e3);
        s += &format!(
            "generator send lateness (actual − intended send instant, {} requests): p50 {} µs, p99 {} µs, max {} µs\n",
            q.count,
            us(q.p50_ns),
            us(q.p99_ns),
            us(q.max_ns)
        );
    }
    if !r.errors.is_empty() {
        s += &format!("\n{}\n", styled(BAD, "errors:"));
        for (k, n) in &r.errors {
            s += &format!(
                "  {k}: {n} (e.g. {})\n",
                r.error_examples.get(k).map(String::as_str).unwrap_or("")
            );
        }
    }
    // CPU per request always; per handshake only when every request opened its own
    // connection (finish_rates leaves it out otherwise).
    let per = |req: Option<f64>, hs: Option<f64>| {
        let mut p = String::new();
        if let Some(c) = req {
            p += &format!(", {c:.1} µs per request");
        }
        if let Some(c) = hs {
            p += &format!(", {c:.1} µs per handshake");
        }
        p
    };
    let g = &r.generator;
    s += &format!(
        "\ngenerator: {:.3} CPU s on {} threads ({:.0}% busy){}\n",
        g.cpu_seconds,
        g.threads,
        g.utilization * 100.0,
        per(g.cpu_us_per_request, g.cpu_us_per_handshake)
    );
    if let Some(sv) = &r.server {
        s += &format!(
            "server (pid {} and its descendants: {} process{}): {:.3} CPU s{}; resident memory (summed over the processes) max {} KiB, end {} KiB\n",
            sv.pid,
            sv.processes,
            if sv.processes == 1 { "" } else { "es" },
            sv.cpu_seconds,
            per(sv.cpu_us_per_request, sv.cpu_us_per_handshake),
            sv.rss_max_kib,
            sv.rss_end_kib
        );
    }
    for w in &r.warnings {
        s += &format!("{} {w}\n", styled(BAD, "warning:"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(num(12.345678), "12.35");
        assert_eq!(num(0.0012345), "0.001234");
        assert_eq!(num(123456.7), "123457");
        assert_eq!(num(-6.014952), "-6.015");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.5e-7), "1.500e-7");
    }
}
