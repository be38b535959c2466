//! `trust probe|load|analyze|trim`: the probe chain, the layered load, the analysis, the
//! trimmed set, and per-file problems.

use std::path::Path;
use std::time::Duration;

use super::{BAD, BOLD, dur, render, right_align, styled, table};
use crate::trust::Probe;
use crate::trust::discover::PathKind;
use crate::trust::measure::LoadMeasurement;

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
            (PathKind::File, Some(s)) => format!("{s} B"),
            (PathKind::Dir, Some(n)) => format!("{n} entries"),
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
