//! Update campaigns against the real server with test agents that answer the update
//! order and then report as kenny-agent does (echoing the signed manifest): the engine
//! one PC at a time, a PC held after its second rollback, and a campaign that carries
//! on after a restart from the report its agent sends afterwards.

use std::time::Duration;

use kenny_proto::frame::{Frame, Log};
use kenny_testkit::{TestAgent, TestServer};
use serde_json::{Map, Value, json};

use crate::common::{Restarted, WAIT};

fn release(server: &TestServer) {
    let dir = server.data_dir().join("agent-releases");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kenny-agent-0.2.0-linux-x86_64"), b"a build").unwrap();
}

/// Takes the next update order: answers that the build is staged, and returns the
/// order's arguments (for the report).
async fn stage(agent: &mut TestAgent) -> Map<String, Value> {
    let order = agent.next_request(WAIT).await.unwrap();
    assert_eq!(order.tool, "agent_update");
    assert_eq!(order.args["version"], "0.2.0", "the pinned version: {:?}", order.args);
    agent
        .respond(&order.id, json!({"staged_version": "0.2.0", "trial_secs": 1}))
        .unwrap();
    order.args
}

/// The report kenny-agent sends after its next login.
fn report(agent: &TestAgent, agent_id: &str, order: &Map<String, Value>, outcome: &str) {
    let mut fields = Map::new();
    fields.insert("event".into(), json!("agent_update"));
    fields.insert("manifest".into(), order["manifest"].clone());
    fields.insert("signature".into(), order["signature"].clone());
    fields.insert("outcome".into(), json!(outcome));
    fields.insert("reason".into(), json!("the new build did not log in within 1s"));
    fields.insert("from".into(), json!("0.0.0"));
    agent
        .send(&Frame::Log(Log {
            agent_id: agent_id.into(),
            at: "2026-01-01T00:00:00Z".into(),
            level: "info".into(),
            target: "kenny_agent::handover".into(),
            message: "agent update".into(),
            fields: Some(fields),
        }))
        .unwrap();
}

async fn until(api: &kenny_testkit::Api, id: i64, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let c = api.get(&format!("/api/campaigns/{id}")).await.unwrap().body;
        if done(&c) {
            return c;
        }
        assert!(tokio::time::Instant::now() < deadline, "campaign never got there: {c}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn status<'a>(c: &'a Value, agent: &str) -> &'a Value {
    c["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["agent_id"] == agent)
        .unwrap()
}

#[tokio::test]
async fn one_at_a_time_and_the_second_rollback_holds_the_pc() {
    let server = TestServer::start().await.unwrap();
    release(&server);
    let mut pc_a = server.agent("pc-a").await.unwrap();
    let mut pc_b = server.agent("pc-b").await.unwrap();
    let api = server.api(server.admin_token());
    let r = api
        .post("/api/campaigns", json!({"version": "0.2.0", "all": true}))
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    let id = r.body["id"].as_i64().unwrap();

    // pc-a first (ids in order); with max_parallel 1, pc-b waits meanwhile.
    let order = stage(&mut pc_a).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!pc_b.has_request(), "a second update started beside the first");
    report(&pc_a, "pc-a", &order, "succeeded");
    until(&api, id, |c| status(c, "pc-a")["status"] == "done").await;

    let order = stage(&mut pc_b).await;
    report(&pc_b, "pc-b", &order, "rolled_back");
    let c = until(&api, id, |c| status(c, "pc-b")["rollbacks"] == 1).await;
    assert!(
        ["rolled_back", "updating"].contains(&status(&c, "pc-b")["status"].as_str().unwrap()),
        "{c}"
    );
    let order = stage(&mut pc_b).await;
    report(&pc_b, "pc-b", &order, "rolled_back");
    let c = until(&api, id, |c| c["state"] == "finished").await;
    let b = status(&c, "pc-b");
    assert_eq!(
        (&b["status"], &b["rollbacks"], &b["attempts"]),
        (&json!("held"), &json!(2), &json!(2))
    );
    assert!(b["detail"].as_str().unwrap().contains("did not log in"), "{b}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!pc_b.has_request(), "a held PC is tried again");
}

#[tokio::test]
async fn a_campaign_carries_on_after_a_restart_from_the_agents_late_report() {
    let server = TestServer::start().await.unwrap();
    release(&server);
    let token = server.admin_token().to_owned();
    let mut pc_a = server.agent("pc-a").await.unwrap();
    let api = server.api(&token);
    let r = api
        .post("/api/campaigns", json!({"version": "0.2.0", "agents": ["pc-a"]}))
        .await
        .unwrap();
    let id = r.body["id"].as_i64().unwrap();
    let order = stage(&mut pc_a).await;

    // The server stops while the PC is on trial; the agent reports to the new one.
    let restarted = Restarted::from(server).await;
    let pc_a = pc_a.reconnect(&restarted.ws_url()).await.unwrap();
    let api = restarted.api(&token);
    let c = api.get(&format!("/api/campaigns/{id}")).await.unwrap().body;
    assert_eq!(status(&c, "pc-a")["status"], "updating", "{c}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    report(&pc_a, "pc-a", &order, "succeeded");
    let c = until(&api, id, |c| c["state"] == "finished").await;
    assert_eq!(status(&c, "pc-a")["status"], "done", "{c}");
}
