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
        assert api.post("/api/users", json={"username": "x", "role": "user", "extra": 1}).status_code == 422

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
        r = http.post("/api/me/tokens", json={"label": "laptop"}, headers={"X-CSRF-Token": csrf})
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
