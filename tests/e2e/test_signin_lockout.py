"""Nobody can lock the superuser out from outside: failed sign-ins are throttled per
client address and per (address, account); the account-wide count that stops guessing
spread over many addresses never blocks a browser that signed in before (its device
cookie) or an attempt carrying a valid second factor.

Clients here are told apart by their source address: each binds its own loopback
address (127.0.0.x), so "another client" is another address, as on a real network."""

from __future__ import annotations

import time
from contextlib import ExitStack, closing

import httpx
import pyotp

from test_signin import PASSWORD, _csrf, _form_token

#: The server's limits (crate::ratelimit): per (address, account), and account-wide.
CALLER_LIMIT = 5
ACCOUNT_LIMIT = 20


def _from(kenny, address: str) -> httpx.Client:
    """A browser-like client whose connections come from `address`."""
    return httpx.Client(
        base_url=kenny.base_url,
        transport=httpx.HTTPTransport(local_address=address),
        follow_redirects=False,
        timeout=15,
    )


def _login(http: httpx.Client, user: str, password: str, code: str | None = None) -> httpx.Response:
    form = http.get("/login")
    assert form.status_code == 200, form.text[:300]
    data = {"username": user, "password": password, "form_token": _form_token(form)}
    if code is not None:
        data["code"] = code
    return http.post("/login", data=data)


def _flood(kenny, user: str, first_octet: int) -> None:
    """Wrong passwords for `user` from enough addresses to trip the account-wide count."""
    addresses = (ACCOUNT_LIMIT + CALLER_LIMIT - 1) // CALLER_LIMIT + 1
    with ExitStack() as stack:
        for n in range(addresses):
            http = stack.enter_context(_from(kenny, f"127.0.{first_octet}.{n + 1}"))
            for attempt in range(CALLER_LIMIT):
                r = _login(http, user, f"guess-{n}-{attempt}")
                assert r.status_code in (401, 429), r.text[:300]


def _sign_out(http: httpx.Client) -> None:
    home = http.get("/")
    assert http.post("/logout", data={"csrf": _csrf(home)}).status_code == 303


def test_a_flood_of_wrong_passwords_cannot_lock_out_a_browser_that_signed_in_before(kenny):
    kenny.add_user("root", "superuser", password=PASSWORD)
    with closing(_from(kenny, "127.0.0.2")) as owner:
        first = _login(owner, "root", PASSWORD)
        assert first.status_code == 303, first.text[:300]
        _sign_out(owner)

        # One attacker address: throttled after five failures, for itself only.
        with _from(kenny, "127.0.0.3") as attacker:
            for attempt in range(CALLER_LIMIT):
                assert _login(attacker, "root", f"wrong-{attempt}").status_code == 401
            assert _login(attacker, "root", PASSWORD).status_code == 429, "the attacker's address waits"

        # Guessing spread over many addresses trips the account-wide count ...
        _flood(kenny, "root", first_octet=1)
        with _from(kenny, "127.0.9.1") as stranger:
            stranger_attempt = _login(stranger, "root", PASSWORD)
            assert stranger_attempt.status_code == 429, "a browser never seen before waits, even with the right password"

        # ... but the owner's browser still signs in, typo first.
        assert _login(owner, "root", "typo").status_code == 401, "the owner's browser is not throttled"
        assert _login(owner, "root", PASSWORD).status_code == 303
        assert "Signed in as <strong>root</strong>" in owner.get("/").text
        # The stranger was told how to get in, and when to retry.
        assert "browser you have used before" in stranger_attempt.text and "retry-after" in stranger_attempt.headers
        # It knows the browser by a cookie only the sign-in form's post carries.
        device = next(c for c in first.headers.get_list("set-cookie") if c.startswith("kenny_device_"))
        for attr in ("HttpOnly", "SameSite=Strict", "Path=/login", "Max-Age=31536000"):
            assert attr in device, device

        # The device cookie counts, not the address: behind a shared address (a proxy,
        # an office NAT) the attacker's own address is no obstacle to the owner.
        with _from(kenny, "127.0.0.3") as same_address:
            same_address.cookies.update(owner.cookies)
            same_address.cookies.delete("kenny_session")
            assert _login(same_address, "root", PASSWORD).status_code == 303

    # A device cookie is bound to its account: it does not let another account's
    # attempts past that account's own count.
    kenny.add_user("other", "operator", password=PASSWORD)
    _flood(kenny, "other", first_octet=2)
    users = httpx.get(f"{kenny.base_url}/api/users", headers={"Authorization": f"Bearer {kenny.admin_pat}"}).json()["users"]
    other_id = next(u["id"] for u in users if u["username"] == "other")
    roots_value = device.split(";")[0].split("=", 1)[1]
    with _from(kenny, "127.0.9.2") as http:
        http.cookies.set(f"kenny_device_{other_id}", roots_value, path="/login")
        assert _login(http, "other", PASSWORD).status_code == 429


def _turn_on_totp(kenny, user: str) -> tuple[pyotp.TOTP, list[str]]:
    """Signs `user` in from 127.0.0.2 and turns its second factor on; returns the
    authenticator and the recovery codes."""
    with _from(kenny, "127.0.0.2") as http:
        assert _login(http, user, PASSWORD).status_code == 303
        h = {"X-CSRF-Token": _csrf(http.get("/"))}
        secret = http.post("/api/me/totp", json={"password": PASSWORD}, headers=h).json()["secret"]
        totp = pyotp.TOTP(secret)
        confirmed = http.post("/api/me/totp/confirm", json={"code": totp.now()}, headers=h)
        assert confirmed.status_code == 200, confirmed.text
        return totp, confirmed.json()["recovery_codes"]


def test_a_valid_second_factor_gets_past_the_account_wide_throttle(kenny):
    kenny.add_user("tina", "superuser", password=PASSWORD)
    totp, _ = _turn_on_totp(kenny, "tina")

    _flood(kenny, "tina", first_octet=1)
    with _from(kenny, "127.0.9.1") as stranger:
        assert _login(stranger, "tina", PASSWORD).status_code == 429, "no code: the account-wide limit applies"
        assert _login(stranger, "tina", PASSWORD, code="000000" if totp.now() != "000000" else "111111").status_code == 429
    with _from(kenny, "127.0.9.2") as fresh:
        # The enrolment used the current step; the next step's code is good now (one
        # step of clock skew is allowed) and has not been used.
        code = totp.at(time.time() + 30)
        r = _login(fresh, "tina", PASSWORD, code=code)
        assert r.status_code == 303, r.text[:400]
    with _from(kenny, "127.0.9.3") as replay:
        assert _login(replay, "tina", PASSWORD, code=code).status_code == 429, "a used code opens nothing"


#: Wrong second-factor codes an account may have (crate::ratelimit::SECOND_FACTOR_LIMIT).
SECOND_FACTOR_LIMIT = 5


def test_the_password_alone_cannot_guess_the_code_from_many_addresses(kenny):
    kenny.add_user("uma", "operator", password=PASSWORD)
    _, recovery_codes = _turn_on_totp(kenny, "uma")
    recovery = recovery_codes[0]

    # Someone with the password guesses codes, each from an address of its own, so no
    # address reaches its own limit.
    for n in range(SECOND_FACTOR_LIMIT):
        with _from(kenny, f"127.0.3.{n + 1}") as guesser:
            assert _login(guesser, "uma", PASSWORD, code="not-a-code").status_code == 401
    with _from(kenny, "127.0.3.100") as guesser:
        r = _login(guesser, "uma", PASSWORD, code=recovery)
    assert r.status_code == 429, "even a right code waits once the account has had its wrong ones"
    assert "Too many wrong authenticator or recovery codes" in r.text and "retry-after" in r.headers, r.text[:500]
    assert int(r.headers["retry-after"]) > 0
