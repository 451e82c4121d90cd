//! Categories: named sets of domains a PC's filter can turn on. A few small ones ship
//! with kenny (`lists/*.txt`); the operator adds more from list sources (public
//! blocklists, fetched by `fetch`). Reading a list is forgiving about format (hosts
//! lines or one domain per line, comments) and strict about content: every name is
//! normalised as the agent will, and a text that is mostly not names is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kenny_proto::domains::{is_reserved, normalize};

/// The lists kenny ships: (category, what it covers, the list).
const SHIPPED: &[(&str, &str, &str)] = &[
    (
        "social",
        "Social networks and their messaging",
        include_str!("lists/social.txt"),
    ),
    (
        "games",
        "Game stores, launchers and browser games",
        include_str!("lists/games.txt"),
    ),
    (
        "gambling",
        "Betting, casino and poker sites",
        include_str!("lists/gambling.txt"),
    ),
    (
        "video",
        "Video streaming and short video",
        include_str!("lists/video.txt"),
    ),
];

/// Longest category name; names are lower-case letters, digits and `-`.
pub(crate) const CATEGORY_NAME_MAX: usize = 32;

/// Addresses a hosts-format line may start with (what blocklists point names at).
const SINK_ADDRESSES: &[&str] = &["0.0.0.0", "127.0.0.1", "::", "::1", "0", "::0"];

/// A list read from text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub domains: BTreeSet<String>,
    /// Lines with content that held no usable name.
    pub rejected: usize,
}

/// Reads a hosts-format or domain-per-line list. `Err` says why the text is not a
/// blocklist at all (then the caller keeps what it had).
pub(crate) fn parse_list(text: &str) -> Result<Parsed, String> {
    let mut domains = BTreeSet::new();
    let mut rejected = 0usize;
    let mut lines = 0usize;
    for raw in text.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        lines += 1;
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        let names: Vec<&str> = if SINK_ADDRESSES.contains(&first) {
            words.collect()
        } else if words.next().is_none() {
            vec![first]
        } else {
            Vec::new()
        };
        let mut took = false;
        for name in names {
            if let Ok(n) = normalize(name)
                && !is_reserved(&n)
            {
                domains.insert(n);
                took = true;
            }
        }
        if !took {
            rejected += 1;
        }
    }
    if domains.is_empty() {
        return Err(if lines == 0 {
            "the list is empty".to_owned()
        } else {
            format!(
                "none of its {lines} lines holds a domain name; is this a blocklist (hosts lines or one domain per line)?"
            )
        });
    }
    // A page of HTML or an error message has a stray name-like word or two; a blocklist
    // is mostly names.
    if rejected > lines / 2 {
        return Err(format!(
            "{rejected} of its {lines} lines hold no domain name; a blocklist has hosts lines or one domain per line"
        ));
    }
    Ok(Parsed { domains, rejected })
}

/// The names a domain is under, itself first: `a.b.example` → `a.b.example`,
/// `b.example`, `example`.
pub(crate) fn suffixes(domain: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(domain), |d| d.split_once('.').map(|(_, rest)| rest))
}

/// Whether `name` may name a category: lower-case letters, digits and `-`.
pub(crate) fn check_category_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= CATEGORY_NAME_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "category names are 1 to {CATEGORY_NAME_MAX} lower-case letters, digits and `-`, such as `adult` or `school-distractions`; got {name:?}"
        ))
    }
}

/// One category as the filter uses it.
#[derive(Debug, Clone)]
pub(crate) struct Category {
    pub description: String,
    pub domains: Arc<BTreeSet<String>>,
    /// Where its names come from: `kenny` for a shipped list, else the sources' URLs.
    pub origins: Vec<String>,
}

/// Every category, rebuilt whole when a source changes, with a generation that
/// says so (what the filter computed from older lists is then computed again).
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub categories: BTreeMap<String, Category>,
    pub generation: u64,
}

/// A source's last good list, as the store keeps it.
#[derive(Debug, Clone)]
pub(crate) struct SourceList {
    pub category: String,
    pub url: String,
    pub domains: Vec<String>,
}

impl Catalog {
    /// The shipped lists plus every source's last good copy, merged per category.
    pub(crate) fn build(sources: &[SourceList], generation: u64) -> Catalog {
        let mut categories: BTreeMap<String, (String, BTreeSet<String>, Vec<String>)> = BTreeMap::new();
        for (name, description, text) in SHIPPED {
            // Shipped lists are checked by a test; a broken one would be a build mistake.
            let domains = parse_list(text).map(|p| p.domains).unwrap_or_default();
            categories.insert(
                (*name).to_owned(),
                ((*description).to_owned(), domains, vec!["kenny".to_owned()]),
            );
        }
        for source in sources {
            let entry = categories
                .entry(source.category.clone())
                .or_insert_with(|| (format!("From {}", source.url), BTreeSet::new(), Vec::new()));
            entry.1.extend(source.domains.iter().cloned());
            entry.2.push(source.url.clone());
        }
        Catalog {
            categories: categories
                .into_iter()
                .map(|(name, (description, domains, origins))| {
                    (
                        name,
                        Category {
                            description,
                            domains: Arc::new(domains),
                            origins,
                        },
                    )
                })
                .collect(),
            generation,
        }
    }

    /// Every category as callers see it: name, what it covers, how many names, from where.
    pub(crate) fn shown(&self) -> Vec<serde_json::Value> {
        self.categories
            .iter()
            .map(|(name, c)| {
                serde_json::json!({"name": name, "description": c.description, "domains": c.domains.len(), "origins": c.origins})
            })
            .collect()
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.categories.contains_key(name)
    }

    /// The categories a domain falls in (itself or a name it is under), in name order.
    pub(crate) fn categories_of<'a>(&'a self, domain: &str, among: impl Iterator<Item = &'a String>) -> Vec<&'a str> {
        let mut found = Vec::new();
        for name in among {
            if let Some(c) = self.categories.get(name)
                && suffixes(domain).any(|s| c.domains.contains(s))
            {
                found.push(name.as_str());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_list_reads_cleanly() {
        for (name, _, text) in SHIPPED {
            check_category_name(name).unwrap();
            let parsed = parse_list(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(parsed.rejected, 0, "{name}");
            assert!(parsed.domains.len() >= 10, "{name}");
        }
    }

    #[test]
    fn hosts_lines_and_bare_names_are_read_and_the_rest_counted() {
        let text = "# a list\n0.0.0.0 ads.example.com\n127.0.0.1 Track.Example.NET  # tracker\n\
                    ::1 localhost\nbare.example.org\n0.0.0.0 0.0.0.0\nnot a name here\n\n";
        let parsed = parse_list(text).unwrap();
        assert_eq!(
            parsed.domains.iter().map(String::as_str).collect::<Vec<_>>(),
            ["ads.example.com", "bare.example.org", "track.example.net"]
        );
        assert_eq!(parsed.rejected, 3);
    }

    #[test]
    fn a_page_that_is_not_a_list_is_refused() {
        let html = "<html>\n<head><title>404 Not Found</title></head>\n<body>\n<h1>Not Found</h1>\nexample.com\n</body>\n</html>\n";
        assert!(parse_list(html).unwrap_err().contains("hold no domain name"));
        assert!(parse_list("").unwrap_err().contains("empty"));
        assert!(parse_list("# only\n# comments\n").unwrap_err().contains("empty"));
        assert!(
            parse_list("just words\nmore words\n")
                .unwrap_err()
                .contains("none of its 2 lines")
        );
    }

    #[test]
    fn sources_merge_into_categories_beside_the_shipped_ones() {
        let sources = vec![
            SourceList {
                category: "adult".into(),
                url: "http://127.0.0.1/a.txt".into(),
                domains: vec!["one.example".into()],
            },
            SourceList {
                category: "social".into(),
                url: "http://127.0.0.1/s.txt".into(),
                domains: vec!["extra-social.example".into()],
            },
        ];
        let catalog = Catalog::build(&sources, 7);
        assert_eq!(catalog.generation, 7);
        assert!(catalog.categories["adult"].domains.contains("one.example"));
        let social = &catalog.categories["social"];
        assert!(social.domains.contains("extra-social.example") && social.domains.contains("facebook.com"));
        assert_eq!(social.origins, ["kenny", "http://127.0.0.1/s.txt"]);
        let on = ["adult".to_owned(), "social".to_owned()];
        assert_eq!(catalog.categories_of("cdn.one.example", on.iter()), ["adult"]);
        assert!(catalog.categories_of("two.example", on.iter()).is_empty());
    }

    #[test]
    fn suffixes_walk_up_the_name() {
        assert_eq!(
            suffixes("a.b.example").collect::<Vec<_>>(),
            ["a.b.example", "b.example", "example"]
        );
    }

    #[test]
    fn category_names_are_plain() {
        for ok in ["adult", "school-distractions", "x1"] {
            check_category_name(ok).unwrap();
        }
        for bad in ["", "Adult", "-x", "a b", "a/b", &"a".repeat(33)] {
            assert!(check_category_name(bad).is_err(), "{bad}");
        }
    }
}
