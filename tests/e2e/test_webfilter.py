"""The web filter on a real Linux agent, always against a temporary hosts file
(KENNY_HOSTS_FILE) and policy root (KENNY_POLICY_ROOT): the real /etc/hosts is never touched."""

from __future__ import annotations

import json

from conftest import call, expect_error, expect_ok

ORIGINAL = (
    b"127.0.0.1\tlocalhost\n"
    b"::1\tlocalhost ip6-localhost ip6-loopback\n"
    b"# a comment the owner wrote, with a Latin-1 byte: caf\xe9\n"
    b"10.0.0.5   nas.lan nas\n"
    b"\n"
    b"192.168.1.20 printer.lan"  # no final line break
)
START = "# >>> kenny webfilter (managed by kenny; do not edit) >>>"
END = "# <<< kenny webfilter <<<"


def _env(tmp_path):
    hosts = tmp_path / "etc" / "hosts"
    hosts.parent.mkdir(parents=True)
    hosts.write_bytes(ORIGINAL)
    policy_root = tmp_path / "policy-root"
    policy_root.mkdir()
    return hosts, policy_root, {"KENNY_HOSTS_FILE": str(hosts), "KENNY_POLICY_ROOT": str(policy_root)}


def _block_lines(data: bytes) -> list[str]:
    text = data.decode("latin-1")
    start, end = text.index(START), text.index(END)
    return text[start:end].splitlines()[1:]


async def test_apply_status_replace_and_clear(kenny, tmp_path):
    hosts, policy_root, env = _env(tmp_path)
    await kenny.start_agents(["pc-a"], env=env)
    a = {"agent_id": "pc-a"}
    async with kenny.mcp() as client:
        before = expect_ok(await call(client, "webfilter_status", a))
        assert before["active"] is False and before["entry_count"] == 0, before
        assert before["supported"] is True
        assert before["hosts_file"] == str(hosts)
        assert before["doh_policy"] == {"chrome": "not_set", "edge": "not_set", "firefox": "not_set"}, before

        applied = expect_ok(
            await call(
                client,
                "webfilter_apply",
                {**a, "domains": ["BadSite.example.", "www.badsite.example", "badsite.example"], "list_hash": "a1b2c3d4e5f60718"},
            )
        )
        assert applied["ok"] is True and applied["applied"] == 2, applied
        assert applied["list_hash"] == "a1b2c3d4e5f60718"
        assert applied["doh_policy_applied"] is False

        data = hosts.read_bytes()
        assert data.startswith(ORIGINAL), "everything outside kenny's block is kept byte for byte"
        assert data.count(START.encode()) == 1 and data.count(END.encode()) == 1
        entries = [line for line in _block_lines(data) if not line.startswith("#")]
        assert entries == [
            "0.0.0.0 badsite.example",
            ":: badsite.example",
            "0.0.0.0 www.badsite.example",
            ":: www.badsite.example",
        ], entries

        status = expect_ok(await call(client, "webfilter_status", a))
        assert status["active"] is True, status
        assert status["entry_count"] == 2
        assert status["list_hash"] == "a1b2c3d4e5f60718"
        assert status["applied_at"] == applied["applied_at"]
        assert status["applied_at"].endswith("Z")

        # A different list replaces the first one; the hash is computed when not given.
        replaced = expect_ok(await call(client, "webfilter_apply", {**a, "domains": ["games.example", "Bücher.example"]}))
        assert replaced["applied"] == 2
        assert len(replaced["list_hash"]) == 16 and replaced["list_hash"] != "a1b2c3d4e5f60718"
        data = hosts.read_bytes()
        assert data.startswith(ORIGINAL)
        assert data.count(START.encode()) == 1, "one block, not two"
        assert b"badsite" not in data
        entries = [line for line in _block_lines(data) if line.startswith("0.0.0.0")]
        assert entries == ["0.0.0.0 games.example", "0.0.0.0 xn--bcher-kva.example"], entries
        status = expect_ok(await call(client, "webfilter_status", a))
        assert status["list_hash"] == replaced["list_hash"] and status["entry_count"] == 2

        cleared = expect_ok(await call(client, "webfilter_clear", a))
        assert cleared == {
            "ok": True,
            "removed_entries": 2,
            "doh_policy_cleared": False,
            "hosts_file": str(hosts),
        }, cleared
        assert hosts.read_bytes() == ORIGINAL, "clear restores the original file byte for byte"
        assert expect_ok(await call(client, "webfilter_status", a))["active"] is False

        again = expect_ok(await call(client, "webfilter_clear", a))
        assert again["removed_entries"] == 0
        assert hosts.read_bytes() == ORIGINAL


async def test_bad_names_are_refused_together_and_nothing_changes(kenny, tmp_path):
    hosts, _, env = _env(tmp_path)
    await kenny.start_agents(["pc-a"], env=env)
    a = {"agent_id": "pc-a"}
    async with kenny.mcp() as client:
        expect_ok(await call(client, "webfilter_apply", {**a, "domains": ["kept.example"]}))
        snapshot = hosts.read_bytes()
        bad = ["fine.example", "localhost", "foo.localhost", "local", "127.0.0.1", "::1", "-x.example", "nodot", "a..b.example", "*.ads.example", "http://x.example/"]
        msg = expect_error(await call(client, "webfilter_apply", {**a, "domains": bad}), "bad_args")
        assert msg.startswith("10 of 11 domain names refused, nothing was applied"), msg
        for name in bad[1:]:
            assert json.dumps(name) in msg, f"{name} not reported in: {msg}"
        assert "fine.example" not in msg
        assert hosts.read_bytes() == snapshot, "a refused list changes nothing"

        expect_error(await call(client, "webfilter_apply", {**a, "domains": []}), "bad_args")
        expect_error(await call(client, "webfilter_apply", {**a, "domains": ["ok.example"], "doh_policy": "maybe"}), "bad_args")
        expect_error(await call(client, "webfilter_apply", {**a, "domains": ["ok.example"], "list_hash": "two words"}), "bad_args")
        assert hosts.read_bytes() == snapshot

        expect_ok(await call(client, "webfilter_clear", a))
        assert hosts.read_bytes() == ORIGINAL


async def test_doh_policy_and_malformed_markers(kenny, tmp_path):
    hosts, policy_root, env = _env(tmp_path)
    await kenny.start_agents(["pc-a"], env=env)
    a = {"agent_id": "pc-a"}
    chrome = policy_root / "etc/opt/chrome/policies/managed/kenny-webfilter.json"
    firefox = policy_root / "etc/firefox/policies/policies.json"
    async with kenny.mcp() as client:
        applied = expect_ok(
            await call(client, "webfilter_apply", {**a, "domains": ["badsite.example"], "doh_policy": "disable"})
        )
        assert applied["doh_policy_applied"] is True, applied
        assert json.loads(chrome.read_text()) == {"DnsOverHttpsMode": "off"}
        assert json.loads(firefox.read_text()) == {"policies": {"DNSOverHTTPS": {"Enabled": False, "Locked": True}}}
        status = expect_ok(await call(client, "webfilter_status", a))
        assert status["doh_policy"] == {"chrome": "off", "edge": "off", "firefox": "off"}, status

        cleared = expect_ok(await call(client, "webfilter_clear", a))
        assert cleared["removed_entries"] == 1 and cleared["doh_policy_cleared"] is True, cleared
        assert not chrome.exists() and not firefox.exists()
        assert hosts.read_bytes() == ORIGINAL

        # A start marker without its end: refused, and the file is left exactly as it was.
        broken = ORIGINAL + b"\n" + START.encode() + b"\n0.0.0.0 half.example\n"
        hosts.write_bytes(broken)
        for tool, args in [("webfilter_apply", {"domains": ["x.example"]}), ("webfilter_clear", {}), ("webfilter_status", {})]:
            msg = expect_error(await call(client, tool, {**a, **args}), "exec_failed")
            assert "no end marker" in msg and "edit" in msg and str(hosts) in msg, msg
        assert hosts.read_bytes() == broken


async def test_a_user_cannot_change_the_filter_on_its_own_pc_but_an_operator_can(kenny, tmp_path):
    """DESIGN's role floor: web-filter changes need the operator role, even on a PC the
    `user` may reach (a child's account must not lift its own filter)."""
    hosts, _policy_root, env = _env(tmp_path)
    await kenny.start_agents(["pc-a"], env=env)
    kenny.add_user("kid", "user", ["pc-a"])
    kenny.add_user("parent", "operator")
    kid, parent = kenny.create_token("kid"), kenny.create_token("parent")
    a = {"agent_id": "pc-a"}
    async with kenny.mcp(kid) as client:
        # Reading is fine for the user; changing is not, and nothing changes.
        expect_ok(await call(client, "webfilter_status", a))
        for tool, args in (("webfilter_apply", {**a, "domains": ["games.example"]}), ("webfilter_clear", a)):
            msg = expect_error(await call(client, tool, args), "forbidden")
            assert "operator" in msg and "kid" in msg, msg
    assert hosts.read_bytes() == ORIGINAL
    async with kenny.mcp(parent) as client:
        applied = expect_ok(await call(client, "webfilter_apply", {**a, "domains": ["games.example"]}))
        assert applied["applied"] == 1, applied
    assert b"games.example" in hosts.read_bytes()
