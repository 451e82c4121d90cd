use super::*;

#[test]
fn audit_rows_page_newest_first_and_filter_by_agent() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let row = |agent: &str, n: i64| AuditRow {
        call_id: None,
        at: format!("2026-01-01T00:00:{n:02}Z"),
        user_id: Some(1),
        username: Some("u".into()),
        credential_kind: Some("pat".into()),
        credential_id: Some("1".into()),
        client_addr: Some("127.0.0.1".into()),
        target: None,
        agent_id: Some(agent.into()),
        tool: "shell_exec".into(),
        args_digest: "sha256:x".into(),
        outcome: "ok",
        error_code: None,
        duration_ms: n,
    };
    store
        .write_audit(&[
            AuditWrite::Row(Box::new(row("a", 1))),
            AuditWrite::Row(Box::new(row("b", 2))),
            AuditWrite::Row(Box::new(row("a", 3))),
        ])
        .unwrap();
    let all = store
        .audit(&AuditFilter {
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(all.iter().map(|e| e.duration_ms).collect::<Vec<_>>(), vec![3, 2, 1]);
    let a = store
        .audit(&AuditFilter {
            agent_id: Some("a".into()),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(a.iter().map(|e| e.duration_ms).collect::<Vec<_>>(), vec![3, 1]);
    let page = store
        .audit(&AuditFilter {
            before_id: Some(a[0].id),
            limit: 1,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].duration_ms, 2);
    assert_eq!(page[0].client_addr.as_deref(), Some("127.0.0.1"));

    store
        .write_audit(&[AuditWrite::Row(Box::new(AuditRow {
            tool: "fs_read".into(),
            username: Some("kim".into()),
            outcome: "error",
            ..row("b", 4)
        }))])
        .unwrap();
    let only = |f: AuditFilter| {
        store
            .audit(&AuditFilter { limit: 10, ..f })
            .unwrap()
            .iter()
            .map(|e| e.duration_ms)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        only(AuditFilter {
            tool: Some("fs_read".into()),
            ..Default::default()
        }),
        vec![4]
    );
    assert_eq!(
        only(AuditFilter {
            username: Some("u".into()),
            ..Default::default()
        }),
        vec![3, 2, 1]
    );
    assert_eq!(
        only(AuditFilter {
            outcome: Some("error".into()),
            ..Default::default()
        }),
        vec![4]
    );
    assert_eq!(
        only(AuditFilter {
            agent_id: Some("a".into()),
            outcome: Some("error".into()),
            ..Default::default()
        }),
        Vec::<i64>::new()
    );
}

#[test]
fn reopening_keeps_data_and_migrations_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        store.create_agent("pc", "h", "t").unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.agents().unwrap().len(), 1);
    store.enroll_agent("pc", "k1", "t").unwrap();
    store.enroll_agent("pc", "k1", "t").unwrap();
    assert!(matches!(
        store.enroll_agent("pc", "k2", "t"),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.enroll_agent("nope", "k", "t"),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn telemetry_keeps_only_the_newest_snapshots_per_agent() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..5 {
        store.insert_telemetry(&snapshot("a", &format!("t{i}")), 3).unwrap();
    }
    store.insert_telemetry(&snapshot("b", "t"), 3).unwrap();
    assert_eq!(store.telemetry_count("a").unwrap(), 3);
    assert_eq!(store.telemetry_count("b").unwrap(), 1);
    let (collected_at, _, _) = store.latest_telemetry("a").unwrap().unwrap();
    assert_eq!(collected_at, "t4");
    assert_eq!(store.latest_telemetry("c").unwrap(), None);
}

#[test]
fn a_sent_call_is_completed_or_marked_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let sent = |id: &str| AuditRow {
        call_id: Some(id.into()),
        at: "2026-01-01T00:00:00Z".into(),
        user_id: Some(1),
        username: Some("u".into()),
        credential_kind: Some("pat".into()),
        credential_id: Some("1".into()),
        client_addr: Some("127.0.0.1".into()),
        target: None,
        agent_id: Some("pc".into()),
        tool: "shell_exec".into(),
        args_digest: "d".into(),
        outcome: OUTCOME_SENT,
        error_code: None,
        duration_ms: 0,
    };
    let done = AuditFinish {
        call_id: "c1".into(),
        outcome: "error",
        error_code: Some("timeout".into()),
        duration_ms: 65000,
        proof: None,
    };
    // Start and finish may arrive in the same batch; order is kept.
    store
        .write_audit(&[
            AuditWrite::Row(Box::new(sent("c1"))),
            AuditWrite::Finish(done),
            AuditWrite::Row(Box::new(sent("c2"))),
        ])
        .unwrap();
    assert_eq!(store.interrupt_unfinished_calls().unwrap(), 1);
    let rows = store
        .audit(&AuditFilter {
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    let by_call = |id: &str| rows.iter().find(|r| r.call_id.as_deref() == Some(id)).unwrap();
    assert_eq!(
        (
            by_call("c1").outcome.as_str(),
            by_call("c1").error_code.as_deref(),
            by_call("c1").duration_ms
        ),
        ("error", Some("timeout"), 65000)
    );
    assert_eq!(by_call("c2").outcome, OUTCOME_INTERRUPTED);
}

fn snapshot<'a>(agent_id: &'a str, collected_at: &'a str) -> NewSnapshot<'a> {
    NewSnapshot {
        agent_id,
        collected_at,
        received_at: "now",
        snapshot: "{}",
        health: None,
        changes: &[],
        metrics: None,
    }
}
