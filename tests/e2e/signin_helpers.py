"""Sign-in helpers for the e2e files that need a signed-in browser (`PASSWORD`,
`_client`, `_login`, `_form_token`, `_csrf`).

The sign-in tests themselves (first-run set-up, sign in and out, session cookies, CSRF
on forms, throttling and lockout, `next` that cannot leave the site, TOTP) are Rust
integration tests in `crates/kenny-server/tests/kit/signin.rs`."""

from __future__ import annotations

import re

import httpx

from conftest import Kenny

PASSWORD = "a long enough password"


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
