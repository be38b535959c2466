//! What the lab compares: groups of configurations (cells), each group with a baseline
//! (its first cell) and the server and client settings of every cell. Only the setting a
//! group is about differs between its cells.

use serde::Serialize;

use crate::client::config::Resume;
use crate::pki::KeyType;
use crate::server::Stack;
use crate::tls::Provider;
use crate::tls::choices::TlsVersion;

/// A group of cells compared with its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Group {
    /// Session resumption: off, stateful, tickets, tickets across two instances (keys
    /// separate or shared).
    Resumption,
    /// Server certificate type.
    Certificate,
    /// Key-exchange group.
    Kx,
    /// Protocol version.
    Tls,
    /// Client certificates (mutual TLS).
    Mtls,
    /// OCSP stapling: the server sends a signed OCSP response with its certificate.
    Ocsp,
    /// Crypto provider (server and client).
    Provider,
    /// How the client gets its roots: a shared pre-loaded store, a reload for every
    /// connection, or a store trimmed to what the server needs.
    Trust,
    /// The HTTP server stack (`tlsperf serve --stack`) on the same rustls configuration.
    Stack,
    /// At a link only: time to the first byte of a full handshake, a resumed one and a
    /// resumed one whose request goes as 0-RTT early data.
    FirstByte,
    /// At a link only: a small ECDSA chain against an RSA-4096 chain with a stapled OCSP
    /// response (the server's first flight against the initial congestion window).
    Chain,
    /// At a link only: TCP with TLS 1.2, TCP with TLS 1.3 and QUIC (HTTP/3), each with
    /// full handshakes, resumed ones and (TLS 1.3, QUIC) 0-RTT requests.
    Transport,
}

impl Group {
    /// Every group that runs on loopback, in report order ([`Group::LINK_ONLY`] follow
    /// at a link).
    pub const ALL: [Group; 9] = [
        Group::Resumption,
        Group::Certificate,
        Group::Kx,
        Group::Tls,
        Group::Mtls,
        Group::Ocsp,
        Group::Provider,
        Group::Trust,
        Group::Stack,
    ];

    /// Short name (`--only`, JSON).
    pub fn name(self) -> &'static str {
        match self {
            Group::Resumption => "resumption",
            Group::Certificate => "certificate",
            Group::Kx => "kx",
            Group::Tls => "tls",
            Group::Mtls => "mtls",
            Group::Ocsp => "ocsp",
            Group::Provider => "provider",
            Group::Trust => "trust",
            Group::Stack => "stack",
            Group::FirstByte => "first-byte",
            Group::Chain => "chain",
            Group::Transport => "transport",
        }
    }

    /// Title in the report.
    pub fn title(self) -> &'static str {
        match self {
            Group::Resumption => "Session resumption",
            Group::Certificate => "Certificate type",
            Group::Kx => "Key-exchange group",
            Group::Tls => "TLS version",
            Group::Mtls => "Mutual TLS",
            Group::Ocsp => "OCSP stapling",
            Group::Provider => "Crypto provider",
            Group::Trust => "Client trust store",
            Group::Stack => "Server stack (same rustls ServerConfig)",
            Group::FirstByte => "Time to first byte: full, resumed, 0-RTT",
            Group::Chain => "Certificate chain size",
            Group::Transport => "Transport: TCP + TLS 1.2, TCP + TLS 1.3, QUIC (HTTP/3)",
        }
    }

    /// The groups that only make sense over a link (`tlsperf lab --link`), in report
    /// order: on loopback a round trip costs nothing.
    pub const LINK_ONLY: [Group; 3] = [Group::FirstByte, Group::Chain, Group::Transport];

    /// Whether the group runs only over a link.
    pub fn link_only(self) -> bool {
        Group::LINK_ONLY.contains(&self)
    }

    /// Groups that vary only the client, so they also run against an external server.
    pub fn client_side(self) -> bool {
        matches!(
            self,
            Group::Resumption | Group::Kx | Group::Tls | Group::Provider | Group::Trust
        )
    }
}

/// Session-ticket keys of a cell's server instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TicketKeys {
    /// Each instance its own random keys (the server default).
    Own,
    /// One key-ring file shared by every instance.
    Shared,
}

/// Where the client's roots come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trust {
    /// Only the lab's root (what `tlsperf trust trim --keep-for` keeps for this server).
    Trimmed,
    /// The system bundle plus the lab's root, loaded once and shared by connections.
    SharedBundle,
    /// The same bundle read and parsed again for every connection
    /// (rustls-native-certs' file loader + `RootCertStore`, a fresh `ClientConfig`).
    ReloadPerConnection,
}

/// One configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Its group.
    pub group: Group,
    /// Short name, unique in the group.
    pub name: String,
    /// What it is, in words.
    pub label: String,
    /// Server certificate key type.
    pub cert: KeyType,
    /// Server instances behind the client pool (connections go to them in turn).
    pub instances: usize,
    /// Server resumption mode (`tlsperf serve --resumption`).
    pub server_resumption: &'static str,
    /// Ticket keys across instances.
    pub ticket_keys: TicketKeys,
    /// Require client certificates.
    pub mtls: bool,
    /// Staple an OCSP response (`tlsperf serve --ocsp`).
    pub ocsp: bool,
    /// Provider on both sides.
    pub provider: Provider,
    /// Protocol version offered by the client (`None`: 1.2 and 1.3, 1.3 chosen).
    pub version: Option<TlsVersion>,
    /// The one key-exchange group the client offers (`None`: the provider's defaults).
    pub kx: Option<&'static str>,
    /// Client resumption.
    pub resume: Resume,
    /// Client roots.
    pub trust: Trust,
    /// The server's HTTP stack (`tlsperf serve --stack`).
    pub stack: Stack,
    /// The client sends its request as 0-RTT early data when it resumes (the servers of
    /// the first-byte group all accept early data).
    pub early_data: bool,
    /// Root, intermediate and leaf all RSA-4096 (else an ECDSA P-256 CA over `cert`).
    pub rsa_chain: bool,
    /// HTTP/3 over QUIC: the server answers on UDP too (`serve --quic`), the client
    /// connects over QUIC (`load --http3`).
    pub quic: bool,
    /// The group's A/A control: the baseline's settings, run again as a cell of its own
    /// (its own servers, its own rounds). Not a setting: not serialized.
    #[serde(skip)]
    pub control: bool,
}

impl Cell {
    fn base(group: Group, name: &str, label: &str) -> Cell {
        Cell {
            group,
            name: name.into(),
            label: label.into(),
            cert: KeyType::EcdsaP256,
            instances: 1,
            server_resumption: "stateful",
            ticket_keys: TicketKeys::Own,
            mtls: false,
            ocsp: false,
            provider: Provider::AwsLcRs,
            version: None,
            // The provider's default groups (X25519 is negotiated). Offering X25519 alone
            // would break TLS 1.2 with ECDSA P-256 certificates against servers that
            // apply RFC 4492's curve list to the certificate too (OpenSSL).
            kx: None,
            resume: Resume::Off,
            trust: Trust::Trimmed,
            stack: Stack::Hyper,
            early_data: false,
            rsa_chain: false,
            quic: false,
            control: false,
        }
    }

    /// The prepared PKI the cell's server uses (a directory name in the work directory).
    pub fn pki_name(&self) -> &'static str {
        if self.rsa_chain {
            RSA_CHAIN
        } else {
            self.cert.name()
        }
    }

    /// The A/A control of a group whose baseline is `self`: the same settings under the
    /// name [`CONTROL`].
    pub fn control_of(&self) -> Cell {
        Cell {
            name: CONTROL.into(),
            label: format!("A/A control: the baseline ({}) again", self.label),
            control: true,
            ..self.clone()
        }
    }
}

/// The PKI whose root, intermediate and leaf are all RSA-4096.
pub const RSA_CHAIN: &str = "rsa-4096-chain";

/// Name of every group's A/A control cell.
pub const CONTROL: &str = "baseline-again";

/// Pairs compared besides "each cell against the baseline" (from, to), where the
/// question users ask is between two cells: should two instances share ticket keys?
pub fn extra_pairs(group: Group) -> &'static [(&'static str, &'static str)] {
    match group {
        Group::Resumption => &[("tickets-2-own-keys", "tickets-2-shared-keys")],
        _ => &[],
    }
}

/// What a win in `group` does not say; `at_link`: measured over an emulated link (where
/// round trips cost what they would).
pub fn caveat(group: Group, at_link: bool) -> Option<&'static str> {
    match group {
        Group::Tls if !at_link => Some(
            "measured on loopback, where a round trip costs nothing: over a network TLS 1.2's full handshake takes one more round trip than TLS 1.3's",
        ),
        Group::Kx => Some(
            "X25519MLKEM768 also protects recorded traffic against future quantum computers; the others do not",
        ),
        _ => None,
    }
}

/// The cells of `group`, baseline first. `full` adds the slow ones (RSA-4096).
pub fn cells(group: Group, full: bool) -> Vec<Cell> {
    let c = |name: &str, label: &str| Cell::base(group, name, label);
    match group {
        Group::Resumption => resumption_cells(),
        Group::Certificate => certificate_cells(full),
        Group::Kx => vec![
            Cell {
                kx: Some("x25519"),
                ..c("x25519", "X25519")
            },
            Cell {
                kx: Some("secp256r1"),
                ..c("p-256", "ECDHE P-256")
            },
            Cell {
                kx: Some("x25519mlkem768"),
                ..c("x25519mlkem768", "X25519MLKEM768 (hybrid post-quantum)")
            },
        ],
        Group::Tls => vec![
            Cell {
                version: Some(TlsVersion::V1_3),
                ..c("1.3", "TLS 1.3")
            },
            Cell {
                version: Some(TlsVersion::V1_2),
                ..c("1.2", "TLS 1.2")
            },
        ],
        Group::Mtls => vec![
            c("off", "server authentication only"),
            Cell {
                mtls: true,
                ..c("on", "client certificate required and verified")
            },
        ],
        Group::Ocsp => vec![
            c("off", "no OCSP response stapled"),
            Cell {
                ocsp: true,
                ..c("on", "server staples a signed OCSP response for its leaf")
            },
        ],
        Group::Provider => vec![
            c("aws-lc-rs", "aws-lc-rs"),
            Cell {
                provider: Provider::Ring,
                ..c("ring", "ring")
            },
        ],
        Group::Trust => vec![
            Cell {
                trust: Trust::SharedBundle,
                ..c("shared", "system bundle loaded once, shared")
            },
            Cell {
                trust: Trust::ReloadPerConnection,
                ..c("reload", "system bundle reloaded for every connection")
            },
            Cell {
                trust: Trust::Trimmed,
                ..c("trimmed", "store trimmed to the one root this server needs")
            },
        ],
        Group::FirstByte => first_byte_cells(),
        Group::Transport => transport_cells(),
        // The big chain is the baseline: the question is what a small one saves.
        Group::Chain => vec![
            Cell {
                cert: KeyType::Rsa4096,
                rsa_chain: true,
                ocsp: true,
                ..c(
                    "rsa-4096-ocsp",
                    "RSA-4096 leaf, intermediate and root, with a stapled OCSP response",
                )
            },
            c("ecdsa", "ECDSA P-256 leaf and intermediate, no staple"),
        ],
        Group::Stack => vec![
            c("hyper", "rustls + hyper-util (h1/h2), hyper service_fn"),
            Cell {
                stack: Stack::Axum,
                ..c("axum", "the same accept loop, an axum 0.8 Router")
            },
            Cell {
                stack: Stack::Actix,
                ..c("actix", "actix-web 4 with its rustls 0.23 acceptor")
            },
        ],
    }
}

/// The resumption group: none, the server's session cache, stateless tickets on one
/// instance, and on two instances with their own keys or sharing a key ring.
fn resumption_cells() -> Vec<Cell> {
    let c = |name: &str, label: &str| Cell::base(Group::Resumption, name, label);
    let tickets = |name, label, instances, keys| Cell {
        server_resumption: "tickets",
        resume: Resume::Tickets,
        instances,
        ticket_keys: keys,
        ..c(name, label)
    };
    vec![
        Cell {
            server_resumption: "off",
            ..c("off", "no resumption: every handshake full")
        },
        Cell {
            resume: Resume::Tickets,
            ..c("stateful", "server session cache (stateful tickets)")
        },
        tickets(
            "tickets",
            "stateless tickets, one instance",
            1,
            TicketKeys::Own,
        ),
        tickets(
            "tickets-2-own-keys",
            "tickets, two instances with their own keys",
            2,
            TicketKeys::Own,
        ),
        tickets(
            "tickets-2-shared-keys",
            "tickets, two instances sharing one key ring",
            2,
            TicketKeys::Shared,
        ),
    ]
}

/// The certificate group: ECDSA P-256, Ed25519, RSA-2048, and with `full` RSA-4096.
fn certificate_cells(full: bool) -> Vec<Cell> {
    let c = |name: &str, label: &str| Cell::base(Group::Certificate, name, label);
    let mut v = vec![
        c("ecdsa-p256", "ECDSA P-256"),
        Cell {
            cert: KeyType::Ed25519,
            ..c("ed25519", "Ed25519")
        },
        Cell {
            cert: KeyType::Rsa2048,
            ..c("rsa-2048", "RSA-2048")
        },
    ];
    if full {
        v.push(Cell {
            cert: KeyType::Rsa4096,
            ..c("rsa-4096", "RSA-4096")
        });
    }
    v
}

/// The transport group: TCP + TLS 1.3's full handshake (the baseline) against TCP + TLS
/// 1.2 and QUIC, each full, resumed and (TLS 1.3, QUIC) with the request as 0-RTT early
/// data. Every server accepts 0-RTT and answers on UDP too; only the client differs.
fn transport_cells() -> Vec<Cell> {
    let c = |name: &str, label: &str| Cell::base(Group::Transport, name, label);
    let tls12 = |name, label| Cell {
        version: Some(TlsVersion::V1_2),
        ..c(name, label)
    };
    let quic = |name, label| Cell {
        quic: true,
        ..c(name, label)
    };
    let resumed = |cell: Cell| Cell {
        resume: Resume::Tickets,
        ..cell
    };
    let early = |cell: Cell| Cell {
        early_data: true,
        ..resumed(cell)
    };
    vec![
        c("tcp-1.3-full", "TCP + TLS 1.3, full handshake every time"),
        resumed(c(
            "tcp-1.3-resumed",
            "TCP + TLS 1.3, resumed (PSK from a ticket)",
        )),
        early(c(
            "tcp-1.3-0rtt",
            "TCP + TLS 1.3, resumed, the request sent as 0-RTT early data",
        )),
        tls12("tcp-1.2-full", "TCP + TLS 1.2, full handshake every time"),
        Cell {
            resume: Resume::Ids,
            ..tls12("tcp-1.2-resumed", "TCP + TLS 1.2, resumed (session id)")
        },
        quic("quic-full", "QUIC (HTTP/3), full handshake every time"),
        resumed(quic(
            "quic-resumed",
            "QUIC (HTTP/3), resumed (PSK from a ticket)",
        )),
        early(quic(
            "quic-0rtt",
            "QUIC (HTTP/3), resumed, the request sent as 0-RTT early data",
        )),
    ]
}

/// The first-byte group: a full handshake, a resumed one, and a resumed one whose
/// request goes as 0-RTT early data.
fn first_byte_cells() -> Vec<Cell> {
    let c = |name: &str, label: &str| Cell::base(Group::FirstByte, name, label);
    let resumed = |name, label| Cell {
        resume: Resume::Tickets,
        ..c(name, label)
    };
    vec![
        c("full", "full handshake every time"),
        resumed("resumed", "resumed (TLS 1.3 PSK from a ticket)"),
        Cell {
            early_data: true,
            ..resumed(
                "0rtt",
                "resumed, the request sent as 0-RTT early data and answered with the server's flight",
            )
        },
    ]
}
