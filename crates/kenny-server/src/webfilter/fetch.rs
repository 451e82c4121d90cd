//! Fetching list sources: public blocklists over HTTP(S), or files in the data
//! directory's `webfilter-lists/`. A fetch asks only for a changed list (ETag,
//! If-Modified-Since), reads at most [`MAX_LIST_BYTES`], and is judged by
//! `lists::parse_list`; whatever goes wrong, the last good list stays in use and the
//! source says why.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt as _;
use reqwest::StatusCode;
use reqwest::header::{ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};

use super::lists::parse_list;
use crate::store::{SourceFetch, SourceRow};

/// Largest list read; public hosts-format lists of a few hundred thousand names fit.
pub(crate) const MAX_LIST_BYTES: usize = 32 * 1024 * 1024;
/// One fetch, connection to last byte.
const FETCH_LIMIT: Duration = Duration::from_secs(60);
/// The directory (under the data directory) a `file:` source must be in.
pub(crate) const LISTS_DIR: &str = "webfilter-lists";

/// Where a source's list comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    Web(reqwest::Url),
    File(PathBuf),
}

/// Checks a source's address before it is stored: http(s), or a file inside
/// `lists_dir` (after following links, so a link cannot lead outside it).
pub(crate) fn origin(url: &str, lists_dir: &Path) -> Result<Origin, String> {
    let parsed = reqwest::Url::parse(url.trim())
        .map_err(|e| format!("{url:?} is not a URL ({e}); give an http(s) address or a file: URL"))?;
    match parsed.scheme() {
        "http" | "https" => {
            if parsed.host_str().is_none_or(str::is_empty) {
                return Err(format!("{url} names no host"));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err("a list source URL must not carry a user name or password".to_owned());
            }
            Ok(Origin::Web(parsed))
        }
        "file" => {
            let path = parsed
                .to_file_path()
                .map_err(|()| format!("{url} is not a local file path"))?;
            let outside = || {
                format!(
                    "a file source must be a file in {}; copy the list there",
                    lists_dir.display()
                )
            };
            let dir = lists_dir.canonicalize().map_err(|_| outside())?;
            let real = path
                .canonicalize()
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            if !real.starts_with(&dir) || !real.is_file() {
                return Err(outside());
            }
            Ok(Origin::File(real))
        }
        other => Err(format!("list sources are http, https or file URLs, not {other}:")),
    }
}

/// The HTTP client for list sources: bounded, a few redirects within http(s).
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(FETCH_LIMIT)
        .connect_timeout(Duration::from_secs(15))
        .redirect(reqwest::redirect::Policy::limited(5))
        .user_agent(concat!(
            "kenny-server/",
            env!("CARGO_PKG_VERSION"),
            " (web filter lists)"
        ))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Fetches one source; never fails, the outcome says what happened.
pub(crate) async fn fetch(http: &reqwest::Client, source: &SourceRow, lists_dir: &Path) -> SourceFetch {
    let origin = match origin(&source.url, lists_dir) {
        Ok(o) => o,
        Err(why) => return SourceFetch::Failed(why),
    };
    let (text, etag, last_modified) = match origin {
        Origin::File(path) => match read_file(&path).await {
            Ok(text) => (text, None, None),
            Err(why) => return SourceFetch::Failed(why),
        },
        Origin::Web(url) => match get(http, url, source).await {
            Ok(Some(got)) => got,
            Ok(None) => return SourceFetch::Unchanged,
            Err(why) => return SourceFetch::Failed(why),
        },
    };
    match parse_list(&text) {
        Ok(parsed) => SourceFetch::Fresh {
            domains: parsed.domains.into_iter().collect(),
            etag,
            last_modified,
        },
        Err(why) => SourceFetch::Failed(format!("the list was not used: {why}")),
    }
}

async fn read_file(path: &Path) -> Result<String, String> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        let file = std::fs::File::open(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let mut bytes = Vec::new();
        file.take(MAX_LIST_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if bytes.len() > MAX_LIST_BYTES {
            return Err(too_big());
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    })
    .await
    .map_err(|e| format!("reading the list failed: {e}"))?
}

fn too_big() -> String {
    format!(
        "the list is larger than {} MiB; use a smaller list",
        MAX_LIST_BYTES / (1024 * 1024)
    )
}

type Got = (String, Option<String>, Option<String>);

/// `Ok(None)`: not modified.
async fn get(http: &reqwest::Client, url: reqwest::Url, source: &SourceRow) -> Result<Option<Got>, String> {
    let shown = url.to_string();
    let mut request = http.get(url);
    // Ask for a changed list only if the last good one is still there to fall back on.
    if source.fetched_at.is_some() {
        if let Some(etag) = &source.etag {
            request = request.header(IF_NONE_MATCH, etag);
        }
        if let Some(modified) = &source.last_modified {
            request = request.header(IF_MODIFIED_SINCE, modified);
        }
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("could not fetch {shown}: {}", without_url(e)))?;
    if response.status() == StatusCode::NOT_MODIFIED {
        return Ok(None);
    }
    if !response.status().is_success() {
        return Err(format!("{shown} answered {}", response.status()));
    }
    if response.content_length().is_some_and(|n| n > MAX_LIST_BYTES as u64) {
        return Err(too_big());
    }
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.len() <= 200)
            .map(str::to_owned)
    };
    let (etag, last_modified) = (header(ETAG), header(LAST_MODIFIED));
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("fetching {shown} broke off: {}", without_url(e)))?;
        if body.len() + chunk.len() > MAX_LIST_BYTES {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some((String::from_utf8_lossy(&body).into_owned(), etag, last_modified)))
}

/// reqwest's messages repeat the URL; ours already names it.
fn without_url(e: reqwest::Error) -> String {
    if e.is_timeout() {
        return format!("no answer within {} s", FETCH_LIMIT.as_secs());
    }
    let mut text = e.without_url().to_string();
    text.truncate(300);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_web_or_files_in_the_lists_directory() {
        let dir = tempfile::tempdir().unwrap();
        let lists = dir.path().join(LISTS_DIR);
        std::fs::create_dir(&lists).unwrap();
        std::fs::write(lists.join("a.txt"), "a.example\n").unwrap();
        std::fs::write(dir.path().join("outside.txt"), "b.example\n").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), lists.join("link.txt")).unwrap();
        assert!(matches!(
            origin("https://lists.example.org/x.txt", &lists),
            Ok(Origin::Web(_))
        ));
        let inside = format!("file://{}", lists.join("a.txt").display());
        assert!(matches!(origin(&inside, &lists), Ok(Origin::File(_))));
        for (bad, says) in [
            (
                format!("file://{}", dir.path().join("outside.txt").display()),
                "must be a file in",
            ),
            (
                format!("file://{}", lists.join("link.txt").display()),
                "must be a file in",
            ),
            (format!("file://{}", lists.display()), "must be a file in"),
            ("ftp://lists.example.org/x".to_owned(), "not ftp:"),
            (
                "https://user:pw@lists.example.org/x".to_owned(),
                "user name or password",
            ),
            ("not a url".to_owned(), "not a URL"),
        ] {
            let why = origin(&bad, &lists).unwrap_err();
            assert!(why.contains(says), "{bad}: {why}");
        }
    }
}
