//! Preparing a lab run: the work directory's PKIs, OCSP response, ticket keys and trust
//! bundle, each cell's `tlsperf serve` arguments and client options, and which cells of a
//! group run (against an external server only the client's side varies).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::client::WebPkiServerVerifier;

use super::matrix::{Cell, Group, TicketKeys, Trust};
use super::{Event, External, LabError, LabOptions, matrix};
use crate::client::config::{self as client_config, ClientTlsOptions};
use crate::client::roots::Roots;
use crate::client::verifier::TimedVerifier;
use crate::pki::ocsp::OCSP_FILE;
use crate::pki::{KeyType, PkiOptions, TestPki};
use crate::tls::choices::{self, ConfigError};

/// Files the servers and clients use, per certificate type.
pub(super) struct Prepared {
    pub(super) pkis: BTreeMap<&'static str, PathBuf>,
    pub(super) ticket_keys: PathBuf,
    pub(super) bundle: PathBuf,
    pub(super) bundle_note: String,
}

fn prep_err(dir: &Path, reason: impl std::fmt::Display) -> LabError {
    LabError::Prepare {
        dir: dir.to_path_buf(),
        reason: reason.to_string(),
    }
}

pub(super) fn prepare(
    opts: &LabOptions,
    on_event: &(dyn Fn(Event) + Sync),
) -> Result<Prepared, LabError> {
    let dir = &opts.work_dir;
    let mut types = vec![KeyType::EcdsaP256];
    if opts.groups.contains(&Group::Certificate) {
        types.extend([KeyType::Ed25519, KeyType::Rsa2048]);
        if opts.full {
            types.push(KeyType::Rsa4096);
        }
    }
    let mut pkis = BTreeMap::new();
    if opts.groups.contains(&Group::Chain) {
        on_event(Event::Preparing("RSA-4096 chain".into()));
        let pki = TestPki::generate(&PkiOptions {
            ca_key: KeyType::Rsa4096,
            leaf_key: KeyType::Rsa4096,
            sans: PkiOptions::default_sans(),
            days: 30,
        })
        .map_err(|e| prep_err(dir, e))?;
        let d = dir.join(matrix::RSA_CHAIN);
        let ocsp = crate::pki::ExtraFile {
            name: OCSP_FILE,
            contents: crate::pki::ocsp_response(&pki, Duration::from_secs(7 * 24 * 3600))
                .map_err(|e| prep_err(dir, e))?,
            what: "OCSP response for the server leaf",
        };
        crate::pki::write_pki_with(&pki, &d, true, vec![ocsp]).map_err(|e| prep_err(dir, e))?;
        pkis.insert(matrix::RSA_CHAIN, d);
    }
    for t in types {
        on_event(Event::Preparing(format!("{} certificates", t.name())));
        let pki = TestPki::generate(&PkiOptions {
            ca_key: KeyType::EcdsaP256,
            leaf_key: t,
            sans: PkiOptions::default_sans(),
            days: 30,
        })
        .map_err(|e| prep_err(dir, e))?;
        let d = dir.join(t.name());
        let mut extra = Vec::new();
        if t == KeyType::EcdsaP256 && opts.groups.contains(&Group::Ocsp) {
            // What the intermediate's responder would say about the server leaf (the
            // ocsp group's "on" cell staples it), valid for longer than any run.
            extra.push(crate::pki::ExtraFile {
                name: OCSP_FILE,
                contents: crate::pki::ocsp_response(&pki, Duration::from_secs(7 * 24 * 3600))
                    .map_err(|e| prep_err(dir, e))?,
                what: "OCSP response for the server leaf",
            });
        }
        crate::pki::write_pki_with(&pki, &d, true, extra).map_err(|e| prep_err(dir, e))?;
        pkis.insert(t.name(), d);
    }
    let ticket_keys = dir.join("ticket-keys.json");
    crate::tls::tickets::init(&ticket_keys, true).map_err(|e| prep_err(dir, e))?;
    // The trust group's bundle: the system's plus the lab's root, as a client of a
    // private CA would configure it.
    let probe = crate::trust::discover::probe_for_load(
        None,
        &crate::trust::discover::ProbeEnv::from_process(),
    );
    let system = probe
        .chosen_file
        .and_then(|i| probe.entries.get(i))
        .and_then(|e| e.resolved.clone().or_else(|| Some(e.path.clone())));
    let lab_root = crate::files::read_input_to_string(
        &pkis["ecdsa-p256"].join("root.pem"),
        crate::files::InputKind::Pem,
    )
    .map_err(|e| prep_err(dir, e))?;
    let (mut text, bundle_note) = match &system {
        Some(p) => match crate::files::read_input_to_string(p, crate::files::InputKind::Bundle) {
            Ok(t) => (
                t,
                format!("system bundle {} plus the lab's root", p.display()),
            ),
            Err(e) => return Err(prep_err(dir, format!("{}: {e}", p.display()))),
        },
        None => {
            // No system store: a synthetic one of the usual size.
            let b = crate::pki::generate_bundle(&crate::pki::BundleOptions {
                count: 145,
                cross_signed: 0,
                key: KeyType::EcdsaP256,
                key_pool: None,
                days: 30,
            })
            .map_err(|e| prep_err(dir, e))?;
            (
                b.pem,
                "no system bundle found: 145 generated CAs plus the lab's root".to_string(),
            )
        }
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&lab_root);
    let bundle = dir.join("bundle.pem");
    std::fs::write(&bundle, text).map_err(|e| prep_err(dir, e))?;
    Ok(Prepared {
        pkis,
        ticket_keys,
        bundle,
        bundle_note,
    })
}

/// The `tlsperf serve` arguments of a cell.
pub(super) fn server_args(cell: &Cell, prep: &Prepared) -> Vec<String> {
    let pki = &prep.pkis[cell.pki_name()];
    let mut a: Vec<String> = vec![
        "--cert".into(),
        pki.join("server-chain.pem").display().to_string(),
        "--key".into(),
        pki.join("server.key").display().to_string(),
        "--resumption".into(),
        cell.server_resumption.into(),
        "--provider".into(),
        cell.provider.name().into(),
        "--stack".into(),
        cell.stack.name().into(),
    ];
    if cell.ticket_keys == TicketKeys::Shared {
        a.extend([
            "--ticket-keys".into(),
            prep.ticket_keys.display().to_string(),
        ]);
    }
    if cell.quic {
        a.push("--quic".into());
    }
    if matches!(cell.group, Group::FirstByte | Group::Transport) {
        // Every cell's server accepts 0-RTT; only the client differs. A 0-RTT connection
        // that closes after its response never sees the tickets sent after the client's
        // Finished: 4 per full handshake let most connections resume.
        a.extend([
            "--early-data".into(),
            "16384".into(),
            "--tickets-per-handshake".into(),
            "4".into(),
        ]);
    }
    if cell.ocsp {
        a.extend(["--ocsp".into(), pki.join(OCSP_FILE).display().to_string()]);
    }
    if cell.mtls {
        a.extend([
            "--client-auth".into(),
            "required".into(),
            "--client-ca".into(),
            pki.join("root.pem").display().to_string(),
        ]);
    }
    a
}

/// A client configuration loaded now the way most Rust programs do it — rustls-native-certs
/// (the `bundle` file, or with `None` the system store through `load_native_certs()`),
/// `RootCertStore`, rustls's WebPKI verifier — wrapped in the timing verifier.
pub(super) fn reloaded_config(
    bundle: Option<&Path>,
    opts: &ClientTlsOptions,
) -> Result<Arc<ClientConfig>, ConfigError> {
    let provider = Arc::new(choices::customized_provider(
        opts.provider,
        &opts.groups,
        &opts.ciphers,
    )?);
    let loaded = match bundle {
        Some(path) => rustls_native_certs::load_certs_from_paths(Some(path), None),
        None => {
            // rustls-native-certs would block on a FIFO named by SSL_CERT_FILE.
            crate::trust::discover::check_ssl_cert_file().map_err(|e| ConfigError::BadFile {
                path: std::env::var_os("SSL_CERT_FILE").unwrap_or_default().into(),
                reason: e.to_string(),
            })?;
            rustls_native_certs::load_native_certs()
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(loaded.certs);
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
        .build()
        .map_err(|e| match bundle {
            Some(path) => ConfigError::BadFile {
                path: path.to_path_buf(),
                reason: format!("no usable roots: {e}"),
            },
            None => ConfigError::BadChoice {
                flag: "--roots system",
                reason: format!("no usable roots in the system store: {e}"),
            },
        })?;
    let versions = choices::protocol_versions(&opts.versions);
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|source| ConfigError::Rustls {
            what: "--tls/--groups".into(),
            source,
        })?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(TimedVerifier::new(inner)))
        .with_no_client_auth();
    config.alpn_protocols = opts.alpn.clone();
    config.resumption = client_config::resumption(opts.resume, 1);
    Ok(Arc::new(config))
}

/// The client options of a cell.
pub(super) fn client_options(
    cell: &Cell,
    prep: Option<&Prepared>,
    external: Option<&External>,
) -> Result<ClientTlsOptions, LabError> {
    let err = |source| LabError::Client {
        cell: format!("{}/{}", cell.group.name(), cell.name),
        source,
    };
    let roots = match (external, prep) {
        (Some(ext), _) => match (&ext.cacert, cell.trust) {
            (Some(p), _) => Roots::File(p.clone()),
            (None, _) => Roots::System,
        },
        (None, Some(prep)) => match cell.trust {
            Trust::Trimmed => Roots::File(prep.pkis[cell.pki_name()].join("root.pem")),
            Trust::SharedBundle | Trust::ReloadPerConnection => Roots::File(prep.bundle.clone()),
        },
        (None, None) => Roots::System,
    };
    let client_cert = match (cell.mtls, prep) {
        (true, Some(prep)) => {
            let pki = &prep.pkis[cell.pki_name()];
            Some((
                choices::read_chain(&pki.join("client-chain.pem")).map_err(err)?,
                choices::read_key(&pki.join("client.key")).map_err(err)?,
            ))
        }
        _ => None,
    };
    Ok(ClientTlsOptions {
        provider: cell.provider,
        versions: cell.version.into_iter().collect(),
        groups: cell.kx.map(|k| vec![k.to_string()]).unwrap_or_default(),
        ciphers: Vec::new(),
        roots,
        resume: cell.resume,
        session_cache: 256,
        early_data: cell.early_data,
        client_cert,
        alpn: vec![b"http/1.1".to_vec()],
        // Every chain verified, as a rustls client does: the lab compares what
        // verification costs.
        verify_cache: Some(false),
        // The reload configuration builds a whole client configuration per connection
        // instead ([`reloaded_config`]), before it connects, as a Rust program does.
        roots_load: crate::client::reload::RootsLoad::Once,
    })
}

/// The cells of a group; against an external server only the client's side varies.
pub(super) fn runnable(group: Group, full: bool, external: Option<&External>) -> Vec<Cell> {
    let mut cells = matrix::cells(group, full);
    let Some(ext) = external else {
        return cells;
    };
    let roots = if ext.cacert.is_some() {
        "--cacert file"
    } else {
        "system store"
    };
    match group {
        Group::Resumption => {
            // The server's resumption is what it is: the client resumes or not.
            cells.retain(|c| c.name == "off" || c.name == "tickets");
            for c in &mut cells {
                if c.name == "off" {
                    c.label = "client does not resume".into();
                } else {
                    c.name = "resume".into();
                    c.label =
                        "client resumes (tickets or session ids, as the server offers)".into();
                }
            }
        }
        Group::Trust => {
            cells.retain(|c| c.trust != Trust::Trimmed);
            for c in &mut cells {
                c.label = match c.trust {
                    Trust::SharedBundle => format!("{roots} loaded once, shared"),
                    _ => format!("{roots} reloaded for every connection"),
                };
            }
        }
        _ => cells.retain(|c| c.instances == 1 && !c.mtls),
    }
    cells
}
