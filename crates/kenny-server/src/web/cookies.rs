//! The two cookies the dashboard sets: the session, and a form token that protects
//! the sign-in and set-up forms from cross-site submission before a session exists.

use axum::http::{HeaderMap, HeaderValue, header};

pub const SESSION: &str = "kenny_session";
pub const FORM: &str = "kenny_form";

pub fn get(headers: &HeaderMap, name: &str) -> Option<String> {
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
pub fn set(name: &str, value: &str, max_age_secs: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}"
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
    }
}
