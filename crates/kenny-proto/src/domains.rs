//! Which names count as domain names for kenny's web filter, and their one spelling:
//! shared by the agent, which writes them into the hosts file, and the server, which
//! computes the list it sends, so both judge a name the same way.

use std::net::IpAddr;

const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;
/// Names resolved locally on every system (Debian's and Windows' stock hosts entries,
/// RFC 6761/6762 special-use names).
pub const RESERVED_EXACT: &[&str] = &[
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
pub const RESERVED_SUFFIXES: &[&str] = &[".localhost", ".localdomain"];

/// A name every PC resolves locally (localhost and friends): never blocked.
pub fn is_reserved(name: &str) -> bool {
    RESERVED_EXACT.contains(&name) || RESERVED_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Lower case, no trailing dot, international names in their ASCII (punycode) form,
/// checked against the DNS name rules; `Err` says why not.
pub fn normalize(raw: &str) -> Result<String, String> {
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
}
