//! Administration on a data directory: users, tokens, agents. Used by the CLI and the
//! quick-start launcher; works while a server runs on the same directory.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::principal::{CredentialKind, Role};
use crate::secrets;
use crate::store::Store;
use kenny_proto::agent_id::{AGENT_ID_RULE, is_valid as valid_agent_id};

/// What an agent needs to enroll: printed by `kenny-server agent add`.
#[derive(Debug, Clone, Serialize)]
pub struct AgentEnrollment {
    pub agent_id: String,
    pub token: String,
    pub server_pubkey: String,
}

pub fn valid_username(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'))
}

/// Creates an account from the command line or the launcher (one at a time, outside the
/// server's request path, so the password is hashed without waiting for the server's cap).
pub fn add_user(store: &Store, name: &str, role: Role, hosts: &[String], password: &str) -> anyhow::Result<i64> {
    check_new_user(name, role, hosts, password)?;
    let hash = crate::passwords::hash_blocking(password)?;
    Ok(store.create_user(name, &hash, role, hosts, &crate::clock::now())?)
}

/// Validates a new account before its password is hashed.
pub fn check_new_user(name: &str, role: Role, hosts: &[String], password: &str) -> anyhow::Result<()> {
    if !valid_username(name) {
        bail!("user name {name:?} is not valid: use 1-64 letters, digits, '.', '_', '-' or '@'");
    }
    if password.chars().count() < MIN_PASSWORD_CHARS {
        bail!("the password is too short: use at least {MIN_PASSWORD_CHARS} characters");
    }
    if role != Role::User && !hosts.is_empty() {
        bail!(
            "--hosts only applies to --role user; a {} reaches every host",
            role.as_str()
        );
    }
    if let Some(bad) = hosts.iter().find(|h| !valid_agent_id(h)) {
        bail!("host {bad:?} is not a valid agent id");
    }
    Ok(())
}

pub const MIN_PASSWORD_CHARS: usize = 8;

/// Every account, as `kenny-server user list` prints it.
pub fn list_users(store: &Store) -> anyhow::Result<Vec<crate::store::UserRecord>> {
    Ok(store.users()?)
}

/// A new password for `username`: every session and OAuth grant of theirs ends, and
/// with `revoke_tokens` every personal access token too. Returns the tokens revoked.
pub fn set_user_password(store: &Store, username: &str, password: &str, revoke_tokens: bool) -> anyhow::Result<usize> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        bail!("the password is too short: use at least {MIN_PASSWORD_CHARS} characters");
    }
    let id = store.user_id(username)?;
    let hash = crate::passwords::hash_blocking(password)?;
    Ok(store.set_password(id, &hash, None, revoke_tokens, &crate::clock::now())?)
}

/// Disables or enables `username`. Disabling ends their sessions and OAuth grants (and
/// with `revoke_tokens` their tokens for good); the last enabled superuser cannot be
/// disabled. Returns the tokens revoked.
pub fn set_user_disabled(store: &Store, username: &str, disabled: bool, revoke_tokens: bool) -> anyhow::Result<usize> {
    let id = store.user_id(username)?;
    store.update_user(
        id,
        &crate::store::UserPatch {
            role: None,
            disabled: Some(disabled),
            hosts: None,
        },
    )?;
    let now = crate::clock::now();
    Ok(if disabled {
        store.end_sessions(id, revoke_tokens, &now)?
    } else if revoke_tokens {
        store.revoke_user_tokens(id, &now)?
    } else {
        0
    })
}

/// Deletes `username` with their tokens and sessions; never the last enabled superuser.
pub fn delete_user(store: &Store, username: &str) -> anyhow::Result<()> {
    let id = store.user_id(username)?;
    Ok(store.delete_user(id)?)
}

/// `username`'s personal access tokens (never the tokens themselves).
pub fn list_tokens(store: &Store, username: &str) -> anyhow::Result<Vec<crate::store::TokenRecord>> {
    let id = store.user_id(username)?;
    Ok(store.user_tokens(id)?)
}

/// Revokes token `token_id` of `username`.
pub fn revoke_token(store: &Store, username: &str, token_id: i64) -> anyhow::Result<()> {
    let id = store.user_id(username)?;
    if !store.revoke_token(id, token_id, &crate::clock::now())? {
        bail!("{username} has no live token {token_id}; `kenny-server token list {username}` shows their tokens");
    }
    Ok(())
}

/// Mints a personal access token for `username`; returns it (it is stored hashed).
pub fn create_token(store: &Store, username: &str, label: Option<&str>) -> anyhow::Result<String> {
    create_token_at(store, username, label, &crate::clock::now())
}

/// [`create_token`] dated `now`: a running server passes its own clock's time.
pub fn create_token_at(store: &Store, username: &str, label: Option<&str>, now: &str) -> anyhow::Result<String> {
    let user_id = store.user_id(username)?;
    let token = secrets::new_token(secrets::PAT_PREFIX);
    store.create_token(user_id, CredentialKind::Pat, label, &secrets::token_hash(&token), now)?;
    Ok(token)
}

pub fn add_agent(store: &Store, data_dir: &Path, agent_id: &str) -> anyhow::Result<AgentEnrollment> {
    add_agent_at(store, data_dir, agent_id, &crate::clock::now())
}

/// [`add_agent`] dated `now`: a running server passes its own clock's time.
pub fn add_agent_at(store: &Store, data_dir: &Path, agent_id: &str, now: &str) -> anyhow::Result<AgentEnrollment> {
    if !valid_agent_id(agent_id) {
        bail!("agent id {agent_id:?} is not valid: use {AGENT_ID_RULE}");
    }
    let token = secrets::new_token(secrets::AGENT_TOKEN_PREFIX);
    store.create_agent(agent_id, &secrets::token_hash(&token), now)?;
    enrollment(store, data_dir, agent_id, token)
}

/// The command that installs the agent as a service on the PC, with the values `add_agent`
/// returned. Ids, keys and tokens are plain words (nothing a shell or PowerShell would
/// interpret); anything else, such as an odd server URL, is single-quoted.
pub fn install_command(server_url: &str, e: &AgentEnrollment) -> String {
    [
        "kenny-agent",
        "install",
        "--server",
        server_url,
        "--agent-id",
        &e.agent_id,
        "--server-pubkey",
        &e.server_pubkey,
        "--enroll-token",
        &e.token,
    ]
    .iter()
    .map(|w| shell_word(w))
    .collect::<Vec<_>>()
    .join(" ")
}

/// A word as typed into a shell: bare when it holds only characters no shell treats
/// specially, else single-quoted (POSIX style, `'` inside as `'\''`).
fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=+@,".contains(&b));
    if plain {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// Forgets an agent's key and issues a new enrollment token; the old token and key stop
/// working at once.
pub fn rekey_agent(store: &Store, data_dir: &Path, agent_id: &str) -> anyhow::Result<AgentEnrollment> {
    let token = secrets::new_token(secrets::AGENT_TOKEN_PREFIX);
    store.rekey_agent(agent_id, &secrets::token_hash(&token))?;
    enrollment(store, data_dir, agent_id, token)
}

/// Makes a one-time install link for `agent_id` on `os`, valid `minutes`, as `by`.
/// `base_url` is how the PC reaches this server: what the link and the script use.
pub fn create_install_link(
    store: &Store,
    base_url: &str,
    agent_id: &str,
    os: &str,
    minutes: Option<u64>,
    by: &str,
) -> anyhow::Result<crate::onboarding::CreatedLink> {
    let url = url::Url::parse(base_url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{base_url:?} is not the server's URL: pass --url https://kenny.example.com (or set KENNY_PUBLIC_URL)"
            )
        })?;
    let spec = crate::onboarding::LinkSpec::new(agent_id, os, minutes).map_err(|why| anyhow::anyhow!(why))?;
    Ok(crate::onboarding::create(
        store,
        url.as_str(),
        &spec,
        by,
        time::OffsetDateTime::now_utc(),
    )?)
}

/// Copies an agent build into `<data dir>/agent-releases/` under the name updates and
/// install links look for; returns that path. The file must be an executable of the
/// named OS (ELF for Linux, PE for Windows); a build already there is kept unless it is
/// the same file.
pub fn add_release(data_dir: &Path, file: &Path, version: &str, os: &str, arch: &str) -> anyhow::Result<PathBuf> {
    if kenny_proto::results::parse_version(version).is_none() {
        bail!("version {version:?} is not MAJOR.MINOR.PATCH (for example 0.3.1)");
    }
    let (magic, exe): (&[u8], &str) = match os {
        "linux" => (b"\x7fELF", ""),
        "windows" => (b"MZ", ".exe"),
        _ => bail!("os {os:?} is not one kenny builds for: use linux or windows"),
    };
    if arch.is_empty()
        || !arch
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        bail!("architecture {arch:?} is not valid: use what the agent reports, such as x86_64 or aarch64");
    }
    let name = format!("kenny-agent-{version}-{os}-{arch}{exe}");
    let meta = std::fs::metadata(file).with_context(|| format!("reading {}", file.display()))?;
    if !meta.is_file() || meta.len() > kenny_proto::update::MAX_BUILD_BYTES {
        bail!("{} is not a plain file of at most 256 MiB", file.display());
    }
    let mut head = [0u8; 4];
    let got = std::io::Read::read(&mut std::fs::File::open(file)?, &mut head)?;
    if !head[..got].starts_with(magic) {
        bail!(
            "{} is not a {os} executable; give the kenny-agent binary built for {os}/{arch}",
            file.display()
        );
    }
    let dir = crate::updates::releases::dir(data_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let target = dir.join(&name);
    if target.exists() {
        // Compared by size and hash, streamed: a build can be hundreds of MB.
        let same = |p: &Path| crate::updates::releases::size_and_sha256(p);
        if same(&target)? == same(file)? {
            return Ok(target);
        }
        bail!(
            "{} already exists with other content; a version names one build: give this one a new version",
            target.display()
        );
    }
    let staged = dir.join(format!(".{name}.adding"));
    std::fs::copy(file, &staged).with_context(|| format!("copying {} into {}", file.display(), dir.display()))?;
    set_executable(&staged)?;
    std::fs::rename(&staged, &target)?;
    Ok(target)
}

#[cfg(unix)]
fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}

/// The builds in `<data dir>/agent-releases/`, newest first per OS and architecture.
pub fn list_releases(data_dir: &Path) -> serde_json::Value {
    serde_json::json!(crate::updates::releases::all(&crate::updates::releases::dir(data_dir)))
}

fn enrollment(store: &Store, data_dir: &Path, agent_id: &str, token: String) -> anyhow::Result<AgentEnrollment> {
    let key = crate::server_key::server_key(store, data_dir)?;
    Ok(AgentEnrollment {
        agent_id: agent_id.to_owned(),
        token,
        server_pubkey: kenny_proto::auth::encode_b64(key.verifying_key().as_bytes()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("kenny_agt_AbC-9"), "kenny_agt_AbC-9");
        assert_eq!(shell_word("a+b/c=="), "a+b/c==");
        assert_eq!(shell_word("http://10.0.0.2:7420"), "http://10.0.0.2:7420");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("$(x)"), "'$(x)'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn admin_operations_validate_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        add_user(&store, "alice", Role::Superuser, &[], "correct horse").unwrap();
        let err = add_user(&store, "alice", Role::Operator, &[], "correct horse").unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        assert!(
            add_user(&store, "bob", Role::User, &[], "short")
                .unwrap_err()
                .to_string()
                .contains("too short")
        );
        assert!(add_user(&store, "bad name", Role::User, &[], "long enough").is_err());
        assert!(add_user(&store, "op", Role::Operator, &["pc".into()], "long enough").is_err());
        add_user(&store, "kid", Role::User, &["pc-a".into()], "long enough").unwrap();

        let pat = create_token(&store, "kid", Some("laptop")).unwrap();
        let p = store
            .principal_for_token(CredentialKind::Pat, &secrets::token_hash(&pat))
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.username.as_str(), p.role, p.hosts.clone()),
            (
                "kid",
                Role::User,
                Some(vec![kenny_proto::AgentId::parse("pc-a").unwrap()])
            )
        );
        assert!(
            create_token(&store, "nobody", None)
                .unwrap_err()
                .to_string()
                .contains("no user named")
        );

        let e = add_agent(&store, dir.path(), "pc-a").unwrap();
        assert!(e.token.starts_with(secrets::AGENT_TOKEN_PREFIX));
        assert!(
            add_agent(&store, dir.path(), "pc-a")
                .unwrap_err()
                .to_string()
                .contains("already exists")
        );
        assert!(add_agent(&store, dir.path(), "pc a").is_err());
        let again = add_agent(&store, dir.path(), "pc-b").unwrap();
        assert_eq!(e.server_pubkey, again.server_pubkey, "one server identity per data dir");

        store.enroll_agent("pc-a", "key-1", "t").unwrap();
        let fresh = rekey_agent(&store, dir.path(), "pc-a").unwrap();
        assert_ne!(fresh.token, e.token);
        let creds = store.agent_credentials("pc-a").unwrap().unwrap();
        assert!(!creds.enrolled && creds.token_hash == secrets::token_hash(&fresh.token));
        store.enroll_agent("pc-a", "key-2", "t").unwrap();

        let cmd = install_command("https://kenny.example.com", &again);
        assert_eq!(
            cmd,
            format!(
                "kenny-agent install --server https://kenny.example.com --agent-id pc-b --server-pubkey {} --enroll-token {}",
                shell_word(&again.server_pubkey),
                again.token
            )
        );
        assert!(
            rekey_agent(&store, dir.path(), "nope")
                .unwrap_err()
                .to_string()
                .contains("no agent")
        );
    }
}
