//! The accounts API: superusers manage users (and the last enabled superuser stays);
//! everyone manages their own password, sessions and tokens, from a signed-in session
//! with the CSRF header and the password checked under the sign-in throttle; what a
//! password change, a reset and disabling end (sessions, OAuth grants, with
//! `revoke_tokens` the tokens); user ids never reused; and every state-changing request
//! in the audit log.

use crate::common;

use base64::Engine as _;
use common::{Restarted, Session, audit_until, person};
use kenny_server::principal::Role;
use kenny_testkit::{Reply, TestServer};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Digest as _;

const PASSWORD: &str = TestServer::PASSWORD;

fn user_named<'a>(users: &'a Reply, name: &str) -> &'a Value {
    users.body["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == name)
        .unwrap_or_else(|| panic!("no user {name} in {users:?}"))
}

async fn pat_status(server: &TestServer, pat: &str) -> u16 {
    server.api(pat).get("/api/me").await.unwrap().status
}

async fn signs_in(server: &TestServer, username: &str, password: &str) -> u16 {
    server.browser().sign_in(username, password).await.unwrap().status
}

fn labels(tokens: &Reply) -> Vec<Value> {
    tokens.body["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["label"].clone())
        .collect()
}

#[tokio::test]
async fn superusers_manage_users_and_the_last_enabled_superuser_stays() {
    let server = TestServer::start().await.unwrap();
    let api = server.api(server.admin_token());
    let created = api
        .post(
            "/api/users",
            json!({"username": "kim", "role": "user", "hosts": ["pc-a"]}),
        )
        .await
        .unwrap();
    assert_eq!(created.status, 201, "{created:?}");
    let kim = &created.body["user"];
    assert_eq!((&kim["role"], &kim["hosts"]), (&json!("user"), &json!(["pc-a"])));
    assert!(
        created.body["password"].as_str().unwrap().len() >= 12,
        "a password is generated and shown once"
    );
    let kim_id = kim["id"].as_i64().unwrap();
    let again = api
        .post("/api/users", json!({"username": "kim", "role": "user"}))
        .await
        .unwrap();
    assert_eq!(again.status, 409, "{again:?}");
    let wizard = api
        .post("/api/users", json!({"username": "x", "role": "wizard"}))
        .await
        .unwrap();
    assert_eq!(wizard.status, 400, "{wizard:?}");
    let extra = api
        .post("/api/users", json!({"username": "x", "role": "user", "extra": 1}))
        .await
        .unwrap();
    assert_eq!(
        (extra.status, extra.error_code()),
        (400, Some("bad_request")),
        "{extra:?}"
    );
    assert!(
        extra.error_message().contains("unknown field `extra`"),
        "the refusal names the field: {extra:?}"
    );

    let kim_path = format!("/api/users/{kim_id}");
    let r = api.patch(&kim_path, json!({"hosts": ["pc-a", "pc-b"]})).await.unwrap();
    assert_eq!(r.body["user"]["hosts"], json!(["pc-a", "pc-b"]), "{r:?}");
    let r = api.patch(&kim_path, json!({"role": "operator"})).await.unwrap();
    assert_eq!(r.body["user"]["role"], "operator", "{r:?}");
    assert_eq!(r.body["user"]["hosts"], json!([]), "an operator reaches every host");

    let users = api.get("/api/users").await.unwrap();
    let admin_path = format!("/api/users/{}", user_named(&users, "admin")["id"]);
    for change in [json!({"role": "operator"}), json!({"disabled": true})] {
        let r = api.patch(&admin_path, change.clone()).await.unwrap();
        assert_eq!(r.status, 409, "{change}: {r:?}");
        assert!(r.error_message().contains("last enabled superuser"), "{r:?}");
    }
    assert_eq!(api.delete(&admin_path).await.unwrap().status, 409);
    // With a second superuser, the first may step down.
    api.patch(&kim_path, json!({"role": "superuser"})).await.unwrap();
    assert_eq!(
        api.patch(&admin_path, json!({"role": "operator"}))
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        api.patch(&admin_path, json!({"role": "superuser"}))
            .await
            .unwrap()
            .status,
        403,
        "no longer a superuser"
    );

    let (_, op_token) = server.user("op", Role::Operator, &[]).await.unwrap();
    let op = server.api(&op_token);
    assert_eq!(op.get("/api/users").await.unwrap().status, 403);
    assert_eq!(
        op.post("/api/users", json!({"username": "y", "role": "superuser"}))
            .await
            .unwrap()
            .status,
        403
    );
}

#[tokio::test]
async fn cookie_requests_need_the_csrf_header_and_a_new_token_is_shown_once() {
    let server = TestServer::start().await.unwrap();
    person(&server, "dana", Role::Operator, &[]).await;
    let dana = Session::sign_in(&server, "dana", PASSWORD).await;
    let me = dana.get("/api/me").await;
    assert_eq!(me.status, 200, "{me:?}");
    assert_eq!(me.body["user"]["username"], "dana");
    assert_eq!(me.body["credential_kind"], "session");

    let body = json!({"label": "laptop"});
    let r = dana.send_with(Method::POST, "/api/me/tokens", Some(&body), None).await;
    assert_eq!(
        (r.status, r.error_code()),
        (403, Some("csrf")),
        "no CSRF header, no state change: {r:?}"
    );
    let r = dana
        .send_with(Method::POST, "/api/me/tokens", Some(&body), Some("wrong"))
        .await;
    assert_eq!(r.status, 403, "{r:?}");
    let r = dana
        .post("/api/me/tokens", json!({"label": "laptop", "password": PASSWORD}))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let token = r.body["token"].as_str().unwrap().to_owned();
    let listed = dana.get("/api/me/tokens").await;
    assert_eq!(labels(&listed), [json!("laptop")]);
    assert!(
        !listed.body.to_string().contains(&token),
        "shown once, listed without the secret"
    );

    let api = server.api(&token);
    assert_eq!(api.get("/api/me").await.unwrap().body["user"]["username"], "dana");
    let r = dana
        .delete(&format!("/api/me/tokens/{}", listed.body["tokens"][0]["id"]))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(
        api.get("/api/me").await.unwrap().status,
        401,
        "a revoked token stops working at once"
    );
}

#[tokio::test]
async fn a_password_change_ends_every_other_session() {
    let server = TestServer::start().await.unwrap();
    person(&server, "erin", Role::User, &[]).await;
    let other = Session::sign_in(&server, "erin", PASSWORD).await;
    let erin = Session::sign_in(&server, "erin", PASSWORD).await;
    assert_eq!(
        erin.get("/api/me/sessions").await.body["sessions"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let change = |current: &str, new: &str| json!({"current_password": current, "new_password": new});
    let r = erin.post("/api/me/password", change("nope", "another long one")).await;
    assert_eq!(r.status, 403, "{r:?}");
    let r = erin.post("/api/me/password", change(PASSWORD, "short")).await;
    assert_eq!(r.status, 400, "{r:?}");
    let r = erin
        .post("/api/me/password", change(PASSWORD, "another long one"))
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(
        erin.get("/api/me").await.status,
        200,
        "the session that changed it stays"
    );
    assert_eq!(other.get("/api/me").await.status, 401, "every other session ends");
    let sessions = erin.get("/api/me/sessions").await;
    let sessions = sessions.body["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["current"], true);

    assert_eq!(signs_in(&server, "erin", PASSWORD).await, 401);
    assert_eq!(signs_in(&server, "erin", "another long one").await, 303);
}

#[tokio::test]
async fn disabling_a_user_stops_its_tokens_and_sessions_at_once() {
    let server = TestServer::start().await.unwrap();
    let (_, pat) = server.user("fred", Role::Operator, &[]).await.unwrap();
    let session = Session::sign_in(&server, "fred", PASSWORD).await;
    let (fred, admin) = (server.api(&pat), server.api(server.admin_token()));
    let me = fred.get("/api/me").await.unwrap();
    assert_eq!(me.status, 200);
    let fred_path = format!("/api/users/{}", me.body["user"]["id"]);
    let r = admin.patch(&fred_path, json!({"disabled": true})).await.unwrap();
    assert_eq!(r.body["user"]["disabled"], true, "{r:?}");
    assert_eq!(fred.get("/api/me").await.unwrap().status, 401);
    assert_eq!(session.get("/api/me").await.status, 401);
    assert_eq!(admin.delete(&fred_path).await.unwrap().status, 204);
    assert_eq!(admin.get(&fred_path).await.unwrap().status, 404);
}

#[tokio::test]
async fn own_sessions_can_be_listed_and_ended() {
    let server = TestServer::start().await.unwrap();
    person(&server, "gus", Role::User, &[]).await;
    let phone = Session::sign_in(&server, "gus", PASSWORD).await;
    let laptop = Session::sign_in(&server, "gus", PASSWORD).await;
    let sessions = laptop.get("/api/me/sessions").await;
    let theirs = sessions.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["current"] == false)
        .unwrap();
    let path = format!("/api/me/sessions/{}", theirs["id"]);
    assert_eq!(laptop.delete(&path).await.status, 204);
    assert_eq!(phone.get("/api/me").await.status, 401);
    assert_eq!(laptop.delete(&path).await.status, 404);
}

/// Hole: a leaked PAT could change the password (locking the owner out) and mint more
/// PATs that outlive its own revocation.
#[tokio::test]
async fn a_token_cannot_change_the_password_or_mint_tokens() {
    let server = TestServer::start().await.unwrap();
    let (_, pat) = server.user("ivy", Role::Operator, &[]).await.unwrap();
    let api = server.api(&pat);
    let r = api
        .post(
            "/api/me/password",
            json!({"current_password": PASSWORD, "new_password": "taken over by a token"}),
        )
        .await
        .unwrap();
    assert_eq!((r.status, r.error_code()), (403, Some("session_required")), "{r:?}");
    let r = api
        .post("/api/me/tokens", json!({"label": "spare key", "password": PASSWORD}))
        .await
        .unwrap();
    assert_eq!((r.status, r.error_code()), (403, Some("session_required")), "{r:?}");
    assert_eq!(
        labels(&api.get("/api/me/tokens").await.unwrap()),
        [json!("testkit")],
        "no token was minted"
    );
    assert_eq!(
        signs_in(&server, "ivy", PASSWORD).await,
        303,
        "the password is unchanged"
    );
}

/// Hole: a stolen session could guess the current password without limit.
#[tokio::test]
async fn the_password_change_checks_the_password_under_the_sign_in_throttle() {
    let server = TestServer::start().await.unwrap();
    person(&server, "jay", Role::Operator, &[]).await;
    let jay = Session::sign_in(&server, "jay", PASSWORD).await;
    let change = |current: &str| json!({"current_password": current, "new_password": "a new long password"});
    for attempt in 0..5 {
        let r = jay.post("/api/me/password", change(&format!("guess-{attempt}"))).await;
        assert_eq!((r.status, r.error_code()), (403, Some("wrong_password")), "{r:?}");
    }
    let r = jay.post("/api/me/password", change(PASSWORD)).await;
    assert_eq!((r.status, r.error_code()), (429, Some("throttled")), "{r:?}");
    assert!(retry_in_seconds(r.error_message()) >= 1, "{r:?}");
    assert_eq!(
        signs_in(&server, "jay", PASSWORD).await,
        303,
        "nothing changed while throttled"
    );
}

/// The seconds in a throttled answer's "... in N seconds".
fn retry_in_seconds(message: &str) -> u64 {
    let after = message
        .split(" in ")
        .nth(1)
        .unwrap_or_else(|| panic!("no wait in {message:?}"));
    after.split_whitespace().next().unwrap().parse().unwrap()
}

/// Hole: a session left open or stolen could mint a token that outlives it.
#[tokio::test]
async fn minting_a_token_needs_the_password_under_the_sign_in_throttle() {
    let server = TestServer::start().await.unwrap();
    person(&server, "max", Role::Operator, &[]).await;
    let max = Session::sign_in(&server, "max", PASSWORD).await;
    let r = max.post("/api/me/tokens", json!({"label": "laptop"})).await;
    assert_eq!((r.status, r.error_code()), (400, Some("password_required")), "{r:?}");
    assert!(r.error_message().contains("current password"), "{r:?}");
    for attempt in 0..5 {
        let r = max
            .post(
                "/api/me/tokens",
                json!({"label": "laptop", "password": format!("guess-{attempt}")}),
            )
            .await;
        assert_eq!((r.status, r.error_code()), (403, Some("wrong_password")), "{r:?}");
    }
    let r = max
        .post("/api/me/tokens", json!({"label": "laptop", "password": PASSWORD}))
        .await;
    assert_eq!((r.status, r.error_code()), (429, Some("throttled")), "{r:?}");
    assert_eq!(
        max.get("/api/me/tokens").await.body["tokens"],
        json!([]),
        "no token was minted"
    );
}

/// An OAuth grant `user` gave a client for `/mcp`.
struct Grant {
    client_id: String,
    access_token: String,
    refresh_token: String,
}

async fn oauth_grant(server: &TestServer, user: &str) -> Grant {
    let redirect = "http://127.0.0.1:53682/callback";
    let http = reqwest::Client::new();
    let registered: Value = http
        .post(format!("{}/oauth/register", server.base_url()))
        .json(&json!({"redirect_uris": [redirect], "client_name": "manual"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = registered["client_id"].as_str().unwrap().to_owned();
    let verifier = "v".repeat(64);
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    let browser = server.browser();
    assert_eq!(browser.sign_in(user, PASSWORD).await.unwrap().status, 303);
    let mcp = format!("{}/mcp", server.base_url());
    let authorize = reqwest::Url::parse_with_params(
        &format!("{}/oauth/authorize", server.base_url()),
        [
            ("response_type", "code"),
            ("client_id", &client_id),
            ("redirect_uri", redirect),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("state", "st"),
            ("resource", &mcp),
        ],
    )
    .unwrap();
    let consent = browser.get(authorize.as_str()).await.unwrap();
    assert_eq!(consent.status, 200, "{}", consent.text);
    let mut fields = consent.hidden_fields();
    fields.insert("decision".into(), "approve".into());
    let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let approved = browser.post_form("/oauth/authorize", &pairs).await.unwrap();
    assert_eq!(approved.status, 303, "{}", approved.text);
    let code = reqwest::Url::parse(approved.location().unwrap())
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let tokens: Value = http
        .post(format!("{}/oauth/token", server.base_url()))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("client_id", &client_id),
            ("redirect_uri", redirect),
            ("code_verifier", &verifier),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    Grant {
        client_id,
        access_token: tokens["access_token"].as_str().unwrap().to_owned(),
        refresh_token: tokens["refresh_token"].as_str().unwrap().to_owned(),
    }
}

impl Grant {
    async fn mcp_status(&self, server: &TestServer) -> u16 {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
        reqwest::Client::new()
            .post(format!("{}/mcp", server.base_url()))
            .bearer_auth(&self.access_token)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn refresh_status(&self, server: &TestServer) -> u16 {
        reqwest::Client::new()
            .post(format!("{}/oauth/token", server.base_url()))
            .form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", &self.refresh_token),
                ("client_id", &self.client_id),
            ])
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

#[tokio::test]
async fn a_password_change_ends_sessions_and_grants_and_with_revoke_tokens_the_tokens() {
    let server = TestServer::start().await.unwrap();
    let (_, pat) = server.user("kay", Role::Operator, &[]).await.unwrap();
    let grant = oauth_grant(&server, "kay").await;
    assert_eq!(grant.mcp_status(&server).await, 200);
    let other = Session::sign_in(&server, "kay", PASSWORD).await;
    let kay = Session::sign_in(&server, "kay", PASSWORD).await;
    let r = kay
        .post(
            "/api/me/password",
            json!({"current_password": PASSWORD, "new_password": "second password"}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(other.get("/api/me").await.status, 401, "other sessions end");
    assert_eq!(grant.mcp_status(&server).await, 401, "OAuth access ends");
    assert_eq!(
        grant.refresh_status(&server).await,
        400,
        "and the grant cannot be refreshed"
    );
    assert_eq!(pat_status(&server, &pat).await, 200, "tokens stay unless asked");

    let r = kay
        .post(
            "/api/me/password",
            json!({"current_password": "second password", "new_password": "third password", "revoke_tokens": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(
        pat_status(&server, &pat).await,
        401,
        "with revoke_tokens, every token ends at once"
    );
    let tokens = kay.get("/api/me/tokens").await;
    let tokens = tokens.body["tokens"].as_array().unwrap();
    assert!(
        !tokens.is_empty() && tokens.iter().all(|t| t["revoked_at"].is_string()),
        "{tokens:?}"
    );
    assert_eq!(kay.get("/api/me").await.body["user"]["live_tokens"], 0);
    let bad = kay
        .post(
            "/api/me/password",
            json!({"current_password": "third password", "new_password": "x".repeat(10), "revoke_tokens": "yes"}),
        )
        .await;
    assert_eq!(bad.status, 400, "{bad:?}");
    assert!(
        bad.error_message().contains("revoke_tokens"),
        "revoke_tokens is a boolean: {bad:?}"
    );
}

/// A disabled user's tokens never work while it is disabled; its sessions and OAuth
/// grants end for good; with `revoke_tokens` its tokens end for good as well.
#[tokio::test]
async fn disabling_suspends_tokens_and_revoke_tokens_ends_them() {
    let server = TestServer::start().await.unwrap();
    let (_, pat) = server.user("lee", Role::Operator, &[]).await.unwrap();
    let grant = oauth_grant(&server, "lee").await;
    let admin = server.api(server.admin_token());
    let users = admin.get("/api/users").await.unwrap();
    let lee = user_named(&users, "lee");
    assert_eq!(
        lee["live_tokens"], 1,
        "the dashboard can say how many tokens a revocation stops"
    );
    let lee_path = format!("/api/users/{}", lee["id"]);

    let r = admin.patch(&lee_path, json!({"disabled": true})).await.unwrap();
    assert_eq!((r.status, &r.body["tokens_revoked"]), (200, &json!(0)), "{r:?}");
    assert_eq!(pat_status(&server, &pat).await, 401, "suspended while disabled");
    assert_eq!(grant.mcp_status(&server).await, 401);
    admin.patch(&lee_path, json!({"disabled": false})).await.unwrap();
    assert_eq!(
        pat_status(&server, &pat).await,
        200,
        "back when enabled: the admin did not revoke it"
    );
    assert_eq!(
        grant.refresh_status(&server).await,
        400,
        "but the OAuth grant stays ended"
    );

    let r = admin
        .patch(&lee_path, json!({"disabled": true, "revoke_tokens": true}))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["tokens_revoked"], 1);
    assert_eq!(r.body["user"]["live_tokens"], 0);
    admin.patch(&lee_path, json!({"disabled": false})).await.unwrap();
    assert_eq!(pat_status(&server, &pat).await, 401, "revoked for good");
}

#[tokio::test]
async fn a_password_reset_ends_every_session_and_with_revoke_tokens_the_tokens() {
    let server = TestServer::start().await.unwrap();
    let (mo_id, pat) = server.user("mo", Role::User, &[]).await.unwrap();
    let session = Session::sign_in(&server, "mo", PASSWORD).await;
    let admin = server.api(server.admin_token());
    let reset = format!("/api/users/{mo_id}/password");
    let r = admin.post(&reset, json!({})).await.unwrap();
    assert_eq!((r.status, &r.body["tokens_revoked"]), (200, &json!(0)), "{r:?}");
    assert_eq!(session.get("/api/me").await.status, 401);
    assert_eq!(pat_status(&server, &pat).await, 200);
    let r = admin.post(&reset, json!({"revoke_tokens": true})).await.unwrap();
    assert_eq!((r.status, &r.body["tokens_revoked"]), (200, &json!(1)), "{r:?}");
    assert_eq!(pat_status(&server, &pat).await, 401);
    let new_password = r.body["password"].as_str().unwrap();
    assert_eq!(signs_in(&server, "mo", new_password).await, 303);
}

/// Hole: ids came from the highest row, so deleting the newest account and creating
/// another handed its id (and whatever still named that id) to a stranger.
#[tokio::test]
async fn user_ids_are_never_reused_even_across_a_restart() {
    let server = TestServer::start().await.unwrap();
    let admin_token = server.admin_token().to_owned();
    let api = server.api(&admin_token);
    let create = |name: &str| api.post("/api/users", json!({"username": name, "role": "user"}));
    let first = create("nia").await.unwrap().body["user"]["id"].as_i64().unwrap();
    let second = create("oli").await.unwrap().body["user"]["id"].as_i64().unwrap();
    assert!(second > first);
    assert_eq!(api.delete(&format!("/api/users/{second}")).await.unwrap().status, 204);

    let restarted = Restarted::from(server).await;
    let api = restarted.api(&admin_token);
    let r = api
        .post("/api/users", json!({"username": "pia", "role": "user"}))
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    assert!(
        r.body["user"]["id"].as_i64().unwrap() > second,
        "the deleted id stays retired: {r:?}"
    );
    assert_eq!(api.get(&format!("/api/users/{second}")).await.unwrap().status, 404);
}

/// Every state-changing API request is in the audit log: who, which credential, from
/// where, which action on which path, and how it ended; failures included.
#[tokio::test]
async fn api_actions_are_audited_with_who_from_where_and_how_they_ended() {
    let server = TestServer::start().await.unwrap();
    let api = server.api(server.admin_token());
    let r = api
        .post(
            "/api/users",
            json!({"username": "carol", "role": "operator", "password": "a long password 123"}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    let r = api
        .put(
            "/api/policy",
            json!({"rules": [{"id": "x", "applies_to": "nope", "pattern": "a", "reason": "r"}]}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 400, "{r:?}");

    let rows = audit_until(&server, "?limit=50", |rows| {
        rows.iter().any(|e| e["tool"] == "POST /api/users") && rows.iter().any(|e| e["tool"] == "PUT /api/policy")
    })
    .await;
    let created: Vec<&Value> = rows.iter().filter(|e| e["tool"] == "POST /api/users").collect();
    assert_eq!(created.len(), 1, "{rows:?}");
    let row = created[0];
    assert_eq!(
        [
            &row["user"],
            &row["credential_kind"],
            &row["client_addr"],
            &row["target"],
            &row["outcome"]
        ],
        [
            &json!("admin"),
            &json!("pat"),
            &json!("127.0.0.1"),
            &json!("/api/users"),
            &json!("ok")
        ],
        "{row}"
    );
    let refused: Vec<&Value> = rows.iter().filter(|e| e["tool"] == "PUT /api/policy").collect();
    assert_eq!(refused.len(), 1, "{rows:?}");
    assert_eq!(
        (&refused[0]["outcome"], &refused[0]["error_code"]),
        (&json!("refused"), &json!("400")),
        "{refused:?}"
    );
    assert!(
        !rows.iter().any(|e| e["tool"].as_str().unwrap().starts_with("GET ")),
        "reads are not actions: {rows:?}"
    );
    assert!(
        !serde_json::to_string(&rows).unwrap().contains("a long password"),
        "no secret ever lands in the trail (the new user's password went in a body)"
    );
}
