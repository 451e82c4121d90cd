//! The installed_software section: the package database, dpkg's (read directly) or rpm's.
//!
//! dpkg: `/var/lib/dpkg/status` is parsed in-process (fast, no subprocess); the install
//! date is the day dpkg last wrote the package's file list, i.e. its last install or
//! upgrade. rpm: `rpm -qa` with a query format, under a timeout. The list is sorted by
//! name and cut at `MAX_LISTED` with `truncated`; `count` is always the full number.
//!
//! On Windows the Uninstall registry keys are read instead: see [`win`].

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::command::{self, RunError, first_line};
use super::files::read_text;
use super::format::{clip, rfc3339};
use super::{Outcome, Status, not_collected_here, section};

mod win;

const DPKG_STATUS: &str = "/var/lib/dpkg/status";
const DPKG_INFO: &str = "/var/lib/dpkg/info";
/// A desktop with everything installed has a ~10 MB status file.
const DPKG_STATUS_CAP: u64 = 64 * 1024 * 1024;
const RPM_TIMEOUT: Duration = Duration::from_secs(10);
const RPM_QUERY: &str = "%{NAME}\\t%{VERSION}-%{RELEASE}\\t%{VENDOR}\\t%{INSTALLTIME}\\n";
const MAX_LISTED: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
struct App {
    name: String,
    version: String,
    publisher: Option<String>,
    install_date: Option<String>,
    /// dpkg's architecture qualifier, to find the package's file list.
    arch: Option<String>,
}

pub(super) async fn installed_software_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    if Path::new(DPKG_STATUS).exists() {
        return super::off_thread("installed_software", dpkg_section)
            .await
            .map_err(|e| format!("reading the dpkg database failed: {e}"))?;
    }
    let output = match command::run("rpm", &["-qa", "--queryformat", RPM_QUERY], RPM_TIMEOUT).await {
        Ok(output) => output,
        Err(RunError::Missing) => {
            return Ok(section(
                Status::Ok,
                "no package database found (looked for dpkg and rpm)".to_owned(),
                json!({ "apps": [], "count": 0, "truncated": false, "source": null }),
            ));
        }
        Err(e) => return Err(e.describe("rpm")),
    };
    if !output.success {
        return Err(format!("rpm -qa failed: {}", first_line(&output)));
    }
    Ok(build(parse_rpm(&output.stdout), "rpm", output.truncated))
}

fn dpkg_section() -> Outcome {
    let (text, cut) = read_text(Path::new(DPKG_STATUS), DPKG_STATUS_CAP).map_err(|e| format!("{DPKG_STATUS}: {e}"))?;
    let mut apps = parse_dpkg_status(&text);
    apps.sort_by(|a, b| a.name.cmp(&b.name));
    // Dates only for the listed ones: one stat each.
    for app in apps.iter_mut().take(MAX_LISTED) {
        app.install_date = dpkg_install_date(Path::new(DPKG_INFO), app);
    }
    Ok(build(apps, "dpkg", cut))
}

/// Installed packages from dpkg's status file: paragraphs of `Field: value` lines
/// separated by blank lines; continuation lines start with a space.
fn parse_dpkg_status(text: &str) -> Vec<App> {
    let mut apps = Vec::new();
    for paragraph in text.split("\n\n") {
        let mut name = None;
        let mut version = None;
        let mut status = None;
        let mut maintainer = None;
        let mut arch = None;
        for line in paragraph.lines() {
            if line.starts_with([' ', '\t']) {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match key {
                "Package" => name = Some(value),
                "Version" => version = Some(value),
                "Status" => status = Some(value),
                "Maintainer" => maintainer = Some(value),
                "Architecture" => arch = Some(value),
                _ => {}
            }
        }
        // "install ok installed"; half-installed, config-files (removed) and the like
        // are not installed software.
        let installed = status.is_some_and(|s| s.split_whitespace().nth(2) == Some("installed"));
        if let (Some(name), true) = (name, installed) {
            apps.push(App {
                name: name.to_owned(),
                version: version.unwrap_or_default().to_owned(),
                publisher: maintainer.map(person_name).filter(|p| !p.is_empty()),
                install_date: None,
                arch: arch.map(str::to_owned),
            });
        }
    }
    apps
}

/// "Debian Bash Maintainers <pkg-bash-maint@...>" → "Debian Bash Maintainers".
fn person_name(maintainer: &str) -> String {
    maintainer.split('<').next().unwrap_or(maintainer).trim().to_owned()
}

/// dpkg keeps `<name>.list`, or `<name>:<arch>.list` for multi-arch packages.
fn dpkg_install_date(info: &Path, app: &App) -> Option<String> {
    let mut candidates = vec![info.join(format!("{}.list", app.name))];
    if let Some(arch) = &app.arch {
        candidates.push(info.join(format!("{}:{arch}.list", app.name)));
    }
    candidates
        .iter()
        .find_map(|p| p.metadata().and_then(|m| m.modified()).ok())
        .and_then(date_of)
}

fn date_of(at: SystemTime) -> Option<String> {
    rfc3339(at).map(|stamp| stamp[..10].to_owned())
}

/// Lines of `NAME\tVERSION-RELEASE\tVENDOR\tINSTALLTIME` from our query format.
/// `gpg-pubkey` entries are imported signing keys, not software.
fn parse_rpm(text: &str) -> Vec<App> {
    let mut apps: Vec<App> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let name = fields.next()?.trim();
            let version = fields.next()?.trim();
            let vendor = fields.next().map(str::trim).filter(|v| !v.is_empty() && *v != "(none)");
            let installed: Option<i64> = fields.next().and_then(|t| t.trim().parse().ok());
            if name.is_empty() || name == "gpg-pubkey" {
                return None;
            }
            Some(App {
                name: name.to_owned(),
                version: version.to_owned(),
                publisher: vendor.map(str::to_owned),
                install_date: installed
                    .and_then(super::format::rfc3339_from_unix)
                    .map(|stamp| stamp[..10].to_owned()),
                arch: None,
            })
        })
        .collect();
    apps.sort_by(|a, b| a.name.cmp(&b.name));
    apps
}

fn build(apps: Vec<App>, source: &str, cut: bool) -> super::Section {
    let count = apps.len();
    let listed: Vec<Value> = apps
        .into_iter()
        .take(MAX_LISTED)
        .map(|a| {
            json!({
                "name": clip(&a.name, 200),
                "version": clip(&a.version, 100),
                "publisher": a.publisher.as_deref().map(|p| clip(p, 200)),
                "install_date": a.install_date,
            })
        })
        .collect();
    let more = if cut { " (database read in part)" } else { "" };
    section(
        Status::Ok,
        format!("{count} packages installed ({source}){more}"),
        json!({
            "apps": listed,
            "count": count,
            "truncated": cut || count > MAX_LISTED,
            "source": source,
        }),
    )
}

pub(super) fn windows_query() -> Option<&'static super::windows::Query> {
    Some(&win::QUERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Excerpt of a Debian 12 /var/lib/dpkg/status.
    const DPKG_STATUS_TEXT: &str = "\
Package: bash
Essential: yes
Status: install ok installed
Priority: required
Section: shells
Installed-Size: 7163
Maintainer: Matthias Klose <doko@debian.org>
Architecture: amd64
Multi-Arch: foreign
Version: 5.2.15-2+b7
Replaces: bash-completion (<< 20060301-0), bash-doc (<= 2.05-1)
Depends: base-files (>= 2.1.12), debianutils (>= 5.6-0.1)
Pre-Depends: libc6 (>= 2.36), libtinfo6 (>= 6)
Recommends: bash-completion (>= 20060301-0)
Conffiles:
 /etc/bash.bashrc 89269e1298235f1b12b4c16e4065ad0d
 /etc/skel/.bashrc 0d2ec2ffb9ea4d3b4dc6e5e8dd5a6f9a
Description: GNU Bourne Again SHell
 Bash is an sh-compatible command language interpreter.
 .
 Package: not-a-field (a continuation line)

Package: libc6
Status: install ok installed
Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>
Architecture: amd64
Multi-Arch: same
Version: 2.36-9+deb12u9
Description: GNU C Library: Shared libraries

Package: oldthing
Status: deinstall ok config-files
Architecture: all
Version: 1.0

Package: brokenthing
Status: install reinstreq half-installed
Version: 0.1

Package: firefox-esr
Status: install ok installed
Maintainer: Maintainers of Mozilla-related packages <team+pkg-mozilla@tracker.debian.org>
Architecture: amd64
Version: 128.5.0esr-1~deb12u1
";

    #[test]
    fn only_installed_dpkg_packages_are_listed() {
        let apps = parse_dpkg_status(DPKG_STATUS_TEXT);
        let names: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["bash", "libc6", "firefox-esr"]);
        assert_eq!(
            apps[0],
            App {
                name: "bash".into(),
                version: "5.2.15-2+b7".into(),
                publisher: Some("Matthias Klose".into()),
                install_date: None,
                arch: Some("amd64".into()),
            }
        );
        assert_eq!(
            apps[2].publisher.as_deref(),
            Some("Maintainers of Mozilla-related packages")
        );
        assert!(parse_dpkg_status("").is_empty());
    }

    #[test]
    fn install_dates_come_from_dpkg_file_lists() {
        let info = tempfile::tempdir().unwrap();
        std::fs::write(info.path().join("bash.list"), "/bin/bash\n").unwrap();
        std::fs::write(info.path().join("libc6:amd64.list"), "/lib\n").unwrap();
        let apps = parse_dpkg_status(DPKG_STATUS_TEXT);
        let today = date_of(SystemTime::now()).unwrap();
        assert_eq!(
            dpkg_install_date(info.path(), &apps[0]).as_deref(),
            Some(today.as_str())
        );
        assert_eq!(
            dpkg_install_date(info.path(), &apps[1]).as_deref(),
            Some(today.as_str())
        );
        assert_eq!(dpkg_install_date(info.path(), &apps[2]), None);
        assert_eq!(date_of(std::time::UNIX_EPOCH).as_deref(), Some("1970-01-01"));
    }

    #[test]
    fn rpm_query_output_is_parsed() {
        let text = "bash\t5.1.8-9.el9\tRocky Enterprise Software Foundation\t1717171717\n\
gpg-pubkey\t350d275d-6279464b\t(none)\t1717000000\n\
custom-tool\t1.2-1\t(none)\tnot-a-time\n\
\n";
        let apps = parse_rpm(text);
        assert_eq!(
            apps,
            [
                App {
                    name: "bash".into(),
                    version: "5.1.8-9.el9".into(),
                    publisher: Some("Rocky Enterprise Software Foundation".into()),
                    install_date: Some("2024-05-31".into()),
                    arch: None,
                },
                App {
                    name: "custom-tool".into(),
                    version: "1.2-1".into(),
                    publisher: None,
                    install_date: None,
                    arch: None,
                },
            ]
        );
    }

    #[test]
    fn the_list_is_bounded_and_says_so() {
        let apps: Vec<App> = (0..250)
            .map(|i| App {
                name: format!("pkg{i:03}"),
                version: "1".into(),
                publisher: None,
                install_date: None,
                arch: None,
            })
            .collect();
        let section = build(apps, "dpkg", false);
        assert_eq!(section["count"], 250);
        assert_eq!(section["apps"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(section["truncated"], true);
        assert_eq!(section["summary"], "250 packages installed (dpkg)");
        assert_eq!(
            section["apps"][0],
            json!({"name": "pkg000", "version": "1", "publisher": null, "install_date": null})
        );
        let small = build(vec![], "rpm", false);
        assert_eq!(small["truncated"], false);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn reads_this_machine() {
        let section = installed_software_section().await.unwrap();
        if Path::new(DPKG_STATUS).exists() {
            assert_eq!(section["source"], "dpkg");
            assert!(section["count"].as_u64().unwrap() > 10, "{}", section["summary"]);
            let bash = section["apps"].as_array().unwrap().iter().find(|a| a["name"] == "bash");
            let bash = bash.expect("bash is installed");
            assert!(bash["install_date"].is_string(), "{bash}");
        }
    }
}
