//! Timestamps as kenny stores and shows them: RFC 3339, UTC, millisecond precision.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub fn now() -> String {
    format(OffsetDateTime::now_utc())
}

pub fn format(t: OffsetDateTime) -> String {
    let t = t.replace_nanosecond(t.millisecond() as u32 * 1_000_000).unwrap_or(t);
    t.format(&Rfc3339).unwrap_or_else(|_| t.unix_timestamp().to_string())
}
