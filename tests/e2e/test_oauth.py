"""kenny as its own OAuth 2.1 authorization server for /mcp: the official MCP SDK's OAuth
client completes the whole flow (dynamic registration, PKCE, resource indicator, sign-in
and consent driven over HTTP), and the consent pages refuse every misuse. Code and token
exchange, lifetimes, rotation, revocation and registration limits are tested in Rust
(`crates/kenny-server/tests/kit/oauth.rs`, on a clock moved forward instead of sleeps)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlparse

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from conftest import call, expect_ok, shell_stdout
from signin_helpers import PASSWORD, _client, _login

REDIRECT = "http://127.0.0.1:53682/callback"


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.token_history: list[OAuthToken] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.token_history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def _approve(kenny, authorize_url: str, user: str = "owner", password: str = PASSWORD) -> httpx.Response:
    """Signs in and approves the consent page of `authorize_url` as a person would;
    returns the final redirect to the client."""
    with _client(kenny) as http:
        assert _login(http, user, password).status_code == 303
        path = urlparse(authorize_url)
        consent = http.get(f"{path.path}?{path.query}")
        assert consent.status_code == 200, consent.text[:500]
        assert "Allow" in consent.text and user in consent.text
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', consent.text))
        fields = {k: v.replace("&amp;", "&").replace("&quot;", '"').replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">") for k, v in fields.items()}
        return http.post("/oauth/authorize", data={**fields, "decision": "approve"})


@pytest.fixture
async def fleet(kenny):
    kenny.add_user("owner", "operator", password=PASSWORD)
    await kenny.start_agents(["pc-a"])
    return kenny


async def test_sdk_oauth_client_completes_the_flow_and_refreshes(fleet):
    kenny = fleet
    port = kenny.port
    kenny.stop_server()
    kenny.start_server(port=port, extra_args=["--oauth-access-token-secs", "2"])
    await kenny.wait_agents(["pc-a"])
    storage = MemoryStorage()
    seen: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        seen["url"] = url

    async def callback_handler() -> AuthorizationCodeResult:
        final = await asyncio.to_thread(_approve, kenny, seen["url"])
        assert final.status_code == 303, final.text[:300]
        q = parse_qs(urlparse(final.headers["location"]).query)
        return AuthorizationCodeResult(code=q["code"][0], state=q.get("state", [None])[0], iss=q.get("iss", [None])[0])

    provider = OAuthClientProvider(
        server_url=kenny.mcp_url,
        client_metadata=OAuthClientMetadata(client_name="kenny e2e", redirect_uris=[REDIRECT], grant_types=["authorization_code", "refresh_token"], response_types=["code"], token_endpoint_auth_method="none"),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(kenny.mcp_url, http_client=http), mode="legacy") as client:
            tools = await client.session.list_tools()
            assert any(t.name == "shell_exec" for t in tools.tools)
            out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo $MARK"}))
            assert out == kenny.agents["pc-a"].mark + "\n"
            # The authorization URL carried PKCE S256, the resource, and our state.
            q = parse_qs(urlparse(seen["url"]).query)
            assert q["code_challenge_method"] == ["S256"] and q["resource"] == [kenny.mcp_url]
            first_access = storage.tokens.access_token
            assert first_access.startswith("kenny_oat_") and storage.tokens.refresh_token.startswith("kenny_ort_")
            await asyncio.sleep(3)  # the access token has expired
            out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo again"}))
            assert out == "again\n"
            assert storage.tokens.access_token != first_access, "the SDK refreshed its token"
            assert len({t.refresh_token for t in storage.token_history}) >= 2, "refresh tokens rotate"
    rows = kenny.audit(agent_id="pc-a")
    assert any(r["credential_kind"] == "oauth" and r["user"] == "owner" for r in rows), rows[:3]


# ---- a hand-driven client, for the negative cases -----------------------------------

def _register(kenny, redirect: str = REDIRECT) -> str:
    r = httpx.post(f"{kenny.base_url}/oauth/register", json={"redirect_uris": [redirect], "client_name": "manual"}, timeout=10)
    assert r.status_code == 201, r.text
    return r.json()["client_id"]


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def _authorize_url(kenny, cid: str, challenge: str, **over) -> str:
    params = {"response_type": "code", "client_id": cid, "redirect_uri": REDIRECT, "code_challenge": challenge,
              "code_challenge_method": "S256", "state": "st-1", "resource": kenny.mcp_url}
    params.update(over)
    params = {k: v for k, v in params.items() if v is not None}
    return f"{kenny.base_url}/oauth/authorize?{urlencode(params)}"


def _code(kenny, client_id: str, challenge: str) -> str:
    final = _approve(kenny, _authorize_url(kenny, client_id, challenge))
    q = parse_qs(urlparse(final.headers["location"]).query)
    assert q["state"] == ["st-1"] and q["iss"] == [kenny.base_url], q
    return q["code"][0]


def _token(kenny, **form) -> httpx.Response:
    return httpx.post(f"{kenny.base_url}/oauth/token", data=form, timeout=10)


def _exchange(kenny, client_id: str, code: str, verifier: str, redirect: str = REDIRECT) -> httpx.Response:
    return _token(kenny, grant_type="authorization_code", code=code, client_id=client_id, redirect_uri=redirect, code_verifier=verifier)


def _mcp_status(kenny, token: str) -> int:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    r = httpx.post(kenny.mcp_url, json=init, headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}, timeout=10)
    return r.status_code


def _refused(r: httpx.Response, error: str = "invalid_grant") -> None:
    assert r.status_code == 400 and r.json()["error"] == error, r.text
    assert "access_token" not in r.text


async def test_discovery_documents_and_the_401_challenge(fleet):
    kenny = fleet
    prm = httpx.get(f"{kenny.base_url}/.well-known/oauth-protected-resource/mcp").json()
    assert prm["resource"] == kenny.mcp_url and prm["authorization_servers"] == [kenny.base_url]
    assert httpx.get(f"{kenny.base_url}/.well-known/oauth-protected-resource").json() == prm
    asm = httpx.get(f"{kenny.base_url}/.well-known/oauth-authorization-server").json()
    assert asm["issuer"] == kenny.base_url and asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["client_id_metadata_document_supported"] is True
    r = httpx.post(kenny.mcp_url, json={})
    assert r.status_code == 401
    assert f'resource_metadata="{kenny.base_url}/.well-known/oauth-protected-resource/mcp"' in r.headers["www-authenticate"]


async def test_authorization_request_refusals(fleet):
    kenny = fleet
    cid = _register(kenny)
    verifier, challenge = _pkce()
    with _client(kenny) as http:
        assert _login(http, "owner", PASSWORD).status_code == 303
        def go(**over):
            u = urlparse(_authorize_url(kenny, cid, challenge, **over))
            return http.get(f"{u.path}?{u.query}")

        # Malformed requests are answered on kenny's page, never by redirect (no open redirector).
        for over, error in (
            ({"code_challenge_method": "plain", "code_challenge": verifier}, "invalid_request"),
            ({"code_challenge": None, "code_challenge_method": None}, "invalid_request"),
            ({"resource": "https://elsewhere.example/mcp"}, "invalid_target"),
            ({"scope": "admin"}, "invalid_scope"),
        ):
            r = go(**over)
            assert r.status_code == 400 and "location" not in r.headers and f"({error})" in r.text, (over, r.status_code)
        # An unregistered redirect URI is never redirected to (no open redirect).
        r = go(redirect_uri="https://evil.example/cb")
        assert r.status_code == 400 and "location" not in r.headers
        r = go(client_id="kenny_client_unknown")
        assert r.status_code == 400 and "location" not in r.headers
        # A client ID metadata document on a non-public host is never fetched (SSRF fence).
        for doc in (f"https://127.0.0.1:{kenny.port}/client.json", f"https://localhost:{kenny.port}/client.json"):
            r = go(client_id=doc)
            assert r.status_code == 400 and "public address" in r.text and "location" not in r.headers, r.text[:300]
        # Consent without the page's CSRF token grants nothing, nor does a post from another site.
        consent = go()
        assert consent.headers["x-frame-options"] == "DENY", "the consent page cannot be framed"
        assert "frame-ancestors 'none'" in consent.headers["content-security-policy"]
        assert consent.headers["cache-control"] == "no-store"
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', consent.text))
        fields.pop("csrf")
        r = http.post("/oauth/authorize", data={**fields, "decision": "approve"})
        assert r.status_code == 403 and "location" not in r.headers
        r = http.post("/oauth/authorize", data={**fields, "csrf": "forged", "decision": "approve"})
        assert r.status_code == 403
        good = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', consent.text))
        r = http.post("/oauth/authorize", data={**good, "decision": "approve"}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403 and "location" not in r.headers
    # Not signed in: the authorize page sends you to sign in, and back.
    r = httpx.get(_authorize_url(kenny, cid, challenge))
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=%2Foauth%2Fauthorize")


async def test_a_token_for_another_resource_is_refused(fleet):
    """The same data served under another public URL is another resource: tokens issued
    for the first do not open the second."""
    kenny = fleet
    cid = _register(kenny)
    verifier, challenge = _pkce()
    tokens = _exchange(kenny, cid, _code(kenny, cid, challenge), verifier).json()
    assert _mcp_status(kenny, tokens["access_token"]) == 200
    port = kenny.port
    kenny.stop_server()
    kenny.start_server(port=port, extra_args=["--public-url", f"http://localhost:{port}"])
    assert _mcp_status(kenny, tokens["access_token"]) == 401, "a token for another resource is refused"


# ---- issue 9: loopback ports, consent names, metadata fetches, owners' grants --------


def _code_for(kenny, cid: str, challenge: str, redirect: str, user: str = "owner") -> str:
    final = _approve(kenny, _authorize_url(kenny, cid, challenge, redirect_uri=redirect), user=user)
    assert final.status_code == 303, final.text[:300]
    assert final.headers["location"].startswith(redirect + "?"), "back to the port the app asked for"
    return parse_qs(urlparse(final.headers["location"]).query)["code"][0]


async def test_loopback_redirect_uris_match_on_any_port(fleet):
    """RFC 8252 §7.3: a native app registers its loopback redirect once and listens on
    whatever port is free when it signs in."""
    kenny = fleet
    r = httpx.post(f"{kenny.base_url}/oauth/register", json={"redirect_uris": ["http://127.0.0.1/callback", "http://localhost/callback"], "client_name": "native"}, timeout=10)
    cid = r.json()["client_id"]
    verifier, challenge = _pkce()
    for redirect in ("http://127.0.0.1:53682/callback", "http://localhost:58135/callback"):
        code = _code_for(kenny, cid, challenge, redirect)
        tokens = _exchange(kenny, cid, code, verifier, redirect=redirect)
        assert tokens.status_code == 200, tokens.text
        assert _mcp_status(kenny, tokens.json()["access_token"]) == 200
    # Only the port is free: not the path, not the host, not the scheme.
    with _client(kenny) as http:
        assert _login(http, "owner", PASSWORD).status_code == 303
        for redirect in ("http://127.0.0.1:53682/other", "http://localhost.evil.example:53682/callback", "https://127.0.0.1:53682/callback"):
            u = urlparse(_authorize_url(kenny, cid, challenge, redirect_uri=redirect))
            r = http.get(f"{u.path}?{u.query}")
            assert r.status_code == 400 and "location" not in r.headers, redirect
    # A code is bound to the exact redirect its authorization used, port included.
    code = _code_for(kenny, cid, challenge, "http://127.0.0.1:53682/callback")
    _refused(_exchange(kenny, cid, code, verifier, redirect="http://127.0.0.1:1/callback"))


async def test_the_consent_page_names_the_client_by_id_and_where_it_sends_you(fleet):
    """Hole: the consent page showed only the name the client chose for itself."""
    kenny = fleet
    r = httpx.post(f"{kenny.base_url}/oauth/register", json={"redirect_uris": [REDIRECT], "client_name": "Claude"}, timeout=10)
    cid = r.json()["client_id"]
    _, challenge = _pkce()
    with _client(kenny) as http:
        assert _login(http, "owner", PASSWORD).status_code == 303
        u = urlparse(_authorize_url(kenny, cid, challenge))
        page = http.get(f"{u.path}?{u.query}").text
    client = re.search(r'<dd id="consent-client">(.*?)</dd>', page).group(1)
    back = re.search(r'<dd id="consent-redirect">(.*?)</dd>', page).group(1)
    assert f"<code>{cid}</code>" in client and "registered with this server" in client
    assert "<code>http://127.0.0.1:53682</code>" in back and "your own computer" in back
    assert "calling itself \u201cClaude\u201d" in page, "the name is shown as the app's own claim"


async def test_client_metadata_is_fetched_only_for_a_signed_in_consent(fleet):
    """Hole: anyone could make the server fetch a URL of their choosing (and fill its
    cache) by opening the authorize page without signing in."""
    kenny = fleet
    doc = f"https://127.0.0.1:{kenny.port}/client.json"
    _, challenge = _pkce()
    url = _authorize_url(kenny, None, challenge, client_id=doc)
    r = httpx.get(url, timeout=10)
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), (r.status_code, r.text[:300])
    form = parse_qs(urlparse(url).query)
    r = httpx.post(f"{kenny.base_url}/oauth/authorize", data={k: v[0] for k, v in form.items()} | {"decision": "approve"}, timeout=10)
    assert r.status_code == 401 and "public address" not in r.text, "no sign-in, no fetch"
    # Signed in, the document is fetched (and refused here: it is not on a public host).
    with _client(kenny) as http:
        assert _login(http, "owner", PASSWORD).status_code == 303
        u = urlparse(url)
        r = http.get(f"{u.path}?{u.query}")
        assert r.status_code == 400 and "public address" in r.text


async def test_owners_list_and_revoke_their_grants(fleet):
    kenny = fleet
    cid = _register(kenny)
    verifier, challenge = _pkce()
    tokens = _exchange(kenny, cid, _code(kenny, cid, challenge), verifier).json()
    assert _mcp_status(kenny, tokens["access_token"]) == 200
    kenny.add_user("other", "operator", password=PASSWORD)
    with _client(kenny) as http, _client(kenny) as stranger:
        assert _login(http, "owner", PASSWORD).status_code == 303
        assert _login(stranger, "other", PASSWORD).status_code == 303
        csrf = re.search(r'name="csrf" value="([^"]+)"', http.get("/").text).group(1)
        other_csrf = re.search(r'name="csrf" value="([^"]+)"', stranger.get("/").text).group(1)
        grants = http.get("/api/me/grants").json()["grants"]
        assert len(grants) == 1, grants
        g = grants[0]
        assert (g["client_id"], g["client_name"], g["redirect_uri"]) == (cid, "manual", REDIRECT)
        assert "refresh_token" not in str(grants) and tokens["refresh_token"] not in str(grants)
        assert stranger.get("/api/me/grants").json()["grants"] == [], "nobody sees another's grants"
        r = stranger.delete(f"/api/me/grants/{g['id']}", headers={"X-CSRF-Token": other_csrf})
        assert r.status_code == 404, "nor revokes them"
        assert _mcp_status(kenny, tokens["access_token"]) == 200
        assert http.delete(f"/api/me/grants/{g['id']}").status_code == 403, "the CSRF header is needed"
        assert http.delete(f"/api/me/grants/{g['id']}", headers={"X-CSRF-Token": csrf}).status_code == 204
        assert _mcp_status(kenny, tokens["access_token"]) == 401, "the app's access ends at once"
        _refused(_token(kenny, grant_type="refresh_token", refresh_token=tokens["refresh_token"], client_id=cid))
        assert http.get("/api/me/grants").json()["grants"] == []
        assert http.delete(f"/api/me/grants/{g['id']}", headers={"X-CSRF-Token": csrf}).status_code == 404
