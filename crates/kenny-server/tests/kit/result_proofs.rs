//! Signed results (protocol 0.18): an agent's answer is checked against the key enrolled
//! for it before anyone sees it; a good proof travels in the MCP result's `_meta` and is
//! kept with the audit row, one that fails is refused and audited, and an agent of 0.17
//! still works, marked unsigned.

use ed25519_dalek::SigningKey;
use kenny_proto::frame::Response;
use kenny_server::proofs::{PROOF_META_KEY, verify_saved};
use kenny_testkit::{AgentOptions, Mcp, TestAgent, TestServer};
use serde_json::{Value, json};

use crate::common::{self, WAIT, shell_result};

/// Calls `shell_exec` on `agent` through `/mcp`; the agent answers with `answer`
/// (built from the request id). The raw tool result, `_meta` included.
async fn call(mcp: &Mcp, agent: &mut TestAgent, args: Value, answer: impl FnOnce(&str) -> Response) -> Value {
    let mcp = mcp.clone();
    let call = tokio::spawn(async move {
        mcp.rpc("tools/call", json!({"name": "shell_exec", "arguments": args}))
            .await
    });
    let request = agent.next_request(WAIT).await.unwrap();
    agent.answer(answer(&request.id)).unwrap();
    call.await.unwrap().unwrap()
}

async fn listed_key(mcp: &Mcp, agent_id: &str) -> (String, Value) {
    let listed = mcp.call("list_agents", json!({"query": agent_id})).await.unwrap();
    let row = listed["agents"][0].clone();
    (row["public_key"].as_str().unwrap().to_owned(), row)
}

#[tokio::test]
async fn a_signed_result_carries_a_proof_that_verifies_outside_the_server() {
    let server = TestServer::start().await.unwrap();
    let mut agent = server.agent("pc-a").await.unwrap();
    let mut other = server.agent("pc-b").await.unwrap();
    assert!(agent.signs_results() && other.signs_results());
    let mcp = server.mcp(server.admin_token());
    let args = json!({"agent_id": "pc-a", "command": "hostname"});
    let result = call(&mcp, &mut agent, args.clone(), |id| {
        Response::success(id, shell_result("pc-a\n"))
    })
    .await;
    assert_ne!(result["isError"], true, "{result}");
    let proof = &result["_meta"][PROOF_META_KEY];
    assert_eq!(proof["signed"], true, "{result}");
    assert_eq!(
        (proof["agent_id"].as_str(), proof["tool"].as_str()),
        (Some("pc-a"), Some("shell_exec"))
    );

    let (key, row) = listed_key(&mcp, "pc-a").await;
    assert_eq!(row["signs_results"], true, "{row}");
    let check = verify_saved(&result, &key, args.as_object()).unwrap();
    assert!(check.args_checked && check.agent_id == "pc-a");
    // Another PC's key, a changed output or other arguments: each is caught, and said.
    let (other_key, _) = listed_key(&mcp, "pc-b").await;
    assert!(
        verify_saved(&result, &other_key, None)
            .unwrap_err()
            .contains("does not verify")
    );
    let mut changed = result.clone();
    changed["structuredContent"]["stdout"] = json!("pc-b\n");
    assert!(
        verify_saved(&changed, &key, None)
            .unwrap_err()
            .contains("changed after")
    );
    let asked_else = json!({"agent_id": "pc-a", "command": "id"});
    assert!(
        verify_saved(&result, &key, asked_else.as_object())
            .unwrap_err()
            .contains("arguments")
    );

    // A signed failure is proved the same way.
    let failed = call(&mcp, &mut other, json!({"agent_id": "pc-b", "command": "x"}), |id| {
        Response::failure(id, "exec_failed", "no such command")
    })
    .await;
    assert_eq!(failed["isError"], true);
    verify_saved(&failed, &other_key, None).unwrap();

    // The proof is kept with the call's audit row.
    let rows = common::audit_until(&server, "?agent_id=pc-a&tool=shell_exec", |rows| {
        rows.iter().any(|r| r["outcome"] == "ok")
    })
    .await;
    let kept: Value = serde_json::from_str(rows[0]["proof"].as_str().unwrap()).unwrap();
    assert_eq!(kept["sig"], proof["sig"]);
}

#[tokio::test]
async fn an_answer_signed_with_another_key_or_unsigned_is_refused_and_audited() {
    let server = TestServer::start().await.unwrap();
    let forger = SigningKey::from_bytes(&[7; 32]);
    let options = AgentOptions {
        result_key: Some(forger),
        ..AgentOptions::default()
    };
    let mut forged = server.agent_with("pc-f", options).await.unwrap();
    let mcp = server.mcp(server.admin_token());
    let result = call(
        &mcp,
        &mut forged,
        json!({"agent_id": "pc-f", "command": "hostname"}),
        |id| Response::success(id, shell_result("pc-f\n")),
    )
    .await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["error"]["code"], "bad_signature");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("pc-f") && text.contains("re-enroll"), "{text}");
    assert!(
        !text.contains("pc-f\\n") && result["structuredContent"].get("stdout").is_none(),
        "the refused output never reaches the caller: {result}"
    );

    // An agent of 0.18 that leaves its answer unsigned is refused too.
    let mut silent = server.agent("pc-s").await.unwrap();
    // `answer` would sign; the frame goes out bare instead.
    let mcp2 = mcp.clone();
    let pending = tokio::spawn(async move {
        mcp2.rpc(
            "tools/call",
            json!({"name": "shell_exec", "arguments": {"agent_id": "pc-s", "command": "hostname"}}),
        )
        .await
    });
    let request = silent.next_request(WAIT).await.unwrap();
    silent
        .send(&kenny_proto::frame::Frame::Response(Response::success(
            &request.id,
            shell_result("pc-s\n"),
        )))
        .unwrap();
    let result = pending.await.unwrap().unwrap();
    assert_eq!(
        result["structuredContent"]["error"]["code"], "bad_signature",
        "{result}"
    );
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("without a signature")
    );

    let rows = common::audit_until(&server, "?outcome=error", |rows| {
        rows.iter().filter(|r| r["error_code"] == "bad_signature").count() == 2
    })
    .await;
    let by_forger = rows.iter().find(|r| r["agent_id"] == "pc-f").unwrap();
    assert!(by_forger["proof"].is_string(), "the failing proof is kept: {by_forger}");
}

#[tokio::test]
async fn an_agent_of_the_previous_protocol_still_works_and_is_marked_unsigned() {
    let server = TestServer::start().await.unwrap();
    let mut old = server.agent_with("pc-old", AgentOptions::unsigned()).await.unwrap();
    assert!(!old.signs_results(), "a 0.17 agent is never asked to sign");
    let mcp = server.mcp(server.admin_token());
    let result = call(
        &mcp,
        &mut old,
        json!({"agent_id": "pc-old", "command": "hostname"}),
        |id| Response::success(id, shell_result("pc-old\n")),
    )
    .await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["stdout"], "pc-old\n");
    let proof = &result["_meta"][PROOF_META_KEY];
    assert_eq!(proof["signed"], false, "{result}");
    assert!(proof["why"].as_str().unwrap().contains("0.18"));
    let (key, row) = listed_key(&mcp, "pc-old").await;
    assert_eq!(row["signs_results"], false, "{row}");
    assert!(verify_saved(&result, &key, None).unwrap_err().contains("not signed"));
}
