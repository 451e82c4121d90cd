//! Every refusal on `/mcp` is a tool result with `isError`, text `"<code>: <message>"`
//! and `{"error": {"code", "message"}}`; the target is never guessed. The exception is a
//! tool name `tools/list` does not have: that is the protocol's own error.

use crate::common;

use common::{WAIT, answered, expect_error, shell_result};
use kenny_server::principal::Role;
use kenny_testkit::TestServer;
use serde_json::json;

#[tokio::test]
async fn a_call_without_a_target_is_refused_even_with_one_pc_online() {
    let server = TestServer::start().await.unwrap();
    let mut agent = server.agent("pc-a").await.unwrap();
    let mcp = server.mcp(server.admin_token());
    for target in [None, Some(""), Some("   ")] {
        for (tool, mut args) in [
            ("shell_exec", json!({"command": "echo hi"})),
            ("fs_list", json!({"path": "/"})),
        ] {
            if let Some(id) = target {
                args["agent_id"] = json!(id);
            }
            let outcome = mcp.call_outcome(tool, args).await.unwrap();
            expect_error(&outcome, "no_agent");
        }
    }
    assert!(!agent.has_request(), "nothing may reach the only PC online");
    // select_agent remembers nothing: the next call still needs its target.
    mcp.call("select_agent", json!({"agent_id": "pc-a"})).await.unwrap();
    expect_error(
        &mcp.call_outcome("shell_exec", json!({"command": "x"})).await.unwrap(),
        "no_agent",
    );
    let _ = agent
        .next_request(std::time::Duration::from_millis(50))
        .await
        .unwrap_err();
}

#[tokio::test]
async fn an_unknown_pc_is_named_as_such() {
    let server = TestServer::start().await.unwrap();
    let _agent = server.agent("pc-a").await.unwrap();
    let mcp = server.mcp(server.admin_token());
    let message = expect_error(
        &mcp.call_outcome("shell_exec", json!({"agent_id": "no-such-pc", "command": "x"}))
            .await
            .unwrap(),
        "unknown_agent",
    );
    assert!(message.contains("list_agents"), "{message}");
    expect_error(
        &mcp.call_outcome("select_agent", json!({"agent_id": "no-such-pc"}))
            .await
            .unwrap(),
        "unknown_agent",
    );
}

#[tokio::test]
async fn a_pc_that_left_or_never_came_is_offline_and_the_others_still_answer() {
    let server = TestServer::start().await.unwrap();
    let gone = server.agent("pc-a").await.unwrap();
    let mut staying = server.agent("pc-b").await.unwrap();
    server.enroll("pc-never").await.unwrap();
    drop(gone);
    for _ in 0..500 {
        if server.state().fleet.registry.get("pc-a").is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mcp = server.mcp(server.admin_token());
    for id in ["pc-a", "pc-never"] {
        let message = expect_error(
            &mcp.call_outcome("shell_exec", json!({"agent_id": id, "command": "x"}))
                .await
                .unwrap(),
            "offline",
        );
        assert!(message.contains(id), "{message}");
    }
    let checked = mcp.call("select_agent", json!({"agent_id": "pc-a"})).await.unwrap();
    assert_eq!(
        (checked["agent_id"].clone(), checked["online"].clone()),
        (json!("pc-a"), json!(false))
    );
    let (_, outcome) = answered(
        &mcp,
        &mut staying,
        "shell_exec",
        json!({"agent_id": "pc-b", "command": "x"}),
        shell_result("b\n"),
    )
    .await;
    assert_eq!(outcome.structured["stdout"], "b\n");
}

#[tokio::test]
async fn a_user_reaches_only_its_hosts_and_learns_nothing_of_others() {
    let server = TestServer::start().await.unwrap();
    let mut mine = server.agent("pc-a").await.unwrap();
    let mut other = server.agent("pc-b").await.unwrap();
    let (_, alice) = server.user("alice", Role::User, &["pc-a"]).await.unwrap();
    let mcp = server.mcp(&alice);
    let message = expect_error(
        &mcp.call_outcome("shell_exec", json!({"agent_id": "pc-b", "command": "x"}))
            .await
            .unwrap(),
        "forbidden",
    );
    assert!(message.contains("alice"), "{message}");
    assert!(!other.has_request());
    let (_, outcome) = answered(
        &mcp,
        &mut mine,
        "shell_exec",
        json!({"agent_id": "pc-a", "command": "x"}),
        shell_result("a\n"),
    )
    .await;
    assert!(!outcome.is_error);
    let listed = mcp.call("list_agents", json!({})).await.unwrap();
    let ids: Vec<_> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["agent_id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("pc-a")], "a user sees only its hosts");
    let all = server
        .mcp(server.admin_token())
        .call("list_agents", json!({}))
        .await
        .unwrap();
    assert_eq!(all["agents"].as_array().unwrap().len(), 2);
    // An unknown id and a forbidden one look the same to a scoped user.
    expect_error(
        &mcp.call_outcome("shell_exec", json!({"agent_id": "no-such-pc", "command": "x"}))
            .await
            .unwrap(),
        "forbidden",
    );
    let _ = other
        .next_request(std::time::Duration::from_millis(50))
        .await
        .unwrap_err();
}

#[tokio::test]
async fn bad_arguments_are_refused_before_the_pc_sees_them() {
    let server = TestServer::start().await.unwrap();
    let mut agent = server.agent("pc-a").await.unwrap();
    let mcp = server.mcp(server.admin_token());
    for (args, says) in [
        (json!({"agent_id": "pc-a"}), "missing required argument `command`"),
        (
            json!({"agent_id": "pc-a", "command": "x", "bogus_arg": 1}),
            "unknown argument `bogus_arg`",
        ),
        (json!({"agent_id": "pc-a", "command": 42}), "must be a string"),
        (
            json!({"agent_id": "pc-a", "command": "x", "timeout_s": 0}),
            "between 1 and 3600",
        ),
    ] {
        let message = expect_error(&mcp.call_outcome("shell_exec", args).await.unwrap(), "bad_args");
        assert!(message.contains(says), "{message}");
    }
    assert!(!agent.has_request());
    let (_, outcome) = answered(
        &mcp,
        &mut agent,
        "shell_exec",
        json!({"agent_id": "pc-a", "command": "x"}),
        shell_result("ok\n"),
    )
    .await;
    assert!(!outcome.is_error, "still healthy after refusals");
}

#[tokio::test]
async fn an_unknown_tool_is_the_protocols_invalid_params_whatever_the_arguments() {
    let server = TestServer::start().await.unwrap();
    let mut agent = server.agent("pc-a").await.unwrap();
    let (_, alice) = server.user("alice", Role::User, &["pc-b"]).await.unwrap();
    // A PC online, one that does not exist, one out of alice's reach, and no target at
    // all: none may change the answer, or an unknown name would probe the fleet.
    for (token, args) in [
        (server.admin_token(), json!({"agent_id": "pc-a", "command": "x"})),
        (server.admin_token(), json!({"agent_id": "no-such-pc"})),
        (server.admin_token(), json!({"agent_id": 7})),
        (server.admin_token(), json!({})),
        (alice.as_str(), json!({"agent_id": "pc-a"})),
        (alice.as_str(), json!({"agent_id": "pc-b"})),
    ] {
        let error = server
            .mcp(token)
            .rpc_error("tools/call", json!({"name": "no_such_tool", "arguments": args}))
            .await
            .unwrap();
        assert_eq!(error["code"], -32602, "{args}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("\"no_such_tool\"") && message.contains("tools/list"),
            "{args}: {message}"
        );
        assert_eq!(error["data"]["tool"], "no_such_tool", "{args}: {error}");
    }
    // Without arguments at all, too.
    let error = server
        .mcp(server.admin_token())
        .rpc_error("tools/call", json!({"name": "no_such_tool"}))
        .await
        .unwrap();
    assert_eq!(error["code"], -32602, "{error}");
    assert!(agent.next_request(std::time::Duration::from_millis(50)).await.is_err());
}

#[tokio::test]
async fn an_agents_own_error_code_reaches_the_caller_unchanged() {
    let server = TestServer::start().await.unwrap();
    let mut agent = server.agent("fake").await.unwrap();
    let mcp = server.mcp(server.admin_token());
    let call = {
        let mcp = mcp.clone();
        tokio::spawn(async move {
            mcp.call_outcome("shell_exec", json!({"agent_id": "fake", "command": "rm -rf /"}))
                .await
        })
    };
    let request = agent.next_request(WAIT).await.unwrap();
    agent
        .fail(&request.id, "blocked", "refused by agent safety policy: rm -rf /")
        .unwrap();
    let outcome = call.await.unwrap().unwrap();
    let message = expect_error(&outcome, "blocked");
    assert!(
        outcome.text.starts_with("blocked:") && message.contains("safety policy"),
        "{message}"
    );
}
