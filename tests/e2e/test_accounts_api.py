"""The accounts API: superusers manage users; everyone manages their own password,
sessions and tokens; signed-in (cookie) requests need the CSRF header to change state."""

from __future__ import annotations

from contextlib import closing

import httpx

from test_signin import PASSWORD, _client, _csrf, _login


def _api(kenny, token: str) -> httpx.Client:
    return httpx.Client(base_url=kenny.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=15)


def _signed_in(kenny, user: str, password: str = PASSWORD) -> tuple[httpx.Client, str]:
    http = _client(kenny)
    assert _login(http, user, password).status_code == 303
    return http, _csrf(http.get("/"))


def test_superuser_manages_users_and_the_last_superuser_stays(kenny):
    with _api(kenny, kenny.admin_pat) as api:
        r = api.post("/api/users", json={"username": "kim", "role": "user", "hosts": ["pc-a"]})
        assert r.status_code == 201, r.text
        kim = r.json()["user"]
        generated = r.json()["password"]
        assert kim["role"] == "user" and kim["hosts"] == ["pc-a"] and len(generated) >= 12
        assert api.post("/api/users", json={"username": "kim", "role": "user"}).status_code == 409
        assert api.post("/api/users", json={"username": "x", "role": "wizard"}).status_code == 400
        extra = api.post("/api/users", json={"username": "x", "role": "user", "extra": 1})
        assert extra.status_code == 400 and extra.json()["error"]["code"] == "bad_request", extra.text
        assert "unknown field `extra`" in extra.json()["error"]["message"], "the refusal names the field"

        r = api.patch(f"/api/users/{kim['id']}", json={"hosts": ["pc-a", "pc-b"]})
        assert r.json()["user"]["hosts"] == ["pc-a", "pc-b"]
        r = api.patch(f"/api/users/{kim['id']}", json={"role": "operator"})
        assert r.json()["user"]["role"] == "operator" and r.json()["user"]["hosts"] == []

        admin = next(u for u in api.get("/api/users").json()["users"] if u["username"] == "admin")
        for change in ({"role": "operator"}, {"disabled": True}):
            r = api.patch(f"/api/users/{admin['id']}", json=change)
            assert r.status_code == 409 and "last enabled superuser" in r.json()["error"]["message"], change
        assert api.delete(f"/api/users/{admin['id']}").status_code == 409
        # With a second superuser, the first may step down.
        api.patch(f"/api/users/{kim['id']}", json={"role": "superuser"})
        assert api.patch(f"/api/users/{admin['id']}", json={"role": "operator"}).status_code == 200
        assert api.patch(f"/api/users/{admin['id']}", json={"role": "superuser"}).status_code == 403, "no longer a superuser"

    kenny.add_user("op", "operator", password=PASSWORD)
    with _api(kenny, kenny.create_token("op")) as op:
        assert op.get("/api/users").status_code == 403
        assert op.post("/api/users", json={"username": "y", "role": "superuser"}).status_code == 403


def test_cookie_requests_need_the_csrf_header_and_tokens_are_shown_once(kenny):
    kenny.add_user("dana", "operator", password=PASSWORD)
    http, csrf = _signed_in(kenny, "dana")
    with closing(http):
        me = http.get("/api/me")
        assert me.status_code == 200 and me.json()["user"]["username"] == "dana"
        assert me.json()["credential_kind"] == "session"
        r = http.post("/api/me/tokens", json={"label": "laptop"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "csrf", "no CSRF header, no state change"
        r = http.post("/api/me/tokens", json={"label": "laptop"}, headers={"X-CSRF-Token": "wrong"})
        assert r.status_code == 403
        r = http.post("/api/me/tokens", json={"label": "laptop", "password": PASSWORD}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 201, r.text
        token = r.json()["token"]
        listed = http.get("/api/me/tokens").json()["tokens"]
        assert [t["label"] for t in listed] == ["laptop"] and token not in str(listed), "shown once, listed without the secret"
        with _api(kenny, token) as api:
            assert api.get("/api/me").json()["user"]["username"] == "dana"
            r = http.delete(f"/api/me/tokens/{listed[0]['id']}", headers={"X-CSRF-Token": csrf})
            assert r.status_code == 204
            assert api.get("/api/me").status_code == 401, "a revoked token stops working at once"


def test_password_change_ends_other_sessions(kenny):
    kenny.add_user("erin", "user", password=PASSWORD)
    other, _ = _signed_in(kenny, "erin")
    http, csrf = _signed_in(kenny, "erin")
    with closing(http), closing(other):
        assert len(http.get("/api/me/sessions").json()["sessions"]) == 2
        r = http.post("/api/me/password", json={"current_password": "nope", "new_password": "another long one"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 403
        r = http.post("/api/me/password", json={"current_password": PASSWORD, "new_password": "short"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 400
        r = http.post("/api/me/password", json={"current_password": PASSWORD, "new_password": "another long one"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 204, r.text
        assert http.get("/api/me").status_code == 200, "the session that changed it stays"
        assert other.get("/api/me").status_code == 401, "every other session ends"
        sessions = http.get("/api/me/sessions").json()["sessions"]
        assert len(sessions) == 1 and sessions[0]["current"] is True
    with _client(kenny) as fresh:
        assert _login(fresh, "erin", PASSWORD).status_code == 401
        assert _login(fresh, "erin", "another long one").status_code == 303


def test_disabling_a_user_stops_its_tokens_and_sessions_at_once(kenny):
    kenny.add_user("fred", "operator", password=PASSWORD)
    pat = kenny.create_token("fred")
    http, _ = _signed_in(kenny, "fred")
    with _api(kenny, pat) as fred, _api(kenny, kenny.admin_pat) as admin, closing(http):
        assert fred.get("/api/me").status_code == 200
        fid = fred.get("/api/me").json()["user"]["id"]
        assert admin.patch(f"/api/users/{fid}", json={"disabled": True}).json()["user"]["disabled"] is True
        assert fred.get("/api/me").status_code == 401
        assert http.get("/api/me").status_code == 401
        assert admin.delete(f"/api/users/{fid}").status_code == 204
        assert admin.get(f"/api/users/{fid}").status_code == 404


def test_own_sessions_can_be_listed_and_ended(kenny):
    kenny.add_user("gus", "user", password=PASSWORD)
    phone, _ = _signed_in(kenny, "gus")
    laptop, csrf = _signed_in(kenny, "gus")
    with closing(phone), closing(laptop):
        sessions = laptop.get("/api/me/sessions").json()["sessions"]
        theirs = next(s for s in sessions if not s["current"])
        assert laptop.delete(f"/api/me/sessions/{theirs['id']}", headers={"X-CSRF-Token": csrf}).status_code == 204
        assert phone.get("/api/me").status_code == 401
        assert laptop.delete(f"/api/me/sessions/{theirs['id']}", headers={"X-CSRF-Token": csrf}).status_code == 404


# ---- issue 9: sessions only for password and token minting; what a password change,
# a reset and disabling end -------------------------------------------------------------


def _pat_status(kenny, pat: str) -> int:
    with _api(kenny, pat) as api:
        return api.get("/api/me").status_code


def test_a_token_cannot_change_the_password_or_mint_tokens(kenny):
    """Hole: a leaked PAT could change the password (locking the owner out) and mint
    more PATs that outlive its own revocation."""
    kenny.add_user("ivy", "operator", password=PASSWORD)
    pat = kenny.create_token("ivy")
    with _api(kenny, pat) as api:
        r = api.post("/api/me/password", json={"current_password": PASSWORD, "new_password": "taken over by a token"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "session_required", r.text
        r = api.post("/api/me/tokens", json={"label": "spare key", "password": PASSWORD})
        assert r.status_code == 403 and r.json()["error"]["code"] == "session_required", r.text
        assert [t["label"] for t in api.get("/api/me/tokens").json()["tokens"]] == [None], "no token was minted"
    with _client(kenny) as http:
        assert _login(http, "ivy", PASSWORD).status_code == 303, "the password is unchanged"


def test_the_password_change_check_goes_through_the_sign_in_throttle(kenny):
    """Hole: a stolen session could guess the current password without limit."""
    kenny.add_user("jay", "operator", password=PASSWORD)
    http, csrf = _signed_in(kenny, "jay")
    with closing(http):
        h = {"X-CSRF-Token": csrf}
        for attempt in range(5):
            r = http.post("/api/me/password", json={"current_password": f"guess-{attempt}", "new_password": "a new long password"}, headers=h)
            assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_password", r.text
        r = http.post("/api/me/password", json={"current_password": PASSWORD, "new_password": "a new long password"}, headers=h)
        assert r.status_code == 429 and r.json()["error"]["code"] == "throttled", r.text
        assert int(r.json()["error"]["message"].split(" in ")[1].split()[0]) >= 1
    with _client(kenny) as fresh:
        assert _login(fresh, "jay", PASSWORD).status_code == 303, "nothing changed while throttled"


def test_minting_a_token_needs_the_password_under_the_sign_in_throttle(kenny):
    """Hole: a session left open or stolen could mint a token that outlives it."""
    kenny.add_user("max", "operator", password=PASSWORD)
    http, csrf = _signed_in(kenny, "max")
    with closing(http):
        h = {"X-CSRF-Token": csrf}
        r = http.post("/api/me/tokens", json={"label": "laptop"}, headers=h)
        assert r.status_code == 400 and r.json()["error"]["code"] == "password_required", r.text
        assert "current password" in r.json()["error"]["message"]
        for attempt in range(5):
            r = http.post("/api/me/tokens", json={"label": "laptop", "password": f"guess-{attempt}"}, headers=h)
            assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_password", r.text
        r = http.post("/api/me/tokens", json={"label": "laptop", "password": PASSWORD}, headers=h)
        assert r.status_code == 429 and r.json()["error"]["code"] == "throttled", r.text
        assert http.get("/api/me/tokens").json()["tokens"] == [], "no token was minted"


def _oauth_grant(kenny, user: str) -> dict:
    from test_oauth import _approve, _authorize_url, _exchange, _pkce, _register
    from urllib.parse import parse_qs, urlparse

    cid = _register(kenny)
    verifier, challenge = _pkce()
    final = _approve(kenny, _authorize_url(kenny, cid, challenge), user=user)
    code = parse_qs(urlparse(final.headers["location"]).query)["code"][0]
    tokens = _exchange(kenny, cid, code, verifier).json()
    return {"client_id": cid, **tokens}


def _refresh(kenny, grant: dict) -> httpx.Response:
    return httpx.post(f"{kenny.base_url}/oauth/token", data={"grant_type": "refresh_token", "refresh_token": grant["refresh_token"], "client_id": grant["client_id"]}, timeout=10)


def test_a_password_change_ends_sessions_and_grants_and_with_consent_the_tokens(kenny):
    from test_oauth import _mcp_status

    kenny.add_user("kay", "operator", password=PASSWORD)
    grant = _oauth_grant(kenny, "kay")
    assert _mcp_status(kenny, grant["access_token"]) == 200
    pat = kenny.create_token("kay")
    other, _ = _signed_in(kenny, "kay")
    http, csrf = _signed_in(kenny, "kay")
    h = {"X-CSRF-Token": csrf}
    with closing(http), closing(other):
        r = http.post("/api/me/password", json={"current_password": PASSWORD, "new_password": "second password"}, headers=h)
        assert r.status_code == 204, r.text
        assert other.get("/api/me").status_code == 401, "other sessions end"
        assert _mcp_status(kenny, grant["access_token"]) == 401, "OAuth access ends"
        assert _refresh(kenny, grant).status_code == 400, "and the grant cannot be refreshed"
        assert _pat_status(kenny, pat) == 200, "tokens stay unless asked"

        r = http.post("/api/me/password", json={"current_password": "second password", "new_password": "third password", "revoke_tokens": True}, headers=h)
        assert r.status_code == 204, r.text
        assert _pat_status(kenny, pat) == 401, "with revoke_tokens, every token ends at once"
        assert all(t["revoked_at"] for t in http.get("/api/me/tokens").json()["tokens"])
        assert http.get("/api/me").json()["user"]["live_tokens"] == 0
        bad = http.post("/api/me/password", json={"current_password": "third password", "new_password": "x" * 10, "revoke_tokens": "yes"}, headers=h)
        assert bad.status_code == 400 and "revoke_tokens" in bad.json()["error"]["message"], "revoke_tokens is a boolean"


def test_disabling_suspends_tokens_and_revoke_tokens_ends_them(kenny):
    """A disabled user's tokens never work while it is disabled; its sessions and OAuth
    grants end for good; with revoke_tokens its tokens end for good as well."""
    from test_oauth import _mcp_status

    kenny.add_user("lee", "operator", password=PASSWORD)
    grant = _oauth_grant(kenny, "lee")
    pat = kenny.create_token("lee")
    with _api(kenny, kenny.admin_pat) as admin:
        lee = next(u for u in admin.get("/api/users").json()["users"] if u["username"] == "lee")
        assert lee["live_tokens"] == 1, "the dashboard can say how many tokens a revocation stops"

        r = admin.patch(f"/api/users/{lee['id']}", json={"disabled": True})
        assert r.status_code == 200 and r.json()["tokens_revoked"] == 0
        assert _pat_status(kenny, pat) == 401, "suspended while disabled"
        assert _mcp_status(kenny, grant["access_token"]) == 401
        admin.patch(f"/api/users/{lee['id']}", json={"disabled": False})
        assert _pat_status(kenny, pat) == 200, "back when enabled: the admin did not revoke it"
        assert _refresh(kenny, grant).status_code == 400, "but the OAuth grant stays ended"

        r = admin.patch(f"/api/users/{lee['id']}", json={"disabled": True, "revoke_tokens": True})
        assert r.status_code == 200 and r.json()["tokens_revoked"] == 1 and r.json()["user"]["live_tokens"] == 0
        admin.patch(f"/api/users/{lee['id']}", json={"disabled": False})
        assert _pat_status(kenny, pat) == 401, "revoked for good"


def test_a_password_reset_ends_everything_and_with_consent_the_tokens(kenny):
    kenny.add_user("mo", "user", password=PASSWORD)
    pat = kenny.create_token("mo")
    session, _ = _signed_in(kenny, "mo")
    with _api(kenny, kenny.admin_pat) as admin, closing(session):
        mo = next(u for u in admin.get("/api/users").json()["users"] if u["username"] == "mo")
        r = admin.post(f"/api/users/{mo['id']}/password", json={})
        assert r.status_code == 200 and r.json()["tokens_revoked"] == 0
        assert session.get("/api/me").status_code == 401
        assert _pat_status(kenny, pat) == 200
        r = admin.post(f"/api/users/{mo['id']}/password", json={"revoke_tokens": True})
        assert r.status_code == 200 and r.json()["tokens_revoked"] == 1
        assert _pat_status(kenny, pat) == 401
        new_password = r.json()["password"]
    with _client(kenny) as http:
        assert _login(http, "mo", new_password).status_code == 303


def test_user_ids_are_never_reused_across_a_restart(kenny):
    """Hole: ids came from the highest row, so deleting the newest account and creating
    another handed its id (and whatever still named that id) to a stranger."""
    with _api(kenny, kenny.admin_pat) as api:
        first = api.post("/api/users", json={"username": "nia", "role": "user"}).json()["user"]["id"]
        second = api.post("/api/users", json={"username": "oli", "role": "user"}).json()["user"]["id"]
        assert second > first
        assert api.delete(f"/api/users/{second}").status_code == 204
    port = kenny.port
    kenny.stop_server()
    kenny.start_server(port=port)
    with _api(kenny, kenny.admin_pat) as api:
        r = api.post("/api/users", json={"username": "pia", "role": "user"})
        assert r.status_code == 201, r.text
        assert r.json()["user"]["id"] > second, "the deleted id stays retired"
        assert api.get(f"/api/users/{second}").status_code == 404
