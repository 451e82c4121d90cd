"""The audit trail is a hash chain with checkpoints signed by the server key:
`kenny-server audit verify` walks it and names the first row that was edited, deleted,
reordered or added behind kenny's back, and goes back to intact once the row is as it
was. Run on whichever backend the suite runs on (the tampering is plain SQL)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

from conftest import SERVER_BIN, _child_env, call, expect_ok


def verify(kenny) -> subprocess.CompletedProcess:
    argv = [str(SERVER_BIN), "audit", "verify", "--data-dir", str(kenny.data_dir)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=_child_env(kenny.store_env()))


def assert_intact(kenny) -> str:
    done = verify(kenny)
    assert done.returncode == 0 and "intact" in done.stdout, done
    return done.stdout


def assert_broken(kenny, says: str) -> str:
    done = verify(kenny)
    assert done.returncode == 1, done
    assert "BROKEN" in done.stderr and says in done.stderr, done.stderr
    return done.stderr


async def _calls(kenny, n: int) -> list[int]:
    await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        for i in range(n):
            expect_ok(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo call-{i}"}))
    # Audit rows are written in batches, just after the calls answer.
    deadline = time.monotonic() + 30
    while len(ids := [r[0] for r in kenny.sql("SELECT id FROM audit WHERE tool = 'shell_exec' AND outcome = 'ok' ORDER BY id")]) < n:
        assert time.monotonic() < deadline, ids
        await asyncio.sleep(0.1)
    return ids


async def signed_head(kenny) -> int:
    """Restarts the server, which signs the chain's head at start-up, and waits for it."""
    kenny.stop_server()
    last_seq = kenny.sql("SELECT MAX(seq) FROM audit_chain")[0][0]
    kenny.start_server()
    deadline = time.monotonic() + 30
    while kenny.sql("SELECT COALESCE(MAX(seq), 0) FROM audit_checkpoints")[0][0] < last_seq:
        assert time.monotonic() < deadline, "no checkpoint was signed at start-up"
        await asyncio.sleep(0.1)
    kenny.stop_server()
    return last_seq


async def test_editing_reordering_adding_or_deleting_a_row_is_found_and_named(kenny):
    ids = await _calls(kenny, 4)
    # Every write is chained as it happens; a checkpoint is signed at start-up.
    assert_intact(kenny)
    a, b = ids[1], ids[2]

    # An edited outcome: named, and intact again once put back.
    kenny.sql("UPDATE audit SET outcome = 'error' WHERE id = ?", (a,))
    assert_broken(kenny, f"row {a} ")
    kenny.sql("UPDATE audit SET outcome = 'ok' WHERE id = ?", (a,))
    assert_intact(kenny)

    # Two rows swapped (their ids exchanged): the first of them is named.
    kenny.sql("UPDATE audit SET id = -1 WHERE id = ?", (a,))
    kenny.sql("UPDATE audit SET id = ? WHERE id = ?", (a, b))
    kenny.sql("UPDATE audit SET id = ? WHERE id = -1", (b,))
    assert_broken(kenny, f"row {a} ")
    kenny.sql("UPDATE audit SET id = -1 WHERE id = ?", (a,))
    kenny.sql("UPDATE audit SET id = ? WHERE id = ?", (a, b))
    kenny.sql("UPDATE audit SET id = ? WHERE id = -1", (b,))
    assert_intact(kenny)

    # A row added outside kenny.
    kenny.sql("INSERT INTO audit (at, agent_id, tool, args_digest, outcome, duration_ms) VALUES ('2026-01-01T00:00:00.000Z', 'pc-a', 'shell_exec', 'd', 'ok', 1)")
    added = kenny.sql("SELECT MAX(id) FROM audit")[0][0]
    assert_broken(kenny, f"row {added} ")
    kenny.sql("DELETE FROM audit WHERE id = ?", (added,))
    assert_intact(kenny)

    # A deleted row.
    kenny.sql("DELETE FROM audit WHERE id = ?", (b,))
    message = assert_broken(kenny, f"row {b},")
    assert "deleted" in message, message


async def test_the_chain_itself_cannot_be_rewritten_or_cut_short(kenny):
    await _calls(kenny, 3)
    await signed_head(kenny)
    assert_intact(kenny)
    report = json.loads(verify_json(kenny))
    assert report["signed_through"] is not None and report["broken"] is None, report

    # A row edited together with its event's digest: the links after it no longer follow.
    seq, row = kenny.sql("SELECT seq, audit_id FROM audit_chain ORDER BY seq LIMIT 1 OFFSET 1")[0]
    kenny.sql("UPDATE audit_chain SET digest = ? WHERE seq = ?", ("0" * 64, seq))
    assert_broken(kenny, f"event {seq} (row {row})")


def verify_json(kenny) -> str:
    argv = [str(SERVER_BIN), "audit", "verify", "--json", "--data-dir", str(kenny.data_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=_child_env(kenny.store_env()))
    assert done.returncode == 0, done
    return done.stdout


async def test_the_newest_writes_cannot_be_cut_off_below_a_checkpoint(kenny):
    await _calls(kenny, 3)
    last_seq = await signed_head(kenny)
    last_row = kenny.sql("SELECT audit_id FROM audit_chain WHERE seq = ?", (last_seq,))[0][0]
    kenny.sql("DELETE FROM audit_chain WHERE seq = ?", (last_seq,))
    kenny.sql("DELETE FROM audit WHERE id = ?", (last_row,))
    assert_broken(kenny, "the newest writes were deleted")


async def test_a_range_exports_with_its_events_and_checkpoints(kenny):
    ids = await _calls(kenny, 3)
    await signed_head(kenny)
    out = subprocess.run(
        [str(SERVER_BIN), "audit", "export", "--from-id", str(ids[0]), "--to-id", str(ids[1]), "--data-dir", str(kenny.data_dir)],
        capture_output=True, text=True, timeout=60, env=_child_env(kenny.store_env()),
    )
    assert out.returncode == 0, out
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    rows = [entry for entry in lines if "row" in entry]
    assert [r["row"]["id"] for r in rows] == [i for i in range(ids[0], ids[1] + 1)], rows
    assert all(r["event"]["digest"] and r["event"]["hash"] for r in rows), rows
    assert all(json.loads(r["row"]["proof"])["agent_id"] == "pc-a" for r in rows if r["row"]["tool"] == "shell_exec")
    assert any("checkpoint" in entry and entry["checkpoint"]["sig"] for entry in lines), lines
