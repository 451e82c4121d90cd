//! The cookies the dashboard sets: the session, a form token that protects the sign-in
//! and set-up forms from cross-site submission before a session exists, and the device
//! cookies of browsers that signed in before ([`crate::device`]).

use axum::http::{HeaderMap, HeaderValue, header};

pub(crate) const SESSION: &str = "kenny_session";
pub(crate) const FORM: &str = "kenny_form";

pub(crate) fn get(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// `HttpOnly`, `SameSite=Lax`, `Path=/`; `Secure` when served over TLS. A zero
/// `max_age_secs` deletes the cookie.
pub(crate) fn set(name: &str, value: &str, max_age_secs: u64, secure: bool) -> HeaderValue {
    build(name, value, "/", "Lax", max_age_secs, secure)
}

/// A device cookie: only ever sent with the sign-in form's own post (`Path=/login`,
/// `SameSite=Strict`), never readable by script.
pub(crate) fn set_device(name: &str, value: &str, max_age_secs: u64, secure: bool) -> HeaderValue {
    build(name, value, "/login", "Strict", max_age_secs, secure)
}

fn build(name: &str, value: &str, path: &str, same_site: &str, max_age_secs: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={path}; HttpOnly; SameSite={same_site}; Max-Age={max_age_secs}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("kenny_invalid=; Max-Age=0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_cookies() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; kenny_session=kenny_ses_x; b=2"),
        );
        assert_eq!(get(&h, SESSION).as_deref(), Some("kenny_ses_x"));
        assert_eq!(get(&h, "c"), None);
        let c = set(SESSION, "v", 60, true);
        assert_eq!(
            c.to_str().unwrap(),
            "kenny_session=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure"
        );
        assert!(!set(SESSION, "v", 0, false).to_str().unwrap().contains("Secure"));
        assert_eq!(
            set_device("kenny_device_3", "v", 60, false).to_str().unwrap(),
            "kenny_device_3=v; Path=/login; HttpOnly; SameSite=Strict; Max-Age=60"
        );
    }
}
