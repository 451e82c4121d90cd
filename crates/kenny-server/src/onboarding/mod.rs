//! Adding a PC in one step: install links. A superuser makes a one-time, expiring link
//! for an agent id and an OS; whoever runs the command it comes with on the PC gets a
//! script that downloads this server's agent build, checks it against a manifest the
//! server key signed, and runs `kenny-agent install` with a fresh enrollment token.
//!
//! The link token is stored hashed and the enrollment token is minted only when the
//! link is used (`store::install_links`), so a database copy holds nothing usable.
//! Opening a link in a browser (or a chat app's preview) shows a page and uses nothing;
//! only a `POST` uses it, which previews never send.

pub(crate) mod page;
pub(crate) mod script;

use std::time::Duration;

use crate::secrets;
use crate::store::{NewInstallLink, Store, StoreError};

/// Shortest and longest a link may live.
pub const MIN_MINUTES: u64 = 5;
pub const MAX_MINUTES: u64 = 7 * 24 * 60;
pub const DEFAULT_MINUTES: u64 = 24 * 60;

/// The OSes an install script exists for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetOs {
    Linux,
    Windows,
}

impl TargetOs {
    pub fn parse(text: &str) -> Result<TargetOs, String> {
        match text.trim() {
            "linux" => Ok(TargetOs::Linux),
            "windows" => Ok(TargetOs::Windows),
            other => Err(format!("os {other:?} has no install script: use linux or windows")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TargetOs::Linux => "linux",
            TargetOs::Windows => "windows",
        }
    }
}

/// A link to make, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    pub agent_id: String,
    pub os: TargetOs,
    pub lifetime: Duration,
}

impl LinkSpec {
    /// Checks what a caller asked for; every message says what to send instead.
    pub fn new(agent_id: &str, os: &str, minutes: Option<u64>) -> Result<LinkSpec, String> {
        let agent_id = agent_id.trim();
        if !kenny_proto::agent_id::is_valid(agent_id) {
            return Err(format!(
                "agent id {agent_id:?} is not valid: use {}",
                kenny_proto::agent_id::AGENT_ID_RULE
            ));
        }
        let minutes = minutes.unwrap_or(DEFAULT_MINUTES);
        if !(MIN_MINUTES..=MAX_MINUTES).contains(&minutes) {
            return Err(format!(
                "a link lives {MIN_MINUTES} to {MAX_MINUTES} minutes (7 days), not {minutes}"
            ));
        }
        Ok(LinkSpec {
            agent_id: agent_id.to_owned(),
            os: TargetOs::parse(os)?,
            lifetime: Duration::from_secs(minutes * 60),
        })
    }
}

/// A link just made: the only time its token is seen.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CreatedLink {
    pub id: i64,
    pub agent_id: String,
    pub os: &'static str,
    pub url: String,
    /// What to run on the PC, as an administrator.
    pub command: String,
    pub expires_at: String,
}

/// Stores a new link made by `created_by` at `now`.
pub fn create(
    store: &Store,
    base_url: &str,
    spec: &LinkSpec,
    created_by: &str,
    now: time::OffsetDateTime,
) -> Result<CreatedLink, StoreError> {
    let token = secrets::new_token(secrets::INSTALL_LINK_PREFIX);
    let expires_at = crate::clock::format(now + spec.lifetime);
    let id = store.create_install_link(&NewInstallLink {
        token_hash: &secrets::token_hash(&token),
        agent_id: &spec.agent_id,
        os: spec.os.as_str(),
        created_by,
        created_at: &crate::clock::format(now),
        expires_at: &expires_at,
    })?;
    let url = format!("{}/install/{token}", base_url.trim_end_matches('/'));
    Ok(CreatedLink {
        id,
        agent_id: spec.agent_id.clone(),
        os: spec.os.as_str(),
        command: command(spec.os, &url),
        url,
        expires_at,
    })
}

/// The one line to run on the PC. The script is fetched with `POST`: that use is what
/// spends the link. Without `-f`, curl hands a refusal's text to `sh`, which prints it.
pub fn command(os: TargetOs, url: &str) -> String {
    match os {
        TargetOs::Linux => format!("curl -sS -X POST {} | sudo sh", script::sh_quote(url)),
        TargetOs::Windows => format!(
            "powershell -NoProfile -ExecutionPolicy Bypass -Command \"[Net.ServicePointManager]::SecurityProtocol='Tls12'; iex (irm -Method Post -UseBasicParsing -Uri {})\"",
            script::ps_quote(url)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_requests_are_checked_with_messages_that_say_what_to_send() {
        let ok = LinkSpec::new(" pc-new ", "linux", None).unwrap();
        assert_eq!(ok.agent_id, "pc-new");
        assert_eq!(ok.lifetime, Duration::from_secs(DEFAULT_MINUTES * 60));
        assert_eq!(LinkSpec::new("pc", "windows", Some(5)).unwrap().os, TargetOs::Windows);
        let bad_id = LinkSpec::new("pc x", "linux", None).unwrap_err();
        assert!(bad_id.contains("not valid"), "{bad_id}");
        let bad_os = LinkSpec::new("pc", "macos", None).unwrap_err();
        assert!(bad_os.contains("use linux or windows"), "{bad_os}");
        for minutes in [0, 4, MAX_MINUTES + 1] {
            let err = LinkSpec::new("pc", "linux", Some(minutes)).unwrap_err();
            assert!(err.contains("7 days"), "{err}");
        }
    }

    #[test]
    fn commands_post_the_link_and_quote_it() {
        let linux = command(TargetOs::Linux, "https://kenny.example/install/kenny_inl_abc");
        assert_eq!(
            linux,
            "curl -sS -X POST 'https://kenny.example/install/kenny_inl_abc' | sudo sh"
        );
        let windows = command(TargetOs::Windows, "https://k/install/t");
        assert!(
            windows.contains("irm -Method Post -UseBasicParsing -Uri 'https://k/install/t'"),
            "{windows}"
        );
    }

    #[test]
    fn a_link_is_stored_hashed_and_its_url_carries_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = time::macros::datetime!(2026-12-01 10:00 UTC);
        let spec = LinkSpec::new("pc-a", "linux", Some(60)).unwrap();
        let link = create(&store, "http://127.0.0.1:7420/", &spec, "alice", now).unwrap();
        let token = link.url.strip_prefix("http://127.0.0.1:7420/install/").unwrap();
        assert!(token.starts_with(secrets::INSTALL_LINK_PREFIX), "{token}");
        assert_eq!(link.expires_at, crate::clock::format(now + Duration::from_secs(3600)));
        let row = store
            .install_link_by_token(&secrets::token_hash(token))
            .unwrap()
            .unwrap();
        assert_eq!(
            (row.id, row.agent_id.as_str(), row.os.as_str()),
            (link.id, "pc-a", "linux")
        );
        assert!(
            store.install_link_by_token(token).unwrap().is_none(),
            "the token itself is not stored"
        );
    }
}
