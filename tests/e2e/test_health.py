"""Fleet health as an MCP client sees it, with real agents: the server judges each
snapshot by its own rules and the operator's thresholds (agent_health, fleet_overview,
list_agents, the dashboard), a disk really filling up (a small ext4 image mounted only
in the agent's mount namespace) turns the PC crit with the mount named, new thresholds
re-judge every PC at once, agent_snapshot answers for an offline PC, list_agents pages
and filters, and a user outside a PC's scope gets `forbidden` from every health tool."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from conftest import call, expect_error, expect_ok

WAIT = 20.0


def _api(kenny, method: str, path: str, token: str | None = None, **kw) -> httpx.Response:
    with httpx.Client(base_url=kenny.base_url, timeout=30) as http:
        return http.request(method, path, headers={"Authorization": f"Bearer {token or kenny.admin_pat}"}, **kw)


async def _health(client, agent_id: str, until=lambda h: h["health"] is not None) -> dict:
    """agent_health, polled until `until` holds (snapshots are stored in the background)."""
    deadline = time.monotonic() + WAIT
    while True:
        health = expect_ok(await call(client, "agent_health", {"agent_id": agent_id}))
        if until(health):
            return health
        assert time.monotonic() < deadline, f"agent_health never got there: {health}"
        await asyncio.sleep(0.1)


def _verdict(health: dict, section: str) -> dict:
    return next(v for v in health["sections"] if v["section"] == section)


# --------------------------------------------------------------------------- a real disk


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 16 MiB ext4 image and an empty mount point; the agent mounts it in a private
    mount namespace of its own, so nothing outside the test sees it."""
    missing = [tool for tool in ("mkfs.ext4", "unshare", "nsenter", "mount") if not shutil.which(tool)]
    if missing or os.geteuid() != 0 or not Path("/dev/loop-control").exists():
        pytest.skip(f"needs root, loop devices and {', '.join(missing) or 'util-linux'} to mount a small disk")
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(16 * 1024 * 1024)
    # No blocks reserved for root: full means 100% used.
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    return image, mount_point


def _in_agent_namespace(pid: int, script: str) -> None:
    subprocess.run(["nsenter", "-t", str(pid), "-m", "sh", "-c", script], check=False, timeout=30)


async def test_a_filling_disk_turns_the_pc_crit_with_its_reason_everywhere(kenny, small_disk):
    image, mount_point = small_disk
    wrap = [
        "unshare", "-m", "--propagation", "private",
        "sh", "-c", 'mount -o loop "$1" "$2" && shift 2 && exec "$@"', "sh", str(image), str(mount_point),
    ]
    agent = kenny.start_agent("pc-disk", wrap=wrap)
    kenny.start_agent("pc-calm")
    await kenny.wait_agents(["pc-disk", "pc-calm"])
    async with kenny.mcp() as client:
        # Connected, it has sent a first snapshot: the small disk is empty.
        first = await _health(client, "pc-disk")
        assert str(mount_point) not in " ".join(first["reasons"]), first
        # pc-calm shares this machine's own disks: on a CI machine whose "/" is nearly
        # full it is crit too, for its own reason. What follows counts it as it is.
        calm = await _health(client, "pc-calm")
        calm_crit = calm["health"] == "crit"
        assert all(str(mount_point) not in r for r in calm["reasons"]), calm

        _in_agent_namespace(agent.proc.pid, f'head -c 32M /dev/zero > "{mount_point}/fill"; sync')
        r = _api(kenny, "POST", "/api/agent/pc-disk/refresh")
        assert r.status_code == 200, r.text
        assert r.json()["health"]["status"] == "crit", r.json()["health"]

        health = await _health(client, "pc-disk", lambda h: h["health"] == "crit")
        disk = _verdict(health, "disk")
        assert disk["status"] == "crit", disk
        # The reason lists every filling disk, fullest first; on a busy CI machine "/" may
        # be among them, so only the small disk's own words and the threshold are checked.
        assert disk["reason"].startswith(f"{mount_point} is 100% full"), disk
        assert disk["reason"].endswith("(threshold 97%)"), disk
        assert disk["attention"] and "free space" in disk["attention"], disk
        assert health["reasons"][0].startswith("disk: "), health["reasons"]
        assert health["online"] is True and health["collected_at"].endswith("Z")

        overview = expect_ok(await call(client, "fleet_overview", {}))
        assert overview["total"] == 2 and overview["online"] == 2, overview
        assert overview["health"]["crit"] == 1 + calm_crit, (overview["health"], calm)
        flagged = {a["agent_id"]: a for a in overview["attention"]}
        assert set(flagged) >= {"pc-disk"}, overview["attention"]
        assert str(mount_point) in flagged["pc-disk"]["reason"], overview["attention"]
        assert overview["os"] == {"linux": 2}, overview

        crit = expect_ok(await call(client, "list_agents", {"health": "crit"}))
        expected = ["pc-calm", "pc-disk"] if calm_crit else ["pc-disk"]
        assert sorted(a["agent_id"] for a in crit["agents"]) == expected, crit
        assert crit["total"] == len(expected), crit
        disk_row = next(a for a in crit["agents"] if a["agent_id"] == "pc-disk")
        assert disk_row["health"] == "crit"
        assert str(mount_point) in disk_row["health_reason"], crit

        # The dashboard says the same: the server's verdict, not the agent's word.
        from signin_helpers import PASSWORD, _client, _login

        kenny.add_user("watcher", "operator", password=PASSWORD)
        with _client(kenny) as http:
            assert _login(http, "watcher", PASSWORD).status_code == 303
            page = http.get("/hosts/pc-disk")
            assert page.status_code == 200
            assert 'data-section="disk" data-status="crit"' in page.text, page.text[:2000]
            assert f"{mount_point} is 100% full" in page.text
            fleet = http.get("/")
            assert f"disk: {mount_point} is 100% full" in fleet.text

        # Freed again: back to what the rest of the PC says, and the reason is gone.
        _in_agent_namespace(agent.proc.pid, f'rm -f "{mount_point}/fill"; sync')
        assert _api(kenny, "POST", "/api/agent/pc-disk/refresh").status_code == 200
        health = await _health(client, "pc-disk", lambda h: str(mount_point) not in " ".join(h["reasons"]))
        assert _verdict(health, "disk")["status"] != "crit" or "/" in _verdict(health, "disk")["reason"], health


# --------------------------------------------------------------------------- thresholds


async def test_new_thresholds_judge_every_pc_again_without_a_new_snapshot(kenny):
    await kenny.start_agents(["pc-a"])
    kenny.add_user("olga", "operator")
    olga = kenny.create_token("olga")
    async with kenny.mcp() as client:
        before = await _health(client, "pc-a")
        memory = _verdict(before, "memory")
        assert memory["status"] == "ok", memory

        current = _api(kenny, "GET", "/api/health/thresholds", token=olga)
        assert current.status_code == 200, current.text
        body = current.json()
        assert body["thresholds"]["memory_warn_percent"] == 90 and body["defaults"] == body["thresholds"], body

        # Only a superuser changes them; nonsense is refused and changes nothing.
        refused = _api(kenny, "PUT", "/api/health/thresholds", token=olga, json={"memory_warn_percent": 1})
        assert refused.status_code == 403, refused.text
        bad = _api(kenny, "PUT", "/api/health/thresholds", json={"memory_warn_percent": 99, "memory_crit_percent": 98})
        assert bad.status_code == 400 and "memory_warn_percent (99) is above memory_crit_percent (98)" in bad.text, bad.text
        unknown = _api(kenny, "PUT", "/api/health/thresholds", json={"memory_warn": 1})
        assert unknown.status_code == 400 and "unknown threshold `memory_warn`" in unknown.text, unknown.text
        assert _api(kenny, "GET", "/api/health/thresholds").json()["thresholds"]["memory_warn_percent"] == 90

        changed = _api(kenny, "PUT", "/api/health/thresholds", json={"memory_warn_percent": 1})
        assert changed.status_code == 200, changed.text
        assert changed.json()["thresholds"]["memory_warn_percent"] == 1
        assert changed.json()["thresholds"]["memory_crit_percent"] == 97, "the rest stays"
        assert changed.json()["updated_by"] == "admin"

        # Same snapshot, judged again.
        after = await _health(client, "pc-a", lambda h: _verdict(h, "memory")["status"] != "ok")
        assert after["collected_at"] == before["collected_at"], (before, after)
        memory = _verdict(after, "memory")
        assert memory["status"] in ("warn", "crit") and "% used" in memory["reason"], memory

    # Kept across a restart, and audited like every change.
    kenny.stop_server()
    kenny.start_server()
    assert _api(kenny, "GET", "/api/health/thresholds").json()["thresholds"]["memory_warn_percent"] == 1
    actions = [row["tool"] for row in kenny.audit(limit=200)]
    assert "PUT /api/health/thresholds" in actions, actions


# --------------------------------------------------------------------------- offline PCs


async def test_agent_snapshot_and_health_answer_for_an_offline_pc(kenny):
    agents = await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        await _health(client, "pc-a")
        agents["pc-a"].proc.stop()
        await kenny.wait_agents(["pc-a"], online=False)

        snap = expect_ok(await call(client, "agent_snapshot", {"agent_id": "pc-a"}))
        assert snap["online"] is False
        assert {"disk", "memory", "local_accounts"} <= set(snap["snapshot"]), sorted(snap["snapshot"])
        assert snap["sections"] == list(snap["snapshot"]), snap["sections"]
        one = expect_ok(await call(client, "agent_snapshot", {"agent_id": "pc-a", "section": "memory"}))
        assert list(one["snapshot"]) == ["memory"] and one["snapshot"]["memory"]["total_bytes"] > 0, one
        message = expect_error(await call(client, "agent_snapshot", {"agent_id": "pc-a", "section": "nope"}), "bad_args")
        assert "no section `nope`" in message and "memory" in message, message

        health = expect_ok(await call(client, "agent_health", {"agent_id": "pc-a"}))
        assert health["online"] is False and health["health"] in ("ok", "unknown", "warn", "crit"), health
        assert "defender" in health["skipped"], "Windows-only sections do not apply to Linux"

        # A PC that never reported: no verdict yet, and it says why.
        kenny.add_agent("pc-new")
        fresh = expect_ok(await call(client, "agent_health", {"agent_id": "pc-new"}))
        assert fresh["health"] is None and "no snapshot" in fresh["note"], fresh
        expect_error(await call(client, "agent_snapshot", {"agent_id": "pc-new"}), "not_found")

        # The target is never guessed.
        expect_error(await call(client, "agent_health", {}), "no_agent")
        expect_error(await call(client, "agent_snapshot", {"agent_id": ""}), "no_agent")
        expect_error(await call(client, "agent_health", {"agent_id": "pc-nobody"}), "unknown_agent")


# --------------------------------------------------------------------------- scope


async def test_a_user_outside_a_pcs_scope_gets_forbidden_from_every_health_tool(kenny):
    await kenny.start_agents(["pc-a", "pc-b"])
    kenny.add_user("uma", "user", hosts=["pc-a"])
    uma = kenny.create_token("uma")
    async with kenny.mcp() as admin:
        await _health(admin, "pc-b")
    async with kenny.mcp(uma) as client:
        for tool, args in [
            ("agent_health", {"agent_id": "pc-b"}),
            ("agent_snapshot", {"agent_id": "pc-b"}),
            ("agent_snapshot", {"agent_id": "pc-b", "section": "disk"}),
            ("agent_changes", {"agent_id": "pc-b"}),
            ("alert_silence_list", {"agent_id": "pc-b"}),
        ]:
            message = expect_error(await call(client, tool, args), "forbidden")
            assert "uma may not reach agent pc-b" in message, message
        # Unknown ids look the same as ids out of reach.
        expect_error(await call(client, "agent_health", {"agent_id": "pc-nobody"}), "forbidden")

        listed = expect_ok(await call(client, "list_agents", {}))
        assert [a["agent_id"] for a in listed["agents"]] == ["pc-a"] and listed["total"] == 1, listed
        overview = expect_ok(await call(client, "fleet_overview", {}))
        assert overview["total"] == 1 and all(a["agent_id"] == "pc-a" for a in overview["attention"]), overview
        expect_ok(await call(client, "agent_health", {"agent_id": "pc-a"}))

    refusals = [r for r in kenny.audit(agent_id="pc-b", limit=100) if r["user"] == "uma"]
    assert {r["tool"] for r in refusals} >= {"agent_health", "agent_snapshot"}, refusals
    assert all(r["outcome"] == "refused" and r["error_code"] == "forbidden" for r in refusals), refusals


# --------------------------------------------------------------------------- paging


async def test_list_agents_pages_and_filters(kenny):
    await kenny.start_agents(["pc-live"])
    for i in range(7):
        kenny.add_agent(f"pc-{i:02d}")
    async with kenny.mcp() as client:
        await _health(client, "pc-live")
        seen, cursor, pages = [], None, 0
        while True:
            args = {"limit": 3, **({"cursor": cursor} if cursor else {})}
            page = expect_ok(await call(client, "list_agents", args))
            assert page["total"] == 8 and len(page["agents"]) <= 3, page
            seen += [a["agent_id"] for a in page["agents"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == 3 and seen == sorted(seen) and len(seen) == 8 == len(set(seen)), seen

        online = expect_ok(await call(client, "list_agents", {"online": True}))
        assert [a["agent_id"] for a in online["agents"]] == ["pc-live"] and online["total"] == 1, online
        assert online["agents"][0]["health"] in ("ok", "unknown", "warn", "crit")
        no_data = expect_ok(await call(client, "list_agents", {"health": "no_data"}))
        assert no_data["total"] == 7, no_data
        query = expect_ok(await call(client, "list_agents", {"query": "PC-0", "limit": 2}))
        assert query["total"] == 7 and [a["agent_id"] for a in query["agents"]] == ["pc-00", "pc-01"], query
        linux = expect_ok(await call(client, "list_agents", {"os": "linux"}))
        assert [a["agent_id"] for a in linux["agents"]] == ["pc-live"], linux

        for bad, why in [
            ({"limit": 0}, "limit must be 1 to 100"),
            ({"limit": 101}, "limit must be 1 to 100"),
            ({"health": "sick"}, "unknown variant `sick`"),
            ({"colour": "red"}, "unknown field `colour`"),
        ]:
            message = expect_error(await call(client, "list_agents", bad), "bad_args")
            assert why in message, (bad, message)
