//! The `since` argument: an RFC 3339 time, or a span back from now.

use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

/// Ten years back is more than any log keeps; the bound keeps the arithmetic safe.
const MAX_SPAN_SECS: i64 = 3650 * 86_400;

pub(super) fn parse(text: &str, now: OffsetDateTime) -> Result<OffsetDateTime, String> {
    let text = text.trim();
    if let Some(at) = span(text) {
        return at.map(|secs| now - Duration::seconds(secs));
    }
    OffsetDateTime::parse(text, &Rfc3339).map_err(|_| {
        format!(
            "since must be an RFC 3339 time (like 2024-05-01T08:00:00Z) or a span back from now (like 30m, 6h, 2d; units s, m, h, d, w), got `{text}`"
        )
    })
}

/// `None` when `text` is not shaped like a span; `Some(Err)` when it is one but too long.
fn span(text: &str) -> Option<Result<i64, String>> {
    let unit = text.chars().last()?;
    let per_unit: i64 = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => return None,
    };
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(per_unit))
        .filter(|&secs| secs <= MAX_SPAN_SECS);
    Some(secs.ok_or_else(|| format!("since `{text}` reaches back more than 3650 days; use a shorter span")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2024-05-10 12:00:00 UTC);

    #[test]
    fn spans_count_back_from_now() {
        assert_eq!(parse("30m", NOW), Ok(datetime!(2024-05-10 11:30:00 UTC)));
        assert_eq!(parse("6h", NOW), Ok(datetime!(2024-05-10 06:00:00 UTC)));
        assert_eq!(parse("2d", NOW), Ok(datetime!(2024-05-08 12:00:00 UTC)));
        assert_eq!(parse(" 1w ", NOW), Ok(datetime!(2024-05-03 12:00:00 UTC)));
        assert_eq!(parse("90s", NOW), Ok(datetime!(2024-05-10 11:58:30 UTC)));
        assert_eq!(parse("0m", NOW), Ok(NOW));
        assert_eq!(parse("3650d", NOW).map(|t| t.year()), Ok(2014));
    }

    #[test]
    fn rfc3339_times_keep_their_offset() {
        assert_eq!(
            parse("2024-05-01T08:00:00Z", NOW),
            Ok(datetime!(2024-05-01 08:00:00 UTC))
        );
        assert_eq!(
            parse("2024-05-01T10:00:00.5+02:00", NOW),
            Ok(datetime!(2024-05-01 08:00:00.5 UTC))
        );
    }

    #[test]
    fn garbage_is_refused_with_the_accepted_forms() {
        for bad in [
            "yesterday-ish",
            "",
            "m",
            "30",
            "-5m",
            "5 m",
            "1.5h",
            "6H",
            "30min",
            "2024-05-01",
            "2024-05-01 08:00:00",
            "١٢h",
        ] {
            let err = parse(bad, NOW).unwrap_err();
            assert!(err.contains("RFC 3339") && err.contains("30m, 6h, 2d"), "{bad}: {err}");
        }
        let far = parse("99999999999999999999d", NOW).unwrap_err();
        assert!(far.contains("3650 days"), "{far}");
        assert!(parse("3651d", NOW).unwrap_err().contains("3650 days"));
    }
}
