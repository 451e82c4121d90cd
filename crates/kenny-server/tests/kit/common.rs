//! What the server's integration tests share: the refusal shapes every MCP and `/api`
//! client sees, answering one call on a test agent, a person signed in to the
//! dashboard, the audit log as it fills, and a server started again on its data.

#![allow(
    unreachable_pub,
    reason = "items of a test binary's module, shared by its other modules"
)]

use std::time::Duration;

use kenny_server::principal::Role;
use kenny_server::{RunningServer, ServeConfig};
use kenny_testkit::{Api, Browser, CallOutcome, Mcp, Reply, TestAgent, TestServer};
use reqwest::Method;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(10);

/// The documented refusal: `isError`, text `"<code>: <message>"`, structured
/// `{"error": {"code", "message"}}`. Returns the message.
pub fn expect_error(outcome: &CallOutcome, code: &str) -> String {
    assert!(outcome.is_error, "expected {code}, got success: {}", outcome.structured);
    assert_eq!(outcome.error_code(), Some(code), "{}", outcome.text);
    let message = outcome.structured["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!message.trim().is_empty(), "an error must say what went wrong");
    assert_eq!(outcome.text, format!("{code}: {message}"));
    message
}

/// Calls `tool` through `/mcp`, lets `agent` see the request, and answers it with
/// `result`; returns the request's arguments and the outcome.
pub async fn answered(
    mcp: &Mcp,
    agent: &mut TestAgent,
    tool: &str,
    args: Value,
    result: Value,
) -> (Value, CallOutcome) {
    let (mcp, name) = (mcp.clone(), tool.to_owned());
    let call = tokio::spawn(async move { mcp.call_outcome(&name, args).await });
    let request = agent.next_request(WAIT).await.expect("the call reaches the agent");
    assert_eq!(request.tool, tool);
    agent.respond(&request.id, result).expect("answer");
    let outcome = call.await.expect("call task").expect("MCP call");
    (Value::Object(request.args), outcome)
}

pub fn shell_result(stdout: &str) -> Value {
    serde_json::json!({"stdout": stdout, "stderr": "", "exit_code": 0, "truncated": false})
}

/// A refusal from `/api` in its one shape: the status, a body of exactly
/// `{"error": {"code", "message"}}`, and a message that says something. Returns the
/// message.
pub fn api_error(reply: &Reply, status: u16, code: &str) -> String {
    assert_eq!(reply.status, status, "expected {status} {code}: {reply:?}");
    let body = reply.body.as_object().expect("a JSON object");
    assert_eq!(body.keys().collect::<Vec<_>>(), ["error"], "{body:?}");
    let error = body["error"].as_object().expect("error is an object");
    assert_eq!(error.keys().collect::<Vec<_>>(), ["code", "message"], "{error:?}");
    assert_eq!(reply.error_code(), Some(code), "{reply:?}");
    let message = reply.error_message().to_owned();
    assert!(!message.trim().is_empty(), "an error must say what went wrong");
    message
}

/// A person with the kit's password and no token of their own.
pub async fn person(server: &TestServer, name: &str, role: Role, hosts: &[&str]) -> i64 {
    server.person(name, role, hosts).await.unwrap()
}

/// A person signed in to the dashboard: the browser holding the session cookie, and the
/// CSRF token its pages carry, calling `/api` as the dashboard's script does.
pub struct Session {
    pub browser: Browser,
    pub csrf: String,
}

impl Session {
    pub async fn sign_in(server: &TestServer, username: &str, password: &str) -> Session {
        let browser = server.browser();
        let signed_in = browser.sign_in(username, password).await.unwrap();
        assert_eq!(signed_in.status, 303, "{username} signs in: {}", signed_in.text);
        let page = browser.get("/").await.unwrap();
        assert_eq!(page.status, 200, "{}", page.text);
        let csrf = page.csrf_token().expect("a dashboard page carries the CSRF token");
        Session { browser, csrf }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(Method::POST, path, Some(&body)).await
    }

    /// A POST with no body, as the dashboard's action buttons send it.
    pub async fn press(&self, path: &str) -> Reply {
        self.send(Method::POST, path, None).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(Method::DELETE, path, None).await
    }

    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        self.send_with(method, path, body, Some(&self.csrf)).await
    }

    /// With another CSRF header than the session's, or none.
    pub async fn send_with(&self, method: Method, path: &str, body: Option<&Value>, csrf: Option<&str>) -> Reply {
        self.browser.send_json(method, path, body, csrf).await.unwrap()
    }
}

/// The audit log as the superuser reads it, newest first.
pub async fn audit(server: &TestServer, query: &str) -> Vec<Value> {
    let reply = server
        .api(server.admin_token())
        .get(&format!("/api/audit{query}"))
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body["entries"].as_array().cloned().unwrap()
}

/// The audit log once `done` holds for it: rows are written on the audit thread, just
/// after the answers they describe.
pub async fn audit_until(server: &TestServer, query: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let rows = audit(server, query).await;
        if done(&rows) {
            return rows;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the audit log never got there: {rows:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The server started again on a stopped test server's data directory: what survives
/// a restart is what the store kept.
pub struct Restarted {
    pub running: RunningServer,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Restarted {
    pub async fn from(server: TestServer) -> Restarted {
        Restarted::configured(server, |_| {}).await
    }

    /// Started again with settings of its own (the chat's, say), which a data directory
    /// does not keep.
    pub async fn configured(server: TestServer, tweak: impl FnOnce(&mut ServeConfig)) -> Restarted {
        let dir = server.stop().await.unwrap();
        let mut config = ServeConfig::new("127.0.0.1:0".parse().unwrap(), dir.path().join("data"));
        tweak(&mut config);
        let shutdown = CancellationToken::new();
        let running = kenny_server::server::start(config, shutdown.clone()).await.unwrap();
        Restarted {
            running,
            shutdown,
            _dir: dir,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.running.state.site.base_url
    }

    pub fn ws_url(&self) -> String {
        format!("{}/agent/ws", self.base_url().replacen("http://", "ws://", 1))
    }

    pub fn api(&self, token: &str) -> Api {
        Api::new(self.base_url(), Some(token))
    }
}

impl Drop for Restarted {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
