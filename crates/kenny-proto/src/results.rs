//! Shapes of tool results that more than one side relies on.

use serde::Deserialize;
use serde_json::Value;

/// A `screen_capture` result as the dashboard keeps it: the picture and its size.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Screenshot {
    pub mime_type: String,
    pub width: u32,
    pub height: u32,
    /// The image, base64 (standard alphabet, padded).
    pub data_base64: String,
}

impl Screenshot {
    /// The result read as a screenshot, or why it is not one.
    pub fn from_result(value: &Value) -> Result<Screenshot, String> {
        Screenshot::deserialize(value).map_err(|e| e.to_string())
    }
}

/// One section of a telemetry snapshot as the server reads it: its verdict and one line.
/// The rest of a section is the agent's to fill and is shown as it came.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(default)]
pub struct SectionVerdict {
    /// `ok`, `warn`, `crit`, or anything else (read as unknown).
    pub status: Option<String>,
    pub summary: String,
}

impl SectionVerdict {
    /// A section's verdict; a section that is not an object, or whose fields have other
    /// types, has none (its status is unknown, its summary empty).
    pub fn of(section: &Value) -> SectionVerdict {
        SectionVerdict::deserialize(section).unwrap_or_default()
    }
}

/// Whether `value` is an image result [`take_image`] would take the picture out of.
pub fn is_image(value: &Value) -> bool {
    let mime_type = value.get("mime_type").and_then(Value::as_str);
    mime_type.is_some_and(|m| m.starts_with("image/")) && value.get("data_base64").is_some_and(Value::is_string)
}

/// An image result (`screen_capture`): an `image/*` `mime_type` and the picture as
/// base64 in `data_base64`. Takes the data out of the value, leaving the metadata.
pub fn take_image(value: &mut Value) -> Option<(String, String)> {
    if !is_image(value) {
        return None;
    }
    let mime_type = value.get("mime_type")?.as_str()?.to_owned();
    match value.as_object_mut()?.remove("data_base64")? {
        Value::String(data) => Some((data, mime_type)),
        _ => None,
    }
}

/// A web filter list's hash when the caller gives none (both kenny's agent and the
/// existing kenny's compute it so): the first 16 hex digits of the SHA-256 of the
/// sorted names joined by newlines.
pub fn webfilter_list_hash(sorted: &[String]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(sorted.join("\n").as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A release version as kenny writes them: exactly `x.y.z`, comparable as a triple.
pub fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().ok());
    let triple = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(triple)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn images_are_taken_out_only_when_they_are_images() {
        let mut shot = json!({"mime_type": "image/png", "width": 2, "data_base64": "iVBOR"});
        assert_eq!(take_image(&mut shot), Some(("iVBOR".into(), "image/png".into())));
        assert_eq!(shot, json!({"mime_type": "image/png", "width": 2}));
        let mut text = json!({"mime_type": "text/plain", "data_base64": "eA=="});
        assert_eq!(take_image(&mut text), None);
        assert_eq!(text["data_base64"], "eA==");
    }

    #[test]
    fn a_screenshot_needs_its_type_size_and_data() {
        let shot = Screenshot::from_result(
            &serde_json::json!({"mime_type": "image/png", "width": 2, "height": 1, "data_base64": "iVBOR", "bytes": 5}),
        )
        .unwrap();
        assert_eq!((shot.width, shot.height, shot.data_base64.as_str()), (2, 1, "iVBOR"));
        for bad in [
            serde_json::json!({"mime_type": "image/png", "width": 2, "height": 1}),
            serde_json::json!({"mime_type": "image/png", "width": -2, "height": 1, "data_base64": "x"}),
            serde_json::json!("image"),
        ] {
            assert!(Screenshot::from_result(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_sections_verdict_is_read_or_unknown() {
        let v = SectionVerdict::of(&serde_json::json!({"status": "warn", "summary": "91% full", "volumes": []}));
        assert_eq!((v.status.as_deref(), v.summary.as_str()), (Some("warn"), "91% full"));
        assert_eq!(
            SectionVerdict::of(&serde_json::json!({"status": 3})),
            SectionVerdict::default()
        );
        assert_eq!(SectionVerdict::of(&serde_json::json!([])), SectionVerdict::default());
    }

    #[test]
    fn versions_are_plain_triples() {
        assert_eq!(parse_version("0.12.3"), Some((0, 12, 3)));
        for bad in ["1.2", "1.2.3.4", "v1.2.3", "1.2.x", ""] {
            assert_eq!(parse_version(bad), None, "{bad}");
        }
    }
}
