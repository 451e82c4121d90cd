//! kenny as its own OAuth 2.1 authorization server for `/mcp`: codes, tokens, their
//! lifetimes (on the server's clock, moved forward instead of waited for), rotation and
//! revocation, and every misuse of a grant refused. The whole flow driven by the
//! official SDK's OAuth client stays in `tests/e2e/test_oauth.py`.

use std::time::Duration;

use base64::Engine as _;
use kenny_server::principal::Role;
use kenny_testkit::{Browser, TestServer};
use serde_json::{Value, json};
use sha2::Digest as _;

const REDIRECT: &str = "http://127.0.0.1:53682/callback";

struct Flow<'a> {
    server: &'a TestServer,
    http: reqwest::Client,
}

impl<'a> Flow<'a> {
    async fn new(server: &'a TestServer) -> Flow<'a> {
        server.user("owner", Role::Operator, &[]).await.unwrap();
        Flow {
            server,
            http: reqwest::Client::new(),
        }
    }

    async fn register(&self) -> String {
        let r = self
            .http
            .post(format!("{}/oauth/register", self.server.base_url()))
            .json(&json!({"redirect_uris": [REDIRECT], "client_name": "manual"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        r.json::<Value>().await.unwrap()["client_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn pkce() -> (String, String) {
        let verifier = format!(
            "{:0>64}",
            kenny_server::secrets::new_password().replace(['+', '/', '='], "")
        );
        let challenge =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
        (verifier, challenge)
    }

    fn authorize_url(&self, client_id: &str, challenge: &str) -> String {
        let mcp = format!("{}/mcp", self.server.base_url());
        reqwest::Url::parse_with_params(
            &format!("{}/oauth/authorize", self.server.base_url()),
            [
                ("response_type", "code"),
                ("client_id", client_id),
                ("redirect_uri", REDIRECT),
                ("code_challenge", challenge),
                ("code_challenge_method", "S256"),
                ("state", "st-1"),
                ("resource", mcp.as_str()),
            ],
        )
        .unwrap()
        .to_string()
    }

    /// Signs in as the owner and approves the consent page; the code it redirects with.
    async fn code(&self, client_id: &str, challenge: &str) -> String {
        let browser = Browser::new(self.server.base_url());
        assert_eq!(
            browser.sign_in("owner", TestServer::PASSWORD).await.unwrap().status,
            303
        );
        let consent = browser.get(&self.authorize_url(client_id, challenge)).await.unwrap();
        assert_eq!(consent.status, 200, "{}", consent.text);
        let mut fields = consent.hidden_fields();
        fields.insert("decision".into(), "approve".into());
        let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let done = browser.post_form("/oauth/authorize", &pairs).await.unwrap();
        assert_eq!(done.status, 303, "{}", done.text);
        let location = reqwest::Url::parse(done.location().unwrap()).unwrap();
        let query: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
        assert_eq!(query["state"], "st-1");
        assert_eq!(query["iss"], self.server.base_url());
        query["code"].clone()
    }

    async fn token(&self, form: &[(&str, &str)]) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/oauth/token", self.server.base_url()))
            .form(form)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        if status == 200 {
            assert_eq!(r.headers()["cache-control"], "no-store");
        }
        (status, r.json().await.unwrap())
    }

    async fn exchange(&self, client_id: &str, code: &str, verifier: &str, redirect: &str) -> (u16, Value) {
        self.token(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("client_id", client_id),
            ("redirect_uri", redirect),
            ("code_verifier", verifier),
        ])
        .await
    }

    /// A fresh grant: (client id, its tokens).
    async fn grant(&self) -> (String, Value) {
        let client_id = self.register().await;
        let (verifier, challenge) = Self::pkce();
        let code = self.code(&client_id, &challenge).await;
        let (status, tokens) = self.exchange(&client_id, &code, &verifier, REDIRECT).await;
        assert_eq!(status, 200, "{tokens}");
        (client_id, tokens)
    }

    async fn refresh(&self, client_id: &str, refresh_token: &str) -> (u16, Value) {
        self.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", client_id),
        ])
        .await
    }

    async fn mcp_status(&self, access_token: &str) -> u16 {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
        self.http
            .post(format!("{}/mcp", self.server.base_url()))
            .bearer_auth(access_token)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

fn refused((status, body): (u16, Value)) {
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_grant")), "{body}");
    assert!(body.get("access_token").is_none());
}

fn access(tokens: &Value) -> &str {
    tokens["access_token"].as_str().unwrap()
}

#[tokio::test]
async fn a_code_is_spent_once_by_its_own_client_with_its_verifier_and_redirect() {
    let server = TestServer::start().await.unwrap();
    let flow = Flow::new(&server).await;
    let client_id = flow.register().await;
    let (verifier, challenge) = Flow::pkce();
    let wrong_verifier = format!("{}wrong", "x".repeat(43));
    refused(
        flow.exchange(
            &client_id,
            &flow.code(&client_id, &challenge).await,
            &wrong_verifier,
            REDIRECT,
        )
        .await,
    );
    refused(
        flow.exchange(
            &client_id,
            &flow.code(&client_id, &challenge).await,
            &verifier,
            "http://127.0.0.1:1/other",
        )
        .await,
    );
    let code = flow.code(&client_id, &challenge).await;
    let (status, tokens) = flow.exchange(&client_id, &code, &verifier, REDIRECT).await;
    assert_eq!(status, 200);
    assert_eq!(flow.mcp_status(access(&tokens)).await, 200);
    refused(flow.exchange(&client_id, &code, &verifier, REDIRECT).await);
    assert_eq!(
        flow.mcp_status(access(&tokens)).await,
        401,
        "a reused code revokes what it bought"
    );
    let other = flow.register().await;
    refused(
        flow.exchange(&other, &flow.code(&client_id, &challenge).await, &verifier, REDIRECT)
            .await,
    );
}

#[tokio::test]
async fn codes_and_access_tokens_expire_on_the_servers_clock() {
    let server = TestServer::start().await.unwrap();
    let flow = Flow::new(&server).await;
    let client_id = flow.register().await;
    let (verifier, challenge) = Flow::pkce();
    let code = flow.code(&client_id, &challenge).await;
    let settings = server.state().oauth.settings;
    server.clock().advance(settings.code_ttl + Duration::from_secs(1));
    refused(flow.exchange(&client_id, &code, &verifier, REDIRECT).await);

    let (_, tokens) = flow.grant().await;
    assert_eq!(flow.mcp_status(access(&tokens)).await, 200);
    server.clock().advance(settings.access_ttl - Duration::from_secs(5));
    assert_eq!(flow.mcp_status(access(&tokens)).await, 200, "not yet");
    server.clock().advance(Duration::from_secs(10));
    assert_eq!(flow.mcp_status(access(&tokens)).await, 401, "past its lifetime");
}

#[tokio::test]
async fn a_refresh_token_rotates_and_a_reused_one_ends_the_whole_grant() {
    let server = TestServer::start().await.unwrap();
    let flow = Flow::new(&server).await;
    let (client_id, tokens) = flow.grant().await;
    let old = tokens["refresh_token"].as_str().unwrap();
    let (status, new) = flow.refresh(&client_id, old).await;
    assert_eq!(status, 200, "{new}");
    assert_ne!(new["refresh_token"], tokens["refresh_token"]);
    assert_eq!(flow.mcp_status(access(&new)).await, 200);
    refused(flow.refresh(&client_id, old).await);
    refused(flow.refresh(&client_id, new["refresh_token"].as_str().unwrap()).await);
    assert_eq!(flow.mcp_status(access(&new)).await, 401);
}

#[tokio::test]
async fn refresh_tokens_expire_too() {
    let server = TestServer::start().await.unwrap();
    let flow = Flow::new(&server).await;
    let (client_id, tokens) = flow.grant().await;
    server
        .clock()
        .advance(server.state().oauth.settings.refresh_ttl + Duration::from_secs(1));
    refused(
        flow.refresh(&client_id, tokens["refresh_token"].as_str().unwrap())
            .await,
    );
}

#[tokio::test]
async fn revoking_or_disabling_the_owner_ends_the_tokens() {
    let server = TestServer::start().await.unwrap();
    let flow = Flow::new(&server).await;
    let (_, tokens) = flow.grant().await;
    let revoke = |token: String| {
        let http = flow.http.clone();
        let url = format!("{}/oauth/revoke", server.base_url());
        async move { http.post(url).form(&[("token", token)]).send().await.unwrap().status() }
    };
    assert_eq!(revoke(tokens["refresh_token"].as_str().unwrap().to_owned()).await, 200);
    assert_eq!(
        flow.mcp_status(access(&tokens)).await,
        401,
        "revoking the grant ends its access token"
    );
    assert_eq!(
        revoke("kenny_ort_unknown".into()).await,
        200,
        "an unknown token is not an error (RFC 7009)"
    );

    let (_, tokens) = flow.grant().await;
    let admin = server.api(server.admin_token());
    let users = admin.get("/api/users").await.unwrap().body;
    let owner = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "owner")
        .unwrap()["id"]
        .clone();
    assert_eq!(
        admin
            .patch(&format!("/api/users/{owner}"), json!({"disabled": true}))
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        flow.mcp_status(access(&tokens)).await,
        401,
        "a disabled user's token is dead"
    );
}

#[tokio::test]
async fn an_oauth_token_opens_mcp_and_nothing_else() {
    let server = TestServer::start().await.unwrap();
    let flow = Flow::new(&server).await;
    let (_, tokens) = flow.grant().await;
    assert_eq!(flow.mcp_status(access(&tokens)).await, 200);
    let api = server.api(access(&tokens));
    assert_eq!(api.get("/api/me").await.unwrap().status, 401);
    assert_eq!(api.post("/api/me/tokens", json!({})).await.unwrap().status, 401);
    assert_eq!(api.get("/api/users").await.unwrap().status, 401);
}

#[tokio::test]
async fn a_mismatched_refresh_burns_nothing_and_registration_is_bounded() {
    let server = TestServer::start().await.unwrap();
    let flow = Flow::new(&server).await;
    let (client_id, tokens) = flow.grant().await;
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let other = flow.register().await;
    refused(flow.refresh(&other, refresh).await);
    refused(
        flow.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", &client_id),
            ("resource", "https://elsewhere.example/mcp"),
        ])
        .await,
    );
    assert_eq!(
        flow.refresh(&client_id, refresh).await.0,
        200,
        "the mismatched attempts used nothing up"
    );

    let register = |body: Value| {
        let http = flow.http.clone();
        let url = format!("{}/oauth/register", server.base_url());
        async move { http.post(url).json(&body).send().await.unwrap().status().as_u16() }
    };
    let long = format!("{REDIRECT}?{}", "x".repeat(3000));
    assert_eq!(register(json!({"redirect_uris": [long]})).await, 400);
    let mut statuses = Vec::new();
    for _ in 0..25 {
        statuses.push(register(json!({"redirect_uris": [REDIRECT]})).await);
    }
    assert!(statuses.iter().filter(|s| **s == 201).count() < 25, "{statuses:?}");
    assert_eq!(statuses.last(), Some(&429));
}

/// What a client chose (its name, its redirect URI) and what its request carries
/// (`state`) are text on the consent page, never markup; the form still carries them
/// back exactly, and the app gets its code.
#[tokio::test]
async fn the_consent_page_shows_what_the_client_chose_as_text() {
    let name = "<script>alert(1)</script>\"";
    let redirect = format!("{REDIRECT}?x=\"><script>alert(2)</script>");
    let state = "\"><script>alert(3)</script>";
    let server = TestServer::start().await.unwrap();
    let flow = Flow::new(&server).await;
    let registered = flow
        .http
        .post(format!("{}/oauth/register", server.base_url()))
        .json(&json!({"redirect_uris": [redirect], "client_name": name}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);
    let client_id = registered.json::<Value>().await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let browser = Browser::new(server.base_url());
    assert_eq!(
        browser.sign_in("owner", TestServer::PASSWORD).await.unwrap().status,
        303
    );
    let (_, challenge) = Flow::pkce();
    let url = reqwest::Url::parse_with_params(
        &format!("{}/oauth/authorize", server.base_url()),
        [
            ("response_type", "code"),
            ("client_id", client_id.as_str()),
            ("redirect_uri", redirect.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", state),
        ],
    )
    .unwrap();
    let consent = browser.get(url.as_str()).await.unwrap();
    assert_eq!(consent.status, 200, "{}", consent.text);
    assert!(!consent.text.contains("<script>"), "{}", consent.text);
    let shown = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;";
    let title = format!("<h1>Allow an app calling itself \u{201c}{shown}\u{201d} to use kenny?</h1>");
    assert!(consent.text.contains(&title), "{}", consent.text);
    let redirect_field = "name=\"redirect_uri\" \
                          value=\"http://127.0.0.1:53682/callback?x=&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;\"";
    assert!(consent.text.contains(redirect_field));
    assert!(
        consent
            .text
            .contains("name=\"state\" value=\"&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt;\"")
    );
    assert!(consent.text.contains("<code>http://127.0.0.1:53682</code>"));

    let mut fields = consent.hidden_fields();
    assert_eq!(
        (fields["redirect_uri"].as_str(), fields["state"].as_str()),
        (redirect.as_str(), state)
    );
    fields.insert("decision".into(), "approve".into());
    let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let done = browser.post_form("/oauth/authorize", &pairs).await.unwrap();
    assert_eq!(done.status, 303, "{}", done.text);
    let location = reqwest::Url::parse(done.location().unwrap()).unwrap();
    let query: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
    assert_eq!(query["x"], "\"><script>alert(2)</script>");
    assert_eq!(query["state"], state);
    assert!(query["code"].starts_with("kenny_oac_"), "{query:?}");
}
