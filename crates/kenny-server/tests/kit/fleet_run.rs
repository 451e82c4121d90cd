//! `fleet_run`: one read-only tool on an explicit list of PCs, each PC's call scoped
//! and audited on its own, the offline ones reported `offline`, a tool that changes a
//! PC refused before anything is sent.

use std::time::Duration;

use kenny_testkit::TestServer;
use serde_json::{Value, json};

use crate::common::{self, shell_result};

/// Answers every call an agent gets with its own id, until the test ends.
fn answering(mut agent: kenny_testkit::TestAgent) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Ok(request) = agent.next_request(Duration::from_secs(60)).await {
            let id = agent.agent_id.clone();
            agent
                .respond(&request.id, json!({"processes": [], "host": id}))
                .unwrap();
        }
    })
}

#[tokio::test]
async fn fifty_pcs_answer_each_for_itself_and_the_offline_ones_say_so() {
    let server = TestServer::start().await.unwrap();
    let online: Vec<String> = (0..46).map(|i| format!("pc-{i:02}")).collect();
    let offline: Vec<String> = (46..50).map(|i| format!("pc-{i:02}")).collect();
    let mut tasks = Vec::new();
    for id in &online {
        tasks.push(answering(server.agent(id).await.unwrap()));
    }
    for id in &offline {
        server.enroll(id).await.unwrap();
    }
    let ids: Vec<&String> = online.iter().chain(&offline).collect();
    let mcp = server.mcp(server.admin_token());
    let result = mcp
        .rpc(
            "tools/call",
            json!({"name": "fleet_run", "arguments": {"agent_ids": ids, "tool": "diag_processes", "args": {"limit": 5}}}),
        )
        .await
        .unwrap();
    assert_ne!(result["isError"], true, "{result}");
    let run = &result["structuredContent"];
    assert_eq!(
        (run["succeeded"].as_u64(), run["failed"].as_u64()),
        (Some(46), Some(4)),
        "{run}"
    );
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 50);
    for (entry, id) in results.iter().zip(&ids) {
        assert_eq!(entry["agent_id"], json!(id), "results keep the order asked");
        if offline.contains(id) {
            assert_eq!(entry["error"]["code"], "offline", "{entry}");
        } else {
            assert_eq!(
                entry["result"]["host"],
                json!(id),
                "each PC answered for itself: {entry}"
            );
            assert_eq!(entry["proof"]["agent_id"], json!(id), "{entry}");
        }
    }
    // One audit row per PC, each with its own outcome.
    let rows = common::audit_until(&server, "?tool=diag_processes&limit=100", |rows| {
        rows.len() == 50 && rows.iter().all(|r| r["outcome"] != "sent")
    })
    .await;
    let mut audited: Vec<&str> = rows.iter().map(|r| r["agent_id"].as_str().unwrap()).collect();
    audited.sort_unstable();
    let mut expected: Vec<&str> = ids.iter().map(|s| s.as_str()).collect();
    expected.sort_unstable();
    assert_eq!(audited, expected);
    assert_eq!(rows.iter().filter(|r| r["outcome"] == "ok").count(), 46);
    for task in tasks {
        task.abort();
    }
}

#[tokio::test]
async fn a_tool_that_changes_a_pc_no_list_or_a_list_too_long_is_refused_before_anything_runs() {
    let server = TestServer::builder()
        .configure(|c| c.fleet_run_max = 3)
        .start()
        .await
        .unwrap();
    let mut agent = server.agent("pc-a").await.unwrap();
    let mcp = server.mcp(server.admin_token());
    for (arguments, code, says) in [
        (
            json!({"agent_ids": ["pc-a"], "tool": "shell_exec", "args": {"command": "id"}}),
            "bad_args",
            "changes the PC",
        ),
        (
            json!({"agent_ids": [], "tool": "diag_processes"}),
            "bad_args",
            "at least one PC",
        ),
        (json!({"tool": "diag_processes"}), "bad_args", "agent_ids"),
        (
            json!({"agent_ids": ["pc-a", "pc-a"], "tool": "diag_processes"}),
            "bad_args",
            "twice",
        ),
        (
            json!({"agent_ids": ["a", "b", "c", "d"], "tool": "diag_processes"}),
            "bad_args",
            "at most 3",
        ),
        (
            json!({"agent_ids": ["pc-a"], "tool": "diag_processes", "args": {"agent_id": "pc-b"}}),
            "bad_args",
            "agent_id",
        ),
        (
            json!({"agent_ids": ["pc-a"], "tool": "screen_capture"}),
            "unsupported",
            "picture",
        ),
    ] {
        let outcome = mcp.call_outcome("fleet_run", arguments.clone()).await.unwrap();
        let message = common::expect_error(&outcome, code);
        assert!(message.contains(says), "{arguments}: {message}");
    }
    assert!(
        agent.next_request(Duration::from_millis(100)).await.is_err(),
        "nothing reached the PC"
    );
    // A user reaches only its own PCs: the others are forbidden, each on its own line.
    let (_, token) = server
        .user("kim", kenny_server::principal::Role::User, &["pc-a"])
        .await
        .unwrap();
    let call = {
        let mcp = server.mcp(&token);
        tokio::spawn(async move {
            mcp.call(
                "fleet_run",
                json!({"agent_ids": ["pc-a", "pc-b"], "tool": "diag_processes"}),
            )
            .await
        })
    };
    let request = agent.next_request(common::WAIT).await.unwrap();
    agent.respond(&request.id, shell_result("ok")).unwrap();
    let run: Value = call.await.unwrap().unwrap();
    assert_eq!(run["results"][0]["ok"], true, "{run}");
    assert_eq!(run["results"][1]["error"]["code"], "forbidden", "{run}");
}
