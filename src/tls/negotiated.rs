//! What a handshake negotiated, as every report names it: one type for the socket
//! handshakes (`tlsperf handshake`) and the in-memory ones (`tlsperf crypto handshake`).

use rustls::{CommonState, ProtocolVersion};
use serde::{Deserialize, Serialize};

/// The negotiated parameters of a connection.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Negotiated {
    /// Protocol version: `TLSv1.2` or `TLSv1.3` ([`version_name`]). Crypto documents
    /// written before the two `Negotiated` types became one said `TLSv1_3`; reading
    /// renames it.
    #[serde(deserialize_with = "dotted_version")]
    pub version: String,
    /// Cipher suite, rustls's name (e.g. `TLS13_AES_128_GCM_SHA256`).
    pub cipher_suite: String,
    /// Key-exchange group, rustls's name in lower case (`None` for a TLS 1.2
    /// resumption, which does none).
    pub group: Option<String>,
    /// The server's handshake signature scheme (`None` when resumed, or when the
    /// handshake was not watched by a recording verifier).
    #[serde(default)]
    pub signature_scheme: Option<String>,
    /// ALPN protocol.
    #[serde(default)]
    pub alpn: Option<String>,
    /// Size of the stapled OCSP response (`None`: not stapled, or not recorded).
    #[serde(default)]
    pub ocsp_stapled_bytes: Option<usize>,
}

impl Negotiated {
    /// What rustls says `conn` negotiated: version, suite, group and ALPN. The signature
    /// scheme and the OCSP staple are known only to a verifier; they stay `None`.
    pub fn of(conn: &CommonState) -> Self {
        Negotiated {
            version: conn
                .protocol_version()
                .map(version_name)
                .unwrap_or_default(),
            cipher_suite: conn
                .negotiated_cipher_suite()
                .map(|s| format!("{:?}", s.suite()))
                .unwrap_or_default(),
            group: conn
                .negotiated_key_exchange_group()
                .map(|g| super::provider::group_name(g.name())),
            signature_scheme: None,
            alpn: conn
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            ocsp_stapled_bytes: None,
        }
    }
}

/// Reads a version name, `TLSv1_3` (rustls's `Debug`, older crypto documents) as
/// `TLSv1.3`.
fn dotted_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    Ok(match name.strip_prefix("TLSv1_") {
        Some(minor) => format!("TLSv1.{minor}"),
        None => name,
    })
}

/// `TLSv1_3` → `TLSv1.3`.
pub fn version_name(v: ProtocolVersion) -> String {
    version_label(v).into_owned()
}

/// [`version_name`], allocating only for a version without a dotted name (the label of
/// `serve`'s handshake metrics).
pub fn version_label(v: ProtocolVersion) -> std::borrow::Cow<'static, str> {
    match v {
        ProtocolVersion::TLSv1_2 => "TLSv1.2".into(),
        ProtocolVersion::TLSv1_3 => "TLSv1.3".into(),
        other => format!("{other:?}").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_crypto_documents_read_with_dotted_versions() {
        let old =
            r#"{"cipher_suite":"TLS13_AES_128_GCM_SHA256","group":"x25519","version":"TLSv1_3"}"#;
        let n: Negotiated = serde_json::from_str(old).unwrap();
        assert_eq!(n.version, "TLSv1.3");
        assert_eq!(n.alpn, None);
        let now: Negotiated = serde_json::from_str(&serde_json::to_string(&n).unwrap()).unwrap();
        assert_eq!(now, n);
    }
}
