//! First-run preparation of a data directory: superuser, token, local agent.
//!
//! Re-running `kenny up` on the same directory reuses what is there: the superuser,
//! the quick-start token (kept owner-only in the data directory so the printed client
//! configuration stays valid) and the local agent's enrollment.

use std::path::{Path, PathBuf};

use anyhow::Context;
use kenny_agent::{AgentConfig, AuthMode};
use kenny_proto::frame::Secret;
use kenny_server::principal::{CredentialKind, Role};
use kenny_server::secrets;
use kenny_server::store::Store;

const SUPERUSER: &str = "admin";
const TOKEN_FILE: &str = "quickstart.token";
const AGENT_DIR: &str = "local-agent";
const ENROLL_FILE: &str = "enrollment.json";

pub(crate) struct Prepared {
    pub agent_id: String,
    pub username: String,
    /// Set only when this run created the superuser: shown once.
    pub new_password: Option<String>,
    pub token: String,
    server_pubkey: String,
    enroll_token: Option<String>,
}

impl Prepared {
    pub(crate) fn agent_config(&self, base_url: &str, data_dir: &Path) -> AgentConfig {
        let mut config = AgentConfig::new(
            base_url,
            &self.agent_id,
            AuthMode::Mutual {
                server_pubkey: self.server_pubkey.clone(),
                enroll_token: self.enroll_token.clone().map(Secret),
            },
            agent_dir(data_dir),
        );
        // The agent's commands must never reach the server's database or key.
        config.private_dirs.push(data_dir.to_path_buf());
        config.tools = kenny_agent::tools::ToolContext::from_env();
        config
    }
}

fn agent_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(AGENT_DIR)
}

/// This machine's hostname, reduced to the characters an agent id allows.
pub(crate) fn default_agent_id() -> String {
    let host = sysinfo::System::host_name().unwrap_or_default();
    let id: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if id.trim_matches('-').is_empty() {
        "this-pc".into()
    } else {
        id
    }
}

pub(crate) fn prepare(data_dir: &Path, agent_id: &str) -> anyhow::Result<Prepared> {
    let store = Store::open(data_dir).with_context(|| format!("opening {}", data_dir.display()))?;
    let (username, new_password) = match store.first_superuser()? {
        Some(name) => (name, None),
        None => {
            let password = secrets::new_password();
            kenny_server::admin::add_user(&store, SUPERUSER, Role::Superuser, &[], &password)?;
            (SUPERUSER.to_owned(), Some(password))
        }
    };
    let token = quickstart_token(&store, data_dir, &username)?;

    let dir = agent_dir(data_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let enrollment_path = dir.join(ENROLL_FILE);
    let enrollment: serde_json::Value = if store.agent(agent_id)?.is_none() {
        let e = kenny_server::admin::add_agent(&store, data_dir, agent_id)?;
        let value = serde_json::to_value(&e)?;
        let _ = std::fs::remove_file(&enrollment_path);
        secrets::write_new_secret(&enrollment_path, value.to_string().as_bytes())?;
        value
    } else {
        let text = std::fs::read_to_string(&enrollment_path).with_context(|| {
            format!(
                "agent {agent_id} exists but its quick-start enrollment ({}) is missing; pass another --agent-id",
                enrollment_path.display()
            )
        })?;
        serde_json::from_str(&text).context("reading the local agent's enrollment")?
    };
    let field = |k: &str| enrollment.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    if field("agent_id").as_deref() != Some(agent_id) {
        anyhow::bail!(
            "{} belongs to another agent id; pass --agent-id {}",
            enrollment_path.display(),
            field("agent_id").unwrap_or_default()
        );
    }
    Ok(Prepared {
        agent_id: agent_id.to_owned(),
        username,
        new_password,
        token,
        server_pubkey: field("server_pubkey").context("enrollment has no server_pubkey")?,
        enroll_token: field("token"),
    })
}

fn quickstart_token(store: &Store, data_dir: &Path, username: &str) -> anyhow::Result<String> {
    let path = data_dir.join(TOKEN_FILE);
    if let Ok(existing) = std::fs::read_to_string(&path) {
        let existing = existing.trim().to_owned();
        if store
            .principal_for_token(CredentialKind::Pat, &secrets::token_hash(&existing))?
            .is_some()
        {
            return Ok(existing);
        }
        std::fs::remove_file(&path).ok();
    }
    let token = kenny_server::admin::create_token(store, username, Some("kenny up"))?;
    secrets::write_new_secret(&path, token.as_bytes()).with_context(|| format!("saving {}", path.display()))?;
    Ok(token)
}

pub(crate) fn banner(base: &str, p: &Prepared, agent_online: bool) -> String {
    let mcp = format!("{base}/mcp");
    let config = serde_json::json!({
        "mcpServers": {
            "kenny": {
                "type": "http",
                "url": mcp,
                "headers": { "Authorization": format!("Bearer {}", p.token) }
            }
        }
    });
    let mut out = String::new();
    out.push_str(&format!("kenny is running at {base}\n\n"));
    if let Some(pw) = &p.new_password {
        out.push_str(&format!(
            "Superuser created: {}  password (shown once, write it down): {pw}\n\n",
            p.username
        ));
    }
    out.push_str(&format!(
        "Local agent: {} ({})\n",
        p.agent_id,
        if agent_online {
            "connected"
        } else {
            "not connected yet; see the log above"
        }
    ));
    out.push_str(&format!("Dashboard:   {base}/  (sign in as {})\n", p.username));
    out.push_str(&format!("MCP URL:     {mcp}\nToken:       {}\n\n", p.token));
    out.push_str("MCP client configuration (Claude Desktop, Cursor, ...):\n");
    out.push_str(&serde_json::to_string_pretty(&config).unwrap_or_default());
    out.push_str(&format!(
        "\n\nClaude Code:\n  claude mcp add --transport http kenny {mcp} --header \"Authorization: Bearer {}\"\n\nPress Ctrl-C to stop.\n",
        p.token
    ));
    out
}
