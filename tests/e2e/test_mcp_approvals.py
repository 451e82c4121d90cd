"""Approvals on the MCP path: an operator requires approval for a user's state-changing
MCP calls. A client of MCP 2026-07-28 that declares elicitation is asked through it (the
official SDK's elicitation callback): accept runs the call once, on the PC it was frozen
on; decline runs nothing. A client that cannot be asked gets a held result with an
approval id; an operator approves it in the dashboard and it runs once, and
`approval_status` shows the caller its result. A token under a rule cannot approve,
lift the rule, or make the change through /api instead."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx
from mcp import types

from conftest import CALL_TIMEOUT, call, expect_error, expect_ok
from signin_helpers import PASSWORD, _client, _login

HELD_META = "kenny/approval"
PROOF = "kenny/result-proof"


def _session(kenny, user: str):
    """A dashboard session (cookie) of `user`, with the CSRF header every change needs."""
    http = _client(kenny)
    assert _login(http, user, PASSWORD).status_code == 303
    csrf = re.search(r'name="csrf" value="([^"]+)"', http.get("/").text).group(1)
    http.headers["X-CSRF-Token"] = csrf
    return http


def _setup(kenny):
    """`kim` (an operator, calling over MCP with a token) under an approval rule set by
    `ops` in the dashboard; returns (kim's token, ops's dashboard session)."""
    kenny.add_user("kim", "operator", password=PASSWORD)
    kim = kenny.create_token("kim", label="claude")
    kenny.add_user("ops", "operator", password=PASSWORD)
    (kim_id,) = kenny.sql("SELECT id FROM users WHERE username = ?", ("kim",))[0]
    ops = _session(kenny, "ops")
    r = ops.post("/api/approvals/rules", json={"subject": "user", "id": kim_id})
    assert r.status_code == 201, r.text
    return kim, ops, kim_id


class Hook:
    """A loopback webhook receiver keeping each message kenny posts to it."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                outer.messages.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _approval_id(message: str) -> str:
    m = re.search(r"apr_[0-9a-f]{32}", message)
    assert m, f"no approval id in {message!r}"
    return m.group(0)


async def _held(client, args: dict) -> str:
    """Makes a call that waits for the dashboard; its approval id."""
    return _approval_id(expect_error(await call(client, "shell_exec", args), "awaiting_approval"))


def _marker_lines(path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _shell_rows(kenny, agent_id: str) -> list[dict]:
    return [e for e in kenny.audit(agent_id=agent_id) if e["tool"] == "shell_exec"]


class Asker:
    """An elicitation callback answering `action` and keeping what it was asked."""

    def __init__(self, action: str):
        self.action = action
        self.asked: list[str] = []

    async def __call__(self, context, params):
        self.asked.append(params.message)
        return types.ElicitResult(action=self.action, content={} if self.action == "accept" else None)


async def test_elicitation_accept_runs_once_on_the_frozen_pc(kenny, tmp_path):
    await kenny.start_agents(["pc-a", "pc-b"])
    kim, ops, _ = _setup(kenny)
    marker = tmp_path / "ran.txt"
    args = {"agent_id": "pc-a", "command": f"echo approved >> {marker}; echo done"}
    asker = Asker("accept")
    async with kenny.mcp(kim, elicitation_callback=asker) as client:
        # Reads never wait.
        expect_ok(await call(client, "list_agents", {}))
        with anyio.fail_after(CALL_TIMEOUT):
            result = await client.call_tool("shell_exec", args)
        assert not result.is_error, result
        assert "done" in result.structured_content["stdout"]
        assert result.meta[PROOF]["agent_id"] == "pc-a", result.meta
        approval = result.meta[HELD_META]
        assert approval["agent_id"] == "pc-a" and approval["status"] == "done", approval
        assert len(asker.asked) == 1, asker.asked
        question = asker.asked[0]
        assert "shell_exec" in question and "pc-a" in question and str(marker) in question, question
        assert approval["approval_id"] in question
        hostname = (await kenny.list_agents(client))["pc-a"]["hostname"]
        assert f'host name "{hostname}"' in question, question
        assert _marker_lines(marker) == 1

        # The same answer sent again (a retried request) returns the result; nothing runs again.
        with anyio.fail_after(CALL_TIMEOUT):
            again = await client.session.call_tool(
                "shell_exec",
                args,
                request_state=approval["approval_id"],
                input_responses={"approval": types.ElicitResult(action="accept", content={})},
            )
        assert not again.is_error and again.structured_content == result.structured_content, again
        # A retry naming another PC (or other arguments) under that approval runs nothing.
        with anyio.fail_after(CALL_TIMEOUT):
            moved = await client.session.call_tool(
                "shell_exec",
                dict(args, agent_id="pc-b"),
                request_state=approval["approval_id"],
                input_responses={"approval": types.ElicitResult(action="accept", content={})},
            )
        assert moved.is_error and "nothing ran" in moved.content[0].text, moved
        status = expect_ok(await call(client, "approval_status", {"approval_id": approval["approval_id"]}))
        assert status["status"] == "done" and status["decided_by"] == "kim (MCP elicitation)", status
    assert _marker_lines(marker) == 1, "the approved call ran more than once"
    assert [e["outcome"] for e in _shell_rows(kenny, "pc-b")] == [], "nothing ran on the other PC"
    outcomes = sorted(e["outcome"] for e in _shell_rows(kenny, "pc-a"))
    assert outcomes == ["held", "ok", "refused"], "held, ran once, and the moved retry refused"
    ops.close()


async def test_elicitation_decline_runs_nothing(kenny, tmp_path):
    await kenny.start_agents(["pc-a"])
    kim, ops, _ = _setup(kenny)
    marker = tmp_path / "ran.txt"
    asker = Asker("decline")
    async with kenny.mcp(kim, elicitation_callback=asker) as client:
        res = await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo no >> {marker}"})
        message = expect_error(res, "denied")
        assert "nothing ran" in message and len(asker.asked) == 1, message
        approval_id = _approval_id(message)
        status = expect_ok(await call(client, "approval_status", {"approval_id": approval_id}))
        assert status["status"] == "denied", status
    # A call written with an argument's older name is held normalized; the client's
    # retry (in the name it used) is still the same call.
    async with kenny.mcp(kim, elicitation_callback=asker) as client:
        res = await call(client, "net_adapter_reset", {"agent_id": "pc-a", "name": "kd0"})
        expect_error(res, "denied")
    assert len(asker.asked) == 2 and '"adapter": "kd0"' in asker.asked[1], asker.asked
    # Declined is final: the dashboard cannot approve it afterwards.
    assert ops.post(f"/api/approvals/{approval_id}/approve").status_code == 409
    await asyncio.sleep(1)
    assert not marker.exists()
    assert [e["outcome"] for e in _shell_rows(kenny, "pc-a")] == ["held"]
    ops.close()


async def test_a_client_without_elicitation_is_held_and_the_dashboard_approves_it_once(kenny, tmp_path):
    await kenny.start_agents(["pc-a", "pc-b"])
    kim, ops, kim_id = _setup(kenny)
    hook = Hook()
    with httpx.Client(base_url=kenny.base_url, timeout=15) as http:
        r = http.post(
            "/api/alerts/channels",
            json={"name": "hook", "config": {"kind": "webhook", "url": hook.url, "secret": "s" * 32}},
            headers={"Authorization": f"Bearer {kenny.admin_pat}"},
        )
        assert r.status_code == 201, r.text
    marker = tmp_path / "ran.txt"
    args = {"agent_id": "pc-a", "command": f"echo approved >> {marker}; echo from-dashboard"}
    async with kenny.mcp(kim) as client:
        held = await call(client, "shell_exec", args)
        message = expect_error(held, "awaiting_approval")
        assert "Nothing has run" in message and "approval_status" in message, message
        approval_id = _approval_id(message)
        waiting = expect_ok(await call(client, "approval_status", {"approval_id": approval_id}))
        assert (waiting["status"], waiting["agent_id"], waiting["tool"]) == ("held", "pc-a", "shell_exec"), waiting
        assert waiting["args"] == {"command": args["command"]}

        # The token that asked cannot approve, nor lift the rule, nor go around it through /api.
        bearer = {"Authorization": f"Bearer {kim}"}
        admin = {"Authorization": f"Bearer {kenny.admin_pat}"}
        with httpx.Client(base_url=kenny.base_url, timeout=15) as http:
            r = http.post(f"/api/approvals/{approval_id}/approve", headers=bearer)
            assert r.status_code == 403 and r.json()["error"]["code"] == "approval_required", r.text
            assert http.delete(f"/api/approvals/rules/user/{kim_id}", headers=bearer).status_code == 403
            # Nor any other token, a superuser's included: approvals are given signed in.
            r = http.post(f"/api/approvals/{approval_id}/approve", headers=admin)
            assert r.status_code == 403 and "token cannot approve" in r.json()["error"]["message"], r.text
            r = http.delete(f"/api/approvals/rules/user/{kim_id}", headers=admin)
            assert r.status_code == 403 and "not with a token" in r.json()["error"]["message"], r.text
            r = http.post("/api/agent/pc-a/refresh", headers=bearer)
            assert r.status_code == 403 and r.json()["error"]["code"] == "approval_required", r.text
            assert http.get("/api/approvals", headers=bearer).status_code == 200, "reading stays open"

        # The alert channels are told, without the arguments.
        deadline = time.monotonic() + 15
        while not hook.messages and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        hook.close()
        assert [m["event"] for m in hook.messages] == ["approval"], hook.messages
        told = hook.messages[0]
        assert "shell_exec on pc-a" in told["title"] and approval_id in told["text"], told
        assert str(marker) not in json.dumps(told), "the arguments stay on the server"

        # The operator sees it in the dashboard and approves it.
        page = ops.get("/approvals")
        assert page.status_code == 200 and approval_id in page.text and "pc-a" in page.text
        r = ops.post(f"/api/approvals/{approval_id}/approve")
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            status = expect_ok(await call(client, "approval_status", {"approval_id": approval_id}))
            if status["status"] == "done" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert status["status"] == "done" and status["decided_by"] == "ops", status
        result = status["result"]
        assert result.get("isError") is not True, result
        assert "from-dashboard" in result["structuredContent"]["stdout"]
        assert result["_meta"][PROOF]["agent_id"] == "pc-a", result["_meta"]
        # A second approval (a double click, another operator) finds nothing to run.
        assert ops.post(f"/api/approvals/{approval_id}/approve").status_code == 409
        assert ops.post(f"/api/approvals/{approval_id}/deny").status_code == 409
    assert _marker_lines(marker) == 1
    assert sorted(e["outcome"] for e in _shell_rows(kenny, "pc-a")) == ["held", "ok"]
    assert _shell_rows(kenny, "pc-b") == []
    # Someone else's held call is not theirs to see.
    kenny.add_user("sam", "user", hosts=["pc-b"])
    async with kenny.mcp(kenny.create_token("sam")) as sam:
        expect_error(await call(sam, "approval_status", {"approval_id": approval_id}), "not_found")
    ops.close()


async def test_a_2025_client_that_declares_elicitation_is_held_for_the_dashboard(kenny, tmp_path):
    """/mcp is stateless: a handshake-era client could only be asked over a session,
    so its call waits in the dashboard instead; the dashboard's denial runs nothing."""
    await kenny.start_agents(["pc-a"])
    kim, ops, _ = _setup(kenny)
    marker = tmp_path / "ran.txt"
    asker = Asker("accept")
    async with kenny.mcp(kim, mode="legacy", elicitation_callback=asker) as client:
        message = expect_error(
            await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo x >> {marker}"}), "awaiting_approval"
        )
        approval_id = _approval_id(message)
        assert asker.asked == []
        r = ops.post(f"/api/approvals/{approval_id}/deny")
        assert r.status_code == 200 and r.json()["status"] == "denied", r.text
        status = expect_ok(await call(client, "approval_status", {"approval_id": approval_id}))
        assert status["status"] == "denied" and "nothing ran" in json.dumps(status["result"]), status
    assert not marker.exists()
    # Without the rule, the same call runs at once.
    (kim_id,) = kenny.sql("SELECT id FROM users WHERE username = ?", ("kim",))[0]
    assert ops.delete(f"/api/approvals/rules/user/{kim_id}").status_code == 204
    async with kenny.mcp(kim, mode="legacy") as client:
        expect_ok(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo x >> {marker}"}))
    assert _marker_lines(marker) == 1
    ops.close()


async def test_a_rule_on_one_token_holds_only_that_token(kenny, tmp_path):
    await kenny.start_agents(["pc-a"])
    kenny.add_user("kim", "operator")
    held_token = kenny.create_token("kim", label="held")
    free_token = kenny.create_token("kim", label="free")
    kenny.add_user("ops", "operator", password=PASSWORD)
    ops = _session(kenny, "ops")
    (token_id,) = kenny.sql("SELECT id FROM tokens WHERE label = ?", ("held",))[0]
    assert ops.post("/api/approvals/rules", json={"subject": "token", "id": token_id}).status_code == 201
    assert ops.post("/api/approvals/rules", json={"subject": "token", "id": 999999}).status_code == 404
    r = ops.post("/api/approvals/rules", json={"subject": "group", "id": 1})
    assert r.status_code == 400 and "user" in r.json()["error"]["message"], r.text
    rules = ops.get("/api/approvals/rules").json()["rules"]
    assert [(x["subject"], x["subject_id"]) for x in rules] == [("token", token_id)], rules
    async with kenny.mcp(held_token) as client:
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "true"}), "awaiting_approval")
        # Bad arguments are refused before anyone is asked to approve them.
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "nope": 1}), "bad_args")
        expect_error(await call(client, "shell_exec", {"command": "true"}), "no_agent")
    async with kenny.mcp(free_token) as client:
        expect_ok(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "true"}))
    # A held caller cannot bury the queue: 20 calls wait at most.
    async with kenny.mcp(held_token) as client:
        for n in range(19):
            expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo {n}"}), "awaiting_approval")
        full = expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo 20"}), "denied")
        assert "20 calls waiting" in full, full
    waiting = ops.get("/api/approvals").json()["waiting"]
    assert len(waiting) == 20 and {w["asked_by"] for w in waiting} == {"dashboard"}, waiting
    ops.close()


async def test_held_calls_outlive_a_restart_and_a_call_cut_short_is_not_rerun(kenny, tmp_path):
    await kenny.start_agents(["pc-a"])
    kim, ops, _ = _setup(kenny)
    marker = tmp_path / "ran.txt"
    async with kenny.mcp(kim) as client:
        waiting = await _held(client, {"agent_id": "pc-a", "command": f"echo x >> {marker}"})
        slow = await _held(client, {"agent_id": "pc-a", "command": "sleep 30"})
    # The slow one is approved and the server dies while it runs.
    assert ops.post(f"/api/approvals/{slow}/approve").status_code == 202
    await asyncio.sleep(1)
    port = kenny.port
    kenny.kill_server()
    kenny.start_server(port=port)
    await kenny.wait_agents(["pc-a"])
    async with kenny.mcp(kim) as client:
        cut = expect_ok(await call(client, "approval_status", {"approval_id": slow}))
        assert cut["status"] == "done" and cut["result"]["isError"] is True, cut
        assert "unknown" in json.dumps(cut["result"]), cut
        assert ops.post(f"/api/approvals/{slow}/approve").status_code == 409, "a call cut short is not run again"
        # The held one still waits, and runs once when approved.
        assert expect_ok(await call(client, "approval_status", {"approval_id": waiting}))["status"] == "held"
        assert ops.post(f"/api/approvals/{waiting}/approve").status_code == 202
        deadline = time.monotonic() + CALL_TIMEOUT
        while expect_ok(await call(client, "approval_status", {"approval_id": waiting}))["status"] != "done":
            assert time.monotonic() < deadline, "the approved call did not finish"
            await asyncio.sleep(0.2)
    assert _marker_lines(marker) == 1
    ops.close()


async def test_a_client_cannot_accept_a_call_waiting_for_the_dashboard(kenny, tmp_path):
    """A raw retry carrying the approval id and an `accept` is refused for a call that was
    not put to the caller's client; so is a client of a rule that allows no elicitation."""
    await kenny.start_agents(["pc-a"])
    kim, ops, kim_id = _setup(kenny)
    marker = tmp_path / "ran.txt"
    args = {"agent_id": "pc-a", "command": f"echo sneaky >> {marker}"}
    async with kenny.mcp(kim, mode="legacy") as client:
        approval_id = _approval_id(expect_error(await call(client, "shell_exec", args), "awaiting_approval"))
    accept = {"approval": types.ElicitResult(action="accept", content={})}
    async with kenny.mcp(kim) as client:
        with anyio.fail_after(CALL_TIMEOUT):
            forged = await client.session.call_tool("shell_exec", args, request_state=approval_id, input_responses=accept)
        assert forged.is_error and "caller cannot accept" in forged.content[0].text, forged
        status = expect_ok(await call(client, "approval_status", {"approval_id": approval_id}))
        assert status["status"] == "held", status
    refusals = [e for e in _shell_rows(kenny, "pc-a") if e["outcome"] == "refused"]
    assert refusals and refusals[0]["error_code"] == "awaiting_approval", refusals

    # Only an operator in the dashboard: an elicitation-capable client is not asked.
    r = ops.post("/api/approvals/rules", json={"subject": "user", "id": kim_id, "elicitation": False})
    assert r.status_code == 200 and r.json()["changed"] is True, r.text
    asker = Asker("accept")
    async with kenny.mcp(kim, elicitation_callback=asker) as client:
        expect_error(await call(client, "shell_exec", args), "awaiting_approval")
    assert asker.asked == []
    await asyncio.sleep(0.5)
    assert not marker.exists()
    ops.close()


async def test_only_the_caller_and_signed_in_operators_see_a_held_call_and_nobody_lifts_their_own_rule(kenny):
    await kenny.start_agents(["pc-a"])
    kim, ops, kim_id = _setup(kenny)
    async with kenny.mcp(kim) as client:
        approval_id = await _held(client, {"agent_id": "pc-a", "command": "true"})
    # ops's own token reads nothing of kim's; ops signed in does.
    ops_token = kenny.create_token("ops")
    async with kenny.mcp(ops_token) as client:
        expect_error(await call(client, "approval_status", {"approval_id": approval_id}), "not_found")
    with httpx.Client(base_url=kenny.base_url, timeout=15) as http:
        r = http.get(f"/api/approvals/{approval_id}", headers={"Authorization": f"Bearer {ops_token}"})
        assert r.status_code == 404, r.text
    assert ops.get(f"/api/approvals/{approval_id}").json()["tool"] == "shell_exec"

    # A rule on ops is set by ops, lifted only by someone else.
    (ops_id,) = kenny.sql("SELECT id FROM users WHERE username = ?", ("ops",))[0]
    assert ops.post("/api/approvals/rules", json={"subject": "user", "id": ops_id, "elicitation": False}).status_code == 201
    r = ops.delete(f"/api/approvals/rules/user/{ops_id}")
    assert r.status_code == 403 and "another operator" in r.json()["error"]["message"], r.text
    r = ops.post("/api/approvals/rules", json={"subject": "user", "id": ops_id, "elicitation": True})
    assert r.status_code == 403, "nor loosened by its subject"
    kenny.add_user("lou", "operator", password=PASSWORD)
    lou = _session(kenny, "lou")
    assert lou.delete(f"/api/approvals/rules/user/{ops_id}").status_code == 204
    # An operator may approve their own held call, signed in: the rule guards against
    # the model, not against the person.
    kim_session = _session(kenny, "kim")
    assert kim_session.post(f"/api/approvals/{approval_id}/approve").status_code == 202
    kim_session.close()
    assert lou.delete(f"/api/approvals/rules/user/{kim_id}").status_code == 204
    ops.close()
    lou.close()


async def test_a_held_password_is_never_shown_and_is_forgotten_once_decided(kenny):
    await kenny.start_agents(["pc-a"])
    kim, ops, _ = _setup(kenny)
    secret = "Sup3r-secret-pass"
    async with kenny.mcp(kim) as client:
        message = expect_error(
            await call(client, "account_create", {"agent_id": "pc-a", "name": "kimjr", "password": secret}),
            "awaiting_approval",
        )
        approval_id = _approval_id(message)
        status = expect_ok(await call(client, "approval_status", {"approval_id": approval_id}))
        assert status["args"]["password"] == "(secret, not shown)" and secret not in json.dumps(status), status
    assert secret not in ops.get("/approvals").text
    assert secret not in ops.get("/api/approvals").text
    assert ops.post(f"/api/approvals/{approval_id}/deny").status_code == 200
    stored = kenny.sql("SELECT args FROM held_calls WHERE id = ?", (approval_id,))[0][0]
    assert secret not in stored and "kimjr" in stored, stored
    ops.close()


async def test_a_pc_enrolled_anew_since_the_hold_does_not_get_the_call(kenny, tmp_path):
    await kenny.start_agents(["pc-a"])
    kim, ops, _ = _setup(kenny)
    marker = tmp_path / "ran.txt"
    async with kenny.mcp(kim) as client:
        approval_id = await _held(client, {"agent_id": "pc-a", "command": f"echo x >> {marker}"})
        # Another machine's key under the same id (as after a re-enrollment).
        kenny.sql("UPDATE agents SET public_key = ? WHERE agent_id = ?", ("A" * 43 + "=", "pc-a"))
        assert ops.post(f"/api/approvals/{approval_id}/approve").status_code == 202
        deadline = time.monotonic() + CALL_TIMEOUT
        while (status := expect_ok(await call(client, "approval_status", {"approval_id": approval_id})))["status"] != "done":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
    assert "enrolled anew" in json.dumps(status["result"]), status
    assert not marker.exists()
    ops.close()
