//! Storage: the only module that knows SQL. One SQLite file (WAL) under the data
//! directory; admin commands open the same file while the server runs. One connection
//! writes; a few read-only ones serve reads, so a slow query never holds up a write.

mod accounts;
mod alerts;
mod approvals;
pub mod audit_chain;
pub mod backup;
mod campaigns;
mod changes;
mod chat;
pub(crate) mod db;
mod health;
mod install_links;
mod lead;
mod metrics;
mod migrations;
mod migrations_pg;
mod oauth;
mod pg_pool;
mod policy;
mod removal;
mod screenshots;
mod server_secrets;
mod updates;
mod webfilter;

pub use accounts::{SessionRecord, TokenRecord, UserPatch, UserRecord};
pub use alerts::{AlertRow, ChannelRow, DeliveryRow, SilenceRow};
pub use approvals::{ApprovalRule, HELD_CALLS_KEPT, HeldCall, RuleChange, RuleSubject, held_status};
pub use campaigns::{CampaignPc, CampaignRow, NewCampaign, PcChange};
pub use changes::ChangeRow;
pub use chat::{ChatCall, ChatMessage, ChatSession, ChatUsage, call_status};
pub use health::{HealthRow, StoredThresholds};
pub use install_links::{InstallLinkRow, LinkRefusal, NewInstallLink, Redeemed};
pub use lead::Lead;
pub use metrics::{MetricRow, ScrapeCounts};
pub use oauth::{CodeGrant, Exchange, GrantRecord, NewTokenPair, OAuthClient, RefreshGrant};
pub use policy::StoredPolicy;
pub use screenshots::ScreenshotMeta;
pub use updates::{MAX_UPDATE_DETAIL, UpdateRecord};
pub use webfilter::{ActivityRow, FilterConfigRow, FilterStateRow, SourceFetch, SourceRow};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use self::db::args;

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
    #[error("database error: {0}")]
    Postgres(#[from] tokio_postgres::Error),
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
    backend: Backend,
}

/// Where the data lives: the embedded file (one writer, a few readers), or a
/// PostgreSQL server shared by every replica (a pool; the server orders writes).
enum Backend {
    Sqlite {
        conn: Mutex<Connection>,
        readers: ReadPool,
        path: PathBuf,
    },
    Postgres(pg_pool::PgPool),
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
    /// The agent's signed proof of its answer, as JSON ([`kenny_proto::proof::ResultProof`]).
    pub proof: Option<String>,
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
    /// The agent's signed proof of its answer (JSON), when it signs.
    pub proof: Option<String>,
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

/// What a SQLite-only step (the file's own maintenance, tests reaching for the file)
/// answers on PostgreSQL.
fn not_on_postgres() -> StoreError {
    StoreError::Internal("this step works on the embedded SQLite file only, not on PostgreSQL".into())
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
            backend: Backend::Sqlite {
                conn: Mutex::new(conn),
                readers,
                path,
            },
        })
    }

    /// Connects to PostgreSQL at `url` (`postgres://user:password@host:port/db`) and
    /// brings its schema up to date; every replica of a cluster opens the same one.
    pub fn open_postgres(url: &str) -> Result<Store> {
        let pool = pg_pool::PgPool::connect(url)?;
        pool.with(migrations_pg::apply)?;
        Ok(Store {
            backend: Backend::Postgres(pool),
        })
    }

    /// The SQLite file, when the data is in one.
    pub fn path(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Sqlite { path, .. } => Some(path),
            Backend::Postgres(_) => None,
        }
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
        match &self.backend {
            Backend::Sqlite { conn, .. } => {
                let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                f(&mut conn)
            }
            Backend::Postgres(_) => Err(not_on_postgres()),
        }
    }

    /// Runs `f` on a connection that may write, on either backend: SQLite's one
    /// writer, or any pooled PostgreSQL connection.
    fn write_db<T>(&self, f: impl FnOnce(&db::Conn) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite { conn, .. } => {
                let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                f(&db::Conn::Sqlite(&conn))
            }
            Backend::Postgres(pool) => pool.with(|c| f(&db::Conn::Postgres(c))),
        }
    }

    /// Runs `f` on a connection for reading, on either backend (see [`Store::read`]).
    fn read_db<T>(&self, f: impl FnOnce(&db::Conn) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite { readers, .. } => {
                let conn = readers.take();
                f(&db::Conn::Sqlite(&conn))
            }
            Backend::Postgres(pool) => pool.with(|c| f(&db::Conn::Postgres(c))),
        }
    }

    /// Runs `f` on a read-only connection: any idle one, else the first one given
    /// back. Never takes the writer, so a long read (a big audit page) holds up
    /// neither writes nor sign-ins. Sees everything committed before it starts.
    #[cfg(test)]
    fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite { readers, .. } => {
                let conn = readers.take();
                f(&conn)
            }
            Backend::Postgres(_) => Err(not_on_postgres()),
        }
    }

    // ---- agents ------------------------------------------------------------

    pub fn create_agent(&self, agent_id: &str, token_hash: &str, now: &str) -> Result<()> {
        self.write_db(|c| {
            let inserted = c.execute(
                "INSERT INTO agents (agent_id, token_hash, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (agent_id) DO NOTHING",
                args![agent_id, token_hash, now],
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
        self.read_db(|c| {
            c.query_opt(
                "SELECT token_hash, CASE WHEN public_key IS NULL THEN 0 ELSE 1 END FROM agents WHERE agent_id = ?1",
                args![agent_id],
                |r| {
                    Ok(AgentCredentials {
                        token_hash: r.get(0)?,
                        enrolled: r.get(1)?,
                    })
                },
            )
        })
    }

    /// Forgets the agent's enrolled key and replaces its token: the way to move an agent
    /// to a new key (a reinstalled PC, a lost state directory).
    pub fn rekey_agent(&self, agent_id: &str, token_hash: &str) -> Result<()> {
        self.write_db(|c| {
            let changed = c.execute(
                "UPDATE agents SET token_hash = ?2, public_key = NULL, enrolled_at = NULL WHERE agent_id = ?1",
                args![agent_id, token_hash],
            )?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!("no agent with id {agent_id:?}")));
            }
            Ok(())
        })
    }

    pub fn agent_token_hash(&self, agent_id: &str) -> Result<Option<String>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT token_hash FROM agents WHERE agent_id = ?1",
                args![agent_id],
                |r| r.get(0),
            )
        })
    }

    pub fn agent(&self, agent_id: &str) -> Result<Option<AgentRecord>> {
        self.read_db(|c| c.query_opt(AGENT_BY_ID, args![agent_id], agent_record))
    }

    /// A number that changes whenever any agent row does (triggers keep it, for every
    /// process that writes the database).
    pub fn agents_version(&self) -> Result<i64> {
        self.read_db(|c| c.query_one("SELECT v FROM agents_version WHERE id = 1", args![], |r| r.get(0)))
    }

    pub fn agents(&self) -> Result<Vec<AgentRecord>> {
        self.read_db(|c| c.query_all(ALL_AGENTS, args![], agent_record))
    }

    /// Records the agent's public key. Enrollment happens once: the same key again is
    /// accepted (a retried request), a different key is refused.
    pub fn enroll_agent(&self, agent_id: &str, public_key: &str, now: &str) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|c| {
                let current: Option<Option<String>> = c.query_opt(
                    "SELECT public_key FROM agents WHERE agent_id = ?1",
                    args![agent_id],
                    |r| r.get(0),
                )?;
                match current {
                    None => Err(StoreError::NotFound(format!("no agent with id {agent_id:?}"))),
                    Some(Some(k)) if k == public_key => Ok(()),
                    Some(Some(_)) => Err(StoreError::Conflict(format!(
                        "agent {agent_id:?} is already enrolled with another key; to replace it, run `kenny-server agent rekey {agent_id}` and enroll with the new token"
                    ))),
                    Some(None) => {
                        // Only while no key is set: two enrollments racing on two
                        // replicas cannot both win.
                        let set = c.execute(
                            "UPDATE agents SET public_key = ?2, enrolled_at = ?3 WHERE agent_id = ?1 AND public_key IS NULL",
                            args![agent_id, public_key, now],
                        )?;
                        if set == 0 {
                            return Err(StoreError::Conflict(format!(
                                "agent {agent_id:?} was enrolled by another request just now; retry to see with which key"
                            )));
                        }
                        Ok(())
                    }
                }
            })
        })
    }

    pub fn record_agent_seen(
        &self,
        agent_id: &str,
        meta: Option<&kenny_proto::frame::AgentMeta>,
        now: &str,
    ) -> Result<()> {
        self.write_db(|c| {
            match meta {
                Some(m) => c.execute(
                    "UPDATE agents SET hostname = ?2, os = ?3, version = ?4, arch = ?5, last_seen = ?6 WHERE agent_id = ?1",
                    args![agent_id, &m.hostname, &m.os, &m.version, m.arch.as_deref(), now],
                )?,
                None => c.execute("UPDATE agents SET last_seen = ?2 WHERE agent_id = ?1", args![agent_id, now])?,
            };
            Ok(())
        })
    }

    /// Stores a snapshot (with the server's verdict on it, if judged, and what changed
    /// since the previous one) and prunes the agent's snapshots beyond the newest `keep`.
    pub fn insert_telemetry(&self, new: &NewSnapshot<'_>, keep: u32) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                tx.execute(
                    "INSERT INTO telemetry (agent_id, collected_at, received_at, snapshot) VALUES (?1, ?2, ?3, ?4)",
                    args![new.agent_id, new.collected_at, new.received_at, new.snapshot],
                )?;
                if let Some(h) = new.health {
                    tx.execute(health::UPSERT_HEALTH, args![&h.agent_id, h.status, &h.assessment_json])?;
                }
                if let Some(m) = new.metrics {
                    metrics::insert(tx, m)?;
                }
                for ch in new.changes {
                    tx.execute(
                        changes::INSERT_CHANGE,
                        args![
                            new.agent_id,
                            &ch.at,
                            &ch.section,
                            &ch.kind,
                            &ch.item,
                            &ch.detail,
                            &ch.priority
                        ],
                    )?;
                }
                tx.execute(
                    "DELETE FROM telemetry WHERE agent_id = ?1 AND id <= (
                        SELECT id FROM telemetry WHERE agent_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                    args![new.agent_id, keep],
                )?;
                Ok(())
            })
        })
    }

    /// The database's size in bytes (for SQLite, after folding the write-ahead log
    /// into the file).
    pub fn file_size(&self) -> Result<u64> {
        if let Backend::Postgres(pool) = &self.backend {
            return pool.with(|c| {
                db::Conn::Postgres(c).query_one("SELECT pg_database_size(current_database())", args![], |r| r.get(0))
            });
        }
        self.with(|c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            let pages: u64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let size: u64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            Ok(pages * size)
        })
    }

    /// The newest stored snapshot of an agent: (collected_at, received_at, snapshot JSON).
    pub fn latest_telemetry(&self, agent_id: &str) -> Result<Option<(String, String, String)>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT collected_at, received_at, snapshot FROM telemetry WHERE agent_id = ?1 ORDER BY id DESC LIMIT 1",
                args![agent_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        })
    }

    pub fn telemetry_count(&self, agent_id: &str) -> Result<i64> {
        self.read_db(|c| {
            c.query_one(
                "SELECT COUNT(*) FROM telemetry WHERE agent_id = ?1",
                args![agent_id],
                |r| r.get(0),
            )
        })
    }

    // ---- audit -------------------------------------------------------------

    /// Applies audit writes in order, in one transaction (the writer batches them).
    pub fn write_audit(&self, writes: &[AuditWrite]) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let mut head = audit_chain::lock_head(tx)?;
                for w in writes {
                    let written = match w {
                        AuditWrite::Row(r) => Some(tx.query_one(
                            INSERT_AUDIT,
                            args![
                                r.call_id.as_deref(),
                                &r.at,
                                r.user_id,
                                r.username.as_deref(),
                                r.credential_kind.as_deref(),
                                r.credential_id.as_deref(),
                                r.agent_id.as_deref(),
                                &r.tool,
                                &r.args_digest,
                                r.outcome,
                                r.error_code.as_deref(),
                                r.duration_ms,
                                r.client_addr.as_deref(),
                                r.target.as_deref()
                            ],
                            audit_chain::row_from,
                        )?),
                        // A call pruned meanwhile (or never recorded) changes no row.
                        AuditWrite::Finish(f) => tx.query_opt(
                            FINISH_CALL,
                            args![
                                &f.call_id,
                                f.outcome,
                                f.error_code.as_deref(),
                                f.duration_ms,
                                f.proof.as_deref()
                            ],
                            audit_chain::row_from,
                        )?,
                    };
                    if let Some(row) = written {
                        audit_chain::append(tx, &mut head, &row)?;
                    }
                }
                Ok(())
            })
        })
    }

    /// Marks calls that were sent but never completed (the server stopped while they
    /// ran) as interrupted. Run at start-up, before any call is sent.
    pub fn interrupt_unfinished_calls(&self) -> Result<usize> {
        self.write_db(|c| audit_chain::update_chained(c, INTERRUPT_CALLS, args![OUTCOME_INTERRUPTED, OUTCOME_SENT]))
    }

    /// Marks `interrupted` the calls still `sent` that were sent before `before`: no
    /// live server can still be waiting for them (in a cluster, their replica died).
    pub fn interrupt_calls_sent_before(&self, before: &str) -> Result<usize> {
        self.write_db(|c| {
            audit_chain::update_chained(
                c,
                &format!(
                    "UPDATE audit SET outcome = ?1 WHERE outcome = ?2 AND at < ?3 RETURNING {}",
                    audit_chain::ROW_COLUMNS
                ),
                args![OUTCOME_INTERRUPTED, OUTCOME_SENT, before],
            )
        })
    }

    /// One page of the audit trail, newest first. Only the filters given become
    /// conditions, so each is served by its index (see `audit_query`).
    pub fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let (sql, values) = audit_query(filter);
        self.read_db(|c| {
            c.query_all(&sql, &values, |r| {
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
                    proof: r.get(14)?,
                })
            })
        })
    }
}

const INSERT_AUDIT: &str = concat!(
    "INSERT INTO audit (call_id, at, user_id, username, credential_kind, credential_id, agent_id, tool, args_digest, outcome, error_code, duration_ms, client_addr, target)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) RETURNING ",
    audit_chain::row_columns!()
);

const AUDIT_COLUMNS: &str = "id, at, username, credential_kind, credential_id, agent_id, tool, args_digest, outcome, error_code, duration_ms, call_id, client_addr, target, proof";

const FINISH_CALL: &str = concat!(
    "UPDATE audit SET outcome = ?2, error_code = ?3, duration_ms = ?4, proof = ?5 WHERE call_id = ?1 RETURNING ",
    audit_chain::row_columns!()
);

const INTERRUPT_CALLS: &str = concat!(
    "UPDATE audit SET outcome = ?1 WHERE outcome = ?2 RETURNING ",
    audit_chain::row_columns!()
);

/// The SQL and parameters of an audit page. A condition like `(?1 IS NULL OR agent_id
/// = ?1)` would keep one statement for every filter, but SQLite cannot use an index
/// through it and scans the whole table; so each filter given adds its own condition.
/// Every equality filter has an index on `(column, id)` that also yields the rows
/// newest first.
fn audit_query(f: &AuditFilter) -> (String, Vec<db::Value<'_>>) {
    use db::Value;
    let mut conditions: Vec<String> = Vec::new();
    let mut values: Vec<Value<'_>> = Vec::new();
    let mut add = |condition: &str, value: Value<'static>| {
        values.push(value);
        conditions.push(format!("{condition} ?{}", values.len()));
    };
    if let Some(v) = &f.agent_id {
        add("agent_id =", Value::from(v.clone()));
    }
    if let Some(v) = f.user_id {
        add("user_id =", Value::Int(v));
    }
    if let Some(v) = &f.tool {
        add("tool =", Value::from(v.clone()));
    }
    if let Some(v) = &f.username {
        add("username =", Value::from(v.clone()));
    }
    if let Some(v) = &f.outcome {
        add("outcome =", Value::from(v.clone()));
    }
    if let Some(v) = f.before_id {
        add("id <", Value::Int(v));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    values.push(Value::Int(i64::from(f.limit)));
    let sql = format!(
        "SELECT {AUDIT_COLUMNS} FROM audit{filter} ORDER BY id DESC LIMIT ?{}",
        values.len()
    );
    (sql, values)
}

const AGENT_BY_ID: &str =
    "SELECT agent_id, public_key, hostname, os, version, arch, last_seen, channel FROM agents WHERE agent_id = ?1";
const ALL_AGENTS: &str =
    "SELECT agent_id, public_key, hostname, os, version, arch, last_seen, channel FROM agents ORDER BY agent_id";

fn agent_record(r: &db::Row) -> Result<AgentRecord> {
    Ok(AgentRecord {
        agent_id: agent_id_of(r, 0)?,
        public_key: r.get(1)?,
        hostname: r.get(2)?,
        os: r.get(3)?,
        version: r.get(4)?,
        arch: r.get(5)?,
        last_seen: r.get(6)?,
        channel: r.get(7)?,
    })
}

/// An agent id as stored: it was checked when written, so one that no longer reads as
/// an id is a damaged database, reported as such rather than served.
fn agent_id_of(r: &db::Row, index: usize) -> Result<kenny_proto::AgentId> {
    parse_agent_id(&r.get::<String>(index)?)
}

fn parse_agent_id(text: &str) -> Result<kenny_proto::AgentId> {
    kenny_proto::AgentId::parse(text)
        .map_err(|e| StoreError::Internal(format!("a stored agent id {text:?} is damaged: {e}")))
}

/// The columns a credential lookup selects: credential id, user id, user name, role.
fn credential_columns(r: &db::Row) -> Result<(i64, i64, String, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

/// The principal a credential row stands for: the user, its role and (for `user`) its
/// hosts. `None` for a role this build does not know.
fn principal(
    c: &db::Conn,
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

fn load_hosts(c: &db::Conn, user_id: i64) -> Result<Vec<String>> {
    c.query_all(
        "SELECT agent_id FROM user_hosts WHERE user_id = ?1 ORDER BY agent_id",
        args![user_id],
        |r| r.get(0),
    )
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
