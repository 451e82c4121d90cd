//! Time-based one-time passwords (RFC 6238: SHA-1, 6 digits, 30 s steps), the second
//! factor people enroll with an authenticator app, plus single-use recovery codes.

use totp_rs::{Algorithm, Secret, TOTP};

const DIGITS: usize = 6;
const STEP_SECS: u64 = 30;
const ISSUER: &str = "kenny";
pub(crate) const RECOVERY_CODES: usize = 10;

pub(crate) fn new_secret() -> String {
    match Secret::generate_secret().to_encoded() {
        Secret::Encoded(s) => s,
        Secret::Raw(_) => unreachable!("to_encoded returns the encoded form"),
    }
}

fn totp(secret_b32: &str, account: &str) -> Option<TOTP> {
    let bytes = Secret::Encoded(secret_b32.to_owned()).to_bytes().ok()?;
    TOTP::new(
        Algorithm::SHA1,
        DIGITS,
        1,
        STEP_SECS,
        bytes,
        Some(ISSUER.into()),
        account.replace(':', "_"),
    )
    .ok()
}

/// The `otpauth://` URI an authenticator app (or a QR code of it) takes.
pub(crate) fn otpauth_uri(secret_b32: &str, account: &str) -> Option<String> {
    totp(secret_b32, account).map(|t| t.get_url())
}

/// The time step `code` is valid for at `unix_now` (one step of clock skew either
/// way), if any. Callers accept a step only once.
pub(crate) fn matching_step(secret_b32: &str, code: &str, unix_now: u64) -> Option<i64> {
    let code = code.trim();
    if code.len() != DIGITS || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let t = totp(secret_b32, "x")?;
    let now_step = unix_now / STEP_SECS;
    [now_step.saturating_sub(1), now_step, now_step + 1]
        .into_iter()
        .find(|step| crate::secrets::constant_time_eq(&t.generate(step * STEP_SECS), code))
        .map(|s| s as i64)
}

/// Fresh recovery codes, like `k7q2-9xwd`.
pub(crate) fn new_recovery_codes() -> Vec<String> {
    (0..RECOVERY_CODES)
        .map(|_| {
            let raw = crate::secrets::new_password()
                .to_ascii_lowercase()
                .replace(['-', '_'], "x");
            format!("{}-{}", &raw[..4], &raw[4..8])
        })
        .collect()
}

/// Recovery codes are compared case- and dash-insensitively, then hashed.
pub(crate) fn recovery_hash(code: &str) -> String {
    let normal: String = code
        .trim()
        .to_ascii_lowercase()
        .chars()
        .filter(|c| *c != '-' && *c != ' ')
        .collect();
    crate::secrets::token_hash(&format!("kenny-recovery:{normal}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current_step(unix_now: u64) -> i64 {
        (unix_now / STEP_SECS) as i64
    }

    #[test]
    fn codes_match_their_step_with_one_step_of_skew() {
        let secret = new_secret();
        let t = totp(&secret, "alice").unwrap();
        let now = 1_800_000_000;
        let code = t.generate(now);
        assert_eq!(matching_step(&secret, &code, now), Some(current_step(now)));
        assert_eq!(
            matching_step(&secret, &code, now + 30),
            Some(current_step(now)),
            "30 s late still counts"
        );
        assert_eq!(matching_step(&secret, &code, now + 90), None, "but not 90 s late");
        assert_eq!(matching_step(&secret, "12345", now), None);
        assert_eq!(matching_step(&secret, "abcdef", now), None);
        let uri = otpauth_uri(&secret, "alice").unwrap();
        assert!(
            uri.starts_with("otpauth://totp/kenny:alice?") && uri.contains(&format!("secret={secret}")),
            "{uri}"
        );
    }

    #[test]
    fn recovery_codes_are_distinct_and_normalised() {
        let codes = new_recovery_codes();
        assert_eq!(codes.len(), RECOVERY_CODES);
        assert_eq!(
            codes.iter().collect::<std::collections::HashSet<_>>().len(),
            RECOVERY_CODES
        );
        assert_eq!(recovery_hash("AbCd-EfGh"), recovery_hash(" abcdefgh "));
        assert_ne!(recovery_hash("abcd-efgh"), recovery_hash("abcd-efgi"));
    }
}
