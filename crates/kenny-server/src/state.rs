//! What every handler shares: configuration, storage, the live agents and the
//! services built on them.

use std::sync::Arc;

use ed25519_dalek::SigningKey;
use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::auth::Authenticator;
use crate::config::ServeConfig;
use crate::forward::Forwarder;
use crate::registry::Registry;
use crate::store::Store;

pub struct AppState {
    pub config: ServeConfig,
    /// How clients reach this server: the public URL, or `http://<bound address>`.
    pub base_url: String,
    pub oauth: crate::config::OAuthSettings,
    /// Client ID metadata documents fetched for `https` client ids.
    pub client_documents: crate::oauth::cimd::DocumentCache,
    pub store: Arc<Store>,
    pub registry: Arc<Registry>,
    /// The dashboard chat (model settings, per-conversation turn locks).
    pub chat: crate::chat::Chat,
    /// The operator's guard rules, pushed to agents.
    pub policy: crate::policy::PolicyBook,
    pub forwarder: Forwarder,
    pub auth: Authenticator,
    /// What time it is for every decision by time; see [`crate::clock::Clock`].
    pub clock: crate::clock::Clock,
    pub audit: AuditLog,
    pub server_key: SigningKey,
    /// Fires when the server shuts down; every agent session watches it.
    pub shutdown: CancellationToken,
    /// Failed password checks (sign-in and re-checks) per caller and per account.
    pub login_limiter: crate::ratelimit::SignInThrottle,
    /// Signs the device cookies of browsers that signed in before.
    pub device_key: crate::device::DeviceKey,
    /// OAuth client registrations per client address (registration needs no account).
    pub registration_limiter: crate::ratelimit::FailureLimiter,
    /// What each agent may still push (log lines, telemetry), kept across reconnects.
    pub pushed: crate::tunnel::pushed::PushedBook,
}
