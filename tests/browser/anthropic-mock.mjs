// A local, scripted stand-in for the Anthropic Messages API for the browser tests: the
// same wire format and the same tiny deterministic "model" as tests/e2e/anthropic_mock.py.
import http from "node:http";

export const API_KEY = "sk-ant-test-kenny";

function reply(body) {
  const last = body.messages[body.messages.length - 1];
  const content = last.content;
  if (Array.isArray(content) && content[0]?.type === "tool_result") {
    const texts = content.flatMap((r) => (Array.isArray(r.content) ? r.content : [{ type: "text", text: r.content }]))
      .filter((p) => p.type === "text").map((p) => p.text);
    return [{ type: "text", text: "Result: " + texts.join(" | ").slice(0, 400) }];
  }
  const text = typeof content === "string" ? content : content.filter((c) => c.type === "text").map((c) => c.text).join(" ");
  if (text.startsWith("call ")) {
    const rest = text.slice(5);
    const space = rest.indexOf(" ");
    const tool = space < 0 ? rest : rest.slice(0, space);
    const input = space < 0 ? {} : JSON.parse(rest.slice(space + 1));
    return [{ type: "text", text: `Calling ${tool}.` }, { type: "tool_use", id: `toolu_${Date.now()}_${Math.random().toString(16).slice(2)}`, name: tool, input }];
  }
  return [{ type: "text", text: "Hello from the scripted model." }];
}

export async function startAnthropicMock() {
  const requests = [];
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => { raw += c; });
    req.on("end", () => {
      if (req.url !== "/v1/messages" || req.headers["x-api-key"] !== API_KEY) {
        res.writeHead(401, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }));
        return;
      }
      const body = JSON.parse(raw);
      requests.push(body);
      const blocks = reply(body);
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "close" });
      const send = (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      send("message_start", { type: "message_start", message: { id: "msg_mock", type: "message", role: "assistant", content: [], model: body.model } });
      blocks.forEach((block, index) => {
        if (block.type === "text") {
          send("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } });
          for (let i = 0; i < block.text.length; i += 7) {
            send("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: block.text.slice(i, i + 7) } });
          }
        } else {
          send("content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: block.id, name: block.name, input: {} } });
          send("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } });
        }
        send("content_block_stop", { type: "content_block_stop", index });
      });
      const stop = blocks.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn";
      send("message_delta", { type: "message_delta", delta: { stop_reason: stop }, usage: { output_tokens: 5 } });
      send("message_stop", { type: "message_stop" });
      res.end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return { baseUrl: `http://127.0.0.1:${port}`, requests, close: () => new Promise((r) => server.close(r)) };
}
