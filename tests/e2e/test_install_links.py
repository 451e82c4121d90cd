"""Install links: a superuser makes a one-time, expiring URL; the command that comes with it,
run from a shell on the PC, fetches a script that downloads this server's agent build,
checks it against the manifest the server key signed, and runs `kenny-agent install` with a
fresh enrollment token. Installs are staged under a private root (`KENNY_INSTALL_ROOT`, as
the service tests do), and the installed binary, started with the settings file it wrote,
connects and serves calls."""

from __future__ import annotations

import json
import platform
import subprocess

import httpx

from conftest import AGENT_BIN, SERVER_BIN, call, shell_stdout

ARCH = platform.machine()


def _http(kenny) -> httpx.Client:
    return httpx.Client(base_url=kenny.base_url, headers={"Authorization": f"Bearer {kenny.admin_pat}"}, timeout=30)


def _add_build(kenny) -> None:
    out = kenny.admin("releases", "add", str(AGENT_BIN), "--version", "0.1.0", "--os", "linux", "--arch", ARCH)
    assert f"kenny-agent-0.1.0-linux-{ARCH}" in out, out


def _link(kenny, agent_id: str, **extra) -> dict:
    with _http(kenny) as http:
        r = http.post("/api/install-links", json={"agent_id": agent_id, "os": "linux", **extra})
    assert r.status_code == 201, r.text
    return r.json()


def _run_command(link: dict, root) -> subprocess.CompletedProcess:
    """The link's own command, as given, with the install staged under `root` instead of
    sudo (this test must not install a service on the machine)."""
    command = link["command"]
    assert command.endswith("| sudo sh"), command
    staged = command.removesuffix("| sudo sh") + f"| env KENNY_INSTALL_ROOT='{root}' sh"
    return subprocess.run(["sh", "-c", staged], capture_output=True, text=True, timeout=120)


async def test_a_link_installs_an_agent_that_connects_once_and_only_once(kenny, tmp_path):
    _add_build(kenny)
    link = _link(kenny, "pc-linked")
    assert link["url"].startswith(f"{kenny.base_url}/install/kenny_inl_"), link

    # Opening it (a person, a chat app's preview) shows what it is for and uses nothing.
    page = httpx.get(link["url"], timeout=10)
    assert page.status_code == 200 and "pc-linked" in page.text and "curl -sS -X POST" in page.text, page.text

    root = tmp_path / "root"
    res = _run_command(link, root)
    assert res.returncode == 0, f"stdout: {res.stdout}\nstderr: {res.stderr}"
    assert "matches its manifest, signed by the server key" in res.stderr, res.stderr
    binary = root / "usr/local/bin/kenny-agent"
    config = root / "etc/kenny-agent/agent.env"
    assert binary.read_bytes() == AGENT_BIN.read_bytes()
    settings = config.read_text()
    assert f"KENNY_SERVER={kenny.base_url}\n" in settings and "KENNY_AGENT_ID=pc-linked\n" in settings, settings
    assert "KENNY_ENROLL_TOKEN=kenny_agt_" in settings

    # What the unit would start: the installed binary with its settings file alone.
    kenny._spawn(
        "agent-linked",
        [str(binary), "run", "--config", str(config), "--state-dir", str(tmp_path / "state"),
         "--switch-dir", str(tmp_path / "switch")],
    )
    await kenny.wait_agents(["pc-linked"])
    async with kenny.mcp() as client:
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-linked", "command": "echo via-link"}))
    assert out == "via-link\n"

    # A second use is refused, and the shell shows why; nothing more is installed.
    again = _run_command(link, tmp_path / "again")
    assert again.returncode != 0
    assert "already used" in again.stdout + again.stderr, again
    assert not (tmp_path / "again").exists()

    with _http(kenny) as http:
        links = http.get("/api/install-links").json()["links"]
    used = next(row for row in links if row["id"] == link["id"])
    assert used["state"] == "used" and used["used_from"] == "127.0.0.1", used
    rows = [e for e in kenny.audit(agent_id="pc-linked") if e["tool"].startswith("install link used")]
    assert rows and rows[0]["user"] == "kenny" and f"install link {link['id']} made by admin" in rows[0]["credential_id"], rows


async def test_expired_and_revoked_links_are_refused_with_the_reason(kenny, tmp_path):
    _add_build(kenny)
    expired = _link(kenny, "pc-late", expires_minutes=5)
    # Time passes: the link's expiry is moved into the past in the server's database.
    kenny.sql("UPDATE install_links SET expires_at = '2020-01-01T00:00:00.000Z' WHERE id = ?", (expired["id"],))
    page = httpx.get(expired["url"], timeout=10)
    assert page.status_code == 410 and "expired" in page.text, page.text
    res = _run_command(expired, tmp_path / "late")
    assert res.returncode != 0 and "expired at 2020-01-01" in res.stdout, res
    assert not (tmp_path / "late").exists()

    revoked = _link(kenny, "pc-never")
    with _http(kenny) as http:
        r = http.delete(f"/api/install-links/{revoked['id']}")
        assert r.status_code == 200 and r.json()["state"] == "revoked", r.text
        r = http.post(revoked["url"].removeprefix(kenny.base_url))
        assert r.status_code == 410 and "revoked" in r.text, r.text
        # A link made for nothing enrolls nothing: the PC was never created.
        known = {a["agent_id"] for a in http.get("/api/agents").json()["agents"]}
        assert not known & {"pc-never", "pc-late"}, known
        # An unknown token looks like nothing.
        r = http.post("/install/kenny_inl_not-a-real-one")
        assert r.status_code == 404 and "does not exist" in r.text

    # Bad requests are refused with what to send, and store nothing.
    with _http(kenny) as http:
        for body, said in (
            ({"agent_id": "pc x", "os": "linux"}, "not valid"),
            ({"agent_id": "pc-y", "os": "macos"}, "use linux or windows"),
            ({"agent_id": "pc-y", "os": "linux", "expires_minutes": 1}, "7 days"),
        ):
            r = http.post("/api/install-links", json=body)
            assert r.status_code == 400 and said in r.text, (body, r.text)
        assert len(http.get("/api/install-links").json()["links"]) == 2
    # The command line makes them too, for the URL the PC reaches the server by.
    made = json.loads(kenny.admin("agent", "link", "pc-cli", "--os", "windows", "--url", kenny.base_url))
    assert made["url"].startswith(f"{kenny.base_url}/install/kenny_inl_") and "irm -Method Post" in made["command"], made
    bad = subprocess.run([str(SERVER_BIN), "agent", "link", "pc-cli", "--url", "kenny.example", "--data-dir", str(kenny.data_dir)],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "is not the server's URL" in bad.stderr, bad
    # Another web site cannot spend a link from someone's browser.
    fresh = _link(kenny, "pc-site")
    r = httpx.post(fresh["url"], headers={"Origin": "https://evil.example"}, timeout=10)
    assert r.status_code == 403
    with _http(kenny) as http:
        row = next(x for x in http.get("/api/install-links").json()["links"] if x["id"] == fresh["id"])
    assert row["state"] == "active"


async def test_the_script_refuses_a_build_that_does_not_match_its_signed_manifest(kenny, tmp_path):
    _add_build(kenny)
    # The script, fetched; then the build on the server changes under it (a swapped file,
    # or one altered on the way): same size, other bytes.
    script = httpx.post(_link(kenny, "pc-swap")["url"], timeout=30).text
    assert script.startswith("#!/bin/sh\n"), script[:200]
    release = kenny.data_dir / "agent-releases" / f"kenny-agent-0.1.0-linux-{ARCH}"
    data = bytearray(release.read_bytes())
    data[-1] ^= 0xFF
    release.write_bytes(bytes(data))
    res = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "KENNY_INSTALL_ROOT": str(tmp_path / "swap")})
    assert res.returncode != 0 and "SHA-256" in res.stderr and "nothing was installed" in res.stderr, res
    assert not (tmp_path / "swap").exists()

    # A script whose manifest was edited (say, to point at another hash) fails the server
    # key's signature.
    release.write_bytes(AGENT_BIN.read_bytes())
    script = httpx.post(_link(kenny, "pc-forged")["url"], timeout=30).text
    forged = script.replace('"allow_downgrade":false', '"allow_downgrade":true')
    assert forged != script
    res = subprocess.run(["sh", "-c", forged], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "KENNY_INSTALL_ROOT": str(tmp_path / "forged")})
    assert res.returncode != 0 and "not signed by the server key" in res.stderr, res
    assert not (tmp_path / "forged").exists()

    # Without a build for the PC's OS nothing is spent: the link waits for one.
    release.unlink()
    link = _link(kenny, "pc-wait")
    r = httpx.post(link["url"], timeout=30)
    assert r.status_code == 503 and "still good" in r.text, r.text
    with _http(kenny) as http:
        row = next(x for x in http.get("/api/install-links").json()["links"] if x["id"] == link["id"])
    assert row["state"] == "active"
