//! The store under load: the audit trail's queries use indexes, retention prunes in
//! small batches, and a long read holds up neither writes nor sign-ins.

use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::principal::Role;

fn row(at: &str, agent: &str) -> AuditWrite {
    AuditWrite::Row(Box::new(AuditRow {
        call_id: None,
        at: at.into(),
        user_id: Some(1),
        username: Some("u".into()),
        credential_kind: Some("pat".into()),
        credential_id: Some("1".into()),
        client_addr: None,
        target: None,
        agent_id: Some(agent.into()),
        tool: "shell_exec".into(),
        args_digest: "d".into(),
        outcome: "ok",
        error_code: None,
        duration_ms: 1,
    }))
}

/// `EXPLAIN QUERY PLAN` of `sql` with `values` bound: one line per step.
fn plan(store: &Store, sql: &str, values: &[super::db::Value<'_>]) -> Vec<String> {
    store
        .read(|c| {
            let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
            let lines = stmt
                .query_map(rusqlite::params_from_iter(values.iter()), |r| r.get::<_, String>(3))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(lines)
        })
        .unwrap()
}

#[test]
fn every_audit_query_is_served_by_an_index() {
    // Regression: the page query was one statement with `(?1 IS NULL OR agent_id = ?1)`
    // conditions, which SQLite cannot serve from an index: filtering a big trail by
    // PC, tool, user or outcome read the whole table.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store
        .write_audit(&[
            row("2026-01-01T00:00:00.000Z", "a"),
            row("2026-01-02T00:00:00.000Z", "b"),
        ])
        .unwrap();
    // Every combination of the six filters.
    for mask in 0u32..64 {
        let on = |bit: u32| mask & (1 << bit) != 0;
        let filter = AuditFilter {
            agent_id: on(0).then(|| "a".into()),
            user_id: on(1).then_some(1),
            tool: on(2).then(|| "shell_exec".into()),
            username: on(3).then(|| "u".into()),
            outcome: on(4).then(|| "ok".into()),
            before_id: on(5).then_some(100),
            limit: 50,
        };
        let (sql, values) = audit_query(&filter);
        let lines = plan(&store, &sql, &values);
        let text = lines.join(" | ");
        assert!(
            !text.contains("TEMP B-TREE"),
            "{filter:?} sorts instead of reading in order: {text}"
        );
        if mask & 0b1_1111 != 0 {
            assert!(
                lines.iter().any(|l| l.starts_with("SEARCH audit USING INDEX audit_by_")
                    || l.starts_with("SEARCH audit USING COVERING INDEX audit_by_")),
                "{filter:?} does not use an index: {text}"
            );
        } else if filter.before_id.is_some() {
            assert!(
                text.contains("SEARCH audit USING INTEGER PRIMARY KEY (rowid<?)"),
                "{text}"
            );
        } else {
            assert_eq!(lines, ["SCAN audit"], "the unfiltered page reads newest rows first");
        }
        // And the query means what it says: only the PC filter leaves a row out.
        let got = store.audit(&filter).unwrap();
        assert_eq!(got.len(), if on(0) { 1 } else { 2 }, "{filter:?}");
    }
    let uses = |sql: &str, values: &[super::db::Value<'_>], index: &str| {
        let text = plan(&store, sql, values).join(" | ");
        assert!(text.contains(&format!("INDEX {index}")), "{sql}: {text}");
    };
    use super::db::Value;
    uses(
        FINISH_CALL,
        &[
            Value::from("c".to_owned()),
            Value::from("ok".to_owned()),
            Value::Null,
            Value::from(1i64),
            Value::Null,
        ],
        "audit_by_call",
    );
    uses(
        INTERRUPT_CALLS,
        &[Value::from("interrupted".to_owned()), Value::from("sent".to_owned())],
        "audit_by_outcome",
    );
}

#[test]
fn retention_prunes_only_older_rows_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let old: Vec<AuditWrite> = (0..25)
        .map(|i| row(&format!("2025-01-01T00:00:{i:02}.000Z"), "old"))
        .collect();
    store.write_audit(&old).unwrap();
    // Chained rows go only down to a checkpoint: one signed after the old rows.
    let key = ed25519_dalek::SigningKey::from_bytes(&[1; 32]);
    crate::ledger::checkpoint(&store, &key, "2025-01-02T00:00:00.000Z")
        .unwrap()
        .unwrap();
    let new: Vec<AuditWrite> = (0..3)
        .map(|i| row(&format!("2026-06-01T00:00:0{i}.000Z"), "new"))
        .collect();
    store.write_audit(&new).unwrap();
    let cutoff = "2026-01-01T00:00:00.000Z";
    assert_eq!(store.prune_audit(cutoff, 10).unwrap(), 10, "one batch at a time");
    assert_eq!(store.prune_audit(cutoff, 10).unwrap(), 10);
    assert_eq!(
        store.prune_audit(cutoff, 10).unwrap(),
        5,
        "a short batch: nothing older is left"
    );
    assert_eq!(store.prune_audit(cutoff, 10).unwrap(), 0);
    let left = store
        .audit(&AuditFilter {
            limit: 100,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(left.len(), 3);
    assert!(left.iter().all(|e| e.agent_id.as_deref() == Some("new")));
    let report = crate::ledger::verify(&store, &key.verifying_key()).unwrap();
    assert!(
        report.is_intact(),
        "pruned to a checkpoint, the chain still verifies: {report:?}"
    );
    assert_eq!(report.rows_verified, 3);
}

#[test]
fn a_long_read_holds_up_neither_writes_nor_sign_ins_nor_other_reads() {
    // Regression: every query shared the writer's one connection and its lock, so a
    // slow audit page stalled sign-ins, the audit writer and agent handshakes.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    store
        .create_user("kim", "hash", Role::Superuser, &[], "2026-01-01T00:00:00.000Z")
        .unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let long_read = std::thread::spawn({
        let store = store.clone();
        move || {
            store.read(|c| {
                // A read transaction that stays open until the test lets it go, as a
                // slow audit query over a big trail would.
                c.execute_batch("BEGIN")?;
                let n: i64 = c.query_row("SELECT COUNT(*) FROM audit", [], |r| r.get(0))?;
                started_tx.send(()).unwrap();
                let _ = release_rx.recv();
                c.execute_batch("COMMIT")?;
                Ok(n)
            })
        }
    });
    started_rx.recv().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn({
        let store = store.clone();
        move || {
            let signed_in = store.user_login("kim").map(|u| u.is_some()).and_then(|found| {
                let session = store.create_session(&NewSession {
                    user_id: 1,
                    token_hash: "session-hash",
                    csrf_token: "csrf",
                    created_at: "2026-01-01T00:00:00.000Z",
                    expires_at: "2027-01-01T00:00:00.000Z",
                    client: None,
                    user_agent: None,
                })?;
                Ok(found && session > 0)
            });
            let wrote = store.write_audit(&[row("2026-01-01T00:00:00.000Z", "pc")]);
            let page = store.audit(&AuditFilter {
                limit: 10,
                ..Default::default()
            });
            done_tx.send((signed_in, wrote, page.map(|p| p.len()))).unwrap();
        }
    });
    // Bounded, generous: before, these waited for the read and this never arrived.
    let (signed_in, wrote, page) = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a sign-in, an audit write and an audit page waited for a long read");
    assert!(signed_in.unwrap(), "the user was found and a session stored");
    wrote.unwrap();
    assert_eq!(page.unwrap(), 1, "the new row is visible to a fresh read");
    release_tx.send(()).unwrap();
    assert_eq!(long_read.join().unwrap().unwrap(), 0, "the long read kept its snapshot");
}

#[test]
fn reads_beyond_the_pool_wait_for_the_first_reader_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let (started_tx, started_rx) = mpsc::channel();
    let mut releases = Vec::new();
    let mut holders = Vec::new();
    for _ in 0..READERS {
        let (release_tx, release_rx) = mpsc::channel::<()>();
        releases.push(release_tx);
        let (store, started_tx) = (store.clone(), started_tx.clone());
        holders.push(std::thread::spawn(move || {
            store.read(|_| {
                started_tx.send(()).unwrap();
                let _ = release_rx.recv();
                Ok(())
            })
        }));
    }
    for _ in 0..READERS {
        started_rx.recv().unwrap();
    }
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn({
        let store = store.clone();
        move || done_tx.send(store.agents().map(|a| a.len())).unwrap()
    });
    assert!(
        done_rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "every reader is busy: the read waits"
    );
    // Whichever reader comes back first serves it; it is not tied to a busy one.
    releases.pop().unwrap().send(()).unwrap();
    let got = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a reader given back serves the waiting read");
    assert_eq!(got.unwrap(), 0);
    for r in releases {
        r.send(()).unwrap();
    }
    for h in holders {
        h.join().unwrap().unwrap();
    }
}
