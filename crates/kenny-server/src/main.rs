//! `kenny-server`: parse the command line, then serve or administer a data directory.

use std::ffi::OsString;
use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kenny_server::principal::Role;
use kenny_server::settings_file::Setting;
use kenny_server::store::Store;
use kenny_server::{ServeConfig, admin};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "kenny-server",
    version,
    about = "kenny server: agent tunnel, MCP endpoint and HTTP API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct DataDir {
    /// Directory holding the database and the server key (created on first use).
    #[arg(long, env = "KENNY_DATA_DIR", default_value = "kenny-data", global = true)]
    data_dir: PathBuf,
    /// Keep the data in PostgreSQL instead of the data directory's SQLite file
    /// (postgres://user:password@host:port/database), for several replicas sharing one
    /// state. Give it in the environment (KENNY_DATABASE_URL) or the settings file:
    /// on the command line every local user can read its password.
    #[arg(long, env = "KENNY_DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server.
    Serve(Box<ServeArgs>),
    /// Manage user accounts.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage personal access tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage agents.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Install this server as a systemd service (user kenny, data in /var/lib/kenny,
    /// settings in /etc/kenny/server.toml) and start it.
    Install {
        /// Stage the files under this directory instead of / (and start nothing).
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// The address the service listens on (written to the settings file).
        #[arg(long, default_value = "0.0.0.0:7420")]
        listen: String,
        /// The URL clients use to reach it (written to the settings file).
        #[arg(long)]
        public_url: Option<String>,
    },
    /// The agent builds this server hands out (to updates and install links).
    #[command(subcommand)]
    Releases(ReleasesCommand),
    /// Check what the audit trail and results claim.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Take a backup of the data directory (database and server key) into a new file,
    /// while the server runs. Keep it private: it holds the server key.
    Backup {
        /// The file to write; it must not exist.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        data: DataDir,
    },
    /// Check a backup: intact, a kenny database of a schema this build runs, with the
    /// server key. Prints what it holds.
    VerifyBackup {
        /// The backup file.
        file: PathBuf,
    },
    /// Restore a backup into the data directory, with the server stopped (what it
    /// replaces is moved aside, never deleted), or `--staged` for the next start.
    Restore {
        /// The backup file.
        file: PathBuf,
        /// Restore when the server next starts instead of now.
        #[arg(long)]
        staged: bool,
        #[command(flatten)]
        data: DataDir,
    },
}

/// `kenny-server serve`'s settings.
#[derive(Args)]
struct ServeArgs {
    /// A TOML file with any of these settings in snake_case (`public_url = "..."`);
    /// flags and KENNY_* variables override it.
    #[arg(long, env = "KENNY_CONFIG")]
    config: Option<PathBuf>,
    #[arg(long, env = "KENNY_LISTEN", default_value = "127.0.0.1:7420")]
    listen: SocketAddr,
    /// Run as one replica of several behind a load balancer: calls for agents other
    /// replicas hold are carried through this NATS server (nats://host:4222, with
    /// JetStream enabled; put its credentials in the URL). Needs --database-url, shared
    /// by every replica.
    #[arg(long, env = "KENNY_NATS_URL", hide_env_values = true)]
    nats_url: Option<String>,
    /// URL clients use to reach this server (e.g. https://kenny.example.com).
    #[arg(long, env = "KENNY_PUBLIC_URL")]
    public_url: Option<String>,
    /// Seconds between heartbeats to each agent; three silent beats mark it offline.
    #[arg(long, env = "KENNY_HEARTBEAT_SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600))]
    heartbeat_secs: u64,
    /// Seconds to wait for a forwarded call that sets no timeout_s of its own
    /// (default: as long as the tool may take, per the tool catalog).
    #[arg(long, env = "KENNY_CALL_TIMEOUT_SECS", value_parser = clap::value_parser!(u64).range(1..=86400))]
    call_timeout_secs: Option<u64>,
    /// Lifetime of OAuth access tokens, in seconds.
    #[arg(long, env = "KENNY_OAUTH_ACCESS_TOKEN_SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=86400))]
    oauth_access_token_secs: u64,
    /// Lifetime of OAuth refresh tokens, in seconds (each use rotates them).
    #[arg(long, env = "KENNY_OAUTH_REFRESH_TOKEN_SECS", default_value_t = 2592000, value_parser = clap::value_parser!(u64).range(1..=31536000))]
    oauth_refresh_token_secs: u64,
    /// Lifetime of OAuth authorization codes, in seconds.
    #[arg(long, env = "KENNY_OAUTH_CODE_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=600))]
    oauth_code_secs: u64,
    /// Base URL of the Anthropic Messages API the dashboard chat uses (the key comes
    /// from KENNY_ANTHROPIC_API_KEY only, never a flag).
    #[arg(long, env = "KENNY_ANTHROPIC_BASE_URL", default_value = "https://api.anthropic.com")]
    anthropic_base_url: String,
    /// The model the dashboard chat uses.
    #[arg(long, env = "KENNY_CHAT_MODEL", default_value = kenny_server::chat::DEFAULT_MODEL)]
    chat_model: String,
    /// Model tokens (input plus output) each user may spend in the dashboard chat per
    /// UTC day; 0 for no limit.
    #[arg(long, env = "KENNY_CHAT_DAILY_TOKENS", default_value_t = kenny_server::chat::DEFAULT_DAILY_TOKENS)]
    chat_daily_tokens: u64,
    /// Refuse the legacy per-agent token handshake (mutual Ed25519 only). An agent
    /// that has enrolled a key can never log in with its token, whatever this says.
    #[arg(long, env = "KENNY_DISABLE_TOKEN_AUTH")]
    disable_token_auth: bool,
    /// Days the audit log keeps a row; older rows are deleted in the background
    /// (at start-up, then hourly). 0 keeps them for ever.
    #[arg(long, env = "KENNY_AUDIT_RETENTION_DAYS", default_value_t = 365, value_parser = clap::value_parser!(u64).range(0..=36500))]
    audit_retention_days: u64,
    /// Most PCs one fleet_run call may name (each runs as its own audited call).
    #[arg(long, env = "KENNY_FLEET_RUN_MAX", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    fleet_run_max: u64,
    /// Hours the PCs' history keeps every point (one per snapshot) before averaging
    /// them into hourly points.
    #[arg(long, env = "KENNY_HISTORY_RAW_HOURS", default_value_t = 48, value_parser = clap::value_parser!(u64).range(1..=8760))]
    history_raw_hours: u64,
    /// Days hourly points are kept before they are averaged into daily ones.
    #[arg(long, env = "KENNY_HISTORY_HOURLY_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3650))]
    history_hourly_days: u64,
    /// Days daily points are kept; older ones are deleted.
    #[arg(long, env = "KENNY_HISTORY_DAILY_DAYS", default_value_t = 365, value_parser = clap::value_parser!(u64).range(1..=36500))]
    history_daily_days: u64,
    /// Days a removed PC's history (snapshots, points, changes, alerts, filter) is kept
    /// before it is purged; adding the id again before then keeps it. The audit log
    /// follows --audit-retention-days.
    #[arg(long, env = "KENNY_REMOVED_PC_RETENTION_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=3650))]
    removed_pc_retention_days: u64,
    /// Most names one PC's web filter may block (at most 10000, what agents accept);
    /// a longer list is refused with the reason, never cut short.
    #[arg(long, env = "KENNY_WEBFILTER_MAX_DOMAINS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    webfilter_max_domains: u64,
    /// A token that lets callers other than loopback read /metrics (as
    /// `Authorization: Bearer <token>`); set it in the environment, not on the
    /// command line. Without it only loopback callers may.
    #[arg(long, env = "KENNY_METRICS_TOKEN", hide_env_values = true)]
    metrics_token: Option<String>,
    /// Most connections open at once, agent tunnels included; one more is closed at
    /// once (agents retry). Keep it above the number of agents.
    #[arg(long, env = "KENNY_MAX_CONNECTIONS", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(16..=1_000_000))]
    max_connections: u64,
    /// Seconds a client has to send a request's headers, counted from connecting or
    /// from the previous response: also how long an idle keep-alive connection stays.
    /// A request's body must arrive within three times as long, and a connection whose
    /// client reads nothing of a response for three times as long is closed.
    #[arg(long, env = "KENNY_HTTP_HEADER_TIMEOUT_SECS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=600))]
    http_header_timeout_secs: u64,
    /// Seconds an agent connection has to authenticate once it opened the tunnel.
    #[arg(long, env = "KENNY_AGENT_HANDSHAKE_TIMEOUT_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    agent_handshake_timeout_secs: u64,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key. Both files
    /// are read again when they change (renewals need no restart).
    #[arg(long, env = "KENNY_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, env = "KENNY_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Seconds between looks at the certificate files for changes.
    #[arg(long, env = "KENNY_TLS_RELOAD_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    tls_reload_secs: u64,
    /// Take a backup on a schedule into this directory (created owner-only when
    /// missing), each verified; the oldest beyond --backup-keep are deleted. Only
    /// kenny-<UTC time>.kennybackup files are ever deleted there.
    #[arg(long, env = "KENNY_BACKUP_DIR")]
    backup_dir: Option<PathBuf>,
    /// Also copy each new backup into this directory (a mounted NAS or USB disk), with
    /// the same retention. It must exist: kenny never creates it.
    #[arg(long, env = "KENNY_BACKUP_COPY_DIR", requires = "backup_dir")]
    backup_copy_dir: Option<PathBuf>,
    /// Hours between scheduled backups.
    #[arg(long, env = "KENNY_BACKUP_EVERY_HOURS", default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..=720))]
    backup_every_hours: u64,
    /// For tests only: seconds between scheduled backups, instead of --backup-every-hours.
    #[arg(long, hide = true, value_parser = clap::value_parser!(u64).range(1..=86400))]
    backup_every_secs: Option<u64>,
    /// How many scheduled backups to keep (in each directory).
    #[arg(long, env = "KENNY_BACKUP_KEEP", default_value_t = 14, value_parser = clap::value_parser!(u64).range(1..=1000))]
    backup_keep: u64,
    #[command(flatten)]
    data: DataDir,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user. The password is read from stdin, or generated and printed when
    /// stdin is a terminal or empty.
    Add {
        name: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// For --role user: the agent ids this user may reach.
        #[arg(long, value_delimiter = ',')]
        hosts: Vec<String>,
        #[command(flatten)]
        data: DataDir,
    },
    /// List the accounts: name, role, state, hosts, live tokens.
    List {
        #[command(flatten)]
        data: DataDir,
    },
    /// Set a new password (read from stdin, or generated and printed when stdin is a
    /// terminal or empty); ends the user's sessions and app connections.
    Passwd {
        name: String,
        /// Also revoke every personal access token of the user.
        #[arg(long)]
        revoke_tokens: bool,
        #[command(flatten)]
        data: DataDir,
    },
    /// Disable an account: it cannot sign in, and its sessions and app connections end.
    Disable {
        name: String,
        /// Also revoke every personal access token of the user.
        #[arg(long)]
        revoke_tokens: bool,
        #[command(flatten)]
        data: DataDir,
    },
    /// Enable a disabled account again.
    Enable {
        name: String,
        #[command(flatten)]
        data: DataDir,
    },
    /// Delete an account with its tokens and sessions.
    Delete {
        name: String,
        #[command(flatten)]
        data: DataDir,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a personal access token for a user; prints it alone on stdout.
    Create {
        name: String,
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        data: DataDir,
    },
    /// List a user's personal access tokens (ids, labels, last use; never the tokens).
    List {
        name: String,
        #[command(flatten)]
        data: DataDir,
    },
    /// Revoke one of a user's tokens by its id (from `token list`).
    Revoke {
        name: String,
        id: i64,
        #[command(flatten)]
        data: DataDir,
    },
}

#[derive(Subcommand)]
enum AgentCommand {
    /// Register an agent id; prints {"agent_id", "token", "server_pubkey"} as JSON.
    Add {
        id: String,
        #[command(flatten)]
        data: DataDir,
    },
    /// Forget an agent's enrolled key and issue a new enrollment token (same JSON as
    /// `add`); use it when a PC is reinstalled or lost its state directory.
    Rekey {
        id: String,
        #[command(flatten)]
        data: DataDir,
    },
    /// Make a one-time install link for a new PC, or an existing one (its old key is
    /// forgotten when the link is used). Prints {"id", "url", "command", "expires_at",
    /// ...} as JSON; run the command on the PC as an administrator.
    Link {
        id: String,
        /// linux or windows.
        #[arg(long, default_value = "linux")]
        os: String,
        /// Minutes the link stays usable (5 to 10080).
        #[arg(long, default_value_t = 1440)]
        expires_minutes: u64,
        /// How the PC reaches this server.
        #[arg(long, env = "KENNY_PUBLIC_URL")]
        url: String,
        #[command(flatten)]
        data: DataDir,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Walk the audit trail's hash chain and check every row and signed checkpoint
    /// against it; name the first broken link. Exits 1 when something does not hold.
    Verify {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        data: DataDir,
    },
    /// Write audit rows as JSON lines, each with its chain event, then the signed
    /// checkpoints: a range with the proofs to check it elsewhere.
    Export {
        /// The first row id (default: the oldest).
        #[arg(long, default_value_t = 1)]
        from_id: i64,
        /// The last row id (default: the newest).
        #[arg(long, default_value_t = i64::MAX)]
        to_id: i64,
        #[command(flatten)]
        data: DataDir,
    },
    /// Check a saved MCP tool result against the agent's public key: that the PC with
    /// that key signed it, and nothing in it changed since. Needs no server or data.
    VerifyCall {
        /// The saved result: the tool result JSON as the server returned it (or the
        /// JSON-RPC response holding it). `-` reads standard input.
        result: PathBuf,
        /// The agent's public key (base64), as list_agents or /api/agents shows it.
        #[arg(long)]
        key: String,
        /// The call's arguments (a JSON object, or @file), to check they are the ones
        /// the agent signed for.
        #[arg(long)]
        args: Option<String>,
    },
}

#[derive(Subcommand)]
enum ReleasesCommand {
    /// Add an agent build: copied into <data dir>/agent-releases/ as
    /// kenny-agent-<version>-<os>-<arch>[.exe].
    Add {
        /// The kenny-agent binary.
        file: PathBuf,
        #[arg(long)]
        version: String,
        /// linux or windows.
        #[arg(long)]
        os: String,
        /// As the agent reports it: x86_64, aarch64...
        #[arg(long)]
        arch: String,
        #[command(flatten)]
        data: DataDir,
    },
    /// List the builds, newest first per OS and architecture (JSON).
    List {
        #[command(flatten)]
        data: DataDir,
    },
}

/// `audit verify`: the chain's report; a broken chain fails the command.
fn verify_audit(data: &DataDir, json: bool) -> anyhow::Result<()> {
    let store = open(data)?;
    let key = kenny_server::server_key::server_key(&store, &data.data_dir)?;
    let report = kenny_server::ledger::verify(&store, &key.verifying_key())?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let signed = report
            .signed_through
            .as_ref()
            .map_or("no checkpoint yet".to_owned(), |cp| {
                format!("signed through event {} at {}", cp.seq, cp.at)
            });
        println!(
            "{} events, {} rows verified, {} checkpoints ({signed}); {} rows from before the chain, {} being pruned",
            report.events, report.rows_verified, report.checkpoints, report.rows_before_chain, report.rows_pruning
        );
        if let Some(base) = &report.base {
            println!(
                "the chain continues from the checkpoint of {} (event {}): older rows were pruned",
                base.at, base.seq
            );
        }
    }
    match &report.broken {
        None => {
            if !json {
                println!("intact");
            }
            Ok(())
        }
        Some(b) => {
            eprintln!("BROKEN: {}", b.what);
            std::process::exit(1);
        }
    }
}

/// `audit verify-call`: prints what the proof shows, or fails saying why it does not hold.
fn verify_call(result: &std::path::Path, key: &str, args: Option<&str>) -> anyhow::Result<()> {
    let text = if result == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(result).with_context(|| format!("reading {}", result.display()))?
    };
    let saved: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", result.display()))?;
    let args = match args {
        Some(a) => {
            let text = match a.strip_prefix('@') {
                Some(file) => std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?,
                None => a.to_owned(),
            };
            let value: serde_json::Value = serde_json::from_str(&text).context("--args is not JSON")?;
            let serde_json::Value::Object(map) = value else {
                anyhow::bail!("--args must be a JSON object, the call's arguments");
            };
            Some(map)
        }
        None => None,
    };
    let check = kenny_server::proofs::verify_saved(&saved, key, args.as_ref())
        .map_err(|why| anyhow::anyhow!("NOT VERIFIED: {why}"))?;
    println!(
        "verified: agent {} signed this answer to {} (request {}) at {} ms since 1970; arguments {}",
        check.agent_id,
        check.tool,
        check.request_id,
        check.at_ms,
        if check.args_checked {
            "match"
        } else {
            "not checked (pass --args)"
        }
    );
    Ok(())
}

fn parse_role(s: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| format!("unknown role {s:?}: use superuser, operator or user"))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse_from(with_settings_file(std::env::args_os().collect())?);
    match cli.command {
        Command::Serve(args) => {
            let ServeArgs {
                config: _,
                listen,
                public_url,
                heartbeat_secs,
                call_timeout_secs,
                disable_token_auth,
                audit_retention_days,
                fleet_run_max,
                history_raw_hours,
                history_hourly_days,
                history_daily_days,
                webfilter_max_domains,
                removed_pc_retention_days,
                metrics_token,
                max_connections,
                http_header_timeout_secs,
                agent_handshake_timeout_secs,
                oauth_access_token_secs,
                oauth_refresh_token_secs,
                oauth_code_secs,
                anthropic_base_url,
                chat_model,
                chat_daily_tokens,
                tls_cert,
                tls_key,
                tls_reload_secs,
                backup_dir,
                backup_copy_dir,
                backup_every_hours,
                backup_every_secs,
                backup_keep,
                nats_url,
                data,
            } = *args;
            // rmcp's service loop logs an ERROR when it cannot send an answer because the
            // client went away; that is not the server's error (the call is audited either
            // way), so only the SDK's transport warnings are kept.
            kenny_host::init_logging("info,rmcp=warn,rmcp::service=off");
            let mut config = ServeConfig::new(listen, data.data_dir);
            config.database_url = data.database_url;
            config.nats_url = nats_url;
            config.public_url = public_url;
            config.tls = tls_cert.zip(tls_key).map(|(cert, key)| kenny_server::tls::TlsFiles {
                cert,
                key,
                reload_every: Duration::from_secs(tls_reload_secs),
            });
            config.backups = backup_dir.map(|dir| kenny_server::backup::schedule::Schedule {
                dir,
                copy_dir: backup_copy_dir,
                every: Duration::from_secs(backup_every_secs.unwrap_or(backup_every_hours * 3600)),
                keep: usize::try_from(backup_keep).unwrap_or(14),
            });
            config.heartbeat = Duration::from_secs(heartbeat_secs);
            config.call_timeout = call_timeout_secs.map(Duration::from_secs);
            config.allow_token_auth = !disable_token_auth;
            config.audit_retention =
                (audit_retention_days > 0).then(|| Duration::from_secs(audit_retention_days * 24 * 3600));
            config.removed_retention = Duration::from_secs(removed_pc_retention_days * 86_400);
            config.fleet_run_max = usize::try_from(fleet_run_max).unwrap_or(100);
            config.webfilter_max_domains = usize::try_from(webfilter_max_domains).unwrap_or(10_000);
            config.metrics_token = metrics_token.filter(|t| !t.trim().is_empty());
            config.history = kenny_server::history::Retention {
                raw: Duration::from_secs(history_raw_hours * 3600),
                hourly: Duration::from_secs(history_hourly_days * 86_400),
                daily: Duration::from_secs(history_daily_days * 86_400),
            };
            config.http = kenny_server::listener::HttpLimits {
                max_connections: max_connections as usize,
                header_timeout: Duration::from_secs(http_header_timeout_secs),
            };
            config.agent_handshake_timeout = Duration::from_secs(agent_handshake_timeout_secs);
            config.oauth = kenny_server::oauth::OAuthSettings {
                code_ttl: Duration::from_secs(oauth_code_secs),
                access_ttl: Duration::from_secs(oauth_access_token_secs),
                refresh_ttl: Duration::from_secs(oauth_refresh_token_secs),
            };
            config.chat = kenny_server::chat::ChatSettings {
                api_key: std::env::var("KENNY_ANTHROPIC_API_KEY")
                    .ok()
                    .filter(|k| !k.trim().is_empty())
                    .map(kenny_server::secrets::Masked::new),
                base_url: anthropic_base_url,
                model: chat_model,
                daily_tokens_per_user: chat_daily_tokens,
                ..Default::default()
            };
            tokio::runtime::Runtime::new()?.block_on(serve(config))
        }
        Command::User(UserCommand::Add {
            name,
            role,
            hosts,
            data,
        }) => {
            let store = open(&data)?;
            let (password, generated) = read_password()?;
            admin::add_user(&store, &name, role, &hosts, &password)?;
            println!("created {} {name}", role.as_str());
            if generated {
                println!("password (shown once): {password}");
            }
            Ok(())
        }
        Command::User(UserCommand::List { data }) => {
            for u in admin::list_users(&open(&data)?)? {
                let state = if u.disabled { "disabled" } else { "active" };
                let hosts = if u.role == Role::User {
                    u.hosts.join(",")
                } else {
                    "*".into()
                };
                println!(
                    "{}\t{}\t{state}\thosts={hosts}\ttokens={}",
                    u.username,
                    u.role.as_str(),
                    u.live_tokens
                );
            }
            Ok(())
        }
        Command::User(UserCommand::Passwd {
            name,
            revoke_tokens,
            data,
        }) => {
            let store = open(&data)?;
            let (password, generated) = read_password()?;
            let revoked = admin::set_user_password(&store, &name, &password, revoke_tokens)?;
            println!(
                "new password set for {name}; their sessions ended{}",
                revoked_note(revoked)
            );
            if generated {
                println!("password (shown once): {password}");
            }
            Ok(())
        }
        Command::User(UserCommand::Disable {
            name,
            revoke_tokens,
            data,
        }) => {
            let revoked = admin::set_user_disabled(&open(&data)?, &name, true, revoke_tokens)?;
            println!("disabled {name}; their sessions ended{}", revoked_note(revoked));
            Ok(())
        }
        Command::User(UserCommand::Enable { name, data }) => {
            admin::set_user_disabled(&open(&data)?, &name, false, false)?;
            println!("enabled {name}");
            Ok(())
        }
        Command::User(UserCommand::Delete { name, data }) => {
            admin::delete_user(&open(&data)?, &name)?;
            println!("deleted {name}");
            Ok(())
        }
        Command::Token(TokenCommand::Create { name, label, data }) => {
            let store = open(&data)?;
            println!("{}", admin::create_token(&store, &name, label.as_deref())?);
            Ok(())
        }
        Command::Token(TokenCommand::List { name, data }) => {
            for t in admin::list_tokens(&open(&data)?, &name)? {
                println!(
                    "{}\t{}\tcreated {}\tlast used {}\t{}",
                    t.id,
                    t.label.as_deref().unwrap_or("-"),
                    t.created_at,
                    t.last_used_at.as_deref().unwrap_or("never"),
                    t.revoked_at.map_or("live".to_owned(), |at| format!("revoked {at}"))
                );
            }
            Ok(())
        }
        Command::Token(TokenCommand::Revoke { name, id, data }) => {
            admin::revoke_token(&open(&data)?, &name, id)?;
            println!("revoked token {id} of {name} (a running server stops taking it within seconds)");
            Ok(())
        }
        Command::Agent(command) => {
            let printed = match command {
                AgentCommand::Add { id, data } => {
                    serde_json::to_string(&admin::add_agent(&open(&data)?, &data.data_dir, &id)?)?
                }
                AgentCommand::Rekey { id, data } => {
                    serde_json::to_string(&admin::rekey_agent(&open(&data)?, &data.data_dir, &id)?)?
                }
                AgentCommand::Link {
                    id,
                    os,
                    expires_minutes,
                    url,
                    data,
                } => {
                    let by = format!("{} (command line)", whoami());
                    let link = admin::create_install_link(&open(&data)?, &url, &id, &os, Some(expires_minutes), &by)?;
                    serde_json::to_string(&link)?
                }
            };
            println!("{printed}");
            Ok(())
        }
        Command::Install {
            root,
            listen,
            public_url,
        } => {
            let done =
                kenny_server::install::install(&root, &kenny_server::install::InstallSettings { listen, public_url })?;
            println!("installed {}", done.binary.display());
            if done.settings_written {
                println!("wrote the settings to {}", done.settings.display());
            } else {
                println!("kept the settings already in {}", done.settings.display());
            }
            println!("wrote the unit {}", done.unit.display());
            if done.started {
                println!("started kenny-server.service; see `journalctl -u kenny-server`");
                println!(
                    "next: sudo -u kenny kenny-server user add NAME --role superuser --data-dir {}",
                    kenny_server::install::DATA_DIR
                );
            } else {
                println!("staged under {}: nothing was started", root.display());
            }
            Ok(())
        }
        Command::Releases(ReleasesCommand::Add {
            file,
            version,
            os,
            arch,
            data,
        }) => {
            let path = admin::add_release(&data.data_dir, &file, &version, &os, &arch)?;
            println!("added {}", path.display());
            Ok(())
        }
        Command::Releases(ReleasesCommand::List { data }) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&admin::list_releases(&data.data_dir))?
            );
            Ok(())
        }
        Command::Audit(AuditCommand::VerifyCall { result, key, args }) => verify_call(&result, &key, args.as_deref()),
        Command::Audit(AuditCommand::Verify { json, data }) => verify_audit(&data, json),
        Command::Audit(AuditCommand::Export { from_id, to_id, data }) => {
            let store = open(&data)?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let rows = kenny_server::ledger::export(&store, from_id, to_id, &mut out)?;
            std::io::Write::flush(&mut out)?;
            eprintln!("exported {rows} audit rows");
            Ok(())
        }
        Command::Backup { out, data } => {
            kenny_server::server::refuse_backups_on_postgres("`backup`", data.database_url.as_deref())?;
            let info = kenny_server::backup::make(&data.data_dir, &out)?;
            println!("backup written to {}: {}", out.display(), serde_json::to_string(&info)?);
            Ok(())
        }
        Command::VerifyBackup { file } => {
            let info = kenny_server::backup::verify(&file)?;
            println!("{} is a good backup: {}", file.display(), serde_json::to_string(&info)?);
            Ok(())
        }
        Command::Restore { file, staged, data } => {
            kenny_server::server::refuse_backups_on_postgres("`restore`", data.database_url.as_deref())?;
            match kenny_server::backup::restore(&data.data_dir, &file, staged)? {
                kenny_server::backup::Restored::Staged => println!(
                    "staged: the server restores {} when it next starts in {}",
                    file.display(),
                    data.data_dir.display()
                ),
                kenny_server::backup::Restored::Now { previous } => println!(
                    "restored {} into {}{}",
                    file.display(),
                    data.data_dir.display(),
                    previous
                        .map(|p| format!("; the data it replaced is in {}", p.display()))
                        .unwrap_or_default()
                ),
            }
            Ok(())
        }
    }
}

async fn serve(config: ServeConfig) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let server = kenny_server::start(config, shutdown.clone()).await?;
    println!("kenny-server listening on {}", server.local_url());
    tokio::spawn(async move {
        kenny_host::shutdown_signal().await;
        tracing::info!("shutting down");
        shutdown.cancel();
    });
    server.finished().await
}

/// `serve --config FILE` (or `KENNY_CONFIG`): the file's settings become the arguments
/// the command line and the environment did not give (see `settings_file`).
fn with_settings_file(mut argv: Vec<OsString>) -> anyhow::Result<Vec<OsString>> {
    if argv.get(1).and_then(|a| a.to_str()) != Some("serve") {
        return Ok(argv);
    }
    let named = argv.iter().enumerate().find_map(|(i, a)| {
        let a = a.to_str()?;
        match a.strip_prefix("--config") {
            Some("") => argv.get(i + 1).map(PathBuf::from),
            Some(rest) => rest.strip_prefix('=').map(PathBuf::from),
            None => None,
        }
    });
    let Some(file) = named.or_else(|| {
        std::env::var_os("KENNY_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }) else {
        return Ok(argv);
    };
    let command = <ServeArgs as Args>::augment_args(clap::Command::new("serve"));
    let settings: Vec<Setting> = command
        .get_arguments()
        .filter_map(|a| {
            Some(Setting {
                key: a.get_id().as_str().to_owned(),
                long: format!("--{}", a.get_long()?),
                env: a.get_env().and_then(|e| e.to_str()).map(str::to_owned),
                switch: matches!(a.get_action(), clap::ArgAction::SetTrue),
            })
        })
        .collect();
    let extra = kenny_server::settings_file::arguments_from(&file, &settings, &argv[2..], |var| {
        std::env::var_os(var).is_some_and(|v| !v.is_empty())
    })?;
    argv.extend(extra);
    Ok(argv)
}

fn revoked_note(revoked: usize) -> String {
    match revoked {
        0 => String::new(),
        1 => "; 1 token revoked".into(),
        n => format!("; {n} tokens revoked"),
    }
}

/// Who ran a command, for the records it makes.
fn whoami() -> String {
    std::env::var("SUDO_USER")
        .or_else(|_| std::env::var("USER"))
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "an administrator".into())
}

/// The store the admin commands work on.
fn open(data: &DataDir) -> anyhow::Result<Store> {
    kenny_server::server::open_store(&data.data_dir, data.database_url.as_deref())
}

fn read_password() -> anyhow::Result<(String, bool)> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut text = String::new();
        stdin
            .lock()
            .read_to_string(&mut text)
            .context("reading the password from stdin")?;
        let password = text.lines().next().unwrap_or("").to_owned();
        if !password.is_empty() {
            return Ok((password, false));
        }
    }
    Ok((kenny_server::secrets::new_password(), true))
}
