//! Agent builds the server can hand out: files named
//! `kenny-agent-<version>-<os>-<arch>[.exe]` in `<data dir>/agent-releases/`, served at
//! `/d/agent/<file>` by [`super::download`]. Binaries are not secrets; what protects an agent is the manifest
//! the server signs for each update (see [`super`]), not where the file lies.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub(crate) const DIR: &str = "agent-releases";
const PREFIX: &str = "kenny-agent-";

pub(crate) type Version = (u64, u64, u64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Release {
    pub version: Version,
    pub version_text: String,
    pub file_name: String,
    pub path: PathBuf,
}

pub(crate) fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR)
}

/// What a release file name stands for: version (parsed and as written), OS, architecture.
pub(crate) struct Name {
    version: Version,
    version_text: String,
    os: String,
    arch: String,
}

pub(crate) fn parse_name(name: &str) -> Option<Name> {
    if !kenny_proto::update::Manifest::file_name_is_plain(name) {
        return None;
    }
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

/// Every regular file in `dir` that names a build for this OS and architecture.
fn builds_for(dir: &Path, os: &str, arch: &str) -> Vec<Release> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let file_name = e.file_name().to_string_lossy().into_owned();
            let n = parse_name(&file_name)?;
            (n.os == os && n.arch == arch).then(|| Release {
                version: n.version,
                version_text: n.version_text,
                file_name,
                path: e.path(),
            })
        })
        .collect()
}

/// One build in the directory, for listings and install scripts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Build {
    pub os: String,
    pub arch: String,
    pub version: String,
    pub file: String,
    pub size: u64,
    #[serde(skip)]
    pub path: PathBuf,
    #[serde(skip)]
    pub parsed: Version,
}

/// Every build in `dir`, newest first within each OS and architecture.
pub(crate) fn all(dir: &Path) -> Vec<Build> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut builds: Vec<Build> = entries
        .flatten()
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            let file = e.file_name().to_string_lossy().into_owned();
            let n = parse_name(&file)?;
            Some(Build {
                os: n.os,
                arch: n.arch,
                version: n.version_text,
                file,
                size: meta.len(),
                path: e.path(),
                parsed: n.version,
            })
        })
        .collect();
    builds.sort_by(|a, b| (&a.os, &a.arch, b.parsed).cmp(&(&b.os, &b.arch, a.parsed)));
    builds
}

/// The newest build of each architecture for `os`.
pub(crate) fn newest_per_arch(dir: &Path, os: &str) -> Vec<Build> {
    let mut newest: Vec<Build> = Vec::new();
    for build in all(dir).into_iter().filter(|b| b.os == os) {
        if newest.last().is_none_or(|last| last.arch != build.arch) {
            newest.push(build);
        }
    }
    newest
}

/// The newest build for this OS and architecture that is newer than `than`.
pub(crate) fn newest_for(dir: &Path, os: &str, arch: &str, than: &str) -> Option<Release> {
    let floor = kenny_proto::results::parse_version(than).unwrap_or((0, 0, 0));
    builds_for(dir, os, arch)
        .into_iter()
        .filter(|r| r.version > floor)
        .max_by_key(|r| r.version)
}

/// The build of exactly `version` for this OS and architecture.
pub(crate) fn exact(dir: &Path, os: &str, arch: &str, version: Version) -> Option<Release> {
    builds_for(dir, os, arch).into_iter().find(|r| r.version == version)
}

/// The `os-arch` pairs `dir` holds a build of exactly `version` for, sorted.
pub(crate) fn platforms_of(dir: &Path, version: Version) -> Vec<String> {
    let mut found: Vec<String> = all(dir)
        .into_iter()
        .filter(|b| b.parsed == version)
        .map(|b| format!("{}-{}", b.os, b.arch))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Size and lower-case hex SHA-256 of a file, read once.
pub(crate) fn size_and_sha256(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let size = std::io::copy(&mut file, &mut hasher)?;
    Ok((size, hex::encode(hasher.finalize())))
}

/// Release hashes, so an update does not read a whole build (tens of MB) every time.
/// An entry holds while the file's size and modification time are unchanged. A file
/// replaced without either changing would be offered with its old hash; the agent then
/// refuses the download (it checks size and hash), so a stale entry fails safe.
#[derive(Default)]
pub(crate) struct HashCache {
    entries: std::sync::Mutex<std::collections::HashMap<PathBuf, Hashed>>,
}

#[derive(Clone)]
struct Hashed {
    len: u64,
    modified: Option<std::time::SystemTime>,
    sha256: String,
}

impl HashCache {
    /// Like [`size_and_sha256`], from the cache when the file has not changed. Blocking.
    pub(crate) fn size_and_sha256(&self, path: &Path) -> std::io::Result<(u64, String)> {
        let meta = std::fs::metadata(path)?;
        let (len, modified) = (meta.len(), meta.modified().ok());
        let lock = || self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = lock().get(path)
            && h.len == len
            && h.modified == modified
            && modified.is_some()
        {
            return Ok((h.len, h.sha256.clone()));
        }
        let (size, sha256) = size_and_sha256(path)?;
        // Cached under the metadata read before hashing: if the file changed meanwhile,
        // the next call sees other metadata and hashes again.
        if size == len {
            let mut entries = lock();
            // Builds are few; entries of files that went away are dropped here.
            entries.retain(|p, _| p.exists());
            entries.insert(
                path.to_owned(),
                Hashed {
                    len,
                    modified,
                    sha256: sha256.clone(),
                },
            );
        }
        Ok((size, sha256))
    }

    #[cfg(test)]
    fn cached(&self, path: &Path) -> Option<String> {
        self.entries.lock().unwrap().get(path).map(|h| h.sha256.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_cached_until_the_build_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kenny-agent-0.2.0-linux-x86_64");
        std::fs::write(&path, b"first build").unwrap();
        let cache = HashCache::default();
        let first = cache.size_and_sha256(&path).unwrap();
        assert_eq!(first, size_and_sha256(&path).unwrap());
        assert_eq!(cache.cached(&path), Some(first.1.clone()), "kept after the first read");
        // A cached hash is what is answered, without reading the file: planted here to
        // tell the two apart.
        cache.entries.lock().unwrap().get_mut(&path).unwrap().sha256 = "from-the-cache".into();
        assert_eq!(cache.size_and_sha256(&path).unwrap().1, "from-the-cache");
        // A replaced build (another size) is hashed again.
        std::fs::write(&path, b"second, longer build").unwrap();
        let second = cache.size_and_sha256(&path).unwrap();
        assert_eq!(second, size_and_sha256(&path).unwrap());
        assert_ne!(second.1, first.1);
    }

    #[test]
    fn picks_the_newest_matching_build_or_an_exact_one() {
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
        assert_eq!(
            exact(dir.path(), "linux", "x86_64", (0, 1, 1)).unwrap().file_name,
            "kenny-agent-0.1.1-linux-x86_64"
        );
        assert_eq!(exact(dir.path(), "linux", "aarch64", (0, 1, 1)), None);
        let (size, sha) = size_and_sha256(&r.path).unwrap();
        assert_eq!(size, "kenny-agent-0.3.0-linux-x86_64".len() as u64);
        assert_eq!(sha, hex::encode(Sha256::digest(b"kenny-agent-0.3.0-linux-x86_64")));
    }

    #[test]
    fn only_plain_release_names_are_builds() {
        for bad in [
            "kenny-agent-0.1.0-linux-x86_64/../../kenny.db",
            "kenny-agent-..-linux-x86_64",
            "kenny-agent-0.1.0-linux-x86%2f64",
            "kenny.db",
        ] {
            assert!(parse_name(bad).is_none(), "{bad}");
        }
    }
}
