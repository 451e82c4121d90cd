"""A local, scripted stand-in for the Anthropic Messages API (the one part of kenny's
tests that cannot be the real thing here). It speaks the real wire format over real
HTTP: POST /v1/messages with `stream: true`, answered as server-sent events
(message_start, content_block_start/delta/stop with text and input_json deltas,
message_delta with the stop reason, message_stop).

Its "model" is a tiny deterministic script driven by the conversation, so concurrent
conversations each get answers about their own messages:
  - a user message `call <tool> <json input>` -> a tool_use block for that tool;
  - `call2 <tool> <json> | <tool> <json>` -> two tool_use blocks in one turn;
  - a user message of tool_results -> text "Result: " + what came back (first 400 chars),
    unless the results contain `DO: <tool> key=value ...` orders: then the model obeys them, one
    tool_use block per line (a model steered by what a PC wrote, as a hostile log line
    or web page could steer a real one);
  - `slow <seconds>` -> waits that long before answering (a reply in progress);
  - `hold` -> answers only once the test calls `release()` (a reply in flight for as
    long as the test needs, without guessing a duration);
  - `fail` -> reports its usage, then an `overloaded_error` mid-stream (a failed turn
    the API bills all the same);
  - anything else -> "Hello from the scripted model."
Every answer reports `usage` (input tokens: a quarter of the request's length, output
tokens: 10) the way the real API does, in message_start and message_delta. Every
request body is kept in `requests` for the test to inspect.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "sk-ant-test-kenny"


def _reply(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    content = last["content"]
    if isinstance(content, list) and content and content[0].get("type") == "tool_result":
        texts = []
        for result in content:
            parts = result["content"] if isinstance(result["content"], list) else [{"type": "text", "text": result["content"]}]
            texts.extend(p.get("text", "") for p in parts if p.get("type") == "text")
        orders = re.findall(r"DO: (\w+)((?: \w+=[^\s\"\\]+)*)", "\n".join(texts))
        if orders:
            return [{"type": "text", "text": "Doing as the PC says."}] + [
                {"type": "tool_use", "id": f"toolu_{id(body)}_do{n}", "name": tool,
                 "input": dict(pair.split("=", 1) for pair in raw.split())}
                for n, (tool, raw) in enumerate(orders)
            ]
        return [{"type": "text", "text": "Result: " + " | ".join(texts)[:400]}]
    text = content if isinstance(content, str) else " ".join(c.get("text", "") for c in content if c.get("type") == "text")
    if text.startswith("call2 "):
        blocks = [{"type": "text", "text": "Two calls."}]
        for n, part in enumerate(text[len("call2 "):].split("|")):
            tool, _, raw = part.strip().partition(" ")
            blocks.append({"type": "tool_use", "id": f"toolu_{id(body)}_{n}", "name": tool, "input": json.loads(raw or "{}")})
        return blocks
    if text.startswith("slow "):
        time.sleep(float(text.split()[1]))
        return [{"type": "text", "text": "Slowly, hello."}]
    if text == "hold":
        return [{"type": "text", "text": "Held, hello."}]
    if text.startswith("call "):
        tool, _, raw = text[len("call "):].partition(" ")
        return [
            {"type": "text", "text": f"Calling {tool}."},
            {"type": "tool_use", "id": f"toolu_{id(body)}_{threading.get_ident()}", "name": tool, "input": json.loads(raw or "{}")},
        ]
    return [{"type": "text", "text": "Hello from the scripted model."}]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802
        mock: ScriptedAnthropic = self.server.mock  # type: ignore[attr-defined]
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length))
        if self.path != "/v1/messages" or self.headers.get("x-api-key") != API_KEY or not self.headers.get("anthropic-version"):
            payload = json.dumps({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        with mock.lock:
            mock.requests.append(body)
        assert body.get("stream") is True, body
        said = _last_text(body)
        if said == "hold":
            mock.released.wait()
        blocks = _reply(body)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()

        def send(event: str, data: dict[str, Any]) -> None:
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        usage = {"input_tokens": length // 4, "output_tokens": 1}
        send("message_start", {"type": "message_start", "message": {"id": "msg_mock", "type": "message", "role": "assistant", "content": [], "model": body["model"], "usage": usage}})
        send("ping", {"type": "ping"})
        if said == "fail":
            send("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            self.close_connection = True
            return
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                send("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
                text = block["text"]
                for start in range(0, len(text), 7):  # stream in small pieces
                    send("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text[start:start + 7]}})
            else:
                send("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
                raw = json.dumps(block["input"])
                for start in range(0, len(raw), 5):
                    send("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": raw[start:start + 5]}})
            send("content_block_stop", {"type": "content_block_stop", "index": index})
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        send("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 10}})
        send("message_stop", {"type": "message_stop"})
        self.close_connection = True


def _last_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return " ".join(c.get("text", "") for c in content if c.get("type") == "text")


class ScriptedAnthropic:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.mock = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "ScriptedAnthropic":
        self.thread.start()
        return self

    def release(self) -> None:
        """Lets every `hold` reply, waiting or still to come, answer."""
        self.released.set()

    def __exit__(self, *exc: Any) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
