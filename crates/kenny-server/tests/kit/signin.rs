//! Signing in to the dashboard: the first-run set-up that creates the superuser once,
//! sign in and out with the session cookie's flags, CSRF on every form, `next` that
//! cannot leave the site, and a session cookie that never opens `/mcp`. Then the
//! throttle, with clients told apart by their own loopback address (127.0.0.x) as on a
//! real network: a caller's failures block only that caller, the account-wide count
//! never blocks a browser that signed in before (its device cookie, bound to its
//! account) or an attempt with a valid second factor, and wrong codes sent with the
//! right password are limited per account whatever the address. Last, TOTP itself:
//! enrolment, codes and recovery codes each good once, and turning it off needs a
//! signed-in session and the password. Codes are computed from the secret the API
//! returns at the server's clock, which the tests move on instead of waiting for the
//! next 30 s step.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use kenny_server::principal::Role;
use kenny_testkit::{Browser, Page, TestServer};
use reqwest::header::{COOKIE, HeaderMap, HeaderValue, ORIGIN, SET_COOKIE};
use serde_json::{Value, json};
use totp_rs::TOTP;

const PASSWORD: &str = TestServer::PASSWORD;

/// The server's limits (its `ratelimit` module): failures per caller and account in a
/// minute, per account from browsers it has not seen in ten minutes, and wrong
/// second-factor codes per account in fifteen.
const CALLER_LIMIT: usize = 5;
const ACCOUNT_LIMIT: usize = 20;
const SECOND_FACTOR_LIMIT: usize = 5;

/// The `Set-Cookie` line of a page that sets `name`, if it sets it.
fn set_cookie<'a>(page: &'a Page, name: &str) -> Option<&'a str> {
    page.headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|line| line.starts_with(&format!("{name}=")))
}

/// The value of a `Set-Cookie` line.
fn cookie_value(line: &str) -> &str {
    line.split(';').next().unwrap().split_once('=').unwrap().1
}

/// Opens `/login` and posts it with `fields` besides the form token.
async fn sign_in_with(browser: &Browser, fields: &[(&str, &str)]) -> Page {
    let form = browser.get("/login").await.unwrap();
    assert_eq!(form.status, 200, "{}", form.text);
    let token = form.form_token().expect("a form token on /login");
    let mut all = fields.to_vec();
    all.push(("form_token", &token));
    browser.post_form("/login", &all).await.unwrap()
}

fn origin(value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(ORIGIN, HeaderValue::from_str(value).unwrap());
    headers
}

// ---- first-run set-up, sign in and out ------------------------------------------

#[tokio::test]
async fn first_run_setup_creates_the_superuser_once_and_signs_it_in() {
    let server = TestServer::builder().without_users().start().await.unwrap();
    let browser = server.browser();
    assert_eq!(browser.get("/").await.unwrap().location(), Some("/setup"));
    assert_eq!(browser.get("/login").await.unwrap().location(), Some("/setup"));
    let form = browser.get("/setup").await.unwrap();
    assert_eq!(form.status, 200);
    assert!(form.text.contains("Create the first superuser"), "{}", form.text);
    let token = form.form_token().unwrap();
    let fields = |confirm: &'static str| {
        [
            ("username", "root"),
            ("password", PASSWORD),
            ("confirm", confirm),
            ("form_token", token.as_str()),
        ]
    };

    // The same fields without the form token's cookie are refused (a cross-site post).
    let stranger = server.browser();
    assert_eq!(
        stranger.post_form("/setup", &fields(PASSWORD)).await.unwrap().status,
        403
    );

    let differ = browser.post_form("/setup", &fields("different")).await.unwrap();
    assert_eq!(differ.status, 400);
    assert!(differ.text.contains("differ"), "{}", differ.text);

    let done = browser.post_form("/setup", &fields(PASSWORD)).await.unwrap();
    assert_eq!((done.status, done.location()), (303, Some("/")), "{}", done.text);
    assert!(
        set_cookie(&done, "kenny_device_1").is_some(),
        "the set-up browser is known: {:?}",
        done.headers
    );
    let home = browser.get("/").await.unwrap();
    assert_eq!(home.status, 200);
    assert!(
        home.text.contains("Signed in as <strong>root</strong> (superuser)"),
        "{}",
        home.text
    );

    assert_eq!(
        server.browser().get("/setup").await.unwrap().location(),
        Some("/login"),
        "set-up is gone once an account exists"
    );
    // The account works for the CLI too.
    let store = server.state().accounts.store.clone();
    let pat = tokio::task::spawn_blocking(move || kenny_server::admin::create_token(&store, "root", Some("cli")))
        .await
        .unwrap()
        .unwrap();
    assert!(pat.starts_with("kenny_pat_"), "{pat}");
    let me = server.api(&pat).get("/api/me").await.unwrap();
    assert_eq!(
        (me.status, &me.body["user"]["username"]),
        (200, &json!("root")),
        "{me:?}"
    );
}

#[tokio::test]
async fn signing_in_sets_a_lax_httponly_session_cookie_and_signing_out_ends_the_session() {
    let server = TestServer::start().await.unwrap();
    server.user("alice", Role::Operator, &[]).await.unwrap();
    let browser = server.browser();
    assert_eq!(browser.get("/").await.unwrap().location(), Some("/login"));

    let bad = browser.sign_in("alice", "wrong password").await.unwrap();
    assert_eq!(bad.status, 401);
    assert!(bad.text.contains("Wrong user name or password"), "{}", bad.text);

    let ok = browser.sign_in("alice", PASSWORD).await.unwrap();
    assert_eq!((ok.status, ok.location()), (303, Some("/")), "{}", ok.text);
    let cookie = set_cookie(&ok, "kenny_session").expect("a session cookie").to_owned();
    for flag in ["HttpOnly", "SameSite=Lax", "Max-Age="] {
        assert!(cookie.contains(flag), "{flag} missing: {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain http on loopback: no Secure flag: {cookie}"
    );

    let home = browser.get("/").await.unwrap();
    assert!(
        home.text.contains("Signed in as <strong>alice</strong> (operator)"),
        "{}",
        home.text
    );
    let csrf = home.hidden_fields()["csrf"].clone();
    let replay = Visitor::new(&server, "127.0.0.1");
    replay.set_cookie("kenny_session", cookie_value(&cookie));
    assert_eq!(replay.get("/").await.status, 200, "the cookie alone is the session");
    assert_eq!(
        browser
            .post_form("/logout", &[("csrf", "forged")])
            .await
            .unwrap()
            .status,
        403,
        "logout needs the CSRF token"
    );
    assert_eq!(
        browser.get("/").await.unwrap().status,
        200,
        "still signed in after the forged logout"
    );
    let out = browser.post_form("/logout", &[("csrf", &csrf)]).await.unwrap();
    assert_eq!((out.status, out.location()), (303, Some("/login")));

    // The old cookie is dead on the server, not just cleared in the browser.
    assert_eq!(replay.get("/").await.location(), Some("/login"));
}

/// A session lasts twelve hours on the server's clock, whatever the browser keeps: past
/// that the same cookie opens neither the pages nor the API.
#[tokio::test]
async fn a_session_ends_twelve_hours_after_sign_in_on_the_servers_clock() {
    let server = TestServer::start().await.unwrap();
    server.user("dora", Role::Operator, &[]).await.unwrap();
    let browser = server.browser();
    assert_eq!(browser.sign_in("dora", PASSWORD).await.unwrap().status, 303);
    let home = browser.get("/").await.unwrap();
    assert_eq!(home.status, 200);
    let me = || async { browser.get("/api/me").await.unwrap().status };
    assert_eq!(me().await, 200, "signed in");
    server.clock().advance(Duration::from_secs(11 * 3600 + 59 * 60));
    assert_eq!(browser.get("/").await.unwrap().status, 200, "still within twelve hours");
    assert_eq!(me().await, 200);
    server.clock().advance(Duration::from_secs(2 * 60));
    assert_eq!(
        browser.get("/").await.unwrap().location(),
        Some("/login"),
        "past twelve hours the cookie is no session"
    );
    assert_eq!(me().await, 401);
}

/// A page in the signed-in browser can make it send the cookie to `/mcp`; the cookie
/// must not count there (only bearer tokens do).
#[tokio::test]
async fn a_session_cookie_never_opens_mcp() {
    let server = TestServer::start().await.unwrap();
    server.user("alice", Role::Operator, &[]).await.unwrap();
    let browser = Visitor::new(&server, "127.0.0.1");
    assert_eq!(browser.login("alice", PASSWORD, None).await.status, 303);
    assert_eq!(browser.get("/").await.status, 200, "signed in");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let r = browser
        .post_json("/mcp", &list, &[("accept", "application/json, text/event-stream")])
        .await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert!(r.header("www-authenticate").starts_with("Bearer"), "{:?}", r.headers);
}

#[tokio::test]
async fn the_sixth_wrong_password_within_a_minute_gets_429_even_with_the_right_one_next() {
    let server = TestServer::start().await.unwrap();
    server.user("bob", Role::User, &[]).await.unwrap();
    let browser = server.browser();
    for attempt in 0..CALLER_LIMIT {
        let wrong = browser.sign_in("bob", &format!("wrong-{attempt}")).await.unwrap();
        assert_eq!(wrong.status, 401, "attempt {}", attempt + 1);
    }
    let sixth = browser.sign_in("bob", "wrong-again").await.unwrap();
    assert_eq!(sixth.status, 429, "{}", sixth.text);
    let retry: u64 = sixth.header("retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // While throttled even the right password is refused: nothing is checked.
    assert_eq!(browser.sign_in("bob", PASSWORD).await.unwrap().status, 429);
}

#[tokio::test]
async fn next_cannot_redirect_off_site() {
    let server = TestServer::start().await.unwrap();
    server.user("carol", Role::Operator, &[]).await.unwrap();
    for evil in ["https://evil.example/", "//evil.example/x", "/\\evil.example"] {
        let r = sign_in_with(
            &server.browser(),
            &[("username", "carol"), ("password", PASSWORD), ("next", evil)],
        )
        .await;
        assert_eq!((r.status, r.location()), (303, Some("/")), "{evil}");
    }
    let r = sign_in_with(
        &server.browser(),
        &[
            ("username", "carol"),
            ("password", PASSWORD),
            ("next", "/somewhere?x=1"),
        ],
    )
    .await;
    assert_eq!((r.status, r.location()), (303, Some("/somewhere?x=1")));
}

#[tokio::test]
async fn cross_site_form_posts_are_refused_and_same_site_ones_accepted() {
    let server = TestServer::start().await.unwrap();
    server.user("olga", Role::Operator, &[]).await.unwrap();
    let browser = server.browser();
    let token = browser.get("/login").await.unwrap().form_token().unwrap();
    let fields = [("username", "olga"), ("password", PASSWORD), ("form_token", &token)];
    let r = browser
        .post_form_with("/login", &fields, origin("https://evil.example"))
        .await
        .unwrap();
    assert_eq!(r.status, 403);
    assert!(set_cookie(&r, "kenny_session").is_none(), "{:?}", r.headers);
    let ok = browser
        .post_form_with("/login", &fields, origin(server.base_url()))
        .await
        .unwrap();
    assert_eq!(ok.status, 303, "{}", ok.text);
}

// ---- the throttle: nobody locks the owner out from outside ----------------------

/// A browser whose connections come from `address` (any of 127.0.0.0/8), so the
/// throttle sees a client of its own. Like the kit's [`Browser`] it keeps cookies and
/// follows no redirect; it can also be handed cookies, and send JSON to `/api` with
/// the session's CSRF token.
struct Visitor {
    http: reqwest::Client,
    base: String,
    cookies: Mutex<BTreeMap<String, String>>,
}

impl Visitor {
    fn new(server: &TestServer, address: &str) -> Visitor {
        Visitor {
            http: reqwest::Client::builder()
                .local_address(address.parse::<std::net::IpAddr>().unwrap())
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: server.base_url().to_owned(),
            cookies: Mutex::default(),
        }
    }

    async fn get(&self, path: &str) -> Page {
        self.send(self.http.get(format!("{}{path}", self.base))).await
    }

    /// Signs in through `/login`, with an authenticator or recovery code if given.
    async fn login(&self, username: &str, password: &str, code: Option<&str>) -> Page {
        let form = self.get("/login").await;
        assert_eq!(form.status, 200, "{}", form.text);
        let token = form.form_token().unwrap();
        let mut fields = vec![("username", username), ("password", password), ("form_token", &token)];
        fields.extend(code.map(|c| ("code", c)));
        self.send(self.http.post(format!("{}/login", self.base)).form(&fields))
            .await
    }

    /// The signed-in session's CSRF token, from the dashboard's sign-out form.
    async fn csrf(&self) -> String {
        let home = self.get("/").await;
        home.hidden_fields()
            .remove("csrf")
            .unwrap_or_else(|| panic!("not signed in: {}", home.text))
    }

    async fn sign_out(&self) {
        let csrf = self.csrf().await;
        let request = self.http.post(format!("{}/logout", self.base)).form(&[("csrf", csrf)]);
        assert_eq!(self.send(request).await.status, 303);
    }

    async fn post_json(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Page {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request).await
    }

    /// A JSON call to `/api` as the dashboard's script makes it: the session cookie
    /// and its CSRF token in `X-CSRF-Token`. Returns the status and the JSON body.
    async fn api(&self, path: &str, body: Value) -> (u16, Value) {
        let csrf = self.csrf().await;
        let page = self.post_json(path, &body, &[("x-csrf-token", &csrf)]).await;
        (page.status, serde_json::from_str(&page.text).unwrap_or(Value::Null))
    }

    fn set_cookie(&self, name: &str, value: &str) {
        self.jar().insert(name.to_owned(), value.to_owned());
    }

    fn jar(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.cookies.lock().unwrap()
    }

    async fn send(&self, mut request: reqwest::RequestBuilder) -> Page {
        let cookie: Vec<String> = self.jar().iter().map(|(k, v)| format!("{k}={v}")).collect();
        if !cookie.is_empty() {
            request = request.header(COOKIE, cookie.join("; "));
        }
        let response = request.send().await.unwrap();
        for line in response.headers().get_all(SET_COOKIE) {
            let line = line.to_str().unwrap();
            let (name, value) = line.split(';').next().unwrap().split_once('=').unwrap();
            if value.is_empty() || line.contains("Max-Age=0") {
                self.jar().remove(name);
            } else {
                self.jar().insert(name.to_owned(), value.to_owned());
            }
        }
        Page {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            text: response.text().await.unwrap(),
        }
    }
}

/// Wrong passwords for `user` from enough addresses (127.0.`octet`.x) to trip the
/// account-wide count.
async fn flood(server: &TestServer, user: &str, octet: u8) {
    let addresses = ACCOUNT_LIMIT.div_ceil(CALLER_LIMIT) + 1;
    for n in 1..=addresses {
        let guesser = Visitor::new(server, &format!("127.0.{octet}.{n}"));
        for attempt in 0..CALLER_LIMIT {
            let r = guesser.login(user, &format!("guess-{n}-{attempt}"), None).await;
            assert!(matches!(r.status, 401 | 429), "{}: {}", r.status, r.text);
        }
    }
}

#[tokio::test]
async fn a_flood_of_wrong_passwords_cannot_lock_out_a_browser_that_signed_in_before() {
    let server = TestServer::start().await.unwrap();
    server.user("root", Role::Superuser, &[]).await.unwrap();
    let owner = Visitor::new(&server, "127.0.0.2");
    let first = owner.login("root", PASSWORD, None).await;
    assert_eq!(first.status, 303, "{}", first.text);
    // The server sees each visitor's own address.
    let sessions: Value = serde_json::from_str(&owner.get("/api/me/sessions").await.text).unwrap();
    assert_eq!(sessions["sessions"][0]["client"], "127.0.0.2", "{sessions}");
    owner.sign_out().await;

    // One attacker address: throttled after five failures, for itself only.
    let attacker = Visitor::new(&server, "127.0.0.3");
    for attempt in 0..CALLER_LIMIT {
        assert_eq!(
            attacker.login("root", &format!("wrong-{attempt}"), None).await.status,
            401
        );
    }
    assert_eq!(
        attacker.login("root", PASSWORD, None).await.status,
        429,
        "the attacker's address waits"
    );

    // Guessing spread over many addresses trips the account-wide count ...
    flood(&server, "root", 1).await;
    let stranger = Visitor::new(&server, "127.0.9.1").login("root", PASSWORD, None).await;
    assert_eq!(
        stranger.status, 429,
        "a browser never seen before waits, even with the right password"
    );

    // ... but the owner's browser still signs in, typo first.
    assert_eq!(
        owner.login("root", "typo", None).await.status,
        401,
        "the owner's browser is not throttled"
    );
    assert_eq!(owner.login("root", PASSWORD, None).await.status, 303);
    assert!(owner.get("/").await.text.contains("Signed in as <strong>root</strong>"));
    // The stranger was told how to get in, and when to retry.
    assert!(
        stranger.text.contains("browser you have used before"),
        "{}",
        stranger.text
    );
    assert!(!stranger.header("retry-after").is_empty(), "{:?}", stranger.headers);
    // It knows the browser by a cookie only the sign-in form's post carries.
    let (device_cookie, device) = first
        .headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|line| {
            line.starts_with("kenny_device_")
                .then(|| (line.split('=').next().unwrap(), line))
        })
        .expect("a device cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/login", "Max-Age=31536000"] {
        assert!(device.contains(attribute), "{attribute} missing: {device}");
    }

    // The device cookie counts, not the address: behind a shared address (a proxy, an
    // office NAT) the attacker's own address is no obstacle to the owner.
    let same_address = Visitor::new(&server, "127.0.0.3");
    for (name, value) in owner.jar().iter().filter(|(name, _)| *name != "kenny_session") {
        same_address.set_cookie(name, value);
    }
    assert_eq!(same_address.login("root", PASSWORD, None).await.status, 303);

    // A device cookie is bound to its account: it does not let another account's
    // attempts past that account's own count.
    let (other_id, _) = server.user("other", Role::Operator, &[]).await.unwrap();
    flood(&server, "other", 2).await;
    let borrowed = Visitor::new(&server, "127.0.9.2");
    assert_ne!(device_cookie, format!("kenny_device_{other_id}"));
    borrowed.set_cookie(&format!("kenny_device_{other_id}"), cookie_value(device));
    assert_eq!(borrowed.login("other", PASSWORD, None).await.status, 429);
}

/// What an authenticator app makes of an `otpauth://` URI.
fn authenticator(otpauth_uri: &str) -> TOTP {
    TOTP::from_url(otpauth_uri).unwrap_or_else(|e| panic!("{otpauth_uri}: {e:?}"))
}

/// The code an authenticator shows now, by the server's clock.
fn code_now(server: &TestServer, totp: &TOTP) -> String {
    totp.generate(server.clock().unix_secs())
}

/// A six-digit code that is no step's near now (the server allows one step of skew
/// either way).
fn wrong_code(server: &TestServer, totp: &TOTP) -> String {
    let now = server.clock().unix_secs();
    let near: Vec<String> = [now - 30, now, now + 30].map(|t| totp.generate(t)).into();
    ["000000", "111111", "123456", "654321"]
        .into_iter()
        .find(|c| !near.iter().any(|n| n == c))
        .unwrap()
        .to_owned()
}

/// Signs `user` in from 127.0.0.2 and turns its second factor on with the current
/// code; returns the authenticator and the recovery codes.
async fn turn_on_totp(server: &TestServer, user: &str) -> (TOTP, Vec<String>) {
    let browser = Visitor::new(server, "127.0.0.2");
    assert_eq!(browser.login(user, PASSWORD, None).await.status, 303);
    let (status, start) = browser.api("/api/me/totp", json!({"password": PASSWORD})).await;
    assert_eq!(status, 200, "{start}");
    let totp = authenticator(start["otpauth_uri"].as_str().unwrap());
    let (status, confirmed) = browser
        .api("/api/me/totp/confirm", json!({"code": code_now(server, &totp)}))
        .await;
    assert_eq!(status, 200, "{confirmed}");
    let recovery = confirmed["recovery_codes"].as_array().unwrap();
    (totp, recovery.iter().map(|c| c.as_str().unwrap().to_owned()).collect())
}

#[tokio::test]
async fn a_valid_second_factor_gets_past_the_account_wide_throttle_once() {
    let server = TestServer::start().await.unwrap();
    server.user("tina", Role::Superuser, &[]).await.unwrap();
    let (totp, _) = turn_on_totp(&server, "tina").await;

    flood(&server, "tina", 1).await;
    let stranger = Visitor::new(&server, "127.0.9.1");
    assert_eq!(
        stranger.login("tina", PASSWORD, None).await.status,
        429,
        "no code: the account-wide limit applies"
    );
    let wrong = wrong_code(&server, &totp);
    assert_eq!(stranger.login("tina", PASSWORD, Some(&wrong)).await.status, 429);

    // The enrolment used the current step; half a minute later the next step's code
    // is good and has not been used.
    server.clock().advance(Duration::from_secs(30));
    let code = code_now(&server, &totp);
    let r = Visitor::new(&server, "127.0.9.2")
        .login("tina", PASSWORD, Some(&code))
        .await;
    assert_eq!(r.status, 303, "{}", r.text);
    let replay = Visitor::new(&server, "127.0.9.3")
        .login("tina", PASSWORD, Some(&code))
        .await;
    assert_eq!(replay.status, 429, "a used code opens nothing");
}

#[tokio::test]
async fn the_password_alone_cannot_guess_the_code_from_many_addresses() {
    let server = TestServer::start().await.unwrap();
    server.user("uma", Role::Operator, &[]).await.unwrap();
    let (_, recovery) = turn_on_totp(&server, "uma").await;

    // Someone with the password guesses codes, each from an address of its own, so no
    // address reaches its own limit.
    for n in 1..=SECOND_FACTOR_LIMIT {
        let guesser = Visitor::new(&server, &format!("127.0.3.{n}"));
        assert_eq!(guesser.login("uma", PASSWORD, Some("not-a-code")).await.status, 401);
    }
    let r = Visitor::new(&server, "127.0.3.100")
        .login("uma", PASSWORD, Some(&recovery[0]))
        .await;
    assert_eq!(
        r.status, 429,
        "even a right code waits once the account has had its wrong ones"
    );
    assert!(
        r.text.contains("Too many wrong authenticator or recovery codes"),
        "{}",
        r.text
    );
    let retry: u64 = r.header("retry-after").parse().unwrap();
    assert!(retry > 0);
}

// ---- TOTP: enrolment, codes, recovery codes, turning it off ---------------------

#[tokio::test]
async fn totp_enrolment_sign_in_with_codes_and_recovery_codes_each_good_once_and_disable() {
    let server = TestServer::start().await.unwrap();
    let (_, pat) = server.user("tina", Role::Operator, &[]).await.unwrap();
    let browser = Visitor::new(&server, "127.0.0.1");
    assert_eq!(browser.login("tina", PASSWORD, None).await.status, 303);

    let (status, refused) = browser
        .api("/api/me/totp", json!({"password": "wrong password!"}))
        .await;
    assert_eq!(status, 403, "{refused}");
    let (status, start) = browser.api("/api/me/totp", json!({"password": PASSWORD})).await;
    assert_eq!(status, 200, "{start}");
    let secret = start["secret"].as_str().unwrap();
    let uri = url::Url::parse(start["otpauth_uri"].as_str().unwrap()).unwrap();
    assert_eq!((uri.scheme(), uri.host_str()), ("otpauth", Some("totp")), "{uri}");
    let query = |key: &str| -> Vec<String> {
        uri.query_pairs()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
            .collect()
    };
    assert_eq!(query("secret"), [secret]);
    assert_eq!(query("issuer"), ["kenny"]);
    let totp = authenticator(uri.as_str());
    assert_eq!(totp.get_secret_base32(), secret);

    let wrong = wrong_code(&server, &totp);
    let (status, body) = browser.api("/api/me/totp/confirm", json!({"code": wrong})).await;
    assert_eq!(status, 400, "{body}");
    let enabled = |server: &TestServer| {
        let api = server.api(&pat);
        async move { api.get("/api/me").await.unwrap().body["user"]["totp_enabled"].clone() }
    };
    assert_eq!(enabled(&server).await, false, "not on until a code is confirmed");
    let (status, confirmed) = browser
        .api("/api/me/totp/confirm", json!({"code": code_now(&server, &totp)}))
        .await;
    assert_eq!(status, 200, "{confirmed}");
    let recovery: Vec<String> = confirmed["recovery_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(recovery.len(), 10);
    assert_eq!(recovery.iter().collect::<std::collections::HashSet<_>>().len(), 10);
    assert_eq!(enabled(&server).await, true);
    let (status, again) = browser.api("/api/me/totp", json!({"password": PASSWORD})).await;
    assert_eq!(
        status, 409,
        "a second factor is not replaced without turning it off first: {again}"
    );
    let by_token = server
        .api(&pat)
        .post("/api/me/totp/disable", json!({"password": PASSWORD}))
        .await
        .unwrap();
    assert_eq!(
        (by_token.status, by_token.error_code()),
        (403, Some("session_required")),
        "tokens do not turn TOTP off"
    );

    let sign_in = |code: Option<String>| {
        let visitor = Visitor::new(&server, "127.0.0.1");
        async move { visitor.login("tina", PASSWORD, code.as_deref()).await }
    };
    let missing = sign_in(None).await;
    assert_eq!(missing.status, 401);
    assert!(missing.text.contains("authenticator"), "{}", missing.text);
    assert_eq!(sign_in(Some(wrong_code(&server, &totp))).await.status, 401);
    // The enrolment used this step's code; the next step brings a fresh one.
    server.clock().advance(Duration::from_secs(30));
    let code = code_now(&server, &totp);
    assert_eq!(sign_in(Some(code.clone())).await.status, 303);
    assert_eq!(sign_in(Some(code)).await.status, 401, "a code is good once");

    assert_eq!(
        sign_in(Some(recovery[0].to_uppercase())).await.status,
        303,
        "recovery codes work, in any case"
    );
    assert_eq!(
        sign_in(Some(recovery[0].clone())).await.status,
        401,
        "each recovery code works once"
    );

    let (status, _) = browser
        .api("/api/me/totp/disable", json!({"password": "wrong password!"}))
        .await;
    assert_eq!(status, 403);
    let (status, _) = browser.api("/api/me/totp/disable", json!({"password": PASSWORD})).await;
    assert_eq!(status, 204);
    assert_eq!(sign_in(None).await.status, 303, "off again: password alone");
}
