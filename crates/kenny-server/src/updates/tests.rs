use std::time::Duration;

use ed25519_dalek::SigningKey;
use kenny_proto::frame::{AgentMeta, Log};
use kenny_proto::update::UpdateOrder;
use serde_json::{Map, Value, json};
use sha2::Digest;

use super::*;
use crate::principal::CredentialKind;

fn who(role: Role) -> Principal {
    Principal {
        user_id: 1,
        username: "kim".into(),
        role,
        hosts: None,
        credential_kind: CredentialKind::Pat,
        credential_id: "1".into(),
        client_addr: None,
    }
}

fn code(r: Result<Choice, CallFailure>) -> String {
    match r {
        Ok(Choice::Newest) => "newest".into(),
        Ok(Choice::Exact((a, b, c))) => format!("{a}.{b}.{c}"),
        Err(f) => f.code,
    }
}

#[test]
fn callers_name_at_most_a_version_and_only_superusers_go_back() {
    let su = who(Role::Superuser);
    let op = who(Role::Operator);
    assert_eq!(code(choose(&op, "0.2.0", None, false)), "newest");
    assert_eq!(code(choose(&op, "0.2.0", Some(""), false)), "newest");
    assert_eq!(code(choose(&op, "0.2.0", Some("0.3.1"), false)), "0.3.1");
    assert_eq!(code(choose(&op, "0.2.0", Some("0.2.0"), false)), "bad_args");
    assert_eq!(code(choose(&op, "0.2.0", Some("latest"), false)), "bad_args");
    // Older: never for anyone but a superuser, and only with the exact version named.
    assert_eq!(code(choose(&op, "0.2.0", Some("0.1.0"), true)), "forbidden");
    assert_eq!(
        code(choose(&who(Role::User), "0.2.0", Some("0.1.0"), true)),
        "forbidden"
    );
    assert_eq!(code(choose(&su, "0.2.0", Some("0.1.0"), false)), "bad_args");
    assert_eq!(code(choose(&su, "0.2.0", None, true)), "bad_args");
    assert_eq!(code(choose(&su, "0.2.0", Some("0.1.0"), true)), "0.1.0");
}

#[test]
fn a_running_version_that_is_not_one_allows_no_unasked_downgrade() {
    let su = who(Role::Superuser);
    let op = who(Role::Operator);
    for running in ["", "garbage", "9.9", "1.2.3.4"] {
        // Nothing can be told newer than it: neither "the newest" nor a named version
        // goes unless a superuser names it as a downgrade.
        assert_eq!(code(choose(&op, running, None, false)), "bad_args", "{running:?}");
        assert_eq!(
            code(choose(&op, running, Some("0.1.0"), false)),
            "forbidden",
            "{running:?}"
        );
        assert_eq!(
            code(choose(&op, running, Some("0.1.0"), true)),
            "forbidden",
            "{running:?}"
        );
        assert_eq!(
            code(choose(&su, running, Some("0.1.0"), false)),
            "bad_args",
            "{running:?}"
        );
        assert_eq!(code(choose(&su, running, Some("0.1.0"), true)), "0.1.0", "{running:?}");
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    updates: Updates,
    key: SigningKey,
}

fn fixture(files: &[(&str, &[u8])]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let releases = dir.path().join("agent-releases");
    std::fs::create_dir(&releases).unwrap();
    for (name, bytes) in files {
        std::fs::write(releases.join(name), bytes).unwrap();
    }
    let store = Arc::new(Store::open(&dir.path().join("data")).unwrap());
    let key = SigningKey::from_bytes(&[5; 32]);
    Fixture {
        updates: Updates::new(
            releases,
            "https://k.example".into(),
            key.clone(),
            store,
            crate::clock::Clock::system(),
        ),
        key,
        _dir: dir,
    }
}

fn meta(version: &str) -> AgentMeta {
    AgentMeta {
        hostname: "h".into(),
        os: "linux".into(),
        version: version.into(),
        arch: Some("x86_64".into()),
        channel: None,
        dialect: Some(kenny_proto::dialect::CURRENT.into()),
    }
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[tokio::test]
async fn the_server_builds_a_signed_order_bound_to_one_agent() {
    let f = fixture(&[
        ("kenny-agent-0.2.0-linux-x86_64", b"build two"),
        ("kenny-agent-0.3.0-linux-aarch64", b"other arch"),
        ("kenny-agent-0.0.5-linux-x86_64", b"old"),
    ]);
    let order = f
        .updates
        .order(&who(Role::Operator), "pc-a", Some(&meta("0.1.0")), &Map::new())
        .await
        .unwrap();
    let wire = UpdateOrder::from_args(&order.args).unwrap();
    assert_eq!(wire.url, "https://k.example/d/agent/kenny-agent-0.2.0-linux-x86_64");
    let m = wire.verify(&f.key.verifying_key()).unwrap();
    assert_eq!(
        (
            m.agent_id.as_str(),
            m.version.as_str(),
            m.arch.as_str(),
            m.size,
            m.allow_downgrade
        ),
        ("pc-a", "0.2.0", "x86_64", 9, false)
    );
    assert_eq!(m.sha256, hex::encode(sha2::Sha256::digest(b"build two")));

    let down = f
        .updates
        .order(
            &who(Role::Superuser),
            "pc-a",
            Some(&meta("0.1.0")),
            &args(json!({"version": "0.0.5", "allow_downgrade": true})),
        )
        .await
        .unwrap();
    let m = UpdateOrder::from_args(&down.args)
        .unwrap()
        .verify(&f.key.verifying_key())
        .unwrap();
    assert!(m.allow_downgrade && m.version == "0.0.5");

    let none = f
        .updates
        .order(&who(Role::Operator), "pc-a", Some(&meta("0.2.0")), &Map::new())
        .await
        .err()
        .unwrap();
    assert_eq!(none.code, "not_found");
    assert!(
        none.message
            .contains("no kenny-agent newer than 0.2.0 for linux/x86_64"),
        "{none}"
    );
    let unknown = f
        .updates
        .order(&who(Role::Operator), "pc-a", None, &Map::new())
        .await
        .err()
        .unwrap();
    assert_eq!(unknown.code, "unsupported");
}

fn report(manifest: &str, signature: &str, outcome: &str) -> Log {
    let fields = json!({
        "event": REPORT_EVENT, "outcome": outcome, "from": "0.1.0", "to": "0.2.0",
        "reason": "the new build did not log in within 5s", "manifest": manifest, "signature": signature,
    });
    Log {
        agent_id: "pc-a".into(),
        at: "now".into(),
        level: "error".into(),
        target: "t".into(),
        message: "m".into(),
        fields: Some(args(fields)),
    }
}

#[tokio::test]
async fn only_the_ordered_agent_reporting_a_genuine_order_settles_it() {
    let f = fixture(&[("kenny-agent-0.2.0-linux-x86_64", b"build two")]);
    let updates = Arc::new(f.updates);
    let order = updates
        .order(&who(Role::Operator), "pc-a", Some(&meta("0.1.0")), &Map::new())
        .await
        .unwrap();
    let wire = UpdateOrder::from_args(&order.args).unwrap();
    let staged = json!({"ok": true, "staged_version": "0.2.0", "trial_secs": 1});
    let settling = {
        let updates = updates.clone();
        tokio::spawn(async move { updates.settle(order, staged).await })
    };
    // Another agent echoing the order, or a forged signature: ignored.
    let mut other = report(&wire.manifest, &wire.signature, "succeeded");
    other.agent_id = "pc-b".into();
    updates.observe("pc-b", &other);
    let forged = SigningKey::from_bytes(&[6; 32]);
    let (text, sig) = UpdateOrder::from_args(&wire.clone().into_args())
        .unwrap()
        .verify(&f.key.verifying_key())
        .unwrap()
        .sign(&forged);
    updates.observe("pc-a", &report(&text, &sig, "succeeded"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !settling.is_finished(),
        "a report that is not genuine settled the update"
    );
    // The agent it was for says it rolled back.
    updates.observe("pc-a", &report(&wire.manifest, &wire.signature, "rolled_back"));
    let outcome = tokio::time::timeout(Duration::from_secs(5), settling)
        .await
        .unwrap()
        .unwrap();
    let failure = outcome.unwrap_err();
    assert_eq!(failure.code, "exec_failed");
    assert!(
        failure.message.contains("rolled back") && failure.message.contains("did not log in within 5s"),
        "{failure}"
    );
    // Recorded off the read loop; give the spawned write a moment.
    let mut recorded = Vec::new();
    for _ in 0..50 {
        recorded = updates.store.agent_updates("pc-a", 10).unwrap();
        if !recorded.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        (recorded[0].outcome.as_str(), recorded[0].requested_by.as_str()),
        ("rolled_back", "kim")
    );
    assert!(updates.store.agent_updates("pc-b", 10).unwrap().is_empty());
}
