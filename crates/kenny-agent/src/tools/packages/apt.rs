//! Debian and derivatives: dpkg-query for what is installed, apt-get for changes.

use std::collections::HashMap;

use super::{
    CHANGE_LIMIT, Change, Keep, LIST_LIMIT, Listing, Package, QUERY_LIMIT, Ran, UPDATE_LIMIT, exit_text, message_tail,
    output_of, program, run,
};
use crate::tools::ToolError;

/// No prompts (debconf, changelogs, needrestart) and untranslated messages to parse.
const ENV: &[(&str, &str)] = &[
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("APT_LISTCHANGES_FRONTEND", "none"),
    ("NEEDRESTART_MODE", "l"),
    ("LC_ALL", "C"),
];

const LIST_FORMAT: &str = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\t${binary:Summary}\\n";
const STATUS_FORMAT: &str = "${db:Status-Abbrev}\\t${Version}\\n";
/// How long apt waits for another apt or dpkg to let go of its lock before failing.
const LOCK_WAIT_S: &str = "120";

/// apt reads a name that matches no package as a regular expression (`python3.1`
/// would install every python3.1x package); names must mean exactly one package.
const EXACT_NAMES: &str = "APT::Cmd::Pattern-Only=true";

/// Options for every changing apt-get run: exact names only, yes to everything, wait for
/// the dpkg lock, and keep locally changed configuration files without asking.
fn change_options() -> Vec<String> {
    [
        "-o",
        EXACT_NAMES,
        "-y",
        "-q",
        "-o",
        &format!("DPkg::Lock::Timeout={LOCK_WAIT_S}"),
        "-o",
        "Dpkg::Options::=--force-confdef",
        "-o",
        "Dpkg::Options::=--force-confold",
    ]
    .map(String::from)
    .into()
}

pub(super) fn install_args(name: &str) -> Vec<String> {
    let mut args = vec!["install".to_owned()];
    args.extend(change_options());
    args.extend(["--no-install-recommends".to_owned(), "--".to_owned(), name.to_owned()]);
    args
}

pub(super) fn remove_args(name: &str) -> Vec<String> {
    let mut args = vec!["remove".to_owned()];
    args.extend(change_options());
    args.extend(["--".to_owned(), name.to_owned()]);
    args
}

pub(super) fn simulate_remove_args(name: &str) -> Vec<String> {
    ["-o", EXACT_NAMES, "-s", "-q", "remove", "--", name]
        .map(String::from)
        .into()
}

pub(super) fn upgrade_one_args(name: &str) -> Vec<String> {
    let mut args = vec!["install".to_owned(), "--only-upgrade".to_owned()];
    args.extend(change_options());
    args.extend(["--".to_owned(), name.to_owned()]);
    args
}

pub(super) fn upgrade_all_args() -> Vec<String> {
    let mut args = vec!["upgrade".to_owned()];
    args.extend(change_options());
    args
}

pub(super) fn refresh_args() -> Vec<String> {
    ["update", "-qq", "-o", &format!("DPkg::Lock::Timeout={LOCK_WAIT_S}")]
        .map(String::from)
        .into()
}

pub(super) async fn list() -> Result<Listing, ToolError> {
    let dpkg_query = program("dpkg-query")?;
    let apt = program("apt")?;
    let (installed, upgradable) = tokio::join!(
        run(&dpkg_query, &["-W", "-f", LIST_FORMAT], ENV, LIST_LIMIT, Keep::All),
        run(&apt, &["list", "--upgradable"], ENV, LIST_LIMIT, Keep::All),
    );
    let installed = installed?;
    if !installed.success() {
        return Err(super::listing_failed("dpkg-query", &installed));
    }
    let mut packages = parse_installed(&installed.stdout);
    // apt's stderr always carries its "no stable CLI" warning; only the exit code counts.
    let note = match upgradable {
        Ok(ran) if ran.success() => {
            super::merge_available(&mut packages, &parse_upgradable(&ran.stdout));
            "`available` comes from apt's package lists as last refreshed (apt-get update is not run for a listing)"
                .to_owned()
        }
        Ok(ran) => format!(
            "newer versions unknown: apt list --upgradable failed ({}): {}",
            exit_text(ran.exit_code),
            message_tail(&ran)
        ),
        Err(e) => format!("newer versions unknown: {}", e.message),
    };
    Ok(Listing {
        packages,
        cut: installed.cut,
        note: Some(note),
    })
}

/// dpkg-query rows of `LIST_FORMAT`; only packages whose files are installed (the second
/// status letter `i`, which includes held packages) count.
pub(super) fn parse_installed(text: &str) -> Vec<Package> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, '\t');
            let (name, version, status) = (fields.next()?, fields.next()?, fields.next()?);
            let summary = fields.next().unwrap_or("").trim();
            (!name.is_empty() && status.as_bytes().get(1) == Some(&b'i')).then(|| Package {
                id: name.to_owned(),
                name: name.to_owned(),
                version: version.to_owned(),
                available: String::new(),
                summary: Some(summary.to_owned()),
                source: None,
            })
        })
        .collect()
}

/// `apt list --upgradable`: `name/suite[,suite] version arch [upgradable from: old]`.
pub(super) fn parse_upgradable(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|line| line.contains("[upgradable from:"))
        .filter_map(|line| {
            let mut tokens = line.split_whitespace();
            let (name, _) = tokens.next()?.split_once('/')?;
            let version = tokens.next()?;
            Some((name.to_owned(), version.to_owned()))
        })
        .collect()
}

/// What dpkg knows of one package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Installed {
    Yes(String),
    No,
}

pub(super) fn parse_status(ran: &Ran) -> Installed {
    if !ran.success() {
        return Installed::No;
    }
    ran.stdout
        .lines()
        .find_map(|line| {
            let (status, version) = line.split_once('\t')?;
            (status.as_bytes().get(1) == Some(&b'i')).then(|| Installed::Yes(version.trim().to_owned()))
        })
        .unwrap_or(Installed::No)
}

async fn installed(name: &str) -> Result<Installed, ToolError> {
    let ran = run(
        &program("dpkg-query")?,
        &["-W", "-f", STATUS_FORMAT, name],
        ENV,
        QUERY_LIMIT,
        Keep::All,
    )
    .await?;
    Ok(parse_status(&ran))
}

/// What apt's package lists say about a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Known {
    /// Installable at this version.
    Candidate(String),
    /// Named in the lists but with nothing to install (virtual, or removed from the archive).
    NoCandidate,
    Unknown,
}

pub(super) fn parse_policy(text: &str) -> Known {
    match text
        .lines()
        .find_map(|line| line.trim().strip_prefix("Candidate:"))
        .map(str::trim)
    {
        Some("(none)") | Some("") => Known::NoCandidate,
        Some(version) => Known::Candidate(version.to_owned()),
        None if text.trim().is_empty() => Known::Unknown,
        None => Known::NoCandidate,
    }
}

async fn known(name: &str) -> Result<Known, ToolError> {
    let ran = run(
        &program("apt-cache")?,
        &["-o", EXACT_NAMES, "policy", name],
        ENV,
        QUERY_LIMIT,
        Keep::All,
    )
    .await?;
    Ok(if ran.success() {
        parse_policy(&ran.stdout)
    } else {
        Known::Unknown
    })
}

/// Refreshes the package lists; `Err` carries apt-get's own explanation.
async fn refresh() -> Result<(), String> {
    let apt_get = program("apt-get").map_err(|e| e.message)?;
    match run(&apt_get, &refresh_args(), ENV, CHANGE_LIMIT, Keep::Tail).await {
        Ok(ran) if ran.success() => Ok(()),
        Ok(ran) => Err(format!(
            "apt-get update failed ({}): {}",
            exit_text(ran.exit_code),
            message_tail(&ran)
        )),
        Err(e) => Err(e.message),
    }
}

/// The error for a failed apt-get run: a package apt cannot find is `not_found`,
/// anything else `exec_failed` with apt's own last lines.
pub(super) fn failure(verb: &str, name: &str, ran: &Ran) -> ToolError {
    let text = format!("{}\n{}", ran.stdout, ran.stderr);
    let tail = message_tail(ran);
    if text.contains("Unable to locate package") || text.contains("has no installation candidate") {
        ToolError::not_found(format!("apt has no installable package named `{name}`: {tail}"))
    } else if text.contains("Could not get lock") || text.contains("Unable to acquire the dpkg frontend lock") {
        ToolError::exec_failed(format!(
            "apt-get {verb} {name}: another package operation held apt's lock for over {LOCK_WAIT_S}s; try again when it is done: {tail}"
        ))
    } else {
        ToolError::exec_failed(format!(
            "apt-get {verb} {name} failed ({}): {tail}",
            exit_text(ran.exit_code)
        ))
    }
}

pub(super) async fn install(name: &str) -> Result<Change, ToolError> {
    let mut note = None;
    if known(name).await? == Known::Unknown {
        // Only an unknown name is worth a refresh: it may be new since the lists were fetched.
        let refreshed = refresh().await;
        if known(name).await? == Known::Unknown {
            let why = match refreshed {
                Ok(()) => "checked after refreshing the package lists with apt-get update".to_owned(),
                Err(e) => format!("the package lists could not be refreshed, so they may be stale: {e}"),
            };
            return Err(ToolError::not_found(format!(
                "no package named `{name}` in this PC's apt sources ({why}); check the name with winget_list or `apt-cache search`"
            )));
        }
        note = Some("the package lists were refreshed (apt-get update) to find this package".to_owned());
    }
    let before = installed(name).await?;
    let apt_get = program("apt-get")?;
    let mut ran = run(&apt_get, &install_args(name), ENV, CHANGE_LIMIT, Keep::Tail).await?;
    if !ran.success() && stale_lists(&ran) && refresh().await.is_ok() {
        // The lists named a file the mirror no longer has; fresh lists name the current one.
        ran = run(&apt_get, &install_args(name), ENV, CHANGE_LIMIT, Keep::Tail).await?;
        note = Some("the package lists were stale and were refreshed (apt-get update) before retrying".to_owned());
    }
    if !ran.success() {
        return Err(failure("install", name, &ran));
    }
    let after = installed(name).await?;
    Ok(finish(name, &ran, &before, after, note))
}

/// A download failed because the lists point at a file the mirror replaced.
pub(super) fn stale_lists(ran: &Ran) -> bool {
    let text = format!("{}\n{}", ran.stdout, ran.stderr);
    text.contains("Unable to fetch some archives") || text.contains("404  Not Found") || text.contains("404 Not Found")
}

fn finish(name: &str, ran: &Ran, before: &Installed, after: Installed, note: Option<String>) -> Change {
    Change {
        id: Some(name.to_owned()),
        exit_code: ran.exit_code,
        output: output_of(ran),
        changed: *before != after,
        version: match after {
            Installed::Yes(version) => Some(version),
            Installed::No => None,
        },
        note,
    }
}

/// Package names apt-get's simulation (`-s`) says it would remove.
pub(super) fn parse_simulated_removals(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("Remv "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

pub(super) async fn uninstall(name: &str) -> Result<Change, ToolError> {
    let before = installed(name).await?;
    if before == Installed::No {
        return Err(ToolError::not_found(format!(
            "`{name}` is not installed on this PC, so there is nothing to remove"
        )));
    }
    let apt_get = program("apt-get")?;
    // apt-get remove -y also removes every package that depends on this one; that is
    // rarely what "uninstall X" means, so it is refused with the list instead.
    let simulated = run(&apt_get, &simulate_remove_args(name), ENV, QUERY_LIMIT, Keep::All).await?;
    if !simulated.success() {
        return Err(failure("remove", name, &simulated));
    }
    let base = name.split(':').next().unwrap_or(name);
    let others: Vec<String> = parse_simulated_removals(&simulated.stdout)
        .into_iter()
        .filter(|p| p.split(':').next() != Some(base))
        .collect();
    if !others.is_empty() {
        return Err(super::refuse_dependents("apt-get", name, &others));
    }
    let ran = run(&apt_get, &remove_args(name), ENV, CHANGE_LIMIT, Keep::Tail).await?;
    if !ran.success() {
        return Err(failure("remove", name, &ran));
    }
    let after = installed(name).await?;
    let mut change = finish(name, &ran, &before, after, None);
    change.note = Some("configuration files are kept (remove, not purge)".to_owned());
    Ok(change)
}

pub(super) async fn update_one(name: &str) -> Result<Change, ToolError> {
    let before = installed(name).await?;
    if before == Installed::No {
        return Err(ToolError::not_found(format!(
            "`{name}` is not installed on this PC, so it cannot be updated; use winget_install"
        )));
    }
    let note = refresh_note(refresh().await);
    let ran = run(
        &program("apt-get")?,
        &upgrade_one_args(name),
        ENV,
        UPDATE_LIMIT,
        Keep::Tail,
    )
    .await?;
    if !ran.success() {
        return Err(failure("install --only-upgrade", name, &ran));
    }
    let after = installed(name).await?;
    Ok(finish(name, &ran, &before, after, note))
}

pub(super) async fn update_all() -> Result<Change, ToolError> {
    let note = refresh_note(refresh().await);
    let ran = run(&program("apt-get")?, &upgrade_all_args(), ENV, UPDATE_LIMIT, Keep::Tail).await?;
    if !ran.success() {
        return Err(failure("upgrade", "(all packages)", &ran));
    }
    let counts = parse_upgrade_counts(&ran.stdout);
    Ok(Change {
        id: None,
        exit_code: ran.exit_code,
        output: output_of(&ran),
        changed: counts.is_some_and(|(upgraded, installed)| upgraded + installed > 0),
        version: None,
        note,
    })
}

fn refresh_note(refreshed: Result<(), String>) -> Option<String> {
    refreshed
        .err()
        .map(|e| format!("the package lists could not be refreshed, so newer versions may have been missed: {e}"))
}

/// apt-get's summary line: `N upgraded, M newly installed, K to remove and H not upgraded.`
pub(super) fn parse_upgrade_counts(text: &str) -> Option<(u64, u64)> {
    text.lines().find_map(|line| {
        let (upgraded, rest) = line.trim().split_once(" upgraded, ")?;
        let (installed, _) = rest.split_once(" newly installed")?;
        Some((upgraded.trim().parse().ok()?, installed.trim().parse().ok()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    const DPKG_QUERY: &str = "adduser\t3.134\tii \tadd and remove users and groups\n\
        bash\t5.2.15-2+b8\tii \tGNU Bourne Again SHell\n\
        libfoo1\t1.0-1\trc \told library, config files left\n\
        held-pkg\t2.0\thi \ta held package\n\
        half\t0.1\tiU \tunpacked but not configured\n\
        deinstalled\t1.0\tun \t\n\
        tabby\t1\tii \tsummary with\ta tab\n";

    #[test]
    fn installed_rows_are_those_whose_files_are_there() {
        let packages = parse_installed(DPKG_QUERY);
        let ids: Vec<&str> = packages.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["adduser", "bash", "held-pkg", "tabby"]);
        assert_eq!(packages[1].version, "5.2.15-2+b8");
        assert_eq!(packages[1].name, "bash");
        assert_eq!(packages[1].summary.as_deref(), Some("GNU Bourne Again SHell"));
        assert_eq!(packages[3].summary.as_deref(), Some("summary with\ta tab"));
        assert!(packages.iter().all(|p| p.available.is_empty()));
    }

    #[test]
    fn upgradable_list_is_parsed_past_its_banner() {
        let text = "Listing...\n\
            appstream/oldstable 0.16.1-2+b1 amd64 [upgradable from: 0.16.1-2]\n\
            apt/oldstable-security,oldstable 2.6.2 amd64 [upgradable from: 2.6.1]\n\
            bash/stable 5.2.15-2+b13 amd64 [upgradable from: 5.2.15-2+b8]\n\
            weird line without a slash [upgradable from: 1]\n";
        let map = parse_upgradable(text);
        assert_eq!(map.len(), 3);
        assert_eq!(map["bash"], "5.2.15-2+b13");
        assert_eq!(map["apt"], "2.6.2");
        assert!(parse_upgradable("Listing...\n").is_empty());
    }

    #[test]
    fn policy_says_whether_apt_knows_a_name() {
        let hello = "hello:\n  Installed: (none)\n  Candidate: 2.10-3\n  Version table:\n     2.10-3 500\n";
        assert_eq!(parse_policy(hello), Known::Candidate("2.10-3".into()));
        let virtual_pkg = "mail-transport-agent:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n";
        assert_eq!(parse_policy(virtual_pkg), Known::NoCandidate);
        assert_eq!(parse_policy(""), Known::Unknown);
        assert_eq!(parse_policy("\n"), Known::Unknown);
    }

    fn ran(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            cut: false,
        }
    }

    #[test]
    fn status_of_one_package() {
        assert_eq!(
            parse_status(&ran(0, "ii \t2.10-3\n", "")),
            Installed::Yes("2.10-3".into())
        );
        assert_eq!(parse_status(&ran(0, "rc \t2.10-3\n", "")), Installed::No);
        assert_eq!(
            parse_status(&ran(1, "", "dpkg-query: no packages found matching hello\n")),
            Installed::No
        );
    }

    #[test]
    fn command_lines() {
        let opts = [
            "-o",
            "APT::Cmd::Pattern-Only=true",
            "-y",
            "-q",
            "-o",
            "DPkg::Lock::Timeout=120",
            "-o",
            "Dpkg::Options::=--force-confdef",
            "-o",
            "Dpkg::Options::=--force-confold",
        ];
        let expect = |head: &[&str], tail: &[&str]| -> Vec<String> {
            head.iter()
                .chain(opts.iter())
                .chain(tail.iter())
                .map(|s| s.to_string())
                .collect()
        };
        assert_eq!(
            install_args("hello"),
            expect(&["install"], &["--no-install-recommends", "--", "hello"])
        );
        assert_eq!(remove_args("hello"), expect(&["remove"], &["--", "hello"]));
        assert_eq!(
            upgrade_one_args("hello"),
            expect(&["install", "--only-upgrade"], &["--", "hello"])
        );
        assert_eq!(upgrade_all_args(), expect(&["upgrade"], &[]));
        assert_eq!(
            simulate_remove_args("hello"),
            ["-o", "APT::Cmd::Pattern-Only=true", "-s", "-q", "remove", "--", "hello"]
        );
        assert_eq!(refresh_args(), ["update", "-qq", "-o", "DPkg::Lock::Timeout=120"]);
        assert!(!install_args("hello").iter().any(|a| a == "purge" || a == "--purge"));
        let env: HashMap<_, _> = ENV.iter().copied().collect();
        assert_eq!(env["DEBIAN_FRONTEND"], "noninteractive");
        assert_eq!(env["LC_ALL"], "C");
    }

    #[test]
    fn failures_map_to_codes_with_apts_message() {
        let missing = failure(
            "install",
            "nope",
            &ran(100, "Reading package lists...\n", "E: Unable to locate package nope\n"),
        );
        assert_eq!(missing.code, ErrorCode::NotFound);
        assert!(
            missing.message.contains("E: Unable to locate package nope"),
            "{}",
            missing.message
        );

        let no_candidate = failure(
            "install",
            "old",
            &ran(100, "", "E: Package 'old' has no installation candidate\n"),
        );
        assert_eq!(no_candidate.code, ErrorCode::NotFound);

        let locked = failure(
            "install",
            "hello",
            &ran(
                100,
                "",
                "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 42 (apt-get)\n",
            ),
        );
        assert_eq!(locked.code, ErrorCode::ExecFailed);
        assert!(locked.message.contains("lock"), "{}", locked.message);

        let broken = failure(
            "install",
            "hello",
            &ran(
                100,
                "Setting up hello ...\n",
                "dpkg: error processing package hello (--configure):\nE: Sub-process /usr/bin/dpkg returned an error code (1)\n",
            ),
        );
        assert_eq!(broken.code, ErrorCode::ExecFailed);
        assert!(broken.message.contains("exit code 100"), "{}", broken.message);
        assert!(
            broken
                .message
                .ends_with("E: Sub-process /usr/bin/dpkg returned an error code (1)"),
            "{}",
            broken.message
        );
    }

    #[test]
    fn stale_lists_are_recognised() {
        let stale = ran(
            100,
            "Err:1 http://deb.debian.org/debian bookworm/main amd64 hello amd64 2.10-2\n  404  Not Found [IP: 151.101.2.132 80]\n",
            "E: Failed to fetch http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-2_amd64.deb  404  Not Found\nE: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?\n",
        );
        assert!(stale_lists(&stale));
        assert!(!stale_lists(&ran(100, "", "E: Unable to locate package nope\n")));
    }

    #[test]
    fn simulated_removals_and_upgrade_counts() {
        let sim = "NOTE: This is only a simulation!\n\
            Reading package lists...\n\
            The following packages will be REMOVED:\n  libfoo1 foo-utils\n\
            0 upgraded, 0 newly installed, 2 to remove and 3 not upgraded.\n\
            Remv foo-utils [1.0-1]\n\
            Remv libfoo1:amd64 [1.0-1]\n";
        assert_eq!(parse_simulated_removals(sim), ["foo-utils", "libfoo1:amd64"]);
        assert_eq!(parse_upgrade_counts(sim), Some((0, 0)));
        assert_eq!(
            parse_upgrade_counts("Reading...\n12 upgraded, 1 newly installed, 0 to remove and 0 not upgraded.\n"),
            Some((12, 1))
        );
        assert_eq!(parse_upgrade_counts("nothing here"), None);
    }
}
