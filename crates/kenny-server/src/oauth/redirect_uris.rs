//! Which redirect URIs a client may register, and when a requested one matches a
//! registered one. Registration, client metadata documents and the authorization
//! endpoint all apply these rules, so they live below all three.

/// Why a redirect URI is not acceptable, or `None` if it is.
pub fn problem(uri: &str) -> Option<&'static str> {
    let Ok(url) = url::Url::parse(uri) else {
        return Some("is not an absolute URL");
    };
    if url.fragment().is_some() {
        return Some("must not have a fragment");
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Some("has no host"),
    };
    match url.scheme() {
        "https" => None,
        "http" if loopback => None,
        "http" => Some("must use https (plain http is allowed only to localhost, 127.0.0.1 or [::1])"),
        _ => Some("must use https"),
    }
}

/// Whether a redirect URI in an authorization request matches one the client
/// registered: exactly, or, for a loopback URI (`http` to `127.0.0.1`, `[::1]` or
/// `localhost`), with any port (RFC 8252 §7.3: a native app listens on whatever port is
/// free when it signs in). Everything but the port must still match: scheme, host,
/// path and query.
///
/// `localhost` is treated like the loopback addresses although RFC 8252 §8.3 advises
/// against it: the most common native MCP client registers `http://localhost/callback`
/// and signs in from an ephemeral port, browsers resolve `localhost` to loopback
/// themselves (RFC 6761 §6.3), and the port was never a boundary on the person's own
/// machine: PKCE binds the code to the app that started the flow, whatever process
/// listens on the port.
pub fn matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let (Ok(reg), Ok(req)) = (url::Url::parse(registered), url::Url::parse(requested)) else {
        return false;
    };
    let loopback = |u: &url::Url| match u.host() {
        Some(url::Host::Ipv4(ip)) => ip == std::net::Ipv4Addr::LOCALHOST,
        Some(url::Host::Ipv6(ip)) => ip == std::net::Ipv6Addr::LOCALHOST,
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    reg.scheme() == "http"
        && req.scheme() == "http"
        && loopback(&reg)
        && reg.host() == req.host()
        && reg.path() == req.path()
        && reg.query() == req.query()
        && req.fragment().is_none()
        && req.username().is_empty()
        && req.password().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_or_loopback_http() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost/cb",
            "http://[::1]:9/cb",
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
        for bad in [
            "http://evil.example/cb",
            "https://x.example/cb#frag",
            "javascript:alert(1)",
            "/relative",
            "ftp://x/",
        ] {
            assert!(problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn loopback_redirect_uris_match_on_any_port_and_nothing_else_does() {
        for (registered, requested) in [
            ("http://127.0.0.1/callback", "http://127.0.0.1:53682/callback"),
            ("http://127.0.0.1:33418/", "http://127.0.0.1:60005/"),
            ("http://[::1]/cb", "http://[::1]:9/cb"),
            ("http://localhost/callback", "http://localhost:58135/callback"),
            ("http://LOCALHOST/callback", "http://localhost:1/callback"),
            ("http://127.0.0.1:1/cb?x=1", "http://127.0.0.1:2/cb?x=1"),
            (
                "https://claude.ai/api/mcp/auth_callback",
                "https://claude.ai/api/mcp/auth_callback",
            ),
        ] {
            assert!(matches(registered, requested), "{registered} ~ {requested}");
        }
        for (registered, requested) in [
            ("https://app.example/cb", "https://app.example:8443/cb"),
            ("http://127.0.0.1/callback", "http://127.0.0.1:9/other"),
            ("http://127.0.0.1/callback", "http://localhost:9/callback"),
            ("http://localhost/callback", "http://127.0.0.1:9/callback"),
            ("http://127.0.0.1/callback", "https://127.0.0.1:9/callback"),
            ("http://127.0.0.1/cb", "http://127.0.0.1:9/cb?extra=1"),
            ("http://127.0.0.1/cb", "http://127.0.0.1:9/cb#frag"),
            ("http://127.0.0.1/cb", "http://user@127.0.0.1:9/cb"),
            ("http://127.0.0.2/cb", "http://127.0.0.2:9/cb"),
            ("http://127.0.0.1/cb", "http://127.0.0.1.evil.example:9/cb"),
            ("http://localhost/cb", "http://localhost.evil.example:9/cb"),
            ("not a url", "not a url either"),
        ] {
            assert!(!matches(registered, requested), "{registered} !~ {requested}");
        }
    }
}
