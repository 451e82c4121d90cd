"""TOTP as a second factor: enrolment with an otpauth:// URI, sign-in with a code
(each code good once), recovery codes (each good once), turning it off needs the
password."""

from __future__ import annotations

import time
from contextlib import closing
from urllib.parse import parse_qs, urlparse

import httpx
import pyotp

from test_signin import PASSWORD, _client, _csrf, _form_token


def _login_with_code(kenny, code: str | None):
    with _client(kenny) as http:
        form = http.get("/login")
        data = {"username": "tina", "password": PASSWORD, "form_token": _form_token(form)}
        if code is not None:
            data["code"] = code
        return http.post("/login", data=data)


def _fresh_code(totp: pyotp.TOTP, not_this: str | None = None) -> str:
    """The current code, waiting for the next step if it equals one already used."""
    deadline = time.monotonic() + 35
    while True:
        code = totp.now()
        if code != not_this:
            return code
        assert time.monotonic() < deadline
        time.sleep(0.5)


def test_totp_enrolment_sign_in_recovery_and_disable(kenny):
    kenny.add_user("tina", "operator", password=PASSWORD)
    http = _client(kenny)
    with closing(http):
        form = http.get("/login")
        assert http.post("/login", data={"username": "tina", "password": PASSWORD, "form_token": _form_token(form)}).status_code == 303
        csrf = _csrf(http.get("/"))
        h = {"X-CSRF-Token": csrf}
        assert http.post("/api/me/totp", json={"password": "wrong password!"}, headers=h).status_code == 403
        start = http.post("/api/me/totp", json={"password": PASSWORD}, headers=h).json()
        uri = urlparse(start["otpauth_uri"])
        assert uri.scheme == "otpauth" and uri.netloc == "totp" and parse_qs(uri.query)["secret"] == [start["secret"]]
        assert parse_qs(uri.query)["issuer"] == ["kenny"]
        totp = pyotp.TOTP(start["secret"])
        assert http.post("/api/me/totp/confirm", json={"code": "000000" if totp.now() != "000000" else "111111"}, headers=h).status_code == 400
        assert http.get("/api/me").json()["user"]["totp_enabled"] is False, "not on until a code is confirmed"
        enrolment_code = totp.now()
        confirmed = http.post("/api/me/totp/confirm", json={"code": enrolment_code}, headers=h)
        assert confirmed.status_code == 200, confirmed.text
        recovery = confirmed.json()["recovery_codes"]
        assert len(recovery) == 10 and len(set(recovery)) == 10
        assert http.get("/api/me").json()["user"]["totp_enabled"] is True
        again = http.post("/api/me/totp", json={"password": PASSWORD}, headers=h)
        assert again.status_code == 409, "a second factor is not replaced without turning it off first"
        pat = kenny.create_token("tina")
        r = httpx.post(f"{kenny.base_url}/api/me/totp/disable", json={"password": PASSWORD}, headers={"Authorization": f"Bearer {pat}"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "session_required", "tokens do not turn TOTP off"

        missing = _login_with_code(kenny, None)
        assert missing.status_code == 401 and "authenticator" in missing.text
        assert _login_with_code(kenny, "123456" if totp.now() != "123456" else "654321").status_code == 401
        code = _fresh_code(totp, not_this=enrolment_code)
        assert _login_with_code(kenny, code).status_code == 303
        assert _login_with_code(kenny, code).status_code == 401, "a code is good once"

        assert _login_with_code(kenny, recovery[0].upper()).status_code == 303, "recovery codes work, in any case"
        assert _login_with_code(kenny, recovery[0]).status_code == 401, "each recovery code works once"

        assert http.post("/api/me/totp/disable", json={"password": "wrong password!"}, headers=h).status_code == 403
        assert http.post("/api/me/totp/disable", json={"password": PASSWORD}, headers=h).status_code == 204
        assert _login_with_code(kenny, None).status_code == 303, "off again: password alone"
