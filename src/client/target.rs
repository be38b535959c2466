//! The server a client command talks to: parsed from an `https://` URL, with the name
//! sent as SNI and checked against the certificate (`--sni` overrides it).

use std::fmt;

use rustls_pki_types::ServerName;

/// Where to connect and what to ask for.
#[derive(Debug, Clone)]
pub struct Target {
    /// Host as written in the URL (name or IP address, without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Path and query of the request.
    pub path: String,
    /// The `Host` header value.
    pub authority: String,
    /// The name for SNI and certificate verification.
    pub server_name: ServerName<'static>,
}

/// A URL that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid URL '{url}': {reason}")]
pub struct BadUrl {
    /// The URL given.
    pub url: String,
    /// Why.
    pub reason: String,
}

impl crate::error::Classify for BadUrl {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

impl Target {
    /// Parses `https://host[:port][/path]`; `sni` replaces the host as the server name.
    pub fn parse(url: &str, sni: Option<&str>) -> Result<Target, BadUrl> {
        let bad = |reason: &str| BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let uri: http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
        match uri.scheme_str() {
            Some("https") => {}
            Some(other) => return Err(bad(&format!("scheme '{other}' is not https"))),
            None => return Err(bad("no scheme (expected https://HOST[:PORT]/PATH)")),
        }
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("no host"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(443);
        let path = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".into());
        let name = sni.unwrap_or(&host).to_string();
        let server_name = ServerName::try_from(name.clone())
            .map_err(|_| bad(&format!("'{name}' is not a valid server name")))?;
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(bad("user information in the URL is not supported"));
        }
        let bracketed = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let authority = match uri.port_u16() {
            Some(p) => format!("{bracketed}:{p}"),
            None => bracketed,
        };
        Ok(Target {
            host,
            port,
            path,
            authority,
            server_name,
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "https://{}{}", self.authority, self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let t = Target::parse("https://127.0.0.1:8443/health?x=1", None).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("127.0.0.1", 8443, "/health?x=1")
        );
        let t = Target::parse("https://[::1]", Some("localhost")).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("::1", 443, "/")
        );
        assert_eq!(t.server_name, ServerName::try_from("localhost").unwrap());
        for bad in ["http://x/", "x:1", "https://", "https://a b/", "ftp://h/"] {
            assert!(Target::parse(bad, None).is_err(), "{bad}");
        }
    }
}
