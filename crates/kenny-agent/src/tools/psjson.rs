//! Reading what PowerShell's `ConvertTo-Json` prints.

use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The objects in `ConvertTo-Json` output. A pipeline of one object is printed as that
/// object, not as a one-element array, and an empty pipeline prints nothing at all.
pub(crate) fn rows(stdout: &str) -> Result<Vec<Map<String, Value>>, String> {
    let text = stdout.trim_start_matches('\u{feff}').trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("PowerShell printed something that is not JSON ({e})"))?;
    rows_of(value)
}

/// [`rows`] for a value already parsed (a property holding a list).
pub(crate) fn rows_of(value: Value) -> Result<Vec<Map<String, Value>>, String> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(object) => Ok(vec![object]),
        Value::Array(items) => items
            .into_iter()
            .filter(|item| !item.is_null())
            .map(|item| match item {
                Value::Object(object) => Ok(object),
                other => Err(format!("expected a list of objects from PowerShell, found {other}")),
            })
            .collect(),
        other => Err(format!("expected objects from PowerShell, found {other}")),
    }
}

/// A non-empty string property.
pub(crate) fn text(row: &Map<String, Value>, key: &str) -> Option<String> {
    match row.get(key)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(crate) fn number(row: &Map<String, Value>, key: &str) -> Option<i64> {
    match row.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A date as `ConvertTo-Json` writes it: Windows PowerShell 5.1 prints
/// `/Date(1700000000000)/` (milliseconds since 1970, UTC, with an optional `+0100` that
/// only describes the local zone), PowerShell 7 prints ISO 8601, and a date that carries
/// extra note properties becomes an object whose `value` holds one of those.
pub(crate) fn date(value: &Value) -> Option<OffsetDateTime> {
    match value {
        Value::String(s) => ms_date(s).or_else(|| OffsetDateTime::parse(s.trim(), &Rfc3339).ok()),
        Value::Object(object) => object.get("value").and_then(date),
        _ => None,
    }
}

fn ms_date(text: &str) -> Option<OffsetDateTime> {
    let inner = text.trim().strip_prefix("/Date(")?.strip_suffix(")/")?;
    // The offset, if any, starts at the second sign (the first may be a minus for 1969).
    let digits_end = inner
        .char_indices()
        .skip(1)
        .find(|&(_, c)| c == '+' || c == '-')
        .map_or(inner.len(), |(at, _)| at);
    let millis: i128 = inner[..digits_end].parse().ok()?;
    OffsetDateTime::from_unix_timestamp_nanos(millis.checked_mul(1_000_000)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_object_many_objects_and_nothing_are_all_lists() {
        assert_eq!(rows("").unwrap(), Vec::<Map<String, Value>>::new());
        assert_eq!(rows("  \r\n").unwrap().len(), 0);
        assert_eq!(rows("null").unwrap().len(), 0);
        assert_eq!(rows("[]").unwrap().len(), 0);
        let one = rows("{\"Name\":\"Spooler\"}\r\n").unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0]["Name"], "Spooler");
        let many = rows("\u{feff}[{\"Name\":\"a\"},{\"Name\":\"b\"}]").unwrap();
        assert_eq!(many.len(), 2);
        assert!(rows("WARNING: something").unwrap_err().contains("not JSON"));
        assert!(rows("[1,2]").is_err());
        assert!(rows("\"text\"").is_err());
    }

    #[test]
    fn dates_in_every_form_powershell_prints() {
        let expected = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_000_000).unwrap();
        assert_eq!(date(&json!("/Date(1700000000123)/")), Some(expected));
        assert_eq!(date(&json!("/Date(1700000000123+0100)/")), Some(expected));
        assert_eq!(date(&json!("/Date(1700000000123-0500)/")), Some(expected));
        assert_eq!(date(&json!("2023-11-14T23:13:20.123+01:00")), Some(expected));
        assert_eq!(
            date(
                &json!({"value": "/Date(1700000000123)/", "DisplayHint": 2, "DateTime": "Tuesday, 14 November 2023 23:13:20"})
            ),
            Some(expected)
        );
        assert_eq!(
            date(&json!("/Date(-1000)/")),
            Some(OffsetDateTime::from_unix_timestamp(-1).unwrap())
        );
        assert_eq!(date(&json!("/Date(abc)/")), None);
        assert_eq!(date(&json!("yesterday")), None);
        assert_eq!(date(&json!(1700000000123_u64)), None);
        assert_eq!(date(&Value::Null), None);
    }

    #[test]
    fn properties_as_text_and_numbers() {
        let row = rows(r#"{"Name":"x","Empty":"  ","Pid":42,"Code":"7","Nothing":null}"#)
            .unwrap()
            .remove(0);
        assert_eq!(text(&row, "Name").as_deref(), Some("x"));
        assert_eq!(text(&row, "Empty"), None);
        assert_eq!(text(&row, "Pid").as_deref(), Some("42"));
        assert_eq!(text(&row, "Nothing"), None);
        assert_eq!(number(&row, "Pid"), Some(42));
        assert_eq!(number(&row, "Code"), Some(7));
        assert_eq!(number(&row, "Name"), None);
        assert_eq!(number(&row, "Missing"), None);
    }
}
