"""Signed results (wire protocol 0.18): kenny-agent signs every answer with its enrolled
Ed25519 key; the server checks it before answering and returns the proof in the MCP
result's `_meta`, which a client checks on its own with the key `list_agents` shows.
A result changed inside the server is refused and audited; an agent of the previous
protocol still works and its results say they are unsigned."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import subprocess

import anyio
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from conftest import CALL_TIMEOUT, SERVER_BIN, KeyedFakeAgent, call, expect_error, expect_ok

PROOF = "kenny/result-proof"


def canonical(value) -> bytes:
    """docs/protocol.md's canonical JSON: keys sorted, no whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def check_proof(result, public_key_b64: str, args: dict) -> dict:
    """Verifies a tool result's proof as any client could, with nothing of kenny's: the
    digests rebuilt from the result and the arguments, the signature with the key."""
    proof = result.meta[PROOF]
    assert proof["signed"] is True, proof
    assert proof["answer_in"] == "structuredContent", proof
    outcome = {"ok": True, "result": result.structured_content}
    assert hashlib.sha256(canonical(outcome)).hexdigest() == proof["outcome_sha256"], "the result is not what was signed"
    sent = {k: v for k, v in args.items() if k != "agent_id"}
    assert hashlib.sha256(canonical(sent)).hexdigest() == proof["args_sha256"], "other arguments were signed"
    message = b"\0".join(
        str(part).encode()
        for part in [
            "kenny-result-v1",
            proof["request_id"],
            proof["agent_id"],
            proof["tool"],
            proof["args_sha256"],
            proof["outcome_sha256"],
            proof["at_ms"],
        ]
    )
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key_b64))
    key.verify(base64.b64decode(proof["sig"]), message)  # raises InvalidSignature
    return proof


async def _listed(client, agent_id: str) -> dict:
    listed = expect_ok(await call(client, "list_agents", {"query": agent_id}))
    return next(a for a in listed["agents"] if a["agent_id"] == agent_id)


async def test_a_saved_result_verifies_with_the_agents_public_key_outside_kenny(kenny, tmp_path):
    await kenny.start_agents(["pc-a", "pc-b"])
    args = {"agent_id": "pc-a", "command": "echo signed-here"}
    async with kenny.mcp() as client:
        with anyio.fail_after(CALL_TIMEOUT):
            result = await client.call_tool("shell_exec", args)
        assert not result.is_error, result
        assert "signed-here" in result.structured_content["stdout"]
        row = await _listed(client, "pc-a")
        other = await _listed(client, "pc-b")
    assert row["signs_results"] is True, row
    proof = check_proof(result, row["public_key"], args)
    assert proof["agent_id"] == "pc-a" and proof["tool"] == "shell_exec"

    # Another PC's key does not verify it.
    try:
        check_proof(result, other["public_key"], args)
        raise AssertionError("pc-b's key verified pc-a's result")
    except InvalidSignature:
        pass

    # kenny-server's own check, on the result saved as the client got it.
    saved = tmp_path / "result.json"
    saved.write_text(json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json")))

    def verify_call(path, key: str, *extra: str) -> subprocess.CompletedProcess:
        argv = [str(SERVER_BIN), "audit", "verify-call", str(path), "--key", key, *extra]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    ok = verify_call(saved, row["public_key"], "--args", json.dumps(args))
    assert ok.returncode == 0 and "verified: agent pc-a" in ok.stdout and "arguments match" in ok.stdout, ok
    tampered = json.loads(saved.read_text())
    tampered["structuredContent"]["stdout"] = "something else\n"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(tampered))
    bad = verify_call(edited, row["public_key"])
    assert bad.returncode != 0 and "NOT VERIFIED" in bad.stderr and "changed after" in bad.stderr, bad
    wrong_key = verify_call(saved, other["public_key"])
    assert wrong_key.returncode != 0 and "does not verify" in wrong_key.stderr, wrong_key

    # The proof is kept with the call's audit row.
    rows = [r for r in kenny.audit(agent_id="pc-a") if r["tool"] == "shell_exec" and r["outcome"] == "ok"]
    assert rows and json.loads(rows[0]["proof"])["sig"] == proof["sig"], rows


async def test_a_result_changed_inside_the_server_is_refused_and_audited(kenny):
    # The debug build's test hook changes every answer after it arrives, as a fault in
    # the server's memory would, before the signature is checked.
    kenny.stop_server()
    kenny.start_server(env={"KENNY_TEST_TAMPER_RESULTS": "1"})
    await kenny.start_agents(["pc-t"])
    async with kenny.mcp() as client:
        res = await call(client, "shell_exec", {"agent_id": "pc-t", "command": "echo untouched"})
    message = expect_error(res, "bad_signature")
    assert "pc-t" in message and "valid signature" in message, message
    assert "untouched" not in res.text
    rows = [r for r in kenny.audit(agent_id="pc-t") if r["tool"] == "shell_exec"]
    assert rows and rows[0]["outcome"] == "error" and rows[0]["error_code"] == "bad_signature", rows
    assert rows[0]["proof"], "the proof that failed is kept for whoever looks into it"


async def test_an_agent_of_the_previous_protocol_still_works_and_is_marked_unsigned(kenny):
    creds = kenny.add_agent("pc-old")
    old = KeyedFakeAgent(kenny.ws_url, "pc-old", creds["token"], creds["server_pubkey"], protocol="0.17")
    await old.enroll(kenny.base_url)
    await old.register()
    try:
        await kenny.wait_agents(["pc-old"])
        async with kenny.mcp() as client:
            args = {"agent_id": "pc-old", "command": "hostname"}
            pending = asyncio.ensure_future(client.call_tool("shell_exec", args, read_timeout_seconds=CALL_TIMEOUT))
            request = await old.next_request(pending=pending)
            assert "proof" not in request, "a 0.17 agent is sent 0.17 frames"
            await old.respond(request["id"], result={"stdout": "old-pc\n", "stderr": "", "exit_code": 0, "truncated": False})
            result = await asyncio.wait_for(pending, CALL_TIMEOUT)
            row = await _listed(client, "pc-old")
        assert not result.is_error and result.structured_content["stdout"] == "old-pc\n", result
        assert result.meta[PROOF]["signed"] is False, result.meta
        assert "0.18" in result.meta[PROOF]["why"], result.meta
        assert row["signs_results"] is False, row
    finally:
        await old.close()
