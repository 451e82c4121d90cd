//! Device cookies: a browser's proof that it has signed in to an account before, which
//! lets it past the account-wide sign-in throttle (see [`crate::ratelimit`]).
//!
//! A device cookie is not a credential: it opens nothing by itself and only changes
//! which failure count a sign-in attempt is judged by. It is set on every successful
//! sign-in, one per account (`kenny_device_<user id>`), lives a year, and is signed
//! (HMAC-SHA256 with a key derived from the server key), so nothing is stored for it
//! and it cannot be forged or moved to another account. Account ids are never reused,
//! so a cookie cannot outlive its account into a new one.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// How long a browser stays known after its last successful sign-in.
pub(crate) const LIFETIME_SECS: u64 = 365 * 24 * 3600;

/// The cookie's name for an account.
pub(crate) fn cookie_name(user_id: i64) -> String {
    format!("kenny_device_{user_id}")
}

/// The signing key, derived from the server identity so it needs no file of its own.
#[derive(Clone)]
pub struct DeviceKey([u8; 32]);

impl std::fmt::Debug for DeviceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceKey(..)")
    }
}

impl DeviceKey {
    pub fn derive(server_key: &ed25519_dalek::SigningKey) -> Self {
        let mut h = Sha256::new();
        h.update(b"kenny-device-cookie-v1\0");
        h.update(server_key.to_bytes());
        DeviceKey(h.finalize().into())
    }

    /// A fresh cookie value for `user_id`: `<expires>.<id>.<mac>`.
    pub fn issue(&self, user_id: i64, unix_now: u64) -> String {
        let mut id = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut id);
        let id = URL_SAFE_NO_PAD.encode(id);
        let expires = unix_now + LIFETIME_SECS;
        let mac = URL_SAFE_NO_PAD.encode(self.mac(user_id, expires, &id));
        format!("{expires}.{id}.{mac}")
    }

    /// The device id of a cookie value that this server issued for `user_id` and that
    /// has not expired; `None` for anything else.
    pub fn verify(&self, user_id: i64, value: &str, unix_now: u64) -> Option<String> {
        let mut parts = value.split('.');
        let (expires, id, mac) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || id.is_empty() || id.len() > 64 {
            return None;
        }
        let expires: u64 = expires.parse().ok()?;
        let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
        let mut check = self.hmac();
        check.update(&message(user_id, expires, id));
        check.verify_slice(&mac).ok()?;
        (unix_now < expires).then(|| id.to_owned())
    }

    #[expect(clippy::expect_used, reason = "HMAC accepts a key of any length")]
    fn hmac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }

    fn mac(&self, user_id: i64, expires: u64, id: &str) -> Vec<u8> {
        let mut m = self.hmac();
        m.update(&message(user_id, expires, id));
        m.finalize().into_bytes().to_vec()
    }
}

fn message(user_id: i64, expires: u64, id: &str) -> Vec<u8> {
    format!("kenny-device\0{user_id}\0{expires}\0{id}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> DeviceKey {
        DeviceKey::derive(&ed25519_dalek::SigningKey::from_bytes(&[seed; 32]))
    }

    #[test]
    fn a_cookie_is_good_for_its_account_until_it_expires() {
        let k = key(1);
        let now = 1_800_000_000;
        let v = k.issue(7, now);
        let id = k.verify(7, &v, now).expect("valid");
        assert_eq!(k.verify(7, &v, now + LIFETIME_SECS - 1), Some(id));
        assert_eq!(k.verify(7, &v, now + LIFETIME_SECS), None, "expired");
        assert_eq!(k.verify(8, &v, now), None, "bound to its account");
        assert_eq!(key(2).verify(7, &v, now), None, "another server's key");
        assert_ne!(k.issue(7, now), v, "each browser gets its own id");
    }

    #[test]
    fn tampered_or_malformed_cookies_are_refused() {
        let k = key(1);
        let now = 1_800_000_000;
        let v = k.issue(7, now);
        let (expires, rest) = v.split_once('.').unwrap();
        let later: u64 = expires.parse::<u64>().unwrap() + 1000;
        assert_eq!(
            k.verify(7, &format!("{later}.{rest}"), now),
            None,
            "a longer life is forged"
        );
        let (head, _) = v.rsplit_once('.').unwrap();
        assert_eq!(k.verify(7, &format!("{head}.AAAA"), now), None);
        for bad in [
            "",
            "x",
            "1.2",
            "1.2.3.4",
            "abc.id.mac",
            &format!("{v}.x"),
            &format!("{expires}..{}", v.rsplit_once('.').unwrap().1),
        ] {
            assert_eq!(k.verify(7, bad, now), None, "{bad:?}");
        }
        assert!(
            !format!("{k:?}").contains(&hex::encode(k.0)),
            "the key never reaches logs"
        );
    }
}
