//! Schema migrations, applied in order and recorded in `PRAGMA user_version`.

use rusqlite::Connection;

const MIGRATIONS: &[&str] = &[
    // 1: accounts, credentials, agents, audit, telemetry.
    "CREATE TABLE users (
        id INTEGER PRIMARY KEY,
        username TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('superuser', 'operator', 'user')),
        disabled INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE TABLE user_hosts (
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        agent_id TEXT NOT NULL,
        PRIMARY KEY (user_id, agent_id)
    );
    CREATE TABLE tokens (
        id INTEGER PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        label TEXT,
        token_hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        revoked_at TEXT
    );
    CREATE TABLE agents (
        agent_id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL,
        public_key TEXT,
        enrolled_at TEXT,
        created_at TEXT NOT NULL,
        hostname TEXT,
        os TEXT,
        version TEXT,
        arch TEXT,
        last_seen TEXT
    );
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        user_id INTEGER,
        username TEXT,
        credential_kind TEXT,
        credential_id TEXT,
        agent_id TEXT,
        tool TEXT NOT NULL,
        args_digest TEXT NOT NULL,
        outcome TEXT NOT NULL,
        error_code TEXT,
        duration_ms INTEGER NOT NULL
    );
    CREATE INDEX audit_by_agent ON audit (agent_id, id);
    CREATE INDEX audit_by_user ON audit (user_id, id);
    CREATE TABLE telemetry (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        collected_at TEXT NOT NULL,
        received_at TEXT NOT NULL,
        snapshot TEXT NOT NULL
    );
    CREATE INDEX telemetry_by_agent ON telemetry (agent_id, id);",
    // 2: audit rows are written when a call is sent and completed when it ends.
    "ALTER TABLE audit ADD COLUMN call_id TEXT;
    CREATE UNIQUE INDEX audit_by_call ON audit (call_id) WHERE call_id IS NOT NULL;",
    // 3: dashboard sign-in sessions.
    "CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        token_hash TEXT NOT NULL UNIQUE,
        csrf_token TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        client TEXT,
        user_agent TEXT,
        revoked_at TEXT
    );
    CREATE INDEX sessions_by_user ON sessions (user_id);",
    // 4: the OAuth 2.1 authorization server for /mcp.
    "CREATE TABLE oauth_clients (
        client_id TEXT PRIMARY KEY,
        client_name TEXT,
        redirect_uris TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE oauth_codes (
        code_hash TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        redirect_uri TEXT NOT NULL,
        code_challenge TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT,
        family TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT
    );
    CREATE TABLE oauth_tokens (
        id INTEGER PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
        family TEXT NOT NULL,
        client_id TEXT NOT NULL,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        resource TEXT NOT NULL,
        scope TEXT,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT,
        revoked_at TEXT
    );
    CREATE INDEX oauth_tokens_by_family ON oauth_tokens (family);
    CREATE INDEX oauth_tokens_by_user ON oauth_tokens (user_id);",
    // 5: TOTP second factor and its recovery codes.
    "ALTER TABLE users ADD COLUMN totp_secret TEXT;
    ALTER TABLE users ADD COLUMN totp_pending TEXT;
    ALTER TABLE users ADD COLUMN totp_last_step INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE recovery_codes (
        id INTEGER PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        code_hash TEXT NOT NULL,
        used_at TEXT
    );
    CREATE INDEX recovery_codes_by_user ON recovery_codes (user_id);",
    // 6: the operator's guard rules, one fleet-wide list pushed to every agent.
    "CREATE TABLE operator_policy (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        rules TEXT NOT NULL,
        updated_by TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );",
    // 7: where each audited request came from.
    "ALTER TABLE audit ADD COLUMN client_addr TEXT;",
    // 8: dashboard chat: conversations, their messages (Messages API content blocks),
    // and every tool call the model asked for, with its frozen target and decision.
    "CREATE TABLE chat_sessions (
        id TEXT PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        title TEXT NOT NULL,
        selected_agent TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX chat_sessions_by_user ON chat_sessions (user_id, updated_at);
    CREATE TABLE chat_messages (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES chat_sessions(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX chat_messages_by_session ON chat_messages (session_id, id);
    CREATE TABLE chat_calls (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES chat_sessions(id) ON DELETE CASCADE,
        message_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        tool TEXT NOT NULL,
        args TEXT NOT NULL,
        agent_id TEXT,
        class TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('held', 'running', 'done', 'denied', 'refused')),
        result TEXT,
        is_error INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        decided_by TEXT,
        decided_at TEXT
    );
    CREATE INDEX chat_calls_by_session ON chat_calls (session_id, message_id, seq);",
    // 9: API actions are audited too; `target` is the path they acted on.
    "ALTER TABLE audit ADD COLUMN target TEXT;",
    // 10: the newest screenshot taken from the dashboard, one per agent.
    "CREATE TABLE screenshots (
        agent_id TEXT PRIMARY KEY,
        png BLOB NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        taken_at TEXT NOT NULL,
        taken_by TEXT NOT NULL
    );",
    // 11: an index for every audit filter, each ending in `id` so a filtered page comes
    // newest first straight from the index (agent and user already have theirs); the
    // outcome index also finds calls left `sent` at start-up.
    "CREATE INDEX audit_by_tool ON audit (tool, id);
    CREATE INDEX audit_by_username ON audit (username, id);
    CREATE INDEX audit_by_outcome ON audit (outcome, id);",
    // 12: audit retention prunes the oldest rows by time.
    "CREATE INDEX audit_by_at ON audit (at);",
];

pub fn apply(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let current: usize = tx.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    tx.commit()
}
