// A process extension written in plain Node.js from docs/extension-protocol.md alone (no SDK):
// a tool `shout` and an engine `node-echo` that calls it, then answers with what it returned.
// NODE_ECHO_MODE: "garbage" writes a non-JSON line to stdout before answering initialize;
// "collide" names its tool `read`, as a built-in tool is named; "crash" exits in the middle of
// the engine's stream, after its first words; "bad-schema" gives its tool a schema that requires
// a property it does not define.
import { createInterface } from "node:readline";

const mode = process.env.NODE_ECHO_MODE || "";
const toolName = mode === "collide" ? "read" : "shout";
const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");

function manifest() {
  return {
    manifest: {
      id: "node-echo", name: "Node echo", version: "0.1.0", api_version: "0.1.0",
      description: "A tool and an engine in Node.js",
      provides: [{ ToolProvider: "node-echo" }, { InferenceEngine: "node-echo" }],
      required_capabilities: [],
    },
    services: {
      tools: [{ name: toolName, description: "Shout the text back in capitals.",
                inputSchema: { type: "object", properties: { text: { type: "string" } }, required: mode === "bad-schema" ? ["txt"] : ["text"] },
                readOnly: true }],
      inferenceEngines: [{ id: "node-echo", name: "Node echo", defaultModel: "echo-1", models: [{ id: "echo-1", contextWindow: 8000 }] }],
    },
  };
}

function stream(id, params) {
  const event = (e) => send({ method: "engine/event", params: { streamId: params.streamId, event: e } });
  const messages = params.request.messages || [];
  const results = messages.flatMap((m) => (m.parts || []).filter((p) => p.type === "tool_result"));
  if (results.length === 0) {
    const prompt = messages.flatMap((m) => (m.parts || []).filter((p) => p.type === "text")).map((p) => p.text).join(" ");
    event({ type: "tool_call", callId: "c1", name: toolName, arguments: { text: prompt } });
    event({ type: "usage", usage: { inputTokens: 10, outputTokens: 3 } });
    event({ type: "completed", stopReason: "tool_use" });
  } else {
    const last = results[results.length - 1];
    event({ type: "message_delta", text: `The tool said: ${JSON.stringify(last)}` });
    event({ type: "completed", stopReason: "end_turn" });
  }
  send({ id, result: {} });
}

createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const message = JSON.parse(line);
  const { id, method, params } = message;
  if (method === "initialize") {
    if (mode === "garbage") process.stdout.write("node-echo starting up (this line is not JSON)\n");
    send({ id, result: manifest() });
  } else if (method === "tool/execute") {
    send({ method: "tool/output", params: { callId: params.callId, text: "shouting...\n" } });
    send({ id, result: { text: String(params.arguments.text).toUpperCase(), isError: false } });
  } else if (method === "engine/stream") {
    if (mode === "crash") {
      send({ method: "engine/event", params: { streamId: params.streamId, event: { type: "message_delta", text: "Half a" } } });
      console.error("node-echo: out of memory (pretend)");
      process.exit(9);
    }
    stream(id, params);
  } else if (id !== undefined && method) {
    send({ id, error: { code: -32601, message: `unknown method ${method}` } });
  }
});
