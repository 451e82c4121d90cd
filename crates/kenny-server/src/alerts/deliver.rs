//! Sending: a background task takes due deliveries from the store and sends each
//! through its channel, with a time limit; a failure is retried later (30 s, 2 min,
//! 10 min, 1 h, 3 h) and then marked failed, where the dashboard shows it. Nothing here
//! runs on a request's path, so a slow or dead receiver never holds up the server.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::channels::{ChannelConfig, EmailTls};
use super::message::Message;
use crate::clock::Clock;
use crate::store::{DeliveryRow, Store};

/// The wait before each retry; after the last, a delivery is `failed`.
const BACKOFF: [Duration; 5] = [
    Duration::from_secs(30),
    Duration::from_secs(120),
    Duration::from_secs(600),
    Duration::from_secs(3600),
    Duration::from_secs(3 * 3600),
];
/// Longest a single send may take.
pub(crate) const SEND_TIME: Duration = Duration::from_secs(15);
/// Deliveries taken at once.
const BATCH: u32 = 20;
/// Longest sleep between looks at the queue (a new delivery wakes it sooner).
const IDLE: Duration = Duration::from_secs(30);

/// Sends due deliveries until `shutdown`; `wake` says new ones are queued.
pub(crate) async fn run(
    store: Arc<Store>,
    clock: Clock,
    wake: Arc<Notify>,
    leader: crate::leader::Leader,
    shutdown: CancellationToken,
) {
    let http = match client() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the HTTP client for alerts; alerts are stored but not sent");
            return;
        }
    };
    loop {
        if !leader.is_leading() {
            tokio::select! {
                _ = tokio::time::sleep(crate::leader::RETRY_EVERY) => continue,
                _ = shutdown.cancelled() => return,
            }
        }
        let now = clock.now();
        let due = store.blocking(move |s| s.due_deliveries(&now, BATCH)).await;
        let due = due.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read queued alerts; trying again shortly");
            Vec::new()
        });
        let full = due.len() == BATCH as usize;
        for delivery in due {
            attempt(&store, &clock, &http, delivery).await;
        }
        if full {
            continue;
        }
        let wait = next_wait(&store, &clock).await;
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

async fn next_wait(store: &Arc<Store>, clock: &Clock) -> Duration {
    let next = store.blocking(|s| s.next_delivery_at()).await.ok().flatten();
    let Some(at) = next.as_deref().and_then(crate::clock::parse) else {
        return IDLE;
    };
    let until = (at - clock.now_utc()).as_seconds_f64().max(0.0);
    Duration::from_secs_f64(until).min(IDLE)
}

async fn attempt(store: &Arc<Store>, clock: &Clock, http: &reqwest::Client, d: DeliveryRow) {
    let channel_id = d.channel_id;
    let channel = store.blocking(move |s| s.channel(channel_id)).await.ok().flatten();
    let outcome = match (&channel, serde_json::from_str::<Message>(&d.message)) {
        (None, _) => Err("the channel was removed".to_owned()),
        (Some(ch), _) if !ch.enabled => Err("the channel was turned off".to_owned()),
        (_, Err(e)) => Err(format!("the stored message does not read: {e}")),
        (Some(ch), Ok(message)) => match serde_json::from_str::<ChannelConfig>(&ch.config) {
            Ok(config) => send(http, &config, &message, clock).await,
            Err(e) => Err(format!("the channel's settings do not read: {e}")),
        },
    };
    let now = clock.now_utc();
    let tries = usize::try_from(d.attempts).unwrap_or(0) + 1;
    let off = channel.as_ref().is_none_or(|c| !c.enabled);
    let (status, error, next) = match &outcome {
        Ok(()) => ("sent", None, now),
        Err(e) if off => ("failed", Some(e.clone()), now),
        Err(e) if tries > BACKOFF.len() => ("failed", Some(e.clone()), now),
        Err(e) => ("pending", Some(e.clone()), now + BACKOFF[tries - 1]),
    };
    if let Some(e) = &error {
        let name = channel.as_ref().map_or("(removed)", |c| c.name.as_str());
        tracing::warn!(channel = %name, delivery = d.id, attempt = tries, status, error = %e, "alert not delivered");
    }
    let (next, now) = (crate::clock::format(next), crate::clock::format(now));
    let recorded = store
        .blocking(move |s| s.record_attempt(d.id, status, error.as_deref(), &next, &now))
        .await;
    if let Err(e) = recorded {
        tracing::error!(error = %e, "cannot record an alert delivery");
    }
}

fn client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(SEND_TIME)
        .connect_timeout(Duration::from_secs(10))
        // A receiver that redirects gets no second request (and no secret) elsewhere.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("kenny/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Sends one message through one channel now; the error says what went wrong.
pub(crate) async fn send_now(config: &ChannelConfig, message: &Message, clock: &Clock) -> Result<(), String> {
    let http = client().map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    send(&http, config, message, clock).await
}

async fn send(http: &reqwest::Client, config: &ChannelConfig, message: &Message, clock: &Clock) -> Result<(), String> {
    match config {
        ChannelConfig::Ntfy { url, token } => {
            let mut request = http
                .post(url)
                .header("Title", header_text(&message.title))
                .header("Priority", message.priority.to_string())
                .header("Tags", tags(message))
                .body(message.text.clone());
            if let Some(t) = token {
                request = request.bearer_auth(t);
            }
            answered(request.send().await).await
        }
        ChannelConfig::Webhook { url, secret } => {
            let body = serde_json::to_string(message).map_err(|e| e.to_string())?;
            let timestamp = clock.unix_secs().to_string();
            let signature = sign(secret, &timestamp, &body);
            let request = http
                .post(url)
                .header("Content-Type", "application/json")
                .header("X-Kenny-Event", message.event.as_str())
                .header("X-Kenny-Timestamp", timestamp)
                .header("X-Kenny-Signature", format!("sha256={signature}"))
                .body(body);
            answered(request.send().await).await
        }
        ChannelConfig::Email { .. } => email(config, message).await,
    }
}

/// The webhook signature: hex HMAC-SHA256 of `<timestamp>.<body>`, so a receiver can
/// check both where the body came from and that it is not an old one replayed.
pub(crate) fn sign(secret: &str, timestamp: &str, body: &str) -> String {
    #[expect(clippy::expect_used, reason = "HMAC accepts a key of any length")]
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

async fn answered(response: reqwest::Result<reqwest::Response>) -> Result<(), String> {
    // Without the URL: a webhook's may hold a token, and errors are logged.
    let response = response.map_err(|e| format!("could not reach the receiver: {}", e.without_url()))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    let text: String = text.chars().take(200).collect();
    Err(format!("the receiver answered HTTP {status}: {}", text.trim()))
}

/// HTTP header values are visible ASCII; anything else becomes `?`.
fn header_text(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' })
        .collect()
}

fn tags(m: &Message) -> &'static str {
    match (m.event.as_str(), m.status.as_deref()) {
        ("recovery", _) => "white_check_mark",
        (_, Some("crit")) => "rotating_light",
        ("alert", _) => "warning",
        _ => "information_source",
    }
}

async fn email(config: &ChannelConfig, message: &Message) -> Result<(), String> {
    use lettre::message::header::ContentType;
    use lettre::transport::smtp::authentication::Credentials;
    use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
    use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

    let ChannelConfig::Email {
        host,
        port,
        username,
        password,
        from,
        to,
        tls,
        ca_pem,
    } = config
    else {
        return Err("not an e-mail channel".into());
    };
    let parameters = || -> Result<TlsParameters, String> {
        let mut builder = TlsParameters::builder(host.clone());
        if let Some(pem) = ca_pem {
            let cert = Certificate::from_pem(pem.as_bytes()).map_err(|e| format!("ca_pem: {e}"))?;
            builder = builder.add_root_certificate(cert);
        }
        builder.build_rustls().map_err(|e| format!("TLS set-up: {e}"))
    };
    let tls = match tls {
        EmailTls::Starttls => Tls::Required(parameters()?),
        EmailTls::Tls => Tls::Wrapper(parameters()?),
        EmailTls::None => Tls::None,
    };
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.as_str())
        .port(*port)
        .tls(tls)
        .timeout(Some(SEND_TIME));
    if let (Some(user), Some(pass)) = (username, password) {
        transport = transport.credentials(Credentials::new(user.clone(), pass.clone()));
    }
    let mut mail = lettre::Message::builder()
        .from(from.parse().map_err(|e| format!("from: {e}"))?)
        .subject(format!("[kenny] {}", message.title))
        .header(ContentType::TEXT_PLAIN);
    for recipient in to {
        mail = mail.to(recipient.parse().map_err(|e| format!("to: {e}"))?);
    }
    let mail = mail
        .body(message.text.clone())
        .map_err(|e| format!("cannot build the e-mail: {e}"))?;
    transport
        .build()
        .send(mail)
        .await
        .map(|_| ())
        .map_err(|e| format!("the SMTP server did not take the e-mail: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_covers_timestamp_and_body() {
        let s = sign("0123456789abcdef", "1700000000", "{\"a\":1}");
        assert_eq!(s.len(), 64);
        assert_ne!(s, sign("0123456789abcdef", "1700000001", "{\"a\":1}"));
        assert_ne!(s, sign("0123456789abcdef", "1700000000", "{\"a\":2}"));
        assert_ne!(s, sign("0123456789abcdeF", "1700000000", "{\"a\":1}"));
        assert_eq!(header_text("crit: disk é\n"), "crit: disk ??");
    }
}
