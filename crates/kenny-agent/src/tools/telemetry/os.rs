//! The os section: name, version, kernel, and whether the system still gets security updates.
//!
//! On Linux the end of support comes from os-release's `SUPPORT_END` when the
//! distribution sets it (Fedora does), else from a small built-in table, else it is
//! unknown; the field `support_source` says which. On Windows ([`win`]) the registry
//! names the release and edition, and a table of Microsoft's servicing dates gives the
//! end. Status: warn within 90 days of the end, crit after it.

mod win;

use std::collections::HashMap;
use std::path::Path;

use serde_json::json;
use sysinfo::System;
use time::Date;
use time::macros::date;

use super::files::{CONFIG_CAP, etc_root, read_text};
use super::format::{parse_ymd, today, ymd};
use super::{Outcome, Status, section};

const SUPPORT_WARN_DAYS: i64 = 90;

/// When security support ends for releases current in 2026, by os-release `ID` and
/// `VERSION_ID` (the major version for RHEL-like systems). Debian: the end of Debian
/// LTS; Ubuntu: the end of standard (free) support, not Ubuntu Pro; RHEL and its
/// rebuilds: the end of maintenance support. Sources: Debian's and Ubuntu's
/// distro-info-data, the vendors' lifecycle pages. `approximate` marks dates announced
/// as a month or estimated from the usual cycle.
struct Eol {
    id: &'static str,
    version: &'static str,
    end: Date,
    approximate: bool,
}

const fn eol(id: &'static str, version: &'static str, end: Date, approximate: bool) -> Eol {
    Eol {
        id,
        version,
        end,
        approximate,
    }
}

const EOL_TABLE: &[Eol] = &[
    eol("debian", "10", date!(2024 - 06 - 30), false),
    eol("debian", "11", date!(2026 - 08 - 31), false),
    eol("debian", "12", date!(2028 - 06 - 30), false),
    eol("debian", "13", date!(2030 - 06 - 30), true),
    eol("ubuntu", "18.04", date!(2023 - 05 - 31), false),
    eol("ubuntu", "20.04", date!(2025 - 05 - 29), false),
    eol("ubuntu", "22.04", date!(2027 - 06 - 01), false),
    eol("ubuntu", "24.04", date!(2029 - 05 - 31), false),
    eol("ubuntu", "24.10", date!(2025 - 07 - 10), false),
    eol("ubuntu", "25.04", date!(2026 - 01 - 15), false),
    eol("ubuntu", "25.10", date!(2026 - 07 - 09), false),
    eol("ubuntu", "26.04", date!(2031 - 05 - 31), true),
    // Fedora: about 13 months each (four weeks after release N+2); its os-release
    // usually carries SUPPORT_END, which wins over these.
    eol("fedora", "40", date!(2025 - 05 - 13), false),
    eol("fedora", "41", date!(2025 - 12 - 15), false),
    eol("fedora", "42", date!(2026 - 05 - 13), true),
    eol("fedora", "43", date!(2026 - 12 - 09), true),
    eol("fedora", "44", date!(2027 - 05 - 19), true),
    eol("rhel", "7", date!(2024 - 06 - 30), false),
    eol("rhel", "8", date!(2029 - 05 - 31), false),
    eol("rhel", "9", date!(2032 - 05 - 31), false),
    eol("rhel", "10", date!(2035 - 05 - 31), true),
    eol("centos", "7", date!(2024 - 06 - 30), false),
    eol("centos", "8", date!(2024 - 05 - 31), false),
    eol("centos", "9", date!(2027 - 05 - 31), true),
    eol("centos", "10", date!(2030 - 01 - 01), true),
];

/// Rebuilds that follow RHEL's lifecycle for the same major version.
const RHEL_REBUILDS: &[&str] = &["rocky", "almalinux"];

/// The fields of os-release this section uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct OsRelease {
    id: Option<String>,
    name: Option<String>,
    pretty_name: Option<String>,
    version_id: Option<String>,
    codename: Option<String>,
    support_end: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SupportSource {
    OsRelease,
    Table,
    Unknown,
}

impl SupportSource {
    fn as_str(self) -> &'static str {
        match self {
            SupportSource::OsRelease => "os-release SUPPORT_END",
            SupportSource::Table => "built-in table",
            SupportSource::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Support {
    end: Option<Date>,
    source: SupportSource,
    approximate: bool,
}

pub(super) fn os_section() -> Outcome {
    let release = if cfg!(target_os = "linux") {
        read_os_release(&etc_root())
    } else {
        None
    };
    Ok(build(release, today()))
}

/// `/etc/os-release`, or `/usr/lib/os-release` which it usually links to.
fn read_os_release(etc: &Path) -> Option<OsRelease> {
    let mut candidates = vec![etc.join("os-release")];
    if etc == Path::new("/etc") {
        candidates.push("/usr/lib/os-release".into());
    }
    candidates
        .iter()
        .find_map(|path| read_text(path, CONFIG_CAP).ok())
        .map(|(text, _)| parse_os_release(&text))
}

fn build(release: Option<OsRelease>, today: Date) -> super::Section {
    let name = System::name().ok();
    let version = System::os_version().ok();
    let kernel = System::kernel_version().ok();
    let arch = System::cpu_arch();
    let mut summary = format!(
        "{} {} (kernel {}) on {arch}",
        name.as_deref().unwrap_or(std::env::consts::OS),
        version.as_deref().unwrap_or("?"),
        kernel.as_deref().unwrap_or("?"),
    );
    let support = release.as_ref().map_or(
        Support {
            end: None,
            source: SupportSource::Unknown,
            approximate: false,
        },
        support_of,
    );
    let (status, support_text) = support_verdict(support.end, today);
    if let Some(text) = support_text {
        summary = format!("{summary}; {text}");
    }
    let release = release.unwrap_or_default();
    section(
        status,
        summary,
        json!({
            "name": name,
            "version": version,
            "kernel": kernel,
            "hostname": System::host_name().ok(),
            "arch": arch,
            "distro": {
                "id": release.id,
                "name": release.name,
                "pretty_name": release.pretty_name,
                "version_id": release.version_id,
                "codename": release.codename,
            },
            "support_end": support.end.map(ymd),
            "support_end_approximate": support.approximate,
            "support_source": support.source.as_str(),
            "support_days_left": support.end.map(|end| (end - today).whole_days()),
        }),
    )
}

/// os-release is shell-style `KEY=value` lines; values may be quoted with `"` or `'`,
/// and inside double quotes `\` escapes `"`, `\`, `$` and `` ` ``.
fn parse_os_release(text: &str) -> OsRelease {
    let mut fields: HashMap<&str, String> = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let Some((key, raw)) = line.split_once('=') else {
            continue;
        };
        fields.insert(key.trim(), unquote(raw.trim()));
    }
    let mut take = |key: &str| fields.remove(key).filter(|v| !v.is_empty());
    OsRelease {
        id: take("ID").map(|id| id.to_ascii_lowercase()),
        name: take("NAME"),
        pretty_name: take("PRETTY_NAME"),
        version_id: take("VERSION_ID"),
        codename: take("VERSION_CODENAME"),
        support_end: take("SUPPORT_END"),
    }
}

fn unquote(raw: &str) -> String {
    if let Some(inner) = raw.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        return inner.to_owned();
    }
    let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return raw.to_owned();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

fn support_of(release: &OsRelease) -> Support {
    if let Some(end) = release.support_end.as_deref().and_then(parse_ymd) {
        return Support {
            end: Some(end),
            source: SupportSource::OsRelease,
            approximate: false,
        };
    }
    if let Some(row) = table_row(release) {
        return Support {
            end: Some(row.end),
            source: SupportSource::Table,
            approximate: row.approximate,
        };
    }
    Support {
        end: None,
        source: SupportSource::Unknown,
        approximate: false,
    }
}

fn table_row(release: &OsRelease) -> Option<&'static Eol> {
    let id = release.id.as_deref()?;
    let version = release.version_id.as_deref()?;
    let (id, version) = match id {
        "debian" | "fedora" => (id, version.split('.').next().unwrap_or(version)),
        // "24.04" in VERSION_ID; point releases (24.04.2) only appear in VERSION.
        "ubuntu" => (id, version),
        "rhel" | "centos" => (id, version.split('.').next().unwrap_or(version)),
        rebuild if RHEL_REBUILDS.contains(&rebuild) => ("rhel", version.split('.').next().unwrap_or(version)),
        _ => return None,
    };
    EOL_TABLE.iter().find(|row| row.id == id && row.version == version)
}

fn support_verdict(end: Option<Date>, today: Date) -> (Status, Option<String>) {
    let Some(end) = end else {
        return (Status::Ok, None);
    };
    let days_left = (end - today).whole_days();
    if days_left < 0 {
        (
            Status::Crit,
            Some(format!(
                "security support ended {}: upgrade to a supported release",
                ymd(end)
            )),
        )
    } else if days_left <= SUPPORT_WARN_DAYS {
        (
            Status::Warn,
            Some(format!("security support ends {} ({days_left} days)", ymd(end))),
        )
    } else {
        (Status::Ok, Some(format!("supported until {}", ymd(end))))
    }
}

pub(super) fn windows_query() -> Option<&'static super::windows::Query> {
    Some(&win::QUERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_12: &str = r#"PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
"#;

    const FEDORA_41: &str = r#"NAME="Fedora Linux"
VERSION="41 (Workstation Edition)"
ID=fedora
VERSION_ID=41
VERSION_CODENAME=""
PRETTY_NAME="Fedora Linux 41 (Workstation Edition)"
SUPPORT_END=2025-12-15
# a comment line
"#;

    const UBUNTU_2204: &str = "PRETTY_NAME=\"Ubuntu 22.04.5 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\n\
VERSION=\"22.04.5 LTS (Jammy Jellyfish)\"\nVERSION_CODENAME=jammy\nID=ubuntu\nID_LIKE=debian\nUBUNTU_CODENAME=jammy\n";

    const ROCKY_9: &str = "NAME=\"Rocky Linux\"\nVERSION=\"9.4 (Blue Onyx)\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.4\"\n";

    #[test]
    fn os_release_fields_are_unquoted() {
        assert_eq!(
            parse_os_release(DEBIAN_12),
            OsRelease {
                id: Some("debian".into()),
                name: Some("Debian GNU/Linux".into()),
                pretty_name: Some("Debian GNU/Linux 12 (bookworm)".into()),
                version_id: Some("12".into()),
                codename: Some("bookworm".into()),
                support_end: None,
            }
        );
        let fedora = parse_os_release(FEDORA_41);
        assert_eq!(fedora.codename, None, "empty values are absent");
        assert_eq!(fedora.support_end.as_deref(), Some("2025-12-15"));
        let odd = parse_os_release("NAME='Single Quoted'\nPRETTY_NAME=\"say \\\"hi\\\" \\\\ \\$HOME\"\nbroken line\n");
        assert_eq!(odd.name.as_deref(), Some("Single Quoted"));
        assert_eq!(odd.pretty_name.as_deref(), Some("say \"hi\" \\ $HOME"));
    }

    #[test]
    fn support_end_comes_from_os_release_then_the_table() {
        let support = |text: &str| support_of(&parse_os_release(text));
        assert_eq!(
            support(FEDORA_41),
            Support {
                end: Some(date!(2025 - 12 - 15)),
                source: SupportSource::OsRelease,
                approximate: false
            }
        );
        assert_eq!(support(DEBIAN_12).end, Some(date!(2028 - 06 - 30)));
        assert_eq!(support(DEBIAN_12).source, SupportSource::Table);
        assert_eq!(support(UBUNTU_2204).end, Some(date!(2027 - 06 - 01)));
        assert_eq!(
            support(ROCKY_9).end,
            Some(date!(2032 - 05 - 31)),
            "rebuilds follow RHEL by major version"
        );
        assert_eq!(support("ID=debian\nVERSION_ID=11\n").end, Some(date!(2026 - 08 - 31)));
        assert_eq!(
            support("ID=ubuntu\nVERSION_ID=24.04\n").end,
            Some(date!(2029 - 05 - 31))
        );
        assert_eq!(
            support("ID=ubuntu\nVERSION_ID=20.04\n").end,
            Some(date!(2025 - 05 - 29))
        );
        assert!(support("ID=debian\nVERSION_ID=13\n").approximate);
        // A bad SUPPORT_END falls through to the table rather than being trusted.
        assert_eq!(
            support("ID=debian\nVERSION_ID=12\nSUPPORT_END=soon\n").source,
            SupportSource::Table
        );
        for unknown in ["ID=arch\n", "ID=debian\n", "ID=ubuntu\nVERSION_ID=16.04\n", ""] {
            assert_eq!(support(unknown).source, SupportSource::Unknown, "{unknown:?}");
            assert_eq!(support(unknown).end, None);
        }
    }

    #[test]
    fn status_turns_warn_within_90_days_and_crit_after_the_end() {
        let end = Some(date!(2026 - 08 - 31));
        let at = |today: Date| support_verdict(end, today);
        assert_eq!(
            at(date!(2026 - 01 - 01)),
            (Status::Ok, Some("supported until 2026-08-31".into()))
        );
        assert_eq!(at(date!(2026 - 06 - 01)).0, Status::Ok, "91 days left");
        assert_eq!(at(date!(2026 - 06 - 02)).0, Status::Warn, "90 days left");
        assert_eq!(
            at(date!(2026 - 08 - 31)),
            (Status::Warn, Some("security support ends 2026-08-31 (0 days)".into()))
        );
        assert_eq!(
            at(date!(2026 - 09 - 01)),
            (
                Status::Crit,
                Some("security support ended 2026-08-31: upgrade to a supported release".into())
            )
        );
        assert_eq!(support_verdict(None, date!(2026 - 01 - 01)), (Status::Ok, None));
    }

    #[test]
    fn the_section_carries_distro_and_support_fields() {
        let section = build(Some(parse_os_release(DEBIAN_12)), date!(2026 - 11 - 30));
        assert_eq!(section["status"], "ok");
        assert_eq!(section["distro"]["codename"], "bookworm");
        assert_eq!(section["support_end"], "2028-06-30");
        assert_eq!(section["support_source"], "built-in table");
        assert_eq!(section["support_days_left"], 578);
        assert!(
            section["summary"]
                .as_str()
                .unwrap()
                .ends_with("; supported until 2028-06-30")
        );

        let old = build(
            Some(parse_os_release("ID=ubuntu\nVERSION_ID=20.04\n")),
            date!(2026 - 11 - 30),
        );
        assert_eq!(old["status"], "crit");

        let unknown = build(None, date!(2026 - 11 - 30));
        assert_eq!(unknown["status"], "ok");
        assert_eq!(unknown["support_source"], "unknown");
        assert_eq!(unknown["support_end"], serde_json::Value::Null);
    }

    #[cfg(unix)]
    #[test]
    fn collects_on_this_machine() {
        let section = os_section().unwrap();
        assert!(["ok", "warn", "crit"].contains(&section["status"].as_str().unwrap()));
        assert!(
            section["name"].is_string() && section["arch"].is_string(),
            "{section:?}"
        );
        let known = section["support_source"] != "unknown";
        assert_eq!(section["support_end"].is_string(), known, "{section:?}");
        assert_eq!(section["support_days_left"].is_i64(), known, "{section:?}");
    }

    #[test]
    fn an_etc_root_stands_in_for_etc() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("os-release"), FEDORA_41).unwrap();
        let release = read_os_release(dir.path()).unwrap();
        assert_eq!(release.id.as_deref(), Some("fedora"));
        assert!(read_os_release(&dir.path().join("missing")).is_none());
    }

    #[test]
    fn every_table_row_is_unique() {
        for (i, row) in EOL_TABLE.iter().enumerate() {
            assert!(
                EOL_TABLE[i + 1..]
                    .iter()
                    .all(|o| (o.id, o.version) != (row.id, row.version)),
                "{} {}",
                row.id,
                row.version
            );
        }
    }
}
