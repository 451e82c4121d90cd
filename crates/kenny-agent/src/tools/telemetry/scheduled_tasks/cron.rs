//! Cron jobs: /etc/crontab, /etc/cron.d, the run-parts folders (/etc/cron.hourly, ...)
//! and the users' crontabs in /var/spool/cron.

use std::path::{Path, PathBuf};

use super::Task;
use crate::tools::autostart::{file_name, visible_files_in};
use crate::tools::telemetry::files::read_text;

/// A crontab is a few lines; this is for a hostile or broken file.
const FILE_CAP: u64 = 256 * 1024;
/// Files looked at in one folder.
const MAX_FILES: usize = 500;
const RUN_PARTS: [&str; 4] = ["hourly", "daily", "weekly", "monthly"];

/// Every job under `etc` (`/etc`) and `spool` (`/var/spool/cron`), and what could not
/// be read.
pub(super) fn cron_at(etc: &Path, spool: &Path) -> (Vec<Task>, Vec<String>) {
    let mut scan = Scan::default();
    scan.crontab(&etc.join("crontab"), None);
    for file in scan.files_in(&etc.join("cron.d")) {
        // cron skips names run-parts would refuse (editor backups, .dpkg-old): they never run.
        if file_name(&file).is_some_and(|n| run_parts_name(&n)) {
            scan.crontab(&file, None);
        }
    }
    for period in RUN_PARTS {
        let dir = etc.join(format!("cron.{period}"));
        for file in scan.files_in(&dir) {
            let Some(name) = file_name(&file).filter(|n| run_parts_name(n)) else {
                continue;
            };
            scan.tasks.push(Task {
                path: dir.display().to_string(),
                name,
                state: "enabled".to_owned(),
                action: Some(file.display().to_string()),
                run_as: Some("root".to_owned()),
                schedule: Some(period.to_owned()),
                ..Task::default()
            });
        }
    }
    // Debian keeps users' crontabs in crontabs/, Red Hat directly in /var/spool/cron.
    for dir in [spool.join("crontabs"), spool.to_path_buf()] {
        for file in scan.files_in(&dir) {
            if let Some(user) = file_name(&file) {
                scan.crontab(&file, Some(&user));
            }
        }
    }
    (scan.tasks, scan.notes)
}

#[derive(Default)]
struct Scan {
    tasks: Vec<Task>,
    notes: Vec<String>,
}

impl Scan {
    /// `user` is the crontab's owner; `None` for system crontabs, whose lines name the user.
    fn crontab(&mut self, file: &Path, user: Option<&str>) {
        match read_text(file, FILE_CAP) {
            Ok((text, _)) => {
                let path = file.display().to_string();
                self.tasks
                    .extend(parse_crontab(&text, user).into_iter().map(|job| Task {
                        path: path.clone(),
                        ..job
                    }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => self.notes.push(format!("cannot read {}: {e}", file.display())),
        }
    }

    fn files_in(&mut self, dir: &Path) -> Vec<PathBuf> {
        visible_files_in(dir, MAX_FILES, &mut self.notes)
    }
}

/// Names run-parts (and cron for /etc/cron.d) accept: letters, digits, `_` and `-`.
fn run_parts_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The jobs of one crontab. System crontabs have a user column after the schedule;
/// a user's own crontab (`owner`) does not.
pub(super) fn parse_crontab(text: &str, owner: Option<&str>) -> Vec<Task> {
    text.lines().filter_map(|line| parse_line(line.trim(), owner)).collect()
}

fn parse_line(line: &str, owner: Option<&str>) -> Option<Task> {
    if line.is_empty() || line.starts_with('#') || is_assignment(line) {
        return None;
    }
    let mut rest = line;
    let schedule = if line.starts_with('@') {
        let (nickname, after) = split_word(rest)?;
        rest = after;
        nickname.to_owned()
    } else {
        let mut fields = Vec::with_capacity(5);
        for _ in 0..5 {
            let (field, after) = split_word(rest)?;
            fields.push(field);
            rest = after;
        }
        fields.join(" ")
    };
    let (user, command) = match owner {
        Some(owner) => (owner.to_owned(), rest.trim()),
        None => {
            let (user, after) = split_word(rest)?;
            (user.to_owned(), after.trim())
        }
    };
    if command.is_empty() {
        return None;
    }
    Some(Task {
        name: program_name(command),
        state: "enabled".to_owned(),
        action: Some(command.to_owned()),
        run_as: Some(user),
        schedule: Some(schedule),
        ..Task::default()
    })
}

/// `NAME=value` lines set the environment for the jobs below them.
fn is_assignment(line: &str) -> bool {
    let word = line.split_whitespace().next().unwrap_or_default();
    word.contains('=') || line.split_once('=').is_some_and(|(name, _)| !name.trim().contains(' '))
}

fn split_word(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    if text.is_empty() {
        return None;
    }
    Some(text.split_once(char::is_whitespace).unwrap_or((text, "")))
}

/// What a command line runs, for the `name` column: `/usr/bin/foo --x` is `foo`, and
/// the guards cron lines often start with are skipped: `test -x /usr/sbin/anacron || (cd
/// / && run-parts --report /etc/cron.daily)` runs `run-parts`.
fn program_name(command: &str) -> String {
    const GUARDS: [&str; 4] = ["test", "[", "cd", "true"];
    let programs: Vec<&str> = command
        .split("||")
        .flat_map(|part| part.split("&&"))
        .flat_map(|part| part.split(';'))
        .filter_map(|part| {
            part.split_whitespace()
                .map(|word| word.trim_start_matches(['(', '{']))
                .find(|word| !word.is_empty() && !word.contains('=') && !matches!(*word, "}" | ")"))
        })
        .collect();
    let program = programs
        .iter()
        .rev()
        .find(|p| !GUARDS.contains(p))
        .or(programs.first())
        .copied()
        .unwrap_or(command);
    program.rsplit('/').next().unwrap_or(program).to_owned()
}
