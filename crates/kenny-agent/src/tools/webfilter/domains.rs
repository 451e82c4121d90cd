//! Which names may go into the hosts file: real, fully qualified domain names only.
//! Names the PC itself relies on (localhost and friends) and the kenny server this
//! agent talks to are refused, so a filter can never cut the PC off from itself or
//! from kenny.

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::tools::ToolError;

const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;
/// How many refused names one error message lists before summarising.
const LISTED_REFUSALS: usize = 50;

/// Names resolved locally on every system (Debian's and Windows' stock hosts entries,
/// RFC 6761/6762 special-use names).
const RESERVED_EXACT: &[&str] = &[
    "localhost",
    "local",
    "localdomain",
    "broadcasthost",
    "ip6-localhost",
    "ip6-loopback",
    "ip6-localnet",
    "ip6-mcastprefix",
    "ip6-allnodes",
    "ip6-allrouters",
];
const RESERVED_SUFFIXES: &[&str] = &[".localhost", ".localdomain"];

/// The host name of the server URL, normalised, when it is a name (IP literals are
/// refused anyway, so only names need protecting).
pub(crate) fn server_host_name(server_url: &str) -> Option<String> {
    let host = reqwest::Url::parse(server_url).ok()?.host_str()?.to_owned();
    normalize(&host).ok()
}

/// The distinct names, normalised and sorted; or one `bad_args` error listing every
/// refused name with its reason (then nothing is applied).
pub(super) fn validate_with(raw: &[String], protected: &[String]) -> Result<Vec<String>, ToolError> {
    let mut accepted = BTreeSet::new();
    let mut refused: Vec<String> = Vec::new();
    for name in raw {
        match normalize(name).and_then(|n| check_allowed(n, protected)) {
            Ok(n) => {
                accepted.insert(n);
            }
            Err(why) => refused.push(format!("{name:?} ({why})")),
        }
    }
    if !refused.is_empty() {
        let shown = refused.len().min(LISTED_REFUSALS);
        let more = refused.len() - shown;
        return Err(ToolError::bad_args(format!(
            "{} of {} domain names refused, nothing was applied: {}{}",
            refused.len(),
            raw.len(),
            refused[..shown].join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        )));
    }
    if accepted.is_empty() {
        return Err(ToolError::bad_args(
            "the domain list is empty; to remove the filter use webfilter_clear",
        ));
    }
    Ok(accepted.into_iter().collect())
}

fn check_allowed(name: String, protected: &[String]) -> Result<String, String> {
    if RESERVED_EXACT.contains(&name.as_str()) || RESERVED_SUFFIXES.iter().any(|s| name.ends_with(s)) {
        return Err("a reserved local name this PC relies on".to_owned());
    }
    if protected.contains(&name) {
        return Err("the kenny server this agent connects to; blocking it would cut the PC off from kenny".to_owned());
    }
    Ok(name)
}

/// Lower case, no trailing dot, international names in their ASCII (punycode) form,
/// checked against the DNS name rules; `Err` says why not.
pub(super) fn normalize(raw: &str) -> Result<String, String> {
    let name = raw.trim();
    if name.is_empty() {
        return Err("empty".to_owned());
    }
    if name.contains("://") || name.contains('/') {
        return Err("give the bare host name such as `example.com`, not a URL or path".to_owned());
    }
    if name.contains('*') {
        return Err("a hosts file cannot block wildcards; list each name, such as `www.example.com`".to_owned());
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<IpAddr>().is_ok() {
        return Err("an IP address, not a domain name".to_owned());
    }
    if name.chars().any(char::is_whitespace) {
        return Err("contains whitespace".to_owned());
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let ascii = if name.is_ascii() {
        name.to_ascii_lowercase()
    } else {
        idna::domain_to_ascii(name).map_err(|_| "not a valid international domain name".to_owned())?
    };
    check_syntax(&ascii)?;
    Ok(ascii)
}

fn check_syntax(name: &str) -> Result<(), String> {
    if name.len() > MAX_NAME {
        return Err(format!("longer than {MAX_NAME} characters"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err("has an empty label (two dots in a row, or a leading dot)".to_owned());
        }
        if label.len() > MAX_LABEL {
            return Err(format!("has a label longer than {MAX_LABEL} characters"));
        }
        if let Some(c) = label.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-')) {
            return Err(format!("contains `{c}`; names use letters, digits and `-`"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("label `{label}` starts or ends with `-`"));
        }
    }
    if RESERVED_EXACT.contains(&name) {
        return Ok(()); // reported as reserved, which says more than "single label"
    }
    if labels.len() < 2 {
        return Err("not a fully qualified name; give at least two labels, such as `example.com`".to_owned());
    }
    if labels.last().is_some_and(|tld| tld.chars().all(|c| c.is_ascii_digit())) {
        return Err("looks like an IP address; a top-level domain is never all digits".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_are_normalised_and_deduplicated() {
        let out = validate_with(
            &list(&[
                "WWW.Example.COM.",
                "example.com",
                " example.com ",
                "www.example.com",
                "a-b.c0.example.org",
                "xn--bcher-kva.example",
            ]),
            &[],
        )
        .unwrap();
        assert_eq!(
            out,
            [
                "a-b.c0.example.org",
                "example.com",
                "www.example.com",
                "xn--bcher-kva.example"
            ]
        );
    }

    #[test]
    fn international_names_become_punycode() {
        assert_eq!(normalize("Bücher.example").unwrap(), "xn--bcher-kva.example");
        assert_eq!(normalize("пример.рф").unwrap(), "xn--e1afmkfd.xn--p1ai");
        assert!(normalize("bad\u{0}name.example").is_err());
    }

    #[test]
    fn invalid_names_say_why() {
        for (name, says) in [
            ("", "empty"),
            ("example", "at least two labels"),
            ("a..example.com", "empty label"),
            (".example.com", "empty label"),
            ("example.com..", "empty label"),
            ("-bad.example.com", "starts or ends with `-`"),
            ("bad-.example.com", "starts or ends with `-`"),
            ("under_score.example.com", "contains `_`"),
            ("semi;colon.example.com", "contains `;`"),
            ("http://example.com/", "not a URL"),
            ("example.com/path", "not a URL"),
            ("*.example.com", "wildcards"),
            ("two words.example.com", "whitespace"),
            ("1.2.3.4", "an IP address"),
            ("::1", "an IP address"),
            ("[2001:db8::1]", "an IP address"),
            ("1.2.3", "never all digits"),
            ("999.example.123", "never all digits"),
        ] {
            let why = normalize(name).unwrap_err();
            assert!(why.contains(says), "{name:?}: {why}");
        }
        let long_label = format!("{}.example.com", "a".repeat(64));
        assert!(normalize(&long_label).unwrap_err().contains("longer than 63"));
        assert!(normalize(&format!("{}.example.com", "a".repeat(63))).is_ok());
        let long_name = format!("{}.com", vec!["a".repeat(60); 5].join("."));
        assert!(normalize(&long_name).unwrap_err().contains("longer than 253"));
    }

    #[test]
    fn reserved_and_protected_names_are_refused_together() {
        let err = validate_with(
            &list(&[
                "ok.example",
                "localhost",
                "LOCALHOST.",
                "foo.localhost",
                "local",
                "localdomain",
                "localhost.localdomain",
                "broadcasthost",
                "ip6-localhost",
                "ip6-loopback",
                "kenny.example.net",
                "127.0.0.1",
                "x",
            ]),
            &["kenny.example.net".to_owned()],
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        assert!(
            err.message
                .starts_with("12 of 13 domain names refused, nothing was applied"),
            "{}",
            err.message
        );
        for name in [
            "\"localhost\"",
            "\"foo.localhost\"",
            "\"local\"",
            "\"broadcasthost\"",
            "\"ip6-loopback\"",
            "\"127.0.0.1\"",
            "\"x\"",
        ] {
            assert!(err.message.contains(name), "{name} missing from {}", err.message);
        }
        assert!(
            err.message.contains("\"kenny.example.net\" (the kenny server"),
            "{}",
            err.message
        );
        assert!(!err.message.contains("ok.example"), "{}", err.message);
        // mDNS: only the bare `local` is refused; names under it are ordinary here.
        assert!(validate_with(&list(&["printer.local"]), &[]).is_ok());
    }

    #[test]
    fn long_refusal_lists_are_summarised() {
        let names: Vec<String> = (0..80).map(|i| format!("bad_{i}.example")).collect();
        let err = validate_with(&names, &[]).unwrap_err();
        assert!(err.message.contains("80 of 80"));
        assert!(err.message.ends_with("; and 30 more"), "{}", err.message);
    }

    #[test]
    fn an_empty_list_is_refused() {
        assert_eq!(validate_with(&[], &[]).unwrap_err().code, ErrorCode::BadArgs);
    }

    #[test]
    fn the_server_host_is_protected() {
        let ctx = crate::tools::ToolContext::default()
            .protecting_server("https://Kenny.Example.org:8443/base")
            .protecting_server("http://127.0.0.1:7420")
            .protecting_server("not a url")
            .protecting_server("https://kenny.example.org/again");
        assert_eq!(ctx.protected_hosts, vec!["kenny.example.org".to_owned()]);
        let err = validate_with(&list(&["kenny.example.org"]), &ctx.protected_hosts).unwrap_err();
        assert!(err.message.contains("the kenny server"), "{}", err.message);
    }
}
