//! Shared formatting for sections: timestamps, dates, sizes and percentages.

use std::time::{SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, OffsetDateTime};

/// RFC 3339 in UTC, whole seconds. `None` for times the calendar cannot express, which
/// a corrupt file timestamp can produce.
pub(in crate::tools) fn rfc3339(at: SystemTime) -> Option<String> {
    let nanos = match at.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_nanos()).ok()?,
        Err(before) => -i128::try_from(before.duration().as_nanos()).ok()?,
    };
    let utc = OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()?;
    utc.replace_nanosecond(0).ok()?.format(&Rfc3339).ok()
}

/// Text from the PC (names, paths, messages) on one line and at most `max` characters,
/// the last an ellipsis when something was cut: a hostile PC's output reaches the
/// dashboard and the model. Control characters, line breaks included, become spaces.
pub(super) fn clip(text: &str, max: usize) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Rounded integer percentage; 0 when there is no whole to compare with.
pub(super) fn percent_of(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    let (part, whole) = (u128::from(part), u128::from(whole));
    u64::try_from((part * 100 + whole / 2) / whole).unwrap_or(u64::MAX)
}

pub(super) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Seconds since the Unix epoch as an RFC 3339 UTC timestamp; `None` out of range.
pub(super) fn rfc3339_from_unix(secs: i64) -> Option<String> {
    let at = OffsetDateTime::from_unix_timestamp(secs).ok()?;
    at.format(&Rfc3339).ok()
}

/// A calendar date as `YYYY-MM-DD`.
pub(super) fn ymd(date: Date) -> String {
    date.format(format_description!("[year]-[month]-[day]"))
        .unwrap_or_else(|_| date.to_string())
}

/// Parses `YYYY-MM-DD` (surrounding spaces allowed).
pub(super) fn parse_ymd(text: &str) -> Option<Date> {
    Date::parse(text.trim(), format_description!("[year]-[month]-[day]")).ok()
}

/// Today in UTC.
pub(super) fn today() -> Date {
    OffsetDateTime::now_utc().date()
}

/// A temperature or CPU figure with one decimal, so the JSON says 61.5, not 61.499999.
pub(super) fn one_decimal(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_rfc3339_and_never_panic() {
        assert_eq!(rfc3339(UNIX_EPOCH).as_deref(), Some("1970-01-01T00:00:00Z"));
        let later = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        assert_eq!(rfc3339(later).as_deref(), Some("2023-11-14T22:13:20Z"));
        let before = UNIX_EPOCH - Duration::from_secs(86_400);
        assert_eq!(rfc3339(before).as_deref(), Some("1969-12-31T00:00:00Z"));
        if let Some(far) = UNIX_EPOCH.checked_add(Duration::from_secs(u64::MAX / 4)) {
            assert_eq!(rfc3339(far), None);
        }
    }

    #[test]
    fn text_from_the_pc_is_cut_and_kept_on_one_line() {
        assert_eq!(clip("  papa ", 10), "papa");
        assert_eq!(clip("Jürgen Müller", 7), "Jürgen…");
        assert_eq!(clip("a\r\nb\tc", 10), "a  b c");
        assert_eq!(clip("abcdef", 3), "ab…");
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip(&"x".repeat(300), 200).chars().count(), 200);
    }

    #[test]
    fn sizes_and_percentages() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(16 * (1 << 30)), "16.0 GiB");
        assert_eq!(percent_of(1, 3), 33);
        assert_eq!(percent_of(2, 3), 67);
        assert_eq!(percent_of(5, 0), 0);
    }
}
