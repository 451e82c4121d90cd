//! Schema migrations, applied in order and recorded in `PRAGMA user_version`.

use rusqlite::Connection;

use super::{Result, StoreError};

pub(super) const MIGRATIONS: &[&str] = &[
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
    // 11: user ids are never reused (a deleted user's id could name a new account).
    USERS_NEVER_REUSE_IDS,
    // 12: how each agent update ended, as the agent reported it.
    "CREATE TABLE agent_updates (
        order_id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        requested_by TEXT NOT NULL,
        from_version TEXT NOT NULL,
        to_version TEXT NOT NULL,
        outcome TEXT NOT NULL,
        detail TEXT NOT NULL,
        at TEXT NOT NULL
    );
    CREATE INDEX agent_updates_by_agent ON agent_updates (agent_id, at);",
    // 13: why a chat call waits for the operator, and each user's model use per day.
    "ALTER TABLE chat_calls ADD COLUMN hold_reason TEXT;
    CREATE TABLE chat_usage (
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        day TEXT NOT NULL,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        turns INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (user_id, day)
    );",
    // 14: an index for every audit filter, each ending in `id` so a filtered page comes
    // newest first straight from the index (agent and user already have theirs); the
    // outcome index also finds calls left `sent` at start-up.
    "CREATE INDEX audit_by_tool ON audit (tool, id);
    CREATE INDEX audit_by_username ON audit (username, id);
    CREATE INDEX audit_by_outcome ON audit (outcome, id);",
    // 15: audit retention prunes the oldest rows by time.
    "CREATE INDEX audit_by_at ON audit (at);",
    // 16: health judged by the server: the operator's thresholds and each PC's verdict.
    "CREATE TABLE health_thresholds (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        thresholds TEXT NOT NULL,
        updated_by TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE agent_health (
        agent_id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        assessment TEXT NOT NULL
    );",
    // 17: what changed on each PC between snapshots (accounts, software, ports, ...).
    "CREATE TABLE changes (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        at TEXT NOT NULL,
        section TEXT NOT NULL,
        kind TEXT NOT NULL,
        item TEXT NOT NULL,
        detail TEXT NOT NULL,
        priority TEXT NOT NULL
    );
    CREATE INDEX changes_by_agent ON changes (agent_id, at);
    CREATE INDEX changes_by_at ON changes (at);",
    // 18: alerts (a section gone bad, a PC offline, a high-priority change), silences,
    // the channels they are sent to, each delivery with its retries, and settings.
    "CREATE TABLE alerts (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        key TEXT NOT NULL,
        status TEXT NOT NULL,
        reason TEXT NOT NULL,
        attention TEXT,
        opened_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        closed_at TEXT,
        silenced INTEGER NOT NULL DEFAULT 0,
        notified INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX alerts_open ON alerts (closed_at, agent_id);
    CREATE INDEX alerts_by_agent ON alerts (agent_id, key, id);
    CREATE TABLE alert_silences (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        section TEXT NOT NULL,
        until TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX silences_by_agent ON alert_silences (agent_id, until);
    CREATE TABLE alert_channels (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        config TEXT NOT NULL,
        digest INTEGER NOT NULL DEFAULT 0,
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        digest_sent_at TEXT
    );
    CREATE TABLE alert_deliveries (
        id INTEGER PRIMARY KEY,
        channel_id INTEGER NOT NULL REFERENCES alert_channels(id) ON DELETE CASCADE,
        alert_id INTEGER,
        event TEXT NOT NULL,
        message TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at TEXT NOT NULL,
        last_error TEXT,
        created_at TEXT NOT NULL,
        sent_at TEXT
    );
    CREATE INDEX deliveries_due ON alert_deliveries (status, next_at);
    CREATE INDEX deliveries_by_channel ON alert_deliveries (channel_id, id);
    CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_by TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );",
    // 19: the compact history: a small point per snapshot, later hourly and daily.
    "CREATE TABLE metrics (
        agent_id TEXT NOT NULL,
        tier INTEGER NOT NULL,
        at TEXT NOT NULL,
        health INTEGER,
        cpu REAL,
        load REAL,
        memory REAL,
        temperature REAL,
        disks TEXT NOT NULL,
        PRIMARY KEY (agent_id, tier, at)
    ) WITHOUT ROWID;
    CREATE INDEX metrics_by_time ON metrics (agent_id, at);",
    // 20: a counter of changes to `agents`, kept by triggers (so the admin CLI's
    // changes count too): the server caches the agent list until it moves.
    "CREATE TABLE agents_version (id INTEGER PRIMARY KEY CHECK (id = 1), v INTEGER NOT NULL);
    INSERT INTO agents_version (id, v) VALUES (1, 0);
    CREATE TRIGGER agents_inserted AFTER INSERT ON agents BEGIN UPDATE agents_version SET v = v + 1 WHERE id = 1; END;
    CREATE TRIGGER agents_updated AFTER UPDATE ON agents BEGIN UPDATE agents_version SET v = v + 1 WHERE id = 1; END;
    CREATE TRIGGER agents_deleted AFTER DELETE ON agents BEGIN UPDATE agents_version SET v = v + 1 WHERE id = 1; END;",
    // 21: the web filter run by the server: each PC's configuration, what was applied
    // and seen there, list sources with their last good copy, and kept web activity.
    "CREATE TABLE webfilter_configs (
        agent_id TEXT PRIMARY KEY,
        config TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        updated_by TEXT NOT NULL
    );
    CREATE TABLE webfilter_state (
        agent_id TEXT PRIMARY KEY,
        applied_hash TEXT,
        applied_count INTEGER NOT NULL DEFAULT 0,
        applied_at TEXT,
        applied_by TEXT,
        applied_rule TEXT,
        observed_hash TEXT,
        observed_active INTEGER,
        observed_at TEXT,
        problem TEXT,
        problem_at TEXT,
        applied_doh INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE webfilter_sources (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        category TEXT NOT NULL,
        url TEXT NOT NULL UNIQUE,
        refresh_minutes INTEGER NOT NULL,
        etag TEXT,
        last_modified TEXT,
        domains TEXT,
        domain_count INTEGER NOT NULL DEFAULT 0,
        fetched_at TEXT,
        checked_at TEXT,
        error TEXT,
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE web_activity (
        agent_id TEXT NOT NULL,
        domain TEXT NOT NULL,
        first_seen TEXT NOT NULL,
        last_seen TEXT NOT NULL,
        hits INTEGER NOT NULL,
        flag TEXT,
        recorded_at TEXT NOT NULL,
        PRIMARY KEY (agent_id, domain)
    ) WITHOUT ROWID;
    CREATE INDEX web_activity_recent ON web_activity (agent_id, last_seen);",
    // 22: install links, one-time URLs that enroll a PC.
    "CREATE TABLE install_links (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        token_hash TEXT NOT NULL UNIQUE,
        agent_id TEXT NOT NULL,
        os TEXT NOT NULL CHECK (os IN ('linux', 'windows')),
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT,
        used_from TEXT,
        revoked_at TEXT,
        revoked_by TEXT
    );
    CREATE INDEX install_links_by_agent ON install_links (agent_id);",
    // 23: update rollouts: each PC's channel, campaigns and what each did on each PC.
    "ALTER TABLE agents ADD COLUMN channel TEXT NOT NULL DEFAULT 'stable' CHECK (channel IN ('stable', 'beta'));
    CREATE TABLE update_campaigns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        version TEXT NOT NULL,
        target TEXT NOT NULL,
        max_parallel INTEGER NOT NULL CHECK (max_parallel BETWEEN 1 AND 50),
        state TEXT NOT NULL CHECK (state IN ('running', 'paused', 'cancelled', 'finished')),
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE update_campaign_pcs (
        campaign_id INTEGER NOT NULL REFERENCES update_campaigns (id) ON DELETE CASCADE,
        agent_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'updating', 'done', 'rolled_back', 'failed', 'held', 'skipped')),
        attempts INTEGER NOT NULL DEFAULT 0,
        rollbacks INTEGER NOT NULL DEFAULT 0,
        detail TEXT NOT NULL DEFAULT '',
        started_at TEXT,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (campaign_id, agent_id)
    ) WITHOUT ROWID;",
    // 24: removed PCs: gone from `agents` at once (no key, no token), their history
    // kept until the purge after the retention period, unless the id is added again.
    "CREATE TABLE removed_agents (
        agent_id TEXT PRIMARY KEY,
        removed_at TEXT NOT NULL,
        removed_by TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TRIGGER agents_readded AFTER INSERT ON agents BEGIN
        DELETE FROM removed_agents WHERE agent_id = NEW.agent_id;
    END;",
    // 25: secrets every replica of a cluster must share (the server key agents pin),
    // kept where they all find them. A single SQLite server keeps its key in a file.
    "CREATE TABLE server_secrets (
        name TEXT PRIMARY KEY,
        value BLOB NOT NULL
    ) WITHOUT ROWID;",
    // 26: the agent's signed proof of a call's answer (JSON, `kenny_proto::proof`), kept
    // with the call's audit row; NULL for an agent that does not sign.
    "ALTER TABLE audit ADD COLUMN proof TEXT;",
    // 27: the audit trail as a hash chain (`store::audit_chain`): every write of a row
    // appends an event holding the digest of the row as written, linked to the one
    // before; checkpoints sign the chain's head with the server key. Rows written before
    // this step are outside the chain, and `audit verify` says how many. Pruning moves
    // the chain's base to a checkpoint (`base_seq`; 0 is the start).
    "CREATE TABLE audit_chain (
        seq INTEGER PRIMARY KEY,
        audit_id INTEGER NOT NULL,
        digest TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    CREATE INDEX audit_chain_by_row ON audit_chain (audit_id, seq);
    CREATE TABLE audit_checkpoints (
        seq INTEGER PRIMARY KEY,
        hash TEXT NOT NULL,
        last_audit_id INTEGER NOT NULL,
        at TEXT NOT NULL,
        sig TEXT NOT NULL
    );
    CREATE TABLE audit_chain_start (before_id INTEGER NOT NULL, base_seq INTEGER NOT NULL);
    INSERT INTO audit_chain_start (before_id, base_seq) SELECT COALESCE(MAX(id), 0), 0 FROM audit;",
    // 28: approvals on the MCP path: whose state-changing MCP calls wait for a person
    // (a user, or one personal access token; a rule goes with its subject), whether
    // the caller's own client may be asked (elicitation), and each call held for
    // approval with the PC it was frozen on (and that PC's enrolled key then), who
    // decided and, once it ran, its MCP result.
    "CREATE TABLE approval_rules (
        id INTEGER PRIMARY KEY,
        user_id INTEGER UNIQUE REFERENCES users(id) ON DELETE CASCADE,
        token_id INTEGER UNIQUE REFERENCES tokens(id) ON DELETE CASCADE,
        elicitation INTEGER NOT NULL DEFAULT 1,
        set_by TEXT NOT NULL,
        set_at TEXT NOT NULL,
        CHECK ((user_id IS NULL) <> (token_id IS NULL))
    );
    CREATE TABLE held_calls (
        id TEXT PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        username TEXT NOT NULL,
        credential_kind TEXT NOT NULL,
        credential_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        agent_key TEXT,
        args TEXT NOT NULL,
        asked_by TEXT NOT NULL CHECK (asked_by IN ('elicitation', 'dashboard')),
        status TEXT NOT NULL CHECK (status IN ('held', 'running', 'done', 'denied')),
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        decided_by TEXT,
        decided_at TEXT,
        result TEXT,
        is_error INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX held_calls_by_status ON held_calls (status, created_at);
    CREATE INDEX held_calls_by_user ON held_calls (user_id, status);",
];

/// `users` rebuilt with `AUTOINCREMENT` (SQLite cannot add it in place): every row keeps
/// its id, the tables pointing at `users` keep pointing at the same ids (foreign keys
/// are off while migrating, so dropping the old table cascades nowhere, and checked
/// before the commit), and the id sequence starts past every id ever handed out, the
/// audit's ids of already deleted users included.
///
/// It names every column `users` has: a migration that adds one must come after it or
/// extend it.
pub(super) const USERS_NEVER_REUSE_IDS: &str = "CREATE TABLE users_new (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        username TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('superuser', 'operator', 'user')),
        disabled INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        totp_secret TEXT,
        totp_pending TEXT,
        totp_last_step INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO users_new (id, username, password_hash, role, disabled, created_at, totp_secret, totp_pending, totp_last_step)
        SELECT id, username, password_hash, role, disabled, created_at, totp_secret, totp_pending, totp_last_step FROM users;
    DROP TABLE users;
    ALTER TABLE users_new RENAME TO users;
    INSERT INTO sqlite_sequence (name, seq)
        SELECT 'users', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'users');
    UPDATE sqlite_sequence SET seq = MAX(
            seq,
            COALESCE((SELECT MAX(id) FROM users), 0),
            COALESCE((SELECT MAX(user_id) FROM audit), 0))
        WHERE name = 'users';";

/// The schema version this build writes (`PRAGMA user_version` after migrating).
pub(super) fn latest() -> usize {
    MIGRATIONS.len()
}

pub(super) fn apply(conn: &mut Connection) -> Result<()> {
    migrate(conn, MIGRATIONS.len())
}

/// Applies the migrations up to `upto` (all of them outside tests). Foreign keys are
/// off while migrating (the setting only changes outside a transaction): rebuilding a
/// table means dropping it, which must not cascade. They are checked before the commit.
fn migrate(conn: &mut Connection, upto: usize) -> Result<()> {
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    let result = migrate_in_transaction(conn, upto);
    conn.pragma_update(None, "foreign_keys", "ON")?;
    result
}

fn migrate_in_transaction(conn: &mut Connection, upto: usize) -> Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let current: usize = tx.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    for (i, sql) in MIGRATIONS.iter().enumerate().take(upto).skip(current) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    let broken: Vec<String> = {
        let mut stmt = tx.prepare("SELECT \"table\", parent FROM pragma_foreign_key_check")?;
        stmt.query_map([], |r| {
            Ok(format!("{} -> {}", r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?
    };
    if !broken.is_empty() {
        return Err(StoreError::Internal(format!(
            "the database's references are broken ({}); nothing was migrated, restore a backup",
            broken.join(", ")
        )));
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::{CredentialKind, Role};
    use crate::store::{Store, open_connection};

    /// A database as the previous schema left it, with a user of every kind of data
    /// and a deleted user whose id the audit still names.
    fn old_database(dir: &std::path::Path) {
        let before = MIGRATIONS
            .iter()
            .position(|m| *m == USERS_NEVER_REUSE_IDS)
            .expect("the migration is listed");
        let mut conn = open_connection(&dir.join(crate::store::DB_FILE)).unwrap();
        migrate(&mut conn, before).unwrap();
        conn.execute_batch(
            "INSERT INTO users (id, username, password_hash, role, created_at) VALUES
                 (1, 'root', 'h1', 'superuser', 't'), (2, 'kim', 'h2', 'user', 't'), (3, 'gone', 'h3', 'operator', 't');
             UPDATE users SET totp_secret = 'SECRET', totp_last_step = 42 WHERE id = 2;
             INSERT INTO user_hosts VALUES (2, 'pc-a'), (2, 'pc-b'), (3, 'pc-c');
             INSERT INTO tokens (user_id, kind, label, token_hash, created_at) VALUES
                 (1, 'pat', 'root pat', 'hash-root', 't'), (2, 'pat', 'kim pat', 'hash-kim', 't'), (3, 'pat', NULL, 'hash-gone', 't');
             INSERT INTO sessions (user_id, token_hash, csrf_token, created_at, expires_at) VALUES
                 (2, 'ses-kim', 'csrf', 't', '9999');
             INSERT INTO oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, resource, family, expires_at)
                 VALUES ('code-kim', 'c', 2, 'r', 'x', 'res', 'fam', 't');
             INSERT INTO oauth_tokens (token_hash, kind, family, client_id, user_id, resource, created_at, expires_at)
                 VALUES ('oat-kim', 'access', 'fam', 'c', 2, 'res', 't', '9999');
             INSERT INTO recovery_codes (user_id, code_hash) VALUES (2, 'rc');
             INSERT INTO chat_sessions (id, user_id, title, created_at, updated_at) VALUES ('chat-kim', 2, 'hi', 't', 't');
             INSERT INTO chat_messages (session_id, role, content, created_at) VALUES ('chat-kim', 'user', '[]', 't');
             INSERT INTO audit (at, user_id, username, tool, args_digest, outcome, duration_ms) VALUES
                 ('t', 3, 'gone', 'shell_exec', 'd', 'ok', 1), ('t', 4, 'deleted before', 'fs_read', 'd', 'ok', 1);
             DELETE FROM users WHERE id = 3;",
        )
        .unwrap();
    }

    fn count(store: &Store, table: &str) -> i64 {
        store
            .with(|c| Ok(c.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))?))
            .unwrap()
    }

    #[test]
    fn the_users_rebuild_keeps_every_row_and_reference_and_never_reuses_an_id() {
        let dir = tempfile::tempdir().unwrap();
        old_database(dir.path());
        let store = Store::open(dir.path()).unwrap();

        for (table, rows) in [
            ("users", 2),
            ("user_hosts", 2),
            ("tokens", 2),
            ("sessions", 1),
            ("oauth_codes", 1),
            ("oauth_tokens", 1),
            ("recovery_codes", 1),
            ("chat_sessions", 1),
            ("chat_messages", 1),
            ("audit", 2),
        ] {
            assert_eq!(count(&store, table), rows, "{table}");
        }
        let kim = store.user(2).unwrap().expect("kim keeps id 2");
        assert_eq!(
            (kim.username.as_str(), kim.role, kim.hosts.clone(), kim.totp_enabled),
            ("kim", Role::User, vec!["pc-a".to_owned(), "pc-b".to_owned()], true)
        );
        let login = store.user_login("kim").unwrap().unwrap();
        assert_eq!((login.password_hash.as_str(), login.totp_last_step), ("h2", 42));
        let p = store
            .principal_for_token(CredentialKind::Pat, "hash-kim")
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                p.user_id,
                p.hosts.map(|h| h.iter().map(ToString::to_string).collect::<Vec<_>>())
            ),
            (2, Some(vec!["pc-a".to_owned(), "pc-b".to_owned()]))
        );
        assert!(store.session_principal("ses-kim", "2000").unwrap().is_some());
        assert!(store.oauth_principal("oat-kim", "res", "2000").unwrap().is_some());

        // The next account gets an id no user ever had, though the highest (3) and an
        // id only the audit remembers (4) were deleted.
        let next = store.create_user("new", "h", Role::Operator, &[], "t").unwrap();
        assert_eq!(next, 5);
        store.delete_user(next).unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.create_user("newer", "h", Role::Operator, &[], "t").unwrap(),
            6,
            "across a restart too"
        );

        // The references still hold and still cascade.
        assert_eq!(count(&store, "pragma_foreign_key_check"), 0);
        store.delete_user(2).unwrap();
        for table in [
            "user_hosts",
            "sessions",
            "oauth_tokens",
            "recovery_codes",
            "chat_sessions",
            "chat_messages",
        ] {
            assert_eq!(count(&store, table), 0, "{table} follows its user");
        }
        assert_eq!(count(&store, "tokens"), 1, "root's token stays");
    }

    #[test]
    fn a_fresh_database_never_reuses_ids_either() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = store.create_user("a", "h", Role::Superuser, &[], "t").unwrap();
        let b = store.create_user("b", "h", Role::Operator, &[], "t").unwrap();
        store.delete_user(b).unwrap();
        assert!(store.create_user("c", "h", Role::Operator, &[], "t").unwrap() > b);
        assert_eq!(a, 1);
    }

    #[test]
    fn migrating_twice_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(dir.path()).unwrap());
        let store = Store::open(dir.path()).unwrap();
        let version: i64 = store
            .with(|c| Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(version as usize, MIGRATIONS.len());
        let fk: i64 = store
            .with(|c| Ok(c.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(fk, 1, "foreign keys are back on after migrating");
    }
}
