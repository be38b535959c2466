//! The handshake-signature half of a rustls `ServerCertVerifier` — the TLS 1.2 and 1.3
//! handshake signatures and the schemes offered — written once for every verifier of
//! this crate, which all change only how the certificate chain is judged.

/// Expands, inside an `impl ServerCertVerifier`, to `verify_tls12_signature`,
/// `verify_tls13_signature` and `supported_verify_schemes`:
/// - `algorithms: |v| EXPR`: rustls's own checks with the `WebPkiSupportedAlgorithms` EXPR
///   (`v` is `self`);
/// - `delegate: |v| EXPR`: the three calls handed to the verifier EXPR, optionally
///   `around: PATH`, a function called as `PATH(scheme, || call)` (to time each check).
macro_rules! handshake_signature_checks {
    (algorithms: |$s:ident| $algs:expr) => {
        $crate::tls::handshake_signature_checks!(@methods $s, message, cert, dss;
            tls12: ::rustls::crypto::verify_tls12_signature(message, cert, dss, $algs);
            tls13: ::rustls::crypto::verify_tls13_signature(message, cert, dss, $algs);
            schemes: $algs.supported_schemes());
    };
    (delegate: |$s:ident| $inner:expr) => {
        $crate::tls::handshake_signature_checks!(@methods $s, message, cert, dss;
            tls12: $inner.verify_tls12_signature(message, cert, dss);
            tls13: $inner.verify_tls13_signature(message, cert, dss);
            schemes: $inner.supported_verify_schemes());
    };
    (delegate: |$s:ident| $inner:expr, around: $wrap:path) => {
        $crate::tls::handshake_signature_checks!(@methods $s, message, cert, dss;
            tls12: $wrap(dss.scheme, || $inner.verify_tls12_signature(message, cert, dss));
            tls13: $wrap(dss.scheme, || $inner.verify_tls13_signature(message, cert, dss));
            schemes: $inner.supported_verify_schemes());
    };
    (@methods $s:ident, $message:ident, $cert:ident, $dss:ident;
        tls12: $tls12:expr; tls13: $tls13:expr; schemes: $schemes:expr) => {
        fn verify_tls12_signature(
            &self,
            $message: &[u8],
            $cert: &::rustls_pki_types::CertificateDer<'_>,
            $dss: &::rustls::DigitallySignedStruct,
        ) -> ::std::result::Result<::rustls::client::danger::HandshakeSignatureValid, ::rustls::Error>
        {
            let $s = self;
            $tls12
        }

        fn verify_tls13_signature(
            &self,
            $message: &[u8],
            $cert: &::rustls_pki_types::CertificateDer<'_>,
            $dss: &::rustls::DigitallySignedStruct,
        ) -> ::std::result::Result<::rustls::client::danger::HandshakeSignatureValid, ::rustls::Error>
        {
            let $s = self;
            $tls13
        }

        fn supported_verify_schemes(&self) -> ::std::vec::Vec<::rustls::SignatureScheme> {
            let $s = self;
            $schemes
        }
    };
}

pub(crate) use handshake_signature_checks;
