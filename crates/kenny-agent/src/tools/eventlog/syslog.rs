//! Classic syslog files (/var/log/syslog, /var/log/messages), for PCs without a journal.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use time::format_description::well_known::Rfc3339;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time};

use super::{Entry, Query, render};
use crate::tools::bounded::lossy_text;
use crate::tools::{ToolError, ToolResult};

pub(super) const DEFAULT_FILES: [&str; 2] = ["/var/log/syslog", "/var/log/messages"];
/// Only the end of the file is read: recent entries are what the tool is for, and a
/// syslog file can grow to gigabytes between rotations.
const TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// A parsed syslog line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Line {
    pub time: OffsetDateTime,
    pub tag: Option<String>,
    pub pid: Option<u64>,
    pub message: String,
}

/// Reads the tail of `file` and answers `query` from it, newest first. Blocking.
pub(super) fn query(file: &Path, query: &Query, now: OffsetDateTime, mut notes: Vec<String>) -> ToolResult {
    let shown = file.display().to_string();
    let (bytes, cut) = tail(file, TAIL_BYTES).map_err(|e| ToolError::io(&shown, &e))?;
    let text = lossy_text(&bytes, false);
    let picked = select(&text, cut, query, now, &local_to_utc);
    notes.push(
        "syslog files do not record priorities, so `priority` was not applied: entries of every level are listed"
            .to_owned(),
    );
    if query.unit.is_some() {
        notes.push(
            "`unit` matched the program tag of each line (`sshd` in `sshd[123]: ...`), ignoring a `.service` suffix"
                .to_owned(),
        );
    }
    if cut {
        notes.push(format!(
            "only the last {} MiB of {shown} were read",
            TAIL_BYTES / (1024 * 1024)
        ));
    }
    if picked.unparsed > 0 {
        notes.push(format!(
            "{} line(s) without a syslog timestamp were skipped",
            picked.unparsed
        ));
    }
    let mut result = render("syslog", picked.entries, picked.truncated, notes);
    result["file"] = shown.into();
    Ok(result)
}

/// The last `max` bytes of a file, starting at a line boundary; `true` when that is
/// not the whole file.
fn tail(path: &Path, max: u64) -> std::io::Result<(Vec<u8>, bool)> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(max);
    // From one byte earlier: if that byte ends a line, the window starts on a whole line.
    let from = start.saturating_sub(1);
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(len - from).read_to_end(&mut bytes)?;
    if start > 0 {
        let first_line_end = bytes.iter().position(|&b| b == b'\n').map_or(bytes.len(), |at| at + 1);
        bytes.drain(..first_line_end);
    }
    Ok((bytes, start > 0))
}

#[derive(Debug, Default)]
pub(super) struct Picked {
    pub entries: Vec<Entry>,
    pub truncated: bool,
    pub unparsed: usize,
}

/// The newest lines of `text` that match `query`. `window_cut` says older lines exist
/// that were not read: if nothing read was older than `since`, matches may lie there.
pub(super) fn select(
    text: &str,
    window_cut: bool,
    query: &Query,
    now: OffsetDateTime,
    to_utc: &dyn Fn(PrimitiveDateTime) -> Option<OffsetDateTime>,
) -> Picked {
    let unit = query.unit.as_deref().map(unit_stem);
    let mut picked = Picked::default();
    let mut reached_since = false;
    for raw in text.lines().rev() {
        if raw.trim().is_empty() {
            continue;
        }
        let Some(line) = parse_line(raw, now, to_utc) else {
            picked.unparsed += 1;
            continue;
        };
        if line.time < query.since {
            reached_since = true;
            continue;
        }
        if let Some(unit) = &unit
            && !line.tag.as_deref().is_some_and(|tag| tag.eq_ignore_ascii_case(unit))
        {
            continue;
        }
        if picked.entries.len() == query.limit {
            picked.truncated = true;
            break;
        }
        picked.entries.push(Entry {
            time: Some(line.time),
            severity: None,
            unit: line.tag,
            message: line.message,
            pid: line.pid,
            event_id: None,
        });
    }
    if window_cut && !reached_since && !picked.truncated {
        picked.truncated = true;
    }
    picked
}

fn unit_stem(unit: &str) -> String {
    let lower = unit.to_ascii_lowercase();
    lower.strip_suffix(".service").map(str::to_owned).unwrap_or(lower)
}

/// `2024-05-10T14:03:01.123456+02:00 host tag[pid]: message` (rsyslog's high-precision
/// format, Debian's default) or `May 10 14:03:01 host tag[pid]: message` (RFC 3164:
/// local time, no year).
pub(super) fn parse_line(
    line: &str,
    now: OffsetDateTime,
    to_utc: &dyn Fn(PrimitiveDateTime) -> Option<OffsetDateTime>,
) -> Option<Line> {
    let (time, rest) = rfc3339_prefix(line).or_else(|| rfc3164_prefix(line, now, to_utc))?;
    let rest = rest.trim_start();
    let host_end = rest.find(char::is_whitespace)?;
    let (tag, pid, message) = split_tag(rest[host_end..].trim_start());
    Some(Line {
        time,
        tag,
        pid,
        message: message.to_owned(),
    })
}

fn rfc3339_prefix(line: &str) -> Option<(OffsetDateTime, &str)> {
    let end = line.find(' ')?;
    let time = OffsetDateTime::parse(&line[..end], &Rfc3339).ok()?;
    Some((time, &line[end..]))
}

fn rfc3164_prefix<'a>(
    line: &'a str,
    now: OffsetDateTime,
    to_utc: &dyn Fn(PrimitiveDateTime) -> Option<OffsetDateTime>,
) -> Option<(OffsetDateTime, &'a str)> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| line.get(..3) == Some(m))?;
    let month = Month::try_from(u8::try_from(month + 1).ok()?).ok()?;
    if line.get(3..4) != Some(" ") || line.get(6..7) != Some(" ") || line.get(15..16) != Some(" ") {
        return None;
    }
    let day: u8 = line.get(4..6)?.trim_start().parse().ok()?;
    let clock = line.get(7..15)?;
    let mut parts = clock.split(':').map(|p| p.parse::<u8>().ok());
    let (Some(Some(h)), Some(Some(m)), Some(Some(s)), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let time = Time::from_hms(h, m, s).ok()?;
    // No year in the line: the latest year that does not put it in the future (a day
    // of slack for clocks and zones), so December lines read in January land last year.
    let year = now.year();
    let at = [year + 1, year, year - 1].into_iter().find_map(|year| {
        let date = Date::from_calendar_date(year, month, day).ok()?;
        to_utc(PrimitiveDateTime::new(date, time)).filter(|&t| t <= now + time::Duration::days(1))
    })?;
    Some((at, &line[15..]))
}

/// `tag[pid]: message`, `tag: message`, or a bare message.
fn split_tag(rest: &str) -> (Option<String>, Option<u64>, &str) {
    let token_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let Some(tag) = rest[..token_end].strip_suffix(':') else {
        return (None, None, rest);
    };
    let message = rest[token_end..].trim_start();
    let (name, pid) = match tag.strip_suffix(']').and_then(|t| t.split_once('[')) {
        Some((name, pid)) => (name, pid.parse().ok()),
        None => (tag, None),
    };
    let name = (!name.is_empty()).then(|| name.to_owned());
    (name, pid, message)
}

/// This PC's local time (as RFC 3164 lines are written) to UTC, daylight saving included.
#[cfg(unix)]
fn local_to_utc(local: PrimitiveDateTime) -> Option<OffsetDateTime> {
    // SAFETY: an all-zero `tm` is a valid value (null zone name pointer included).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = local.year() - 1900;
    tm.tm_mon = i32::from(u8::from(local.month())) - 1;
    tm.tm_mday = i32::from(local.day());
    tm.tm_hour = i32::from(local.hour());
    tm.tm_min = i32::from(local.minute());
    tm.tm_sec = i32::from(local.second());
    tm.tm_isdst = -1; // let the zone rules decide
    // SAFETY: mktime reads and normalises the struct we own; it is thread-safe in glibc
    // and musl (it takes the zone lock itself).
    let secs = unsafe { libc::mktime(&mut tm) };
    if secs == -1 {
        return None;
    }
    #[allow(clippy::useless_conversion, reason = "time_t is 32 bits on some targets")]
    let secs = i64::from(secs);
    OffsetDateTime::from_unix_timestamp(secs).ok()
}

#[cfg(not(unix))]
fn local_to_utc(local: PrimitiveDateTime) -> Option<OffsetDateTime> {
    Some(local.assume_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::eventlog::Priority;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2024-05-10 12:00:00 UTC);

    fn utc(local: PrimitiveDateTime) -> Option<OffsetDateTime> {
        Some(local.assume_utc())
    }

    fn parse(line: &str) -> Option<Line> {
        parse_line(line, NOW, &utc)
    }

    fn query(unit: Option<&str>, since: OffsetDateTime, limit: usize) -> Query {
        Query {
            since,
            priority: Priority::Warning,
            unit: unit.map(str::to_owned),
            limit,
            log: None,
        }
    }

    #[test]
    fn rfc3339_lines_as_debian_writes_them() {
        let line = parse("2024-05-10T14:03:01.123456+02:00 pc-a sshd[1234]: Accepted publickey for kim").unwrap();
        assert_eq!(
            line,
            Line {
                time: datetime!(2024-05-10 12:03:01.123456 UTC),
                tag: Some("sshd".into()),
                pid: Some(1234),
                message: "Accepted publickey for kim".into(),
            }
        );
        let kernel = parse("2024-05-10T11:00:00Z pc-a kernel: [  12.5] EXT4-fs (sda1): mounted").unwrap();
        assert_eq!(kernel.tag.as_deref(), Some("kernel"));
        assert_eq!(kernel.pid, None);
        assert_eq!(kernel.message, "[  12.5] EXT4-fs (sda1): mounted");
    }

    #[test]
    fn rfc3164_lines_get_a_year() {
        let line = parse("May  9 08:15:00 pc-a CRON[77]: (root) CMD (run-parts /etc/cron.hourly)").unwrap();
        assert_eq!(line.time, datetime!(2024-05-09 08:15:00 UTC));
        assert_eq!(line.tag.as_deref(), Some("CRON"));
        assert_eq!(line.pid, Some(77));
        assert_eq!(line.message, "(root) CMD (run-parts /etc/cron.hourly)");
        // December, read in May: last December, not this coming one.
        assert_eq!(
            parse("Dec 31 23:59:59 pc-a x: y").unwrap().time,
            datetime!(2023-12-31 23:59:59 UTC)
        );
        // Tomorrow, within a day of slack (a clock or zone a little ahead) stays this year.
        assert_eq!(
            parse("May 11 01:00:00 pc-a x: y").unwrap().time,
            datetime!(2024-05-11 01:00:00 UTC)
        );
        assert_eq!(
            parse("May 10 12:00:00 pc-a postfix/smtpd[9]: connect")
                .unwrap()
                .tag
                .as_deref(),
            Some("postfix/smtpd")
        );
        // Read on New Year's morning, a January line is this year's.
        let jan = parse_line("Jan  1 00:10:00 h t: m", datetime!(2025-01-01 00:30:00 UTC), &utc).unwrap();
        assert_eq!(jan.time, datetime!(2025-01-01 00:10:00 UTC));
        // 29 February only exists in some years: the latest past one is used.
        let leap = parse_line("Feb 29 10:00:00 h t: m", datetime!(2025-03-01 00:00:00 UTC), &utc).unwrap();
        assert_eq!(leap.time, datetime!(2024-02-29 10:00:00 UTC));
    }

    #[test]
    fn lines_without_a_tag_or_timestamp() {
        let bare = parse("2024-05-10T11:00:00Z pc-a -- MARK --").unwrap();
        assert_eq!(bare.tag, None);
        assert_eq!(bare.message, "-- MARK --");
        let empty_tag = parse("2024-05-10T11:00:00Z pc-a [1]: odd").unwrap();
        assert_eq!((empty_tag.tag, empty_tag.pid), (None, Some(1)));
        for garbage in [
            "",
            "hello world",
            "Foo 10 12:00:00 host x: y",
            "May 10 12:00 host x: y",
            "May 10 25:00:00 host x: y",
            "May 32 12:00:00 host x: y",
            "2024-05-10 11:00:00 host x: y",
            "2024-05-10T11:00:00Z",
            "Mäy 10 12:00:00 host x: y",
        ] {
            assert_eq!(parse(garbage), None, "{garbage:?}");
        }
    }

    const LOG: &str = "\
May  8 10:00:00 pc-a sshd[10]: too old
2024-05-09T13:00:00+00:00 pc-a sshd[11]: Accepted password for kim
2024-05-09T14:00:00+00:00 pc-a CRON[12]: (root) CMD (true)
not a syslog line
2024-05-10T10:00:00.5+00:00 pc-a sshd[13]: Disconnected from 10.0.0.9
May 10 11:00:00 pc-a kernel: usb 1-1: new device
";

    fn messages(picked: &Picked) -> Vec<&str> {
        picked.entries.iter().map(|e| e.message.as_str()).collect()
    }

    #[test]
    fn selects_newest_first_by_unit_since_and_limit() {
        let day = datetime!(2024-05-09 12:00:00 UTC);
        let all = select(LOG, false, &query(None, day, 10), NOW, &utc);
        assert_eq!(
            messages(&all),
            [
                "usb 1-1: new device",
                "Disconnected from 10.0.0.9",
                "(root) CMD (true)",
                "Accepted password for kim"
            ]
        );
        assert!(!all.truncated);
        assert_eq!(all.unparsed, 1);

        let ssh = select(LOG, false, &query(Some("SSHD.service"), day, 10), NOW, &utc);
        assert_eq!(
            messages(&ssh),
            ["Disconnected from 10.0.0.9", "Accepted password for kim"]
        );
        assert_eq!(ssh.entries[0].pid, Some(13));
        assert_eq!(ssh.entries[0].unit.as_deref(), Some("sshd"));

        let sshd_ever = select(
            LOG,
            false,
            &query(Some("sshd"), datetime!(2024-01-01 00:00:00 UTC), 10),
            NOW,
            &utc,
        );
        assert_eq!(messages(&sshd_ever).len(), 3);

        let one = select(LOG, false, &query(None, day, 1), NOW, &utc);
        assert_eq!(messages(&one), ["usb 1-1: new device"]);
        assert!(one.truncated);
        let exact = select(LOG, false, &query(None, day, 4), NOW, &utc);
        assert!(!exact.truncated, "exactly the limit is not truncated");
    }

    #[test]
    fn a_cut_window_is_truncated_unless_it_reached_since() {
        let recent = datetime!(2024-05-10 00:00:00 UTC);
        let reached = select(LOG, true, &query(None, recent, 10), NOW, &utc);
        assert!(
            !reached.truncated,
            "older lines were read, so none beyond the window match"
        );
        let everything = select(
            LOG,
            true,
            &query(None, datetime!(2020-01-01 00:00:00 UTC), 10),
            NOW,
            &utc,
        );
        assert!(everything.truncated);
    }

    #[test]
    fn the_tail_starts_on_a_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("syslog");
        std::fs::write(&path, "aaaa\nbbbb\ncccc\n").unwrap();
        assert_eq!(tail(&path, 100).unwrap(), (b"aaaa\nbbbb\ncccc\n".to_vec(), false));
        assert_eq!(
            tail(&path, 10).unwrap(),
            (b"bbbb\ncccc\n".to_vec(), true),
            "window starts right on a line"
        );
        assert_eq!(
            tail(&path, 8).unwrap(),
            (b"cccc\n".to_vec(), true),
            "a partial first line is dropped"
        );
        assert_eq!(tail(&path, 3).unwrap(), (Vec::new(), true));
        assert!(tail(&dir.path().join("missing"), 10).is_err());
    }

    #[test]
    fn reads_a_file_and_reports_what_it_could_not_apply() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("syslog");
        std::fs::write(&path, LOG).unwrap();
        let out = super::query(
            &path,
            &query(Some("cron"), datetime!(2024-05-01 00:00:00 UTC), 10),
            NOW,
            Vec::new(),
        )
        .unwrap();
        assert_eq!(out["source"], "syslog");
        assert_eq!(out["file"], path.to_string_lossy().as_ref());
        assert_eq!(out["count"], 1);
        assert_eq!(out["entries"][0]["unit"], "CRON");
        assert_eq!(out["entries"][0]["time"], "2024-05-09T14:00:00Z");
        assert_eq!(out["entries"][0]["priority"], serde_json::Value::Null);
        let notes = out["notes"].to_string();
        assert!(notes.contains("do not record priorities"), "{notes}");
        assert!(notes.contains("1 line(s) without a syslog timestamp"), "{notes}");

        let missing = super::query(&dir.path().join("nope"), &query(None, NOW, 1), NOW, Vec::new()).unwrap_err();
        assert_eq!(missing.code, kenny_proto::error::ErrorCode::NotFound);
    }

    #[cfg(unix)]
    #[test]
    fn local_time_follows_the_zone_rules() {
        // Whatever the zone, converting back with localtime_r gives the same wall clock.
        let local = datetime!(2024-07-01 12:34:56);
        let utc = local_to_utc(local).unwrap();
        let secs = utc.unix_timestamp() as libc::time_t;
        // SAFETY: localtime_r writes into the struct we own.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        unsafe { libc::localtime_r(&secs, &mut tm) };
        assert_eq!((tm.tm_hour, tm.tm_min, tm.tm_sec, tm.tm_mday), (12, 34, 56, 1));
    }
}
