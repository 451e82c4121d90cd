//! Schedule windows in time: whether one is open at an instant, and when the next one
//! opens or closes. Windows are weekly, in their own IANA time zone, so "21:00 to
//! 07:00 on school nights" means the PC's family's evening across daylight-saving
//! changes; a start that falls in a DST gap happens at the first time after it.

use jiff::civil::{Date, Weekday as CivilDay};
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use kenny_proto::server_args::{ScheduleWindow, Weekday};

/// A window ready to be evaluated.
#[derive(Debug, Clone)]
pub(crate) struct Timed {
    zone: TimeZone,
    days: Vec<CivilDay>,
    start: (i8, i8),
    end: (i8, i8),
}

/// `HH:MM`, 00:00 to 23:59.
pub(crate) fn parse_clock(text: &str) -> Result<(i8, i8), String> {
    let bad = || format!("{text:?} is not a time of day; write HH:MM, 00:00 to 23:59, such as 21:00");
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(bad());
    }
    let h: i8 = h.parse().map_err(|_| bad())?;
    let m: i8 = m.parse().map_err(|_| bad())?;
    if !(0..24).contains(&h) || !(0..60).contains(&m) {
        return Err(bad());
    }
    Ok((h, m))
}

pub(crate) fn zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name).map_err(|_| {
        format!("{name:?} is not an IANA time zone; use a name such as Europe/London, America/New_York or UTC")
    })
}

fn civil(day: Weekday) -> CivilDay {
    match day {
        Weekday::Mon => CivilDay::Monday,
        Weekday::Tue => CivilDay::Tuesday,
        Weekday::Wed => CivilDay::Wednesday,
        Weekday::Thu => CivilDay::Thursday,
        Weekday::Fri => CivilDay::Friday,
        Weekday::Sat => CivilDay::Saturday,
        Weekday::Sun => CivilDay::Sunday,
    }
}

impl Timed {
    pub(crate) fn new(w: &ScheduleWindow) -> Result<Timed, String> {
        Ok(Timed {
            zone: zone(&w.time_zone)?,
            days: w.days.iter().copied().map(civil).collect(),
            start: parse_clock(&w.start)?,
            end: parse_clock(&w.end)?,
        })
    }

    /// The window that starts on `day`, as instants; `None` if it does not start then.
    fn on(&self, day: Date) -> Option<(Timestamp, Timestamp)> {
        if !self.days.contains(&day.weekday()) {
            return None;
        }
        let at = |d: Date, (h, m): (i8, i8)| -> Option<Timestamp> {
            d.at(h, m, 0, 0)
                .to_zoned(self.zone.clone())
                .ok()
                .map(|z: Zoned| z.timestamp())
        };
        let end_day = if self.end > self.start {
            day
        } else {
            day.tomorrow().ok()?
        };
        Some((at(day, self.start)?, at(end_day, self.end)?))
    }

    /// Days whose windows may matter around `t`: from the day before (a window past
    /// midnight) to eight days on (the next edge of a weekly window).
    fn days_around(&self, t: Timestamp) -> impl Iterator<Item = Date> {
        let today = t.to_zoned(self.zone.clone()).date();
        let first = today.yesterday().unwrap_or(today);
        std::iter::successors(Some(first), |d| d.tomorrow().ok()).take(10)
    }

    pub(crate) fn is_open(&self, t: Timestamp) -> bool {
        self.days_around(t)
            .take(2)
            .filter_map(|d| self.on(d))
            .any(|(start, end)| start <= t && t < end)
    }

    /// The first instant after `t` at which this window opens or closes.
    pub(crate) fn next_edge(&self, t: Timestamp) -> Option<Timestamp> {
        self.days_around(t)
            .filter_map(|d| self.on(d))
            .flat_map(|(start, end)| [start, end])
            .filter(|edge| *edge > t)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::server_args::Switch;

    fn window(days: &[Weekday], start: &str, end: &str, tz: &str) -> Timed {
        Timed::new(&ScheduleWindow {
            name: "w".into(),
            days: days.to_vec(),
            start: start.into(),
            end: end.into(),
            time_zone: tz.into(),
            categories: None,
            set: Switch::On,
        })
        .unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_school_night_runs_past_midnight_into_the_next_day() {
        // 2026-12-06 is a Sunday.
        let w = window(&[Weekday::Sun, Weekday::Mon], "21:00", "07:00", "Europe/London");
        assert!(!w.is_open(at("2026-12-06T20:59:59Z")));
        assert!(w.is_open(at("2026-12-06T21:00:00Z")));
        assert!(w.is_open(at("2026-12-07T06:59:59Z")));
        assert!(!w.is_open(at("2026-12-07T07:00:00Z")));
        // Saturday night is not a school night; Friday's window never started.
        assert!(!w.is_open(at("2026-12-05T23:00:00Z")));
        assert_eq!(
            w.next_edge(at("2026-12-06T12:00:00Z")),
            Some(at("2026-12-06T21:00:00Z"))
        );
        assert_eq!(
            w.next_edge(at("2026-12-06T21:00:00Z")),
            Some(at("2026-12-07T07:00:00Z"))
        );
        // After Monday's night ends, the next is the following Sunday.
        assert_eq!(
            w.next_edge(at("2026-12-08T08:00:00Z")),
            Some(at("2026-12-13T21:00:00Z"))
        );
    }

    #[test]
    fn windows_follow_their_own_zone_and_its_summer_time() {
        let w = window(&[Weekday::Mon], "09:00", "10:00", "America/New_York");
        // Winter: UTC-5.
        assert!(w.is_open(at("2026-12-07T14:30:00Z")));
        // Summer: UTC-4.
        assert!(w.is_open(at("2026-07-06T13:30:00Z")));
        assert!(!w.is_open(at("2026-07-06T14:30:00Z")));
    }

    #[test]
    fn equal_start_and_end_is_the_whole_day() {
        let w = window(&[Weekday::Sat], "00:00", "00:00", "UTC");
        assert!(w.is_open(at("2026-12-05T00:00:00Z")));
        assert!(w.is_open(at("2026-12-05T23:59:59Z")));
        assert!(!w.is_open(at("2026-12-06T00:00:00Z")));
    }

    #[test]
    fn bad_times_and_zones_say_what_to_write() {
        for bad in ["9:00", "24:00", "12:60", "ab:cd", "1200", "12:00:00"] {
            assert!(parse_clock(bad).unwrap_err().contains("HH:MM"), "{bad}");
        }
        assert!(zone("Mars/Olympus").unwrap_err().contains("IANA"));
        assert!(zone("Europe/Paris").is_ok());
    }
}
