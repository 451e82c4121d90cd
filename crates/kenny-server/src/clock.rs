//! Timestamps as kenny stores and shows them: RFC 3339, UTC, always with exactly three
//! fractional digits, so that stored timestamps order correctly as plain strings (expiry
//! checks in SQL compare them that way).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use time::OffsetDateTime;
use time::macros::format_description;

/// The server's clock: the system's, moved forward by however much [`Clock::advance`]
/// was asked to. Everything in the server that decides by time (token and session
/// expiry, OAuth codes, audit retention, the chat's daily limit) reads this clock from
/// the state, so a test can move time on instead of sleeping through it.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    skipped_ms: Arc<AtomicI64>,
}

impl Clock {
    pub fn system() -> Clock {
        Clock::default()
    }

    pub fn now_utc(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc() + time::Duration::milliseconds(self.skipped_ms.load(Ordering::Relaxed))
    }

    /// Now, as stored and shown (see [`format`]).
    pub fn now(&self) -> String {
        format(self.now_utc())
    }

    /// Today's date in UTC, `YYYY-MM-DD`.
    pub fn today(&self) -> String {
        self.now().chars().take(10).collect()
    }

    /// Seconds since the Unix epoch (0 before it).
    pub fn unix_secs(&self) -> u64 {
        u64::try_from(self.now_utc().unix_timestamp()).unwrap_or(0)
    }

    /// Moves this clock (and every copy of it) forward by `by`: what a test does
    /// instead of waiting for something to expire.
    pub fn advance(&self, by: std::time::Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.skipped_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

/// Now on the system clock, for what runs outside a server (the admin CLI, set-up);
/// inside one, time is the state's [`Clock`].
pub fn now() -> String {
    Clock::system().now()
}

pub fn format(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    t.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    ))
    .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

/// An RFC 3339 time (as agents and this server write them); `None` if it is not one.
pub fn parse(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

/// A point in time a caller asks about: an RFC 3339 time, or how long before `now`
/// (`30m`, `24h`, `7d`, up to ten years). The error says what is accepted.
pub fn since(text: &str, now: OffsetDateTime) -> Result<OffsetDateTime, String> {
    if let Some(at) = parse(text) {
        return Ok(at);
    }
    let accepted = || format!("`{text}` is not a time: give an RFC 3339 time or how long back, like 30m, 24h or 7d");
    let Some(unit) = text.chars().last() else {
        return Err(accepted());
    };
    let number = &text[..text.len() - unit.len_utf8()];
    let n: i64 = number.parse().map_err(|_| accepted())?;
    let per_day = match unit {
        'm' => 1440,
        'h' => 24,
        'd' => 1,
        _ => return Err(accepted()),
    };
    // Checked before building the span: `time` panics on overflow.
    if !(0..=3650 * per_day).contains(&n) {
        return Err(accepted());
    }
    let span = match unit {
        'm' => time::Duration::minutes(n),
        'h' => time::Duration::hours(n),
        'd' => time::Duration::days(n),
        _ => return Err(accepted()),
    };
    Ok(now - span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    #[test]
    fn since_takes_a_time_or_how_long_back() {
        let now = parse("2026-06-10T00:00:00Z").unwrap();
        assert_eq!(format(since("7d", now).unwrap()), "2026-06-03T00:00:00.000Z");
        assert_eq!(format(since("90m", now).unwrap()), "2026-06-09T22:30:00.000Z");
        assert_eq!(
            format(since("2026-01-01T00:00:00Z", now).unwrap()),
            "2026-01-01T00:00:00.000Z"
        );
        for bad in [
            "",
            "7",
            "7w",
            "-1d",
            "x7d",
            "99999d",
            "7é",
            "é",
            "99999999999999999d",
            "9223372036854775807m",
        ] {
            assert!(since(bad, now).unwrap_err().contains("30m, 24h or 7d"), "{bad}");
        }
    }

    #[test]
    fn an_advanced_clock_is_ahead_for_every_copy() {
        let clock = Clock::system();
        let copy = clock.clone();
        let before = copy.unix_secs();
        clock.advance(std::time::Duration::from_secs(3600));
        assert!(copy.unix_secs() >= before + 3600);
        assert!(copy.now() > Clock::system().now());
    }

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
