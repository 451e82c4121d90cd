//! Snapshots with their verdicts, changes and history points, and the dashboard chat,
//! in the store on both backends (see `store_backends`).

use kenny_server::principal::Role;
use kenny_server::store::{ChangeRow, ChatCall, ChatSession, HealthRow, MetricRow, NewSnapshot, StoredThresholds};
use serde_json::json;

use crate::store_backends::on_both;

fn change(at: &str, item: &str, priority: &str) -> ChangeRow {
    ChangeRow {
        id: 0,
        agent_id: "pc-1".into(),
        at: at.into(),
        section: "software".into(),
        kind: "added".into(),
        item: item.into(),
        detail: "{}".into(),
        priority: priority.into(),
    }
}

fn point(at: &str, cpu: f64) -> MetricRow {
    MetricRow {
        agent_id: "pc-1".into(),
        at: at.into(),
        tier: 0,
        health: Some(1),
        cpu: Some(cpu),
        load: None,
        memory: Some(50.5),
        temperature: None,
        disks: "[]".into(),
    }
}

#[test]
fn snapshots_verdicts_changes_and_history_are_kept_the_same_on_both_backends() {
    on_both("history_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        let health = HealthRow {
            agent_id: "pc-1".into(),
            status: "warn",
            assessment_json: "{\"status\":\"warn\"}".into(),
        };
        let changes = [
            change("2026-12-01T10:00:00Z", "vim", "low"),
            change("2026-12-01T10:00:00Z", "nc", "high"),
        ];
        for (i, at) in ["2026-12-01T09:00:00Z", "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z"]
            .iter()
            .enumerate()
        {
            let m = point(at, i as f64);
            store
                .insert_telemetry(
                    &NewSnapshot {
                        agent_id: "pc-1",
                        collected_at: at,
                        received_at: at,
                        snapshot: &format!("{{\"n\":{i}}}"),
                        health: Some(&health),
                        changes: if i == 1 { &changes } else { &[] },
                        metrics: Some(&m),
                    },
                    2,
                )
                .unwrap();
        }
        assert_eq!(
            store.telemetry_count("pc-1").unwrap(),
            2,
            "only the newest `keep` are kept"
        );
        let (collected, _, snapshot) = store.latest_telemetry("pc-1").unwrap().unwrap();
        assert_eq!(
            (collected.as_str(), snapshot.as_str()),
            ("2026-12-01T11:00:00Z", "{\"n\":2}")
        );
        assert_eq!(store.health_counts().unwrap(), vec![("warn".to_owned(), 1)]);
        assert_eq!(store.assessments().unwrap()[0].0, "pc-1");
        store
            .save_assessments(&[HealthRow {
                status: "ok",
                ..health.clone()
            }])
            .unwrap();
        assert_eq!(store.health_counts().unwrap(), vec![("ok".to_owned(), 1)]);

        // High-priority changes first within the same moment; scoped by a JSON list.
        let of = store.changes_of("pc-1", "2026-01-01", 10).unwrap();
        assert_eq!(of.iter().map(|c| c.item.as_str()).collect::<Vec<_>>(), ["nc", "vim"]);
        assert_eq!(store.changes_since("2026-01-01", 10, None).unwrap().len(), 2);
        assert_eq!(
            store.changes_since("2026-01-01", 10, Some("[\"pc-1\"]")).unwrap().len(),
            2
        );
        assert!(
            store
                .changes_since("2026-01-01", 10, Some("[\"pc-2\"]"))
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.prune_changes("2026-12-02", 1).unwrap(), 1, "a batch at a time");

        // History points: a second write of the same moment replaces it.
        assert_eq!(store.metrics("pc-1", "2026-01-01").unwrap().len(), 3);
        store
            .merge_metrics("pc-1", 0, "2026-12-01T10:30:00Z", &[point("2026-12-01T09:00:00Z", 7.5)])
            .unwrap();
        let points = store.metrics("pc-1", "2026-01-01").unwrap();
        assert_eq!(points.iter().map(|p| p.cpu).collect::<Vec<_>>(), [Some(7.5), Some(2.0)]);
        assert_eq!(points[0].memory, Some(50.5));
        assert_eq!(
            store.agents_with_metrics_before(0, "2026-12-01T10:00:00Z").unwrap(),
            ["pc-1"]
        );
        assert_eq!(
            store.metrics_before("pc-1", 0, "2026-12-01T10:00:00Z").unwrap().len(),
            1
        );
        assert_eq!(store.prune_metrics(0, "2026-12-01T10:00:00Z").unwrap(), 1);

        // Thresholds are one row.
        assert_eq!(store.health_thresholds().unwrap(), None);
        let t = StoredThresholds {
            thresholds_json: "{}".into(),
            updated_by: "ada".into(),
            updated_at: "t".into(),
        };
        store.save_health_thresholds(&t).unwrap();
        store.save_health_thresholds(&t).unwrap();
        assert_eq!(store.health_thresholds().unwrap(), Some(t));
        assert!(store.file_size().unwrap() > 0);
    });
}

#[test]
fn chat_conversations_calls_and_use_are_kept_the_same_on_both_backends() {
    on_both("chat_on_both_backends", |store| {
        store.create_agent("pc-1", "h", "t").unwrap();
        let kim = store.create_user("kim", "x", Role::Operator, &[], "t").unwrap();
        let session = ChatSession {
            id: "chat-1".into(),
            user_id: kim,
            title: "new".into(),
            selected_agent: None,
            created_at: "2026-12-01T00:00:00Z".into(),
            updated_at: "2026-12-01T00:00:00Z".into(),
        };
        store.create_chat_session(&session).unwrap();
        store
            .update_chat_session("chat-1", "disk", Some("pc-1"), "2026-12-01T00:00:01Z")
            .unwrap();
        let message = store
            .append_chat_message(
                "chat-1",
                "assistant",
                &json!([{"type": "text", "text": "hi"}]),
                "2026-12-01T00:00:02Z",
            )
            .unwrap();
        let stored = store.chat_session("chat-1").unwrap().unwrap();
        assert_eq!(
            (stored.title.as_str(), stored.selected_agent.as_deref()),
            ("disk", Some("pc-1"))
        );
        assert_eq!(
            stored.updated_at, "2026-12-01T00:00:02Z",
            "a message moves the conversation up"
        );
        assert_eq!(store.chat_messages("chat-1").unwrap()[0].content[0]["text"], "hi");

        let call = ChatCall {
            id: "toolu_1".into(),
            session_id: "chat-1".into(),
            message_id: message,
            seq: 0,
            tool: "shell_exec".into(),
            args: json!({"command": "df"}),
            agent_id: Some(kenny_proto::AgentId::parse("pc-1").unwrap()),
            class: "change".into(),
            status: "held".into(),
            result: None,
            is_error: false,
            created_at: "t".into(),
            decided_by: None,
            decided_at: None,
            hold_reason: Some("a change".into()),
        };
        store.insert_chat_call(&call).unwrap();
        // Of two decisions, one wins.
        assert!(store.decide_chat_call("toolu_1", "running", None, "ada", "t2").unwrap());
        assert!(
            !store
                .decide_chat_call("toolu_1", "denied", Some(&json!("no")), "bob", "t3")
                .unwrap()
        );
        assert_eq!(store.end_unfinished_chat_calls("t4").unwrap(), 1);
        let ended = store.chat_call("toolu_1").unwrap().unwrap();
        assert_eq!(
            (ended.status.as_str(), ended.is_error, ended.decided_by.as_deref()),
            ("done", true, Some("ada"))
        );
        assert_eq!(ended.agent_id.map(|a| a.to_string()).as_deref(), Some("pc-1"));
        store.finish_chat_call("toolu_1", &json!({"ok": true}), false).unwrap();
        assert_eq!(store.chat_calls("chat-1").unwrap()[0].result, Some(json!({"ok": true})));

        store.add_chat_usage(kim, "2026-12-01", 10, 5).unwrap();
        store.add_chat_usage(kim, "2026-12-01", 1, 2).unwrap();
        let used = store.chat_usage(kim, "2026-12-01").unwrap();
        assert_eq!((used.input_tokens, used.output_tokens, used.turns), (11, 7, 2));
        let scraped = store.scrape_counts("2026-12-01").unwrap();
        assert_eq!((scraped.chat_input_tokens, scraped.chat_turns), (11, 2));

        assert_eq!(store.chat_sessions(kim).unwrap().len(), 1);
        assert!(
            !store.delete_chat_session("chat-1", kim + 1).unwrap(),
            "not another user's"
        );
        assert!(store.delete_chat_session("chat-1", kim).unwrap());
        assert!(store.chat_calls("chat-1").unwrap().is_empty(), "its calls went with it");
    });
}
