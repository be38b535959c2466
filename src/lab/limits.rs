//! The server-side crypto limit of every configuration run (`crypto_limit_pct`).

use super::result;
use super::result::GroupResult;
use crate::pki::KeyType;

/// Measures the server-side crypto limit of every configuration run (short
/// measurements: 3 rounds of 50 ms per operation) and fills each cell's
/// `crypto_limit_pct`.
pub(super) fn crypto_limits(groups: &mut [GroupResult]) -> Vec<result::CryptoLimit> {
    use crate::crypto::in_memory::FullOrResumed;
    use crate::crypto::kx::{KxGroup, Role};
    use crate::crypto::limit::{self, LimitOptions};
    use crate::crypto::measure::MeasureOptions;
    use crate::tls::choices::TlsVersion as V;
    use clap::ValueEnum;
    let Ok(measure) = MeasureOptions::new(std::time::Duration::from_millis(50), 3) else {
        return Vec::new();
    };
    let mut limits: Vec<result::CryptoLimit> = Vec::new();
    for g in groups.iter_mut() {
        for c in &mut g.cells {
            let Ok(cell) = serde_json::from_value::<CellKey>(c.settings.clone()) else {
                continue;
            };
            // The default groups negotiate X25519 with tlsperf serve.
            let Ok(kx) = KxGroup::from_str(cell.kx.as_deref().unwrap_or("x25519"), true) else {
                continue;
            };
            let (Ok(provider), Ok(cert)) = (
                crate::tls::Provider::from_str(&cell.provider, true),
                KeyType::from_str(&cell.cert, true),
            ) else {
                continue;
            };
            let tls = if cell.version.as_deref() == Some("1.2") {
                V::V1_2
            } else {
                V::V1_3
            };
            let tls_name = if tls == V::V1_2 { "1.2" } else { "1.3" };
            let known = limits.iter().position(|l| {
                l.provider == provider.name()
                    && l.cert == cert.name()
                    && l.group == kx.to_string()
                    && l.tls == tls_name
            });
            let idx = match known {
                Some(i) => i,
                None => {
                    let Ok(report) = limit::run(&LimitOptions {
                        provider,
                        cert,
                        group: kx,
                        tls,
                        measure,
                    }) else {
                        continue;
                    };
                    let ns = |kind: FullOrResumed| {
                        report
                            .limits
                            .iter()
                            .find(|l| l.kind == kind && l.side == Role::Server)
                            .map_or(0.0, |l| l.crypto_ns)
                    };
                    let full_ns = ns(FullOrResumed::Full);
                    limits.push(result::CryptoLimit {
                        provider: provider.name().into(),
                        cert: cert.name().into(),
                        group: kx.to_string(),
                        tls: tls_name.into(),
                        full_ns,
                        resumed_ns: ns(FullOrResumed::Resumed),
                        full_per_s: if full_ns > 0.0 { 1e9 / full_ns } else { 0.0 },
                    });
                    limits.len() - 1
                }
            };
            let l = &limits[idx];
            let r = c.summary.get("resumption_rate").map_or(0.0, |m| m.mean);
            let crypto_ns = l.full_ns * (1.0 - r) + l.resumed_ns * r;
            c.crypto_limit_pct = c
                .summary
                .get("server_cpu_us_per_handshake")
                .filter(|m| m.mean > 0.0)
                .map(|m| crypto_ns / (m.mean * 1e3) * 100.0);
        }
    }
    limits
}

/// The settings of a cell the crypto limit depends on (read back from its JSON form).
#[derive(serde::Deserialize)]
struct CellKey {
    provider: String,
    cert: String,
    kx: Option<String>,
    version: Option<String>,
}
