"""Packages on a real Linux agent (apt/dpkg here): listing, refusals, and one real
install and removal of Debian's tiny `hello` package."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import call, expect_error, expect_ok

pytestmark = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="these tests drive apt/dpkg")

INSTALL_TIMEOUT = 300.0


async def _listed(client, query: str) -> dict[str, dict]:
    res = expect_ok(await call(client, "winget_list", {"agent_id": "pc-a", "query": query, "limit": 5000}))
    return {p["id"]: p for p in res["packages"]}


async def test_list_query_and_refusals(kenny):
    await kenny.start_agents(["pc-a"])
    a = {"agent_id": "pc-a"}
    async with kenny.mcp() as client:
        everything = expect_ok(await call(client, "winget_list", {**a, "limit": 5000}))
        assert everything["manager"] == "apt"
        ids = {p["id"]: p for p in everything["packages"]}
        for name in ("dpkg", "bash"):
            assert name in ids, f"{name} missing from {len(ids)} packages"
            assert ids[name]["version"], ids[name]
            assert set(ids[name]) >= {"id", "name", "version", "available"}
        real = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "bash"], capture_output=True, text=True, check=True)
        assert ids["bash"]["version"] == real.stdout
        assert everything["count"] == len(everything["packages"]) and everything["truncated"] is False

        short = expect_ok(await call(client, "winget_list", {**a, "limit": 3}))
        assert short["count"] == 3 and short["total"] > 3 and short["truncated"] is True

        found = await _listed(client, "DPKG")
        assert "dpkg" in found
        assert "bash" not in found
        assert all("dpkg" in p["id"].lower() or "dpkg" in p["name"].lower() for p in found.values())

        msg = expect_error(await call(client, "winget_install", {**a, "id": "kenny-no-such-package-xyz"}), "not_found")
        assert "kenny-no-such-package-xyz" in msg
        # apt would read a name that matches no package as a regular expression and
        # install everything it matches ("xfonts." is 124 packages); exact names only.
        before = set(await _listed(client, "xfonts"))
        expect_error(await call(client, "winget_install", {**a, "id": "xfonts."}, timeout=INSTALL_TIMEOUT), "not_found")
        assert set(await _listed(client, "xfonts")) == before
        for hostile in ("--reinstall", "foo;rm", "foo bar", "../x", "$(id)"):
            expect_error(await call(client, "winget_install", {**a, "id": hostile}), "bad_args")
            expect_error(await call(client, "winget_uninstall", {**a, "id": hostile}), "bad_args")
        expect_error(await call(client, "winget_update", a), "bad_args")
        expect_error(await call(client, "winget_update", {**a, "id": "bash", "all": True}), "bad_args")
        expect_error(await call(client, "winget_uninstall", {**a, "id": "kenny-no-such-package-xyz"}), "not_found")
        expect_error(await call(client, "winget_update", {**a, "id": "kenny-no-such-package-xyz"}), "not_found")


def _mirror_reachable() -> str | None:
    """None when `apt-get update` works, else why not."""
    if os.geteuid() != 0:
        return "not root"
    try:
        done = subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return "apt-get update did not finish within 180s"
    if done.returncode != 0:
        return f"apt-get update failed: {(done.stderr or done.stdout).strip()[-500:]}"
    return None


@pytest.mark.timeout(900)
async def test_install_and_uninstall_hello(kenny):
    why = _mirror_reachable()
    if why:
        pytest.skip(f"the Debian mirror is unreachable, so `hello` cannot be installed ({why})")
    await kenny.start_agents(["pc-a"])
    a = {"agent_id": "pc-a", "id": "hello"}
    async with kenny.mcp() as client:
        if "hello" in await _listed(client, "hello"):
            expect_ok(await call(client, "winget_uninstall", a, timeout=INSTALL_TIMEOUT))
        assert "hello" not in await _listed(client, "hello")

        installed = expect_ok(await call(client, "winget_install", a, timeout=INSTALL_TIMEOUT))
        assert installed["ok"] is True and installed["changed"] is True, installed
        assert installed["manager"] == "apt" and installed["id"] == "hello" and installed["exit_code"] == 0
        assert "hello" in installed["output"], installed["output"][-2000:]
        listed = await _listed(client, "hello")
        assert "hello" in listed and listed["hello"]["version"] == installed["version"], listed
        assert shutil.which("hello")

        again = expect_ok(await call(client, "winget_install", a, timeout=INSTALL_TIMEOUT))
        assert again["changed"] is False, "installing an installed package changes nothing"
        updated = expect_ok(await call(client, "winget_update", a, timeout=INSTALL_TIMEOUT))
        assert updated["ok"] is True and updated["changed"] is False, updated

        removed = expect_ok(await call(client, "winget_uninstall", a, timeout=INSTALL_TIMEOUT))
        assert removed["ok"] is True and removed["changed"] is True, removed
        assert "hello" not in await _listed(client, "hello")
        expect_error(await call(client, "winget_uninstall", a, timeout=INSTALL_TIMEOUT), "not_found")
