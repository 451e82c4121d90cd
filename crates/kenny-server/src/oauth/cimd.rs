//! Client ID metadata documents: a client whose `client_id` is an `https` URL publishes
//! its metadata there. Fetching a URL chosen by a stranger is a server-side request
//! forgery risk, so the fetch is fenced: https only, every resolved address must be a
//! public one (and the connection is pinned to it), no redirects, a short timeout and
//! a small size limit. Fetches happen only for a signed-in person's consent (see
//! `authorize`). Good documents are cached for a while, in a cache of bounded size.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::OAuthClient;

const TIMEOUT: Duration = Duration::from_secs(5);
const MAX_BYTES: usize = 64 * 1024;
const CACHE_TTL: Duration = Duration::from_secs(600);
/// Documents kept at most; the oldest goes first.
const CACHE_MAX: usize = 256;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CimdError {
    #[error("client_id URL {0}")]
    BadUrl(&'static str),
    #[error("its host resolves to a non-public address ({0}); kenny fetches client metadata only from public hosts")]
    NonPublicAddress(IpAddr),
    #[error("its host could not be resolved: {0}")]
    Resolve(String),
    #[error("fetching it failed: {0}")]
    Fetch(String),
    #[error("the document is not valid client metadata: {0}")]
    Document(String),
}

/// Whether a `client_id` names a metadata document rather than a registered client.
pub fn is_document_url(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

/// https, a host, a path other than `/`, no fragment, no credentials.
pub fn check_url(client_id: &str) -> Result<url::Url, CimdError> {
    let url = url::Url::parse(client_id).map_err(|_| CimdError::BadUrl("is not a URL"))?;
    if url.scheme() != "https" {
        return Err(CimdError::BadUrl("must use https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(CimdError::BadUrl("has no host"));
    }
    if url.path() == "/" || url.path().is_empty() {
        return Err(CimdError::BadUrl("must have a path"));
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(CimdError::BadUrl("must not carry a fragment or credentials"));
    }
    Ok(url)
}

/// Only globally routable unicast addresses may be fetched from.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (18..20).contains(&o[1]))
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            // Forms that embed an IPv4 address (NAT64, 6to4, IPv4-compatible) are judged
            // by that address; refusing them outright is simpler and loses nothing real.
            let embeds_v4 = (s[0] == 0x64 && s[1] == 0xff9b) || s[0] == 0x2002 || s[..6].iter().all(|x| *x == 0);
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x100 && s[1..4].iter().all(|x| *x == 0))
                || embeds_v4)
        }
    }
}

/// Checks a fetched document against the URL it came from.
pub fn parse_document(client_id: &str, body: &[u8]) -> Result<OAuthClient, CimdError> {
    let doc: serde_json::Value = serde_json::from_slice(body).map_err(|e| CimdError::Document(e.to_string()))?;
    if doc.get("client_id").and_then(|v| v.as_str()) != Some(client_id) {
        return Err(CimdError::Document(
            "its client_id must equal the URL it is served from".into(),
        ));
    }
    let uris: Vec<String> = doc
        .get("redirect_uris")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|u| u.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    if uris.is_empty() {
        return Err(CimdError::Document("redirect_uris is missing or empty".into()));
    }
    if let Some((u, why)) = uris
        .iter()
        .find_map(|u| super::redirect_uris::problem(u).map(|w| (u, w)))
    {
        return Err(CimdError::Document(format!("redirect URI {u:?} {why}")));
    }
    if doc
        .get("token_endpoint_auth_method")
        .and_then(|v| v.as_str())
        .is_some_and(|m| m != "none")
    {
        return Err(CimdError::Document(
            "only public clients (token_endpoint_auth_method none) are supported".into(),
        ));
    }
    Ok(OAuthClient {
        client_id: client_id.to_owned(),
        client_name: doc
            .get("client_name")
            .and_then(|v| v.as_str())
            .map(|n| n.chars().take(100).collect()),
        redirect_uris: uris,
    })
}

#[derive(Default)]
pub struct DocumentCache {
    entries: Mutex<HashMap<String, (OAuthClient, Instant)>>,
}

impl DocumentCache {
    /// The client a metadata-document `client_id` describes, fetched under the fence.
    pub async fn client(&self, client_id: &str) -> Result<OAuthClient, CimdError> {
        if let Some(client) = self.cached(client_id, Instant::now()) {
            return Ok(client);
        }
        let client = fetch(client_id).await?;
        self.insert(client.clone(), Instant::now());
        Ok(client)
    }

    fn cached(&self, client_id: &str, now: Instant) -> Option<OAuthClient> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(client_id)
            .filter(|(_, at)| now.duration_since(*at) < CACHE_TTL)
            .map(|(client, _)| client.clone())
    }

    /// Keeps a fetched document; when full, aged-out entries go first, then the oldest.
    fn insert(&self, client: OAuthClient, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CACHE_MAX && !entries.contains_key(&client.client_id) {
            entries.retain(|_, (_, at)| now.duration_since(*at) < CACHE_TTL);
            while entries.len() >= CACHE_MAX {
                let Some(oldest) = entries.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone()) else {
                    break;
                };
                entries.remove(&oldest);
            }
        }
        entries.insert(client.client_id.clone(), (client, now));
    }
}

async fn fetch(client_id: &str) -> Result<OAuthClient, CimdError> {
    let url = check_url(client_id)?;
    let host = url.host_str().unwrap_or_default().to_owned();
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = match url.host() {
        Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(ip.into(), port)],
        Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(ip.into(), port)],
        _ => tokio::time::timeout(TIMEOUT, tokio::net::lookup_host((host.as_str(), port)))
            .await
            .map_err(|_| CimdError::Resolve("timed out".into()))?
            .map_err(|e| CimdError::Resolve(e.to_string()))?
            .collect(),
    };
    // Every address must be public: a host that also resolves to 127.0.0.1 is refused.
    if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
        return Err(CimdError::NonPublicAddress(bad.ip()));
    }
    let pinned = *addrs.first().ok_or_else(|| CimdError::Resolve("no addresses".into()))?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would resolve the name itself and undo the address check.
        .no_proxy()
        .timeout(TIMEOUT)
        .resolve(&host, pinned)
        .build()
        .map_err(|e| CimdError::Fetch(e.to_string()))?;
    let mut resp = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| CimdError::Fetch(e.to_string()))?;
    if !resp.status().is_success() {
        return Err(CimdError::Fetch(format!("HTTP {}", resp.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| CimdError::Fetch(e.to_string()))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BYTES {
            return Err(CimdError::Fetch(format!(
                "the document is larger than {MAX_BYTES} bytes"
            )));
        }
    }
    parse_document(client_id, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::1",
            "::a00:1",
            "fec0::1",
        ] {
            assert!(!is_public(bad.parse().unwrap()), "{bad}");
        }
        for good in ["1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"] {
            assert!(is_public(good.parse().unwrap()), "{good}");
        }
    }

    #[test]
    fn document_urls_and_documents() {
        assert!(check_url("https://app.example/oauth/client.json").is_ok());
        for bad in [
            "http://app.example/c.json",
            "https://app.example/",
            "https://u:p@app.example/c",
            "https://app.example/c#x",
            "nope",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
        let id = "https://app.example/oauth/client.json";
        let good = format!(r#"{{"client_id":"{id}","client_name":"App","redirect_uris":["https://app.example/cb"]}}"#);
        let client = parse_document(id, good.as_bytes()).unwrap();
        assert_eq!(
            (client.client_name.as_deref(), client.redirect_uris.len()),
            (Some("App"), 1)
        );
        let other_id = r#"{"client_id":"https://evil.example/c.json","redirect_uris":["https://app.example/cb"]}"#;
        assert!(parse_document(id, other_id.as_bytes()).is_err());
        let bad_redirect = format!(r#"{{"client_id":"{id}","redirect_uris":["http://evil.example/cb"]}}"#);
        assert!(parse_document(id, bad_redirect.as_bytes()).is_err());
        assert!(parse_document(id, b"not json").is_err());
    }

    #[test]
    fn the_cache_is_bounded_and_forgets_the_oldest_first() {
        let cache = DocumentCache::default();
        let t0 = Instant::now();
        let doc = |i: usize| OAuthClient {
            client_id: format!("https://app{i}.example/c.json"),
            client_name: None,
            redirect_uris: vec!["https://app.example/cb".into()],
        };
        for i in 0..CACHE_MAX * 3 {
            cache.insert(doc(i), t0 + Duration::from_millis(i as u64));
        }
        let now = t0 + Duration::from_millis((CACHE_MAX * 3) as u64);
        assert_eq!(cache.entries.lock().unwrap().len(), CACHE_MAX);
        assert!(cache.cached(&doc(0).client_id, now).is_none(), "the oldest went first");
        assert!(
            cache.cached(&doc(CACHE_MAX * 3 - 1).client_id, now).is_some(),
            "the newest stays"
        );
        assert!(
            cache
                .cached(&doc(CACHE_MAX * 3 - 1).client_id, now + CACHE_TTL)
                .is_none(),
            "documents age out"
        );
    }

    #[tokio::test]
    async fn loopback_documents_are_never_fetched() {
        let err = fetch("https://127.0.0.1:9/client.json").await.unwrap_err();
        assert_eq!(err, CimdError::NonPublicAddress("127.0.0.1".parse().unwrap()));
        let err = fetch("https://localhost:9/client.json").await.unwrap_err();
        assert!(matches!(err, CimdError::NonPublicAddress(_)), "{err:?}");
    }
}
