//! Timestamps as kenny stores and shows them: RFC 3339, UTC, always with exactly three
//! fractional digits, so that stored timestamps order correctly as plain strings (expiry
//! checks in SQL compare them that way).

use time::OffsetDateTime;
use time::macros::format_description;

pub fn now() -> String {
    format(OffsetDateTime::now_utc())
}

/// Today's date in UTC, `YYYY-MM-DD` (the first ten characters of [`now`]).
pub fn today() -> String {
    now().chars().take(10).collect()
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub fn format(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    t.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    ))
    .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    #[test]
    fn fixed_width_so_strings_order_like_times() {
        let t = time::macros::datetime!(2026-11-30 13:40:01 UTC);
        assert_eq!(format(t), "2026-11-30T13:40:01.000Z");
        assert_eq!(format(t + Duration::milliseconds(500)), "2026-11-30T13:40:01.500Z");
        // Regression: trimmed fractions ("01.5Z" vs "01.52Z") once made a later time sort earlier.
        let times = [
            t,
            t + Duration::milliseconds(500),
            t + Duration::milliseconds(520),
            t + Duration::seconds(1),
        ];
        for w in times.windows(2) {
            assert!(format(w[0]) < format(w[1]), "{} < {}", format(w[0]), format(w[1]));
        }
    }
}
