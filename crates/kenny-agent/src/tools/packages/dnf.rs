//! Fedora, RHEL and derivatives: rpm for what is installed, dnf for changes.

use std::collections::HashMap;

use super::{
    CHANGE_LIMIT, Change, Keep, LIST_LIMIT, Listing, Package, QUERY_LIMIT, Ran, UPDATE_LIMIT, exit_text, message_tail,
    output_of, program, run,
};
use crate::tools::ToolError;

const ENV: &[(&str, &str)] = &[("LC_ALL", "C")];

/// The epoch only when there is one, as dnf prints versions.
const EVR: &str = "%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}";

pub(super) fn list_format() -> String {
    format!("%{{NAME}}\\t{EVR}\\t%{{ARCH}}\\t%{{SUMMARY}}\\n")
}

pub(super) fn install_args(name: &str) -> Vec<String> {
    ["install", "-y", "--", name].map(String::from).into()
}

pub(super) fn remove_args(name: &str) -> Vec<String> {
    ["remove", "-y", "--", name].map(String::from).into()
}

/// Installed packages that need `name`: dnf would remove them along with it.
pub(super) fn dependents_args(name: &str) -> Vec<String> {
    [
        "repoquery",
        "--installed",
        "-q",
        "--qf",
        "%{name}\\n",
        "--whatrequires",
        name,
    ]
    .map(String::from)
    .into()
}

pub(super) fn parse_dependents(text: &str, name: &str) -> Vec<String> {
    let mut found: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != name)
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    found
}

pub(super) fn upgrade_one_args(name: &str) -> Vec<String> {
    ["upgrade", "-y", "--", name].map(String::from).into()
}

pub(super) fn upgrade_all_args() -> Vec<String> {
    ["upgrade", "-y"].map(String::from).into()
}

pub(super) async fn list() -> Result<Listing, ToolError> {
    let rpm = program("rpm")?;
    let dnf = program("dnf")?;
    let format = list_format();
    let rpm_args = ["-qa", "--qf", format.as_str()];
    let (installed, updates) = tokio::join!(
        run(&rpm, &rpm_args, ENV, LIST_LIMIT, Keep::All),
        run(&dnf, &["check-update", "-q"], ENV, LIST_LIMIT, Keep::All),
    );
    let installed = installed?;
    if !installed.success() {
        return Err(super::listing_failed("rpm -qa", &installed));
    }
    let mut packages = parse_installed(&installed.stdout);
    // check-update exits 100 when updates exist, 0 when there are none, 1 on errors.
    let note = match updates {
        Ok(ran) if matches!(ran.exit_code, Some(0 | 100)) => {
            super::merge_available(&mut packages, &parse_check_update(&ran.stdout));
            None
        }
        Ok(ran) => Some(format!(
            "newer versions unknown: dnf check-update failed ({}): {}",
            exit_text(ran.exit_code),
            message_tail(&ran)
        )),
        Err(e) => Some(format!("newer versions unknown: {}", e.message)),
    };
    Ok(Listing {
        packages,
        cut: installed.cut,
        note,
    })
}

/// Rows of [`list_format`]; rpm's imported signing keys (`gpg-pubkey`) are not packages.
pub(super) fn parse_installed(text: &str) -> Vec<Package> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, '\t');
            let (name, version, arch) = (fields.next()?, fields.next()?, fields.next()?);
            let summary = fields.next().unwrap_or("").trim();
            (!name.is_empty() && name != "gpg-pubkey" && arch != "(none)").then(|| Package {
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

/// `dnf check-update -q`: `name.arch  version  repo`, where a long name may sit alone on
/// its line with the rest on the next; the obsoletes section that may follow is skipped.
pub(super) fn parse_check_update(text: &str) -> HashMap<String, String> {
    let mut found = HashMap::new();
    let mut carried: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("Obsoleting") || trimmed.starts_with("Security:") {
            break;
        }
        let mut tokens: Vec<&str> = trimmed.split_whitespace().collect();
        let joined;
        if let Some(name) = carried.take() {
            joined = name;
            tokens.insert(0, joined.as_str());
        }
        match tokens.as_slice() {
            [] => {}
            [name] if name.contains('.') => carried = Some((*name).to_owned()),
            [name_arch, version, _repo, ..] => {
                if let Some((name, _arch)) = name_arch.rsplit_once('.') {
                    found.insert(name.to_owned(), (*version).to_owned());
                }
            }
            _ => {}
        }
    }
    found
}

pub(super) fn parse_installed_version(ran: &Ran) -> Option<String> {
    ran.success()
        .then(|| ran.stdout.lines().next().map(|v| v.trim().to_owned()))
        .flatten()
        .filter(|v| !v.is_empty())
}

async fn installed(name: &str) -> Result<Option<String>, ToolError> {
    let format = format!("{EVR}\\n");
    let ran = run(
        &program("rpm")?,
        &["-q", "--qf", format.as_str(), name],
        ENV,
        QUERY_LIMIT,
        Keep::All,
    )
    .await?;
    Ok(parse_installed_version(&ran))
}

pub(super) fn failure(verb: &str, name: &str, ran: &Ran) -> ToolError {
    let text = format!("{}\n{}", ran.stdout, ran.stderr);
    let tail = message_tail(ran);
    if text.contains("No match for argument") || text.contains("Unable to find a match") {
        ToolError::not_found(format!("dnf has no package named `{name}`: {tail}"))
    } else {
        ToolError::exec_failed(format!(
            "dnf {verb} {name} failed ({}): {tail}",
            exit_text(ran.exit_code)
        ))
    }
}

fn finish(name: &str, ran: &Ran, before: Option<String>, after: Option<String>, note: Option<String>) -> Change {
    Change {
        id: Some(name.to_owned()),
        exit_code: ran.exit_code,
        output: output_of(ran),
        changed: before != after,
        version: after,
        note,
    }
}

pub(super) async fn install(name: &str) -> Result<Change, ToolError> {
    let before = installed(name).await?;
    change(name, "install", &install_args(name), CHANGE_LIMIT, before).await
}

/// Runs one changing dnf command on `name` and reports what it changed.
async fn change(
    name: &str,
    verb: &str,
    args: &[String],
    limit: std::time::Duration,
    before: Option<String>,
) -> Result<Change, ToolError> {
    let ran = run(&program("dnf")?, args, ENV, limit, Keep::Tail).await?;
    if !ran.success() {
        return Err(failure(verb, name, &ran));
    }
    let after = installed(name).await?;
    Ok(finish(name, &ran, before, after, None))
}

pub(super) async fn uninstall(name: &str) -> Result<Change, ToolError> {
    let before = installed(name).await?;
    if before.is_none() {
        return Err(ToolError::not_found(format!(
            "`{name}` is not installed on this PC, so there is nothing to remove"
        )));
    }
    let dnf = program("dnf")?;
    // Like the apt path: never take other packages along without being asked.
    let dependents = run(&dnf, &dependents_args(name), ENV, QUERY_LIMIT, Keep::All).await?;
    if !dependents.success() {
        return Err(failure("check what depends on", name, &dependents));
    }
    let others = parse_dependents(&dependents.stdout, name);
    if !others.is_empty() {
        return Err(super::refuse_dependents("dnf", name, &others));
    }
    change(name, "remove", &remove_args(name), CHANGE_LIMIT, before).await
}

pub(super) async fn update_one(name: &str) -> Result<Change, ToolError> {
    let before = installed(name).await?;
    if before.is_none() {
        return Err(ToolError::not_found(format!(
            "`{name}` is not installed on this PC, so it cannot be updated; use winget_install"
        )));
    }
    change(name, "upgrade", &upgrade_one_args(name), UPDATE_LIMIT, before).await
}

pub(super) async fn update_all() -> Result<Change, ToolError> {
    let ran = run(&program("dnf")?, &upgrade_all_args(), ENV, UPDATE_LIMIT, Keep::Tail).await?;
    if !ran.success() {
        return Err(failure("upgrade", "(all packages)", &ran));
    }
    Ok(Change {
        id: None,
        exit_code: ran.exit_code,
        output: output_of(&ran),
        changed: !nothing_to_do(&ran),
        version: None,
        note: None,
    })
}

pub(super) fn nothing_to_do(ran: &Ran) -> bool {
    ran.stdout.contains("Nothing to do") || ran.stderr.contains("Nothing to do")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependents_are_found_without_the_package_itself() {
        assert_eq!(
            dependents_args("openssl"),
            [
                "repoquery",
                "--installed",
                "-q",
                "--qf",
                "%{name}\\n",
                "--whatrequires",
                "openssl"
            ]
        );
        assert_eq!(
            parse_dependents("openssl\ncurl\n\nsudo\ncurl\n", "openssl"),
            ["curl", "sudo"]
        );
        assert!(parse_dependents("\n", "hello").is_empty());
    }
    use kenny_proto::error::ErrorCode;

    fn ran(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            cut: false,
        }
    }

    #[test]
    fn rpm_rows() {
        let text = "bash\t5.2.26-3.fc40\tx86_64\tThe GNU Bourne Again shell\n\
            gpg-pubkey\te99d6ad1-64d2612c\t(none)\tFedora (40) <fedora-40-primary@fedoraproject.org> public key\n\
            shadow-utils\t2:4.15.1-3.fc40\tx86_64\tUtilities for managing accounts and shadow password files\n\
            glibc\t2.39-17.fc40\ti686\tThe GNU libc libraries\n";
        let packages = parse_installed(text);
        let ids: Vec<&str> = packages.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["bash", "shadow-utils", "glibc"]);
        assert_eq!(packages[1].version, "2:4.15.1-3.fc40");
        assert_eq!(packages[0].summary.as_deref(), Some("The GNU Bourne Again shell"));
    }

    #[test]
    fn check_update_rows_including_wrapped_and_obsoletes() {
        let text = "\n\
            bash.x86_64                         5.2.32-1.fc40                  updates\n\
            a-very-long-package-name-that-wraps-the-column.noarch\n\
            \x20                                    1.2.3-4.fc40                   updates\n\
            kernel-core.x86_64                  6.11.4-201.fc40                updates\n\
            Obsoleting Packages\n\
            grub2-tools.x86_64                  1:2.06-123.fc40                updates\n";
        let map = parse_check_update(text);
        assert_eq!(map.len(), 3, "{map:?}");
        assert_eq!(map["bash"], "5.2.32-1.fc40");
        assert_eq!(map["a-very-long-package-name-that-wraps-the-column"], "1.2.3-4.fc40");
        assert_eq!(map["kernel-core"], "6.11.4-201.fc40");
        assert!(parse_check_update("").is_empty());
    }

    #[test]
    fn command_lines() {
        assert_eq!(install_args("htop"), ["install", "-y", "--", "htop"]);
        assert_eq!(remove_args("htop"), ["remove", "-y", "--", "htop"]);
        assert_eq!(upgrade_one_args("htop"), ["upgrade", "-y", "--", "htop"]);
        assert_eq!(upgrade_all_args(), ["upgrade", "-y"]);
        assert_eq!(
            list_format(),
            "%{NAME}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\t%{ARCH}\\t%{SUMMARY}\\n"
        );
    }

    #[test]
    fn outcomes() {
        assert_eq!(
            parse_installed_version(&ran(0, "3.3.0-6.fc40\n", "")),
            Some("3.3.0-6.fc40".into())
        );
        assert_eq!(
            parse_installed_version(&ran(1, "package htop is not installed\n", "")),
            None
        );
        let missing = failure(
            "install",
            "nope",
            &ran(
                1,
                "",
                "No match for argument: nope\nError: Unable to find a match: nope\n",
            ),
        );
        assert_eq!(missing.code, ErrorCode::NotFound);
        assert!(missing.message.contains("Unable to find a match: nope"));
        let other = failure(
            "install",
            "x",
            &ran(1, "", "Error: Failed to download metadata for repo 'fedora'\n"),
        );
        assert_eq!(other.code, ErrorCode::ExecFailed);
        assert!(nothing_to_do(&ran(
            0,
            "Dependencies resolved.\nNothing to do.\nComplete!\n",
            ""
        )));
        assert!(!nothing_to_do(&ran(
            0,
            "Upgraded:\n  bash-5.2.32-1.fc40.x86_64\nComplete!\n",
            ""
        )));
    }
}
