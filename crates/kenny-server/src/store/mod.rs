//! Storage: the only module that knows SQL. One SQLite file (WAL) under the data
//! directory; admin commands open the same file while the server runs. One connection
//! writes; a few read-only ones serve reads, so a slow query never holds up a write.

mod accounts;
mod alerts;
pub mod backup;
mod campaigns;
mod changes;
mod chat;
mod health;
mod install_links;
mod metrics;
mod migrations;
mod oauth;
mod policy;
mod removal;
mod screenshots;
mod updates;
mod webfilter;

pub use accounts::{SessionRecord, TokenRecord, UserPatch, UserRecord};
pub use alerts::{AlertRow, ChannelRow, DeliveryRow, SilenceRow};
pub use campaigns::{CampaignPc, CampaignRow, NewCampaign, PcChange};
pub use changes::ChangeRow;
pub use chat::{ChatCall, ChatMessage, ChatSession, ChatUsage, call_status};
pub use health::{HealthRow, StoredThresholds};
pub use install_links::{InstallLinkRow, LinkRefusal, NewInstallLink, Redeemed};
pub use metrics::{MetricRow, ScrapeCounts};
pub use oauth::{CodeGrant, Exchange, GrantRecord, NewTokenPair, OAuthClient, RefreshGrant};
pub use policy::StoredPolicy;
pub use screenshots::ScreenshotMeta;
pub use updates::{MAX_UPDATE_DETAIL, UpdateRecord};
pub use webfilter::{ActivityRow, FilterConfigRow, FilterStateRow, SourceFetch, SourceRow};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

pub const DB_FILE: &str = "kenny.db";
/// Read-only connections beside the writer. WAL lets them read while the writer
/// commits; a handful covers the dashboard, the API and the handshakes at once.
const READERS: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotFound(String),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0}")]
    Internal(String),
    #[error("cannot use data directory {path}: {source}")]
    DataDir { path: PathBuf, source: std::io::Error },
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A handle on the database. Calls are synchronous; async callers go through
/// [`Store::blocking`]. Reads on the hot path are served from caches above this layer.
///
/// Writes (and reads that must see their own transaction) go through the one writer
/// connection with [`Store::with`]; plain reads go through [`Store::read`], which uses
/// one of [`READERS`] read-only connections and never waits for the writer.
pub struct Store {
    conn: Mutex<Connection>,
    readers: ReadPool,
    path: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRecord {
    pub agent_id: kenny_proto::AgentId,
    pub public_key: Option<String>,
    pub hostname: Option<String>,
    pub os: Option<String>,
    pub version: Option<String>,
    pub arch: Option<String>,
    pub last_seen: Option<String>,
    /// The update channel an operator put the PC on: `stable` or `beta`.
    pub channel: String,
}

/// A snapshot to store, with what the server made of it.
#[derive(Debug, Clone, Copy)]
pub struct NewSnapshot<'a> {
    pub agent_id: &'a str,
    pub collected_at: &'a str,
    pub received_at: &'a str,
    /// The snapshot as JSON text.
    pub snapshot: &'a str,
    pub health: Option<&'a HealthRow>,
    pub changes: &'a [ChangeRow],
    /// The point the history keeps of it.
    pub metrics: Option<&'a MetricRow>,
}

/// What signing in checks about a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserLogin {
    pub id: i64,
    pub username: String,
    pub password_hash: String,
    pub disabled: bool,
    /// Base32 TOTP secret when the second factor is on.
    pub totp_secret: Option<crate::secrets::Masked>,
    /// The last TOTP time step accepted: a code is good once.
    pub totp_last_step: i64,
}

/// A new dashboard session, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession<'a> {
    pub user_id: i64,
    pub token_hash: &'a str,
    pub csrf_token: &'a str,
    pub created_at: &'a str,
    pub expires_at: &'a str,
    pub client: Option<&'a str>,
    pub user_agent: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCredentials {
    pub token_hash: String,
    pub enrolled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    /// Set for a forwarded call (the wire request id), so its row can be completed.
    pub call_id: Option<String>,
    pub at: String,
    pub user_id: Option<i64>,
    pub username: Option<String>,
    pub credential_kind: Option<String>,
    pub credential_id: Option<String>,
    pub client_addr: Option<String>,
    /// For an API action: the path it acted on.
    pub target: Option<String>,
    pub agent_id: Option<String>,
    pub tool: String,
    pub args_digest: String,
    pub outcome: &'static str,
    pub error_code: Option<String>,
    pub duration_ms: i64,
}

/// The end of a forwarded call, completing the row written when it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFinish {
    pub call_id: String,
    pub outcome: &'static str,
    pub error_code: Option<String>,
    pub duration_ms: i64,
}

/// One change to the audit trail, applied in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditWrite {
    Row(Box<AuditRow>),
    Finish(AuditFinish),
}

/// Outcome of a call that was sent and has not ended yet.
pub const OUTCOME_SENT: &str = "sent";
/// Outcome of a call that was still running when the server stopped.
pub const OUTCOME_INTERRUPTED: &str = "interrupted";

#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditEntry {
    pub call_id: Option<String>,
    pub id: i64,
    pub at: String,
    pub user: Option<String>,
    pub credential_kind: Option<String>,
    pub credential_id: Option<String>,
    pub agent_id: Option<String>,
    pub tool: String,
    pub args_digest: String,
    pub outcome: String,
    pub error_code: Option<String>,
    pub duration_ms: i64,
    /// The address the request came from.
    pub client_addr: Option<String>,
    /// For an API action: the path it acted on.
    pub target: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub agent_id: Option<String>,
    pub user_id: Option<i64>,
    pub before_id: Option<i64>,
    pub limit: u32,
    pub tool: Option<String>,
    /// By the user name recorded on the row.
    pub username: Option<String>,
    pub outcome: Option<String>,
}

/// Opens a connection with the settings every kenny connection uses.
pub fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // WAL with NORMAL survives a killed process; only a power cut may lose the last
    // commits, which is the usual trade for an embedded server.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

/// The read-only connections not in use; `read` waits on `returned` when all are busy.
struct ReadPool {
    idle: Mutex<Vec<Connection>>,
    returned: Condvar,
}

impl ReadPool {
    fn take(&self) -> Reader<'_> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(conn) = idle.pop() {
                return Reader {
                    pool: self,
                    conn: Some(conn),
                };
            }
            idle = self.returned.wait(idle).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A connection taken from the pool; given back when dropped, even by a panic.
struct Reader<'a> {
    pool: &'a ReadPool,
    conn: Option<Connection>,
}

impl std::ops::Deref for Reader<'_> {
    type Target = Connection;

    #[expect(
        clippy::expect_used,
        reason = "the connection is taken only in drop, after which nothing derefs"
    )]
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("a reader holds its connection until dropped")
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.idle.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
            self.pool.returned.notify_one();
        }
    }
}

/// A read-only connection to the same file. It never writes, so it needs none of the
/// writer's settings beyond waiting out a checkpoint.
fn open_reader(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(Duration::from_secs(10))?;
    Ok(conn)
}

impl Store {
    /// Opens (creating if needed) the database in `data_dir` and applies migrations.
    pub fn open(data_dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.to_owned(),
            source,
        })?;
        restrict_permissions(data_dir);
        let path = data_dir.join(DB_FILE);
        let mut conn = open_connection(&path)?;
        migrations::apply(&mut conn)?;
        // Opened after the migrations, so every reader sees the current schema.
        let readers = ReadPool {
            idle: Mutex::new((0..READERS).map(|_| open_reader(&path)).collect::<Result<Vec<_>>>()?),
            returned: Condvar::new(),
        };
        Ok(Store {
            conn: Mutex::new(conn),
            readers,
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs storage work on the blocking pool, so async callers never stall a runtime
    /// thread on SQLite.
    pub async fn blocking<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StoreError::Internal(format!("storage task failed: {e}")))?
    }

    /// Runs `f` on the writer connection: every write, and reads inside a write's
    /// transaction.
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn)
    }

    /// Runs `f` on a read-only connection: any idle one, else the first one given
    /// back. Never takes the writer, so a long read (a big audit page) holds up
    /// neither writes nor sign-ins. Sees everything committed before it starts.
    fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.readers.take();
        f(&conn)
    }

    // ---- agents ------------------------------------------------------------

    pub fn create_agent(&self, agent_id: &str, token_hash: &str, now: &str) -> Result<()> {
        self.with(|c| {
            let inserted = c.execute(
                "INSERT OR IGNORE INTO agents (agent_id, token_hash, created_at) VALUES (?1, ?2, ?3)",
                params![agent_id, token_hash, now],
            )?;
            if inserted == 0 {
                return Err(StoreError::Conflict(format!(
                    "an agent with id {agent_id:?} already exists"
                )));
            }
            Ok(())
        })
    }

    /// What the legacy handshake checks: the token hash, and whether a key is enrolled.
    pub fn agent_credentials(&self, agent_id: &str) -> Result<Option<AgentCredentials>> {
        self.read(|c| {
            Ok(c.query_row(
                "SELECT token_hash, public_key IS NOT NULL FROM agents WHERE agent_id = ?1",
                [agent_id],
                |r| {
                    Ok(AgentCredentials {
                        token_hash: r.get(0)?,
                        enrolled: r.get(1)?,
                    })
                },
            )
            .optional()?)
        })
    }

    /// Forgets the agent's enrolled key and replaces its token: the way to move an agent
    /// to a new key (a reinstalled PC, a lost state directory).
    pub fn rekey_agent(&self, agent_id: &str, token_hash: &str) -> Result<()> {
        self.with(|c| {
            let changed = c.execute(
                "UPDATE agents SET token_hash = ?2, public_key = NULL, enrolled_at = NULL WHERE agent_id = ?1",
                params![agent_id, token_hash],
            )?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!("no agent with id {agent_id:?}")));
            }
            Ok(())
        })
    }

    pub fn agent_token_hash(&self, agent_id: &str) -> Result<Option<String>> {
        self.read(|c| {
            Ok(
                c.query_row("SELECT token_hash FROM agents WHERE agent_id = ?1", [agent_id], |r| {
                    r.get(0)
                })
                .optional()?,
            )
        })
    }

    pub fn agent(&self, agent_id: &str) -> Result<Option<AgentRecord>> {
        self.read(|c| {
            Ok(c.query_row(
                &format!("{AGENT_COLUMNS} WHERE agent_id = ?1"),
                [agent_id],
                agent_record,
            )
            .optional()?)
        })
    }

    /// A number that changes whenever any agent row does (triggers keep it, for every
    /// process that writes the file).
    pub fn agents_version(&self) -> Result<i64> {
        self.read(|c| {
            Ok(c.prepare_cached("SELECT v FROM agents_version WHERE id = 1")?
                .query_row([], |r| r.get(0))?)
        })
    }

    pub fn agents(&self) -> Result<Vec<AgentRecord>> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(&format!("{AGENT_COLUMNS} ORDER BY agent_id"))?;
            let rows = stmt
                .query_map([], agent_record)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// Records the agent's public key. Enrollment happens once: the same key again is
    /// accepted (a retried request), a different key is refused.
    pub fn enroll_agent(&self, agent_id: &str, public_key: &str, now: &str) -> Result<()> {
        self.with(|c| {
            let current: Option<Option<String>> =
                c.query_row("SELECT public_key FROM agents WHERE agent_id = ?1", [agent_id], |r| r.get(0)).optional()?;
            match current {
                None => Err(StoreError::NotFound(format!("no agent with id {agent_id:?}"))),
                Some(Some(k)) if k == public_key => Ok(()),
                Some(Some(_)) => Err(StoreError::Conflict(format!(
                    "agent {agent_id:?} is already enrolled with another key; to replace it, run `kenny-server agent rekey {agent_id}` and enroll with the new token"
                ))),
                Some(None) => {
                    c.execute(
                        "UPDATE agents SET public_key = ?2, enrolled_at = ?3 WHERE agent_id = ?1",
                        params![agent_id, public_key, now],
                    )?;
                    Ok(())
                }
            }
        })
    }

    pub fn record_agent_seen(
        &self,
        agent_id: &str,
        meta: Option<&kenny_proto::frame::AgentMeta>,
        now: &str,
    ) -> Result<()> {
        self.with(|c| {
            match meta {
                Some(m) => c.execute(
                    "UPDATE agents SET hostname = ?2, os = ?3, version = ?4, arch = ?5, last_seen = ?6 WHERE agent_id = ?1",
                    params![agent_id, m.hostname, m.os, m.version, m.arch, now],
                )?,
                None => c.execute("UPDATE agents SET last_seen = ?2 WHERE agent_id = ?1", params![agent_id, now])?,
            };
            Ok(())
        })
    }

    /// Stores a snapshot (with the server's verdict on it, if judged, and what changed
    /// since the previous one) and prunes the agent's snapshots beyond the newest `keep`.
    pub fn insert_telemetry(&self, new: &NewSnapshot<'_>, keep: u32) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO telemetry (agent_id, collected_at, received_at, snapshot) VALUES (?1, ?2, ?3, ?4)",
                params![new.agent_id, new.collected_at, new.received_at, new.snapshot],
            )?;
            if let Some(h) = new.health {
                tx.execute(health::UPSERT_HEALTH, params![h.agent_id, h.status, h.assessment_json])?;
            }
            if let Some(m) = new.metrics {
                metrics::insert(&tx, m)?;
            }
            for ch in new.changes {
                tx.execute(
                    changes::INSERT_CHANGE,
                    params![
                        new.agent_id,
                        ch.at,
                        ch.section,
                        ch.kind,
                        ch.item,
                        ch.detail,
                        ch.priority
                    ],
                )?;
            }
            tx.execute(
                "DELETE FROM telemetry WHERE agent_id = ?1 AND id <= (
                    SELECT id FROM telemetry WHERE agent_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                params![new.agent_id, keep],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// The database's size in bytes, after folding the write-ahead log into it.
    pub fn file_size(&self) -> Result<u64> {
        self.with(|c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            let pages: u64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let size: u64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            Ok(pages * size)
        })
    }

    /// The newest stored snapshot of an agent: (collected_at, received_at, snapshot JSON).
    pub fn latest_telemetry(&self, agent_id: &str) -> Result<Option<(String, String, String)>> {
        self.read(|c| {
            Ok(c.query_row(
                "SELECT collected_at, received_at, snapshot FROM telemetry WHERE agent_id = ?1 ORDER BY id DESC LIMIT 1",
                [agent_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?)
        })
    }

    pub fn telemetry_count(&self, agent_id: &str) -> Result<i64> {
        self.read(|c| {
            Ok(
                c.query_row("SELECT COUNT(*) FROM telemetry WHERE agent_id = ?1", [agent_id], |r| {
                    r.get(0)
                })?,
            )
        })
    }

    // ---- audit -------------------------------------------------------------

    /// Applies audit writes in order, in one transaction (the writer batches them).
    pub fn write_audit(&self, writes: &[AuditWrite]) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO audit (call_id, at, user_id, username, credential_kind, credential_id, agent_id, tool, args_digest, outcome, error_code, duration_ms, client_addr, target)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                )?;
                let mut finish = tx.prepare_cached(FINISH_CALL)?;
                for w in writes {
                    match w {
                        AuditWrite::Row(r) => insert.execute(params![
                            r.call_id, r.at, r.user_id, r.username, r.credential_kind, r.credential_id, r.agent_id, r.tool,
                            r.args_digest, r.outcome, r.error_code, r.duration_ms, r.client_addr, r.target
                        ])?,
                        AuditWrite::Finish(f) => {
                            finish.execute(params![f.call_id, f.outcome, f.error_code, f.duration_ms])?
                        }
                    };
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Marks calls that were sent but never completed (the server stopped while they
    /// ran) as interrupted. Run at start-up, before any call is sent.
    pub fn interrupt_unfinished_calls(&self) -> Result<usize> {
        self.with(|c| Ok(c.execute(INTERRUPT_CALLS, params![OUTCOME_INTERRUPTED, OUTCOME_SENT])?))
    }

    /// One page of the audit trail, newest first. Only the filters given become
    /// conditions, so each is served by its index (see `audit_query`).
    pub fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let (sql, values) = audit_query(filter);
        self.read(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(values.iter()), |r| {
                    Ok(AuditEntry {
                        id: r.get(0)?,
                        at: r.get(1)?,
                        user: r.get(2)?,
                        credential_kind: r.get(3)?,
                        credential_id: r.get(4)?,
                        agent_id: r.get(5)?,
                        tool: r.get(6)?,
                        args_digest: r.get(7)?,
                        outcome: r.get(8)?,
                        error_code: r.get(9)?,
                        duration_ms: r.get(10)?,
                        call_id: r.get(11)?,
                        client_addr: r.get(12)?,
                        target: r.get(13)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// Deletes up to `batch` audit rows recorded before `cutoff` (a [`crate::clock`]
    /// timestamp); returns how many went. Small batches keep each hold on the writer
    /// short: the retention task calls this until it returns less than `batch`.
    pub fn prune_audit(&self, cutoff: &str, batch: u32) -> Result<usize> {
        self.with(|c| Ok(c.prepare_cached(PRUNE_AUDIT)?.execute(params![cutoff, batch])?))
    }
}

const AUDIT_COLUMNS: &str = "id, at, username, credential_kind, credential_id, agent_id, tool, args_digest, outcome, error_code, duration_ms, call_id, client_addr, target";

const FINISH_CALL: &str = "UPDATE audit SET outcome = ?2, error_code = ?3, duration_ms = ?4 WHERE call_id = ?1";

const INTERRUPT_CALLS: &str = "UPDATE audit SET outcome = ?1 WHERE outcome = ?2";

const PRUNE_AUDIT: &str = "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ?1 ORDER BY at LIMIT ?2)";

/// The SQL and parameters of an audit page. A condition like `(?1 IS NULL OR agent_id
/// = ?1)` would keep one statement for every filter, but SQLite cannot use an index
/// through it and scans the whole table; so each filter given adds its own condition.
/// Every equality filter has an index on `(column, id)` that also yields the rows
/// newest first.
fn audit_query(f: &AuditFilter) -> (String, Vec<rusqlite::types::Value>) {
    use rusqlite::types::Value;
    let mut conditions: Vec<String> = Vec::new();
    let mut values: Vec<Value> = Vec::new();
    let mut add = |condition: &str, value: Value| {
        values.push(value);
        conditions.push(format!("{condition} ?{}", values.len()));
    };
    if let Some(v) = &f.agent_id {
        add("agent_id =", Value::Text(v.clone()));
    }
    if let Some(v) = f.user_id {
        add("user_id =", Value::Integer(v));
    }
    if let Some(v) = &f.tool {
        add("tool =", Value::Text(v.clone()));
    }
    if let Some(v) = &f.username {
        add("username =", Value::Text(v.clone()));
    }
    if let Some(v) = &f.outcome {
        add("outcome =", Value::Text(v.clone()));
    }
    if let Some(v) = f.before_id {
        add("id <", Value::Integer(v));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    values.push(Value::Integer(i64::from(f.limit)));
    let sql = format!(
        "SELECT {AUDIT_COLUMNS} FROM audit{filter} ORDER BY id DESC LIMIT ?{}",
        values.len()
    );
    (sql, values)
}

const AGENT_COLUMNS: &str = "SELECT agent_id, public_key, hostname, os, version, arch, last_seen, channel FROM agents";

fn agent_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<AgentRecord> {
    Ok(AgentRecord {
        agent_id: agent_id_column(r, 0)?,
        public_key: r.get(1)?,
        hostname: r.get(2)?,
        os: r.get(3)?,
        version: r.get(4)?,
        arch: r.get(5)?,
        last_seen: r.get(6)?,
        channel: r.get(7)?,
    })
}

/// An agent id as stored: it was checked when written, so one that no longer reads as an
/// id is a damaged database, reported as such rather than served.
fn agent_id_column(r: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<kenny_proto::AgentId> {
    let text: String = r.get(index)?;
    kenny_proto::AgentId::parse(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e)))
}

fn optional_agent_id_column(r: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Option<kenny_proto::AgentId>> {
    match r.get_ref(index)? {
        rusqlite::types::ValueRef::Null => Ok(None),
        _ => agent_id_column(r, index).map(Some),
    }
}

/// The columns a credential lookup selects: credential id, user id, user name, role.
fn credential_columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, i64, String, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

/// The principal a credential row stands for: the user, its role and (for `user`) its
/// hosts. `None` for a role this build does not know.
fn principal(
    c: &Connection,
    credential_kind: crate::principal::CredentialKind,
    credential_id: i64,
    user_id: i64,
    username: String,
    role: &str,
) -> Result<Option<crate::principal::Principal>> {
    use crate::principal::{Principal, Role};
    let Some(role) = Role::parse(role) else { return Ok(None) };
    // Stored hosts were checked when they were written; one that no longer reads as an
    // id is left out (fails closed: less reach, never more).
    let hosts = if role == Role::User {
        let stored = load_hosts(c, user_id)?;
        Some(
            stored
                .iter()
                .filter_map(|h| {
                    kenny_proto::AgentId::parse(h)
                        .map_err(|e| tracing::warn!(user = user_id, error = %e, "a stored host is not an agent id"))
                        .ok()
                })
                .collect(),
        )
    } else {
        None
    };
    Ok(Some(Principal {
        user_id,
        username,
        role,
        hosts,
        credential_kind,
        credential_id: credential_id.to_string(),
        client_addr: None,
    }))
}

fn load_hosts(c: &Connection, user_id: i64) -> Result<Vec<String>> {
    let mut stmt = c.prepare_cached("SELECT agent_id FROM user_hosts WHERE user_id = ?1 ORDER BY agent_id")?;
    let hosts = stmt
        .query_map([user_id], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(hosts)
}

#[cfg(unix)]
fn restrict_permissions(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
        tracing::warn!(dir = %dir.display(), error = %e, "could not make the data directory owner-only");
    }
}

#[cfg(not(unix))]
fn restrict_permissions(_dir: &Path) {}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_load;
