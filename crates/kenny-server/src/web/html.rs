//! Server-rendered HTML for the pages outside the dashboard (first-run set-up, sign in,
//! OAuth consent): one page shell. Pages are built with maud's `html!`, which escapes
//! every value spliced into it, so text from a person, an agent or an OAuth client can
//! never become markup; `PreEscaped` is only for constant text of ours (the stylesheet
//! below). No build step.

use axum::response::Html;
use maud::{DOCTYPE, Markup, PreEscaped, html};

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

/// The shell around `body`: `title` names the page in the browser's tab.
pub(crate) fn page(title: &str, body: Markup) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (title) " · kenny" }
                    style { (PreEscaped(STYLE)) }
                }
                body { main { (body) } }
            }
        }
        .into_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_escapes_the_title_and_keeps_the_stylesheet_as_written() {
        let html = page("<b>\"x\"</b>", html! { p { "body" } }).0;
        assert!(
            html.contains("<title>&lt;b&gt;&quot;x&quot;&lt;/b&gt; · kenny</title>"),
            "{html}"
        );
        assert!(html.contains(&format!("<style>{STYLE}</style>")));
        assert!(html.ends_with("<main><p>body</p></main></body></html>"));
    }
}
