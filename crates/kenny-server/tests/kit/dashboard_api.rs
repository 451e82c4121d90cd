//! The dashboard's host actions (`/api/agent/{id}/...`, `/api/agents/{id}/update`),
//! agent enrollment and pages: scope-checked like MCP calls, each leaving an audit row
//! with who and from where, errors in the API's one shape with sensible statuses, and
//! pages that a scoped user cannot use to learn about other hosts. A real screen capture
//! under Xvfb stays in `tests/e2e/test_dashboard_api.py`.

use crate::common;

use std::time::Duration;

use base64::Engine as _;
use common::{Session, WAIT, api_error, audit_until, person};
use kenny_server::principal::Role;
use kenny_testkit::{AgentOptions, TestAgent, TestServer};
use reqwest::Method;
use serde_json::{Value, json};

const PASSWORD: &str = TestServer::PASSWORD;
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot really pixels";

/// What the agent answers a call with: a result, or an error code and message.
enum Answer {
    Result(Value),
    Error(&'static str, &'static str),
}

/// Lets `agent` take the next call, checks that it is `tool` with no arguments (the
/// dashboard's actions take none), and answers it.
async fn serve(agent: &mut TestAgent, tool: &str, answer: Answer) {
    let request = agent.next_request(WAIT).await.unwrap();
    assert_eq!(request.tool, tool);
    assert!(request.args.is_empty(), "{:?}", request.args);
    match answer {
        Answer::Result(result) => agent.respond(&request.id, result).unwrap(),
        Answer::Error(code, message) => agent.fail(&request.id, code, message).unwrap(),
    }
}

fn telemetry() -> Value {
    json!({
        "collected_at": "2026-03-01T10:00:00Z",
        "snapshot": {
            "cpu": {"status": "ok", "summary": "4 cores, load 0.2", "load_15": 0.2, "cores": 4},
            "disk": {"status": "ok", "summary": "40% used", "volumes": [{"mount": "/", "percent_used": 40}]},
            "memory": {"status": "ok", "summary": "91% used", "percent_used": 91},
            "os": {"status": "ok", "summary": "Debian 13"},
        },
    })
}

/// The newest audit row for `tool` by `user`, once it has `outcome` (rows are written
/// in the background, and a forwarded call's row says `sent` until it is answered).
async fn audit_row(server: &TestServer, tool: &str, user: &str, outcome: &str) -> Value {
    let newest = |rows: &[Value]| rows.iter().find(|r| r["tool"] == tool && r["user"] == user).cloned();
    let rows = audit_until(server, "?limit=200", |rows| {
        newest(rows).is_some_and(|r| r["outcome"] == outcome)
    })
    .await;
    newest(&rows).unwrap()
}

#[tokio::test]
async fn every_host_action_is_audited_with_who_and_from_where() {
    let server = TestServer::start().await.unwrap();
    person(&server, "dana", Role::Operator, &[]).await;
    let mut agent = server.agent("pc-a").await.unwrap();
    let dana = Session::sign_in(&server, "dana", PASSWORD).await;

    let facts = dana.get("/api/agent/pc-a").await;
    assert_eq!(facts.status, 200, "{facts:?}");
    assert_eq!(facts.body["agent"]["agent_id"], "pc-a");
    assert_eq!(facts.body["agent"]["online"], true);
    assert_eq!(facts.body["agent"]["os"], "linux");
    assert_eq!(facts.body["screenshot"], Value::Null);

    let (refreshed, ()) = tokio::join!(
        dana.press("/api/agent/pc-a/refresh"),
        serve(&mut agent, "telemetry_collect", Answer::Result(telemetry()))
    );
    assert_eq!(refreshed.status, 200, "{refreshed:?}");
    let refreshed = refreshed.body;
    assert_eq!(refreshed["snapshot"], telemetry()["snapshot"]);
    assert_eq!(refreshed["collected_at"], "2026-03-01T10:00:00Z");
    // The server's own verdict: 91% memory is warn by the default thresholds, whatever
    // the agent said.
    let health = &refreshed["health"];
    assert_eq!(
        (
            &health["status"],
            &health["reasons"],
            &health["sections"][0]["section"],
            health["sections"].as_array().map(Vec::len)
        ),
        (
            &json!("warn"),
            &json!(["memory: memory is 91% used"]),
            &json!("memory"),
            Some(4)
        ),
        "{health}"
    );
    // Kept as the latest snapshot, where the telemetry API and the pages read it.
    let deadline = tokio::time::Instant::now() + WAIT;
    let latest = loop {
        let latest = dana.get("/api/agents/pc-a/telemetry").await;
        if latest.status == 200 && latest.body["collected_at"] == refreshed["collected_at"] {
            break latest.body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "refreshed snapshot not stored: {latest:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(latest["snapshot"], refreshed["snapshot"]);
    let facts = dana.get("/api/agent/pc-a").await.body;
    assert_eq!(facts["telemetry"]["collected_at"], refreshed["collected_at"]);
    assert_eq!(facts["telemetry"]["health"], refreshed["health"]);

    // A capture the agent could not take: the agent's reason reaches the dashboard.
    let no_display = "cannot open X display :0: connection refused; a graphical session must be running";
    let (capture, ()) = tokio::join!(
        dana.press("/api/agent/pc-a/screenshot"),
        serve(&mut agent, "screen_capture", Answer::Error("exec_failed", no_display))
    );
    assert_eq!(api_error(&capture, 502, "exec_failed"), no_display);
    api_error(&dana.get("/api/agent/pc-a/screenshot").await, 404, "not_found");

    let not_here = "remotehelp_start is not available on linux: it runs on windows (it drives Quick Assist, which exists only on Windows)";
    let (help, ()) = tokio::join!(
        dana.press("/api/agent/pc-a/remotehelp"),
        serve(&mut agent, "remotehelp_start", Answer::Error("unsupported", not_here))
    );
    assert_eq!(api_error(&help, 422, "unsupported"), not_here);

    // No newer build on this server: said plainly, with where to put one.
    let message = api_error(&dana.press("/api/agents/pc-a/update").await, 404, "not_found");
    assert!(
        message.contains("agent-releases") && message.contains("kenny-agent-<version>-linux-"),
        "{message}"
    );

    for (tool, outcome, code) in [
        ("agent_health", "ok", Value::Null),
        ("telemetry_collect", "ok", Value::Null),
        ("screen_capture", "error", json!("exec_failed")),
        ("remotehelp_start", "error", json!("unsupported")),
        ("agent_update", "refused", json!("not_found")),
    ] {
        let row = audit_row(&server, tool, "dana", outcome).await;
        assert_eq!(row["agent_id"], "pc-a", "{row}");
        assert_eq!(row["client_addr"], "127.0.0.1", "{row}");
        assert_eq!(row["credential_kind"], "session", "{row}");
        assert_eq!(row["error_code"], code, "{row}");
    }

    // The target is the one in the URL: a body naming another PC is refused, not obeyed.
    let message = api_error(
        &dana.post("/api/agents/pc-a/update", json!({"agent_id": "pc-b"})).await,
        400,
        "bad_args",
    );
    assert!(message.contains("pc-b") && message.contains("pc-a"), "{message}");
    assert!(!agent.has_request(), "no update order reached the agent");
}

#[tokio::test]
async fn a_capture_is_kept_and_served_as_png_with_who_took_it_and_when() {
    let server = TestServer::start().await.unwrap();
    let mut agent = server.agent("pc-a").await.unwrap();
    let api = server.api(server.admin_token());
    let answer = json!({
        "mime_type": "image/png",
        "width": 1280,
        "height": 720,
        "bytes": PNG.len(),
        "data_base64": base64::engine::general_purpose::STANDARD.encode(PNG),
    });
    let (r, ()) = tokio::join!(
        api.post_empty("/api/agent/pc-a/screenshot"),
        serve(&mut agent, "screen_capture", Answer::Result(answer))
    );
    let r = r.unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.body["url"], "/api/agent/pc-a/screenshot");
    let shot = &r.body["screenshot"];
    assert_eq!(
        (&shot["agent_id"], &shot["taken_by"]),
        (&json!("pc-a"), &json!("admin"))
    );
    assert_eq!((&shot["width"], &shot["height"]), (&json!(1280), &json!(720)));
    assert_eq!(shot["bytes"], PNG.len());

    let image = reqwest::Client::new()
        .get(format!("{}/api/agent/pc-a/screenshot", server.base_url()))
        .bearer_auth(server.admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(image.status(), 200);
    let header = |name: &str| image.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("content-type"), "image/png");
    assert_eq!(header("x-kenny-taken-by"), "admin");
    assert_eq!(header("x-kenny-taken-at"), shot["taken_at"].as_str().unwrap());
    assert_eq!(image.bytes().await.unwrap().as_ref(), PNG);
    assert_eq!(api.get("/api/agent/pc-a").await.unwrap().body["screenshot"], *shot);

    let row = audit_row(&server, "screen_capture", "admin", "ok").await;
    assert_eq!(row["agent_id"], "pc-a", "{row}");
    assert_eq!(row["client_addr"], "127.0.0.1", "{row}");
    assert_eq!(row["credential_kind"], "pat", "{row}");
}

#[tokio::test]
async fn hosts_out_of_scope_answer_like_unknown_ones_and_their_refusals_are_audited() {
    let server = TestServer::start().await.unwrap();
    let (_, kim_token) = server.user("kim", Role::User, &["pc-a"]).await.unwrap();
    let mut pc_a = server.agent("pc-a").await.unwrap();
    let mut pc_b = server.agent("pc-b").await.unwrap();
    let kim = server.api(&kim_token);
    assert_eq!(kim.get("/api/agent/pc-a").await.unwrap().status, 200);
    let unknown = api_error(&kim.get("/api/agent/nowhere").await.unwrap(), 404, "not_found");
    let hidden = api_error(&kim.get("/api/agent/pc-b").await.unwrap(), 404, "not_found");
    assert_eq!(hidden.replace("pc-b", "X"), unknown.replace("nowhere", "X"));
    for action in ["refresh", "screenshot", "remotehelp"] {
        let hidden = api_error(
            &kim.post_empty(&format!("/api/agent/pc-b/{action}")).await.unwrap(),
            404,
            "not_found",
        );
        let unknown = api_error(
            &kim.post_empty(&format!("/api/agent/nowhere/{action}")).await.unwrap(),
            404,
            "not_found",
        );
        assert_eq!(hidden.replace("pc-b", "X"), unknown.replace("nowhere", "X"), "{action}");
    }
    api_error(
        &kim.post_empty("/api/agents/pc-b/update").await.unwrap(),
        404,
        "not_found",
    );
    api_error(&kim.get("/api/agent/pc-b/screenshot").await.unwrap(), 404, "not_found");
    // Her own host works.
    let (r, ()) = tokio::join!(
        kim.post_empty("/api/agent/pc-a/refresh"),
        serve(&mut pc_a, "telemetry_collect", Answer::Result(telemetry()))
    );
    assert_eq!(r.unwrap().status, 200);

    let tools = [
        "agent_health",
        "telemetry_collect",
        "screen_capture",
        "remotehelp_start",
        "agent_update",
    ];
    let rows = audit_until(&server, "?agent_id=pc-b&limit=200", |rows| {
        tools
            .iter()
            .all(|tool| rows.iter().any(|r| r["tool"] == *tool && r["user"] == "kim"))
    })
    .await;
    let hers: Vec<&Value> = rows.iter().filter(|r| r["user"] == "kim").collect();
    for row in hers.iter().filter(|r| tools.iter().any(|t| r["tool"] == *t)) {
        assert_eq!(
            (&row["outcome"], &row["error_code"], &row["client_addr"]),
            (&json!("refused"), &json!("forbidden"), &json!("127.0.0.1")),
            "{row}"
        );
    }
    // Nothing ran on pc-b for her: every pc-b row of hers (the update's action row
    // too) is a refusal.
    assert!(hers.iter().all(|r| r["outcome"] == "refused"), "{hers:#?}");
    assert!(!pc_b.has_request(), "no call reached pc-b");
}

#[tokio::test]
async fn an_offline_or_unknown_host_and_a_missing_credential_get_their_own_errors() {
    let server = TestServer::start().await.unwrap();
    server.enroll("pc-off").await.unwrap();
    let api = server.api(server.admin_token());
    let message = api_error(
        &api.post_empty("/api/agent/pc-off/refresh").await.unwrap(),
        409,
        "offline",
    );
    assert!(message.contains("not connected"), "{message}");
    assert_eq!(
        api.get("/api/agent/pc-off").await.unwrap().body["agent"]["online"],
        false
    );
    // Ids that cannot be agents, and a host that does not exist.
    for bad in ["-x", "a%20b", &"x".repeat(65), "nope"] {
        api_error(
            &api.post_empty(&format!("/api/agent/{bad}/refresh")).await.unwrap(),
            404,
            "not_found",
        );
        api_error(&api.get(&format!("/api/agent/{bad}")).await.unwrap(), 404, "not_found");
    }
    api_error(
        &api.post_empty("/api/agents/nope/update").await.unwrap(),
        404,
        "not_found",
    );
    assert_eq!(api.get("/api/agent/pc-off/refresh").await.unwrap().status, 405);
    let anonymous = server.anonymous();
    api_error(
        &anonymous.post_empty("/api/agent/pc-off/refresh").await.unwrap(),
        401,
        "unauthorized",
    );
    api_error(
        &anonymous.get("/api/agent/pc-off/screenshot").await.unwrap(),
        401,
        "unauthorized",
    );
}

#[tokio::test]
async fn a_signed_in_request_without_the_csrf_header_reaches_no_handler() {
    let server = TestServer::start().await.unwrap();
    server.enroll("pc-off").await.unwrap();
    person(&server, "dana", Role::Operator, &[]).await;
    let dana = Session::sign_in(&server, "dana", PASSWORD).await;
    let forged = dana
        .send_with(Method::POST, "/api/agents/pc-off/update", None, None)
        .await;
    api_error(&forged, 403, "csrf");
    // Rows are written in order: once a later action of hers is in the log, a row for
    // the refused one would be too.
    assert_eq!(dana.get("/api/agent/pc-off").await.status, 200);
    let rows = audit_until(&server, "?limit=200", |rows| rows.iter().any(|r| r["user"] == "dana")).await;
    let hers: Vec<&Value> = rows.iter().filter(|r| r["user"] == "dana").collect();
    assert_eq!(hers.len(), 1, "a CSRF refusal reaches no handler: {hers:?}");
    assert_eq!(hers[0]["tool"], "agent_health");
}

#[tokio::test]
async fn a_silent_agent_is_a_504_and_an_answer_of_the_wrong_shape_a_502_and_not_kept() {
    let server = TestServer::builder()
        .configure(|c| c.call_timeout = Some(Duration::from_secs(1)))
        .start()
        .await
        .unwrap();
    let mut agent = server.agent("pc-slow").await.unwrap();
    let api = server.api(server.admin_token());
    let (r, request) = tokio::join!(api.post_empty("/api/agent/pc-slow/refresh"), agent.next_request(WAIT));
    let request = request.unwrap();
    assert_eq!(request.tool, "telemetry_collect");
    assert!(request.args.is_empty(), "{:?}", request.args);
    let message = api_error(&r.unwrap(), 504, "timeout");
    assert!(message.contains("pc-slow"), "{message}");

    // An answer that is not what the tool returns is a 502, not a stored screenshot.
    let svg = json!({"mime_type": "image/png", "data_base64": "PHN2Zz4="});
    let (r, ()) = tokio::join!(
        api.post_empty("/api/agent/pc-slow/screenshot"),
        serve(&mut agent, "screen_capture", Answer::Result(svg))
    );
    api_error(&r.unwrap(), 502, "exec_failed");
    api_error(
        &api.get("/api/agent/pc-slow/screenshot").await.unwrap(),
        404,
        "not_found",
    );
}

#[tokio::test]
async fn superusers_add_agents_and_get_the_install_command() {
    let server = TestServer::start().await.unwrap();
    let (_, op_token) = server.user("op", Role::Operator, &[]).await.unwrap();
    api_error(
        &server
            .api(&op_token)
            .post("/api/agents", json!({"agent_id": "den-pc"}))
            .await
            .unwrap(),
        403,
        "forbidden",
    );
    let api = server.api(server.admin_token());
    let r = api.post("/api/agents", json!({"agent_id": "den-pc"})).await.unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    let d = &r.body;
    assert_eq!(d["server"], server.base_url());
    let (token, pubkey) = (d["token"].as_str().unwrap(), d["server_pubkey"].as_str().unwrap());
    assert!(token.starts_with("kenny_agt_"), "{token}");
    assert_eq!(
        d["install_command"],
        format!(
            "kenny-agent install --server {} --agent-id den-pc --server-pubkey {pubkey} --enroll-token {token}",
            server.base_url()
        )
    );
    // The same values the CLI prints.
    assert_eq!(pubkey, server.enroll("other-pc").await.unwrap().server_pubkey);
    api_error(
        &api.post("/api/agents", json!({"agent_id": "den-pc"})).await.unwrap(),
        409,
        "conflict",
    );
    let message = api_error(
        &api.post("/api/agents", json!({"agent_id": "bad id"})).await.unwrap(),
        400,
        "bad_request",
    );
    assert!(message.contains("not valid"), "{message}");
    api_error(
        &api.post("/api/agents", json!({"agent_id": "x", "extra": 1}))
            .await
            .unwrap(),
        400,
        "bad_request",
    );
    let listed = api.get("/api/agents").await.unwrap();
    let den = listed.body["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent_id"] == "den-pc")
        .unwrap();
    assert_eq!(den["enrolled"], false);
}

#[tokio::test]
async fn pages_show_a_viewer_only_what_they_may_see() {
    let server = TestServer::start().await.unwrap();
    person(&server, "kim", Role::User, &["pc-a"]).await;
    let _pc_a = server.agent("pc-a").await.unwrap();
    let _pc_b = server.agent("pc-b").await.unwrap();

    let anonymous = server.browser();
    let r = anonymous.get("/hosts/pc-a").await.unwrap();
    assert_eq!((r.status, r.location()), (303, Some("/login?next=%2Fhosts%2Fpc-a")));
    assert_eq!(
        anonymous.get("/audit").await.unwrap().location(),
        Some("/login?next=%2Faudit")
    );
    let css = anonymous.get("/assets/dashboard.css").await.unwrap();
    assert!(css.header("content-type").starts_with("text/css"), "{css:?}");
    assert!(css.text.contains(":root"));
    let js = anonymous.get("/assets/dashboard.js").await.unwrap();
    assert!(js.header("content-type").starts_with("text/javascript"));
    assert!(js.text.contains("X-CSRF-Token"));
    for sink in [".innerHTML", "insertAdjacentHTML", "document.write"] {
        assert!(!js.text.contains(sink), "the script writes text only: {sink}");
    }

    let kim = Session::sign_in(&server, "kim", PASSWORD).await;
    let fleet = kim.browser.get("/").await.unwrap();
    assert_eq!(
        fleet.hidden_fields()["csrf"],
        kim.csrf,
        "the sign-out form and the script hold the same token"
    );
    assert!(fleet.text.contains("Signed in as <strong>kim</strong> (user)"));
    assert!(fleet.text.contains("href=\"/hosts/pc-a\"") && !fleet.text.contains("pc-b"));
    assert!(fleet.text.contains("<aside id=\"chat\"") && fleet.text.contains("Chat loads here"));
    assert!(!fleet.text.contains("href=\"/admin\""));
    let csp = fleet.header("content-security-policy");
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert!(!fleet.text.contains("<script>") && !fleet.text.contains(" onclick="));

    let host = kim.browser.get("/hosts/pc-a").await.unwrap();
    assert_eq!(host.status, 200);
    assert!(
        host.text
            .contains("<aside id=\"chat\" class=\"card chat\" data-agent=\"pc-a\"")
    );
    for action in ["refresh", "screenshot", "remotehelp", "update"] {
        assert!(host.text.contains(&format!("data-action=\"{action}\"")), "{action}");
    }
    let hidden = kim.browser.get("/hosts/pc-b").await.unwrap();
    let unknown = kim.browser.get("/hosts/nowhere").await.unwrap();
    assert_eq!((hidden.status, unknown.status), (404, 404));
    assert_eq!(hidden.text.replace("pc-b", "X"), unknown.text.replace("nowhere", "X"));

    assert_eq!(kim.browser.get("/admin").await.unwrap().status, 403);
    let audit_page = kim.browser.get("/audit?agent_id=pc-a").await.unwrap();
    assert_eq!(audit_page.status, 200);
    assert!(audit_page.text.contains("Audit log"));
    assert_eq!(kim.browser.get("/audit?before=x").await.unwrap().status, 400);

    // The sign-in pages keep their own (framing-only) policy and inline style.
    let login = server.browser().get("/login").await.unwrap();
    assert_eq!(login.header("content-security-policy"), "frame-ancestors 'none'");
}

/// What an agent says of itself (host name, version, architecture) and what it sends
/// back (telemetry) is text on the pages that show it, never markup.
#[tokio::test]
async fn what_an_agent_reports_is_text_on_the_pages() {
    const EVIL: &str = "<script>alert(1)</script>\"";
    const SHOWN: &str = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;";
    let server = TestServer::start().await.unwrap();
    person(&server, "dana", Role::Superuser, &[]).await;
    let mut options = AgentOptions::default();
    options.meta.hostname = format!("den{EVIL}");
    options.meta.version = format!("1.0{EVIL}");
    options.meta.arch = Some(EVIL.into());
    let mut agent = server.agent_with("pc-a", options).await.unwrap();
    let dana = Session::sign_in(&server, "dana", PASSWORD).await;

    let report = json!({
        "collected_at": "2026-03-01T10:00:00Z",
        "snapshot": {
            "disk": {"status": "warn", "summary": format!("full {EVIL}"), "volumes": [{"mount": EVIL, "percent_used": 99}]},
            "cpu": {"status": "ok", "summary": "idle"},
        },
    });
    let (refreshed, ()) = tokio::join!(
        dana.press("/api/agent/pc-a/refresh"),
        serve(&mut agent, "telemetry_collect", Answer::Result(report))
    );
    assert_eq!(refreshed.status, 200, "{refreshed:?}");
    // The pages read the stored snapshot, which the audit writer keeps in the background.
    let deadline = tokio::time::Instant::now() + WAIT;
    while dana.get("/api/agents/pc-a/telemetry").await.status != 200 {
        assert!(tokio::time::Instant::now() < deadline, "snapshot not stored");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let fleet = dana.browser.get("/").await.unwrap();
    assert_eq!(fleet.status, 200);
    assert!(!fleet.text.contains("<script>"), "{}", fleet.text);
    assert!(fleet.text.contains(&format!("<div class=\"muted\">den{SHOWN}</div>")));
    assert!(
        fleet
            .text
            .contains(&format!("<td data-label=\"Version\">1.0{SHOWN}</td>"))
    );
    assert!(fleet.text.contains(&format!(
        "<span class=\"summary\">disk: {SHOWN} is 99% full (threshold 97%)</span>"
    )));

    let host = dana.browser.get("/hosts/pc-a").await.unwrap();
    assert_eq!(host.status, 200);
    assert!(!host.text.contains("<script>"), "{}", host.text);
    assert!(host.text.contains(&format!("<dt>Hostname</dt><dd>den{SHOWN}</dd>")));
    assert!(host.text.contains(&format!("<dt>Architecture</dt><dd>{SHOWN}</dd>")));
    assert!(
        host.text
            .contains(&format!("<span class=\"summary\">full {SHOWN}</span>"))
    );
    assert!(
        host.text
            .contains("&quot;mount&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;\\&quot;&quot;"),
        "the section's details, as JSON text: {}",
        host.text
    );
}

/// The updates page and the campaign API from the dashboard: a superuser's session
/// acts with the CSRF token and only with it, an operator reads without buttons, a
/// `user` gets neither.
#[tokio::test]
async fn campaigns_from_the_dashboard_need_the_csrf_token_and_the_role() {
    let server = TestServer::start().await.unwrap();
    person(&server, "sue", Role::Superuser, &[]).await;
    person(&server, "olga", Role::Operator, &[]).await;
    person(&server, "kim", Role::User, &["pc-off"]).await;
    server.enroll("pc-off").await.unwrap();
    let releases = server.data_dir().join("agent-releases");
    std::fs::create_dir_all(&releases).unwrap();
    std::fs::write(releases.join("kenny-agent-0.2.0-linux-x86_64"), b"build").unwrap();

    let sue = Session::sign_in(&server, "sue", PASSWORD).await;
    let body = json!({"version": "0.2.0", "agents": ["pc-off"], "max_parallel": 2});
    let forged = sue.send_with(Method::POST, "/api/campaigns", Some(&body), None).await;
    assert_eq!(forged.status, 403, "no CSRF token, no campaign: {}", forged.body);
    let created = sue.post("/api/campaigns", body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_i64().unwrap();
    assert_eq!(created.body["agents"][0]["status"], "pending");

    let page = sue.browser.get("/updates").await.unwrap();
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.text
            .contains(&format!("data-api=\"POST /api/campaigns/{id}/pause\""))
    );
    assert!(page.text.contains("href=\"/updates\""));
    let paused = sue.press(&format!("/api/campaigns/{id}/pause")).await;
    assert_eq!((paused.status, paused.body["state"].as_str()), (200, Some("paused")));
    let page = sue.browser.get("/updates").await.unwrap();
    assert!(page.text.contains(&format!("/api/campaigns/{id}/resume")) && !page.text.contains("/pause\""));

    let olga = Session::sign_in(&server, "olga", PASSWORD).await;
    let page = olga.browser.get("/updates").await.unwrap();
    assert_eq!(page.status, 200);
    assert!(
        page.text.contains("pc-off") && !page.text.contains("data-api"),
        "{}",
        page.text
    );
    let refused = olga.press(&format!("/api/campaigns/{id}/cancel")).await;
    api_error(&refused, 403, "forbidden");

    let kim = Session::sign_in(&server, "kim", PASSWORD).await;
    assert_eq!(kim.browser.get("/updates").await.unwrap().status, 403);
    assert!(!kim.browser.get("/").await.unwrap().text.contains("href=\"/updates\""));
    api_error(&kim.get("/api/campaigns").await, 403, "forbidden");
    api_error(
        &kim.send_with(
            Method::PUT,
            "/api/agents/pc-off/channel",
            Some(&json!({"channel": "beta"})),
            Some(&kim.csrf),
        )
        .await,
        403,
        "forbidden",
    );
}
