//! Administration on a data directory: users, tokens, agents. Used by the CLI and the
//! quick-start launcher; works while a server runs on the same directory.

use std::path::Path;

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
    enrollment(data_dir, agent_id, token)
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
    enrollment(data_dir, agent_id, token)
}

fn enrollment(data_dir: &Path, agent_id: &str, token: String) -> anyhow::Result<AgentEnrollment> {
    let key = secrets::load_or_create_server_key(data_dir).context("loading the server key")?;
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
