//! The store's calls that run on both backends, run on both: the embedded SQLite file
//! and a real PostgreSQL server started for the test (issue 15). Each check is written
//! once and given a store of each kind; both must answer the same.

use kenny_server::store::{
    ActivityRow, AlertRow, AuditFilter, AuditFinish, AuditRow, AuditWrite, ChannelRow, FilterConfigRow, FilterStateRow,
    LinkRefusal, MAX_UPDATE_DETAIL, NewCampaign, NewInstallLink, PcChange, ScreenshotMeta, SilenceRow, SourceFetch,
    Store, StoreError, StoredPolicy, UpdateRecord,
};
use kenny_testkit::postgres::start_or_skip;

pub(crate) fn on_both(test: &str, check: impl Fn(&Store)) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(dir.path()).unwrap();
    assert!(sqlite.path().is_some());
    check(&sqlite);
    let Some(pg) = start_or_skip(test) else { return };
    let url = pg.database("kenny").unwrap();
    let postgres = Store::open_postgres(&url).unwrap();
    assert!(postgres.path().is_none(), "this store is on PostgreSQL, not in a file");
    check(&postgres);
    // Opening again finds the schema current and changes nothing.
    check_reopen(&url);
}

fn check_reopen(url: &str) {
    let again = Store::open_postgres(url).unwrap();
    assert!(again.agent("pc-1").unwrap().is_some(), "the data survives a reopen");
}

#[test]
fn agents_enroll_and_are_seen_the_same_on_both_backends() {
    on_both("agents_on_both_backends", |store| {
        let v0 = store.agents_version().unwrap();
        store.create_agent("pc-1", "hash-1", "2026-12-01T00:00:00Z").unwrap();
        store.create_agent("pc-0", "hash-0", "2026-12-01T00:00:00Z").unwrap();
        assert!(matches!(
            store.create_agent("pc-1", "other", "t"),
            Err(StoreError::Conflict(m)) if m.contains("already exists")
        ));
        assert!(store.agents_version().unwrap() > v0, "adding agents moves the version");

        let creds = store.agent_credentials("pc-1").unwrap().unwrap();
        assert_eq!((creds.token_hash.as_str(), creds.enrolled), ("hash-1", false));
        store.enroll_agent("pc-1", "KEY-A", "2026-12-01T00:00:01Z").unwrap();
        store.enroll_agent("pc-1", "KEY-A", "2026-12-01T00:00:02Z").unwrap();
        assert!(matches!(
            store.enroll_agent("pc-1", "KEY-B", "t"),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            store.enroll_agent("pc-9", "KEY", "t"),
            Err(StoreError::NotFound(_))
        ));
        assert!(store.agent_credentials("pc-1").unwrap().unwrap().enrolled);

        let before = store.agents_version().unwrap();
        let meta = kenny_proto::frame::AgentMeta {
            hostname: "den".into(),
            os: "linux".into(),
            version: "1.2.3".into(),
            arch: Some("x86_64".into()),
            channel: None,
            dialect: None,
        };
        store
            .record_agent_seen("pc-1", Some(&meta), "2026-12-01T00:00:03Z")
            .unwrap();
        assert!(store.agents_version().unwrap() > before);
        let rec = store.agent("pc-1").unwrap().unwrap();
        assert_eq!(rec.public_key.as_deref(), Some("KEY-A"));
        assert_eq!(
            (
                rec.hostname.as_deref(),
                rec.os.as_deref(),
                rec.arch.as_deref(),
                rec.last_seen.as_deref()
            ),
            (Some("den"), Some("linux"), Some("x86_64"), Some("2026-12-01T00:00:03Z"))
        );
        assert_eq!(rec.channel, "stable");
        let ids: Vec<String> = store.agents().unwrap().iter().map(|a| a.agent_id.to_string()).collect();
        assert_eq!(ids, ["pc-0", "pc-1"]);
        assert_eq!(store.agent("nope").unwrap(), None);

        store.rekey_agent("pc-1", "hash-new").unwrap();
        let creds = store.agent_credentials("pc-1").unwrap().unwrap();
        assert_eq!((creds.token_hash.as_str(), creds.enrolled), ("hash-new", false));
        assert_eq!(store.agent_token_hash("pc-1").unwrap().as_deref(), Some("hash-new"));
        assert!(matches!(store.rekey_agent("pc-9", "h"), Err(StoreError::NotFound(_))));
    });
}

fn audit_row(call_id: Option<&str>, at: &str, agent: &str, outcome: &'static str) -> AuditWrite {
    AuditWrite::Row(Box::new(AuditRow {
        call_id: call_id.map(Into::into),
        at: at.into(),
        user_id: Some(1),
        username: Some("ada".into()),
        credential_kind: Some("pat".into()),
        credential_id: Some("7".into()),
        client_addr: Some("127.0.0.1".into()),
        target: None,
        agent_id: Some(agent.into()),
        tool: "shell_exec".into(),
        args_digest: "d".into(),
        outcome,
        error_code: None,
        duration_ms: 0,
    }))
}

#[test]
fn the_audit_trail_reads_filters_finishes_and_prunes_the_same_on_both_backends() {
    on_both("audit_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        // Pruning goes down to a checkpoint only: one signed after the first row.
        store
            .write_audit(&[audit_row(Some("c1"), "2026-01-01T00:00:00.000Z", "pc-1", "sent")])
            .unwrap();
        let key = ed25519_dalek::SigningKey::from_bytes(&[5; 32]);
        kenny_server::ledger::checkpoint(store, &key, "2026-01-01T00:00:01.000Z")
            .unwrap()
            .unwrap();
        store
            .write_audit(&[
                audit_row(Some("c2"), "2026-06-01T00:00:00.000Z", "pc-2", "sent"),
                audit_row(None, "2026-06-02T00:00:00.000Z", "pc-1", "forbidden"),
                AuditWrite::Finish(AuditFinish {
                    call_id: "c1".into(),
                    outcome: "ok",
                    error_code: None,
                    duration_ms: 12,
                    proof: None,
                }),
            ])
            .unwrap();
        let page = |filter: AuditFilter| store.audit(&AuditFilter { limit: 50, ..filter }).unwrap();
        let all = page(AuditFilter::default());
        assert_eq!(all.len(), 3);
        assert!(all[0].id > all[1].id, "newest first");
        let c1 = all.iter().find(|e| e.call_id.as_deref() == Some("c1")).unwrap();
        assert_eq!(
            (c1.outcome.as_str(), c1.duration_ms, c1.user.as_deref()),
            ("ok", 12, Some("ada"))
        );
        assert_eq!(
            page(AuditFilter {
                agent_id: Some("pc-1".into()),
                ..Default::default()
            })
            .len(),
            2
        );
        assert_eq!(
            page(AuditFilter {
                outcome: Some("forbidden".into()),
                ..Default::default()
            })
            .len(),
            1
        );
        assert_eq!(
            page(AuditFilter {
                before_id: Some(all[0].id),
                ..Default::default()
            })
            .len(),
            2
        );
        // A call still `sent` when the server stopped is marked interrupted at start.
        assert_eq!(store.interrupt_unfinished_calls().unwrap(), 1);
        assert_eq!(
            page(AuditFilter {
                outcome: Some("interrupted".into()),
                ..Default::default()
            })
            .len(),
            1
        );
        assert_eq!(store.prune_audit("2026-03-01T00:00:00.000Z", 10).unwrap(), 1);
        assert_eq!(page(AuditFilter::default()).len(), 2);
        let report = kenny_server::ledger::verify(store, &key.verifying_key()).unwrap();
        assert!(report.is_intact(), "{report:?}");
        assert_eq!(
            (report.rows_verified, report.base.map(|b| b.last_audit_id)),
            (2, Some(c1.id))
        );
        // A bad write loses nothing of the batch before it: the whole batch fails.
        let before = page(AuditFilter::default()).len();
        let dup = audit_row(Some("c2"), "2026-06-03T00:00:00.000Z", "pc-1", "sent");
        assert!(
            store
                .write_audit(&[audit_row(Some("c9"), "2026-06-03T00:00:00.000Z", "pc-1", "sent"), dup])
                .is_err()
        );
        assert_eq!(
            page(AuditFilter::default()).len(),
            before,
            "a failed batch is rolled back whole"
        );
    });
}

#[test]
fn the_operator_policy_is_one_row_on_both_backends() {
    on_both("policy_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        assert_eq!(store.operator_policy().unwrap(), None);
        let first = StoredPolicy {
            rules_json: "[1]".into(),
            updated_by: "ada".into(),
            updated_at: "t1".into(),
        };
        store.save_operator_policy(&first).unwrap();
        let second = StoredPolicy {
            rules_json: "[2]".into(),
            ..first
        };
        store.save_operator_policy(&second).unwrap();
        assert_eq!(store.operator_policy().unwrap(), Some(second));
    });
}

#[test]
fn a_removed_pc_goes_at_once_and_its_history_after_the_retention_on_both_backends() {
    on_both("removal_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        store.create_agent("pc-2", "h", "t").unwrap();
        store.create_agent("pc-3", "h", "t").unwrap();
        store
            .write_audit(&[audit_row(None, "2026-01-01T00:00:00.000Z", "pc-2", "ok")])
            .unwrap();
        store.remove_agent("pc-2", "ada", "2026-02-01T00:00:00.000Z").unwrap();
        assert!(store.agent_credentials("pc-2").unwrap().is_none(), "no token, no key");
        assert!(store.agent("pc-2").unwrap().is_none());
        assert!(matches!(
            store.remove_agent("pc-2", "ada", "t"),
            Err(StoreError::NotFound(m)) if m.contains("no agent with id")
        ));
        assert!(
            store
                .purge_removed_agents("2026-02-01T00:00:00.000Z")
                .unwrap()
                .is_empty(),
            "not past the retention yet"
        );
        assert_eq!(
            store.purge_removed_agents("2026-03-03T00:00:00.000Z").unwrap(),
            ["pc-2"]
        );
        assert!(
            store
                .purge_removed_agents("2026-12-01T00:00:00.000Z")
                .unwrap()
                .is_empty(),
            "purged once"
        );
        let by_pc2 = AuditFilter {
            agent_id: Some("pc-2".into()),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(
            store.audit(&by_pc2).unwrap().len(),
            1,
            "the audit log keeps its own retention"
        );
        // Removed twice before a purge: the later removal counts.
        store.remove_agent("pc-3", "ada", "2026-02-01T00:00:00.000Z").unwrap();
        store.create_agent("pc-3", "h", "t").unwrap();
        store.remove_agent("pc-3", "bob", "2026-05-01T00:00:00.000Z").unwrap();
        assert!(
            store
                .purge_removed_agents("2026-03-03T00:00:00.000Z")
                .unwrap()
                .is_empty()
        );
        // Added again before the purge: nothing of it goes.
        store.create_agent("pc-3", "h", "t").unwrap();
        assert!(
            store
                .purge_removed_agents("2026-12-01T00:00:00.000Z")
                .unwrap()
                .is_empty()
        );
        assert!(store.agent("pc-3").unwrap().is_some());
    });
}

fn update(order_id: &str, agent_id: &str, outcome: &str, requested_by: &str, at: &str) -> UpdateRecord {
    UpdateRecord {
        order_id: order_id.into(),
        agent_id: agent_id.into(),
        requested_by: requested_by.into(),
        from_version: "0.1.0".into(),
        to_version: "0.2.0".into(),
        outcome: outcome.into(),
        detail: String::new(),
        at: at.into(),
    }
}

#[test]
fn update_outcomes_are_replaced_only_by_a_late_report_on_both_backends() {
    on_both("updates_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        store
            .record_update(&update("o1", "pc-1", "no_report", "root", "2026-01-01T00:00:00.000Z"))
            .unwrap();
        store
            .record_update(&update("o1", "pc-1", "succeeded", "", "2026-01-01T00:01:00.000Z"))
            .unwrap();
        // A replay, a contradiction or a late no_report changes nothing.
        store
            .record_update(&update("o1", "pc-1", "rolled_back", "", "2026-01-01T00:02:00.000Z"))
            .unwrap();
        store
            .record_update(&update("o1", "pc-1", "no_report", "x", "2026-01-01T00:03:00.000Z"))
            .unwrap();
        // Another agent cannot claim an order.
        store
            .record_update(&update("o2", "pc-1", "no_report", "root", "2026-01-02T00:00:00.000Z"))
            .unwrap();
        store
            .record_update(&update("o2", "pc-2", "succeeded", "", "2026-01-02T00:01:00.000Z"))
            .unwrap();
        let mut long = update("o3", "pc-1", "rolled_back", "", "2026-01-03T00:00:00.000Z");
        long.detail = "é".repeat(MAX_UPDATE_DETAIL + 20);
        store.record_update(&long).unwrap();

        let rows = store.agent_updates("pc-1", 10).unwrap();
        let seen: Vec<(&str, &str, &str, &str)> = rows
            .iter()
            .map(|r| {
                (
                    r.order_id.as_str(),
                    r.outcome.as_str(),
                    r.requested_by.as_str(),
                    r.at.as_str(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("o3", "rolled_back", "", "2026-01-03T00:00:00.000Z"),
                ("o2", "no_report", "root", "2026-01-02T00:00:00.000Z"),
                ("o1", "succeeded", "root", "2026-01-01T00:01:00.000Z"),
            ]
        );
        assert_eq!(rows[0].detail.chars().count(), MAX_UPDATE_DETAIL);
        assert_eq!(store.agent_updates("pc-1", 1).unwrap().len(), 1);
        assert!(store.agent_updates("pc-2", 10).unwrap().is_empty());

        // A purged PC's updates go with it.
        store.create_agent("pc-3", "h", "t").unwrap();
        store
            .record_update(&update("o4", "pc-3", "succeeded", "root", "2026-01-04T00:00:00.000Z"))
            .unwrap();
        store.remove_agent("pc-3", "ada", "2026-02-01T00:00:00.000Z").unwrap();
        assert_eq!(
            store.purge_removed_agents("2026-03-01T00:00:00.000Z").unwrap(),
            ["pc-3"]
        );
        assert!(store.agent_updates("pc-3", 10).unwrap().is_empty());
        assert_eq!(
            store.agent_updates("pc-1", 10).unwrap().len(),
            3,
            "other PCs keep theirs"
        );
    });
}

#[test]
fn one_screenshot_per_pc_is_kept_as_bytes_on_both_backends() {
    on_both("screenshots_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        assert_eq!(store.screenshot("pc-1").unwrap(), None);
        let mut meta = ScreenshotMeta {
            agent_id: "pc-1".into(),
            width: 2,
            height: 1,
            bytes: 3,
            taken_at: "2026-01-01T00:00:00Z".into(),
            taken_by: "root".into(),
        };
        store.put_screenshot(&meta, b"one").unwrap();
        // Not text: the picture is kept byte for byte.
        let png = [0x89u8, 0x50, 0x00, 0xff, 0xfe];
        meta.bytes = 5;
        meta.taken_by = "kim".into();
        store.put_screenshot(&meta, &png).unwrap();
        let (got, bytes) = store.screenshot("pc-1").unwrap().unwrap();
        assert_eq!((got, bytes.as_slice()), (meta.clone(), &png[..]));
        assert_eq!(store.screenshot_meta("pc-1").unwrap(), Some(meta.clone()));
        assert_eq!(store.screenshot_meta("pc-2").unwrap(), None);

        store.create_agent("pc-2", "h", "t").unwrap();
        store
            .put_screenshot(
                &ScreenshotMeta {
                    agent_id: "pc-2".into(),
                    ..meta
                },
                &png,
            )
            .unwrap();
        store.remove_agent("pc-2", "ada", "2026-02-01T00:00:00.000Z").unwrap();
        store.purge_removed_agents("2026-03-01T00:00:00.000Z").unwrap();
        assert_eq!(store.screenshot_meta("pc-2").unwrap(), None, "purged with its PC");
        assert!(store.screenshot_meta("pc-1").unwrap().is_some());
    });
}

fn link<'a>(token_hash: &'a str, agent_id: &'a str) -> NewInstallLink<'a> {
    NewInstallLink {
        token_hash,
        agent_id,
        os: "linux",
        created_by: "ada",
        created_at: "2026-01-01T00:00:00.000Z",
        expires_at: "2026-01-02T00:00:00.000Z",
    }
}

#[test]
fn an_install_link_enrolls_once_on_both_backends() {
    on_both("install_links_on_both_backends", |store| {
        store.create_agent("pc-1", "old", "t").unwrap();
        store.enroll_agent("pc-1", "KEY", "t").unwrap();
        let a = store.create_install_link(&link("tok-a", "pc-1")).unwrap();
        let b = store.create_install_link(&link("tok-b", "pc-new")).unwrap();
        let c = store.create_install_link(&link("tok-c", "pc-new")).unwrap();
        assert!(a < b && b < c);
        assert!(
            store.create_install_link(&link("tok-a", "pc-x")).is_err(),
            "a token opens one link"
        );
        let ids: Vec<i64> = store.install_links(10).unwrap().iter().map(|l| l.id).collect();
        assert_eq!(ids, [c, b, a]);
        assert_eq!(store.install_links(1).unwrap().len(), 1);
        assert_eq!(store.install_link_by_token("tok-b").unwrap().unwrap().id, b);
        assert_eq!(store.install_link(a).unwrap().unwrap().agent_id, "pc-1");
        assert_eq!(store.install_link(999).unwrap(), None);

        let now = "2026-01-01T01:00:00.000Z";
        let used = store
            .redeem_install_link("tok-a", "new-hash", "10.0.0.1", now)
            .unwrap()
            .unwrap();
        assert_eq!(
            (used.link_id, used.agent_id.as_str(), used.replaced_existing),
            (a, "pc-1", true)
        );
        let creds = store.agent_credentials("pc-1").unwrap().unwrap();
        assert_eq!((creds.token_hash.as_str(), creds.enrolled), ("new-hash", false));
        let row = store.install_link(a).unwrap().unwrap();
        assert_eq!(
            (row.used_at.as_deref(), row.used_from.as_deref()),
            (Some(now), Some("10.0.0.1"))
        );
        assert!(matches!(
            store.redeem_install_link("tok-a", "other", "10.0.0.2", now).unwrap(),
            Err(LinkRefusal::Used { .. })
        ));
        assert_eq!(store.agent_token_hash("pc-1").unwrap().as_deref(), Some("new-hash"));
        assert!(matches!(
            store.revoke_install_link(a, "ada", now),
            Err(StoreError::Conflict(m)) if m.contains("already used")
        ));
        assert!(matches!(
            store.revoke_install_link(999, "ada", now),
            Err(StoreError::NotFound(_))
        ));

        let revoked = store.revoke_install_link(b, "ada", now).unwrap();
        assert_eq!(
            (revoked.revoked_at.as_deref(), revoked.revoked_by.as_deref()),
            (Some(now), Some("ada"))
        );
        let again = store.revoke_install_link(b, "bob", "2026-01-01T02:00:00.000Z").unwrap();
        assert_eq!(again.revoked_by.as_deref(), Some("ada"), "revoked once");
        assert!(matches!(
            store.redeem_install_link("tok-b", "h", "ip", now).unwrap(),
            Err(LinkRefusal::Revoked { .. })
        ));
        assert!(matches!(
            store
                .redeem_install_link("tok-c", "h", "ip", "2026-01-03T00:00:00.000Z")
                .unwrap(),
            Err(LinkRefusal::Expired { .. })
        ));
        assert_eq!(
            store.redeem_install_link("tok-zz", "h", "ip", now).unwrap(),
            Err(LinkRefusal::Unknown)
        );
        assert!(
            store.agent("pc-new").unwrap().is_none(),
            "a refused link changes nothing"
        );
        assert_eq!(store.install_link(c).unwrap().unwrap().used_at, None);

        let fresh = store.redeem_install_link("tok-c", "h-new", "ip", now).unwrap().unwrap();
        assert!(!fresh.replaced_existing);
        assert_eq!(store.agent_token_hash("pc-new").unwrap().as_deref(), Some("h-new"));
    });
}

fn campaign(agents: &[&str], max_parallel: u32) -> NewCampaign {
    NewCampaign {
        version: "0.2.0".into(),
        target: "all".into(),
        max_parallel,
        created_by: "root".into(),
        now: "2026-01-01T00:00:00.000Z".into(),
        agents: agents.iter().map(|a| (*a).to_owned()).collect(),
    }
}

fn pc_change<'a>(from: &'a str, to: &'a str, rollback: bool) -> PcChange<'a> {
    PcChange {
        from,
        to,
        rollback,
        detail: "why",
    }
}

#[test]
fn a_campaign_rolls_out_pauses_and_finishes_the_same_on_both_backends() {
    on_both("campaigns_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        store.create_agent("pc-2", "h", "t").unwrap();
        let t = "2026-01-01T00:00:01.000Z";
        // A PC listed twice is one PC of the campaign.
        let id = store
            .create_campaign(&campaign(&["pc-1", "pc-2", "pc-gone", "pc-1"], 2))
            .unwrap();
        let pcs = store.campaign_pcs(id).unwrap();
        let seen: Vec<(&str, &str, bool)> = pcs
            .iter()
            .map(|p| (p.agent_id.as_str(), p.status.as_str(), p.known))
            .collect();
        assert_eq!(
            seen,
            [
                ("pc-1", "pending", true),
                ("pc-2", "pending", true),
                ("pc-gone", "pending", false)
            ]
        );
        let row = store.campaign(id).unwrap().unwrap();
        assert_eq!((row.state.as_str(), row.max_parallel), ("running", 2));
        assert_eq!(store.campaign(999).unwrap(), None);

        assert!(store.start_campaign_pc(id, "pc-1", t).unwrap());
        assert!(!store.start_campaign_pc(id, "pc-1", t).unwrap(), "already updating");
        assert!(
            store
                .settle_campaign_pc(id, "pc-1", &pc_change("updating", "rolled_back", true), t)
                .unwrap()
        );
        assert!(
            !store
                .settle_campaign_pc(id, "pc-1", &pc_change("updating", "done", false), t)
                .unwrap(),
            "moved on"
        );
        assert!(
            store.start_campaign_pc(id, "pc-1", t).unwrap(),
            "a rolled back PC is tried again"
        );

        let paused = store.set_campaign_state(id, &["running"], "paused", t).unwrap();
        assert_eq!(paused.state, "paused");
        assert!(!store.start_campaign_pc(id, "pc-2", t).unwrap(), "paused");
        assert!(matches!(
            store.set_campaign_state(id, &["running"], "paused", t),
            Err(StoreError::Conflict(m)) if m.contains("is paused")
        ));
        assert!(matches!(
            store.set_campaign_state(999, &["running"], "paused", t),
            Err(StoreError::NotFound(_))
        ));
        assert_eq!(
            store
                .active_campaigns()
                .unwrap()
                .iter()
                .map(|c| c.id)
                .collect::<Vec<_>>(),
            [id],
            "a paused campaign with a PC updating is still followed"
        );
        store
            .set_campaign_state(id, &["running", "paused"], "cancelled", t)
            .unwrap();
        let status: Vec<String> = store.campaign_pcs(id).unwrap().into_iter().map(|p| p.status).collect();
        assert_eq!(status, ["updating", "skipped", "skipped"]);
        assert!(
            store
                .settle_campaign_pc(id, "pc-1", &pc_change("updating", "done", false), t)
                .unwrap()
        );
        let pc1 = &store.campaign_pcs(id).unwrap()[0];
        assert_eq!((pc1.attempts, pc1.rollbacks, pc1.detail.as_str()), (2, 1, "why"));
        assert!(
            !store.finish_campaign(id, t).unwrap(),
            "a cancelled campaign stays cancelled"
        );
        assert!(store.active_campaigns().unwrap().is_empty());

        let second = store.create_campaign(&campaign(&["pc-2"], 1)).unwrap();
        assert!(!store.finish_campaign(second, t).unwrap(), "pc-2 is pending");
        assert!(
            store
                .settle_campaign_pc(second, "pc-2", &pc_change("pending", "skipped", false), t)
                .unwrap()
        );
        assert!(store.finish_campaign(second, t).unwrap());
        assert_eq!(
            store.campaigns().unwrap().iter().map(|c| c.id).collect::<Vec<_>>(),
            [second, id]
        );

        // A campaign refused by the database leaves neither it nor any of its PCs.
        assert!(store.create_campaign(&campaign(&["pc-1"], 0)).is_err());
        assert_eq!(store.campaigns().unwrap().len(), 2);

        store.set_agent_channel("pc-2", "beta").unwrap();
        assert_eq!(store.agent("pc-2").unwrap().unwrap().channel, "beta");
        assert!(matches!(
            store.set_agent_channel("pc-9", "beta"),
            Err(StoreError::NotFound(_))
        ));
        assert!(
            store.set_agent_channel("pc-2", "nightly").is_err(),
            "only stable or beta"
        );
    });
}

fn alert(agent_id: &str, key: &str, opened_at: &str) -> AlertRow {
    AlertRow {
        id: 0,
        agent_id: agent_id.into(),
        key: key.into(),
        status: "warn".into(),
        reason: "disk 91%".into(),
        attention: None,
        opened_at: opened_at.into(),
        updated_at: opened_at.into(),
        closed_at: None,
        silenced: false,
        notified: false,
    }
}

fn channel(name: &str, enabled: bool) -> ChannelRow {
    ChannelRow {
        id: 0,
        name: name.into(),
        kind: "ntfy".into(),
        config: "{}".into(),
        digest: false,
        enabled,
        created_at: "2026-01-01T00:00:00.000Z".into(),
        digest_sent_at: None,
    }
}

#[test]
fn alerts_silences_channels_and_deliveries_work_the_same_on_both_backends() {
    on_both("alerts_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        let a1 = store
            .insert_alert(&alert("pc-1", "disk", "2026-01-01T00:00:00.000Z"))
            .unwrap();
        let a2 = store
            .insert_alert(&alert("pc-2", "offline", "2026-01-02T00:00:00.000Z"))
            .unwrap();
        assert!(a2 > a1);
        assert_eq!(store.open_alerts().unwrap().len(), 2);
        let closed = AlertRow {
            id: a1,
            attention: Some("look".into()),
            updated_at: "2026-01-03T00:00:00.000Z".into(),
            closed_at: Some("2026-01-03T00:00:00.000Z".into()),
            notified: true,
            ..alert("pc-1", "disk", "2026-01-01T00:00:00.000Z")
        };
        store.update_alert(&closed).unwrap();
        assert_eq!(
            store.open_alerts().unwrap().iter().map(|a| a.id).collect::<Vec<_>>(),
            [a2]
        );
        assert_eq!(
            store.last_notified_alert("pc-1", "disk").unwrap().as_deref(),
            Some("2026-01-03T00:00:00.000Z")
        );
        assert_eq!(store.last_notified_alert("pc-2", "offline").unwrap(), None);

        let since = "2026-01-02T00:00:00.000Z";
        let ids = |agents: Option<&str>| -> Vec<i64> {
            store
                .alerts_since(since, 10, agents)
                .unwrap()
                .iter()
                .map(|a| a.id)
                .collect()
        };
        assert_eq!(ids(None), [a2, a1], "closed within the window counts");
        assert_eq!(ids(Some(r#"["pc-2"]"#)), [a2]);
        assert_eq!(ids(Some(r#"["pc-1","pc-2","pc-9"]"#)), [a2, a1]);
        assert!(ids(Some("[]")).is_empty(), "no PCs, no alerts");
        assert_eq!(store.alerts_since(since, 1, None).unwrap().len(), 1);
        assert!(
            store
                .alerts_since("2026-01-04T00:00:00.000Z", 10, None)
                .unwrap()
                .is_empty()
        );
        assert!(store.alerts_since(since, 10, Some("pc-1")).is_err(), "not a JSON array");
        assert_eq!(store.alerts_since(since, 10, None).unwrap()[1], closed);

        let silence = SilenceRow {
            id: 0,
            agent_id: "pc-1".into(),
            section: "disk".into(),
            until: "2026-01-10T00:00:00.000Z".into(),
            reason: "new disk coming".into(),
            created_by: "ada".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
        };
        let sid = store.insert_silence(&silence).unwrap();
        let now = "2026-01-05T00:00:00.000Z";
        assert_eq!(
            store.active_silences(Some("pc-1"), now).unwrap(),
            [SilenceRow { id: sid, ..silence }]
        );
        assert_eq!(store.active_silences(None, now).unwrap().len(), 1);
        assert!(store.active_silences(Some("pc-2"), now).unwrap().is_empty());
        assert!(
            store
                .active_silences(None, "2026-01-11T00:00:00.000Z")
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.silence(sid).unwrap().unwrap().section, "disk");
        assert_eq!(store.silence(999).unwrap(), None);
        store.end_silence(sid, now).unwrap();
        assert!(store.active_silences(None, now).unwrap().is_empty());
        assert!(matches!(store.end_silence(sid, now), Err(StoreError::NotFound(_))));

        let on = store.insert_channel(&channel("phone", true)).unwrap();
        let off = store.insert_channel(&channel("old", false)).unwrap();
        assert_eq!(store.channels().unwrap().len(), 2);
        store
            .update_channel(&ChannelRow {
                id: on,
                digest: true,
                ..channel("phone2", true)
            })
            .unwrap();
        let got = store.channel(on).unwrap().unwrap();
        assert_eq!((got.name.as_str(), got.digest, got.enabled), ("phone2", true, true));
        assert!(matches!(
            store.update_channel(&ChannelRow {
                id: 999,
                ..channel("x", true)
            }),
            Err(StoreError::NotFound(_))
        ));
        store.set_digest_sent(on, "2026-01-05T00:00:00.000Z").unwrap();
        assert_eq!(
            store.channel(on).unwrap().unwrap().digest_sent_at.as_deref(),
            Some("2026-01-05T00:00:00.000Z")
        );

        assert_eq!(store.next_delivery_at().unwrap(), None);
        let t0 = "2026-01-01T00:00:00.000Z";
        assert_eq!(
            store.queue_deliveries(Some(a1), "alert", "{\"m\":1}", t0).unwrap(),
            1,
            "enabled channels only"
        );
        assert_eq!(store.queue_deliveries(None, "digest", "{}", t0).unwrap(), 1);
        let test = store
            .queue_delivery(off, "test", "{}", "2026-01-01T00:00:05.000Z")
            .unwrap();
        assert_eq!(store.next_delivery_at().unwrap().as_deref(), Some(t0));
        let due = store.due_deliveries("2026-01-01T00:00:01.000Z", 10).unwrap();
        assert_eq!(
            due.iter()
                .map(|d| (d.channel_id, d.alert_id, d.event.as_str()))
                .collect::<Vec<_>>(),
            [(on, Some(a1), "alert"), (on, None, "digest")]
        );
        assert_eq!(store.due_deliveries("2026-01-01T00:00:01.000Z", 1).unwrap().len(), 1);
        store
            .record_attempt(due[0].id, "sent", None, t0, "2026-01-01T00:00:02.000Z")
            .unwrap();
        store
            .record_attempt(due[1].id, "failed", Some("gone"), t0, "2026-01-01T00:00:02.000Z")
            .unwrap();
        store
            .record_attempt(
                test,
                "pending",
                Some("timeout"),
                "2026-01-01T00:01:00.000Z",
                "2026-01-01T00:00:06.000Z",
            )
            .unwrap();
        let recent = store.recent_deliveries(10).unwrap();
        let seen: Vec<_> = recent
            .iter()
            .map(|(d, name)| {
                (
                    d.id,
                    d.status.as_str(),
                    d.attempts,
                    d.last_error.as_deref(),
                    d.sent_at.as_deref(),
                    name.as_str(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (test, "pending", 1, Some("timeout"), None, "old"),
                (due[1].id, "failed", 1, Some("gone"), None, "phone2"),
                (due[0].id, "sent", 1, None, Some("2026-01-01T00:00:02.000Z"), "phone2"),
            ]
        );
        assert_eq!(
            store.next_delivery_at().unwrap().as_deref(),
            Some("2026-01-01T00:01:00.000Z")
        );

        store.delete_channel(off).unwrap();
        assert!(matches!(store.delete_channel(off), Err(StoreError::NotFound(_))));
        assert_eq!(
            store.recent_deliveries(10).unwrap().len(),
            2,
            "a channel's deliveries go with it"
        );
        assert_eq!(store.next_delivery_at().unwrap(), None);

        // The closed alert and the two finished deliveries; the open alert stays.
        assert_eq!(store.prune_alerts("2026-02-01T00:00:00.000Z").unwrap(), 3);
        assert_eq!(store.open_alerts().unwrap().len(), 1);
        assert!(store.recent_deliveries(10).unwrap().is_empty());

        assert_eq!(store.setting("k").unwrap(), None);
        store.save_setting("k", "v1", "ada", "t1").unwrap();
        store.save_setting("k", "v2", "bob", "t2").unwrap();
        assert_eq!(
            store.setting("k").unwrap(),
            Some(("v2".into(), "bob".into(), "t2".into()))
        );
    });
}

fn visit(domain: &str, last_seen: &str, flag: Option<&str>) -> ActivityRow {
    ActivityRow {
        domain: domain.into(),
        first_seen: "2026-12-01T08:00:00.000Z".into(),
        last_seen: last_seen.into(),
        hits: 2,
        flag: flag.map(str::to_owned),
    }
}

#[test]
fn the_web_filter_tables_work_the_same_on_both_backends() {
    on_both("webfilter_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        let config = |text: &str| FilterConfigRow {
            agent_id: "pc-1".into(),
            config: text.into(),
            updated_at: "t".into(),
            updated_by: "ada".into(),
        };
        store.put_filter_config(&config("{\"a\":1}")).unwrap();
        store.put_filter_config(&config("{\"a\":2}")).unwrap();
        assert_eq!(store.filter_configs().unwrap(), [config("{\"a\":2}")]);

        let mut state = FilterStateRow {
            agent_id: "pc-1".into(),
            applied_hash: Some("hash".into()),
            applied_count: 3,
            applied_at: Some("t1".into()),
            applied_by: Some("kenny".into()),
            observed_active: Some(true),
            applied_doh: true,
            ..Default::default()
        };
        store.put_filter_state(&state).unwrap();
        assert_eq!(store.filter_states().unwrap(), [state.clone()]);
        state.observed_active = Some(false);
        state.applied_doh = false;
        state.problem = Some("over the cap".into());
        store.put_filter_state(&state).unwrap();
        assert_eq!(store.filter_states().unwrap(), [state.clone()]);
        state.observed_active = None;
        store.put_filter_state(&state).unwrap();
        assert_eq!(store.filter_states().unwrap(), [state]);

        let url = "https://lists.example/social.txt";
        let source = store.add_source("social", url, 60, "ada", "t0").unwrap();
        assert_eq!(
            (
                source.url.as_str(),
                source.refresh_minutes,
                source.domain_count,
                source.fetched_at.as_deref()
            ),
            (url, 60, 0, None)
        );
        assert!(matches!(
            store.add_source("games", url, 30, "bob", "t0"),
            Err(StoreError::Conflict(m)) if m.contains("already a list source")
        ));
        assert!(store.source_lists().unwrap().is_empty(), "no list fetched yet");
        let fresh = SourceFetch::Fresh {
            domains: vec!["a.example".into(), "b.example".into()],
            etag: Some("e1".into()),
            last_modified: None,
        };
        store.record_fetch(source.id, "t1", &fresh).unwrap();
        store
            .record_fetch(source.id, "t2", &SourceFetch::Failed("HTTP 503".into()))
            .unwrap();
        let got = store.source(source.id).unwrap().unwrap();
        assert_eq!(
            (
                got.domain_count,
                got.etag.as_deref(),
                got.fetched_at.as_deref(),
                got.checked_at.as_deref(),
                got.error.as_deref()
            ),
            (2, Some("e1"), Some("t1"), Some("t2"), Some("HTTP 503"))
        );
        store.record_fetch(source.id, "t3", &SourceFetch::Unchanged).unwrap();
        assert_eq!(store.source(source.id).unwrap().unwrap().error, None);
        assert_eq!(
            store.source_lists().unwrap(),
            [(
                "social".to_owned(),
                url.to_owned(),
                vec!["a.example".to_owned(), "b.example".to_owned()]
            )]
        );
        assert_eq!(store.list_sources().unwrap().len(), 1);
        assert!(store.remove_source(source.id).unwrap());
        assert!(!store.remove_source(source.id).unwrap());
        assert_eq!(store.source(source.id).unwrap(), None);

        let at = "2026-12-01T12:00:00.000Z";
        let first = [
            visit("casino.example", "2026-12-01T09:00:00.000Z", Some("category gambling")),
            visit("plain.example", "2026-12-01T09:00:00.000Z", None),
        ];
        let newly = store.record_activity("pc-1", at, &first).unwrap();
        assert_eq!(
            newly.iter().map(|r| r.domain.as_str()).collect::<Vec<_>>(),
            ["casino.example"]
        );
        let mut again = visit("casino.example", "2026-12-01T11:00:00.000Z", Some("category gambling"));
        again.first_seen = "2026-12-01T10:00:00.000Z".into();
        again.hits = 7;
        assert!(
            store.record_activity("pc-1", at, &[again]).unwrap().is_empty(),
            "flagged once"
        );
        // An older report does not move the last sight back.
        let older = visit("casino.example", "2026-12-01T07:00:00.000Z", Some("category gambling"));
        store.record_activity("pc-1", at, &[older]).unwrap();
        let since = "2026-12-01T00:00:00.000Z";
        let flagged = store.activity("pc-1", since, true, 10).unwrap();
        assert_eq!(flagged.len(), 1);
        assert_eq!(
            (
                flagged[0].first_seen.as_str(),
                flagged[0].last_seen.as_str(),
                flagged[0].hits
            ),
            ("2026-12-01T08:00:00.000Z", "2026-12-01T11:00:00.000Z", 2)
        );
        let all = store.activity("pc-1", since, false, 10).unwrap();
        assert_eq!(
            all.iter().map(|r| r.domain.as_str()).collect::<Vec<_>>(),
            ["casino.example", "plain.example"]
        );
        assert_eq!(store.activity("pc-1", since, false, 1).unwrap().len(), 1);
        assert!(store.activity("pc-2", since, false, 10).unwrap().is_empty());
        assert_eq!(store.prune_activity("2026-12-01T10:00:00.000Z").unwrap(), 1);
        assert_eq!(store.activity("pc-1", since, false, 10).unwrap().len(), 1);

        // A removed PC's filter and activity go at the purge.
        store.remove_agent("pc-1", "ada", "2026-12-02T00:00:00.000Z").unwrap();
        store.purge_removed_agents("2026-12-03T00:00:00.000Z").unwrap();
        assert!(store.activity("pc-1", since, false, 10).unwrap().is_empty());
        assert!(store.filter_configs().unwrap().is_empty());
        assert!(store.filter_states().unwrap().is_empty());
        store.create_agent("pc-1", "h", "t").unwrap();
    });
}

#[test]
fn one_process_leads_on_postgresql_and_the_lead_passes_on_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(dir.path()).unwrap();
    assert!(sqlite.try_lead(7).unwrap().is_some(), "a server on SQLite always leads");
    let Some(pg) = start_or_skip("lead_on_postgres") else {
        return;
    };
    let url = pg.database("kenny").unwrap();
    let (a, b) = (Store::open_postgres(&url).unwrap(), Store::open_postgres(&url).unwrap());
    let lead = a.try_lead(7).unwrap().expect("the first to ask leads");
    assert!(lead.still_held());
    assert!(b.try_lead(7).unwrap().is_none(), "a second replica must not lead too");
    assert!(b.try_lead(8).unwrap().is_some(), "another job's lead is separate");
    drop(lead);
    let mut taken = None;
    for _ in 0..50 {
        taken = b.try_lead(7).unwrap();
        if taken.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(taken.is_some(), "the lead passes on once its holder's connection ends");
}

#[test]
fn replicas_on_postgresql_share_one_server_key_and_a_moved_servers_key_is_kept() {
    use kenny_server::server_key::server_key;
    let Some(pg) = start_or_skip("server_key_on_postgres") else {
        return;
    };
    let url = pg.database("kenny").unwrap();
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A server moved from SQLite brings the key file its agents pinned.
    let pinned = kenny_server::secrets::load_or_create_server_key(first.path()).unwrap();
    let a = server_key(&Store::open_postgres(&url).unwrap(), first.path()).unwrap();
    assert_eq!(a.verifying_key(), pinned.verifying_key(), "the file's key is adopted");
    let b = server_key(&Store::open_postgres(&url).unwrap(), second.path()).unwrap();
    assert_eq!(
        b.verifying_key(),
        a.verifying_key(),
        "every replica proves the same identity"
    );
    assert!(
        !second.path().join(kenny_server::secrets::SERVER_KEY_FILE).exists(),
        "a replica on PostgreSQL writes no key file of its own"
    );
}

#[test]
fn calls_a_stopped_replica_left_unfinished_are_settled_once_old_enough_on_both_backends() {
    on_both("abandoned_calls_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        store
            .write_audit(&[
                audit_row(Some("old"), "2026-01-01T00:00:00.000Z", "pc-1", "sent"),
                audit_row(Some("young"), "2026-01-01T02:00:00.000Z", "pc-1", "sent"),
            ])
            .unwrap();
        assert_eq!(
            store.interrupt_calls_sent_before("2026-01-01T01:00:00.000Z").unwrap(),
            1
        );
        let outcome = |id: &str| {
            let all = store
                .audit(&AuditFilter {
                    limit: 50,
                    ..Default::default()
                })
                .unwrap();
            all.into_iter()
                .find(|e| e.call_id.as_deref() == Some(id))
                .unwrap()
                .outcome
        };
        assert_eq!(outcome("old"), "interrupted");
        assert_eq!(
            outcome("young"),
            "sent",
            "a call that may still be running is left alone"
        );
        assert_eq!(
            store.interrupt_calls_sent_before("2026-01-01T01:00:00.000Z").unwrap(),
            0,
            "settled once"
        );
        // The chat's statement is valid on both (no chat call is running here).
        let ended = store.end_chat_calls_running_before("2026-01-01T01:00:00.000Z", "2026-01-01T03:00:00.000Z");
        assert_eq!(ended.unwrap(), 0);
    });
}

fn held(id: &str, user_id: i64, token_id: i64) -> kenny_server::store::HeldCall {
    kenny_server::store::HeldCall {
        id: id.into(),
        user_id,
        username: "kim".into(),
        credential_kind: "pat".into(),
        credential_id: token_id.to_string(),
        tool: "shell_exec".into(),
        agent_id: kenny_proto::AgentId::parse("pc-1").unwrap(),
        agent_key: None,
        args: serde_json::json!({"command": "true", "password": "hunter2"}),
        asked_by: "dashboard".into(),
        status: "held".into(),
        created_at: "2026-12-01T00:00:00Z".into(),
        expires_at: "2026-12-02T00:00:00Z".into(),
        decided_by: None,
        decided_at: None,
        result: None,
        is_error: false,
    }
}

#[test]
fn a_held_call_is_claimed_once_and_expires_the_same_on_both_backends() {
    use kenny_server::principal::{CredentialKind, Role};
    use kenny_server::store::{RuleChange, RuleSubject};
    on_both("held_calls_on_both_backends", |store| {
        store.create_agent("pc-1", "hash-1", "2026-12-01T00:00:00Z").unwrap();
        let kim = store
            .create_user("kim", "h", Role::Operator, &[], "2026-12-01T00:00:00Z")
            .unwrap();
        let pat = store
            .create_token(
                kim,
                CredentialKind::Pat,
                Some("claude"),
                "tok-hash",
                "2026-12-01T00:00:00Z",
            )
            .unwrap();
        let other = store
            .create_token(
                kim,
                CredentialKind::Pat,
                Some("other"),
                "tok-hash-2",
                "2026-12-01T00:00:00Z",
            )
            .unwrap();

        // Rules: by user, by one token; only live tokens and existing users take one.
        assert_eq!(store.approval_required(kim, Some(pat)).unwrap(), None);
        assert_eq!(store.approval_subject_user(RuleSubject::Token, pat).unwrap(), Some(kim));
        assert_eq!(store.approval_subject_user(RuleSubject::Token, 424242).unwrap(), None);
        let set = |subject, id, elicitation| store.set_approval_rule(subject, id, elicitation, "ops", "t").unwrap();
        assert_eq!(set(RuleSubject::Token, pat, true), RuleChange::Added);
        assert_eq!(set(RuleSubject::Token, pat, true), RuleChange::Unchanged);
        assert_eq!(store.approval_required(kim, Some(pat)).unwrap(), Some(true));
        assert_eq!(
            store.approval_required(kim, Some(other)).unwrap(),
            None,
            "another token of kim's is free"
        );
        assert_eq!(store.approval_required(kim, None).unwrap(), None);
        // A user rule that allows no elicitation wins over a token rule that does.
        assert_eq!(set(RuleSubject::User, kim, false), RuleChange::Added);
        assert_eq!(store.approval_required(kim, Some(pat)).unwrap(), Some(false));
        assert_eq!(store.approval_required(kim, Some(other)).unwrap(), Some(false));
        let rules = store.approval_rules().unwrap();
        let shown: Vec<(String, i64, bool)> = rules.into_iter().map(|r| (r.name, r.user_id, r.elicitation)).collect();
        assert_eq!(
            shown,
            vec![("kim / claude".to_owned(), kim, true), ("kim".to_owned(), kim, false)]
        );
        assert_eq!(set(RuleSubject::User, kim, true), RuleChange::Changed);
        assert_eq!(store.approval_required(kim, None).unwrap(), Some(true));
        assert!(store.clear_approval_rule(RuleSubject::User, kim).unwrap());
        assert!(!store.clear_approval_rule(RuleSubject::User, kim).unwrap());

        // A held call is claimed by exactly one decision, before its deadline only.
        store.insert_held_call(&held("apr_1", kim, pat)).unwrap();
        store.insert_held_call(&held("apr_2", kim, pat)).unwrap();
        store.insert_held_call(&held("apr_3", kim, pat)).unwrap();
        assert_eq!(store.waiting_held_calls_of(kim, "2026-12-01T12:00:00Z").unwrap(), 3);
        let waiting = store.waiting_held_calls("2026-12-01T12:00:00Z", 10).unwrap();
        assert_eq!(waiting.len(), 3);
        assert_eq!(
            waiting[0].args["password"], "hunter2",
            "kept while the call may still run"
        );
        assert!(store.claim_held_call("apr_1", "ops", "2026-12-01T12:00:00Z").unwrap());
        assert!(
            !store.claim_held_call("apr_1", "ann", "2026-12-01T12:00:01Z").unwrap(),
            "claimed once"
        );
        let deny = serde_json::json!({"isError": true});
        assert!(
            !store.deny_held_call("apr_1", "ann", &deny, "t").unwrap(),
            "a running call is not denied"
        );
        assert!(
            !store.claim_held_call("apr_2", "ops", "2026-12-02T00:00:00Z").unwrap(),
            "expired"
        );
        assert_eq!(
            store
                .held_call("apr_2")
                .unwrap()
                .unwrap()
                .status_at("2026-12-02T00:00:00Z"),
            "expired"
        );
        assert!(
            store
                .deny_held_call("apr_3", "ops", &deny, "2026-12-01T13:00:00Z")
                .unwrap()
        );
        assert!(
            !store.claim_held_call("apr_3", "ops", "2026-12-01T13:00:01Z").unwrap(),
            "denied is final"
        );

        // A call left running by a stopped server ends with an unknown outcome; in a
        // cluster, only those claimed before the bound.
        assert_eq!(store.end_running_held_calls(Some("2026-12-01T11:00:00Z")).unwrap(), 0);
        assert_eq!(store.end_running_held_calls(None).unwrap(), 1);
        let ended = store.held_call("apr_1").unwrap().unwrap();
        assert_eq!((ended.status.as_str(), ended.is_error), ("done", true));
        assert!(ended.result.unwrap().to_string().contains("unknown"));
        store
            .finish_held_call("apr_1", &serde_json::json!({"content": []}), false)
            .unwrap();
        assert_eq!(
            store.held_call("apr_1").unwrap().unwrap().args["password"],
            "(secret, not shown)"
        );
        // Housekeeping: an expired call's secret goes; old calls go.
        assert_eq!(
            store
                .prune_held_calls("2026-12-03T00:00:00Z", "2026-11-01T00:00:00Z")
                .unwrap(),
            (1, 0)
        );
        assert_eq!(
            store.held_call("apr_2").unwrap().unwrap().args["password"],
            "(secret, not shown)"
        );
        assert_eq!(
            store
                .prune_held_calls("2026-12-03T00:00:00Z", "2026-12-31T00:00:00Z")
                .unwrap(),
            (0, 3)
        );

        // The caller's credential is checked again when a held call runs.
        let who = store
            .principal_for_credential(CredentialKind::Pat, &pat.to_string())
            .unwrap();
        assert_eq!(who.map(|p| p.username), Some("kim".into()));
        assert!(
            store
                .principal_for_credential(CredentialKind::Pat, "nope")
                .unwrap()
                .is_none()
        );
        assert!(store.revoke_token(kim, pat, "2026-12-01T14:00:00Z").unwrap());
        assert!(
            store
                .principal_for_credential(CredentialKind::Pat, &pat.to_string())
                .unwrap()
                .is_none(),
            "a revoked token runs nothing"
        );
        assert!(
            store
                .principal_for_credential(CredentialKind::Session, "1")
                .unwrap()
                .is_none()
        );
        assert!(store.recent_held_calls(2).unwrap().is_empty());

        // A rule goes with its subject.
        assert_eq!(set(RuleSubject::Token, other, false), RuleChange::Added);
        assert_eq!(set(RuleSubject::User, kim, true), RuleChange::Added);
        assert_eq!(store.approval_rules().unwrap().len(), 3);
        store.delete_user(kim).unwrap();
        assert!(
            store.approval_rules().unwrap().is_empty(),
            "deleting a user deletes its rules"
        );
    });
}
