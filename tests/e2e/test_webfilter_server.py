"""The web filter run by the server, end to end: list sources (a file in the data
directory and a local HTTP server with ETags), categories, custom entries, webfilter_push
into a real agent's test hosts file (KENNY_HOSTS_FILE), drift after a hand edit, the
schedule switching the list at its edge with nobody calling, a list over the cap refused,
a failed fetch keeping the last good copy, and a `user` refused every change."""

from __future__ import annotations

import datetime as dt
import hashlib
import http.server
import threading
import time

import httpx
import pytest

from conftest import call, expect_error, expect_ok

START = "# >>> kenny webfilter (managed by kenny; do not edit) >>>"
END = "# <<< kenny webfilter <<<"
WAIT = 30


class ListServer:
    """Serves one blocklist with an ETag; can be told to fail."""

    def __init__(self, text: str):
        self.text = text
        self.failing = False
        self.requests: list[dict[str, str]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                owner.requests.append({k.lower(): v for k, v in self.headers.items()})
                if owner.failing:
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"<html><body>Internal error</body></html>")
                    return
                body = owner.text.encode()
                etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                if self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/adult.txt"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def list_server():
    server = ListServer("# a test list\n0.0.0.0 adult-one.example\n0.0.0.0 adult-two.example\n0.0.0.0 ok.adult-three.example\n")
    yield server
    server.close()


def _api(kenny, method: str, path: str, token: str | None = None, **kw) -> httpx.Response:
    with httpx.Client(base_url=kenny.base_url, timeout=60) as http_client:
        return http_client.request(method, path, headers={"Authorization": f"Bearer {token or kenny.admin_pat}"}, **kw)


def _block(hosts) -> list[str]:
    text = hosts.read_text()
    if START not in text:
        return []
    return [line.split()[1] for line in text[text.index(START) : text.index(END)].splitlines()[1:] if line.startswith("0.0.0.0")]


def _until(what, predicate, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if predicate(value):
            return value
        assert time.monotonic() < deadline, f"gave up waiting; last value {value!r}"
        time.sleep(0.2)


async def _agent(kenny, tmp_path, agent_id="pc-kid"):
    hosts = tmp_path / f"{agent_id}-hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    policy = tmp_path / f"{agent_id}-policy"
    policy.mkdir()
    await kenny.start_agents([agent_id], env={"KENNY_HOSTS_FILE": str(hosts), "KENNY_POLICY_ROOT": str(policy)})
    return hosts


async def test_sources_push_drift_cap_and_roles(kenny, tmp_path, list_server):
    hosts = await _agent(kenny, tmp_path)
    lists_dir = kenny.data_dir / "webfilter-lists"
    (lists_dir / "school.txt").write_text("distraction-one.example\ndistraction-two.example\n")

    # Sources: a local HTTP server and a file in the data directory.
    r = _api(kenny, "POST", "/api/webfilter/sources", json={"category": "adult", "url": list_server.url})
    assert r.status_code == 201, r.text
    adult = r.json()["source"]
    assert adult["domain_count"] == 3 and adult["error"] is None, adult
    r = _api(kenny, "POST", "/api/webfilter/sources", json={"category": "school", "url": (lists_dir / "school.txt").as_uri()})
    assert r.status_code == 201 and r.json()["source"]["domain_count"] == 2, r.text
    outside = tmp_path / "outside.txt"
    outside.write_text("x.example\n")
    r = _api(kenny, "POST", "/api/webfilter/sources", json={"category": "nope", "url": outside.as_uri()})
    assert r.status_code == 400 and "must be a file in" in r.json()["error"]["message"], r.text

    a = {"agent_id": "pc-kid"}
    async with kenny.mcp() as client:
        got = expect_ok(await call(client, "webfilter_get", a))
        assert got["configured"] is False
        names = {c["name"] for c in got["categories_available"]}
        assert {"adult", "school", "social", "games"} <= names, names

        changed = expect_ok(await call(client, "webfilter_set", {
            **a,
            "enabled": True,
            "categories": ["adult", "school"],
            "add_entries": [
                {"domain": "Bad.Example", "kind": "block"},
                {"domain": "adult-three.example", "kind": "allow"},
                {"domain": "watched.example", "kind": "watch"},
            ],
        }))
        assert "block bad.example" in changed["changed"], changed
        pushed = expect_ok(await call(client, "webfilter_push", a))
        expected = sorted([
            "adult-one.example", "adult-two.example", "bad.example", "www.bad.example",
            "distraction-one.example", "distraction-two.example",
        ])
        assert pushed["pushed"]["action"] == "applied" and pushed["pushed"]["count"] == len(expected), pushed
        assert _block(hosts) == expected, hosts.read_text()
        applied = pushed["state"]["applied"]
        assert applied["list_hash"] == pushed["pushed"]["list_hash"] and applied["by"] == "admin", applied
        status = expect_ok(await call(client, "webfilter_status", a))
        assert status["list_hash"] == applied["list_hash"] == status["content_hash"], status

        # A hand edit: the server sees the drift when it asks, then puts the block back.
        text = hosts.read_text()
        hosts.write_text(text.replace("0.0.0.0 bad.example\n", ""))
        got = expect_ok(await call(client, "webfilter_get", {**a, "check": True}))
        assert got["checked"] is True and got["state"]["drift"] is True, got["state"]
        assert "drifted" in got["state"]["summary"]
        _until(lambda: _block(hosts), lambda b: b == expected)
        rows = _api(kenny, "GET", "/api/audit", params={"agent_id": "pc-kid", "tool": "webfilter_apply"}).json()["entries"]
        repair = [r for r in rows if r["user"] == "kenny"]
        assert repair and repair[0]["credential_kind"] == "server", rows
        assert "hosts file was changed" in repair[0]["credential_id"], repair[0]

        # A failed fetch keeps the last good copy.
        list_server.failing = True
        r = _api(kenny, "POST", f"/api/webfilter/sources/{adult['id']}/refresh")
        assert r.status_code == 200 and r.json()["fetch"]["outcome"] == "failed", r.text
        assert "500" in r.json()["source"]["error"] and r.json()["source"]["domain_count"] == 3, r.text
        cats = {c["name"]: c for c in _api(kenny, "GET", "/api/webfilter/sources").json()["categories"]}
        assert cats["adult"]["domains"] == 3
        list_server.failing = False
        r = _api(kenny, "POST", f"/api/webfilter/sources/{adult['id']}/refresh")
        assert r.json()["fetch"]["outcome"] == "unchanged", r.text
        assert list_server.requests[-1].get("if-none-match"), "asked only for a changed list"

        # Over the cap: refused with the reason, nothing sent, the PC keeps its list.
        (lists_dir / "huge.txt").write_text("".join(f"n{i}.huge.example\n" for i in range(10_001)))
        r = _api(kenny, "POST", "/api/webfilter/sources", json={"category": "huge", "url": (lists_dir / "huge.txt").as_uri()})
        assert r.status_code == 201, r.text
        expect_ok(await call(client, "webfilter_set", {**a, "categories": ["adult", "school", "huge"]}))
        message = expect_error(await call(client, "webfilter_push", a), "blocked")
        assert "over the cap of 10000" in message and "keeps its current list" in message, message
        got = expect_ok(await call(client, "webfilter_get", a))
        assert got["state"]["over_cap"] and got["state"]["summary"].startswith("over the cap"), got["state"]
        assert _block(hosts) == expected
        expect_ok(await call(client, "webfilter_set", {**a, "categories": ["adult", "school"]}))

    # A `user` may look at its PC's filter, never change it.
    kenny.add_user("kid", "user", hosts=["pc-kid"])
    kid = kenny.create_token("kid")
    async with kenny.mcp(token=kid) as client:
        expect_ok(await call(client, "webfilter_get", a))
        for tool, args in [
            ("webfilter_set", {**a, "enabled": False}),
            ("webfilter_push", a),
            ("webfilter_apply", {**a, "domains": ["x.example"]}),
            ("webfilter_clear", a),
        ]:
            message = expect_error(await call(client, tool, args), "forbidden")
            assert "operator" in message, message
    assert _api(kenny, "POST", "/api/agent/pc-kid/webfilter/push", token=kid).status_code == 403
    assert _api(kenny, "POST", "/api/webfilter/sources", token=kid, json={"category": "x", "url": list_server.url}).status_code == 403
    assert _block(hosts) == expected


async def test_a_schedule_edge_switches_the_list_with_nobody_calling(kenny, tmp_path):
    hosts = await _agent(kenny, tmp_path)
    a = {"agent_id": "pc-kid"}
    # Windows are set in minutes: the edge is the next minute that is at least 3 s away.
    now = dt.datetime.now(dt.timezone.utc)
    edge = (now + dt.timedelta(seconds=3)).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    end = edge + dt.timedelta(hours=2)
    window = {
        "name": "school night",
        "days": [edge.strftime("%a").lower()],
        "start": edge.strftime("%H:%M"),
        "end": end.strftime("%H:%M"),
        "time_zone": "UTC",
        "categories": ["games"],
        "set": "on",
    }
    async with kenny.mcp() as client:
        expect_ok(await call(client, "webfilter_set", {
            **a, "enabled": True, "add_entries": [{"domain": "bad.example", "kind": "block"}], "schedules": [window],
        }))
        expect_ok(await call(client, "webfilter_push", a))
        assert _block(hosts) == ["bad.example", "www.bad.example"]
        got = expect_ok(await call(client, "webfilter_get", a))
        assert got["state"]["next_change"]["window"] == "school night", got["state"]
        assert got["state"]["next_change"]["at"] == edge.strftime("%Y-%m-%dT%H:%M:%S.000Z"), got["state"]

    block = _until(lambda: _block(hosts), lambda b: "roblox.com" in b, timeout=(edge - now).total_seconds() + WAIT)
    switched = time.time()
    assert switched >= edge.timestamp(), "not before the edge"
    assert "bad.example" in block
    rows = _api(kenny, "GET", "/api/audit", params={"agent_id": "pc-kid", "tool": "webfilter_apply"}).json()["entries"]
    by_schedule = [r for r in rows if r["user"] == "kenny"]
    assert by_schedule and by_schedule[0]["credential_id"] == "web filter schedule: school night started", rows


def _chrome_history(home, visits: list[tuple[str, float]]) -> None:
    """A Chrome profile with a `History` database shaped like Chrome's own."""
    import sqlite3

    profile = home / ".config" / "google-chrome" / "Default"
    profile.mkdir(parents=True)
    (profile / "Preferences").write_text("{}")
    db = sqlite3.connect(profile / "History")
    db.executescript(
        "CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT,url LONGVARCHAR,title LONGVARCHAR,"
        "visit_count INTEGER DEFAULT 0 NOT NULL,typed_count INTEGER DEFAULT 0 NOT NULL,"
        "last_visit_time INTEGER NOT NULL,hidden INTEGER DEFAULT 0 NOT NULL);"
        "CREATE TABLE visits(id INTEGER PRIMARY KEY AUTOINCREMENT,url INTEGER NOT NULL,"
        "visit_time INTEGER NOT NULL,from_visit INTEGER,transition INTEGER DEFAULT 0 NOT NULL,"
        "segment_id INTEGER,visit_duration INTEGER DEFAULT 0 NOT NULL);"
    )
    for url, unix in visits:
        micros = int((unix + 11_644_473_600) * 1_000_000)  # Chrome counts from 1601
        cur = db.execute("INSERT INTO urls(url, title, visit_count, last_visit_time) VALUES (?, 't', 1, ?)", (url, micros))
        db.execute("INSERT INTO visits(url, visit_time) VALUES (?, ?)", (cur.lastrowid, micros))
    db.commit()
    db.close()


async def test_recorded_activity_is_kept_flagged_and_alerted_once(kenny, tmp_path):
    homes = tmp_path / "homes"
    now = time.time()
    _chrome_history(homes / "kid", [
        ("https://www.bet365.com/#/home", now - 600),
        ("https://cdn.watched.example/a/page?q=secret", now - 300),
        ("https://plain.example/", now - 60),
    ])
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    policy = tmp_path / "policy"
    policy.mkdir()
    await kenny.start_agents(["pc-kid"], env={
        "KENNY_HOSTS_FILE": str(hosts), "KENNY_POLICY_ROOT": str(policy), "KENNY_HOME_ROOT": str(homes),
    })
    a = {"agent_id": "pc-kid"}
    async with kenny.mcp() as client:
        expect_ok(await call(client, "webfilter_set", {
            **a, "enabled": True, "categories": ["gambling"], "record_activity": True,
            "add_entries": [{"domain": "watched.example", "kind": "watch"}],
        }))
        # The server asks the PC for its activity on its own, as the filter says to.
        deadline = time.monotonic() + WAIT
        while True:
            got = expect_ok(await call(client, "web_activity_query", {**a, "flagged_only": True}))
            if got["count"] >= 2:
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.3)
        flags = {d["domain"]: d["flag"] for d in got["domains"]}
        assert flags == {"www.bet365.com": "category gambling", "cdn.watched.example": "watch entry watched.example"}, got
        assert got["recording"] is True
        everything = expect_ok(await call(client, "web_activity_query", {**a, "hours": 1}))
        assert "plain.example" in {d["domain"] for d in everything["domains"]}
        assert not any("secret" in d["domain"] or "/" in d["domain"] for d in everything["domains"]), "domains only"

    recent = _api(kenny, "GET", "/api/alerts").json()["recent"]
    flagged = [r for r in recent if r["agent_id"] == "pc-kid" and r["key"] == "change:web_activity"]
    assert len(flagged) == 1 and "www.bet365.com" in flagged[0]["reason"], recent
    rows = _api(kenny, "GET", "/api/audit", params={"agent_id": "pc-kid", "tool": "telemetry_collect"}).json()["entries"]
    assert rows and rows[0]["user"] == "kenny" and rows[0]["credential_id"] == "web filter: recording web activity", rows
    rows = _api(kenny, "GET", "/api/audit", params={"agent_id": "pc-kid", "tool": "web_activity_query"}).json()["entries"]
    assert len(rows) >= 2 and {r["user"] for r in rows} == {"admin"}, "every read is audited, by who read"


async def test_lifting_the_dns_over_https_lockdown_takes_the_policy_off_the_pc(kenny, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    policy = tmp_path / "policy"
    policy.mkdir()
    chrome = policy / "etc/opt/chrome/policies/managed/kenny-webfilter.json"
    await kenny.start_agents(["pc-kid"], env={"KENNY_HOSTS_FILE": str(hosts), "KENNY_POLICY_ROOT": str(policy)})
    a = {"agent_id": "pc-kid"}
    async with kenny.mcp() as client:
        expect_ok(await call(client, "webfilter_set", {
            **a, "enabled": True, "doh_lockdown": True, "add_entries": [{"domain": "bad.example", "kind": "block"}],
        }))
        pushed = expect_ok(await call(client, "webfilter_push", a))
        assert pushed["pushed"]["doh_lockdown"] is True, pushed
        assert chrome.exists(), "the lockdown is on the PC"
        # Turned off: the server takes the policy off by itself, and the block stays.
        expect_ok(await call(client, "webfilter_set", {**a, "doh_lockdown": False}))
        _until(lambda: chrome.exists(), lambda present: not present)
        _until(lambda: _block(hosts), lambda b: b == ["bad.example", "www.bad.example"])
        got = expect_ok(await call(client, "webfilter_get", {**a, "check": True}))
        assert got["state"]["pending"] is False and got["state"]["drift"] is False, got["state"]
