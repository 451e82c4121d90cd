//! The web_activity section: which web domains this PC visited in the last 24 hours, never page addresses or contents.
//!
//! Sources: every user's browser history (Chromium family `History`, Firefox
//! `places.sqlite`; see [`history`]) on both systems, and on Windows the DNS client
//! cache (`Get-DnsClientCache`), which also shows names looked up by programs other
//! than browsers. The DNS cache keeps no times: its names are stamped with the time of
//! collection. Each domain says which sources saw it, when first and last, and how many
//! visits (a DNS cache entry counts once).
//!
//! Bounded: [`history::MAX_VISITS`] visits per profile, [`HISTORY_TIME`] for all
//! profiles, [`MAX_DOMAINS`] domains listed (the most visited first). Informational:
//! always `ok`; the server decides what a domain means.

mod history;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use time::OffsetDateTime;

use self::history::{Visit, clean_domain};
use super::browser_extensions::browsers::{self, Profile, capped};
use super::command::Output;
use super::format::rfc3339_from_unix;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status};
use crate::tools::psjson;

const WINDOW_HOURS: i64 = 24;
const MAX_DOMAINS: usize = 300;
const MAX_ERRORS: usize = 20;
/// All history reads together; the whole collection has 15 s.
const HISTORY_TIME: Duration = Duration::from_secs(8);
const DNS_CACHE: &str = "dns_cache";
const BROWSER_HISTORY: &str = "browser_history";
/// DNS record types that are not names a program went to: PTR (reverse lookups).
const NOT_VISITS: &[i64] = &[12];

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&DNS_QUERY)
}

/// The DNS client cache; `Entry` is the name that was looked up (a CNAME chain gives
/// several records under one entry), `Status` 0 a positive answer.
static DNS_QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$rows = @(Get-DnsClientCache | Select-Object -First 5000 -Property Entry, Type, Status)
ConvertTo-Json -InputObject $rows -Compress -Depth 2
"#,
    limit: Duration::from_secs(8),
    parse,
};

/// Domains one source saw: domain → (first, last, hits).
type Seen = BTreeMap<String, (i64, i64, u64)>;

/// What the sources gave.
#[derive(Default)]
struct Gathered {
    by_source: Vec<(&'static str, Seen)>,
    profiles_read: usize,
    truncated: bool,
    errors: Vec<String>,
}

pub(super) async fn section() -> Outcome {
    let now = OffsetDateTime::now_utc();
    let since = now.unix_timestamp() - WINDOW_HOURS * 3600;
    // Both sources at once: together they must fit in the collection's 15 s.
    let histories = super::off_thread("web_activity", move || {
        let (profiles, errors) = browsers::profiles();
        from_histories(&profiles, errors, since, Instant::now() + HISTORY_TIME)
    });
    let dns = async {
        if cfg!(windows) {
            Some(super::windows::output(&DNS_QUERY).await.and_then(|out| dns_names(&out)))
        } else {
            None
        }
    };
    let (histories, dns) = tokio::join!(histories, dns);
    let mut gathered = histories.map_err(|e| format!("reading browser history failed: {e}"))?;
    match dns {
        Some(Ok(names)) => gathered.add_dns(names, now),
        Some(Err(why)) => gathered.errors.push(format!("DNS cache: {why}")),
        None => {}
    }
    Ok(build(gathered))
}

/// The DNS cache alone: what the registered query makes of its output, and what the
/// recordings check.
fn parse(output: &Output, now: OffsetDateTime) -> Outcome {
    let names = dns_names(output)?;
    let mut gathered = Gathered::default();
    gathered.add_dns(names, now);
    Ok(build(gathered))
}

/// The names in the DNS cache that were looked up and answered.
fn dns_names(output: &Output) -> Result<Vec<String>, String> {
    let rows = psjson::rows_of(json_of(output)?)?;
    Ok(rows
        .iter()
        .filter(|row| psjson::number(row, "Status") == Some(0))
        .filter(|row| !psjson::number(row, "Type").is_some_and(|t| NOT_VISITS.contains(&t)))
        .filter_map(|row| psjson::text(row, "Entry"))
        .filter_map(|name| clean_domain(&name))
        .filter(|name| name != "localhost" && !name.ends_with(".arpa"))
        .collect())
}

impl Gathered {
    fn add_dns(&mut self, names: Vec<String>, now: OffsetDateTime) {
        let at = now.unix_timestamp();
        let seen: Seen = names.into_iter().map(|name| (name, (at, at, 1))).collect();
        self.by_source.insert(0, (DNS_CACHE, seen));
    }
}

fn from_histories(profiles: &[Profile], errors: Vec<String>, since: i64, deadline: Instant) -> Gathered {
    let mut gathered = Gathered {
        errors,
        ..Gathered::default()
    };
    let mut seen = Seen::new();
    for profile in profiles {
        if Instant::now() > deadline {
            gathered.truncated = true;
            gathered.errors.push(format!(
                "stopped after {}s; later profiles not read",
                HISTORY_TIME.as_secs()
            ));
            break;
        }
        match history::read_profile(profile, since, deadline) {
            Ok(read) => {
                gathered.profiles_read += 1;
                gathered.truncated |= read.cut;
                for Visit { domain, at } in read.visits {
                    let entry = seen.entry(domain).or_insert((at, at, 0));
                    entry.0 = entry.0.min(at);
                    entry.1 = entry.1.max(at);
                    entry.2 += 1;
                }
            }
            Err(why) => gathered.errors.push(format!(
                "{} profile {} of {}: {why}",
                profile.browser, profile.name, profile.user
            )),
        }
    }
    if gathered.profiles_read > 0 {
        gathered.by_source.push((BROWSER_HISTORY, seen));
    }
    gathered
}

fn build(gathered: Gathered) -> Section {
    let mut merged: BTreeMap<&str, (i64, i64, u64, BTreeSet<&str>)> = BTreeMap::new();
    for (source, seen) in &gathered.by_source {
        for (domain, (first, last, hits)) in seen {
            let entry = merged
                .entry(domain.as_str())
                .or_insert((*first, *last, 0, BTreeSet::new()));
            entry.0 = entry.0.min(*first);
            entry.1 = entry.1.max(*last);
            entry.2 += hits;
            entry.3.insert(source);
        }
    }
    let count = merged.len();
    let mut ranked: Vec<_> = merged.into_iter().collect();
    ranked.sort_by(|a, b| b.1.2.cmp(&a.1.2).then(a.0.cmp(b.0)));
    let domains: Vec<Value> = ranked
        .iter()
        .take(MAX_DOMAINS)
        .map(|(domain, (first, last, hits, sources))| {
            json!({
                "domain": domain,
                "first_seen": rfc3339_from_unix(*first),
                "last_seen": rfc3339_from_unix(*last),
                "hits": hits,
                "sources": sources,
            })
        })
        .collect();
    let sources: Vec<&str> = gathered.by_source.iter().map(|(s, _)| *s).collect();
    let summary = if sources.is_empty() {
        "no browser history or DNS cache to read".to_owned()
    } else {
        match count {
            0 => format!("no domains observed ({WINDOW_HOURS}h)"),
            1 => format!("1 domain observed ({WINDOW_HOURS}h)"),
            n => format!("{n} domains observed ({WINDOW_HOURS}h)"),
        }
    };
    let errors: Vec<String> = gathered.errors.iter().take(MAX_ERRORS).map(|e| capped(e)).collect();
    super::section(
        Status::Ok,
        summary,
        json!({
            "window_hours": WINDOW_HOURS,
            "sources": sources,
            "domains": domains,
            "count": count,
            "truncated": gathered.truncated || count > MAX_DOMAINS,
            "browser_profiles_read": gathered.profiles_read,
            "errors": errors,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::browsers::{profiles_of, user_homes};
    use super::history::fixtures::{chromium_history, firefox_places};
    use super::*;
    use crate::tools::telemetry::files::put;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-06-05 00:00 UTC);

    #[test]
    fn the_query_reads_the_dns_client_cache_only() {
        let script = DNS_QUERY.script;
        assert!(script.contains("Get-DnsClientCache"));
        assert!(script.contains("Select-Object -First 5000 -Property Entry, Type, Status"));
        assert!(!script.contains("Data"), "the answers (addresses) are not needed");
    }

    #[test]
    fn histories_of_every_user_merge_with_the_dns_cache() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path();
        let now = NOW.unix_timestamp();
        put(home, "alice/.config/google-chrome/Default/Preferences", b"{}").unwrap();
        chromium_history(
            &home.join("alice/.config/google-chrome/Default/History"),
            &[
                ("https://www.example.com/", now - 3 * 3600),
                ("https://www.example.com/account?token=secret", now - 2 * 3600),
                ("https://old.example.net/", now - 30 * 3600),
            ],
        )
        .unwrap();
        put(
            home,
            "bob/.mozilla/firefox/profiles.ini",
            b"[Profile0]\nName=default-release\nIsRelative=1\nPath=k2.default-release\n",
        )
        .unwrap();
        put(home, "bob/.mozilla/firefox/k2.default-release/prefs.js", b"").unwrap();
        let _open = firefox_places(
            &home.join("bob/.mozilla/firefox/k2.default-release/places.sqlite"),
            &[
                ("https://www.example.com/x", now - 5 * 3600),
                ("https://docs.rs/time", now - 600),
            ],
        )
        .unwrap();
        put(home, "carol/.config/chromium/Default/History", b"garbage, not SQLite").unwrap();
        let (profiles, errors) = profiles_of(&user_homes(home), false);
        let mut gathered = from_histories(
            &profiles,
            errors,
            now - WINDOW_HOURS * 3600,
            Instant::now() + Duration::from_secs(30),
        );
        gathered.add_dns(vec!["www.example.com".into(), "telemetry.vendor.example".into()], NOW);
        let got = Value::Object(build(gathered));
        let text = got.to_string();
        assert!(
            !text.contains("token") && !text.contains("/account"),
            "never a URL: {text}"
        );
        assert_eq!(got["summary"], "3 domains observed (24h)");
        assert_eq!(got["sources"], json!(["dns_cache", "browser_history"]));
        assert_eq!(got["browser_profiles_read"], 2);
        assert_eq!(
            got["domains"],
            json!([
                {"domain": "www.example.com", "first_seen": "2026-06-04T19:00:00Z", "last_seen": "2026-06-05T00:00:00Z",
                 "hits": 4, "sources": ["browser_history", "dns_cache"]},
                {"domain": "docs.rs", "first_seen": "2026-06-04T23:50:00Z", "last_seen": "2026-06-04T23:50:00Z",
                 "hits": 1, "sources": ["browser_history"]},
                {"domain": "telemetry.vendor.example", "first_seen": "2026-06-05T00:00:00Z",
                 "last_seen": "2026-06-05T00:00:00Z", "hits": 1, "sources": ["dns_cache"]}
            ]),
            "{got:#}"
        );
        let errors = got["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0]
                .as_str()
                .unwrap()
                .starts_with("chromium profile Default of carol: "),
            "{errors:?}"
        );
        assert_eq!(got["truncated"], false);
    }

    #[test]
    fn nothing_to_read_is_said_plainly() {
        let got = build(Gathered::default());
        assert_eq!(got["summary"], "no browser history or DNS cache to read");
        assert_eq!(got["status"], "ok");
        assert_eq!(got["domains"], json!([]));
    }

    #[tokio::test]
    async fn the_real_collector_reads_this_pc() {
        let got = section().await.unwrap();
        assert_eq!(got["status"], "ok");
        assert_eq!(got["window_hours"], 24);
        assert!(got["domains"].is_array() && got["errors"].is_array(), "{got:?}");
    }
}
