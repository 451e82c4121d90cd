//! The parental web filter: a marked block of entries in the hosts file, plus (on
//! request) browser policies that stop DNS-over-HTTPS from going around it.

mod doh;
mod domains;
mod hosts;

use std::time::Duration;

use kenny_proto::args::WebfilterApplyArgs;
use kenny_proto::results::webfilter_list_hash;
use serde_json::{Value, json};
use tokio::process::Command;

use super::bounded::{BoundedBuf, blocking};
use super::process::run_captured_into;
use super::shell::system32_tool;
use super::{ToolContext, ToolError, ToolResult};

pub(super) use domains::server_host_name;
/// The account tools write their configuration files the same way.
pub(super) use hosts::write_atomic;

const BACKSTOP: Duration = Duration::from_secs(30);
const FLUSH_LIMIT: Duration = Duration::from_secs(15);

/// One change to the hosts file at a time, so two calls cannot interleave their
/// read-modify-write.
static HOSTS_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DohPolicy {
    Disable,
    Leave,
}

impl DohPolicy {
    fn as_str(self) -> &'static str {
        match self {
            DohPolicy::Disable => "disable",
            DohPolicy::Leave => "leave",
        }
    }
}

pub(super) async fn status(ctx: &ToolContext) -> ToolResult {
    let path = hosts::hosts_path(ctx);
    let shown = path.display().to_string();
    let block = run_blocking("reading the hosts file", move || {
        let text = read_hosts(&path)?;
        hosts::find_block(&text, &path)
    })
    .await?;
    let doh = doh::status(ctx).await?;
    let (active, count, hash, content, at) = match &block {
        Some(b) => (
            true,
            b.domains.len(),
            non_empty(&b.meta.list_hash),
            Value::from(content_hash(&b.domains)),
            non_empty(&b.meta.applied_at),
        ),
        None => (false, 0, Value::Null, Value::Null, Value::Null),
    };
    Ok(json!({
        "active": active,
        "entry_count": count,
        "list_hash": hash,
        "content_hash": content,
        "applied_at": at,
        "doh_policy": doh.to_json(),
        "supported": true,
        "hosts_file": shown,
    }))
}

pub(super) async fn apply(args: WebfilterApplyArgs, ctx: &ToolContext) -> ToolResult {
    let doh_policy = match args.doh_policy.as_deref().map(str::trim) {
        None | Some("") | Some("leave") => DohPolicy::Leave,
        Some("disable") => DohPolicy::Disable,
        Some(other) => {
            return Err(ToolError::bad_args(format!(
                "doh_policy must be `disable` or `leave`, got `{other}`"
            )));
        }
    };
    let domains = domains::validate_with(&args.domains, &ctx.protected_hosts)?;
    let list_hash = match args.list_hash.as_deref() {
        Some(given) => check_hash(given)?,
        None => webfilter_list_hash(&domains),
    };
    let meta = hosts::Meta {
        list_hash: list_hash.clone(),
        applied_at: now_utc(),
        doh_policy: doh_policy.as_str().to_owned(),
        eol_added: false,
    };
    let applied_at = meta.applied_at.clone();
    let count = domains.len();

    let _one_at_a_time = HOSTS_LOCK.lock().await;
    let path = hosts::hosts_path(ctx);
    let shown = path.display().to_string();
    run_blocking("writing the hosts file", move || {
        let text = read_hosts(&path)?;
        let base = match hosts::find_block(&text, &path)? {
            Some(block) => hosts::without_block(&text, &block),
            None => text.clone(),
        };
        let updated = hosts::with_block(&base, &domains, &meta);
        if updated != text {
            hosts::write_atomic(&path, &updated)?;
        }
        Ok(())
    })
    .await?;
    let flushed = flush_dns_cache().await;
    let mut doh_note = None;
    let doh_applied = match doh_policy {
        DohPolicy::Leave => false,
        DohPolicy::Disable => {
            doh_note = doh::apply(ctx).await.map_err(|e| {
                ToolError::exec_failed(format!(
                    "{shown} now blocks {count} domains, but turning DNS-over-HTTPS off failed, so browsers may still go around the filter: {}",
                    e.message
                ))
            })?;
            true
        }
    };
    let mut result = json!({
        "ok": true,
        "applied": count,
        "doh_policy_applied": doh_applied,
        "list_hash": list_hash,
        "applied_at": applied_at,
        "hosts_file": shown,
        "dns_cache_flushed": flushed.is_ok(),
    });
    let notes: Vec<String> = [flushed.err(), doh_note].into_iter().flatten().collect();
    if !notes.is_empty() {
        result["note"] = Value::from(notes.join("; "));
    }
    Ok(result)
}

pub(super) async fn clear(ctx: &ToolContext) -> ToolResult {
    let _one_at_a_time = HOSTS_LOCK.lock().await;
    let path = hosts::hosts_path(ctx);
    let shown = path.display().to_string();
    let removed = run_blocking("writing the hosts file", move || {
        let text = read_hosts(&path)?;
        match hosts::find_block(&text, &path)? {
            Some(block) => {
                hosts::write_atomic(&path, &hosts::without_block(&text, &block))?;
                Ok(block.domains.len())
            }
            None => Ok(0),
        }
    })
    .await?;
    let flushed = if removed > 0 { flush_dns_cache().await } else { Ok(()) };
    let doh_cleared = doh::clear(ctx).await.map_err(|e| {
        ToolError::exec_failed(format!(
            "kenny's block was removed from {shown}, but its DNS-over-HTTPS policies could not be removed: {}",
            e.message
        ))
    })?;
    let mut result = json!({
        "ok": true,
        "removed_entries": removed,
        "doh_policy_cleared": doh_cleared,
        "hosts_file": shown,
    });
    if let Err(note) = flushed {
        result["note"] = Value::from(note);
    }
    Ok(result)
}

/// The hash of what the block holds now, computed as a list's hash is, so a server can
/// tell a hand-edited block from the list it sent even when the header still names it.
fn content_hash(in_file: &[String]) -> String {
    let mut names: Vec<String> = in_file.iter().map(|d| d.to_ascii_lowercase()).collect();
    names.sort();
    names.dedup();
    webfilter_list_hash(&names)
}

fn non_empty(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        Value::from(text)
    }
}

/// An absent hosts file is an empty one (apply creates it).
fn read_hosts(path: &std::path::Path) -> Result<Vec<u8>, String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("could not read {}: {e}", path.display())),
    }
}

/// A caller's hash goes into a comment line of the hosts file, so it must be one plain token.
fn check_hash(given: &str) -> Result<String, ToolError> {
    let ok = !given.is_empty()
        && given
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:+/=".contains(c));
    if ok {
        Ok(given.to_owned())
    } else {
        Err(ToolError::bad_args(
            "list_hash must be one token of letters, digits and `-_.:+/=` (it is stored in the hosts file), or omitted to have it computed",
        ))
    }
}

fn now_utc() -> String {
    let now = time::OffsetDateTime::now_utc();
    let now = now.replace_nanosecond(0).unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Windows caches DNS answers, hosts entries included, so a change shows only after a
/// flush. Linux needs none: the resolver reads the hosts file on every lookup (a local
/// caching daemon such as nscd, if installed, keeps old answers until they expire).
async fn flush_dns_cache() -> Result<(), String> {
    if !cfg!(windows) {
        return Ok(());
    }
    let mut cmd = Command::new(system32_tool("ipconfig.exe"));
    cmd.arg("/flushdns");
    match run_captured_into(cmd, None, FLUSH_LIMIT, BoundedBuf::new(4096), BoundedBuf::new(4096)).await {
        Ok(done) if done.status.success() => Ok(()),
        Ok(done) => Err(format!(
            "ipconfig /flushdns failed ({}), so cached answers last until they expire: {}",
            done.status,
            done.stdout.into_text().trim()
        )),
        Err(e) => Err(format!(
            "ipconfig /flushdns did not run, so cached answers last until they expire: {}",
            e.message
        )),
    }
}

/// File work off the async threads; an `Err` string is the tool's `exec_failed` message.
async fn run_blocking<T, F>(what: &str, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, String> + Send + 'static,
{
    blocking(what, BACKSTOP, work).await?.map_err(ToolError::exec_failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn list_hash_is_stable_and_short() {
        let hash = webfilter_list_hash(&["badsite.example".to_owned(), "www.badsite.example".to_owned()]);
        assert_eq!(hash.len(), 16);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
        let expected: String = Sha256::digest(b"badsite.example\nwww.badsite.example")
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hash, expected);
        assert_ne!(hash, webfilter_list_hash(&["badsite.example".to_owned()]));
    }

    #[test]
    fn caller_hashes_must_be_one_token() {
        assert_eq!(check_hash("a1b2c3d4e5f60718").unwrap(), "a1b2c3d4e5f60718");
        assert!(check_hash("sha256:AbC+/=").is_ok());
        for bad in ["", "two words", "line\nbreak", "x#y", "é"] {
            assert!(check_hash(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn timestamps_are_whole_seconds_in_utc() {
        let at = now_utc();
        assert_eq!(at.len(), 20, "{at}");
        assert!(at.ends_with('Z'));
    }
}
