//! Agent builds the server can hand out for `agent_update`: files named
//! `kenny-agent-<version>-<os>-<arch>[.exe]` in `<data dir>/agent-releases/`, served at
//! `/d/agent/<file>`. Binaries are not secrets; what protects an agent is that it takes
//! updates only from its own server and checks the SHA-256 it is given.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::state::AppState;

pub const DIR: &str = "agent-releases";
const PREFIX: &str = "kenny-agent-";

pub type Version = (u64, u64, u64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub version: Version,
    pub version_text: String,
    pub file_name: String,
    pub path: PathBuf,
}

pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR)
}

/// What a release file name stands for: version (parsed and as written), OS, architecture.
struct Name {
    version: Version,
    version_text: String,
    os: String,
    arch: String,
}

fn parse_name(name: &str) -> Option<Name> {
    let rest = name.strip_prefix(PREFIX)?;
    let rest = rest.strip_suffix(".exe").unwrap_or(rest);
    let mut parts = rest.splitn(3, '-');
    let version_text = parts.next()?.to_owned();
    let os = parts.next()?.to_owned();
    let arch = parts.next()?.to_owned();
    Some(Name {
        version: kenny_proto::results::parse_version(&version_text)?,
        version_text,
        os,
        arch,
    })
}

/// The newest build for this OS and architecture that is newer than `than`.
pub fn newest_for(dir: &Path, os: &str, arch: &str, than: &str) -> Option<Release> {
    let floor = kenny_proto::results::parse_version(than).unwrap_or((0, 0, 0));
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let file_name = e.file_name().to_string_lossy().into_owned();
            let n = parse_name(&file_name)?;
            (n.os == os && n.arch == arch && n.version > floor).then(|| Release {
                version: n.version,
                version_text: n.version_text,
                file_name,
                path: e.path(),
            })
        })
        .max_by_key(|r| r.version)
}

pub fn sha256_of(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// `GET /d/agent/{file}`: a release file, by its exact name.
pub async fn download(State(state): State<Arc<AppState>>, UrlPath(file): UrlPath<String>) -> Response {
    if parse_name(&file).is_none() || file.contains(['/', '\\']) {
        return (StatusCode::NOT_FOUND, "no such agent build\n").into_response();
    }
    let path = dir(&state.config.data_dir).join(&file);
    match tokio::fs::read(&path).await {
        Ok(bytes) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            bytes,
        )
            .into_response(),
        Err(_) => (StatusCode::NOT_FOUND, "no such agent build\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_newest_matching_build() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "kenny-agent-0.1.1-linux-x86_64",
            "kenny-agent-0.3.0-linux-x86_64",
            "kenny-agent-0.4.0-windows-x86_64.exe",
            "kenny-agent-0.9.0-linux-aarch64",
            "kenny-agent-latest-linux-x86_64",
            "notes.txt",
        ] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        let r = newest_for(dir.path(), "linux", "x86_64", "0.1.0").unwrap();
        assert_eq!(
            (r.version_text.as_str(), r.file_name.as_str()),
            ("0.3.0", "kenny-agent-0.3.0-linux-x86_64")
        );
        assert_eq!(newest_for(dir.path(), "linux", "x86_64", "0.3.0"), None);
        assert_eq!(
            newest_for(dir.path(), "windows", "x86_64", "0.1.0").unwrap().file_name,
            "kenny-agent-0.4.0-windows-x86_64.exe"
        );
        assert_eq!(
            newest_for(&dir.path().join("missing"), "linux", "x86_64", "0.1.0"),
            None
        );
        assert_eq!(sha256_of(&r.path).unwrap(), hex_sha(b"kenny-agent-0.3.0-linux-x86_64"));
    }

    fn hex_sha(bytes: &[u8]) -> String {
        Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }
}
