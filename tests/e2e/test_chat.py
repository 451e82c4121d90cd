"""The dashboard chat's settings as the real `kenny-server` binary takes them from its
environment (KENNY_ANTHROPIC_API_KEY, KENNY_ANTHROPIC_BASE_URL, KENNY_CHAT_MODEL,
KENNY_CHAT_DAILY_TOKENS), against a local scripted server that speaks the Anthropic
Messages API over real HTTP with streaming (tests/e2e/anthropic_mock.py). The chat's
logic (what runs at once and what is held, frozen targets, approve and deny, fences,
scope, restarts, daily limits, other people's conversations) is tested in Rust, in
`crates/kenny-server/tests/kit/chat.rs`, against the test kit's scripted model."""

from __future__ import annotations

import json

import httpx

from anthropic_mock import API_KEY, ScriptedAnthropic


def _events(response: httpx.Response) -> list[tuple[str, dict]]:
    """A whole SSE reply as (event name, data) pairs, keep-alive comments skipped."""
    assert response.status_code == 200, response.read()
    assert response.headers["content-type"].startswith("text/event-stream")
    events, name, data = [], None, []
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            events.append((name or "message", json.loads("\n".join(data))))
            name, data = None, []
    return events


async def test_the_server_binary_takes_the_chat_settings_from_its_environment(kenny):
    with ScriptedAnthropic() as model:
        port = kenny.port
        kenny.stop_server()
        kenny.start_server(port=port, env={
            "KENNY_ANTHROPIC_API_KEY": API_KEY,
            "KENNY_ANTHROPIC_BASE_URL": model.base_url,
            "KENNY_CHAT_MODEL": "claude-test",
            "KENNY_CHAT_DAILY_TOKENS": "100000",
        })
        headers = {"Authorization": f"Bearer {kenny.admin_pat}"}
        with httpx.Client(base_url=kenny.base_url, headers=headers, timeout=60) as http:
            status = http.get("/api/chat/status").json()
            assert (status["enabled"], status["model"], status["message"]) == (True, "claude-test", None), status
            assert status["usage"]["daily_limit"] == 100000, status
            r = http.post("/api/chat/sessions", json={})
            assert r.status_code == 201, r.text
            with http.stream("POST", f"/api/chat/sessions/{r.json()['id']}/messages", json={"text": "hello"}) as reply:
                events = _events(reply)
            # The scripted model answers only requests that carry its key.
            assert "".join(d["text"] for n, d in events if n == "text") == "Hello from the scripted model.", events
            assert events[-1] == ("done", {"stop_reason": "end_turn"}), events
            assert [body["model"] for body in model.requests] == ["claude-test"]
            assert http.get("/api/chat/status").json()["usage"]["turns"] == 1
