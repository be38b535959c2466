//! `pki init` and `pki bundle`: the files and certificates written.

use std::path::Path;

use super::{BOLD, render, styled, table};
use crate::pki::{Bundle, CertSummary, WrittenFile};

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
