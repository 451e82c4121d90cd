//! Windows: winget (App Installer). Its listing is a fixed-width table for people, so it
//! is read by the header's column positions, counted in terminal columns as winget
//! counts them (East Asian wide characters take two).

use std::path::PathBuf;

use kenny_proto::error::ErrorCode;

use super::{
    CHANGE_LIMIT, Change, Keep, LIST_LIMIT, Listing, Package, Ran, UPDATE_LIMIT, exit_text, message_tail, output_of,
    run, which,
};
use crate::tools::ToolError;

const PACKAGE_FAMILY_SUFFIX: &str = "__8wekyb3d8bbwe";
const APP_INSTALLER_PREFIX: &str = "Microsoft.DesktopAppInstaller_";

/// Flags that keep winget from ever waiting for a person.
const UNATTENDED: &[&str] = &["--accept-source-agreements", "--disable-interactivity"];

pub(super) fn list_args() -> Vec<String> {
    let mut args = vec!["list".to_owned()];
    args.extend(UNATTENDED.iter().map(|s| s.to_string()));
    args
}

fn by_id(verb: &str, id: &str, agreements: bool) -> Vec<String> {
    let mut args: Vec<String> = [verb, "--id", id, "--exact", "--silent"].map(String::from).into();
    if agreements {
        args.push("--accept-package-agreements".to_owned());
    }
    args.extend(UNATTENDED.iter().map(|s| s.to_string()));
    args
}

pub(super) fn install_args(id: &str) -> Vec<String> {
    by_id("install", id, true)
}

pub(super) fn uninstall_args(id: &str) -> Vec<String> {
    by_id("uninstall", id, false)
}

pub(super) fn upgrade_one_args(id: &str) -> Vec<String> {
    by_id("upgrade", id, true)
}

pub(super) fn upgrade_all_args() -> Vec<String> {
    let mut args: Vec<String> = ["upgrade", "--all", "--silent", "--accept-package-agreements"]
        .map(String::from)
        .into();
    args.extend(UNATTENDED.iter().map(|s| s.to_string()));
    args
}

/// winget.exe: on PATH for a signed-in user, but a service account (the agent runs as
/// LocalSystem) has no App Installer alias, so the newest installed App Installer
/// package directory is looked up instead.
pub(super) fn locate() -> Result<PathBuf, ToolError> {
    if let Some(found) = which("winget.exe") {
        return Ok(found);
    }
    let apps = std::env::var_os("ProgramFiles").map(|dir| PathBuf::from(dir).join("WindowsApps"));
    let found = apps.as_ref().and_then(|apps| {
        let names: Vec<String> = std::fs::read_dir(apps)
            .ok()?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        let arch = match std::env::consts::ARCH {
            "aarch64" => "arm64",
            "x86" => "x86",
            _ => "x64",
        };
        newest_app_installer(&names, arch)
            .map(|dir| apps.join(dir).join("winget.exe"))
            .filter(|exe| exe.is_file())
    });
    found.ok_or_else(|| {
        ToolError::new(
            ErrorCode::Unsupported,
            "winget was not found on this PC (not on PATH, and no App Installer package under %ProgramFiles%\\WindowsApps); install or update \"App Installer\" from the Microsoft Store",
        )
    })
}

/// The App Installer directory with the highest version for this architecture (or any
/// architecture if none matches), from a listing of `WindowsApps`.
pub(super) fn newest_app_installer<'a>(names: &'a [String], arch: &str) -> Option<&'a str> {
    let parsed: Vec<(&str, Vec<u64>, &str)> = names
        .iter()
        .filter_map(|name| {
            let rest = name
                .strip_prefix(APP_INSTALLER_PREFIX)?
                .strip_suffix(PACKAGE_FAMILY_SUFFIX)?;
            let (version, dir_arch) = rest.split_once('_')?;
            let version: Vec<u64> = version.split('.').map(str::parse).collect::<Result<_, _>>().ok()?;
            Some((name.as_str(), version, dir_arch))
        })
        .collect();
    let best = |want: Option<&str>| {
        parsed
            .iter()
            .filter(|(_, _, a)| want.is_none_or(|w| a.eq_ignore_ascii_case(w)))
            .max_by(|x, y| x.1.cmp(&y.1))
            .map(|(name, _, _)| *name)
    };
    best(Some(arch)).or_else(|| best(None))
}

pub(super) async fn list() -> Result<Listing, ToolError> {
    let winget = locate()?;
    let ran = run(&winget, &list_args(), &[], LIST_LIMIT, Keep::All).await?;
    if !ran.success() {
        return Err(failure("list", None, &ran));
    }
    let packages = parse_table(&ran.stdout).map_err(|why| {
        ToolError::exec_failed(format!(
            "could not read winget's package table ({why}): {}",
            message_tail(&ran)
        ))
    })?;
    let note = packages
        .iter()
        .any(|p| p.name.ends_with('\u{2026}') || p.id.ends_with('\u{2026}'))
        .then(|| {
            "winget cut some long names or ids short (ending in `…`); a cut id cannot be used to install or remove"
                .to_owned()
        });
    Ok(Listing {
        packages,
        cut: ran.cut,
        note,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Name,
    Id,
    Version,
    Available,
    Source,
}

/// Parses `winget list` output into packages. Everything before the header (progress
/// spinners overwritten with `\r`, notices) is skipped; the table ends at the first
/// blank line, and lines that do not fit the columns (summaries such as "3 upgrades
/// available.") are skipped. An output with no table means nothing is installed.
pub(super) fn parse_table(text: &str) -> Result<Vec<Package>, String> {
    let lines: Vec<String> = text.split('\n').map(visible_line).collect();
    let Some(sep) = lines
        .iter()
        .position(|line| line.trim().len() >= 5 && line.trim().chars().all(|c| c == '-' || c == '\u{2500}'))
    else {
        let said_something = lines
            .iter()
            .any(|l| l.chars().any(|c| !c.is_whitespace() && !"-\\|/".contains(c)));
        return if said_something && !looks_empty(text) {
            Err("no table in winget's output".to_owned())
        } else {
            Ok(Vec::new())
        };
    };
    let header = sep
        .checked_sub(1)
        .map(|i| lines[i].as_str())
        .ok_or("the table has no header row")?;
    let starts = header_starts(header);
    let columns = name_columns(&starts, &lines[sep + 1..])?;
    let column_at = |c: Column| columns.iter().position(|&k| k == c);
    let (name_i, id_i, version_i) = (
        column_at(Column::Name).ok_or("no Name column")?,
        column_at(Column::Id).ok_or("no Id column")?,
        column_at(Column::Version).ok_or("no Version column")?,
    );
    let positions: Vec<usize> = starts.iter().map(|(pos, _)| *pos).collect();
    let mut packages = Vec::new();
    for line in &lines[sep + 1..] {
        if line.trim().is_empty() {
            break;
        }
        let Some(fields) = split_row(line, &positions) else {
            continue;
        };
        let field = |i: Option<usize>| i.map(|i| fields[i].clone()).unwrap_or_default();
        let (name, id, version) = (fields[name_i].clone(), fields[id_i].clone(), fields[version_i].clone());
        if id.is_empty() || version.is_empty() {
            continue;
        }
        packages.push(Package {
            id,
            name,
            version,
            available: field(column_at(Column::Available)),
            summary: None,
            source: Some(field(column_at(Column::Source))),
        });
    }
    Ok(packages)
}

fn looks_empty(text: &str) -> bool {
    text.contains("No installed package found")
}

/// What a terminal would show of one output line: the text after the last carriage
/// return (a spinner redraws over itself), without escape sequences.
fn visible_line(raw: &str) -> String {
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    let shown = raw.rsplit('\r').next().unwrap_or(raw);
    let mut out = String::with_capacity(shown.len());
    let mut chars = shown.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        if c == '\u{feff}' {
            continue;
        }
        out.push(c);
    }
    out
}

/// Start column (in terminal columns) and label of each header field.
fn header_starts(header: &str) -> Vec<(usize, String)> {
    let mut starts = Vec::new();
    let mut col = 0;
    let mut prev_space = true;
    for c in header.chars() {
        let space = c.is_whitespace();
        if !space && prev_space {
            starts.push((col, String::new()));
        }
        if !space && let Some((_, label)) = starts.last_mut() {
            label.push(c);
        }
        prev_space = space;
        col += width(c);
    }
    starts
}

/// Which column is which: by the English labels, else by winget's fixed order (Name,
/// Id, Version, then Available and/or Source), telling a lone fourth column apart by
/// its content.
fn name_columns(starts: &[(usize, String)], rows: &[String]) -> Result<Vec<Column>, String> {
    let english: Option<Vec<Column>> = starts
        .iter()
        .map(|(_, label)| match label.to_ascii_lowercase().as_str() {
            "name" => Some(Column::Name),
            "id" => Some(Column::Id),
            "version" => Some(Column::Version),
            "available" => Some(Column::Available),
            "source" => Some(Column::Source),
            _ => None,
        })
        .collect();
    if let Some(columns) = english {
        return Ok(columns);
    }
    match starts.len() {
        3 => Ok(vec![Column::Name, Column::Id, Column::Version]),
        5 => Ok(vec![
            Column::Name,
            Column::Id,
            Column::Version,
            Column::Available,
            Column::Source,
        ]),
        4 => {
            let positions: Vec<usize> = starts.iter().map(|(p, _)| *p).collect();
            let fourth_is_source = rows
                .iter()
                .take_while(|l| !l.trim().is_empty())
                .filter_map(|l| split_row(l, &positions))
                .all(|f| matches!(f[3].as_str(), "" | "winget" | "msstore"));
            let last = if fourth_is_source {
                Column::Source
            } else {
                Column::Available
            };
            Ok(vec![Column::Name, Column::Id, Column::Version, last])
        }
        n => Err(format!("the header has {n} columns, expected 3 to 5")),
    }
}

/// Cuts a row at the column positions. `None` when the row does not line up (text runs
/// across a column boundary), which is how notes after the table are told apart.
fn split_row(line: &str, positions: &[usize]) -> Option<Vec<String>> {
    let mut fields = vec![String::new(); positions.len()];
    let mut col = 0;
    let mut prev: Option<char> = None;
    for c in line.chars() {
        let field = positions.iter().rposition(|&p| p <= col).unwrap_or(0);
        if positions[1..].contains(&col) && !c.is_whitespace() && prev.is_some_and(|p| !p.is_whitespace()) {
            return None;
        }
        fields[field].push(c);
        prev = Some(c);
        col += width(c);
    }
    Some(fields.into_iter().map(|f| f.trim().to_owned()).collect())
}

/// Terminal columns a character takes, as winget measures them: two for East Asian
/// wide and fullwidth characters, none for combining marks, one otherwise.
pub(super) fn width(c: char) -> usize {
    let cp = u32::from(c);
    let zero = matches!(cp,
        0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x200B..=0x200F | 0x20D0..=0x20FF | 0xFE00..=0xFE0F | 0xFE20..=0xFE2F);
    let wide = matches!(cp,
        0x1100..=0x115F | 0x2E80..=0x303E | 0x3041..=0x33FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xA000..=0xA4CF
        | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6
        | 0x1F300..=0x1F64F | 0x1F900..=0x1F9FF | 0x20000..=0x2FFFD | 0x30000..=0x3FFFD);
    if zero {
        0
    } else if wide {
        2
    } else {
        1
    }
}

/// What a winget exit code means for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    Done { changed: bool, note: Option<&'static str> },
    NotFound,
    Failed(Option<&'static str>),
}

const NO_APPLICATIONS_FOUND: u32 = 0x8A15_0014;
const UPDATE_NOT_APPLICABLE: u32 = 0x8A15_002B;
const UPGRADE_VERSION_NOT_NEWER: u32 = 0x8A15_004F;
const PACKAGE_ALREADY_INSTALLED: u32 = 0x8A15_0061;
const REBOOT_REQUIRED_TO_FINISH: u32 = 0x8A15_0109;
const REBOOT_INITIATED: u32 = 0x8A15_010B;

pub(super) fn classify(code: Option<i32>) -> Outcome {
    let Some(code) = code else {
        return Outcome::Failed(Some("winget was killed before it finished"));
    };
    // Windows exit codes are DWORDs; winget's are HRESULTs, negative as i32.
    match code as u32 {
        0 => Outcome::Done {
            changed: true,
            note: None,
        },
        NO_APPLICATIONS_FOUND => Outcome::NotFound,
        UPDATE_NOT_APPLICABLE | UPGRADE_VERSION_NOT_NEWER => Outcome::Done {
            changed: false,
            note: Some("already installed and no newer version is available"),
        },
        PACKAGE_ALREADY_INSTALLED => Outcome::Done {
            changed: false,
            note: Some("already installed"),
        },
        REBOOT_REQUIRED_TO_FINISH => Outcome::Done {
            changed: true,
            note: Some("installed; the PC must restart to finish"),
        },
        REBOOT_INITIATED => Outcome::Done {
            changed: true,
            note: Some("installed; the installer is restarting the PC"),
        },
        other => Outcome::Failed(describe(other)),
    }
}

/// winget's documented return codes that an operator can act on.
fn describe(code: u32) -> Option<&'static str> {
    Some(match code {
        0x8A15_0002 => "invalid command-line arguments (this winget may be too old; update App Installer)",
        0x8A15_0008 => "downloading the installer failed",
        0x8A15_0010 => "none of the package's installers fits this PC",
        0x8A15_0011 => "the downloaded installer's hash does not match the manifest",
        0x8A15_0016 => "several packages match this id",
        0x8A15_0019 => "the command needs administrator rights",
        0x8A15_002C => "some upgrades failed",
        0x8A15_002F => "the package has no uninstall information",
        0x8A15_0030 => "the package's uninstaller failed",
        0x8A15_0041 => "the package's agreements were not accepted",
        0x8A15_0045 | 0x8A15_004B => "winget could not open its sources (is the PC online?)",
        0x8A15_0046 => "the source agreements were not accepted",
        0x8A15_0056 => "the installer refuses to run as administrator, and the agent runs as SYSTEM",
        0x8A15_0068 => "the package is pinned against upgrades (winget pin)",
        0x8A15_0101 => "the application is running; it must be closed first",
        0x8A15_0102 => "another installation is in progress; try again later",
        0x8A15_0103 => "files of the application are in use; close it and try again",
        0x8A15_0104 => "a dependency is missing",
        0x8A15_0105 => "the disk is full",
        0x8A15_0106 => "not enough memory",
        0x8A15_0107 => "the installer needs internet access",
        0x8A15_010A => "the PC must restart before this can be installed",
        0x8A15_010C => "the installation was cancelled",
        0x8A15_010D => "another version of this application is already installed",
        0x8A15_010E => "a newer version of this application is already installed",
        0x8A15_010F => "an organisation policy blocks this installation",
        _ => return None,
    })
}

pub(super) fn failure(verb: &str, id: Option<&str>, ran: &Ran) -> ToolError {
    let what = id.map_or_else(|| format!("winget {verb}"), |id| format!("winget {verb} {id}"));
    let code = ran
        .exit_code
        .map_or_else(|| exit_text(None), |c| format!("exit code 0x{:08X}", c as u32));
    match classify(ran.exit_code) {
        Outcome::NotFound => ToolError::not_found(format!(
            "{what}: no package found with this id{} ({code}): {}",
            if verb == "install" {
                " in winget's sources"
            } else {
                " among the installed packages"
            },
            message_tail(ran)
        )),
        Outcome::Failed(Some(why)) => {
            ToolError::exec_failed(format!("{what} failed: {why} ({code}): {}", message_tail(ran)))
        }
        _ => ToolError::exec_failed(format!("{what} failed ({code}): {}", message_tail(ran))),
    }
}

async fn change(
    verb: &str,
    id: Option<&str>,
    args: Vec<String>,
    limit: std::time::Duration,
) -> Result<Change, ToolError> {
    let winget = locate()?;
    let ran = run(&winget, &args, &[], limit, Keep::Tail).await?;
    finish(verb, id, &ran)
}

pub(super) fn finish(verb: &str, id: Option<&str>, ran: &Ran) -> Result<Change, ToolError> {
    match classify(ran.exit_code) {
        Outcome::Done { changed, note } => Ok(Change {
            id: id.map(str::to_owned),
            exit_code: ran.exit_code,
            output: output_of(ran),
            changed,
            version: None,
            note: note.map(str::to_owned),
        }),
        _ => Err(failure(verb, id, ran)),
    }
}

pub(super) async fn install(id: &str) -> Result<Change, ToolError> {
    change("install", Some(id), install_args(id), CHANGE_LIMIT).await
}

pub(super) async fn uninstall(id: &str) -> Result<Change, ToolError> {
    change("uninstall", Some(id), uninstall_args(id), CHANGE_LIMIT).await
}

pub(super) async fn update_one(id: &str) -> Result<Change, ToolError> {
    change("upgrade", Some(id), upgrade_one_args(id), UPDATE_LIMIT).await
}

pub(super) async fn update_all() -> Result<Change, ToolError> {
    change("upgrade --all", None, upgrade_all_args(), UPDATE_LIMIT).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `winget list` as captured through a pipe: a spinner drawn with carriage returns
    /// before the table, a UTF-8 name, a wide-character name, cut names and ids, an
    /// ARP id with spaces, rows without a source, and CRLF line ends.
    const LIST_OUTPUT: &str = concat!(
        "\r   - \r   \\ \r   | \r   / \r                                                                                                                        \r",
        "Name                                   Id                                     Version          Available     Source\r\n",
        "------------------------------------------------------------------------------------------------------------------------\r\n",
        "Mozilla Firefox (x64 de)               Mozilla.Firefox.de                     118.0.1          119.0         winget\r\n",
        "7-Zip 22.01 (x64)                      7zip.7zip                              22.01                          winget\r\n",
        "Bücherverwaltung Ünïcödé               Contoso.Bücher                         3.2.1                          winget\r\n",
        "日本語エディタ                         Example.JapaneseEditor                 1.0.0            1.1.0         winget\r\n",
        "Microsoft Visual C++ 2015-2022 Redist… Microsoft.VCRedist.2015+.x64           14.38.33135.0    14.40.33810.0 winget\r\n",
        "Microsoft Edge Update                  ARP\\Machine\\X86\\Microsoft Edge Update  1.3.185.17\r\n",
        "Some Very Long Application Name Here … MSIX\\Contoso.SomeVeryLongApplication…  2.0.0.0\r\n",
        "Windows Terminal                       Microsoft.WindowsTerminal              < 1.19.10573.0                 winget\r\n",
        "2 upgrades available.\r\n",
    );

    #[test]
    fn parses_the_list_table_by_header_positions() {
        let packages = parse_table(LIST_OUTPUT).unwrap();
        let rows: Vec<(&str, &str, &str, &str, &str)> = packages
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.id.as_str(),
                    p.version.as_str(),
                    p.available.as_str(),
                    p.source.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "Mozilla Firefox (x64 de)",
                    "Mozilla.Firefox.de",
                    "118.0.1",
                    "119.0",
                    "winget"
                ),
                ("7-Zip 22.01 (x64)", "7zip.7zip", "22.01", "", "winget"),
                ("Bücherverwaltung Ünïcödé", "Contoso.Bücher", "3.2.1", "", "winget"),
                ("日本語エディタ", "Example.JapaneseEditor", "1.0.0", "1.1.0", "winget"),
                (
                    "Microsoft Visual C++ 2015-2022 Redist…",
                    "Microsoft.VCRedist.2015+.x64",
                    "14.38.33135.0",
                    "14.40.33810.0",
                    "winget"
                ),
                (
                    "Microsoft Edge Update",
                    "ARP\\Machine\\X86\\Microsoft Edge Update",
                    "1.3.185.17",
                    "",
                    ""
                ),
                (
                    "Some Very Long Application Name Here …",
                    "MSIX\\Contoso.SomeVeryLongApplication…",
                    "2.0.0.0",
                    "",
                    ""
                ),
                (
                    "Windows Terminal",
                    "Microsoft.WindowsTerminal",
                    "< 1.19.10573.0",
                    "",
                    "winget"
                ),
            ]
        );
    }

    #[test]
    fn localized_headers_are_read_by_position() {
        let german = "Name              ID                 Version   Verfügbar Quelle\n\
            -----------------------------------------------------------------\n\
            Mozilla Firefox   Mozilla.Firefox    118.0.1   119.0     winget\n\
            Notepad++         Notepad++.Notepad++.X 8.6\n";
        // The last row overflows its Id column, as winget never prints; it is skipped.
        let packages = parse_table(german).unwrap();
        assert_eq!(packages.len(), 1);
        assert_eq!(packages[0].available, "119.0");
        assert_eq!(packages[0].source.as_deref(), Some("winget"));

        let four_with_source = "Nom         ID             Version  Source\n\
            ------------------------------------------\n\
            Git         Git.Git        2.43.0   winget\n\
            Outil local ARP\\Machine\\X64\\x 1.0\n";
        let packages = parse_table(four_with_source).unwrap();
        assert_eq!(packages[0].source.as_deref(), Some("winget"));
        assert_eq!(packages[0].available, "");

        let four_with_available = "Nom         ID             Version  Disponible\n\
            ----------------------------------------------\n\
            Git         Git.Git        2.43.0   2.44.0\n";
        let packages = parse_table(four_with_available).unwrap();
        assert_eq!(packages[0].available, "2.44.0");
        assert_eq!(packages[0].source.as_deref(), Some(""));
    }

    #[test]
    fn no_table_means_no_packages() {
        assert_eq!(
            parse_table("No installed package found matching input criteria.\r\n").unwrap(),
            []
        );
        assert_eq!(parse_table("").unwrap(), []);
        assert_eq!(parse_table("\r   - \r   \\ \r\n").unwrap(), []);
    }

    #[test]
    fn escape_sequences_and_bom_are_not_text() {
        assert_eq!(visible_line("\u{feff}\u{1b}[2K\u{1b}[0GName  Id\r"), "Name  Id");
        assert_eq!(visible_line("spinner \\\rreal text"), "real text");
    }

    #[test]
    fn widths_follow_winget() {
        assert_eq!(width('a'), 1);
        assert_eq!(width('é'), 1);
        assert_eq!(width('…'), 1);
        assert_eq!(width('日'), 2);
        assert_eq!(width('ｱ'), 1, "halfwidth katakana is narrow");
        assert_eq!(width('Ａ'), 2, "fullwidth latin is wide");
        assert_eq!(width('\u{0301}'), 0);
    }

    #[test]
    fn command_lines() {
        let tail = ["--accept-source-agreements", "--disable-interactivity"];
        assert_eq!(list_args(), ["list", tail[0], tail[1]]);
        assert_eq!(
            install_args("Mozilla.Firefox"),
            [
                "install",
                "--id",
                "Mozilla.Firefox",
                "--exact",
                "--silent",
                "--accept-package-agreements",
                tail[0],
                tail[1]
            ]
        );
        assert_eq!(
            uninstall_args("Mozilla.Firefox"),
            [
                "uninstall",
                "--id",
                "Mozilla.Firefox",
                "--exact",
                "--silent",
                tail[0],
                tail[1]
            ]
        );
        assert_eq!(
            upgrade_one_args("Mozilla.Firefox"),
            [
                "upgrade",
                "--id",
                "Mozilla.Firefox",
                "--exact",
                "--silent",
                "--accept-package-agreements",
                tail[0],
                tail[1]
            ]
        );
        assert_eq!(
            upgrade_all_args(),
            [
                "upgrade",
                "--all",
                "--silent",
                "--accept-package-agreements",
                tail[0],
                tail[1]
            ]
        );
        // An id with spaces stays one argument.
        let arp = install_args("ARP\\Machine\\X86\\Microsoft Edge Update");
        assert_eq!(arp[2], "ARP\\Machine\\X86\\Microsoft Edge Update");
    }

    #[test]
    fn picks_the_newest_app_installer() {
        let names: Vec<String> = [
            "Microsoft.DesktopAppInstaller_1.21.3482.0_x64__8wekyb3d8bbwe",
            "Microsoft.DesktopAppInstaller_1.23.1911.0_x64__8wekyb3d8bbwe",
            "Microsoft.DesktopAppInstaller_1.9.25200.0_x64__8wekyb3d8bbwe",
            "Microsoft.DesktopAppInstaller_1.24.1.0_arm64__8wekyb3d8bbwe",
            "Microsoft.DesktopAppInstaller_1.23.1911.0_neutral_~_8wekyb3d8bbwe",
            "Microsoft.WindowsTerminal_1.19.10573.0_x64__8wekyb3d8bbwe",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            newest_app_installer(&names, "x64"),
            Some("Microsoft.DesktopAppInstaller_1.23.1911.0_x64__8wekyb3d8bbwe")
        );
        assert_eq!(
            newest_app_installer(&names, "arm64"),
            Some("Microsoft.DesktopAppInstaller_1.24.1.0_arm64__8wekyb3d8bbwe")
        );
        assert_eq!(
            newest_app_installer(&names, "x86"),
            Some("Microsoft.DesktopAppInstaller_1.24.1.0_arm64__8wekyb3d8bbwe"),
            "any architecture beats none"
        );
        assert_eq!(newest_app_installer(&names[5..], "x64"), None);
    }

    fn ran(code: u32, stdout: &str) -> Ran {
        Ran {
            exit_code: Some(code as i32),
            stdout: stdout.into(),
            stderr: String::new(),
            cut: false,
        }
    }

    #[test]
    fn exit_codes_map_to_outcomes() {
        let done = finish(
            "install",
            Some("Mozilla.Firefox"),
            &ran(0, "Successfully installed\r\n"),
        )
        .unwrap();
        assert!(done.changed);
        assert_eq!(done.exit_code, Some(0));

        let missing = finish(
            "install",
            Some("Contoso.Nope"),
            &ran(0x8A15_0014, "No package found matching input criteria.\r\n"),
        )
        .unwrap_err();
        assert_eq!(missing.code, ErrorCode::NotFound);
        assert!(missing.message.contains("0x8A150014"), "{}", missing.message);
        assert!(
            missing.message.contains("No package found matching input criteria."),
            "{}",
            missing.message
        );

        let current = finish(
            "upgrade",
            Some("7zip.7zip"),
            &ran(0x8A15_002B, "No applicable update found.\r\n"),
        )
        .unwrap();
        assert!(!current.changed);
        assert_eq!(current.exit_code, Some(0x8A15_002Bu32 as i32));
        assert!(current.note.is_some());

        let present = finish(
            "install",
            Some("Git.Git"),
            &ran(0x8A15_0061, "Found an existing package already installed.\r\n"),
        )
        .unwrap();
        assert!(!present.changed);

        let reboot = finish(
            "install",
            Some("X.Y"),
            &ran(0x8A15_0109, "Restart your PC to finish installation.\r\n"),
        )
        .unwrap();
        assert!(reboot.changed);
        assert!(reboot.note.unwrap().contains("restart"));

        let busy = finish(
            "install",
            Some("X.Y"),
            &ran(0x8A15_0102, "Installer failed with exit code: 1618\r\n"),
        )
        .unwrap_err();
        assert_eq!(busy.code, ErrorCode::ExecFailed);
        assert!(
            busy.message.contains("another installation is in progress"),
            "{}",
            busy.message
        );
        assert!(
            busy.message.contains("Installer failed with exit code: 1618"),
            "{}",
            busy.message
        );

        let unknown = finish("uninstall", Some("X.Y"), &ran(0x8000_4005, "Unexpected error\r\n")).unwrap_err();
        assert_eq!(unknown.code, ErrorCode::ExecFailed);
        assert!(unknown.message.contains("0x80004005"), "{}", unknown.message);

        let killed = Ran {
            exit_code: None,
            ..ran(0, "")
        };
        assert_eq!(
            finish("install", Some("X.Y"), &killed).unwrap_err().code,
            ErrorCode::ExecFailed
        );
    }
}
