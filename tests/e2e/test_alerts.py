"""Alerts with real agents and real receivers on loopback: an ntfy-compatible server
and a webhook (its HMAC signature checked) each get exactly one alert when a PC turns
warn and one recovery when it clears; a silenced rule sends nothing; an SMTP server with
STARTTLS receives the e-mail; a killed agent raises the offline alert after the set
time; a new local administrator (in a temporary /etc the agent reads) is a high-priority
change and an alert; delivery failures are retried and shown."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from conftest import call, expect_error, expect_ok

SECRET = "e2e-webhook-secret-0123456789"
WAIT = 30.0


class Receiver:
    """A loopback HTTP server that records every POST (path, headers, body) and
    answers `status` (200 unless told otherwise)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.status = 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                # Header names in lower case (HTTP/1.1 says they are case-insensitive).
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.requests.append({"path": self.path, "headers": headers, "body": body})
                self.send_response(outer.status)
                self.end_headers()
                self.wfile.write(b"ok" if outer.status < 300 else b"receiver is down")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers():
    ntfy, hook = Receiver(), Receiver()
    yield ntfy, hook
    ntfy.close()
    hook.close()


def _api(kenny, method: str, path: str, token: str | None = None, **kw) -> httpx.Response:
    with httpx.Client(base_url=kenny.base_url, timeout=30) as http:
        return http.request(method, path, headers={"Authorization": f"Bearer {token or kenny.admin_pat}"}, **kw)


def _channels(kenny, ntfy: Receiver, hook: Receiver) -> tuple[int, int]:
    r = _api(kenny, "POST", "/api/alerts/channels", json={"name": "phone", "config": {"kind": "ntfy", "url": f"{ntfy.url}/kenny-alerts"}})
    assert r.status_code == 201, r.text
    n = r.json()["channel"]["id"]
    r = _api(kenny, "POST", "/api/alerts/channels", json={"name": "hook", "config": {"kind": "webhook", "url": f"{hook.url}/hook", "secret": SECRET}})
    assert r.status_code == 201, r.text
    assert r.json()["channel"]["config"]["secret"] == "(set)", "a secret is never shown back"
    return n, r.json()["channel"]["id"]


def _hook_events(hook: Receiver, key: str) -> list[dict]:
    """The webhook's messages about `key`, each checked for its signature."""
    out = []
    for req in hook.requests:
        h = req["headers"]
        expected = hmac.new(SECRET.encode(), f"{h['x-kenny-timestamp']}.".encode() + req["body"], hashlib.sha256).hexdigest()
        assert h["x-kenny-signature"] == f"sha256={expected}", "the body is signed with the channel's secret"
        body = json.loads(req["body"])
        if body.get("key") == key:
            out.append(body)
    return out


def _ntfy_titles(ntfy: Receiver, needle: str) -> list[str]:
    return [r["headers"].get("title", "") for r in ntfy.requests if needle in r["headers"].get("title", "")]


async def _until(what: str, check, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.2)


def _set_memory_warn(kenny, percent: int) -> None:
    r = _api(kenny, "PUT", "/api/health/thresholds", json={"memory_warn_percent": percent})
    assert r.status_code == 200, r.text


async def test_one_alert_then_one_recovery_on_ntfy_and_a_signed_webhook(kenny, receivers):
    ntfy, hook = receivers
    await kenny.start_agents(["pc-a"])
    ntfy_id, hook_id = _channels(kenny, ntfy, hook)

    # Each channel has a test button.
    for cid in (ntfy_id, hook_id):
        r = _api(kenny, "POST", f"/api/alerts/channels/{cid}/test")
        assert r.status_code == 200 and r.json() == {"sent": True}, r.text
    # Found by content: the PC's own alerts (an unencrypted disk, say) may come first.
    tests = [r for r in ntfy.requests if b"test from kenny" in r["body"]]
    assert len(tests) == 1 and tests[0]["path"] == "/kenny-alerts", ntfy.requests
    assert [json.loads(r["body"])["event"] for r in hook.requests].count("test") == 1, hook.requests

    async with kenny.mcp() as client:
        for _ in range(100):
            if expect_ok(await call(client, "agent_health", {"agent_id": "pc-a"}))["health"]:
                break
            await asyncio.sleep(0.1)

    # Memory at 1% is over any PC's use: warn, judged again at once.
    _set_memory_warn(kenny, 1)
    alerts = await _until("the memory alert on the webhook", lambda: _hook_events(hook, "memory"))
    assert alerts[0]["event"] == "alert" and alerts[0]["status"] in ("warn", "crit"), alerts
    assert alerts[0]["agent_id"] == "pc-a" and "% used" in alerts[0]["reason"], alerts
    await _until("the memory alert on ntfy", lambda: _ntfy_titles(ntfy, "pc-a: memory"))
    open_alerts = _api(kenny, "GET", "/api/alerts").json()["open"]
    # Only memory's (this machine may have other open problems of its own, like an
    # unencrypted disk).
    assert [a["key"] for a in open_alerts if a["agent_id"] == "pc-a" and a["key"] == "memory"] == ["memory"], open_alerts

    _set_memory_warn(kenny, 90)
    await _until("the recovery", lambda: len(_hook_events(hook, "memory")) == 2)
    await asyncio.sleep(1.5)  # nothing more comes
    events = [e["event"] for e in _hook_events(hook, "memory")]
    assert events == ["alert", "recovery"], events
    titles = _ntfy_titles(ntfy, "pc-a: memory")
    assert len(titles) == 2 and titles[1].startswith("OK pc-a: memory"), titles
    ntfy_memory = [r for r in ntfy.requests if "memory" in r["headers"].get("title", "")]
    assert ntfy_memory[0]["headers"]["priority"] in ("4", "5") and ntfy_memory[1]["headers"]["priority"] == "3"
    assert not [a for a in _api(kenny, "GET", "/api/alerts").json()["open"] if a["key"] == "memory"]

    deliveries = _api(kenny, "GET", "/api/alerts/deliveries").json()["deliveries"]
    assert all(d["status"] == "sent" for d in deliveries), deliveries


async def test_a_silenced_rule_sends_nothing_and_only_operators_silence(kenny, receivers):
    ntfy, hook = receivers
    await kenny.start_agents(["pc-a"])
    _channels(kenny, ntfy, hook)
    kenny.add_user("uma", "user", hosts=["pc-a"])
    uma = kenny.create_token("uma")
    async with kenny.mcp(uma) as client:
        message = expect_error(await call(client, "alert_silence_set", {"agent_id": "pc-a", "section": "memory", "duration": "2h", "reason": "x"}), "forbidden")
        assert "needs an operator" in message, message
    async with kenny.mcp() as client:
        expect_error(await call(client, "alert_silence_set", {"agent_id": "pc-a", "duration": "2h"}), "bad_args")
        expect_error(await call(client, "alert_silence_set", {"agent_id": "pc-a", "duration": "400d", "reason": "x"}), "bad_args")
        set_ = expect_ok(await call(client, "alert_silence_set", {"agent_id": "pc-a", "section": "memory", "duration": "2h", "reason": "upgrading RAM"}))
        assert set_["silence"]["section"] == "memory" and set_["silence"]["created_by"] == "admin", set_
        listed = expect_ok(await call(client, "alert_silence_list", {}))
        assert [s["reason"] for s in listed["silences"]] == ["upgrading RAM"], listed

        _set_memory_warn(kenny, 1)
        opened = await _until(
            "the silenced alert is recorded",
            lambda: [a for a in _api(kenny, "GET", "/api/alerts").json()["open"] if a["key"] == "memory"],
        )
        assert opened[0]["silenced"] is True and opened[0]["notified"] is False, opened
        await asyncio.sleep(2)
        assert not _hook_events(hook, "memory") and not _ntfy_titles(ntfy, "memory"), "a silenced rule sends nothing"

        cleared = expect_ok(await call(client, "alert_silence_clear", {"agent_id": "pc-a"}))
        assert len(cleared["silences"]) == 1
        expect_error(await call(client, "alert_silence_clear", {"agent_id": "pc-a"}), "not_found")
        # Its recovery is not announced either: nothing was.
        _set_memory_warn(kenny, 90)
        await _until(
            "the alert closes",
            lambda: not [a for a in _api(kenny, "GET", "/api/alerts").json()["open"] if a["key"] == "memory"],
        )
        await asyncio.sleep(1)
        assert not _hook_events(hook, "memory"), hook.requests
    actions = [(r["tool"], r["user"]) for r in kenny.audit(agent_id="pc-a", limit=200)]
    assert ("alert_silence_set", "admin") in actions and ("alert_silence_clear", "admin") in actions, actions
    assert ("alert_silence_set", "uma") in actions, "the refusal is audited too"


# --------------------------------------------------------------------------- e-mail


def _private_ca(tmp_path: Path) -> tuple[Path, Path, str]:
    """A CA of the test's own and a certificate for 127.0.0.1 it signed: the server's
    certificate and key files, and the CA (PEM) the channel is told to trust."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, issuer, public_key, signing_key, ca: bool, san=None):
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return b.sign(signing_key, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = cert("kenny e2e CA", "kenny e2e CA", ca_key.public_key(), ca_key, True)
    leaf = cert("127.0.0.1", "kenny e2e CA", leaf_key.public_key(), ca_key, False,
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert_path, key_path = tmp_path / "smtp.crt", tmp_path / "smtp.key"
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path, ca.public_bytes(serialization.Encoding.PEM).decode()


async def test_email_goes_out_over_starttls(kenny, tmp_path):
    from aiosmtpd.controller import Controller

    received: list[dict] = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802
            received.append({"tls": session.ssl is not None, "to": envelope.rcpt_tos, "data": envelope.content.decode()})
            return "250 OK"

    cert, key, pem = _private_ca(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    # The controller checks its own port once started, so it needs a real one.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    smtp = Controller(Handler(), hostname="127.0.0.1", port=port, tls_context=context, require_starttls=True)
    smtp.start()
    try:
        await kenny.start_agents(["pc-a"])
        config = {"kind": "email", "host": "127.0.0.1", "port": port, "from": "kenny@example.org",
                  "to": ["admin@example.org"], "tls": "starttls", "ca_pem": pem}
        # Plain SMTP is refused for a server that is not on this machine.
        bad = _api(kenny, "POST", "/api/alerts/channels", json={"name": "mail", "config": {**config, "host": "smtp.example.org", "tls": "none"}})
        assert bad.status_code == 400 and "only allowed for an SMTP server on this machine" in bad.text, bad.text
        r = _api(kenny, "POST", "/api/alerts/channels", json={"name": "mail", "digest": True, "config": config})
        assert r.status_code == 201, r.text
        cid = r.json()["channel"]["id"]

        sent = _api(kenny, "POST", f"/api/alerts/channels/{cid}/test")
        assert sent.json() == {"sent": True}, sent.text
        # Found by content: the PC's own alerts (an unencrypted disk, say) may come too.
        tests = [m for m in received if "Subject: [kenny] kenny test message" in m["data"]]
        assert len(tests) == 1 and tests[0]["tls"] is True and tests[0]["to"] == ["admin@example.org"], received
        assert all(m["tls"] for m in received), "every e-mail went over STARTTLS"

        _set_memory_warn(kenny, 1)
        await _until("the alert e-mail", lambda: any("pc-a: memory" in m["data"] for m in received))

        digest = _api(kenny, "POST", f"/api/alerts/channels/{cid}/digest")
        assert digest.json() == {"sent": True}, digest.text
        digests = [m["data"] for m in received if "weekly digest" in m["data"]]
        assert len(digests) == 1, received
        body = digests[0]
        assert "weekly digest" in body and "Open problems (" in body and "pc-a: memory is" in body, body
    finally:
        smtp.stop()


# --------------------------------------------------------------------------- offline


async def test_a_killed_agent_raises_the_offline_alert_after_the_set_time(kenny, receivers):
    ntfy, hook = receivers
    agents = await kenny.start_agents(["pc-a"])
    _channels(kenny, ntfy, hook)
    r = _api(kenny, "PUT", "/api/alerts/settings", json={"offline_after_secs": 10})
    assert r.status_code == 200 and r.json()["settings"]["offline_after_secs"] == 10, r.text
    bad = _api(kenny, "PUT", "/api/alerts/settings", json={"offline_after_secs": 1})
    assert bad.status_code == 400 and "offline_after_secs must be 10" in bad.text, bad.text

    agents["pc-a"].proc.kill9()
    await kenny.wait_agents(["pc-a"], online=False)
    gone = time.monotonic()
    alert = await _until("the offline alert", lambda: _hook_events(hook, "offline"), timeout=40)
    assert time.monotonic() - gone >= 8, "not before the set time"
    assert alert[0]["status"] == "crit" and "not connected since" in alert[0]["reason"], alert
    await _until("the offline alert on ntfy", lambda: _ntfy_titles(ntfy, "CRIT pc-a: offline"))

    # Back: the alert clears with a recovery.
    kenny.start_agent("pc-a", creds=agents["pc-a"].creds, enroll=False)
    await kenny.wait_agents(["pc-a"])
    events = await _until("the recovery", lambda: [e["event"] for e in _hook_events(hook, "offline")] == ["alert", "recovery"] or None)
    assert events


# --------------------------------------------------------------------------- changes


async def test_a_new_local_admin_is_a_high_priority_change_and_an_alert(kenny, tmp_path, receivers):
    ntfy, hook = receivers
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\nkid:x:1001:1001:Kid:/home/kid:/bin/bash\n")
    (etc / "shadow").write_text("root:!:20000:0:99999:7:::\nkid:!:20000:0:99999:7:::\n")
    (etc / "group").write_text("root:x:0:\nsudo:x:27:\nkid:x:1001:\n")
    kenny.start_agent("pc-b", env={"KENNY_ETC_ROOT": str(etc)})
    await kenny.wait_agents(["pc-b"])
    _channels(kenny, ntfy, hook)
    async with kenny.mcp() as client:
        for _ in range(100):
            if expect_ok(await call(client, "agent_health", {"agent_id": "pc-b"}))["health"]:
                break
            await asyncio.sleep(0.1)
        assert expect_ok(await call(client, "agent_changes", {"agent_id": "pc-b"}))["changes"] == [], "the first snapshot is the baseline"

        # Someone adds an account and makes it an administrator.
        (etc / "passwd").write_text((etc / "passwd").read_text() + "helper:x:1002:1002::/home/helper:/bin/bash\n")
        (etc / "shadow").write_text((etc / "shadow").read_text() + "helper:$6$x$y:20500:0:99999:7:::\n")
        (etc / "group").write_text("root:x:0:\nsudo:x:27:helper\nkid:x:1001:\nhelper:x:1002:\n")
        assert _api(kenny, "POST", "/api/agent/pc-b/refresh").status_code == 200

        deadline = time.monotonic() + WAIT
        while True:
            out = expect_ok(await call(client, "agent_changes", {"agent_id": "pc-b", "since": "1h"}))
            if out["changes"]:
                break
            assert time.monotonic() < deadline, out
            await asyncio.sleep(0.2)
        first = out["changes"][0]
        assert (first["kind"], first["item"], first["priority"]) == ("admin_added", "helper", "high"), out
        assert first["detail"] == "new local administrator: helper"
        assert any(c["detail"] == "new account: helper" for c in out["changes"]), out
        expect_error(await call(client, "agent_changes", {"agent_id": "pc-b", "since": "yesterday"}), "bad_args")

    alert = await _until("the change alert", lambda: _hook_events(hook, "change:local_accounts"))
    assert alert[0]["status"] == "crit" and alert[0]["reason"] == "new local administrator: helper", alert
    await _until("the change alert on ntfy", lambda: _ntfy_titles(ntfy, "pc-b: change in local_accounts"))


async def test_a_failing_receiver_is_retried_and_the_failure_shown(kenny, receivers):
    ntfy, hook = receivers
    hook.status = 500
    await kenny.start_agents(["pc-a"])
    _, hook_id = _channels(kenny, ntfy, hook)
    test = _api(kenny, "POST", f"/api/alerts/channels/{hook_id}/test")
    assert test.json()["sent"] is False and "HTTP 500" in test.json()["error"], test.text
    _set_memory_warn(kenny, 1)
    await _until("the first attempt", lambda: _hook_events(hook, "memory"))
    deliveries = await _until(
        "the failure is recorded",
        lambda: [d for d in _api(kenny, "GET", "/api/alerts/deliveries").json()["deliveries"]
                 if d["channel"] == "hook" and d["event"] == "alert" and d["attempts"] >= 1] or None,
    )
    d = deliveries[0]
    assert d["status"] == "pending" and "HTTP 500" in d["last_error"] and d["next_at"] > d["created_at"], d
    # The ntfy channel was not held up by the failing one.
    await _until("ntfy got it", lambda: _ntfy_titles(ntfy, "pc-a: memory"))
