"""Dashboard sign-in: first-run set-up, sign in and out, session cookies, CSRF on
forms, throttling, and `next` that cannot leave the site."""

from __future__ import annotations

import re

import httpx
import pytest

from conftest import Kenny

PASSWORD = "a long enough password"


@pytest.fixture
def bare(tmp_path, request):
    """A server with no account at all (first run)."""
    k = Kenny(tmp_path)
    request.node._kenny = k
    try:
        k.start_server()
        yield k
    finally:
        k.close()


def _form_token(page: httpx.Response) -> str:
    m = re.search(r'name="form_token" value="([^"]+)"', page.text)
    assert m, f"no form token in {page.url}: {page.text[:300]}"
    return m.group(1)


def _csrf(page: httpx.Response) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m, f"no csrf field on {page.url}: {page.text[:300]}"
    return m.group(1)


def _login(http: httpx.Client, username: str, password: str, next_: str | None = None) -> httpx.Response:
    form = http.get("/login")
    assert form.status_code == 200, form.text
    data = {"username": username, "password": password, "form_token": _form_token(form)}
    if next_ is not None:
        data["next"] = next_
    return http.post("/login", data=data)


def _client(k: Kenny) -> httpx.Client:
    return httpx.Client(base_url=k.base_url, follow_redirects=False, timeout=15)


def test_first_run_setup_creates_the_superuser_once(bare):
    with _client(bare) as http:
        assert http.get("/").headers["location"] == "/setup"
        assert http.get("/login").headers["location"] == "/setup"
        form = http.get("/setup")
        assert form.status_code == 200 and "Create the first superuser" in form.text
        token = _form_token(form)
        # The same fields without the form token's cookie are refused (cross-site post).
        with _client(bare) as stranger:
            r = stranger.post("/setup", data={"username": "root", "password": PASSWORD, "confirm": PASSWORD, "form_token": token})
            assert r.status_code == 403
        r = http.post("/setup", data={"username": "root", "password": PASSWORD, "confirm": "different", "form_token": token})
        assert r.status_code == 400 and "differ" in r.text
        r = http.post("/setup", data={"username": "root", "password": PASSWORD, "confirm": PASSWORD, "form_token": token})
        assert r.status_code == 303 and r.headers["location"] == "/"
        assert any(c.startswith("kenny_device_1=") for c in r.headers.get_list("set-cookie")), "the set-up browser is known"
        home = http.get("/")
        assert home.status_code == 200 and "Signed in as <strong>root</strong> (superuser)" in home.text
    with _client(bare) as other:
        assert other.get("/setup").headers["location"] == "/login", "set-up is gone once an account exists"
    # The account works for the CLI too.
    assert bare.create_token("root").startswith("kenny_pat_")


def test_sign_in_cookie_and_sign_out(kenny):
    kenny.add_user("alice", "operator", password=PASSWORD)
    with _client(kenny) as http:
        assert http.get("/").headers["location"] == "/login"
        bad = _login(http, "alice", "wrong password")
        assert bad.status_code == 401 and "Wrong user name or password" in bad.text
        ok = _login(http, "alice", PASSWORD)
        assert ok.status_code == 303 and ok.headers["location"] == "/"
        cookie = next(c for c in ok.headers.get_list("set-cookie") if c.startswith("kenny_session="))
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Max-Age=" in cookie
        assert "Secure" not in cookie, "plain http on loopback: no Secure flag"
        home = http.get("/")
        assert "Signed in as <strong>alice</strong> (operator)" in home.text
        csrf = _csrf(home)
        assert http.post("/logout", data={"csrf": "forged"}).status_code == 403, "logout needs the CSRF token"
        assert http.get("/").status_code == 200, "still signed in after the forged logout"
        out = http.post("/logout", data={"csrf": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        # The old cookie is dead on the server, not just cleared in the browser.
        http.cookies.set("kenny_session", cookie.split(";")[0].split("=", 1)[1])
        assert http.get("/").headers["location"] == "/login"


def test_a_session_cookie_never_opens_mcp(kenny):
    """A page in the signed-in browser can make it send the cookie to /mcp; the cookie
    must not count there (only bearer tokens do)."""
    kenny.add_user("alice", "operator", password=PASSWORD)
    with _client(kenny) as http:
        assert _login(http, "alice", PASSWORD).status_code == 303
        assert http.get("/").status_code == 200, "signed in"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        r = http.post("/mcp", json=body, headers={"Accept": "application/json, text/event-stream"})
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"].startswith("Bearer"), r.headers


def test_sixth_wrong_password_within_a_minute_gets_429(kenny):
    kenny.add_user("bob", "user", password=PASSWORD)
    with _client(kenny) as http:
        for attempt in range(5):
            assert _login(http, "bob", f"wrong-{attempt}").status_code == 401, f"attempt {attempt + 1}"
        sixth = _login(http, "bob", "wrong-again")
        assert sixth.status_code == 429, sixth.text[:300]
        retry = int(sixth.headers["retry-after"])
        assert 1 <= retry <= 60
        # While throttled even the right password is refused: nothing is checked.
        assert _login(http, "bob", PASSWORD).status_code == 429


def test_next_cannot_redirect_off_site(kenny):
    kenny.add_user("carol", "operator", password=PASSWORD)
    for evil in ["https://evil.example/", "//evil.example/x", "/\\evil.example"]:
        with _client(kenny) as http:
            r = _login(http, "carol", PASSWORD, next_=evil)
            assert r.status_code == 303 and r.headers["location"] == "/", (evil, r.headers["location"])
    with _client(kenny) as http:
        r = _login(http, "carol", PASSWORD, next_="/somewhere?x=1")
        assert r.headers["location"] == "/somewhere?x=1"


def test_cross_site_form_posts_are_refused(kenny):
    kenny.add_user("olga", "operator", password=PASSWORD)
    with _client(kenny) as http:
        form = http.get("/login")
        data = {"username": "olga", "password": PASSWORD, "form_token": _form_token(form)}
        r = http.post("/login", data=data, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403 and "kenny_session" not in r.headers.get("set-cookie", "")
        assert http.post("/login", data=data, headers={"Origin": kenny.base_url}).status_code == 303
