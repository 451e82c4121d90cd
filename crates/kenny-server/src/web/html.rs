//! Server-rendered HTML: one page shell and escaping. No templates, no build step.

use axum::response::Html;

/// Escapes text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
:root { color-scheme: light dark; --bg:#f6f7f9; --card:#fff; --fg:#1d2330; --muted:#5d6675; --accent:#2f6fed; --err:#b42318; --line:#d9dde4; }
@media (prefers-color-scheme: dark) { :root { --bg:#111418; --card:#1a1f26; --fg:#e6e9ef; --muted:#9aa3b2; --accent:#6c9cff; --err:#ff8a80; --line:#2c333d; } }
* { box-sizing: border-box; }
body { margin:0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
main { max-width: 26rem; margin: 8vh auto; padding: 0 1rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 12px; padding: 1.5rem; }
h1 { font-size: 1.4rem; margin: 0 0 1rem; }
label { display:block; margin: .75rem 0 .25rem; color: var(--muted); font-size: .9rem; }
input { width:100%; padding:.6rem .7rem; border:1px solid var(--line); border-radius:8px; background: var(--bg); color: var(--fg); font-size:1rem; }
button { margin-top:1.25rem; width:100%; padding:.65rem; border:0; border-radius:8px; background: var(--accent); color:#fff; font-size:1rem; cursor:pointer; }
.error { color: var(--err); margin: .5rem 0 0; }
.muted { color: var(--muted); font-size: .9rem; }
dl.consent-facts dt { color: var(--muted); font-size: .9rem; margin-top: .5rem; }
dl.consent-facts dd { margin: 0; }
code { overflow-wrap: anywhere; }
"#;

pub(crate) fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · kenny</title><style>{STYLE}</style></head><body><main>{body}</main></body></html>",
        esc(title)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
