//! The app_updates section: installed packages with a newer version in the local package index, and which of those are security updates.
//!
//! Only what the PC already downloaded is read; no collection refreshes an index or
//! contacts a repository. apt: `apt list --upgradable` (reads `/var/lib/apt/lists`); an
//! update is a security update when its candidate comes from a `-security` suite. dnf:
//! `dnf -C check-update` (cache only) for the versions, `rpm -qa` for what is installed
//! and `dnf -C updateinfo list --security` for the advisories. `index_age_hours` says how
//! old the local index is.
//!
//! Windows has no such local index: winget and the Store find upgrades by refreshing
//! their sources from the internet, so the section is not applicable there and says so.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::command::{self, Output};
use super::files::root_from_env;
use super::windows::Query;
use super::{Outcome, Section, Status, not_applicable};

/// Most updates listed; `count` has them all.
const MAX_LISTED: usize = 50;
/// Package names and versions from the PC are cut to this many characters.
const MAX_TEXT: usize = 100;
/// Each package tool run; the three dnf runs go at once.
const TOOL_LIMIT: Duration = Duration::from_secs(10);
/// An index older than this is called out in the summary: its list of updates is stale.
const STALE_INDEX_HOURS: u64 = 7 * 24;

const WINDOWS_REASON: &str = "winget and the Microsoft Store find app updates by refreshing their sources from the internet, which a health collection does not do; use package_list to check for updates";

/// No PowerShell query: see the module documentation.
pub(super) fn windows_query() -> Option<&'static Query> {
    None
}

pub(super) async fn section() -> Outcome {
    if cfg!(windows) {
        return Ok(not_applicable(WINDOWS_REASON));
    }
    let var = root_from_env("KENNY_VAR_ROOT", "/var");
    let has = |name: &str| crate::tools::packages::which(name).is_some();
    if has("dpkg-query") && has("apt") {
        apt_section(&var).await
    } else if has("rpm") && has("dnf") {
        dnf_section(&var).await
    } else {
        Ok(not_applicable(
            "no supported package manager: looked for apt (dpkg-query and apt) and dnf (rpm and dnf) on the agent's PATH",
        ))
    }
}

/// Reads `/var/lib/apt/lists` as last refreshed; needs no lock and no root.
const APT_ARGS: &[&str] = &["list", "--upgradable"];
/// `-C`: from the metadata cache only, never a repository.
const DNF_CHECK_ARGS: &[&str] = &["-C", "-q", "check-update"];
const DNF_SECURITY_ARGS: &[&str] = &["-C", "-q", "updateinfo", "list", "--security"];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Update {
    name: String,
    installed: Option<String>,
    available: String,
    security: bool,
}

fn clip(text: &str) -> String {
    super::format::clip(text, MAX_TEXT)
}

async fn apt_section(var: &Path) -> Outcome {
    let output = command::run("apt", APT_ARGS, TOOL_LIMIT)
        .await
        .map_err(|e| e.describe("apt"))?;
    if !output.success || output.truncated {
        return Err(format!("`apt list --upgradable` failed: {}", apt_error(&output)));
    }
    let age = index_age_hours(&apt_index_files(var), SystemTime::now());
    Ok(build("apt", parse_apt(&output.stdout), age))
}

/// apt always warns on stderr that its CLI is not stable; the real error is after it.
fn apt_error(output: &Output) -> String {
    output
        .stderr
        .lines()
        .chain(output.stdout.lines())
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.contains("stable CLI interface"))
        .map_or_else(|| "no message".to_owned(), clip)
}

/// `name/suite[,suite..] version arch [upgradable from: installed]`; the suites are those
/// offering the candidate, so a `-security` suite among them makes it a security update
/// (`bookworm-security`, `oldstable-security`, `jammy-security`, `jammy-apps-security`).
fn parse_apt(text: &str) -> Vec<Update> {
    text.lines()
        .filter_map(|line| {
            let (head, installed) = line.split_once("[upgradable from:")?;
            let mut tokens = head.split_whitespace();
            let (name, suites) = tokens.next()?.split_once('/')?;
            let available = tokens.next()?;
            Some(Update {
                name: clip(name),
                installed: Some(clip(installed.trim().trim_end_matches(']'))),
                available: clip(available),
                security: suites.split(',').any(|suite| suite.ends_with("-security")),
            })
        })
        .collect()
}

/// The Release files apt keeps for each source, and the stamp its daily timer writes
/// after a successful `apt-get update`.
fn apt_index_files(var: &Path) -> Vec<std::path::PathBuf> {
    let lists = var.join("lib/apt/lists");
    let mut files: Vec<_> = fs::read_dir(&lists)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .take(1000)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with("Release"))
                })
                .collect()
        })
        .unwrap_or_default();
    files.push(var.join("lib/apt/periodic/update-success-stamp"));
    files
}

async fn dnf_section(var: &Path) -> Outcome {
    let (updates, installed, advisories) = tokio::join!(
        command::run("dnf", DNF_CHECK_ARGS, TOOL_LIMIT),
        command::run("rpm", &["-qa", "--qf", RPM_FORMAT], TOOL_LIMIT),
        command::run("dnf", DNF_SECURITY_ARGS, TOOL_LIMIT),
    );
    let updates = updates.map_err(|e| e.describe("dnf"))?;
    let age = index_age_hours(&dnf_index_files(var), SystemTime::now());
    // check-update exits 100 when there are updates, 0 when there are none.
    let code_ok = updates.success || updates.stdout.lines().any(|l| !l.trim().is_empty());
    if !code_ok || updates.truncated {
        let message = command::first_line(&updates);
        if message.to_ascii_lowercase().contains("no cache") || message.to_ascii_lowercase().contains("cache-only") {
            return Ok(no_dnf_cache(&message));
        }
        return Err(format!("`dnf -C check-update` failed: {}", clip(&message)));
    }
    let installed = match installed {
        Ok(out) if out.success => parse_rpm_installed(&out.stdout),
        _ => HashMap::new(),
    };
    // Without advisories (a repository that publishes none, or a failed run) nothing is
    // marked as security; the field `security_known` says so.
    let security = match advisories {
        Ok(out) if out.success => Some(parse_security_advisories(&out.stdout)),
        _ => None,
    };
    let mut section = build("dnf", parse_dnf(&updates.stdout, &installed, security.as_ref()), age);
    section.insert("security_known".into(), security.is_some().into());
    Ok(section)
}

/// `name.arch<TAB>[epoch:]version-release`, the way dnf prints versions.
const RPM_FORMAT: &str = "%{NAME}.%{ARCH}\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\n";

fn parse_rpm_installed(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(name_arch, version)| (name_arch.trim().to_owned(), version.trim().to_owned()))
        .collect()
}

fn no_dnf_cache(message: &str) -> Section {
    super::section(
        Status::Ok,
        "dnf has no local package index yet (it has never refreshed its cache): upgradable packages unknown".to_owned(),
        json!({
            "manager": "dnf",
            "updates": [],
            "count": null,
            "security_count": null,
            "truncated": false,
            "index_age_hours": null,
            "reason": clip(message),
        }),
    )
}

/// `dnf check-update -q`: `name.arch  version  repo`; a long name may sit alone on its
/// line with the rest on the next, and an "Obsoleting Packages" part may follow.
fn parse_dnf(text: &str, installed: &HashMap<String, String>, security: Option<&HashSet<String>>) -> Vec<Update> {
    let mut found = Vec::new();
    let mut carried: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("Obsoleting") || trimmed.starts_with("Security:") {
            break;
        }
        let mut tokens: Vec<String> = trimmed.split_whitespace().map(str::to_owned).collect();
        if let Some(name) = carried.take() {
            tokens.insert(0, name);
        }
        match tokens.as_slice() {
            [name] if name.contains('.') => carried = Some(name.clone()),
            [name_arch, version, _repo, ..] => {
                let Some((name, _arch)) = name_arch.rsplit_once('.') else {
                    continue;
                };
                found.push(Update {
                    name: clip(name),
                    installed: installed.get(name_arch).map(|v| clip(v)),
                    available: clip(version),
                    security: security.is_some_and(|s| s.contains(name_arch)),
                });
            }
            _ => {}
        }
    }
    found
}

const ARCHES: &[&str] = &[
    "x86_64", "noarch", "aarch64", "i686", "i386", "ppc64le", "s390x", "armv7hl", "riscv64",
];

/// `name.arch` of every package a security advisory updates. dnf 4 prints
/// `FEDORA-2026-0a1b2c3d4e Important/Sec. openssl-libs-1:3.2.2-4.fc41.x86_64`, dnf 5
/// `FEDORA-2026-0a1b2c3d4e security Important openssl-libs-1:3.2.2-4.fc41.x86_64 2026-05-30 01:02:03`.
fn parse_security_advisories(text: &str) -> HashSet<String> {
    text.lines()
        .filter_map(|line| {
            let tokens: Vec<&str> = line.split_whitespace().collect();
            let security = tokens
                .iter()
                .any(|t| t.eq_ignore_ascii_case("security") || t.ends_with("/Sec."));
            if !security {
                return None;
            }
            tokens.iter().skip(1).find_map(|t| name_arch_of_nevra(t))
        })
        .collect()
}

/// `openssl-libs-1:3.2.2-4.fc41.x86_64` → `openssl-libs.x86_64`.
fn name_arch_of_nevra(nevra: &str) -> Option<String> {
    let (rest, arch) = nevra.rsplit_once('.')?;
    if !ARCHES.contains(&arch) {
        return None;
    }
    let mut parts = rest.rsplitn(3, '-');
    let (_release, _version, name) = (parts.next()?, parts.next()?, parts.next()?);
    (!name.is_empty()).then(|| format!("{name}.{arch}"))
}

/// dnf 4 and dnf 5 keep each repository's metadata under its own cache directory.
fn dnf_index_files(var: &Path) -> Vec<std::path::PathBuf> {
    ["cache/dnf", "cache/libdnf5"]
        .iter()
        .flat_map(|dir| {
            fs::read_dir(var.join(dir))
                .map(|entries| entries.filter_map(Result::ok).take(200).map(|e| e.path()).collect())
                .unwrap_or_else(|_| Vec::new())
        })
        .map(|repo| repo.join("repodata/repomd.xml"))
        .collect()
}

/// Hours since the newest of `files` changed; `None` when none exists.
fn index_age_hours(files: &[std::path::PathBuf], now: SystemTime) -> Option<u64> {
    let newest = files
        .iter()
        .filter_map(|f| fs::metadata(f).and_then(|m| m.modified()).ok())
        .max()?;
    Some(now.duration_since(newest).map_or(0, |age| age.as_secs() / 3600))
}

fn build(manager: &str, mut updates: Vec<Update>, index_age_hours: Option<u64>) -> Section {
    // Security updates first, so the capped list keeps the ones that matter.
    updates.sort_by(|a, b| b.security.cmp(&a.security).then_with(|| a.name.cmp(&b.name)));
    let count = updates.len();
    let security_count = updates.iter().filter(|u| u.security).count();
    let listed: Vec<Value> = updates
        .iter()
        .take(MAX_LISTED)
        .map(|u| json!({"name": u.name, "installed": u.installed, "available": u.available, "security": u.security}))
        .collect();
    let mut summary = match (count, security_count) {
        (0, _) => format!("no upgradable packages in the local {manager} index"),
        (1, 1) => format!("1 upgradable package, a security update ({manager})"),
        (n, 0) => format!("{} ({manager}), none of them security updates", plural(n)),
        (n, s) => format!("{} ({manager}), {s} of them security updates", plural(n)),
    };
    match index_age_hours {
        Some(hours) if hours > STALE_INDEX_HOURS => summary.push_str(&format!(
            "; the package index is {} days old, so newer updates may be missing",
            hours / 24
        )),
        None => summary.push_str("; the age of the package index is unknown"),
        Some(_) => {}
    }
    let status = if security_count > 0 { Status::Warn } else { Status::Ok };
    super::section(
        status,
        summary,
        json!({
            "manager": manager,
            "updates": listed,
            "count": count,
            "security_count": security_count,
            "truncated": count > MAX_LISTED,
            "index_age_hours": index_age_hours,
        }),
    )
}

fn plural(n: usize) -> String {
    if n == 1 {
        "1 upgradable package".to_owned()
    } else {
        format!("{n} upgradable packages")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APT_OUTPUT: &str = "Listing...\n\
appstream/oldstable 0.16.1-2+b1 amd64 [upgradable from: 0.16.1-2]\n\
apt/oldstable-security 2.6.2 amd64 [upgradable from: 2.6.1]\n\
krb5-locales/oldstable,oldstable-security 1.20.1-2+deb12u5 all [upgradable from: 1.20.1-2+deb12u3]\n\
libcap2/oldstable 1:2.66-4+deb12u3+b1 amd64 [upgradable from: 1:2.66-4+deb12u2+b2]\n\
openssl/jammy-updates,jammy-security 3.0.2-0ubuntu1.19 amd64 [upgradable from: 3.0.2-0ubuntu1.18]\n\
firefox/jammy-updates 1:1snap1-0ubuntu2 amd64 [upgradable from: 1:1snap1-0ubuntu1]\n";

    #[test]
    fn apt_rows_and_their_security_pocket() {
        let updates = parse_apt(APT_OUTPUT);
        assert_eq!(updates.len(), 6, "the Listing banner is not a package");
        assert_eq!(
            updates[2],
            Update {
                name: "krb5-locales".into(),
                installed: Some("1.20.1-2+deb12u3".into()),
                available: "1.20.1-2+deb12u5".into(),
                security: true,
            }
        );
        let security: Vec<&str> = updates.iter().filter(|u| u.security).map(|u| u.name.as_str()).collect();
        assert_eq!(security, ["apt", "krb5-locales", "openssl"]);
        assert_eq!(updates[3].installed.as_deref(), Some("1:2.66-4+deb12u2+b2"));
    }

    #[test]
    fn the_section_lists_security_updates_first_and_warns_on_them() {
        let section = build("apt", parse_apt(APT_OUTPUT), Some(5));
        assert_eq!(section["status"], "warn");
        assert_eq!(
            section["summary"],
            "6 upgradable packages (apt), 3 of them security updates"
        );
        assert_eq!(section["count"], 6);
        assert_eq!(section["security_count"], 3);
        assert_eq!(section["updates"][0]["name"], "apt");
        assert_eq!(section["updates"][3]["security"], false);
        assert_eq!(section["truncated"], false);
        assert_eq!(section["index_age_hours"], 5);

        let none = build("apt", Vec::new(), Some(400));
        assert_eq!(none["status"], "ok");
        assert_eq!(
            none["summary"],
            "no upgradable packages in the local apt index; the package index is 16 days old, so newer updates may be missing"
        );
        let plain = build("dnf", parse_apt("a/stable 2 all [upgradable from: 1]\n"), None);
        assert_eq!(plain["status"], "ok");
        assert!(
            plain["summary"]
                .as_str()
                .unwrap()
                .ends_with("age of the package index is unknown")
        );
    }

    #[test]
    fn long_lists_are_capped_and_counted() {
        let text: String = (0..120)
            .map(|i| format!("pkg{i:03}/stable 2 amd64 [upgradable from: 1]\n"))
            .collect();
        let section = build("apt", parse_apt(&text), Some(1));
        assert_eq!(section["updates"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(
            (section["count"].as_u64(), section["truncated"].as_bool()),
            (Some(120), Some(true))
        );
    }

    #[test]
    fn apt_errors_skip_its_cli_warning() {
        let output = Output::printed(
            "",
            "\nWARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n\nE: Could not open file /var/lib/apt/lists/x_Packages - open (13: Permission denied)\n",
            false,
        );
        assert_eq!(
            apt_error(&output),
            "E: Could not open file /var/lib/apt/lists/x_Packages - open (13: Permission denied)"
        );
    }

    const DNF_CHECK_UPDATE: &str = "\n\
openssl-libs.x86_64                       1:3.2.2-4.fc41                  updates\n\
kernel-core.x86_64                        6.14.9-200.fc41                 updates\n\
python3-a-very-long-package-name-that-wraps.noarch\n\
                                          2.1-1.fc41                      updates\n\
Obsoleting Packages\n\
grub2-tools.x86_64                        1:2.12-10.fc41                  updates\n";

    const DNF4_ADVISORIES: &str = "FEDORA-2026-0a1b2c3d4e Important/Sec. openssl-libs-1:3.2.2-4.fc41.x86_64\n\
FEDORA-2026-1111111111 bugfix         kernel-core-6.14.9-200.fc41.x86_64\n";

    const DNF5_ADVISORIES: &str = "Name                  Type     Severity  Package                              Issued\n\
FEDORA-2026-0a1b2c3d4e security Important openssl-libs-1:3.2.2-4.fc41.x86_64 2026-05-30 01:02:03\n";

    #[test]
    fn dnf_rows_join_installed_versions_and_advisories() {
        let installed =
            parse_rpm_installed("openssl-libs.x86_64\t1:3.2.2-3.fc41\nkernel-core.x86_64\t6.14.8-200.fc41\n");
        for advisories in [DNF4_ADVISORIES, DNF5_ADVISORIES] {
            let security = parse_security_advisories(advisories);
            assert_eq!(
                security,
                HashSet::from(["openssl-libs.x86_64".to_owned()]),
                "{advisories}"
            );
            let updates = parse_dnf(DNF_CHECK_UPDATE, &installed, Some(&security));
            assert_eq!(updates.len(), 3, "obsoletes are not updates");
            assert_eq!(
                updates[0],
                Update {
                    name: "openssl-libs".into(),
                    installed: Some("1:3.2.2-3.fc41".into()),
                    available: "1:3.2.2-4.fc41".into(),
                    security: true,
                }
            );
            assert!(!updates[1].security);
            assert_eq!(updates[2].name, "python3-a-very-long-package-name-that-wraps");
            assert_eq!(updates[2].installed, None);
        }
        assert!(!parse_dnf(DNF_CHECK_UPDATE, &installed, None)[0].security);
    }

    #[test]
    fn nevras_give_name_and_arch() {
        assert_eq!(
            name_arch_of_nevra("openssl-libs-1:3.2.2-4.fc41.x86_64").as_deref(),
            Some("openssl-libs.x86_64")
        );
        assert_eq!(
            name_arch_of_nevra("tzdata-2026a-1.fc41.noarch").as_deref(),
            Some("tzdata.noarch")
        );
        assert_eq!(name_arch_of_nevra("Important/Sec."), None);
        assert_eq!(name_arch_of_nevra("2026-05-30"), None);
    }

    #[test]
    fn index_age_is_the_newest_release_file() {
        let var = tempfile::tempdir().unwrap();
        let lists = var.path().join("lib/apt/lists");
        fs::create_dir_all(&lists).unwrap();
        fs::write(lists.join("deb.debian.org_debian_dists_bookworm_InRelease"), "x").unwrap();
        fs::write(
            lists.join("deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages"),
            "x",
        )
        .unwrap();
        let files = apt_index_files(var.path());
        assert_eq!(files.len(), 2, "the InRelease file and the stamp: {files:?}");
        let later = SystemTime::now() + Duration::from_secs(5 * 3600 + 60);
        assert_eq!(index_age_hours(&files, later), Some(5));
        assert_eq!(index_age_hours(&apt_index_files(&var.path().join("none")), later), None);

        let repo = var.path().join("cache/libdnf5/fedora-1234abcd/repodata");
        fs::create_dir_all(&repo).unwrap();
        fs::write(repo.join("repomd.xml"), "<repomd/>").unwrap();
        assert_eq!(index_age_hours(&dnf_index_files(var.path()), later), Some(5));
    }

    #[test]
    fn the_commands_read_only_the_local_index() {
        assert!(
            windows_query().is_none(),
            "winget would refresh its source from the internet"
        );
        assert_eq!(APT_ARGS, ["list", "--upgradable"]);
        for args in [DNF_CHECK_ARGS, DNF_SECURITY_ARGS] {
            assert_eq!(args[0], "-C", "dnf must stay on its cache: {args:?}");
            assert!(!args.contains(&"--refresh") && !args.contains(&"makecache"), "{args:?}");
        }
        assert_eq!(
            RPM_FORMAT,
            "%{NAME}.%{ARCH}\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\n"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn collects_on_this_machine() {
        let section = section().await.unwrap();
        let status = section["status"].as_str().unwrap();
        assert!(["ok", "warn"].contains(&status), "{section:?}");
        assert!(!section["summary"].as_str().unwrap().is_empty());
        if section.get("applicable").is_none() {
            assert!(section["manager"].is_string(), "{section:?}");
            assert!(section["count"].is_u64() || section["count"].is_null(), "{section:?}");
            assert_eq!(
                section["security_count"].as_u64().is_some_and(|n| n > 0),
                status == "warn",
                "{section:?}"
            );
        }
    }
}
