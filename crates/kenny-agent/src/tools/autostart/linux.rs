//! Linux: enabled systemd units, XDG autostart entries and cron `@reboot` lines.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Map;
use tokio::process::Command;

use super::Entry;
use crate::tools::process::run_captured;

const COMMAND_LIMIT: Duration = Duration::from_secs(20);
const OUTPUT_CAP: usize = 4 * 1024 * 1024;
const MAX_FILE_BYTES: u64 = 256 * 1024;
const MAX_DIR_ENTRIES: usize = 1000;

// ---- systemd ----

/// Enabled unit files, with the command of each service. Problems become notes: the
/// other sources are still worth listing.
pub(super) async fn systemd_units(notes: &mut Vec<String>) -> Vec<Entry> {
    let table = match systemctl(&[
        "list-unit-files",
        "--state=enabled",
        "--no-pager",
        "--full",
        "--plain",
        "--no-legend",
    ])
    .await
    {
        Ok(table) => table,
        Err(e) => {
            notes.push(format!("enabled systemd units could not be listed: {e}"));
            return Vec::new();
        }
    };
    let units = parse_unit_files(&table);
    // Templates (getty@.service) have no properties of their own to show.
    let services: Vec<&str> = units
        .iter()
        .map(String::as_str)
        .filter(|u| u.ends_with(".service") && !u.contains("@."))
        .collect();
    let details = if services.is_empty() {
        Vec::new()
    } else {
        let mut args = vec!["show", "--no-pager", "--property=Id,ExecStart,FragmentPath,User"];
        args.extend(&services);
        match systemctl(&args).await {
            Ok(text) => parse_show(&text),
            Err(e) => {
                notes.push(format!("the commands of enabled services could not be read: {e}"));
                Vec::new()
            }
        }
    };
    units
        .into_iter()
        .map(|unit| {
            let detail = details.iter().find(|d| d.id == unit);
            Entry {
                kind: "systemd",
                command: detail.and_then(|d| d.exec_start.clone()),
                location: detail
                    .and_then(|d| d.fragment_path.clone())
                    .unwrap_or_else(|| "systemd".to_owned()),
                enabled: Some(true),
                user: detail.map(|d| d.user.clone().unwrap_or_else(|| "root".to_owned())),
                name: unit,
                extra: Map::new(),
            }
        })
        .collect()
}

async fn systemctl(args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new("systemctl");
    cmd.args(args).env("SYSTEMD_COLORS", "0");
    let out = run_captured(cmd, None, COMMAND_LIMIT, OUTPUT_CAP)
        .await
        .map_err(|e| e.message)?;
    if !out.status.success() {
        return Err(format!(
            "`systemctl {}` failed: {}",
            args[0],
            out.stderr.into_text().trim()
        ));
    }
    Ok(out.stdout.into_text())
}

/// `list-unit-files --plain --no-legend`: `UNIT STATE [PRESET]` a line.
pub(super) fn parse_unit_files(table: &str) -> Vec<String> {
    table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let unit = fields.next()?;
            (fields.next()? == "enabled").then(|| unit.to_owned())
        })
        .collect()
}

#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct UnitDetail {
    pub id: String,
    pub exec_start: Option<String>,
    pub fragment_path: Option<String>,
    pub user: Option<String>,
}

/// `systemctl show --property=...` for several units: `Key=value` blocks separated by a
/// blank line. ExecStart reads `{ path=... ; argv[]=/usr/sbin/sshd -D ; ... }`.
pub(super) fn parse_show(text: &str) -> Vec<UnitDetail> {
    let mut details = Vec::new();
    let mut current = UnitDetail::default();
    for line in text.lines().chain([""]) {
        if line.trim().is_empty() {
            if !current.id.is_empty() {
                details.push(std::mem::take(&mut current));
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let value_or_none = || (!value.is_empty()).then(|| value.to_owned());
        match key {
            "Id" => current.id = value.to_owned(),
            "FragmentPath" => current.fragment_path = value_or_none(),
            "User" => current.user = value_or_none(),
            "ExecStart" => {
                if let Some(argv) = exec_argv(value) {
                    current.exec_start = Some(match current.exec_start.take() {
                        Some(earlier) => format!("{earlier}; {argv}"),
                        None => argv,
                    });
                }
            }
            _ => {}
        }
    }
    details
}

fn exec_argv(value: &str) -> Option<String> {
    let start = value.find("argv[]=")? + "argv[]=".len();
    let rest = &value[start..];
    let end = rest.find(" ;").unwrap_or(rest.len());
    Some(rest[..end].trim().to_owned()).filter(|argv| !argv.is_empty())
}

// ---- files: XDG autostart and cron ----

/// Everything found under `root` (`/` normally). Unreadable places become notes.
pub(super) fn scan_files(root: &Path) -> (Vec<Entry>, Vec<String>) {
    let mut scan = Scan::default();
    scan.xdg_dir(&root.join("etc/xdg/autostart"), None);
    for (user, home) in homes(root, &mut scan.notes) {
        scan.xdg_dir(&home.join(".config/autostart"), Some(&user));
    }
    scan.crontab(&root.join("etc/crontab"), CronFormat::System);
    for file in scan.files_in(&root.join("etc/cron.d")) {
        // cron skips files whose names have dots or other run-parts-invalid characters
        // (editor backups, .dpkg-old), so those never run.
        if file_name(&file).is_some_and(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
            scan.crontab(&file, CronFormat::System);
        }
    }
    // Debian keeps user crontabs in crontabs/, Red Hat directly in /var/spool/cron.
    for dir in ["var/spool/cron/crontabs", "var/spool/cron"] {
        for file in scan.files_in(&root.join(dir)) {
            if let Some(user) = file_name(&file) {
                scan.crontab(&file, CronFormat::User(user));
            }
        }
    }
    (scan.entries, scan.notes)
}

#[derive(Default)]
struct Scan {
    entries: Vec<Entry>,
    notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum CronFormat {
    /// /etc/crontab and /etc/cron.d: a user column before the command.
    System,
    /// A user's own crontab.
    User(String),
}

impl Scan {
    fn xdg_dir(&mut self, dir: &Path, user: Option<&str>) {
        for file in self.files_in(dir) {
            if file.extension().is_none_or(|ext| ext != "desktop") {
                continue;
            }
            let Some(text) = self.read(&file) else {
                continue;
            };
            let desktop = parse_desktop(&text);
            let stem = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            self.entries.push(Entry {
                kind: "xdg",
                name: desktop.name.unwrap_or(stem),
                command: desktop.exec,
                location: file.to_string_lossy().into_owned(),
                enabled: Some(desktop.enabled),
                user: user.map(str::to_owned),
                extra: Map::new(),
            });
        }
    }

    fn crontab(&mut self, file: &Path, format: CronFormat) {
        if !file.is_file() {
            return;
        }
        let Some(text) = self.read(file) else {
            return;
        };
        for (user, command) in reboot_lines(&text, &format) {
            self.entries.push(Entry {
                kind: "cron",
                name: program_name(&command),
                command: Some(command),
                location: file.to_string_lossy().into_owned(),
                enabled: Some(true),
                user: Some(user),
                extra: Map::new(),
            });
        }
    }

    fn files_in(&mut self, dir: &Path) -> Vec<PathBuf> {
        visible_files_in(dir, MAX_DIR_ENTRIES, &mut self.notes)
    }

    fn read(&mut self, file: &Path) -> Option<String> {
        let mut bytes = Vec::new();
        let read = open_regular(file).and_then(|f| f.take(MAX_FILE_BYTES).read_to_end(&mut bytes));
        match read {
            Ok(_) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) => {
                self.notes.push(format!("cannot read {}: {e}", file.display()));
                None
            }
        }
    }
}

/// Opens a file a user controls without letting it stall the agent: non-blocking (a FIFO
/// swapped in after the listing would block `open` forever) and only if it is, once
/// open, a regular file.
fn open_regular(file: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let opened = options.open(file)?;
    if opened.metadata()?.is_file() {
        Ok(opened)
    } else {
        Err(std::io::Error::other("not a regular file"))
    }
}

/// Home directories: every directory in /home, plus root's.
fn homes(root: &Path, notes: &mut Vec<String>) -> Vec<(String, PathBuf)> {
    let mut homes = Vec::new();
    match std::fs::read_dir(root.join("home")) {
        Ok(entries) => {
            for entry in entries.flatten().take(MAX_DIR_ENTRIES) {
                let path = entry.path();
                if path.is_dir() {
                    homes.push((entry.file_name().to_string_lossy().into_owned(), path));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => notes.push(format!("cannot list {}: {e}", root.join("home").display())),
    }
    homes.sort();
    homes.push(("root".to_owned(), root.join("root")));
    homes
}

/// Regular, not hidden files among the first `max` entries of `dir`, sorted; a missing
/// directory is simply empty, one that cannot be listed says so in `notes`.
pub(crate) fn visible_files_in(dir: &Path, max: usize, notes: &mut Vec<String>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            notes.push(format!("cannot list {}: {e}", dir.display()));
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .take(max)
        .map(|e| e.path())
        .filter(|p| p.is_file() && !file_name(p).is_some_and(|n| n.starts_with('.')))
        .collect();
    files.sort();
    files
}

pub(crate) fn file_name(path: &Path) -> Option<String> {
    path.file_name().map(|n| n.to_string_lossy().into_owned())
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct Desktop {
    pub name: Option<String>,
    pub exec: Option<String>,
    pub enabled: bool,
}

/// The `[Desktop Entry]` group of a .desktop file. `Hidden=true` means deleted, and
/// GNOME's `X-GNOME-Autostart-enabled=false` means switched off in its settings.
pub(super) fn parse_desktop(text: &str) -> Desktop {
    let mut desktop = Desktop {
        name: None,
        exec: None,
        enabled: true,
    };
    let mut in_entry = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_entry = line == "[Desktop Entry]";
            continue;
        }
        if !in_entry || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "Name" => desktop.name = Some(value.to_owned()).filter(|v| !v.is_empty()),
            "Exec" => desktop.exec = Some(value.to_owned()).filter(|v| !v.is_empty()),
            "Hidden" if value.eq_ignore_ascii_case("true") => desktop.enabled = false,
            "X-GNOME-Autostart-enabled" if value.eq_ignore_ascii_case("false") => desktop.enabled = false,
            _ => {}
        }
    }
    desktop
}

/// `(user, command)` of each `@reboot` line.
fn reboot_lines(text: &str, format: &CronFormat) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("@reboot")?;
            if !rest.starts_with(char::is_whitespace) {
                return None;
            }
            let rest = rest.trim();
            match format {
                CronFormat::User(user) => Some((user.clone(), rest.to_owned())),
                CronFormat::System => {
                    let (user, command) = rest.split_once(char::is_whitespace)?;
                    Some((user.to_owned(), command.trim().to_owned()))
                }
            }
        })
        .filter(|(_, command)| !command.is_empty())
        .collect()
}

/// What a command line runs, for the `name` column: `/usr/bin/foo --x` is `foo`.
fn program_name(command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or(command);
    first.rsplit('/').next().unwrap_or(first).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_fifo_cannot_stall_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("trap.desktop");
        let c_path = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
        let err = open_regular(&fifo).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file");
        let file = dir.path().join("ok.desktop");
        std::fs::write(&file, "[Desktop Entry]\n").unwrap();
        assert!(open_regular(&file).is_ok());
    }

    #[test]
    fn enabled_unit_files_from_the_table() {
        // Recorded from systemd 252: `list-unit-files --state=enabled --plain --no-legend`.
        let table = "\
avahi-daemon.service      enabled enabled
getty@.service            enabled enabled
ssh.service               enabled enabled
avahi-daemon.socket       enabled enabled
remote-fs.target          enabled enabled
odd.service               static  -
";
        assert_eq!(
            parse_unit_files(table),
            [
                "avahi-daemon.service",
                "getty@.service",
                "ssh.service",
                "avahi-daemon.socket",
                "remote-fs.target"
            ]
        );
    }

    #[test]
    fn unit_details_from_systemctl_show() {
        let text = "\
Id=ssh.service
ExecStart={ path=/usr/sbin/sshd ; argv[]=/usr/sbin/sshd -D $SSHD_OPTS ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
FragmentPath=/lib/systemd/system/ssh.service
User=

Id=myapp.service
ExecStart={ path=/usr/bin/mkdir ; argv[]=/usr/bin/mkdir -p /run/myapp ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
ExecStart={ path=/opt/myapp/bin/myapp ; argv[]=/opt/myapp/bin/myapp --serve ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
FragmentPath=/etc/systemd/system/myapp.service
User=myapp
";
        let details = parse_show(text);
        assert_eq!(
            details,
            [
                UnitDetail {
                    id: "ssh.service".into(),
                    exec_start: Some("/usr/sbin/sshd -D $SSHD_OPTS".into()),
                    fragment_path: Some("/lib/systemd/system/ssh.service".into()),
                    user: None,
                },
                UnitDetail {
                    id: "myapp.service".into(),
                    exec_start: Some("/usr/bin/mkdir -p /run/myapp; /opt/myapp/bin/myapp --serve".into()),
                    fragment_path: Some("/etc/systemd/system/myapp.service".into()),
                    user: Some("myapp".into()),
                },
            ]
        );
        assert!(parse_show("").is_empty());
        assert_eq!(parse_show("Id=x.service\nExecStart=\n")[0].exec_start, None);
    }

    #[test]
    fn desktop_files() {
        let enabled = parse_desktop(
            "# comment\n[Desktop Entry]\nType=Application\nName=Nextcloud\nName[de]=Nextcloud DE\nExec=/usr/bin/nextcloud --background\n\n[Desktop Action New]\nName=Other\nExec=other\n",
        );
        assert_eq!(
            enabled,
            Desktop {
                name: Some("Nextcloud".into()),
                exec: Some("/usr/bin/nextcloud --background".into()),
                enabled: true
            }
        );
        assert!(!parse_desktop("[Desktop Entry]\nName=x\nHidden=true\n").enabled);
        assert!(!parse_desktop("[Desktop Entry]\nName=x\nX-GNOME-Autostart-enabled=false\n").enabled);
        assert!(parse_desktop("[Desktop Entry]\nX-GNOME-Autostart-enabled=true\nHidden=false\n").enabled);
        assert_eq!(parse_desktop("Name=outside any group\n").name, None);
    }

    #[test]
    fn reboot_lines_in_both_crontab_formats() {
        let system = "\
SHELL=/bin/sh
# @reboot root commented out
17 *  * * *  root  cd / && run-parts --report /etc/cron.hourly
@reboot   root   /usr/local/bin/warm-cache --all
@rebooted root not-a-reboot-line
@reboot onlyuser
";
        assert_eq!(
            reboot_lines(system, &CronFormat::System),
            [("root".to_owned(), "/usr/local/bin/warm-cache --all".to_owned())]
        );
        let user = "@reboot sleep 60 && ~/bin/sync.sh\n  @reboot\t/usr/bin/tmux new -d\n";
        assert_eq!(
            reboot_lines(user, &CronFormat::User("kim".into())),
            [
                ("kim".to_owned(), "sleep 60 && ~/bin/sync.sh".to_owned()),
                ("kim".to_owned(), "/usr/bin/tmux new -d".to_owned())
            ]
        );
        assert_eq!(program_name("/usr/local/bin/warm-cache --all"), "warm-cache");
        assert_eq!(program_name("sleep 60"), "sleep");
    }

    #[test]
    fn scans_a_fake_root_for_every_kind() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let write = |rel: &str, text: &str| {
            let path = r.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "etc/xdg/autostart/print-applet.desktop",
            "[Desktop Entry]\nName=Print Applet\nExec=print-applet\n",
        );
        write("etc/xdg/autostart/notes.txt", "not a desktop file");
        write(
            "home/kim/.config/autostart/chat.desktop",
            "[Desktop Entry]\nExec=chat --tray\nHidden=true\n",
        );
        write(
            "root/.config/autostart/admin.desktop",
            "[Desktop Entry]\nName=Admin\nExec=admin\n",
        );
        write("etc/crontab", "@reboot root /sbin/sys-boot\n");
        write("etc/cron.d/backup", "@reboot backup /usr/bin/backup --now\n");
        write("etc/cron.d/backup.dpkg-old", "@reboot root /never/runs\n");
        write("var/spool/cron/crontabs/kim", "@reboot /home/kim/bin/start.sh\n");
        write("var/spool/cron/ana", "@reboot /home/ana/go\n");

        let (entries, notes) = scan_files(r);
        assert!(notes.is_empty(), "{notes:?}");
        let summary: Vec<(&str, &str, Option<&str>, Option<bool>)> = entries
            .iter()
            .map(|e| (e.kind, e.name.as_str(), e.user.as_deref(), e.enabled))
            .collect();
        assert_eq!(
            summary,
            [
                ("xdg", "Print Applet", None, Some(true)),
                ("xdg", "chat", Some("kim"), Some(false)),
                ("xdg", "Admin", Some("root"), Some(true)),
                ("cron", "sys-boot", Some("root"), Some(true)),
                ("cron", "backup", Some("backup"), Some(true)),
                ("cron", "start.sh", Some("kim"), Some(true)),
                ("cron", "go", Some("ana"), Some(true)),
            ]
        );
        assert_eq!(entries[1].command.as_deref(), Some("chat --tray"));
        assert_eq!(
            entries[1].location,
            r.join("home/kim/.config/autostart/chat.desktop").to_string_lossy()
        );
        assert_eq!(entries[4].location, r.join("etc/cron.d/backup").to_string_lossy());
    }

    #[test]
    fn an_empty_root_has_nothing_and_no_complaints() {
        let root = tempfile::tempdir().unwrap();
        let (entries, notes) = scan_files(root.path());
        assert!(entries.is_empty());
        assert!(notes.is_empty(), "{notes:?}");
    }
}
