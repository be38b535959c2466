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

/// A URL (or `--sni` name) that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid {what} '{url}': {reason}")]
pub struct BadUrl {
    /// What was given: `URL`, or `--sni` for the name that replaces the URL's host.
    pub what: &'static str,
    /// The URL (or name) given.
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
            what: "URL",
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
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(bad("user information in the URL is not supported"));
        }
        // The port as written (`Uri::port` hides one that does not parse as a u16): empty
        // (`host:`) is the default one, as in browsers; one that is not a TCP port is
        // refused, never replaced by 443.
        let written_port = uri.authority().and_then(|a| {
            let a = a.as_str();
            a.rfind(':')
                .filter(|&i| !a[i..].contains(']'))
                .map(|i| a[i + 1..].to_string())
        });
        let port = match written_port {
            None => 443,
            Some(p) if p.is_empty() => 443,
            Some(p) => match p.parse::<u16>() {
                Ok(0) => return Err(bad("port 0 is not a port a server listens on")),
                Ok(n) => n,
                Err(_) => return Err(bad(&format!("port {p} is not in 1..=65535"))),
            },
        };
        let path = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".into());
        let server_name = match sni {
            Some(name) => ServerName::try_from(name.to_string()).map_err(|_| BadUrl {
                what: "--sni",
                url: name.to_string(),
                reason: "not a valid server name (a DNS name or an IP address)".into(),
            })?,
            None => ServerName::try_from(host.clone())
                .map_err(|_| bad(&format!("'{host}' is not a valid server name")))?,
        };
        let bracketed = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let authority = match uri.port() {
            Some(_) => format!("{bracketed}:{port}"),
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
        // A port out of range is refused, not replaced by 443.
        for (url, why) in [
            ("https://127.0.0.1:65536/", "port 65536 is not in 1..=65535"),
            (
                "https://h:99999999999/",
                "port 99999999999 is not in 1..=65535",
            ),
            ("https://h:0/", "port 0 is not a port a server listens on"),
        ] {
            let err = Target::parse(url, None).unwrap_err().to_string();
            assert_eq!(err, format!("invalid URL '{url}': {why}"));
        }
        assert_eq!(Target::parse("https://h:/", None).unwrap().port, 443);
        let err = Target::parse("https://127.0.0.1:8443/", Some("")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid --sni '': not a valid server name (a DNS name or an IP address)"
        );
    }
}
