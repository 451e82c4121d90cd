//! Operator guard rules over `/api/policy`: a superuser's change is stored and pushed at
//! once to every connected agent on its live connection, sent again to each agent as it
//! connects (before its first call, after a server restart too), and cleared the same
//! way; a bad list is refused whole and leaves the policy as it was; only superusers
//! change it; an agent's refusal under a rule is audited like any failed call. That a
//! real agent enforces a pushed rule stays in `tests/e2e/test_policy.py`.

use crate::common;

use std::time::Duration;

use common::{Restarted, WAIT, api_error, audit_until, expect_error, shell_result};
use ed25519_dalek::{SigningKey, VerifyingKey};
use kenny_proto::auth;
use kenny_proto::frame::Frame;
use kenny_server::principal::Role;
use kenny_server::registry::Registry;
use kenny_testkit::{AgentOptions, Mcp, TestAgent, TestServer};
use serde_json::{Value, json};

const REASON: &str = "operator: canary word is off-limits";

fn rule() -> Value {
    json!({"id": "no_canary", "applies_to": "shell", "pattern": r"(?i)\bkenny-policy-canary\b", "reason": REASON})
}

fn rules_of(frame: Frame) -> Value {
    let Frame::Policy(policy) = frame else {
        panic!("expected a policy frame, got {frame:?}")
    };
    serde_json::to_value(&policy.rules).unwrap()
}

/// An agent whose key the test holds, so it can log in again as the same PC.
struct Pc {
    agent_id: &'static str,
    key: SigningKey,
    server_key: VerifyingKey,
}

impl Pc {
    async fn enroll(server: &TestServer, agent_id: &'static str) -> Pc {
        let enrollment = server.enroll(agent_id).await.unwrap();
        let key = SigningKey::generate(&mut rand::rngs::OsRng);
        let reply = server
            .anonymous()
            .with_token(&enrollment.token)
            .post(
                &format!("/api/agents/{agent_id}/enroll"),
                json!({"public_key": auth::encode_b64(key.verifying_key().as_bytes())}),
            )
            .await
            .unwrap();
        assert_eq!(reply.status, 200, "{reply:?}");
        Pc {
            agent_id,
            key,
            server_key: auth::parse_public_key(&enrollment.server_pubkey).unwrap(),
        }
    }

    /// Logs in and waits until the server holds the connection.
    async fn connect(&self, ws_url: &str, registry: &Registry) -> TestAgent {
        let agent = TestAgent::connect(
            ws_url,
            self.agent_id,
            &self.key,
            &self.server_key,
            AgentOptions::default(),
        )
        .await
        .unwrap();
        until(|| registry.get(self.agent_id).is_some()).await;
        agent
    }

    /// Closes the connection and waits until the server has let it go.
    async fn disconnect(&self, agent: TestAgent, registry: &Registry) {
        drop(agent);
        until(|| registry.get(self.agent_id).is_none()).await;
    }
}

async fn until(done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "the registry never got there");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Makes the first call on a freshly connected agent; returns the rules the agent held
/// when the call reached it.
async fn rules_before_the_first_call(mcp: &Mcp, agent: &mut TestAgent) -> Value {
    let call = mcp.call_outcome(
        "shell_exec",
        json!({"agent_id": "pc-a", "command": "echo kenny-policy-canary"}),
    );
    let (outcome, rules) = tokio::join!(call, async {
        let request = agent.next_request(WAIT).await.unwrap();
        // The agent's frames are handed over in the order they came: a policy sent
        // before this call is waiting already, one sent after it is not.
        let policy = agent
            .next_other(Duration::ZERO)
            .await
            .expect("the policy arrives before the first call");
        agent
            .respond(&request.id, shell_result("kenny-policy-canary\n"))
            .unwrap();
        rules_of(policy)
    });
    assert!(!outcome.unwrap().is_error);
    rules
}

#[tokio::test]
async fn a_rule_is_pushed_at_once_and_again_to_every_agent_that_connects_even_after_a_restart() {
    let server = TestServer::start().await.unwrap();
    let admin_token = server.admin_token().to_owned();
    let registry = &server.state().fleet.registry;
    let pc = Pc::enroll(&server, "pc-a").await;
    let mut agent = pc.connect(&server.ws_url(), registry).await;
    let api = server.api(&admin_token);
    assert_eq!(api.get("/api/policy").await.unwrap().body["rules"], json!([]));
    let connection = registry.get("pc-a").unwrap().conn_id;

    let r = api.put("/api/policy", json!({"rules": [rule()]})).await.unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        (&r.body["pushed_to"], &r.body["not_reached"], &r.body["updated_by"]),
        (&json!(1), &json!([]), &json!("admin")),
        "{r:?}"
    );
    assert_eq!(r.body["rules"], json!([rule()]));
    assert_eq!(rules_of(agent.next_other(WAIT).await.unwrap()), json!([rule()]));
    assert_eq!(
        registry.get("pc-a").unwrap().conn_id,
        connection,
        "pushed on the live connection: the agent need not reconnect"
    );

    // A reconnecting agent gets the rules before its first call...
    pc.disconnect(agent, registry).await;
    let mut agent = pc.connect(&server.ws_url(), registry).await;
    let mcp = server.mcp(&admin_token);
    assert_eq!(rules_before_the_first_call(&mcp, &mut agent).await, json!([rule()]));

    // ...and so does one connecting to a restarted server, which kept them.
    pc.disconnect(agent, registry).await;
    let restarted = Restarted::from(server).await;
    let registry = &restarted.running.state.fleet.registry;
    let api = restarted.api(&admin_token);
    let kept = api.get("/api/policy").await.unwrap().body;
    assert_eq!(
        (&kept["rules"], &kept["updated_by"]),
        (&json!([rule()]), &json!("admin"))
    );
    let mut agent = pc.connect(&restarted.ws_url(), registry).await;
    let mcp = Mcp::new(restarted.base_url(), &admin_token);
    assert_eq!(rules_before_the_first_call(&mcp, &mut agent).await, json!([rule()]));

    // Clearing the list is pushed the same way.
    let r = api.put("/api/policy", json!({"rules": []})).await.unwrap();
    assert_eq!((r.status, &r.body["pushed_to"]), (200, &json!(1)), "{r:?}");
    assert_eq!(rules_of(agent.next_other(WAIT).await.unwrap()), json!([]));
    assert_eq!(api.get("/api/policy").await.unwrap().body["rules"], json!([]));
}

#[tokio::test]
async fn bad_policies_are_refused_whole_and_only_superusers_change_it() {
    let server = TestServer::start().await.unwrap();
    let mut agent = server.agent("pc-a").await.unwrap();
    let api = server.api(server.admin_token());
    assert_eq!(
        api.put("/api/policy", json!({"rules": [rule()]})).await.unwrap().status,
        200
    );
    assert_eq!(rules_of(agent.next_other(WAIT).await.unwrap()), json!([rule()]));
    let before = api.get("/api/policy").await.unwrap().body;

    let bad = json!({"rules": [
        {"id": "ok_one", "applies_to": "path", "pattern": "secret", "reason": "operator: r"},
        {"id": "broken", "applies_to": "shell", "pattern": "(unclosed", "reason": "operator: r"},
        {"id": "weird", "applies_to": "everything", "pattern": "x", "reason": "operator: r"},
    ]});
    let message = api_error(&api.put("/api/policy", bad).await.unwrap(), 400, "bad_request");
    for part in ["policy not changed", "broken", "weird"] {
        assert!(message.contains(part), "{part}: {message}");
    }
    for junk in [
        json!({"rules": "nope"}),
        json!({"rules": [rule()], "extra": 1}),
        json!({"rules": [{"id": "x"}]}),
    ] {
        let r = api.put("/api/policy", junk.clone()).await.unwrap();
        assert_eq!((r.status, r.error_code()), (400, Some("bad_request")), "{junk}: {r:?}");
    }
    assert_eq!(
        api.get("/api/policy").await.unwrap().body,
        before,
        "a refused change must leave the policy as it was"
    );

    let (_, op_token) = server.user("opal", Role::Operator, &[]).await.unwrap();
    let op = server.api(&op_token);
    api_error(
        &op.put("/api/policy", json!({"rules": []})).await.unwrap(),
        403,
        "forbidden",
    );
    assert_eq!(
        op.get("/api/policy").await.unwrap().body["rules"],
        before["rules"],
        "operators may read the rules"
    );

    // No refused change reached the agent: the next frame it gets is the next accepted one.
    let second = json!({"id": "no_other", "applies_to": "path", "pattern": "secret", "reason": "operator: r"});
    api.put("/api/policy", json!({"rules": [rule(), second]}))
        .await
        .unwrap();
    assert_eq!(rules_of(agent.next_other(WAIT).await.unwrap()), json!([rule(), second]));

    // The refusal is the agent's, audited like any other failed call.
    let mcp = server.mcp(server.admin_token());
    let (outcome, ()) = tokio::join!(
        mcp.call_outcome(
            "shell_exec",
            json!({"agent_id": "pc-a", "command": "echo kenny-policy-canary"})
        ),
        async {
            let request = agent.next_request(WAIT).await.unwrap();
            agent.fail(&request.id, "blocked", REASON).unwrap();
        }
    );
    assert_eq!(expect_error(&outcome.unwrap(), "blocked"), REASON);
    let rows = audit_until(&server, "?agent_id=pc-a", |rows| {
        rows.iter().any(|r| r["error_code"] == "blocked")
    })
    .await;
    let row = rows.iter().find(|r| r["error_code"] == "blocked").unwrap();
    assert_eq!(
        (&row["tool"], &row["outcome"], &row["user"]),
        (&json!("shell_exec"), &json!("error"), &json!("admin")),
        "{row}"
    );
}
