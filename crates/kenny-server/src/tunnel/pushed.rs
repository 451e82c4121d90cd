//! What an agent sends unasked, limited per agent (across its reconnections): log lines and telemetry each
//! have a rate and a size, and warnings about dropped frames are capped per minute, so
//! a hostile PC can flood neither the database nor the server's log. Everything here
//! is a counter checked in the connection's read loop: dropping costs nothing and
//! never holds up the responses that arrive on the same connection.

use std::time::{Duration, Instant};

/// Agent log lines passed on to the server's log, sustained and in a burst.
pub(crate) const LOG_LINES_PER_SEC: f64 = 10.0;
pub(crate) const LOG_BURST: f64 = 100.0;
/// A log line's message is cut to this many characters; its other fields to less.
pub(crate) const LOG_MESSAGE_CHARS: usize = 2048;
/// Telemetry snapshots closer together than this are dropped (a real agent sends one
/// every 15 minutes by default, at most one every 10 s).
pub(crate) const TELEMETRY_MIN_GAP: Duration = Duration::from_secs(10);
/// A larger snapshot is dropped: the store keeps 200 per agent, so this bounds what one
/// PC can put there.
pub(crate) const TELEMETRY_MAX_BYTES: usize = 512 * 1024;
/// How often the warnings about dropped frames may repeat.
pub(crate) const WARN_INTERVAL: Duration = Duration::from_secs(60);
/// Warnings per interval about malformed or foreign frames (each says what was wrong).
const FRAME_WARNINGS: u32 = 10;

/// The per-connection state; owned by the connection's task.
pub struct Pushed {
    log_tokens: f64,
    log_refilled: Instant,
    last_telemetry: Option<Instant>,
    pub log_warnings: WarnGate,
    pub telemetry_warnings: WarnGate,
    pub frame_warnings: WarnGate,
}

impl Pushed {
    pub fn new(now: Instant) -> Self {
        Pushed {
            log_tokens: LOG_BURST,
            log_refilled: now,
            last_telemetry: None,
            log_warnings: WarnGate::new(1, now),
            telemetry_warnings: WarnGate::new(1, now),
            frame_warnings: WarnGate::new(FRAME_WARNINGS, now),
        }
    }

    /// Whether a log line arriving now is within the rate.
    pub fn log_line(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.log_refilled).as_secs_f64();
        self.log_tokens = (self.log_tokens + elapsed * LOG_LINES_PER_SEC).min(LOG_BURST);
        self.log_refilled = now;
        if self.log_tokens >= 1.0 {
            self.log_tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Whether a snapshot of `bytes` arriving now may be stored; if not, why.
    pub fn telemetry(&mut self, bytes: usize, now: Instant) -> Result<(), String> {
        if bytes > TELEMETRY_MAX_BYTES {
            return Err(format!(
                "a snapshot of {} KiB is over the {} KiB limit",
                bytes / 1024,
                TELEMETRY_MAX_BYTES / 1024
            ));
        }
        if let Some(last) = self.last_telemetry
            && now.saturating_duration_since(last) < TELEMETRY_MIN_GAP
        {
            return Err(format!(
                "snapshots arrive more often than one per {}s",
                TELEMETRY_MIN_GAP.as_secs()
            ));
        }
        self.last_telemetry = Some(now);
        Ok(())
    }

    /// Dropped frames whose warning was held back, for a last line when the
    /// connection ends.
    pub fn unreported(&self) -> u64 {
        self.log_warnings.suppressed + self.telemetry_warnings.suppressed + self.frame_warnings.suppressed
    }
}

/// Lets `per_interval` warnings through per [`WARN_INTERVAL`]; counts the rest, and
/// hands the count to the next warning that goes through.
pub struct WarnGate {
    per_interval: u32,
    window_start: Instant,
    used: u32,
    suppressed: u64,
}

impl WarnGate {
    fn new(per_interval: u32, now: Instant) -> Self {
        WarnGate {
            per_interval,
            window_start: now,
            used: 0,
            suppressed: 0,
        }
    }

    /// `Some(n)` if a warning may be logged now (`n` were held back before it), `None`
    /// if this one is only counted.
    pub fn pass(&mut self, now: Instant) -> Option<u64> {
        if now.saturating_duration_since(self.window_start) >= WARN_INTERVAL {
            self.window_start = now;
            self.used = 0;
        }
        if self.used >= self.per_interval {
            self.suppressed += 1;
            return None;
        }
        self.used += 1;
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// Each agent's counters, kept between its connections: a PC that reconnects gets no
/// fresh burst (a new connection costs it nothing, so it must not reset the rate).
#[derive(Default)]
pub struct PushedBook {
    by_agent: std::sync::Mutex<std::collections::HashMap<String, Pushed>>,
}

impl PushedBook {
    /// The counters for a new connection of `agent_id`: where its last one left them.
    pub fn take(&self, agent_id: &str, now: Instant) -> Pushed {
        let mut book = self.by_agent.lock().unwrap_or_else(|p| p.into_inner());
        book.remove(agent_id).unwrap_or_else(|| Pushed::new(now))
    }

    /// Keeps a finished connection's counters for the agent's next one. Warnings held
    /// back were reported when the connection ended.
    pub fn put_back(&self, agent_id: &str, mut pushed: Pushed) {
        for gate in [
            &mut pushed.log_warnings,
            &mut pushed.telemetry_warnings,
            &mut pushed.frame_warnings,
        ] {
            gate.suppressed = 0;
        }
        let mut book = self.by_agent.lock().unwrap_or_else(|p| p.into_inner());
        book.insert(agent_id.to_owned(), pushed);
    }
}

/// Text from an agent made safe for one log line: control characters (newlines,
/// terminal escapes) are escaped, so a PC cannot forge lines of the server's log, and
/// the length is bounded.
pub(crate) fn clean(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars));
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconnect_does_not_refill_the_burst() {
        let t0 = Instant::now();
        let book = PushedBook::default();
        let mut first = book.take("pc-a", t0);
        assert_eq!((0..1000).filter(|_| first.log_line(t0)).count(), LOG_BURST as usize);
        book.put_back("pc-a", first);
        let mut second = book.take("pc-a", t0);
        assert_eq!(
            (0..1000).filter(|_| second.log_line(t0)).count(),
            0,
            "no new burst on reconnect"
        );
        // Another agent has its own.
        let mut other = book.take("pc-b", t0);
        assert!(other.log_line(t0));
    }

    #[test]
    fn log_lines_pass_at_the_rate_after_a_burst() {
        let t0 = Instant::now();
        let mut p = Pushed::new(t0);
        let passed = (0..1000).filter(|_| p.log_line(t0)).count();
        assert_eq!(passed, LOG_BURST as usize, "a burst, then nothing at the same instant");
        let later = t0 + Duration::from_secs(2);
        let passed = (0..1000).filter(|_| p.log_line(later)).count();
        assert_eq!(passed, (2.0 * LOG_LINES_PER_SEC) as usize, "then the sustained rate");
        // Idle time refills no further than the burst.
        let much_later = later + Duration::from_secs(3600);
        assert_eq!((0..1000).filter(|_| p.log_line(much_later)).count(), LOG_BURST as usize);
    }

    #[test]
    fn telemetry_is_limited_by_gap_and_size() {
        let t0 = Instant::now();
        let mut p = Pushed::new(t0);
        assert!(
            p.telemetry(TELEMETRY_MAX_BYTES + 1, t0)
                .unwrap_err()
                .contains("over the 512 KiB limit")
        );
        assert_eq!(
            p.telemetry(1000, t0),
            Ok(()),
            "an oversized snapshot does not use up the gap"
        );
        assert!(
            p.telemetry(1000, t0 + Duration::from_secs(9))
                .unwrap_err()
                .contains("one per 10s")
        );
        assert_eq!(p.telemetry(1000, t0 + TELEMETRY_MIN_GAP), Ok(()));
    }

    #[test]
    fn warnings_are_capped_per_interval_and_the_rest_counted() {
        let t0 = Instant::now();
        let mut p = Pushed::new(t0);
        assert_eq!(p.log_warnings.pass(t0), Some(0));
        for _ in 0..500 {
            assert_eq!(p.log_warnings.pass(t0 + Duration::from_secs(1)), None);
        }
        assert_eq!(p.unreported(), 500);
        assert_eq!(
            p.log_warnings.pass(t0 + WARN_INTERVAL),
            Some(500),
            "the next interval's warning says how many were held back"
        );
        assert_eq!(p.unreported(), 0);
        let passed = (0..50).filter(|_| p.frame_warnings.pass(t0).is_some()).count();
        assert_eq!(passed, FRAME_WARNINGS as usize);
    }

    #[test]
    fn agent_text_cannot_forge_log_lines() {
        assert_eq!(
            clean("ok\n2026-01-01 INFO forged\u{1b}[2J", 100),
            "ok\\n2026-01-01 INFO forged\\u{1b}[2J"
        );
        assert_eq!(clean("abcdef", 3), "abc…");
        assert_eq!(clean("ünï", 3), "ünï");
    }
}
