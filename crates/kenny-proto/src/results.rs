//! Shapes of tool results that more than one side relies on.

use serde_json::Value;

/// An image result (`screen_capture`): an `image/*` `mime_type` and the picture as
/// base64 in `data_base64`. Takes the data out of the value, leaving the metadata.
pub fn take_image(value: &mut Value) -> Option<(String, String)> {
    let mime_type = value.get("mime_type")?.as_str()?.to_owned();
    if !mime_type.starts_with("image/") || !value.get("data_base64")?.is_string() {
        return None;
    }
    match value.as_object_mut()?.remove("data_base64")? {
        Value::String(data) => Some((data, mime_type)),
        _ => None,
    }
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
    fn versions_are_plain_triples() {
        assert_eq!(parse_version("0.12.3"), Some((0, 12, 3)));
        for bad in ["1.2", "1.2.3.4", "v1.2.3", "1.2.x", ""] {
            assert_eq!(parse_version(bad), None, "{bad}");
        }
    }
}
