//! Bearer authentication in front of `/mcp` and `/api`, the DNS-rebinding guard, and
//! the audit log's filtering, order and redaction.

use crate::common;

use common::{answered, audit, expect_error, shell_result};
use kenny_server::principal::Role;
use kenny_testkit::TestServer;
use serde_json::{Value, json};

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
}

async fn post_mcp(server: &TestServer, authorization: Option<&str>, host: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", server.base_url()))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize());
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    if let Some(host) = host {
        request = request.header("host", host);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn mcp_answers_only_a_live_personal_token() {
    let server = TestServer::start().await.unwrap();
    let agent_token = server.enroll("pc-x").await.unwrap().token;
    for authorization in [
        None,
        Some("Bearer kenny_pat_definitelynotarealtoken".to_owned()),
        Some("Bearer".to_owned()),
        Some("Basic YWRtaW46c29tZS1wYXNzd29yZA==".to_owned()),
        // A per-agent token is another kind of credential.
        Some(format!("Bearer {agent_token}")),
    ] {
        let response = post_mcp(&server, authorization.as_deref(), None).await;
        assert_eq!(response.status(), 401, "{authorization:?}");
        let challenge = response.headers()["www-authenticate"].to_str().unwrap().to_owned();
        assert!(
            challenge.starts_with("Bearer") && challenge.contains("resource_metadata="),
            "{challenge}"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
    let ok = post_mcp(&server, Some(&format!("Bearer {}", server.admin_token())), None).await;
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn mcp_refuses_a_host_it_was_not_configured_for_and_says_how_to_fix_it() {
    let server = TestServer::start().await.unwrap();
    let port = server.base_url().rsplit(':').next().unwrap().to_owned();
    let response = post_mcp(
        &server,
        Some(&format!("Bearer {}", server.admin_token())),
        Some(&format!("rebound.example:{port}")),
    )
    .await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "forbidden_host");
    assert!(body["error"]["message"].as_str().unwrap().contains("--public-url"));
}

#[tokio::test]
async fn the_api_refuses_no_token_a_bad_one_and_an_agents() {
    let server = TestServer::start().await.unwrap();
    let agent_token = server.enroll("pc-x").await.unwrap().token;
    for api in [
        server.anonymous(),
        server.api("kenny_pat_definitelynotarealtoken"),
        server.api(&agent_token),
    ] {
        let reply = api.get("/api/audit").await.unwrap();
        assert_eq!(
            (reply.status, reply.error_code()),
            (401, Some("unauthorized")),
            "{reply:?}"
        );
    }
}

#[tokio::test]
async fn the_audit_log_filters_orders_newest_first_and_never_holds_arguments_or_tokens() {
    let server = TestServer::start().await.unwrap();
    let mut a = server.agent("pc-a").await.unwrap();
    let mut b = server.agent("pc-b").await.unwrap();
    let (_, bob) = server.user("bob", Role::User, &["pc-b"]).await.unwrap();
    let admin = server.mcp(server.admin_token());
    let secrets: Vec<String> = (0..3).map(|i| format!("secret-a-{i}-7f3e")).collect();
    for secret in &secrets {
        let (_, outcome) = answered(
            &admin,
            &mut a,
            "shell_exec",
            json!({"agent_id": "pc-a", "command": format!("echo {secret}")}),
            shell_result("x\n"),
        )
        .await;
        assert!(!outcome.is_error);
    }
    answered(
        &admin,
        &mut b,
        "shell_exec",
        json!({"agent_id": "pc-b", "command": "echo secret-b-9c1d"}),
        shell_result("x\n"),
    )
    .await;
    // An agent-side failure is audited as an error.
    let call = {
        let admin = admin.clone();
        tokio::spawn(async move {
            admin
                .call_outcome(
                    "fs_read",
                    json!({"agent_id": "pc-a", "path": "/nonexistent/secret-a-0-7f3e"}),
                )
                .await
        })
    };
    let request = a.next_request(common::WAIT).await.unwrap();
    a.fail(&request.id, "not_found", "no such file").unwrap();
    expect_error(&call.await.unwrap().unwrap(), "not_found");
    expect_error(
        &server
            .mcp(&bob)
            .call_outcome(
                "shell_exec",
                json!({"agent_id": "pc-a", "command": "echo secret-a-0-7f3e"}),
            )
            .await
            .unwrap(),
        "forbidden",
    );

    // Outcomes are written just after the answers.
    let mut rows = Vec::new();
    for _ in 0..500 {
        rows = audit(&server, "?agent_id=pc-a&limit=100").await;
        if rows.len() == 5 && rows.iter().all(|r| r["outcome"] != "sent") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(rows.len(), 5, "one row per forwarded call and per refusal: {rows:?}");
    let everything = serde_json::to_string(&audit(&server, "?limit=1000").await).unwrap();
    for secret in secrets
        .iter()
        .map(String::as_str)
        .chain(["secret-b-9c1d", server.admin_token(), bob.as_str()])
    {
        assert!(!everything.contains(secret), "{secret} leaked into the audit log");
    }
    for row in &rows {
        for field in [
            "id",
            "at",
            "user",
            "credential_kind",
            "credential_id",
            "agent_id",
            "tool",
            "args_digest",
            "outcome",
            "error_code",
            "duration_ms",
            "client_addr",
        ] {
            assert!(row.get(field).is_some(), "audit row lacks {field}: {row}");
        }
        assert_eq!(row["agent_id"], "pc-a");
        assert_eq!(row["client_addr"], "127.0.0.1", "where the call came from is recorded");
    }
    let count = |f: &dyn Fn(&Value) -> bool| rows.iter().filter(|r| f(r)).count();
    assert_eq!(
        count(&|r| r["tool"] == "shell_exec" && r["outcome"] == "ok" && r["user"] == "admin"),
        3
    );
    assert_eq!(
        count(&|r| r["tool"] == "fs_read" && r["outcome"] == "error" && r["error_code"] == "not_found"),
        1
    );
    assert_eq!(rows[0]["outcome"], "refused", "newest first: the refusal came last");
    assert_eq!(
        (rows[0]["error_code"].clone(), rows[0]["user"].clone()),
        (json!("forbidden"), json!("bob"))
    );
    let ats: Vec<&str> = rows.iter().map(|r| r["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] >= w[1]), "{ats:?}");

    let only_b = audit(&server, "?agent_id=pc-b&limit=100").await;
    assert_eq!(only_b.len(), 1);
    assert_eq!(
        (only_b[0]["agent_id"].clone(), only_b[0]["outcome"].clone()),
        (json!("pc-b"), json!("ok"))
    );
    assert_eq!(audit(&server, "?limit=2").await.len(), 2);
    let newest = audit(&server, "?agent_id=pc-a&limit=1").await;
    assert_eq!(newest[0]["id"], rows[0]["id"]);
}

/// A call's audit row is dated by the server's clock, the same clock that retention
/// and expiry read: moved on a year, the row of a call made now says so.
#[tokio::test]
async fn audit_rows_are_dated_by_the_servers_clock() {
    let server = TestServer::start().await.unwrap();
    let mut a = server.agent("pc-a").await.unwrap();
    let admin = server.mcp(server.admin_token());
    let year = std::time::Duration::from_secs(365 * 24 * 3600);
    let a_year_on = kenny_server::clock::Clock::system();
    a_year_on.advance(year);
    server.clock().advance(year);
    let earliest = a_year_on.now();
    let (_, outcome) = answered(
        &admin,
        &mut a,
        "shell_exec",
        json!({"agent_id": "pc-a", "command": "echo dated"}),
        shell_result("dated\n"),
    )
    .await;
    assert!(!outcome.is_error);
    let rows = common::audit_until(&server, "?tool=shell_exec", |rows| {
        rows.iter().any(|r| r["outcome"] == "ok")
    })
    .await;
    // Stored timestamps sort as strings.
    let at = rows[0]["at"].as_str().unwrap();
    let latest = server.clock().now();
    assert!(
        *at >= *earliest && *at <= *latest,
        "{at} is not between {earliest} and {latest}"
    );
}
