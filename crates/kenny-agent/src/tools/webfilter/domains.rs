//! Which names may go into the hosts file: real, fully qualified domain names only.
//! Names the PC itself relies on (localhost and friends) and the kenny server this
//! agent talks to are refused, so a filter can never cut the PC off from itself or
//! from kenny.

use kenny_proto::domains::{is_reserved, normalize};
use std::collections::BTreeSet;

use crate::tools::ToolError;

/// How many refused names one error message lists before summarising.
const LISTED_REFUSALS: usize = 50;

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
    if is_reserved(&name) {
        return Err("a reserved local name this PC relies on".to_owned());
    }
    if protected.contains(&name) {
        return Err("the kenny server this agent connects to; blocking it would cut the PC off from kenny".to_owned());
    }
    Ok(name)
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
