//! The router's state, split by concern so that each handler names only the part it
//! works with (`State(fleet): State<Fleet>`) rather than everything the server holds.
//! [`AppState`] holds the parts; each part is cheap to clone (shared pieces behind
//! `Arc`), and axum hands a handler its part through the [`FromRef`] impls below.
//!
//! Parts live with the concern they serve when that module has no routes of its own
//! ([`Accounts`] in `accounts`, [`Fleet`] in `fleet`, [`Conversations`] in `chat`);
//! the rest are here, since a module that builds routes names this one and this one
//! must not name it back.

use std::sync::Arc;

use axum::extract::FromRef;
use ed25519_dalek::SigningKey;
use tokio_util::sync::CancellationToken;

pub use crate::accounts::Accounts;
pub use crate::chat::Conversations;
use crate::clock::Clock;
use crate::config::{OAuthSettings, ServeConfig};
pub use crate::fleet::Fleet;
use crate::oauth::cimd::DocumentCache;
use crate::ratelimit::FailureLimiter;
use crate::store::Store;

/// The router's state: every part, for [`crate::server::router`] to hand out. Only
/// building the router takes it whole; the running server and tests hold it to reach
/// the parts.
pub struct AppState {
    pub site: Site,
    pub accounts: Accounts,
    pub fleet: Fleet,
    pub oauth: OAuth,
    pub conversations: Conversations,
}

/// The server as a whole: how it was configured, where clients reach it, the key it
/// proves itself to agents with, and when it stops.
#[derive(Clone)]
pub struct Site {
    pub config: Arc<ServeConfig>,
    /// How clients reach this server: the public URL, or `http://<bound address>`.
    pub base_url: Arc<str>,
    pub server_key: Arc<SigningKey>,
    /// Fires when the server shuts down; every agent session watches it.
    pub shutdown: CancellationToken,
}

/// What kenny's OAuth authorization server works with: its settings, the clients it
/// knows (registered in the store, or described by a fetched metadata document), and
/// the throttle on registration, which needs no account.
#[derive(Clone)]
pub struct OAuth {
    pub settings: OAuthSettings,
    /// The issuer, and the base of the resource its tokens are for.
    pub base_url: Arc<str>,
    /// Client ID metadata documents fetched for `https` client ids.
    pub client_documents: Arc<DocumentCache>,
    /// OAuth client registrations per client address.
    pub registration_limiter: Arc<FailureLimiter>,
    pub store: Arc<Store>,
    /// What time it is for code and token expiry; see [`crate::clock::Clock`].
    pub clock: Clock,
}

impl FromRef<Arc<AppState>> for Site {
    fn from_ref(state: &Arc<AppState>) -> Self {
        state.site.clone()
    }
}

impl FromRef<Arc<AppState>> for Accounts {
    fn from_ref(state: &Arc<AppState>) -> Self {
        state.accounts.clone()
    }
}

impl FromRef<Arc<AppState>> for Fleet {
    fn from_ref(state: &Arc<AppState>) -> Self {
        state.fleet.clone()
    }
}

impl FromRef<Arc<AppState>> for OAuth {
    fn from_ref(state: &Arc<AppState>) -> Self {
        state.oauth.clone()
    }
}

impl FromRef<Arc<AppState>> for Conversations {
    fn from_ref(state: &Arc<AppState>) -> Self {
        state.conversations.clone()
    }
}
