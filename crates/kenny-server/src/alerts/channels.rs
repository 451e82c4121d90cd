//! Where alerts go: an ntfy topic, a webhook (JSON, signed), or e-mail over SMTP.
//! Only superusers set channels up; what they hold (tokens, secrets, passwords) is
//! stored but never shown back, and a change that leaves a secret out keeps it.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How e-mail is protected on the way to the SMTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EmailTls {
    /// Plain connection upgraded with STARTTLS, which must succeed (port 587).
    Starttls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No encryption: only to an SMTP server on this machine (loopback).
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum ChannelConfig {
    /// POST to an ntfy topic URL (`https://ntfy.sh/<topic>` or a self-hosted one).
    Ntfy {
        url: String,
        /// An access token, if the topic needs one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
    },
    /// POST the message as JSON, signed: `X-Kenny-Signature: sha256=<hex>` is the
    /// HMAC-SHA256 of `<X-Kenny-Timestamp>.<body>` with `secret`.
    Webhook { url: String, secret: String },
    Email {
        host: String,
        port: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        username: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        password: Option<String>,
        from: String,
        to: Vec<String>,
        tls: EmailTls,
        /// A CA certificate (PEM) to trust besides the system's, for a private server.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_pem: Option<String>,
    },
}

impl ChannelConfig {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ChannelConfig::Ntfy { .. } => "ntfy",
            ChannelConfig::Webhook { .. } => "webhook",
            ChannelConfig::Email { .. } => "email",
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        let secrets = match self {
            ChannelConfig::Ntfy { token, .. } => vec![token.as_deref()],
            ChannelConfig::Webhook { secret, .. } => vec![Some(secret.as_str())],
            ChannelConfig::Email { password, .. } => vec![password.as_deref()],
        };
        if secrets.into_iter().flatten().any(|s| s == "(set)") {
            return Err("a secret given as \"(set)\" has nothing to keep: type the secret itself".into());
        }
        match self {
            ChannelConfig::Ntfy { url, .. } => http_url(url),
            ChannelConfig::Webhook { url, secret } => {
                http_url(url)?;
                if secret.chars().count() < 16 {
                    return Err(
                        "secret must be at least 16 characters (the receiver checks signatures with it)".into(),
                    );
                }
                Ok(())
            }
            ChannelConfig::Email {
                host,
                port,
                from,
                to,
                tls,
                ca_pem,
                ..
            } => {
                if host.trim().is_empty() || host.contains(['/', ' ']) {
                    return Err("host must be the SMTP server's name or address".into());
                }
                if *port == 0 {
                    return Err("port must be 1 to 65535".into());
                }
                address(from).map_err(|e| format!("from: {e}"))?;
                if to.is_empty() || to.len() > 20 {
                    return Err("to must list 1 to 20 addresses".into());
                }
                for a in to {
                    address(a).map_err(|e| format!("to: {e}"))?;
                }
                if *tls == EmailTls::None && !is_loopback(host) {
                    return Err(
                        "tls \"none\" is only allowed for an SMTP server on this machine; use starttls or tls".into(),
                    );
                }
                if let Some(pem) = ca_pem
                    && !pem.contains("-----BEGIN CERTIFICATE-----")
                {
                    return Err("ca_pem must be a PEM certificate".into());
                }
                Ok(())
            }
        }
    }

    /// What may be shown: every setting, secrets replaced by whether they are set.
    pub(crate) fn shown(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(map) = v.as_object_mut() {
            for secret in ["token", "secret", "password"] {
                if map.contains_key(secret) {
                    map.insert(secret.into(), json!("(set)"));
                }
            }
        }
        v
    }

    /// `self` with the secrets `previous` had, where `self` leaves them out (`(set)`
    /// or missing, as the settings page sends them back).
    pub(crate) fn keeping_secrets_of(mut self, previous: &ChannelConfig) -> ChannelConfig {
        let keep = |new: &mut Option<String>, old: &Option<String>| {
            if new.as_deref().is_none_or(|s| s == "(set)") {
                new.clone_from(old);
            }
        };
        match (&mut self, previous) {
            (ChannelConfig::Ntfy { token, .. }, ChannelConfig::Ntfy { token: old, .. }) => keep(token, old),
            (ChannelConfig::Webhook { secret, .. }, ChannelConfig::Webhook { secret: old, .. })
                if secret == "(set)" || secret.is_empty() =>
            {
                secret.clone_from(old);
            }
            (ChannelConfig::Email { password, .. }, ChannelConfig::Email { password: old, .. }) => keep(password, old),
            _ => {}
        }
        self
    }
}

fn http_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("url: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err("url must be an http:// or https:// address".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("url must not hold a user name or password; use the token or secret field".into());
    }
    Ok(())
}

fn address(a: &str) -> Result<(), String> {
    a.parse::<lettre::Address>()
        .map(|_| ())
        .map_err(|e| format!("`{a}` is not an e-mail address ({e})"))
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> ChannelConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn settings_are_checked_and_say_what_is_wrong() {
        let ok = parse(json!({"kind": "webhook", "url": "https://hooks.example/k", "secret": "0123456789abcdef"}));
        ok.validate().unwrap();
        let short = parse(json!({"kind": "webhook", "url": "https://hooks.example/k", "secret": "short"}));
        assert!(short.validate().unwrap_err().contains("at least 16"));
        let ftp = parse(json!({"kind": "ntfy", "url": "ftp://x/y"}));
        assert!(ftp.validate().unwrap_err().contains("http:// or https://"));
        let creds = parse(json!({"kind": "ntfy", "url": "https://u:p@ntfy.sh/t"}));
        assert!(creds.validate().unwrap_err().contains("user name or password"));
        let email = |tls: &str, host: &str, to: Value| {
            parse(
                json!({"kind": "email", "host": host, "port": 587, "from": "kenny@example.org", "to": to, "tls": tls}),
            )
        };
        email("starttls", "smtp.example.org", json!(["me@example.org"]))
            .validate()
            .unwrap();
        email("none", "127.0.0.1", json!(["me@example.org"]))
            .validate()
            .unwrap();
        assert!(
            email("none", "smtp.example.org", json!(["me@example.org"]))
                .validate()
                .unwrap_err()
                .contains("only allowed")
        );
        assert!(
            email("tls", "smtp.example.org", json!(["not an address"]))
                .validate()
                .unwrap_err()
                .contains("to:")
        );
        assert!(
            email("tls", "smtp.example.org", json!([]))
                .validate()
                .unwrap_err()
                .contains("1 to 20")
        );
        let unknown =
            serde_json::from_value::<ChannelConfig>(json!({"kind": "ntfy", "url": "https://x/y", "colour": 1}));
        assert!(unknown.unwrap_err().to_string().contains("colour"));
    }

    #[test]
    fn secrets_are_never_shown_and_survive_an_edit_that_leaves_them_out() {
        let stored = parse(json!({"kind": "webhook", "url": "https://a/b", "secret": "0123456789abcdef-secret"}));
        assert_eq!(stored.shown()["secret"], "(set)");
        assert!(!stored.shown().to_string().contains("0123456789abcdef"));
        let edited =
            parse(json!({"kind": "webhook", "url": "https://a/c", "secret": "(set)"})).keeping_secrets_of(&stored);
        assert_eq!(
            edited,
            parse(json!({"kind": "webhook", "url": "https://a/c", "secret": "0123456789abcdef-secret"}))
        );
        let email = parse(
            json!({"kind": "email", "host": "h", "port": 1, "from": "a@b.c", "to": ["a@b.c"], "tls": "tls", "password": "pw"}),
        );
        assert_eq!(email.shown()["password"], "(set)");
        let kept =
            parse(json!({"kind": "email", "host": "h2", "port": 1, "from": "a@b.c", "to": ["a@b.c"], "tls": "tls"}))
                .keeping_secrets_of(&email);
        assert!(matches!(kept, ChannelConfig::Email { password: Some(p), .. } if p == "pw"));
    }
}
